"""``kubectl exec`` and ``kubectl cp`` with the real kubectl, through the API server (a
WebSocket, ``v5.channel.k8s.io``), relayed to the exec endpoint of a process runtime's node
agent: the container's environment, working directory and user; stdout and stderr apart;
stdin; sessions at once, megabytes both ways; the command's exit code as kubectl's; a
terminal with its size; upstream's errors; who may; the command killed when the caller goes
away and when its container stops; the endpoint refuses callers without its token; ``kubectl
attach`` to a process's output, its input, and its own terminal."""

from __future__ import annotations

import concurrent.futures
import fcntl
import hashlib
import os
import pty
import select
import struct
import subprocess
import termios
import time
from pathlib import Path
from typing import Any

import psutil
from kubernetes import client, config
from kubernetes.stream import stream

from shared.model import meta
from tests.integration.apiserver_kit import ApiServer
from tests.integration.controller_kit import daemonset as daemonset_of
from tests.integration.stack import wait_for
from tests.integration.test_node_agent_process import Machine, container_status, machine
from tests.integration.test_pod_logs import refuses_without_its_token, running_pod

__all__ = ["machine"]  # the fixture, shared with the process runtime's tests


def daemonset(m: Machine) -> dict[str, Any]:
    return daemonset_of("shell", pod={
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "app", "image": "none",
                        # (the directory: the fixture's mark of what is ours)
                        "command": ["sh", "-c", "sleep 100000; true", str(m.dir)],
                        "env": [{"name": "GREETING", "value": "hello there"}],
                        "workingDir": str(m.dir)}]})


def started(machine: Machine, tmp_path: Path) -> tuple[ApiServer, dict[str, Any]]:
    """A stack, one process agent, the API server, and the pod running."""
    api, _node, pod = running_pod(machine, tmp_path, daemonset(machine))
    return api, pod


def execs(machine: Machine, marker: str) -> list[psutil.Process]:
    """The live processes of commands run with ``marker`` in their words (not the kubectl
    that asked for one: its words name them too, before the command runs)."""
    return [p for p in machine.processes()
            if any(marker in w for w in p.info["cmdline"] or [])
            and not Path(p.info["cmdline"][0]).name.startswith("kubectl")]


