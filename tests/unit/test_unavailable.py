"""Why a DaemonSet's pods are unavailable (``shared.daemonset.unavailable``), through ``plan``
on a fake clock: each cause, and the first one that applies."""

from __future__ import annotations

from typing import Any

import pytest

from shared.daemonset import planner, unavailable
from tests.unit.daemonset_fixtures import NOW, daemon_pod, make_ds, make_node, rolling, snapshot

Obj = dict[str, Any]


def node(name: str, ready: str | None = None, unreachable: bool = False) -> Obj:
    n = make_node(name)
    if ready is not None:
        n["status"] = {"conditions": [{"type": "Ready", "status": ready}]}
    if unreachable:
        n["spec"]["taints"] = [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]
    return n


def crash_looping(ds: Obj, name: str) -> Obj:
    pod = daemon_pod(ds, name, ready=False)
    pod["status"]["containerStatuses"] = [
        {"name": "foo", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]
    return pod


@pytest.mark.parametrize(("make", "reason"), [
    (lambda ds, n: [daemon_pod(ds, n, ready=False)], unavailable.NOT_READY),
    (lambda ds, n: [daemon_pod(ds, n, ready=False, phase="Pending")], unavailable.PENDING),
    (lambda ds, n: [daemon_pod(ds, None, ready=False, phase="Pending", affinity_node=n)],
     unavailable.NOT_BOUND),
    (lambda ds, n: [crash_looping(ds, n)], unavailable.CRASH_LOOPING),
    (lambda ds, n: [daemon_pod(ds, n, ready_since=NOW - 5)], unavailable.MIN_READY),
    (lambda ds, n: [daemon_pod(ds, n, deleting=True, ready=False)], unavailable.TERMINATING),
])
def test_each_pod_cause(make: Any, reason: str) -> None:
    ds = make_ds(strategy=rolling(1, 0), min_ready_seconds=30)
    plan = planner.plan(snapshot(ds, [node("node-0"), node("node-1")],
                                 [*make(ds, "node-0"), daemon_pod(ds, "node-1")]))
    assert plan.unavailable == {reason: ["node-0"]}


def test_node_causes_come_first_and_nodes_are_named_in_order() -> None:
    ds = make_ds(strategy=rolling(1, 0))
    nodes = [node("node-0", ready="False"), node("node-1", ready="Unknown"),
             node("node-2", unreachable=True), node("node-3"), node("node-4")]
    pods = [daemon_pod(ds, f"node-{i}", ready=False) for i in range(4)]
    pods.append(daemon_pod(ds, "node-4"))
    plan = planner.plan(snapshot(ds, nodes, pods, expectations_satisfied=False))
    assert plan.unavailable == {unavailable.NODE_NOT_READY: ["node-0"],
                                unavailable.NODE_UNREACHABLE: ["node-1", "node-2"],
                                unavailable.NOT_READY: ["node-3"]}


def test_no_pod_and_all_available() -> None:
    ds = make_ds(strategy=rolling(1, 0))
    plan = planner.plan(snapshot(ds, [node("node-0")], [], expectations_satisfied=False))
    assert plan.unavailable == {unavailable.NO_POD: ["node-0"]}
    fine = planner.plan(snapshot(ds, [node("node-0")], [daemon_pod(ds, "node-0")]))
    assert fine.unavailable == {}
