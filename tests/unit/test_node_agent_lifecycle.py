"""The simulated kubelet's stages, decided with an explicit clock (no IO)."""

from __future__ import annotations

from typing import Any

from services.node_agent import lifecycle
from services.node_agent.lifecycle import AgentConfig, node_step, pod_step, serves
from shared.daemonset import unavailable
from shared.model import meta
from shared.model.podutil import is_ready

NOW = 1_700_000_000.0


def pod(image: str = "agent:1", node: str = "n1", **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "ds-abcde", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": image}],
                 "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                     "nodeSelectorTerms": [{"matchFields": [
                         {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}},
        "status": dict(status),
    }


def test_unbound_pod_is_bound_to_its_affinity_node_and_ready_at_once_without_delay() -> None:
    step = pod_step(AgentConfig(), pod(), node_exists=True, now=NOW)
    assert step.update is not None
    assert step.update["spec"]["nodeName"] == "n1"
    assert step.update["status"]["phase"] == "Running"
    assert is_ready(step.update)
    assert step.update["status"]["podIP"] and step.update["status"]["hostIP"]


def test_a_running_pod_reports_an_ephemeral_container_added_to_it_running() -> None:
    running = pod_step(AgentConfig(), pod(), node_exists=True, now=NOW).update
    assert running is not None and pod_step(AgentConfig(), running, True, NOW + 1).update is None
    debugged = {**running, "spec": {**running["spec"], "ephemeralContainers": [
        {"name": "dbg", "image": "busybox"}]}}
    step = pod_step(AgentConfig(), debugged, node_exists=True, now=NOW + 2)
    assert step.update is not None
    (told,) = step.update["status"]["ephemeralContainerStatuses"]
    assert (told["name"], told["image"], told["ready"]) == ("dbg", "busybox", False)
    assert told["state"] == {"running": {"startedAt": meta.format_time(NOW + 2)}}
    assert step.update["status"]["containerStatuses"] == running["status"]["containerStatuses"]
    assert pod_step(AgentConfig(), step.update, True, NOW + 3).update is None  # told once


def test_ready_delay_keeps_pod_pending_until_due() -> None:
    cfg = AgentConfig(ready_delay=5)
    bound = pod_step(cfg, pod(), node_exists=True, now=NOW)
    assert bound.update is not None and bound.update["status"]["phase"] == "Pending"
    assert bound.wake_at == NOW + 5
    early = pod_step(cfg, bound.update, node_exists=True, now=NOW + 4)
    assert early.update is None and early.wake_at == NOW + 5
    due = pod_step(cfg, bound.update, node_exists=True, now=NOW + 5)
    assert due.update is not None and is_ready(due.update)


def test_fail_image_goes_failed_and_never_ready_stays_not_ready() -> None:
    cfg = AgentConfig(fail_images=("*:broken",), never_ready=("slow/*",))
    failed = pod_step(cfg, pod("agent:broken"), node_exists=True, now=NOW).update
    assert failed is not None and failed["status"]["phase"] == "Failed"
    stuck = pod_step(cfg, pod("slow/agent:2"), node_exists=True, now=NOW).update
    assert stuck is not None and stuck["status"]["phase"] == "Running" and not is_ready(stuck)


def test_crash_image_runs_crash_looping_as_a_kubelet_shows_it() -> None:
    cfg = AgentConfig(crash_images=("*:crash",), never_ready=("*",))  # crash is tried first
    looping = pod_step(cfg, pod("agent:crash"), node_exists=True, now=NOW).update
    assert looping is not None and looping["status"]["phase"] == "Running"
    assert not is_ready(looping)
    (cs,) = looping["status"]["containerStatuses"]
    assert cs["state"]["waiting"]["reason"] == "CrashLoopBackOff" and cs["restartCount"] == 1
    assert unavailable.crash_looping(looping)  # what why ds and the failure action read


def deleted(grace: int, due: float) -> dict[str, Any]:
    """A running pod on n1 whose deletion is due at ``due`` (its deletionTimestamp, the
    time by which it should be gone) with ``grace`` seconds (deletionGracePeriodSeconds)."""
    p = pod(phase="Running")
    p["spec"]["nodeName"] = "n1"
    p["metadata"]["deletionTimestamp"] = meta.format_time(due)
    p["metadata"]["deletionGracePeriodSeconds"] = grace
    return p


