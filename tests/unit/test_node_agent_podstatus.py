"""The process runtime's kubelet decisions (pure): crash-loop back-off, restart policy,
phase and conditions, the container environment, probe thresholds; and what a failed probe
says (against real sockets)."""

from __future__ import annotations

import base64
import dataclasses
import http.server
import os
import threading
from typing import Any

import pytest

from services.node_agent import podstatus, probes
from services.node_agent.podstatus import ContainerState
from services.node_agent.probes import ProbeTracker
from shared.model import meta
from shared.store.server import free_port

POD: dict[str, Any] = {
    "metadata": {"name": "web-x", "namespace": "ns", "uid": "u1",
                 "labels": {"app": "web"}},
    "spec": {"nodeName": "n1", "containers": [{"name": "web", "image": "i"}]},
    "status": {"podIP": "10.0.0.2", "hostIP": "10.0.0.1", "phase": "Pending"},
}


def crash(c: ContainerState, now: float, policy: str = "Always", code: int = 1,
          ran: float = 1.0, base: float = 10.0) -> None:
    c.pid, c.terminated, c.started_at = 100, None, now - ran
    podstatus.after_exit(c, policy,
                         podstatus.terminated_state(code, 0, now - ran, now, "process://100"),
                         now, base)


def test_crash_loop_back_off_restarts_at_once_then_doubles_from_the_base_to_5_minutes() -> None:
    c = ContainerState("web")
    delays = []
    now = 1000.0
    for _ in range(9):
        crash(c, now)
        assert c.restart_at is not None
        delays.append(c.restart_at - now)
        now = c.restart_at + 1
        c.restart_at = None
    assert delays == [0, 10, 20, 40, 80, 160, 300, 300, 300]


def test_back_off_starts_afresh_after_ten_minutes_running() -> None:
    c = ContainerState("web")
    for i in range(4):
        crash(c, 1000.0 + 100 * i)
    crash(c, 5000.0, ran=600)
    assert c.restart_at == 5000.0


@pytest.mark.parametrize(("policy", "code", "restarts"), [
    ("Always", 0, True), ("Always", 1, True), ("OnFailure", 0, False), ("OnFailure", 2, True),
    ("Never", 1, False)])
def test_restart_policy(policy: str, code: int, restarts: bool) -> None:
    c = ContainerState("web")
    crash(c, 1000.0, policy=policy, code=code)
    assert (c.restart_at is not None) is restarts
    assert c.terminated is not None and c.terminated["exitCode"] == code
    assert c.terminated["reason"] == ("Completed" if code == 0 else "Error")


def test_a_crash_looping_container_is_waiting_with_its_last_termination_and_the_pod_runs() -> None:
    c = ContainerState("web")
    crash(c, 1000.0)
    c.restart_at = None
    c.restart_count, c.last_terminated, c.terminated, c.pid = 1, c.terminated, None, 7
    crash(c, 1010.0)  # second exit: waits 10 s
    st = podstatus.pod_status(POD, [], [c], 1011.0)
    cs = st["containerStatuses"][0]
    assert cs["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert cs["state"]["waiting"]["message"].startswith("back-off 10s restarting failed "
                                                        "container=web pod=web-x_ns(u1)")
    assert cs["lastState"]["terminated"]["exitCode"] == 1 and cs["restartCount"] == 1
    assert st["phase"] == "Running"
    conds = {x["type"]: x for x in st["conditions"]}
    assert conds["Ready"]["status"] == "False"
    assert conds["Ready"]["message"] == "containers with unready status: [web]"


