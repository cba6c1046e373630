"""The node agent's process runtime with real processes: two agents on this machine (two
--node-name values, each with its own loopback address as node and pod IP, so their pods
can serve the same port), a DaemonSet of small HTTP servers, probes, restarts, rolling
updates, deletion and an agent killed mid-rollout.

Every process a test starts carries the test's own directory in its command line; the
fixture kills whatever is left of them, pass or fail."""

from __future__ import annotations

import contextlib
import itertools
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml

from services.node_agent import logshim
from shared.api import podlog
from shared.model import errors, meta
from shared.model.podutil import is_ready
from shared.store.server import free_port
from tests.integration.stack import Stack, wait_for

# (the docker runtime's tests run it too, with a "seed" file in its working directory)
SERVER = '''
import http.server, os, signal, sys
node, version, marks = os.environ["NODE_NAME"], sys.argv[1], os.environ["MARKS"]
seed = open("seed").read() if os.path.exists("seed") else ""

def mark(what):
    open(os.path.join(marks, f"{node}.{version}.{what}.{os.getpid()}"), "w").close()

class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = " ".join(w for w in (node, version, seed) if w).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

def term(*_):
    mark("term")
    os._exit(0)

signal.signal(signal.SIGTERM, term)
server = http.server.HTTPServer((os.environ["POD_IP"], int(os.environ["PORT"])), Handler)
mark("start")
print("serving", version, flush=True)
server.serve_forever()
'''

_ips = itertools.count(2)


@dataclass
class Machine:
    """What one test runs on: its directory (scripts, markers), its node IPs, its port."""

    stack: Stack
    dir: Path
    state: Path
    port: int
    ips: dict[str, str]

    def agent(self, node: str) -> None:
        self.stack.start(f"agent-{node}", "node-agent", "--runtime", "process",
                         "--node-name", node, "--node-ip", self.ips[node],
                         "--state-dir", str(self.state / node), "--backoff-initial", "0.5")

    def processes(self) -> list[psutil.Process]:
        """The live processes this test's pods started (their command lines name our dir)."""
        out = []
        for p in psutil.process_iter(["cmdline", "status"]):
            if p.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if any(str(self.dir) in str(w) for w in p.info["cmdline"] or []):
                out.append(p)
        return out

    def writers(self) -> list[psutil.Process]:
        """The log writers of this test's containers (their output a log file of its state),
        whose commands may name nothing of the test's."""
        out = []
        for p in psutil.process_iter(["cmdline"]):
            if logshim.__name__ in (p.info["cmdline"] or []):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{p.pid}/fd/1").startswith(str(self.state)):
                        out.append(p)
        return out

    def marks(self, what: str) -> list[str]:
        return sorted(f.name for f in self.dir.glob(f"marks/*.{what}.*"))

    def get(self, node: str) -> str:
        with urllib.request.urlopen(f"http://{self.ips[node]}:{self.port}/", timeout=2) as r:
            return str(r.read().decode())


@pytest.fixture
def machine(stack: Stack, tmp_path: Path) -> Iterator[Machine]:
    # containers run as nobody (the agent runs as root here): a directory they can read
    # and write, outside pytest's root-only tmp_path
    d = Path(tempfile.mkdtemp(prefix="daemonbus-proc-"))
    (d / "marks").mkdir()
    (d / "server.py").write_text(SERVER)
    for p in (d, d / "marks"):
        p.chmod(0o777)
    (d / "server.py").chmod(0o644)
    base = next(_ips)
    ips = {f"{stack.prefix}-a": f"127.0.{base}.2", f"{stack.prefix}-b": f"127.0.{base}.3"}
    port = free_port()
    m = Machine(stack, d, tmp_path / "state", port, ips)
    try:
        yield m
    finally:
        for name in [n for n in stack.procs if n.startswith("agent-")]:
            stack.kill(name)
        # each container's process group: its log writer and what its command started
        # (a writer the killed agent had just started may start its command only now)
        for p in m.writers() + m.processes():
            with contextlib.suppress(OSError, psutil.Error):
                os.killpg(os.getpgid(p.pid), signal.SIGKILL)
            with contextlib.suppress(psutil.Error):
                p.kill()
        shutil.rmtree(d, ignore_errors=True)


def daemonset(m: Machine, version: str, probe: bool = True, grace: int = 5,
              command: list[str] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "web", "image": "python:3",
        "command": command or ["python3", str(m.dir / "server.py")],
        "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "PORT", "value": str(m.port)},
                {"name": "MARKS", "value": str(m.dir / "marks")}],
    }
    if command is None:
        container["args"] = [version]
    if probe:
        container["ports"] = [{"name": "http", "containerPort": m.port}]
        container["startupProbe"] = {"tcpSocket": {"port": "http"}, "periodSeconds": 1,
                                     "failureThreshold": 30}
        container["readinessProbe"] = {"httpGet": {"path": "/", "port": m.port},
                                       "periodSeconds": 1}
    return yaml.safe_load(yaml.safe_dump({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"terminationGracePeriodSeconds": grace,
                                       "containers": [container]}}},
    }))


def container_status(pod: dict[str, Any]) -> dict[str, Any]:
    return ((pod.get("status") or {}).get("containerStatuses") or [{}])[0]


def said(stack: Stack, pod: dict[str, Any]) -> set[tuple[str, str, str]]:
    """The (type, reason, message) of the Events about ``pod``."""
    return {(e["type"], e["reason"], e["message"]) for e in stack.store.list("Event", "default")
            if e["involvedObject"].get("uid") == meta.uid(pod)}