def test_kubectl_exec_and_cp_run_in_the_container(machine: Machine, tmp_path: Path) -> None:
    api, pod = started(machine, tmp_path)
    name = meta.name(pod)
    # (the class the registry gave it, kept through the agent's status writes)
    assert pod["status"]["qosClass"] == "BestEffort"
    ran = api.kubectl("exec", name, "--", "sh", "-c",
                      'echo "$GREETING"; pwd; id -un; echo oops >&2')
    assert ran.stdout == f"hello there\n{machine.dir}\nnobody\n"
    assert ran.stderr == "oops\n"
    assert api.kubectl("exec", f"pod/{name}", "-c", "app", "-i", "--", "tr", "a-z", "A-Z",
                       input="quiet input\n").stdout == "QUIET INPUT\n"

    # what a command writes at once reaches kubectl (client-go makes its streams after the
    # upgrade and drops what comes for one it has not made yet)
    for i in range(12):
        quick = api.kubectl("exec", name, "--", "sh", "-c", f"echo {i} >&2; echo {i}")
        assert (quick.stdout, quick.stderr) == (f"{i}\n", f"{i}\n")
    failed = api.kubectl("exec", name, "--", "sh", "-c", "exit 7", check=False)
    assert failed.returncode == 7
    assert "command terminated with exit code 7" in failed.stderr
    missing = api.kubectl("exec", name, "--", "no-such-command", check=False)
    assert missing.returncode != 0
    assert ('error executing command in container: exec: "no-such-command": executable '
            "file not found in $PATH") in missing.stderr
    no_file = api.kubectl("exec", name, "--", "/no/such/file", check=False)
    assert 'exec: "/no/such/file": stat /no/such/file: no such file or directory' in \
        no_file.stderr, no_file.stderr
    wrong = api.kubectl("exec", name, "-c", "nope", "--", "true", check=False)
    assert wrong.returncode != 0
    assert f"container nope is not valid for pod {name}" in wrong.stderr

    # edit may run commands, view may not
    assert api.kubectl("exec", name, "--", "true", user="editor").returncode == 0
    refused = api.kubectl("exec", name, "--", "true", user="viewer", check=False)
    assert refused.returncode != 0
    assert (f'pods "{name}" is forbidden: User "viewer" cannot create resource "pods/exec" '
            'in API group "" in the namespace "default"') in refused.stderr

    # the official Python client's stream(), with the v4 protocol too (no close of stdin)
    for protocol in ("v5.channel.k8s.io", "v4.channel.k8s.io"):
        api_client = config.new_client_from_config(config_file=str(api.kubeconfig()))
        api_client.set_default_header("sec-websocket-protocol", protocol)
        resp = stream(client.CoreV1Api(api_client).connect_get_namespaced_pod_exec, name,
                      "default", command=["sh", "-c", "echo out; echo err >&2; exit 4"],
                      stdout=True, stderr=True, stdin=False, tty=False,
                      _preload_content=False, _request_timeout=60)
        assert resp.subprotocol == protocol
        resp.run_forever(timeout=60)
        assert (resp.read_stdout(), resp.read_stderr()) == ("out\n", "err\n")
        assert resp.returncode == 4
        # its stdin (text, which it sends as text messages)
        resp = stream(client.CoreV1Api(api_client).connect_get_namespaced_pod_exec, name,
                      "default", command=["head", "-n", "1"], stdout=True, stderr=True,
                      stdin=True, tty=False, _preload_content=False, _request_timeout=60)
        resp.write_stdin("first line\nsecond\n")
        resp.run_forever(timeout=60)
        assert (resp.read_stdout(), resp.returncode) == ("first line\n", 0)

    # kubectl cp is tar through exec, both ways
    (tmp_path / "up.txt").write_text("copied in\n")
    api.kubectl("cp", str(tmp_path / "up.txt"), f"{name}:{machine.dir}/in.txt")
    assert (machine.dir / "in.txt").read_text() == "copied in\n"
    api.kubectl("cp", f"{name}:{machine.dir}/in.txt", str(tmp_path / "down.txt"))
    assert (tmp_path / "down.txt").read_text() == "copied in\n"