def test_pending_until_init_containers_complete_failed_when_one_fails_under_never() -> None:
    init = ContainerState("setup", init=True, pid=5, started_at=1.0)
    main = ContainerState("web")
    pod = {**POD, "spec": {**POD["spec"], "initContainers": [{"name": "setup"}]}}
    st = podstatus.pod_status(pod, [init], [main], 2.0)
    assert st["phase"] == "Pending"
    assert st["containerStatuses"][0]["state"] == {"waiting": {"reason": "PodInitializing"}}
    assert {x["type"]: x["status"] for x in st["conditions"]}["Initialized"] == "False"
    crash(init, 3.0, policy="Never", code=0)
    assert podstatus.pod_status(pod, [init], [main], 3.0)["phase"] == "Pending"
    main.pid, main.started_at, main.ready, main.started = 9, 3.0, True, True
    st = podstatus.pod_status(pod, [init], [main], 4.0)
    assert st["phase"] == "Running"
    assert all(x["status"] == "True" for x in st["conditions"])
    failed = ContainerState("setup", init=True)
    crash(failed, 3.0, policy="Never", code=3)
    assert podstatus.pod_status(pod, [failed], [ContainerState("web")], 4.0)["phase"] == "Failed"


def test_completed_containers_succeed_under_on_failure() -> None:
    c = ContainerState("web")
    crash(c, 5.0, policy="OnFailure", code=0)
    pod = {**POD, "spec": {**POD["spec"], "restartPolicy": "OnFailure"}}
    assert podstatus.pod_status(pod, [], [c], 6.0)["phase"] == "Succeeded"


def test_an_ephemeral_container_is_reported_apart_and_counts_for_nothing_else() -> None:
    main = ContainerState("web", pid=5, started_at=100.0, ready=True, started=True)
    debug = ContainerState("dbg", ephemeral=True)
    pod = {**POD, "spec": {**POD["spec"], "ephemeralContainers": [
        {"name": "dbg", "image": "busybox", "targetContainerName": "web"}]}}
    st = podstatus.pod_status(pod, [], [main], 101.0, [debug])
    (told,) = st["ephemeralContainerStatuses"]
    assert (told["name"], told["image"], told["state"]) == (
        "dbg", "busybox", {"waiting": {"reason": "ContainerCreating"}})
    assert [c["name"] for c in st["containerStatuses"]] == ["web"]
    crash(debug, 102.0, policy="Never", code=7)  # ended: never restarted, never unready
    st = podstatus.pod_status(pod, [], [main], 103.0, [debug])
    (told,) = st["ephemeralContainerStatuses"]
    assert told["state"]["terminated"]["exitCode"] == 7 and told["restartCount"] == 0
    assert "started" not in told and told["ready"] is False
    assert st["phase"] == "Running"
    assert all(x["status"] == "True" for x in st["conditions"])
    assert podstatus.container_spec(pod, "dbg")["targetContainerName"] == "web"
    assert podstatus.spec_key(debug) == "ephemeralContainers"
    assert "ephemeralContainerStatuses" not in podstatus.pod_status(POD, [], [main], 104.0)


def test_a_container_record_keeps_that_it_is_ephemeral() -> None:
    debug = ContainerState("dbg", ephemeral=True, pid=3)
    assert ContainerState.from_record(debug.to_record()).ephemeral is True
    with pytest.raises(ValueError):
        ContainerState.from_record({**debug.to_record(), "ephemeral": "yes"})


def test_an_unchanged_pod_reports_an_equal_status() -> None:
    c = ContainerState("web", pid=5, started_at=100.0, ready=True, started=True)
    first = podstatus.pod_status(POD, [], [c], 101.0)
    again = podstatus.pod_status({**POD, "status": first}, [], [c], 500.0)
    assert again == first
    c.ready = False
    later = podstatus.pod_status({**POD, "status": first}, [], [c], 600.0)
    ready = next(x for x in later["conditions"] if x["type"] == "Ready")
    assert ready["lastTransitionTime"] == meta.format_time(600.0)


