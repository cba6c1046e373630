"""The seam between the real-machine node agent (``processagent``: kubelet's lifecycle) and
what runs a container (acts): ``Runtime``, with two implementations, the process runtime
(``procs``: a child process of the agent) and the docker runtime (``dockerrt``: a container
of the Docker engine).

Both keep each container's lifecycle state in the agent's state dir (``Records``): per pod
``<state dir>/pods/<namespace>_<name>_<uid>/``, per container ``<container>/state.json``
(what ``podstatus.ContainerState`` holds: its process or container, restarts, back-off,
last termination) and ``pod.json`` (a stub of the pod: what stopping it needs once the pod
object is gone). An agent killed and started again reads them back and adopts what runs.
"""

from __future__ import annotations

import json
import logging
import os
import select
import shutil
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from services.node_agent.podstatus import ContainerState
from shared.api import metrics, podexec
from shared.api.podexec import ExecOptions
from shared.api.podlog import LogError, LogOptions

log = logging.getLogger("node-agent")
Obj = dict[str, Any]
LOOPBACK = "127.0.0.1"  # where a port of a pod on the host's network is reached


class Exit(NamedTuple):
    """How a container's process ended: its exit code and the signal that ended it (0:
    none); code -1 when nobody saw it end (the agent was away). ``reason`` overrides the
    one the code gives (OOMKilled)."""

    code: int
    signal: int = 0
    reason: str = ""


@dataclass(frozen=True)
class ImageError(Exception):
    """The container's image cannot be had: ``reason`` is kubelet's waiting reason
    (ErrImagePull, ErrImageNeverPull, InvalidImageName)."""

    reason: str
    message: str


class ExecSession(Protocol):
    """A command run in a running container for a caller (``kubectl exec``): its output is
    pumped to the caller, the caller's input and terminal size are passed to it."""

    def pump(self, send: Callable[[int, bytes], None]) -> None:
        """Send the command's output, ``(channel, data)`` (``podexec.STDOUT``/``STDERR``),
        until it has none left (it ended, or closed its output)."""

    def write_stdin(self, data: bytes) -> None: ...

    def close_stdin(self) -> None: ...

    def resize(self, width: int, height: int) -> None:
        """The caller's terminal changed size (a tty session only)."""

    def wait(self) -> int:
        """The command's exit code, once it has ended (128 + the signal that ended it)."""

    def kill(self) -> None:
        """End the command and what it started (the caller went away, the container ended)."""


