"""The node lifecycle controller's decisions (shared.model.nodelifecycle), with a fake clock:
when a node counts as lost, what its Ready condition and taints become, when they go."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.node_agent import lifecycle
from shared.model import meta, nodelifecycle, podutil
from shared.model.errors import CorruptEntryError
from shared.model.nodelifecycle import NOT_READY, UNREACHABLE, Config, decide

T0 = 1_700_000_000.0
CFG = Config(monitor_grace=40.0, startup_grace=60.0)


def ready_node(name: str, zone: str = "", at: float = T0) -> dict[str, Any]:
    node = lifecycle.new_node(name, {"topology.kubernetes.io/zone": zone} if zone else None)
    node["metadata"]["creationTimestamp"] = meta.format_time(at)
    beat = lifecycle.node_step(lifecycle.AgentConfig(), node, at)
    assert beat is not None
    return beat


def controller_taints(node: dict[str, Any]) -> set[tuple[str, str]]:
    return {(t["key"], t["effect"]) for t in (node.get("spec") or {}).get("taints") or []
            if t["key"] in nodelifecycle.CONTROLLER_TAINTS}


def look(nodes: list[dict[str, Any]], leases: dict[str, str | None],
         saved: dict[str, nodelifecycle.Health], now: float) -> nodelifecycle.Decision:
    """``leases``: each node's lease as a word, the same word the same renew time."""
    return decide(nodes, {n: None if v is None else nodelifecycle.NodeLease(
        int.from_bytes(v.encode(), "big")) for n, v in leases.items()}, saved, now, CFG)