def test_env_expands_earlier_variables_and_reads_pod_fields() -> None:
    container = {"env": [
        {"name": "A", "value": "x"},
        {"name": "B", "value": "$(A)-$(NOPE)-$$(A)"},
        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
        {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
    ], "command": ["echo", "$(B)"], "args": ["$(NODE)"]}
    env = podstatus.container_env(POD, container, {"PATH": "/bin"})
    assert env == {"PATH": "/bin", "A": "x", "B": "x-$(NOPE)-$(A)", "NODE": "n1",
                   "IP": "10.0.0.2", "HOST": "10.0.0.1", "NAME": "web-x", "NS": "ns",
                   "APP": "web"}
    assert podstatus.argv(container, env) == ["echo", "x-$(NOPE)-$(A)", "n1"]


def test_resource_field_refs_read_limits_requests_and_the_nodes_allocatable() -> None:
    def ref(resource: str, divisor: str | None = None,
            of: str | None = None) -> dict[str, Any]:
        r: dict[str, Any] = {"resource": resource}
        if divisor is not None:
            r["divisor"] = divisor
        if of is not None:
            r["containerName"] = of
        return {"resourceFieldRef": r}

    container = {"name": "web", "resources": {
        "limits": {"cpu": "250m", "memory": "64Mi"}, "requests": {"memory": "1500k"}}}
    side = {"name": "side", "resources": {"requests": {"cpu": "1.5"}}}
    pod = {**POD, "spec": {**POD["spec"], "containers": [container, side]}}
    env = [{"name": k, "valueFrom": v} for k, v in {
        "CPU": ref("limits.cpu"),  # 250m rounded up to a whole core
        "MILLI": ref("limits.cpu", "1m"),
        "MEM": ref("limits.memory"),
        "MIB": ref("limits.memory", "1Mi"),
        "REQ_MEM_MI": ref("requests.memory", "1Mi"),  # 1.43 MiB, rounded up
        "REQ_CPU": ref("requests.cpu"),  # none asked for: 0
        "DISK": ref("limits.ephemeral-storage", "1Gi"),  # none set: the node's
        "SIDE_CPU": ref("requests.cpu", "1m", of="side"),
        "SIDE_LIMIT": ref("limits.cpu", of="side"),  # none set: the node's 4 cores
    }.items()]
    got = podstatus.container_env(pod, {**container, "env": env}, {},
                                  allocatable={"cpu": "4", "memory": "8Gi",
                                               "ephemeral-storage": "100Gi"})
    assert got == {"CPU": "1", "MILLI": "250", "MEM": str(64 << 20), "MIB": "64",
                   "REQ_MEM_MI": "2", "REQ_CPU": "0", "DISK": "100", "SIDE_CPU": "1500",
                   "SIDE_LIMIT": "4"}
    with pytest.raises(podstatus.ConfigError, match=r"^container gone not found$"):
        podstatus.container_env(pod, {"env": [{"name": "X", "valueFrom": ref(
            "limits.cpu", of="gone")}]}, {})
    with pytest.raises(podstatus.ConfigError,
                       match=r"^unsupported container resource : limits\.pods$"):
        podstatus.container_env(pod, {"env": [{"name": "X", "valueFrom": ref(
            "limits.pods")}]}, {})


def test_unsupported_env_sources_are_a_config_error() -> None:
    for item in ({"name": "R", "valueFrom": {"fileKeyRef": {"path": "x"}}},
                 {"name": "F", "valueFrom": {"fieldRef": {"fieldPath": "spec.nope"}}}):
        with pytest.raises(podstatus.ConfigError):
            podstatus.container_env(POD, {"env": [item]}, {})
    with pytest.raises(podstatus.ConfigError):
        podstatus.argv({"args": ["x"]}, {})


CONFIG = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "ns"},
          "data": {"LEVEL": "info", "log.file": "/x", "1bad": "y", "HOST": "cm"}}


SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds", "namespace": "ns"},
          "type": "Opaque", "data": {"TOKEN": base64.b64encode(b"t0k\xff").decode(),
                                     "bad key": base64.b64encode(b"x").decode()}}


def in_ns(kind: str, name: str) -> Any:
    return {("ConfigMap", "cfg"): CONFIG, ("Secret", "creds"): SECRET}.get((kind, name))