class FollowedAttach:
    """A caller attached to a running container (``ExecSession``): the container's output
    from now on (its log followed), as exec's stdout, until the caller goes or the container
    stops (either kills it); with ``pipe`` (the named pipe a process reads as its input) what
    the caller types is written there, else it is dropped; with ``sizes`` (the named pipe
    that sizes its terminal) the caller's terminal size is written there. The end of the
    caller's input is not the container's: it stays open for the next caller (no
    ``stdinOnce``)."""

    def __init__(self, rt: Runtime, pod: Obj, container: str, run: int, opts: ExecOptions,
                 pipe: Path | None = None, sizes: Path | None = None) -> None:
        self.stop = threading.Event()
        self.chunks = rt.logs(pod, container, run, LogOptions(
            follow=True, tail_lines=0), self.stop) if opts.stdout or opts.stderr else iter(())
        self.pipe = pipe
        self.sizes = sizes
        self._fd = -1

    def pump(self, send: Callable[[int, bytes], None]) -> None:
        for chunk in self.chunks:
            send(podexec.STDOUT, chunk)
        self.stop.wait()  # (with no output asked for: until the caller or the container goes)

    def write_stdin(self, data: bytes) -> None:
        """Acts: ``data`` into the pipe, as fast as the process reads it (dropped once the
        session is over, or when the pipe is gone with its run)."""
        if self.pipe is None:
            return
        try:
            if self._fd < 0:
                self._fd = os.open(self.pipe, os.O_WRONLY | os.O_NONBLOCK)
            view = memoryview(data)
            while view and not self.stop.is_set():
                if select.select([], [self._fd], [], 0.2)[1]:
                    try:
                        view = view[os.write(self._fd, view):]
                    except BlockingIOError:
                        continue
        except OSError:
            self.pipe = None

    def close_stdin(self) -> None:
        pass

    def resize(self, width: int, height: int) -> None:
        """Acts: the line ``COLUMNS ROWS`` into the terminal's pipe (dropped when no
        terminal reads it: its run is over)."""
        if self.sizes is None:
            return
        try:
            fd = os.open(self.sizes, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            return
        try:
            os.write(fd, f"{width} {height}\n".encode())
        except OSError:
            pass
        finally:
            os.close(fd)

    def wait(self) -> int:
        return 0

    def kill(self) -> None:
        self.stop.set()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class Runtime(Protocol):
    """What the agent's lifecycle needs of a runtime, besides the records."""

    kind: str  # the containerID scheme: process, docker
    mounts: bool  # whether it mounts volumes in its containers (``configvolumes``)

    # ---- records (``Records``) -----------------------------------------------------------
    def pod_dir(self, pod: Obj) -> Path: ...
    def save(self, pod_dir: Path, c: ContainerState) -> None: ...
    def save_pod(self, pod_dir: Path, pod: Obj) -> None: ...
    def pod_stub(self, pod_dir: Path) -> Obj | None: ...
    def recorded(self) -> dict[str, dict[str, ContainerState]]: ...
    def pod_dirs(self) -> dict[str, Path]: ...

    def forget(self, pod_dir: Path) -> None:
        """The pod is gone and nothing of it runs: remove what is left of it."""

    # ---- containers ----------------------------------------------------------------------
    def version(self) -> str:
        """nodeInfo.containerRuntimeVersion."""

    def refresh(self) -> set[str]:
        """Read what runs now, once per round of the agent (before ``exited`` and friends);
        the uids of the pods whose sandbox changed (their containers killed, to start again
        in a new one)."""

    def base_env(self) -> dict[str, str]:
        """The environment every container starts from (before its ``env``)."""

    def argv(self, container: Obj, env: dict[str, str]) -> list[str]:
        """command + args, expanded; ConfigError when they cannot run."""

    def image_ready(self, container: Obj) -> str | None:
        """Is the container's image here (pulled if its imagePullPolicy says so)? None
        while a pull is under way, else what kubelet's Pulled event says of it (empty: the
        runtime has no images); ImageError when it cannot be had."""

    def check_config(self, pod: Obj, container: Obj) -> None:
        """Once its image is here: ConfigError when the container cannot be run as its spec
        asks with that image (``runAsNonRoot`` and an image that runs as root, say)."""

    def start(self, pod_dir: Path, pod: Obj, container: Obj, c: ContainerState,
              words: list[str], env: dict[str, str]) -> None:
        """Start ``c`` (run number ``c.restart_count``); it gets its pid or container id.
        OSError when it cannot be started."""

    def find_started(self, pod_dir: Path, c: ContainerState) -> None:
        """For a container recorded as being started when the agent died: record what was
        started, if anything was (else it will be, once)."""

    def is_ours(self, c: ContainerState) -> bool:
        """Does the recorded process or container still run?"""

    def exited(self, c: ContainerState) -> Exit | None:
        """How ``c`` ended, when it has; None while it runs."""

    def signal(self, c: ContainerState, sig: int) -> None:
        """Send ``sig`` to ``c``'s process (group), if it still runs."""

    def exec_probe(self, c: ContainerState, words: list[str], env: dict[str, str], cwd: str,
                   timeout: float) -> tuple[bool, str]:
        """Run an exec probe's command as the container would (its environment, working
        directory, user): whether it exited 0 within ``timeout``, and what kubelet's prober
        says of it (its output, at most ``probes.EXEC_OUTPUT_MAX`` bytes; ``command "..."
        timed out``)."""

    def exec(self, c: ContainerState, env: dict[str, str], cwd: str,
             opts: ExecOptions) -> ExecSession:
        """Run ``opts.command`` in the running container ``c`` as its own processes run (its
        environment, working directory, user), with the streams ``opts`` asks for and a
        terminal when ``opts.tty``. OSError (its message the caller's) when it cannot be
        run."""

    def attach(self, pod: Obj, c: ContainerState, run: int,
               opts: ExecOptions) -> ExecSession | None:
        """An attach to the running container ``c`` (run ``run``) of ``pod`` that passes the
        caller's input on (its ``stdin`` kept open); None when the container reads none
        (the caller then follows its output alone, ``FollowedAttach``). OSError when it
        cannot attach."""

    def on_host_network(self, pod: Obj) -> bool:
        """Whether ``pod`` is on the node's network (its IP the node's)."""

    def dns_fallback(self, pod: Obj) -> bool:
        """Whether ``pod`` asks for the cluster's DNS and gets the host's for want of one
        (``dns.fallback``: kubelet's MissingClusterDNS); a runtime whose pods always use
        the host's resolver says no."""

    def sandbox(self, pod: Obj) -> None:
        """Acts: make the sandbox of a pod off the node's network when it has none running
        (it holds the namespaces its containers share and has the pod's IP before any of
        them starts); a runtime without sandboxes does nothing. OSError when it cannot be
        made."""

    def pod_ip(self, pod: Obj, containers: list[ContainerState]) -> str:
        """The IP of a pod off the node's network once known from what runs, else ""."""

    def forward_host(self, pod: Obj, containers: list[ContainerState]) -> str:
        """Where the agent connects to reach a port of the pod (``kubectl port-forward``):
        the loopback address when the pod shares the host's network, else its own IP; ""
        while no container of it runs (or its IP is not known yet)."""

    def usage(self, containers: list[ContainerState]) -> dict[str, metrics.Sample]:
        """What the running ``containers`` have used (by container id): their CPU time so
        far and their memory working set now; a container that cannot be measured is left
        out. Called on the agent's sampler thread."""

    def sweep(self, known: set[str]) -> None:
        """Remove what this node's runtime runs for pods not in ``known`` (uids) and not in
        the records (a state dir lost)."""

    def logs(self, pod: Obj, container: str, run: int, opts: LogOptions,
             stop: threading.Event | None = None) -> Iterator[bytes]:
        """The output of run ``run`` of ``container`` of ``pod`` (its metadata: namespace,
        name, uid) as ``opts`` ask: the last ``tail_lines`` lines, of those the ones at or
        after ``podlog.since``, each prefixed with its time with ``timestamps``, at most
        ``limit_bytes`` (prefixes counted), with ``follow`` (not with ``previous``) what it
        writes next until the run ends or ``stop`` is set. OSError when this node has no log
        of that run, LogError (upstream's text) for a previous run the runtime does not keep,
        or for options it cannot serve (``podlog.untimed``); either may come with the first
        chunk."""


# kubelet's bounds of a termination message: the file's first 4 KiB; from the log, its last
# 80 lines, at most 2 KiB of them
MESSAGE_FILE_BYTES = 4096
MESSAGE_LOG_LINES = 80
MESSAGE_LOG_BYTES = 2048


def termination_file(pod_dir: Path, container: str) -> Path:
    """The file a runtime that mounts one gives a container at its
    ``terminationMessagePath`` (emptied at each start), where it may say why it ended."""
    return pod_dir / container / "termination-log"


def termination_message(rt: Runtime, pod_dir: Path, pod: Obj, container: Obj,
                        c: ContainerState, exit_code: int) -> str:
    """What kubelet puts in the terminated state's ``message`` of the run of ``c`` that
    ended with ``exit_code``: its termination file's first 4 KiB (a runtime that mounts one);
    when that says nothing, the run ended in error and ``terminationMessagePolicy`` is
    ``FallbackToLogsOnError``, the last 80 lines of its log, at most 2 KiB of them. Acts
    (reads)."""
    try:
        with open(termination_file(pod_dir, c.name), "rb") as f:
            said = f.read(MESSAGE_FILE_BYTES)
    except OSError:
        said = b""
    if not said and exit_code != 0 and \
            container.get("terminationMessagePolicy") == "FallbackToLogsOnError":
        try:
            said = b"".join(rt.logs(pod, c.name, c.restart_count,
                                    LogOptions(tail_lines=MESSAGE_LOG_LINES)))
        except (OSError, LogError):
            said = b""
        said = said[-MESSAGE_LOG_BYTES:]
    return said.decode(errors="replace")


def pod_dir(state_dir: Path, pod: Obj) -> Path:
    """Where an agent with ``state_dir`` keeps a pod's container records (and logs)."""
    md = pod.get("metadata") or {}
    return state_dir / "pods" / f"{md.get('namespace')}_{md.get('name')}_{md.get('uid')}"


def _write_json(path: Path, data: object) -> None:
    """Write ``path`` whole or not at all (a crash leaves the old file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


class Records:
    """The containers' records in the state dir (both runtimes keep theirs here)."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        (state_dir / "pods").mkdir(parents=True, exist_ok=True)

    def pod_dir(self, pod: Obj) -> Path:
        return pod_dir(self.state_dir, pod)

    def save(self, pod_dir: Path, c: ContainerState) -> None:
        _write_json(pod_dir / c.name / "state.json", c.to_record())

    def save_pod(self, pod_dir: Path, pod: Obj) -> None:
        """What stopping the pod's containers needs once the pod object is gone: its name
        and grace period (``pod.json``, a stub of the pod)."""
        md = pod.get("metadata") or {}
        stub = {"metadata": {k: md.get(k) for k in ("name", "namespace", "uid")},
                "spec": {"terminationGracePeriodSeconds":
                         (pod.get("spec") or {}).get("terminationGracePeriodSeconds")}}
        _write_json(pod_dir / "pod.json", stub)

    def pod_stub(self, pod_dir: Path) -> Obj | None:
        try:
            stub = json.loads((pod_dir / "pod.json").read_text())
        except (OSError, ValueError):
            return None
        return stub if isinstance(stub, dict) else None

    def recorded(self) -> dict[str, dict[str, ContainerState]]:
        """Every pod dir's containers: pod uid → container name → state (unreadable records
        are skipped with a warning)."""
        out: dict[str, dict[str, ContainerState]] = {}
        for pod_dir in sorted((self.state_dir / "pods").iterdir()):
            uid = pod_dir.name.rsplit("_", 1)[-1]
            for f in sorted(pod_dir.glob("*/state.json")):
                try:
                    c = ContainerState.from_record(json.loads(f.read_text()))
                except (OSError, ValueError, TypeError) as err:
                    log.warning("unreadable container record %s: %s", f, err)
                    continue
                out.setdefault(uid, {})[c.name] = c
        return out

    def pod_dirs(self) -> dict[str, Path]:
        return {d.name.rsplit("_", 1)[-1]: d for d in (self.state_dir / "pods").iterdir()}

    def forget(self, pod_dir: Path) -> None:
        shutil.rmtree(pod_dir, ignore_errors=True)