def ready_pods(stack: Stack) -> dict[str, dict[str, Any]]:
    return {p["spec"]["nodeName"]: p for p in stack.pods("default")
            if is_ready(p) and not meta.is_being_deleted(p)}


def start(m: Machine, nodes: int = 2) -> list[str]:
    m.stack.start_all(workers=1, node_agent=False)
    names = sorted(m.ips)[:nodes]
    for n in names:
        m.agent(n)
    wait_for(lambda: len(m.stack.store.list("Node")) == nodes, what="nodes registered")
    return names


def test_agent_registers_this_machine_as_a_ready_node(machine: Machine) -> None:
    (name,) = start(machine, nodes=1)

    def ready() -> dict[str, Any] | None:
        node = machine.stack.store.try_get("Node", "/" + name) or {}
        conds = (node.get("status") or {}).get("conditions") or []
        ok = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)
        return node if ok else None

    node = wait_for(ready, what="the node Ready")
    labels = node["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == name
    assert labels["kubernetes.io/os"] == "linux"
    assert labels["kubernetes.io/arch"] in ("amd64", "arm64")
    cap = node["status"]["capacity"]
    assert int(cap["cpu"]) == psutil.cpu_count()
    assert cap["memory"] == f"{psutil.virtual_memory().total // 1024}Ki"
    assert cap["pods"] == "110" and node["status"]["allocatable"] == cap
    assert node["status"]["nodeInfo"]["operatingSystem"] == "linux"
    assert {"type": "InternalIP", "address": machine.ips[name]} in node["status"]["addresses"]
    # kubelet's conditions, in its order and words (this machine is under no pressure)
    assert [(c["type"], c["status"], c["reason"], c["message"])
            for c in node["status"]["conditions"]] == [
        ("MemoryPressure", "False", "KubeletHasSufficientMemory",
         "kubelet has sufficient memory available"),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID",
         "kubelet has sufficient PID available"),
        ("Ready", "True", "KubeletReady", "kubelet is posting ready status")]
    # and its Events of them, about the node (its name its uid), in the default namespace

    def told() -> set[tuple[str, str]]:
        return {(e["reason"], e["message"]) for e in machine.stack.store.list("Event", "default")
                if e["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": name,
                                           "namespace": "", "uid": name,
                                           "resourceVersion": ""}}

    wanted = {("Starting", "Starting kubelet.")} | {
        (f"Node{now_is}", f"Node {name} status is now: Node{now_is}") for now_is in
        ("HasSufficientMemory", "HasNoDiskPressure", "HasSufficientPID", "Ready")}
    wait_for(lambda: told() >= wanted, what="kubelet's node Events")


def test_daemonset_runs_on_two_agents_ready_by_http_probe_and_rolls_to_new_args(
        machine: Machine) -> None:
    a, b = start(machine)
    machine.stack.store.apply(daemonset(machine, "v1"))
    wait_for(lambda: len(ready_pods(machine.stack)) == 2, timeout=60,
             what="both pods Ready by their httpGet probe")
    assert machine.get(a) == f"{a} v1" and machine.get(b) == f"{b} v1"
    for pod in ready_pods(machine.stack).values():
        cs = container_status(pod)
        assert cs["state"]["running"] and cs["restartCount"] == 0
        assert cs["started"] and cs["ready"]  # the tcpSocket startup probe, then httpGet
        assert pod["status"]["phase"] == "Running"
        assert {c["type"] for c in pod["status"]["conditions"]} >= {
            "PodScheduled", "Initialized", "ContainersReady", "Ready"}
    old = {p.pid for p in machine.processes()}
    assert len(old) == 2
    node_versions = {meta.resource_version(n) for n in machine.stack.store.list("Node")}

    machine.stack.store.apply(daemonset(machine, "v2"))

    def rolled() -> bool:
        try:
            return machine.get(a) == f"{a} v2" and machine.get(b) == f"{b} v2"
        except OSError:
            return False

    wait_for(rolled, timeout=90, what="both nodes serving v2")
    wait_for(lambda: len(ready_pods(machine.stack)) == 2
             and len(machine.stack.pods("default")) == 2, timeout=30, what="rollout done")
    assert len(machine.marks("v1.term")) == 2  # each old server saw SIGTERM
    new = {p.pid for p in machine.processes()}
    assert len(new) == 2 and not new & old
    # the agents stepped hundreds of times meanwhile; a heartbeat is due every 300 s only,
    # so neither Node was written
    assert {meta.resource_version(n) for n in machine.stack.store.list("Node")} \
        == node_versions


def test_killed_process_is_restarted(machine: Machine) -> None:
    (a,) = start(machine, nodes=1)
    machine.stack.store.apply(daemonset(machine, "v1"))
    wait_for(lambda: len(ready_pods(machine.stack)) == 1, timeout=60, what="pod Ready")
    (victim,) = machine.processes()
    victim.kill()

    def restarted() -> dict[str, Any] | None:
        pods = ready_pods(machine.stack)
        cs = container_status(pods[a]) if a in pods else {}
        return cs if cs.get("restartCount") == 1 else None

    cs = wait_for(restarted, timeout=30, what="restartCount 1 and Ready again")
    assert cs["lastState"]["terminated"]["exitCode"] == 137
    assert cs["lastState"]["terminated"]["reason"] == "Error"
    (again,) = machine.processes()
    assert again.pid != victim.pid