def test_deleted_pod_is_removed_after_grace_but_not_while_it_has_finalizers() -> None:
    p = deleted(30, due=NOW + 30)  # deleted at NOW
    cfg = AgentConfig(grace=2)
    waiting = pod_step(cfg, p, node_exists=True, now=NOW + 1)
    assert not waiting.delete and waiting.wake_at is not None and waiting.wake_at > NOW + 2
    assert pod_step(cfg, p, node_exists=True, now=NOW + 2).delete
    p["metadata"]["finalizers"] = ["example.com/keep"]
    assert not pod_step(cfg, p, node_exists=True, now=NOW + 60).delete


def test_deleted_pod_is_removed_by_its_deletion_timestamp_when_that_comes_first() -> None:
    """deletionTimestamp is the deadline: a pod deleted at NOW with 30 s whose period a
    later delete shortened to 3 s is due at NOW + 3, before the agent's own 10 s."""
    p = deleted(3, due=NOW + 3)
    cfg = AgentConfig(grace=10)
    waiting = pod_step(cfg, p, node_exists=True, now=NOW + 2)
    assert not waiting.delete and waiting.wake_at == NOW + 3.001
    assert pod_step(cfg, p, node_exists=True, now=NOW + 3).delete


def test_pod_for_a_missing_node_is_left_alone() -> None:
    step = pod_step(AgentConfig(), pod(), node_exists=False, now=NOW)
    assert step.update is None and not step.delete


def test_node_reported_ready_then_heartbeat_only_when_due() -> None:
    cfg = AgentConfig(heartbeat=60)
    node = lifecycle.new_node("n1")
    first = node_step(cfg, node, NOW)
    assert first is not None
    ready = next(c for c in first["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True"
    assert node_step(cfg, first, NOW + 59) is None
    later = node_step(cfg, first, NOW + 61)
    assert later is not None
    again = next(c for c in later["status"]["conditions"] if c["type"] == "Ready")
    assert again["lastTransitionTime"] == ready["lastTransitionTime"]
    assert again["lastHeartbeatTime"] != ready["lastHeartbeatTime"]


def test_a_pressure_condition_that_changes_is_posted_at_once_and_keeps_its_transition() -> None:
    cfg = AgentConfig(heartbeat=300)
    calm = {"MemoryPressure": False, "DiskPressure": False, "PIDPressure": False}
    first = node_step(cfg, lifecycle.new_node("a"), 100.0, calm, lifecycle.READY_MESSAGE)
    assert first is not None
    assert [c["type"] for c in first["status"]["conditions"]] == [
        "MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
    assert node_step(cfg, first, 110.0, calm, lifecycle.READY_MESSAGE) is None  # no change
    full = node_step(cfg, first, 120.0, {**calm, "DiskPressure": True},
                     lifecycle.READY_MESSAGE)
    assert full is not None  # before the heartbeat is due
    disk, memory = (next(c for c in full["status"]["conditions"] if c["type"] == t)
                    for t in ("DiskPressure", "MemoryPressure"))
    assert (disk["status"], disk["reason"], disk["message"]) == (
        "True", "KubeletHasDiskPressure", "kubelet has disk pressure")
    assert disk["lastTransitionTime"] == meta.format_time(120.0)
    assert memory["lastTransitionTime"] == meta.format_time(100.0)  # unchanged
    assert memory["lastHeartbeatTime"] == meta.format_time(120.0)


def test_shards_split_nodes_between_agents_without_overlap() -> None:
    names = [f"node-{i:05d}" for i in range(1000)]
    a = {n for n in names if serves(AgentConfig(shard=0, shards=2), n)}
    b = {n for n in names if serves(AgentConfig(shard=1, shards=2), n)}
    assert a.isdisjoint(b) and a | b == set(names) and 300 < len(a) < 700


def test_a_simulated_agent_serves_no_machines_node() -> None:
    def node(runtime: str | None) -> dict:
        return {"status": {"nodeInfo": {"containerRuntimeVersion": runtime}}} \
            if runtime is not None else {"status": {}}
    assert lifecycle.simulated(node(lifecycle.SIMULATED_RUNTIME))
    assert lifecycle.simulated(node(None)) and lifecycle.simulated(None)  # made by hand, or not yet
    assert not lifecycle.simulated(node("process://daemonbus"))
    assert not lifecycle.simulated(node("docker://27.1.1"))