def test_pressure_and_a_cordon_taint_the_node_no_schedule_while_they_last() -> None:
    calm = {"MemoryPressure": False, "DiskPressure": False, "PIDPressure": False}
    node = lifecycle.node_step(lifecycle.AgentConfig(), ready_node("a"), T0, calm)
    assert node is not None
    d = look([node], {"a": "1"}, {}, T0)
    assert not d.writes
    pressed = lifecycle.node_step(lifecycle.AgentConfig(), node, T0 + 1,
                                  {**calm, "MemoryPressure": True, "DiskPressure": True})
    assert pressed is not None
    pressed["spec"]["unschedulable"] = True
    d = look([pressed], {"a": "2"}, d.health, T0 + 1)
    assert controller_taints(d.writes["a"]) == {
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule")}
    tainted = d.writes["a"]
    calmed = lifecycle.node_step(lifecycle.AgentConfig(), tainted, T0 + 2, calm)
    assert calmed is not None
    calmed["spec"]["unschedulable"] = False
    d = look([calmed], {"a": "3"}, d.health, T0 + 2)
    assert controller_taints(d.writes["a"]) == set()


def test_node_whose_lease_stops_is_ready_unknown_and_tainted_unreachable_after_grace() -> None:
    a, b = ready_node("a"), ready_node("b")
    d = look([a, b], {"a": "1", "b": "1"}, {}, T0)
    assert not d.writes
    # b keeps renewing, a does not
    d = look([a, b], {"a": "1", "b": "2"}, d.health, T0 + 30)
    assert not d.writes
    d = look([a, b], {"a": "1", "b": "3"}, d.health, T0 + 40)
    assert not d.writes  # exactly the grace period: not yet
    d = look([a, b], {"a": "1", "b": "4"}, d.health, T0 + 41)
    assert set(d.writes) == {"a"} and d.lost == ["a"]
    new = d.writes["a"]
    ready = podutil.ready_condition(new)
    assert ready is not None
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.")
    assert ready["lastTransitionTime"] == meta.format_time(T0 + 41)
    # the heartbeat time stays the agent's last one
    assert ready["lastHeartbeatTime"] == meta.format_time(T0)
    assert controller_taints(new) == {(UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute")}
    assert all(t["timeAdded"] == meta.format_time(T0 + 41) for t in new["spec"]["taints"])


def test_lost_node_heard_from_again_keeps_no_taint_once_its_agent_reports_ready() -> None:
    a, b = ready_node("a"), ready_node("b")
    d = look([a, b], {"a": "1", "b": "1"}, {}, T0)
    d = look([a, b], {"a": "1", "b": "2"}, d.health, T0 + 50)
    lost = d.writes["a"]
    # the lease comes back: nothing to write while Ready is still Unknown but heard from
    d2 = look([lost, b], {"a": "2", "b": "3"}, d.health, T0 + 51)
    assert "a" not in d2.lost
    # its agent reports Ready True again: the controller's taints go
    back = lifecycle.node_step(lifecycle.AgentConfig(), lost, T0 + 52)
    assert back is not None and nodelifecycle.ready_status(back) == "True"
    d3 = look([back, b], {"a": "3", "b": "4"}, d2.health, T0 + 53)
    assert controller_taints(d3.writes["a"]) == set()
    assert "taints" not in d3.writes["a"]["spec"]


def test_other_taints_are_kept_in_place() -> None:
    a, b = ready_node("a"), ready_node("b")
    a["spec"]["taints"] = [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]
    d = look([a, b], {"a": "1", "b": "1"}, {}, T0)
    d = look([a, b], {"a": "1", "b": "2"}, d.health, T0 + 41)
    assert d.writes["a"]["spec"]["taints"][0] == {"key": "dedicated", "value": "infra",
                                                  "effect": "NoSchedule"}
    assert len(d.writes["a"]["spec"]["taints"]) == 3


def test_a_heartbeat_in_the_ready_condition_counts_like_a_lease_renewal() -> None:
    a, b = ready_node("a"), ready_node("b")
    d = look([a, b], {}, {}, T0)
    a2 = lifecycle.node_step(lifecycle.AgentConfig(heartbeat=1), a, T0 + 30)
    b2 = lifecycle.node_step(lifecycle.AgentConfig(heartbeat=1), b, T0 + 30)
    assert a2 is not None and b2 is not None
    d = look([a2, b2], {}, d.health, T0 + 60)
    assert not d.writes


def test_never_posted_node_waits_the_startup_grace_and_is_not_tainted_not_ready() -> None:
    fresh = lifecycle.new_node("fresh")  # Ready False "waiting for a node agent"
    b = ready_node("b")
    d = look([fresh, b], {"b": "1"}, {}, T0)
    assert not d.writes
    d = look([fresh, b], {"b": "2"}, d.health, T0 + 59)
    assert not d.writes
    d = look([fresh, b], {"b": "3"}, d.health, T0 + 61)
    assert nodelifecycle.ready_status(d.writes["fresh"]) == "Unknown"
    assert d.lost == []  # it was never Ready: no NodeNotReady
    assert controller_taints(d.writes["fresh"]) == {(UNREACHABLE, "NoSchedule"),
                                                    (UNREACHABLE, "NoExecute")}


def test_node_reporting_ready_false_is_tainted_not_ready_at_once() -> None:
    a, b = ready_node("a"), ready_node("b")
    cond = podutil.ready_condition(a)
    assert cond is not None
    cond.update(status="False", reason="KubeletNotReady")
    d = look([a, b], {"a": "1", "b": "1"}, {}, T0)
    assert controller_taints(d.writes["a"]) == {(NOT_READY, "NoSchedule"),
                                                (NOT_READY, "NoExecute")}
    assert d.lost == []


def test_zone_with_no_ready_node_gets_no_noexecute_taint() -> None:
    """stateFullDisruption: every node of the zone lost at once is the control plane's
    problem, not theirs: nothing is evicted there; the other zone is handled as usual."""
    a1, a2 = ready_node("a1", "za"), ready_node("a2", "za")
    b1, b2 = ready_node("b1", "zb"), ready_node("b2", "zb")
    nodes = [a1, a2, b1, b2]
    d = look(nodes, {}, {}, T0)
    d = look(nodes, {"b2": "x"}, d.health, T0 + 41)
    assert controller_taints(d.writes["a1"]) == {(UNREACHABLE, "NoSchedule")}
    assert controller_taints(d.writes["a2"]) == {(UNREACHABLE, "NoSchedule")}
    assert controller_taints(d.writes["b1"]) == {(UNREACHABLE, "NoSchedule"),
                                                 (UNREACHABLE, "NoExecute")}
    assert "b2" not in d.writes


def test_unchanged_lost_node_is_not_written_again() -> None:
    a, b = ready_node("a"), ready_node("b")
    d = look([a, b], {"a": "1", "b": "1"}, {}, T0)
    d = look([a, b], {"a": "1", "b": "2"}, d.health, T0 + 41)
    lost = d.writes["a"]
    d = look([lost, b], {"a": "1", "b": "3"}, d.health, T0 + 50)
    assert d.writes == {} and d.lost == []


def test_a_new_controller_counts_every_node_as_heard_from_at_its_first_look() -> None:
    a, b = ready_node("a", at=T0 - 3600), ready_node("b")
    d = look([a, b], {"a": "old", "b": "1"}, {}, T0)
    assert not d.writes


def test_a_node_lease_reads_back_and_refuses_a_later_version_or_garbage() -> None:
    lease = nodelifecycle.NodeLease(1_700_000_000_123)
    assert lease.to_value() == "1700000000123"  # the value agents have always written
    assert nodelifecycle.NodeLease.from_value(lease.to_value()) == lease
    for raw, error in (("2:{}", "unsupported version '2'"), ("", "not a time"),
                       ("-5", "not a time"), ("1e9", "not a time"), ("١٢", "not a time")):
        with pytest.raises(CorruptEntryError, match=error):
            nodelifecycle.NodeLease.from_value(raw)


def test_a_monitor_gives_a_node_heard_by_its_lease_alone_the_grace_of_its_kind() -> None:
    """A node whose lease alone changed is heard from without being decided again: its
    deadline is then the startup grace away when its agent never posted (60 s), the
    monitor grace away when it did (40 s), as a look at every node decides."""
    monitor = nodelifecycle.Monitor(CFG)
    fresh, posted = lifecycle.new_node("fresh"), ready_node("posted")
    nodes = {"fresh": fresh, "posted": posted}
    lease = {n: nodelifecycle.NodeLease(1) for n in nodes}
    assert not monitor.look(nodes, lease, T0).writes
    renewed = {n: nodelifecycle.NodeLease(2) for n in nodes}
    assert not monitor.look(nodes, renewed, T0 + 30).writes  # both heard at T0 + 30
    d = monitor.look(nodes, {}, T0 + 75)
    assert set(d.writes) == {"posted"}  # 45 s unheard: past 40 s, not 60 s
    d = monitor.look({**nodes, "posted": d.writes["posted"]}, {}, T0 + 91)
    assert set(d.writes) == {"fresh"} and d.lost == []
    assert nodelifecycle.ready_status(d.writes["fresh"]) == "Unknown"


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32))
def test_a_monitor_decides_what_a_look_at_every_node_decides(seed: int) -> None:
    """The monitor decides afresh only the nodes that changed, are due or are in a zone
    whose disruption turned; over random clusters and event sequences (leases renewed,
    stopped, garbled or gone, heartbeats, Ready False, other taints, nodes added and
    removed, writes applied or lost, looks early and late) each look, given the leases that
    changed (as ``LeaseWatch`` reads them), equals ``decide`` of every node and lease from
    the same saved health."""
    rnd = random.Random(seed)
    monitor = nodelifecycle.Monitor(CFG)
    now = T0
    nodes: dict[str, dict[str, Any]] = {}
    leases: dict[str, nodelifecycle.NodeLease | None] = {}
    zones = ["", "za", "zb"]

    def add(name: str) -> None:
        nodes[name] = (ready_node(name, rnd.choice(zones), now) if rnd.random() < 0.8
                       else lifecycle.new_node(name))
        leases[name] = nodelifecycle.NodeLease(int(now * 1000)) if rnd.random() < 0.7 else None

    for i in range(rnd.randint(1, 8)):
        add(f"n{i}")
    saved: dict[str, nodelifecycle.Health] = {}
    given: dict[str, nodelifecycle.NodeLease | None] = {}  # the leases as at the last look
    for step in range(40):
        reference = decide(list(nodes.values()), dict(leases), saved, now, CFG)
        changed = {n: v for n, v in leases.items() if n not in given or given[n] != v}
        given = dict(leases)
        got = monitor.look(dict(nodes), changed, now)
        assert got.writes == reference.writes, step
        assert sorted(got.lost) == sorted(reference.lost), step
        assert dict(got.health) == reference.health, step
        saved = reference.health
        for name, new in reference.writes.items():
            if rnd.random() < 0.8:  # written; else the write was lost
                nodes[name] = new
        now += rnd.choice([0.5, 5.0, 5.0, 10.0, 25.0, 41.0])
        for name in list(nodes):
            roll = rnd.random()
            if roll < 0.4:
                leases[name] = nodelifecycle.NodeLease(int(now * 1000))
            elif roll < 0.45:
                leases[name] = None
            elif roll < 0.5:
                beat = lifecycle.node_step(lifecycle.AgentConfig(heartbeat=1), nodes[name], now)
                if beat is not None:
                    nodes[name] = beat
            elif roll < 0.53:
                node = copy.deepcopy(nodes[name])
                cond = podutil.ready_condition(node)
                if cond is not None:
                    cond.update(status="False", reason="KubeletNotReady")
                    nodes[name] = node
            elif roll < 0.55:
                node = copy.deepcopy(nodes[name])
                node["spec"]["taints"] = [*(node["spec"].get("taints") or []),
                                          {"key": f"k{step}", "effect": "NoSchedule"}]
                nodes[name] = node
            elif roll < 0.57:
                del nodes[name], leases[name]
        if rnd.random() < 0.2:
            add(f"m{step}")