def test_memory_limit_is_the_processes_data_limit_and_an_allocation_beyond_it_fails(
        machine: Machine) -> None:
    start(machine, nodes=1)
    grab = ("import sys, time; print('up', flush=True); time.sleep(float(sys.argv[1]));"
            "b = bytearray(512 * 2**20)")
    ds = daemonset(machine, "v1", probe=False,
                   command=["python3", "-c", grab, "0.5", str(machine.dir)])
    container = ds["spec"]["template"]["spec"]["containers"][0]
    container["resources"] = {"limits": {"memory": "256Mi", "cpu": "1"}}
    machine.stack.store.apply(ds)

    def limited() -> list[str] | None:
        for p in machine.processes():
            try:
                limits = Path(f"/proc/{p.pid}/limits").read_text().splitlines()
            except OSError:
                continue
            return next(line.split()[3:5] for line in limits if line.startswith("Max data"))
        return None

    assert wait_for(limited, timeout=30, what="the process") == [str(256 * 2**20)] * 2

    def failed() -> dict[str, Any] | None:
        pods = machine.stack.pods("default")
        cs = container_status(pods[0]) if pods else {}
        return cs if cs.get("restartCount", 0) >= 1 else None

    cs = wait_for(failed, timeout=30, what="the allocation beyond the limit failing")
    assert cs["lastState"]["terminated"]["exitCode"] == 1  # MemoryError


def test_command_that_exits_1_goes_to_crash_loop_back_off(machine: Machine) -> None:
    start(machine, nodes=1)
    machine.stack.store.apply(daemonset(
        machine, "v1", probe=False,
        command=["python3", "-c", "import sys; sys.exit(1)", str(machine.dir)]))

    def crash_looping() -> dict[str, Any] | None:
        pods = machine.stack.pods("default")
        cs = container_status(pods[0]) if pods else {}
        waiting = (cs.get("state") or {}).get("waiting") or {}
        return cs if waiting.get("reason") == "CrashLoopBackOff" else None

    cs = wait_for(crash_looping, timeout=30, what="CrashLoopBackOff")
    assert cs["restartCount"] >= 1
    assert cs["lastState"]["terminated"]["exitCode"] == 1
    assert cs["lastState"]["terminated"]["reason"] == "Error"
    pod = machine.stack.pods("default")[0]
    assert pod["status"]["phase"] == "Running" and not is_ready(pod)
    # kubelet's Events: each start, and the back-off before the next one
    backoff = ("Warning", "BackOff", "Back-off restarting failed container web in pod "
               f"{meta.name(pod)}_default({meta.uid(pod)})")
    told = wait_for(lambda: (e := said(machine.stack, pod)) >= {backoff} and e,
                    what="the BackOff event")
    assert {("Normal", "Created", "Created container: web"),
            ("Normal", "Started", "Started container web")} <= told
    # named as client-go names them (the time in hex): by name, in the order they happened
    evs = sorted((e for e in machine.stack.store.list("Event", "default")
                  if e["involvedObject"].get("uid") == meta.uid(pod)), key=meta.name)
    starts = [e["reason"] for e in evs if e["reason"] in ("Created", "Started")]
    assert starts == ["Created", "Started"]
    # each start after the first counts on the one Started Event (kubectl describe: x3 over
    # 4s), as client-go's recorder counts a repeat

    def counted() -> dict[str, Any] | None:
        started = [e for e in machine.stack.store.list("Event", "default")
                   if e["involvedObject"].get("uid") == meta.uid(pod)
                   and e["reason"] == "Started"]
        assert len(started) == 1, started
        return started[0] if started[0]["count"] >= 3 else None

    ev = wait_for(counted, timeout=30, what="the Started event counted three times")
    assert ev["firstTimestamp"] < ev["lastTimestamp"]
    assert ev["metadata"]["name"] == next(e for e in evs if e["reason"] == "Started")[
        "metadata"]["name"]


def test_a_run_that_ends_in_error_says_why_from_its_log_when_asked(machine: Machine) -> None:
    """terminationMessagePolicy FallbackToLogsOnError: the terminated state's message is the
    end of the run's log (its last 80 lines, 2 KiB at most), as kubelet's; with the default
    policy (File) a process, which has no termination file here, says nothing."""
    start(machine, nodes=1)
    ds = daemonset(machine, "v1", probe=False, command=[
        "sh", "-c", 'i=0; while [ $i -lt 100 ]; do echo "line $i"; i=$((i+1)); done; '
        'echo "cannot open /etc/app.conf" >&2; exit 3', str(machine.dir)])
    container = ds["spec"]["template"]["spec"]["containers"][0]
    container["terminationMessagePolicy"] = "FallbackToLogsOnError"
    machine.stack.store.apply(ds)

    def ended() -> dict[str, Any] | None:
        pods = machine.stack.pods("default")
        cs = container_status(pods[0]) if pods else {}
        return (cs.get("lastState") or {}).get("terminated")

    term = wait_for(ended, timeout=30, what="the first run ended")
    assert term["exitCode"] == 3
    lines = term["message"].splitlines()
    assert lines[-1] == "cannot open /etc/app.conf"
    assert len(lines) == 80 and lines[0] == "line 21"  # the last 80 lines of its log
    container["terminationMessagePolicy"] = "File"
    machine.stack.store.apply(ds)

    def ended_again() -> dict[str, Any] | None:
        term = ended()
        return term if term is not None and "message" not in term else None

    wait_for(ended_again, timeout=30, what="a run of the File policy ended, saying nothing")


