"""``kubectl logs`` with the real kubectl, through the API server, proxied to the log endpoint
of a process runtime's node agent: the container asked for or the only one, an init
container, --tail, --limit-bytes, --timestamps, --since, --since-time, -f until the run
ends, --previous after a restart,
upstream's errors; the endpoint itself refuses callers without its token; ``daemonbus logs``
takes the same path."""

from __future__ import annotations

import re
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from shared.api import podlog
from shared.model import meta
from tests.integration.apiserver_kit import ApiServer
from tests.integration.controller_kit import daemonset as daemonset_of
from tests.integration.stack import wait_for
from tests.integration.test_node_agent_process import Machine, container_status, machine

__all__ = ["machine"]  # the fixture, shared with the process runtime's tests

APP = '''
import os, sys, time
d = sys.argv[1]
count = os.path.join(d, "runs")
n = int(open(count).read()) + 1 if os.path.exists(count) else 1
open(count, "w").write(str(n))
for i in range(1, 6):
    print(f"run {n} line {i}", flush=True)
while not os.path.exists(os.path.join(d, f"stop{n}")):
    time.sleep(0.05)
print(f"run {n} bye", flush=True)
sys.exit(1)
'''


def lines(run: int, bye: bool = False) -> str:
    return "".join(f"run {run} line {i}\n" for i in range(1, 6)) + (f"run {run} bye\n"
                                                                     if bye else "")


def daemonset(m: Machine) -> dict[str, Any]:
    (m.dir / "app.py").write_text(APP)
    (m.dir / "app.py").chmod(0o644)
    return daemonset_of("chatty", pod={
        "terminationGracePeriodSeconds": 1,
        "initContainers": [{"name": "setup", "image": "python:3", "command": [
            "python3", "-c", "print('setup done')", str(m.dir)]}],
        "containers": [{"name": "app", "image": "python:3",
                        "command": ["python3", str(m.dir / "app.py"), str(m.dir)]}]})


def first_run(api: ApiServer, name: str) -> None:
    """What kubectl shows of the first run of ``daemonset``'s pod ``name``: the only
    container's lines, ``-c``, the init container's, ``--tail``, ``--limit-bytes``."""
    wait_for(lambda: api.kubectl("logs", name).stdout == lines(1), what="the first lines")
    assert api.kubectl("logs", name, "-c", "app").stdout == lines(1)
    assert api.kubectl("logs", name, "-c", "setup").stdout == "setup done\n"
    assert api.kubectl("logs", f"pod/{name}", "--tail", "2").stdout == \
        "run 1 line 4\nrun 1 line 5\n"
    assert api.kubectl("logs", name, "--limit-bytes", "6").stdout == "run 1 "


STAMPED = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z) (.*\n)")


def stamped(api: ApiServer, *args: str) -> list[tuple[int, str]]:
    """``kubectl logs --timestamps`` with ``args``: each line's time (ns) and text, its
    prefix exactly kubelet's (RFC 3339 in UTC, nine digits of fraction, a space)."""
    out = []
    for line in api.kubectl("logs", "--timestamps", *args).stdout.splitlines(keepends=True):
        m = STAMPED.fullmatch(line)
        assert m is not None, f"not a line with kubelet's time prefix: {line!r}"
        out.append((podlog.parse_time(m[1]), m[2]))
    return out