def test_env_from_config_maps_prefixed_and_overridden_by_env() -> None:
    container = {"envFrom": [{"configMapRef": {"name": "cfg"}},
                             {"configMapRef": {"name": "cfg"}, "prefix": "P_"},
                             {"configMapRef": {"name": "gone", "optional": True}}],
                 "env": [{"name": "HOST", "value": "env"},
                         {"name": "L", "valueFrom": {"configMapKeyRef": {"name": "cfg",
                                                                         "key": "LEVEL"}}},
                         {"name": "M", "valueFrom": {"configMapKeyRef": {
                             "name": "cfg", "key": "missing", "optional": True}}},
                         {"name": "N", "valueFrom": {"configMapKeyRef": {
                             "name": "gone", "key": "k", "optional": True}}}]}
    env = podstatus.container_env(POD, container, {"PATH": "/bin"}, in_ns)
    assert env == {"PATH": "/bin", "LEVEL": "info", "log.file": "/x", "HOST": "env",
                   "P_LEVEL": "info", "P_log.file": "/x", "P_1bad": "y", "P_HOST": "cm",
                   "L": "info"}
    # kubelet skips keys that are not environment variable names, and says which
    assert podstatus.env_from(POD, container, in_ns)[1] == [
        "Keys [1bad] from the EnvFrom configMap ns/cfg were skipped since they are considered "
        "invalid environment variable names."]


def test_env_from_secrets_and_secret_key_refs_as_kubelet_reads_them() -> None:
    container = {"envFrom": [{"secretRef": {"name": "creds"}, "prefix": "S_"}],
                 "env": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "creds",
                                                                      "key": "TOKEN"}}}]}
    env = podstatus.container_env(POD, container, {}, in_ns)
    assert env == {"S_TOKEN": "t0k\udcff", "T": "t0k\udcff"}  # its bytes, as they are
    assert os.fsencode(env["T"]) == b"t0k\xff"
    assert podstatus.env_from(POD, container, in_ns)[1] == [
        "Keys [S_bad key] from the EnvFrom secret ns/creds were skipped since they are "
        "considered invalid environment variable names."]
    binary = {**SECRET, "data": {"BLOB": base64.b64encode(b"a\x00b").decode()}}
    with pytest.raises(podstatus.ConfigError, match="env BLOB: a NUL byte in a variable"):
        podstatus.container_env(POD, {"envFrom": [{"secretRef": {"name": "creds"}}]}, {},
                                lambda kind, name: binary)
    for item, message in (
            ({"name": "X", "valueFrom": {"secretKeyRef": {"name": "gone", "key": "k"}}},
             'secret "gone" not found'),
            ({"name": "X", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "nope"}}},
             "couldn't find key nope in Secret ns/creds")):
        with pytest.raises(podstatus.ConfigError) as err:
            podstatus.container_env(POD, {"env": [item]}, {}, in_ns)
        assert str(err.value) == message


