"""A pod's sandbox on the docker runtime (the image daemonbus-pause:local, for machines
without a registry; kubelet's is registry.k8s.io/pause): it holds the namespaces the pod's
containers join, doing nothing, until it is stopped (SIGTERM or SIGINT: exit 0). As PID 1
it reaps whatever children are handed to it."""

import os
import signal
import sys


def stop(signum: int, frame: object) -> None:
    sys.exit(0)


def reap(signum: int, frame: object) -> None:
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass


signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
signal.signal(signal.SIGCHLD, reap)
while True:
    signal.pause()