def timed_first_run(api: ApiServer, name: str, began: int) -> str:
    """What kubectl shows of the first run of ``daemonset``'s pod ``name`` by time (it
    started after ``began``, ns, and has written its five lines): each line with its time
    (--timestamps; --limit-bytes counts the prefix), every line --since=1h, none --since
    1s once a second has passed, none --since-time a whole second after the last. Returns
    that --since-time, for ``timed_previous``."""
    times = stamped(api, name)
    assert "".join(text for _, text in times) == lines(1)
    assert all(began - 1000 <= t <= time.time_ns() for t, _ in times)  # (t: to the µs)
    assert [t for t, _ in times] == sorted(t for t, _ in times)
    first = api.kubectl("logs", name, "--timestamps", "--limit-bytes", "31").stdout
    assert STAMPED.fullmatch(first + "x\n") and podlog.parse_time(first[:-1]) == times[0][0]
    assert api.kubectl("logs", name, "--since", "1h").stdout == lines(1)
    # the container writes nothing more until told to end: a second on, none is that recent
    wait_for(lambda: api.kubectl("logs", name, "--since", "1s").stdout == "", interval=0.3,
             what="no line in the last second")
    cut = (times[-1][0] // podlog.SECOND + 1) * podlog.SECOND
    since_time = meta.format_time(cut / podlog.SECOND)
    assert api.kubectl("logs", name, "--since-time", since_time).stdout == ""
    return since_time


def timed_previous(api: ApiServer, name: str, since_time: str) -> None:
    """After the first run ended and the container restarted: of the previous run, the line
    written after ``since_time`` only, also of its last two lines (--tail first, then the
    since, as kubelet), with its time."""
    assert api.kubectl("logs", name, "-p", "--since-time", since_time).stdout == "run 1 bye\n"
    (t, text), = stamped(api, name, "-p", "--tail", "2", "--since-time", since_time)
    assert text == "run 1 bye\n"
    assert podlog.parse_time(since_time) <= t <= time.time_ns()


def running_pod(machine: Machine, tmp_path: Path, ds: dict[str, Any],
                ) -> tuple[ApiServer, str, dict[str, Any]]:
    """A stack with one process agent (its endpoint on a free port) and the API server, and
    ``ds``'s pod running there: the server, the node, the pod."""
    node, pod = agent_pod(machine, ds)
    api = ApiServer(machine.stack, tmp_path)
    api.start()
    return api, node, pod


def agent_pod(machine: Machine, ds: dict[str, Any], *agent_args: str,
              ) -> tuple[str, dict[str, Any]]:
    """A stack with one process agent (its endpoint on a free port; ``agent_args``: more of
    its options), and ``ds``'s pod running there: the node, the pod."""
    stack = machine.stack
    stack.start_all(workers=1, node_agent=False)
    node = sorted(machine.ips)[0]
    stack.start(f"agent-{node}", "node-agent", "--runtime", "process", "--node-name", node,
                "--node-ip", machine.ips[node], "--state-dir", str(machine.state / node),
                "--backoff-initial", "0.5", "--log-port", "0", *agent_args)
    stack.store.apply(ds)

    def running() -> dict[str, Any] | None:
        pods = stack.pods("default")
        cs = container_status(pods[0]) if pods else {}
        return pods[0] if (cs.get("state") or {}).get("running") else None

    return node, wait_for(running, timeout=60, what="the pod running")


def test_kubectl_logs_through_the_api_server_from_the_node_agent(machine: Machine,
                                                                  tmp_path: Path) -> None:
    stack = machine.stack
    began = time.time_ns()
    api, node, pod = running_pod(machine, tmp_path, daemonset(machine))
    name = meta.name(pod)
    port = stack.store.get("Node", f"/{node}")["status"]["daemonEndpoints"][
        "kubeletEndpoint"]["Port"]
    assert port > 0
    first_run(api, name)
    assert api.kubectl("logs", name, user="viewer").stdout == lines(1)
    bad = api.kubectl("logs", name, "-c", "nope", check=False)
    assert bad.returncode != 0
    assert f"container nope is not valid for pod {name}" in bad.stderr
    none = api.kubectl("logs", name, "--previous", check=False)
    assert none.returncode != 0
    assert f'previous terminated container "app" in pod "{name}" not found' in none.stderr
    # the log writer keeps each line's time
    since_time = timed_first_run(api, name, began)

    # -f follows the run until it ends
    follow = api.popen("logs", "-f", name, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    watchdog = threading.Timer(60, follow.kill)
    watchdog.start()
    try:
        assert follow.stdout is not None
        seen = "".join(follow.stdout.readline() for _ in range(5))
        assert seen == lines(1)
        (machine.dir / "stop1").touch()
        seen += follow.stdout.read()  # to the end of the stream: the run is over
        assert follow.wait() == 0  # (a kill by the watchdog is not 0)
    finally:
        watchdog.cancel()
        follow.kill()
    assert seen == lines(1, bye=True)

    def restarted() -> dict[str, Any] | None:
        p = stack.store.try_get("Pod", meta.key(pod)) or {}
        cs = container_status(p)
        return p if cs.get("restartCount") == 1 and (cs.get("state") or {}).get("running") \
            else None

    wait_for(restarted, timeout=60, what="the container restarted")
    timed_previous(api, name, since_time)
    wait_for(lambda: api.kubectl("logs", name).stdout == lines(2), what="the second run's lines")
    assert api.kubectl("logs", name, "--previous").stdout == lines(1, bye=True)
    assert api.kubectl("logs", name, "-p", "--tail", "1").stdout == "run 1 bye\n"

    # daemonbus logs asks the same endpoint (no --state-dir: nothing read from files here)
    def daemonbus(*args: str) -> str:
        res = subprocess.run([sys.executable, "-m", "services.cli.main", "logs", *args],
                             env=stack.env(), capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        return res.stdout

    assert daemonbus(f"pod/{name}") == lines(2)
    assert daemonbus(f"pod/{name}", "--previous") == lines(1, bye=True)

    # the endpoint answers only with its token
    refuses_without_its_token(f"https://{machine.ips[node]}:{port}/containerLogs/default/"
                              f"{name}/app?uid={meta.uid(pod)}&run=0")


def refuses_without_its_token(url: str, method: str = "GET") -> None:
    """The node agent's endpoint answers ``url`` 401 without a token and with a forged one."""
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    for token in (None, "Bearer forged"):
        req = urllib.request.Request(url, method=method,
                                     data=b"" if method == "POST" else None)
        if token:
            req.add_header("Authorization", token)
        try:
            urllib.request.urlopen(req, context=ctx, timeout=10)
            raise AssertionError(f"the endpoint answered {url} without its token")
        except urllib.error.HTTPError as err:
            assert err.code == 401