@pytest.mark.parametrize("item, message", [
    ({"name": "X", "valueFrom": {"configMapKeyRef": {"name": "gone", "key": "k"}}},
     'configmap "gone" not found'),
    ({"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "nope"}}},
     "couldn't find key nope in ConfigMap ns/cfg"),
])
def test_a_missing_config_map_or_key_not_optional_is_kubelets_config_error(
        item: Any, message: str) -> None:
    with pytest.raises(podstatus.ConfigError) as err:
        podstatus.container_env(POD, {"env": [item]}, {}, in_ns)
    assert str(err.value) == message
    with pytest.raises(podstatus.ConfigError) as err:
        podstatus.container_env(POD, {"envFrom": [{"configMapRef": {"name": "gone"}}]}, {},
                                in_ns)
    assert str(err.value) == 'configmap "gone" not found'


def test_probe_thresholds_and_timing() -> None:
    t = ProbeTracker({"initialDelaySeconds": 5, "periodSeconds": 2, "successThreshold": 2,
                      "failureThreshold": 2}, started_at=100.0, ok=False)
    assert not t.due(104.9) and t.due(105.0)
    assert t.record(True, 105.0) is False  # one success of two
    assert not t.due(106.9) and t.due(107.0)
    assert t.record(True, 107.0) is True
    assert t.record(False, 109.0) is True  # one failure of two
    assert t.record(True, 111.0) is True
    assert t.record(False, 113.0) is True
    assert t.record(False, 115.0) is False


def test_a_container_is_not_ready_until_its_startup_probe_succeeded() -> None:
    c = ContainerState("web", pid=5, started_at=100.0, ready=True)
    cs = podstatus.pod_status(POD, [], [c], 101.0)["containerStatuses"][0]
    assert (cs["started"], cs["ready"]) == (False, False)
    c.started = True
    cs = podstatus.pod_status(POD, [], [c], 102.0)["containerStatuses"][0]
    assert (cs["started"], cs["ready"]) == (True, True)
    assert ContainerState.from_record(c.to_record()).started is False  # probes start afresh


def test_a_container_record_reads_back_and_a_damaged_one_is_refused() -> None:
    c = ContainerState("web", pid=5, create_time=1.5, started_at=2.0, restart_count=2,
                       terminated=None, last_terminated={"exitCode": 1}, backoff=20.0,
                       restart_at=None, starting=True)
    assert ContainerState.from_record(c.to_record()) == c
    for bad in ({"name": 3}, {"name": "web", "pid": "5"}, {"name": "web", "pid": True},
                {"name": "web", "terminated": [1]}, {"name": "web", "restart_at": "soon"},
                {"name": "web", "starting": 1}, []):
        with pytest.raises(ValueError):
            ContainerState.from_record(bad)  # type: ignore[arg-type]
    kept = {f.name for f in dataclasses.fields(ContainerState)} - {"name", "ready", "started"}
    assert kept == set(podstatus._RECORD_TYPES)  # every kept field is checked on reading


def test_resource_limits_are_read_as_quantities() -> None:
    def limits(**values: object) -> dict[str, object]:
        return {"resources": {"limits": values}}
    assert podstatus.memory_limit(limits(memory="128Mi")) == 128 * 2**20
    assert podstatus.memory_limit(limits(memory="1G")) == 10**9
    assert podstatus.memory_limit(limits(memory="1e3")) == 1000
    assert podstatus.memory_limit(limits(memory=64)) == 64
    assert podstatus.cpu_limit(limits(cpu="250m")) == 0.25
    assert podstatus.cpu_limit(limits(cpu="2")) == 2
    assert podstatus.cpu_limit(limits()) is None and podstatus.memory_limit({}) is None
    for bad in ("12XB", "Mi", "1.2.3"):
        with pytest.raises(podstatus.ConfigError):
            podstatus.memory_limit(limits(memory=bad))


def test_a_failed_probe_says_why_in_kubelets_words() -> None:
    class Failing(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(500)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Failing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    closed = free_port()
    try:
        def run(probe: dict[str, Any]) -> tuple[bool, str]:
            return probes.run({**probe, "timeoutSeconds": 2}, {"ports": [
                {"name": "http", "containerPort": port}]}, "127.0.0.1", lambda w, t: (True, ""))
        assert run({"httpGet": {"port": "http", "path": "/healthz"}}) == \
            (False, "HTTP probe failed with statuscode: 500")
        assert run({"httpGet": {"port": closed}}) == (False, (
            f'Get "http://127.0.0.1:{closed}/": dial tcp 127.0.0.1:{closed}: connect: '
            "connection refused"))
        assert run({"tcpSocket": {"port": closed}}) == \
            (False, f"dial tcp 127.0.0.1:{closed}: connect: connection refused")
        assert run({"tcpSocket": {"port": port}}) == (True, "")
        assert run({"tcpSocket": {"port": "metrics"}}) == (False, "port 'metrics' not found")
    finally:
        server.shutdown()
        server.server_close()