def test_sessions_at_once_carry_megabytes_both_ways(machine: Machine,
                                                    tmp_path: Path) -> None:
    """Eight ``kubectl exec -i -- cat`` at once, over a WebSocket and over SPDY, each sending
    4 MB while it reads them back: each gets exactly what it sent, and exits 0."""
    api, pod = started(machine, tmp_path)
    name = meta.name(pod)
    spdy = {"KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "false"}

    def round_trip(i: int) -> tuple[int, bool, str]:
        data = os.urandom(4 << 20)
        proc = api.popen("exec", "-i", name, "--", "cat", env=spdy if i % 2 else None,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
        try:
            out, err = proc.communicate(data, timeout=120)
        finally:
            proc.kill()
        same = hashlib.sha256(out).digest() == hashlib.sha256(data).digest()
        return proc.returncode, same, err.decode(errors="replace")

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(round_trip, range(8)))
    assert results == [(0, True, "")] * 8, results


def in_terminal(api: ApiServer, name: str, typed: bytes, until: bytes,
                more_env: dict[str, str] | None = None) -> tuple[bytes, int]:
    """``kubectl exec -it name -- sh`` on a terminal of 91 by 33: what it showed once it
    showed ``until`` after ``typed`` was typed, and kubectl's exit code."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 91, 0, 0))
    proc = api.popen("exec", "-it", name, "--", "sh", env=more_env, stdin=slave,
                     stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    seen = b""
    try:
        os.write(master, typed)
        deadline = time.monotonic() + 30
        while until not in seen:
            left = deadline - time.monotonic()
            assert left > 0, f"no {until!r} in what the terminal showed: {seen!r}"
            if select.select([master], [], [], left)[0]:
                try:
                    seen += os.read(master, 4096)
                except OSError:
                    break
        return seen, proc.wait(timeout=30)
    finally:
        proc.kill()
        os.close(master)


def test_kubectl_exec_with_a_terminal(machine: Machine, tmp_path: Path) -> None:
    api, pod = started(machine, tmp_path)
    seen, rc = in_terminal(api, meta.name(pod), b"echo term=$TERM; tty; stty size; exit 3\n",
                           b"33 91")
    assert b"term=xterm" in seen
    assert b"/dev/pts/" in seen
    assert rc == 3


def test_kubectl_exec_and_cp_over_spdy(machine: Machine, tmp_path: Path) -> None:
    """As kubectl before 1.30 asks (and any kubectl whose WebSocket is turned off or
    refused): the request upgraded to SPDY/3.1, remotecommand v4's streams."""
    api, pod = started(machine, tmp_path)
    name = meta.name(pod)
    spdy = {"KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "false"}
    ran = api.kubectl("exec", name, "-v=6", "--", "sh", "-c",
                      'echo "$GREETING"; echo oops >&2; exit 7', check=False, env=spdy)
    assert "101 Switching Protocols" in ran.stderr, ran.stderr  # (not a WebSocket's)
    assert ran.stdout == "hello there\n"
    assert "oops\n" in ran.stderr and "command terminated with exit code 7" in ran.stderr
    assert ran.returncode == 7
    data = "".join(f"line {i}\n" for i in range(200_000))  # its stdin, and its end
    assert api.kubectl("exec", "-i", name, "--", "wc", "-l", input=data,
                       env=spdy).stdout.strip() == "200000"
    missing = api.kubectl("exec", name, "--", "no-such-command", check=False, env=spdy)
    assert 'exec: "no-such-command": executable file not found in $PATH' in missing.stderr
    (tmp_path / "up.txt").write_text("copied in over SPDY\n")
    api.kubectl("cp", str(tmp_path / "up.txt"), f"{name}:{machine.dir}/spdy.txt", env=spdy)
    assert (machine.dir / "spdy.txt").read_text() == "copied in over SPDY\n"
    seen, rc = in_terminal(api, name, b"echo term=$TERM; stty size; exit 4\n", b"33 91",
                           more_env=spdy)
    assert b"term=xterm" in seen and rc == 4
    refused = api.kubectl("exec", name, "--", "true", user="viewer", check=False, env=spdy)
    assert 'cannot create resource "pods/exec"' in refused.stderr


def test_exec_ends_with_its_caller_and_with_its_container(machine: Machine,
                                                          tmp_path: Path) -> None:
    api, pod = started(machine, tmp_path)
    name = meta.name(pod)

    def kubectl_exec(*words: str, stdin: Any = None,
                     env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        return api.popen("exec", *(["-i"] if stdin else []), name, "--", *words, env=env,
                         stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    # the caller goes away (also while its input waits for a command that reads none, over
    # a WebSocket or SPDY): its command is killed
    spdy = {"KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "false"}
    with open("/dev/zero", "rb") as zeros:
        for marker, stdin, env in (("301", None, None), ("303", zeros, None),
                                   ("304", zeros, spdy)):
            caller = kubectl_exec("sh", "-c", f"sleep {marker}; true", str(machine.dir),
                                  stdin=stdin, env=env)
            try:
                wait_for(lambda m=marker: execs(machine, m), what="the command running")
                caller.kill()
                wait_for(lambda m=marker: not execs(machine, m),
                         what=f"the command {marker} killed")
            finally:
                caller.kill()

    # the container stops: its command ends with it, as 137
    caller = kubectl_exec("sh", "-c", "sleep 302; true", str(machine.dir))
    try:
        wait_for(lambda: execs(machine, "302"), what="the command running")
        api.kubectl("delete", "pod", name, "--wait=false")
        assert caller.wait(timeout=60) == 137
        assert caller.stderr is not None
        assert "command terminated with exit code 137" in caller.stderr.read().decode()
        assert not execs(machine, "302")
    finally:
        caller.kill()

    # the agent's endpoint runs nothing for a caller without its token
    node = api.stack.store.get("Node", f"/{pod['spec']['nodeName']}")
    port = node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
    refuses_without_its_token(
        f"https://{machine.ips[pod['spec']['nodeName']]}:{port}/exec/default/{name}/app"
        f"?uid={meta.uid(pod)}&command=touch&command={machine.dir}/forged&stdout=1", "POST")
    assert not (machine.dir / "forged").exists()

    # the agent gone: kubectl says so (its WebSocket refused, it tries SPDY, whose refusal is
    # the one it shows: the same words, not a complaint about the protocol)
    def replaced() -> dict[str, Any] | None:
        pods = [p for p in api.stack.pods("default") if meta.uid(p) != meta.uid(pod)
                and not meta.is_being_deleted(p) and (p.get("spec") or {}).get("nodeName")]
        return pods[0] if pods else None

    again = wait_for(replaced, timeout=60, what="the pod made again")
    api.stack.kill(f"agent-{pod['spec']['nodeName']}")
    gone = api.kubectl("exec", meta.name(again), "--", "true", check=False)
    assert gone.returncode != 0
    assert f"the exec endpoint https://{machine.ips[pod['spec']['nodeName']]}:{port} cannot " \
        "be reached" in gone.stderr, gone.stderr


def ticking(m: Machine) -> dict[str, Any]:
    """A container that says a numbered line five times a second until a file appears in
    the directory (the fixture's mark of what is ours), then says bye and ends."""
    script = ('i=0; while [ ! -e "$0/stop" ]; do echo "tick $i"; i=$((i+1)); sleep 0.2; '
              'done; echo bye')
    return daemonset_of("ticker", pod={
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "app", "image": "none",
                        "command": ["sh", "-c", script, str(m.dir)]}]})


def test_kubectl_attach_follows_the_containers_output(machine: Machine,
                                                      tmp_path: Path) -> None:
    """kubectl attach: the running container's output from then on (not what it said
    before), until the container ends; over SPDY too; edit may, view may not."""
    api, _node, pod = running_pod(machine, tmp_path, ticking(machine))
    name = meta.name(pod)
    wait_for(lambda: "tick 5" in api.kubectl("logs", name).stdout, what="five ticks")

    def attached(more_env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
        """kubectl attach running, and the first line it showed."""
        proc = api.popen("attach", name, user="editor", env=more_env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        ready = select.select([proc.stdout], [], [], 30)[0]
        assert ready, "kubectl attach showed nothing"
        return proc, proc.stdout.readline()

    for more_env in ({}, {"KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "false"}):
        proc, first = attached(more_env)
        try:
            assert first.startswith("tick ") and int(first.split()[1]) >= 5, first
        finally:
            proc.kill()
            proc.wait(timeout=30)

    proc, first = attached({})
    (machine.dir / "stop").touch()
    out, err = proc.communicate(timeout=30)  # it ends with the container
    assert proc.returncode == 0, err
    assert (first + out).rstrip().endswith("bye"), first + out

    refused = api.kubectl("attach", name, user="viewer", check=False)
    assert refused.returncode != 0
    assert (f'pods "{name}" is forbidden: User "viewer" cannot create resource "pods/attach" '
            'in API group "" in the namespace "default"') in refused.stderr


def test_kubectl_attach_i_writes_to_a_process_that_keeps_its_input_open(
        machine: Machine, tmp_path: Path) -> None:
    """stdin: true: the process reads a pipe its log writer holds open, and ``kubectl attach
    -i`` writes the caller's input there; the answer comes back as the container's output,
    and the end of one caller's input is not the container's: the next caller goes on."""
    ds = daemonset_of("reader", pod={
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "app", "image": "none", "stdin": True, "command": [
            "sh", "-c", 'while read line; do echo "got $line"; '
            '[ "$line" = bye ] && exit 0; done; echo "input ended"', str(machine.dir)]}]})
    api, _node, pod = running_pod(machine, tmp_path, ds)
    name = meta.name(pod)
    first = api.popen("attach", "-i", name, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE, text=True)
    assert first.stdin is not None and first.stdout is not None
    try:
        first.stdin.write("hello\n")
        first.stdin.close()  # this caller's input ends here
        assert select.select([first.stdout], [], [], 30)[0], "kubectl attach showed nothing"
        assert first.stdout.readline() == "got hello\n"
    finally:
        first.kill()
        first.wait(timeout=30)
    out = api.kubectl("attach", "-i", name, input="bye\n", timeout=60)  # ends with it
    assert out.stdout.splitlines()[-1:] == ["got bye"], (out.stdout, out.stderr)

    def restarted() -> bool:
        pods = api.stack.pods("default")
        return bool(pods) and container_status(pods[0]).get("restartCount", 0) >= 1

    wait_for(restarted, what="the container started again after its bye")
    assert api.kubectl("logs", "--previous", name).stdout == "got hello\ngot bye\n"


def test_kubectl_attach_it_gives_a_process_with_a_terminal_its_callers_size(
        machine: Machine, tmp_path: Path) -> None:
    """stdin and tty: true: the process's input and output are a terminal of its own (its
    log writer's session's), what ``kubectl attach -it`` types reaches it, the caller's
    terminal size is its size, and its output, a prompt's too, comes back as it comes. The
    interactive shell, in a process group of its own (job control), still goes with its
    pod."""
    ds = daemonset_of("console", pod={
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "app", "image": "none", "stdin": True, "tty": True,
                        "command": ["sh", "-s", str(machine.dir)]}]})
    api, _node, pod = running_pod(machine, tmp_path, ds)
    name = meta.name(pod)
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 91, 0, 0))
    proc = api.popen("attach", "-it", name, stdin=slave, stdout=slave, stderr=slave,
                     start_new_session=True)
    os.close(slave)
    seen = b""

    def shown(typed: bytes, until: bytes, every: float = 0.5) -> None:
        """Types ``typed`` (again every ``every`` s) until the terminal shows ``until``."""
        nonlocal seen
        deadline = time.monotonic() + 30
        while until not in seen:
            left = deadline - time.monotonic()
            assert left > 0, f"no {until!r} in what the terminal showed: {seen!r}"
            os.write(master, typed)
            ends = time.monotonic() + min(every, left)
            while until not in seen and (wait := ends - time.monotonic()) > 0:
                if select.select([master], [], [], wait)[0]:
                    seen += os.read(master, 4096)

    try:
        # the size reaches the terminal once the attach is under way: asked until it shows
        shown(b"stty size\n", b"33 91")
        shown(b"echo term=$TERM; tty; echo done $((6*7))\n", b"done 42")
        assert b"term=xterm" in seen
        assert b"/dev/pts/" in seen
        # the shell's prompt (as the pod user) came before its line ended: what was typed
        # follows it
        assert b"\n$ echo term" in seen
    finally:
        proc.kill()
        proc.wait(timeout=30)
        os.close(master)
    logs = api.kubectl("logs", name).stdout
    assert "done 42" in logs and "33 91" in logs  # a terminal's output is its stdout
    assert len(machine.processes()) == 1
    machine.stack.store.delete("DaemonSet", "default/console")
    wait_for(lambda: not machine.stack.pods("default"), timeout=30, what="pods released")
    assert machine.processes() == []