def config_error(m: Machine) -> dict[str, Any] | None:
    """The waiting state of the first pod's container, if it is CreateContainerConfigError."""
    pods = m.stack.pods("default")
    cs = container_status(pods[0]) if pods else {}
    state = (cs.get("state") or {}).get("waiting") or {}
    return state if state.get("reason") == "CreateContainerConfigError" else None


def test_a_container_it_cannot_configure_waits_and_says_why(machine: Machine) -> None:
    start(machine, nodes=1)
    ds = daemonset(machine, "v1", probe=False)
    del ds["spec"]["template"]["spec"]["containers"][0]["command"]  # no image entrypoint
    machine.stack.store.apply(ds)
    why = "the process runtime needs a command (there is no image entrypoint)"

    assert wait_for(lambda: config_error(machine), timeout=30, what="CreateContainerConfigError")["message"] == why
    # kubelet's Warning, the only place kubectl describe shows the reason
    pod = machine.stack.pods("default")[0]
    wait_for(lambda: ("Warning", "Failed", f"Error: {why}") in said(machine.stack, pod),
             what="the Failed event")


def test_a_host_path_not_of_its_type_holds_the_pod_until_it_is(machine: Machine) -> None:
    """Kubelet's hostPath types: a DirectoryOrCreate path is made; a Socket that is not
    there yet is a FailedMount Warning (counted as it repeats) and no container starts,
    ContainerCreating, until the socket is there."""
    start(machine, nodes=1)
    made, sock = machine.dir / "host" / "made", machine.dir / "agent.sock"
    out = machine.dir / "marks" / "mounted"
    ds = daemonset(machine, "v1", probe=False, command=[
        "sh", "-c", f"test -d {made} && test -S {sock} && echo ok > {out}; exec sleep 600"])
    spec = ds["spec"]["template"]["spec"]
    spec["volumes"] = [
        {"name": "made", "hostPath": {"path": str(made), "type": "DirectoryOrCreate"}},
        {"name": "sock", "hostPath": {"path": str(sock), "type": "Socket"}}]
    spec["containers"][0]["volumeMounts"] = [{"name": "made", "mountPath": str(made)},
                                             {"name": "sock", "mountPath": str(sock)}]
    machine.stack.store.apply(ds)

    def failed_mounts() -> list[dict[str, Any]]:
        return [e for e in machine.stack.store.list("Event", "default")
                if e["reason"] == "FailedMount" and (e.get("count") or 1) >= 2]

    (ev,) = wait_for(failed_mounts, timeout=30, what="a repeated FailedMount Warning")
    assert (ev["type"], ev["message"], ev["source"]["component"]) == (
        "Warning", f'MountVolume.SetUp failed for volume "sock" : hostPath {sock} '
        "doesn't exist", "kubelet")
    assert made.is_dir() and (made.stat().st_mode & 0o777) == 0o755 & ~current_umask()
    (pod,) = machine.stack.pods("default")
    assert container_status(pod)["state"] == {"waiting": {"reason": "ContainerCreating"}}
    assert not out.exists()

    sock.write_text("")  # a file, not a socket: told in kubelet's words
    wait_for(lambda: any(e["message"].endswith(f"{sock} is not a socket file, it's a File")
                         for e in machine.stack.store.list("Event", "default")),
             timeout=30, what="the type mismatch told")
    sock.unlink()
    with contextlib.closing(socket.socket(socket.AF_UNIX)) as server:
        server.bind(str(sock))
        wait_for(lambda: out.exists() and out.read_text() == "ok\n", timeout=60,
                 what="the container started with both paths there")


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_env_from_resource_field_refs_reads_the_limits_or_the_nodes_allocatable(
        machine: Machine) -> None:
    """The downward API's resourceFieldRef: a limit the container sets, over its divisor;
    one it does not set is the node's allocatable (as its Node says)."""
    (node,) = start(machine, nodes=1)
    out = machine.dir / "marks" / "resources"
    ds = daemonset(machine, "v1", probe=False, command=[
        "sh", "-c", f'echo "$CPU_M $MEM_MI $WEB_CPU" > {out}; exec sleep 600'])
    container = ds["spec"]["template"]["spec"]["containers"][0]
    container["resources"] = {"limits": {"cpu": "500m"}}
    container["env"] += [
        {"name": "CPU_M", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu",
                                                             "divisor": "1m"}}},
        {"name": "MEM_MI", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory",
                                                              "divisor": "1Mi"}}},
        {"name": "WEB_CPU", "valueFrom": {"resourceFieldRef": {
            "resource": "limits.cpu", "containerName": "web"}}}]
    machine.stack.store.apply(ds)
    wait_for(lambda: out.exists() and out.read_text().strip(), timeout=30,
             what=f"the container's environment on {node}")
    allocatable = machine.stack.store.get("Node", "/" + node)["status"]["allocatable"]
    memory_ki = int(allocatable["memory"].removesuffix("Ki"))
    assert out.read_text().split() == ["500", str(-(-memory_ki // 1024)), "1"]


def test_env_from_a_configmap_waits_for_it_then_runs_with_its_values(machine: Machine) -> None:
    (node,) = start(machine, nodes=1)
    out = machine.dir / "marks" / "env"
    ds = daemonset(machine, "v1", probe=False, command=[
        "sh", "-c", f'echo "$LEVEL $P_LEVEL $FROM_KEY" > {out}; exec sleep 600'])
    container = ds["spec"]["template"]["spec"]["containers"][0]
    container["envFrom"] = [{"configMapRef": {"name": "agent-config"}},
                            {"configMapRef": {"name": "agent-config"}, "prefix": "P_"}]
    container["env"].append({"name": "FROM_KEY", "valueFrom": {"configMapKeyRef": {
        "name": "agent-config", "key": "mode"}}})
    machine.stack.store.apply(ds)

    # kubelet's words while the ConfigMap is missing; it runs once the ConfigMap is there
    assert wait_for(lambda: config_error(machine), timeout=30, what="CreateContainerConfigError")["message"] == \
        'configmap "agent-config" not found'
    machine.stack.store.apply({"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": "agent-config", "namespace": "default"},
                               "data": {"LEVEL": "debug", "mode": "tail", "9lives": "x"}})
    wait_for(lambda: out.exists() and out.read_text().strip(), timeout=30,
             what=f"the container's environment on {node}")
    assert out.read_text() == "debug debug tail\n"
    pod = machine.stack.pods("default")[0]
    skipped = ("Warning", "InvalidEnvironmentVariableNames", "Keys [9lives] from the EnvFrom "
               "configMap default/agent-config were skipped since they are considered invalid "
               "environment variable names.")
    wait_for(lambda: skipped in said(machine.stack, pod), what="kubelet's warning")


def test_env_from_a_secret_waits_for_it_then_runs_with_its_bytes(machine: Machine) -> None:
    (node,) = start(machine, nodes=1)
    out = machine.dir / "marks" / "env"
    ds = daemonset(machine, "v1", probe=False, command=[
        "sh", "-c", f'echo "$ES_user $PASSWORD" > {out}; exec sleep 600'])
    container = ds["spec"]["template"]["spec"]["containers"][0]
    container["envFrom"] = [{"secretRef": {"name": "es-creds"}, "prefix": "ES_"}]
    container["env"].append({"name": "PASSWORD", "valueFrom": {"secretKeyRef": {
        "name": "es-creds", "key": "password"}}})
    machine.stack.store.apply(ds)
    assert wait_for(lambda: config_error(machine), timeout=30,
                    what="CreateContainerConfigError")["message"] == 'secret "es-creds" not found'
    machine.stack.store.apply({"apiVersion": "v1", "kind": "Secret",
                               "metadata": {"name": "es-creds", "namespace": "default"},
                               "stringData": {"user": "fluent", "password": "s3cr\u00e9t"}})
    wait_for(lambda: out.exists() and out.read_text().strip(), timeout=30,
             what=f"the container's environment on {node}")
    assert out.read_bytes() == "fluent s3cr\u00e9t\n".encode()


def test_a_configmap_volume_mount_is_a_config_error_of_the_process_runtime(
        machine: Machine) -> None:
    start(machine, nodes=1)
    machine.stack.store.apply({"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": "files", "namespace": "default"},
                               "data": {"a.conf": "x"}})
    ds = daemonset(machine, "v1", probe=False)
    pod_spec = ds["spec"]["template"]["spec"]
    pod_spec["volumes"] = [{"name": "files", "configMap": {"name": "files"}}]
    pod_spec["containers"][0]["volumeMounts"] = [{"name": "files", "mountPath": "/etc/x"}]
    machine.stack.store.apply(ds)
    state = wait_for(lambda: config_error(machine), timeout=30, what="the config error")
    assert state["message"] == ("volumeMount files at /etc/x: the process runtime cannot "
                                "mount configMap, secret or downwardAPI volumes (it has no "
                                "mount namespace); use env or envFrom, or the docker runtime")
    assert machine.marks("start") == []  # nothing ran without its files


def test_deleting_the_daemonset_leaves_no_process_behind(machine: Machine) -> None:
    start(machine)
    machine.stack.store.apply(daemonset(machine, "v1"))
    wait_for(lambda: len(ready_pods(machine.stack)) == 2, timeout=60, what="both pods Ready")
    assert len(machine.processes()) == 2
    machine.stack.store.delete("DaemonSet", "default/web")
    wait_for(lambda: not machine.stack.pods("default"), timeout=30, what="pods released")
    assert machine.processes() == []
    assert len(machine.marks("v1.term")) == 2


def test_a_simulated_agent_beside_it_leaves_its_node_and_pods_alone(machine: Machine) -> None:
    """``daemonbus up`` (a simulated agent serving every Node) with a real agent on the same
    Redis: only the real agent runs the real node's pods. The simulated one used to end a
    deleted pod after its own --grace, while the process still ran (and its replacement
    started beside it)."""
    machine.stack.start_all(workers=1, nodes=1)
    node = sorted(machine.ips)[0]
    machine.agent(node)
    wait_for(lambda: len(machine.stack.store.list("Node")) == 2, what="both nodes")
    exited = machine.dir / "exited"
    # on SIGTERM it takes 3 s more to end: longer than the simulated agent's grace (1 s)
    script = f'trap "sleep 3; touch {exited}; exit 0" TERM; while true; do sleep 0.2; done'
    ds = daemonset(machine, "v1", probe=False, grace=30, command=["sh", "-c", script])
    ds["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    machine.stack.store.apply(ds)

    def running() -> dict[str, Any] | None:
        pods = [p for p in machine.stack.pods("default") if (p.get("spec") or {}).get(
            "nodeName") == node and "running" in (container_status(p).get("state") or {})]
        return pods[0] if pods else None

    pod = wait_for(running, timeout=60, what="the pod running on the real node")
    assert machine.processes()
    machine.stack.store.delete("Pod", meta.key(pod))
    wait_for(lambda: machine.stack.store.try_get("Pod", meta.key(pod)) is None, timeout=60,
             what="the pod released")
    assert exited.exists(), "the pod was released while its process still ran"


def server_nodes(m: Machine) -> list[tuple[str, str]]:
    """(node, version) of each live server process (not of other commands)."""
    out = []
    for p in m.processes():
        try:
            words = p.cmdline()
            if len(words) > 1 and words[-2].endswith("server.py"):
                out.append((p.environ().get("NODE_NAME", ""), words[-1]))
        except psutil.Error:
            continue
    return sorted(out)


def test_restarted_agent_adopts_its_processes_and_stops_those_of_gone_pods(
        machine: Machine) -> None:
    a, b = start(machine)
    machine.stack.store.apply(daemonset(machine, "v1"))
    wait_for(lambda: len(ready_pods(machine.stack)) == 2, timeout=60, what="both pods Ready")
    before = {p.pid for p in machine.processes()}
    pods = ready_pods(machine.stack)
    machine.stack.kill(f"agent-{a}")
    machine.stack.kill(f"agent-{b}")
    assert {p.pid for p in machine.processes()} == before  # the containers outlive the agent
    # while b's agent is away its pod is removed outright (a forced delete)
    machine.stack.store.commit([machine.stack.store.final_delete_op(pods[b])])
    machine.agent(a)
    machine.agent(b)

    def settled() -> bool:
        now = ready_pods(machine.stack)
        return (set(now) == {a, b} and meta.uid(now[a]) == meta.uid(pods[a])
                and meta.uid(now[b]) != meta.uid(pods[b]))

    wait_for(settled, timeout=60, what="a's pod adopted, b's replacement Ready")
    after = ready_pods(machine.stack)
    assert container_status(after[a])["restartCount"] == 0
    assert container_status(after[a])["containerID"] == container_status(pods[a])["containerID"]
    wait_for(lambda: server_nodes(machine) == [(a, "v1"), (b, "v1")], timeout=30,
             what="one server per node")
    live = {p.pid for p in machine.processes()}
    # (the container's process is its log writer's child, in the group the writer leads)
    assert container_status(pods[a])["containerID"] == \
        f"process://{os.getpgid(min(live & before))}"
    assert len(live & before) == 1  # b's old server was stopped (SIGTERM), a's adopted
    assert [n for n in machine.marks("v1.term") if n.startswith(b)] and \
        not [n for n in machine.marks("v1.term") if n.startswith(a)]
    assert len([n for n in machine.marks("v1.start") if n.startswith(a)]) == 1


def test_a_process_that_ended_while_its_agent_was_away_is_started_again(
        machine: Machine) -> None:
    (a,) = start(machine, nodes=1)
    machine.stack.store.apply(daemonset(machine, "v1"))
    pod = wait_for(lambda: ready_pods(machine.stack).get(a), timeout=60, what="pod Ready")
    machine.stack.kill(f"agent-{a}")
    (victim,) = machine.processes()
    victim.kill()  # (as when a machine restarts: nothing of it runs any more)
    victim.wait(10)
    machine.agent(a)

    def restarted() -> dict[str, Any] | None:
        now = ready_pods(machine.stack).get(a)
        cs = container_status(now) if now else {}
        return cs if cs.get("restartCount") == 1 else None

    cs = wait_for(restarted, timeout=60, what="the server started again, Ready")
    assert cs["lastState"]["terminated"]["reason"] == "ContainerStatusUnknown"
    assert meta.uid(ready_pods(machine.stack)[a]) == meta.uid(pod)
    assert [p.pid for p in machine.processes()] != [victim.pid]


def test_an_ephemeral_container_runs_once_and_not_again_when_its_agent_restarts(
        machine: Machine) -> None:
    """A container added through the pod's ephemeralcontainers subresource (``kubectl
    debug``) runs once: it is not restarted when it ends, nor started again by a
    restarted agent; the pod stays Ready throughout."""
    (a,) = start(machine, nodes=1)
    store = machine.stack.store
    machine.stack.store.apply(daemonset(machine, "v1"))
    pod = wait_for(lambda: ready_pods(machine.stack).get(a), timeout=60, what="pod Ready")
    key = meta.key(pod)
    debug = {"name": "dbg", "image": "busybox",
             "command": ["sh", "-c", f"touch {machine.dir}/marks/dbg.ran.$$; exit 3"]}

    def add() -> dict[str, Any] | None:
        current = store.get("Pod", key)
        with contextlib.suppress(errors.ConflictError):  # (the agent writes its status)
            return store.update_ephemeral({**current, "spec": {
                **current["spec"], "ephemeralContainers": [debug]}})
        return None

    wait_for(add, what="the ephemeral container added")

    def ended() -> dict[str, Any] | None:
        now = store.get("Pod", key)
        told = (now.get("status") or {}).get("ephemeralContainerStatuses") or [{}]
        return told[0] if "terminated" in told[0].get("state", {}) else None

    told = wait_for(ended, timeout=30, what="the ephemeral container ended")
    assert (told["state"]["terminated"]["exitCode"], told["restartCount"]) == (3, 0)
    assert ("Normal", "Started", "Started container dbg") in said(machine.stack, pod)
    assert "spec.ephemeralContainers{dbg}" in {e["involvedObject"].get("fieldPath")
                                               for e in store.list("Event", "default")}
    assert len(machine.marks("ran")) == 1
    machine.stack.kill(f"agent-{a}")
    before = meta.resource_version(store.get("Pod", key))
    machine.agent(a)

    def synced() -> dict[str, Any] | None:  # (a restarted agent probes readiness afresh:
        now = ready_pods(machine.stack).get(a)  # the pod's status is written again)
        return now if now and meta.resource_version(now) != before else None

    wait_for(synced, timeout=60, what="the restarted agent's report")
    assert len(machine.marks("ran")) == 1  # not started again
    assert ended() == told
    assert container_status(ready_pods(machine.stack)[a])["restartCount"] == 0


def test_agent_sigkilled_mid_rollout_leaves_no_duplicate_and_no_orphan(
        machine: Machine) -> None:
    a, b = start(machine)
    machine.stack.store.apply(daemonset(machine, "v1"))
    wait_for(lambda: len(ready_pods(machine.stack)) == 2, timeout=60, what="both pods Ready")
    machine.stack.store.apply(daemonset(machine, "v2"))
    wait_for(lambda: any(meta.is_being_deleted(p) or
                         "v2" in str(p["spec"]["containers"][0].get("args"))
                         for p in machine.stack.pods("default")),
             timeout=30, what="the rollout under way")
    machine.stack.kill(f"agent-{a}")
    machine.stack.kill(f"agent-{b}")
    machine.agent(a)
    machine.agent(b)
    seen: list[list[tuple[str, str]]] = []

    def done() -> bool:
        servers = server_nodes(machine)
        seen.append(servers)
        return servers == [(a, "v2"), (b, "v2")] and len(ready_pods(machine.stack)) == 2 \
            and len(machine.stack.pods("default")) == 2

    wait_for(done, timeout=120, interval=0.2, what="v2 alone on both nodes")
    for servers in seen:  # never two servers of one node at once
        nodes = [n for n, _ in servers]
        assert len(nodes) == len(set(nodes)), servers
    assert len(machine.marks("v1.term")) == 2
    for pod in ready_pods(machine.stack).values():
        assert container_status(pod)["restartCount"] == 0


FIRST = """
import json, os
print("first init container says hello", flush=True)
out = {k: os.environ.get(k) for k in ("NAME", "NS", "NODE_NAME", "POD_IP", "HOST_IP", "GREETING")}
out.update(cwd=os.getcwd(), uid=os.getuid())
open("first.out", "w").write(json.dumps(out))
"""
SECOND = "import os, sys; sys.exit(0 if os.path.exists('first.out') else 3)"


def test_init_containers_env_working_dir_user_logs_and_an_exec_liveness_probe(
        machine: Machine) -> None:
    (a,) = start(machine, nodes=1)
    work = machine.dir / "work"
    work.mkdir()
    work.chmod(0o777)
    field = [("NAME", "metadata.name"), ("NS", "metadata.namespace"),
             ("NODE_NAME", "spec.nodeName"), ("POD_IP", "status.podIP"),
             ("HOST_IP", "status.hostIP")]
    env = [{"name": k, "valueFrom": {"fieldRef": {"fieldPath": v}}} for k, v in field] + \
        [{"name": "GREETING", "value": "hi $(NODE_NAME)"}]
    ds = daemonset(machine, "v1", probe=False,
                   command=["python3", "-c", "import time; print('up', flush=True); "
                            "time.sleep(1e6)", str(machine.dir)])
    spec = ds["spec"]["template"]["spec"]
    spec["initContainers"] = [
        {"name": "first", "image": "python:3", "command": ["python3", "-c", FIRST],
         "workingDir": str(work), "env": env},
        {"name": "second", "image": "python:3", "command": ["python3", "-c", SECOND],
         "workingDir": str(work)},
    ]
    spec["containers"][0]["workingDir"] = str(work)
    spec["containers"][0]["env"].append({"name": "SWITCH", "value": "stop-$(NODE_NAME)"})
    spec["containers"][0]["livenessProbe"] = {
        "exec": {"command": ["sh", "-c", 'test ! -e "$SWITCH" || { echo "$SWITCH is there"; '
                                         "exit 1; }"]},
        "periodSeconds": 1, "failureThreshold": 2}
    machine.stack.store.apply(ds)
    pod = wait_for(lambda: ready_pods(machine.stack).get(a), timeout=60, what="pod Ready")
    inits = pod["status"]["initContainerStatuses"]
    assert [(c["name"], c["state"]["terminated"]["exitCode"], c["state"]["terminated"]["reason"])
            for c in inits] == [("first", 0, "Completed"), ("second", 0, "Completed")]
    assert [c["restartCount"] for c in inits] == [0, 0]  # second ran after first, once
    seen = yaml.safe_load((work / "first.out").read_text())
    ip = machine.ips[a]
    assert seen == {"NAME": meta.name(pod), "NS": "default", "NODE_NAME": a, "POD_IP": ip,
                    "HOST_IP": ip, "GREETING": f"hi {a}", "cwd": str(work),
                    "uid": 65534 if os.getuid() == 0 else os.getuid()}
    logs = machine.state / a / "pods" / f"default_{meta.name(pod)}_{meta.uid(pod)}"
    # the run's log file, as its log writer keeps it: CRI lines, kubelet's format
    (line,) = (logs / "first" / "0.log").read_bytes().splitlines(keepends=True)
    assert podlog.parse_cri(line) == (line[:30], b"first init container says hello\n")

    logs = ("logs", f"pod/{meta.name(pod)}", "--state-dir", str(machine.state / a))
    assert cli(machine, *logs, "-c", "first") == b"first init container says hello\n"
    wait_for(lambda: cli(machine, *logs) == b"up\n", what="the container's output")
    follow = subprocess.Popen([sys.executable, "-m", "services.cli.main", *logs, "-f"],
                              env=machine.stack.env(), stdout=subprocess.PIPE)
    assert follow.stdout is not None
    ready, _, _ = select.select([follow.stdout], [], [], 60)
    assert ready, "logs -f printed nothing"
    first = follow.stdout.readline()  # it follows the first run now
    (work / f"stop-{a}").touch()  # the liveness probe fails from now on

    def restarted() -> dict[str, Any] | None:
        p = machine.stack.store.try_get("Pod", meta.key(pod)) or {}
        cs = container_status(p)
        return cs if cs.get("restartCount", 0) >= 1 else None

    cs = wait_for(restarted, timeout=30, what="the container restarted by its liveness probe")
    (work / f"stop-{a}").unlink()
    assert cs["lastState"]["terminated"]["exitCode"] == 128 + signal.SIGTERM
    # kubelet's Events of it: the probe's output, the kill, the starts
    told = said(machine.stack, pod)
    assert {("Warning", "Unhealthy", f"Liveness probe failed: stop-{a} is there\n"),
            ("Normal", "Killing", "Container web failed liveness probe, will be restarted"),
            ("Normal", "Created", "Created container: first"),
            ("Normal", "Started", "Started container second"),
            ("Normal", "Started", "Started container web")} <= told
    wait_for(lambda: ready_pods(machine.stack).get(a), timeout=30, what="Ready again")
    try:
        rest, _ = follow.communicate(timeout=30)  # -f ends with the run it follows
    finally:
        follow.kill()
    assert first + rest == b"up\n"
    assert cli(machine, *logs, "--previous") == b"up\n"
    assert cli(machine, *logs, "--tail", "0") == b""


def cli(m: Machine, *args: str) -> bytes:
    res = subprocess.run([sys.executable, "-m", "services.cli.main", *args],
                         env=m.stack.env(), capture_output=True, timeout=60, check=True)
    return res.stdout


def test_rollout_to_a_crashing_version_stalls_at_max_unavailable(machine: Machine) -> None:
    a, b = start(machine)
    machine.stack.store.apply(daemonset(machine, "v1"))
    wait_for(lambda: len(ready_pods(machine.stack)) == 2, timeout=60, what="both pods Ready")
    old = ready_pods(machine.stack)
    bad = daemonset(machine, "v2", command=["python3", "-c", "import sys; sys.exit(1)",
                                            str(machine.dir)])
    machine.stack.store.apply(bad)

    def stalled() -> tuple[str, dict[str, Any]] | None:
        for pod in machine.stack.pods("default"):
            cs = container_status(pod)
            if cs.get("restartCount", 0) >= 3 and not meta.is_being_deleted(pod):
                return str(pod["spec"]["nodeName"]), pod
        return None

    # the new pod crash-loops on one node (three restarts: the back-off has run for a while)
    node, pod = wait_for(stalled, timeout=60, what="the new pod crash-looping")
    other = b if node == a else a
    assert not is_ready(pod)
    # the other node keeps its old pod, Ready and serving: maxUnavailable 1 is used up
    assert meta.uid(ready_pods(machine.stack)[other]) == meta.uid(old[other])
    assert machine.get(other) == f"{other} v1"
    wait_for(lambda: machine.stack.status("default/web").get("updatedNumberScheduled") == 1
             and machine.stack.status("default/web").get("numberUnavailable") == 1,
             what="status: one updated, one unavailable")
    assert server_nodes(machine) == [(other, "v1")]


def test_a_shortened_grace_period_brings_the_kill_forward(machine: Machine) -> None:
    """A pod deleted with 60 s whose process ignores SIGTERM is killed once a second delete
    shortens the period to 2 s (the kubelet's calculateEffectiveGracePeriod), not at 60 s."""
    start(machine, nodes=1)
    stubborn = ["python3", "-c", "import signal, sys, time; "
                "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(3600)",
                str(machine.dir)]
    machine.stack.store.apply(daemonset(machine, "v1", probe=False, grace=60,
                                        command=stubborn))
    pod = wait_for(lambda: next((p for p in machine.stack.pods("default")
                                 if container_status(p).get("state", {}).get("running")),
                                None), timeout=30, what="the pod running")
    (proc,) = wait_for(machine.processes, timeout=10, what="its process")
    left = machine.stack.store.delete("Pod", meta.key(pod))
    assert left is not None and left["metadata"]["deletionGracePeriodSeconds"] == 60
    shortened = machine.stack.store.delete("Pod", meta.key(pod), grace_seconds=2)
    assert shortened is not None and shortened["metadata"]["deletionGracePeriodSeconds"] == 2

    def killed() -> bool:
        try:
            return proc.status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True
    wait_for(killed, timeout=20, what="the process killed after the shortened period")
    wait_for(lambda: machine.stack.store.try_get("Pod", meta.key(pod)) is None,
             timeout=20, what="the pod released")
