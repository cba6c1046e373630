"""syncDaemonSet (§c.1) through ``plan``: guards, expectations, determinism, reasons."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from shared.daemonset import planner
from shared.daemonset.types import EmitEvent, Plan
from tests.unit.daemonset_fixtures import (
    NOW,
    daemon_pod,
    make_ds,
    make_node,
    make_nodes,
    make_pod,
    rolling,
    snapshot,
)


def test_daemonset_not_found_deletes_expectations() -> None:
    plan = planner.plan(snapshot(None, make_nodes(2)))
    assert plan == Plan(key="default/foo", delete_expectations=True)


def test_empty_selector_selecting_all_does_nothing() -> None:
    ds = make_ds(selector={})
    plan = planner.plan(snapshot(ds, make_nodes(2), [make_pod("p", "node-0")]))
    assert plan.events == [
        EmitEvent(
            "Warning",
            "SelectingAll",
            "This daemon set is selecting all pods. A non-empty selector is required.",
        )
    ]
    assert plan.status is None and plan.sync_nodes is None
    assert plan.history == [] and plan.claims == []


def test_dont_do_anything_if_being_deleted() -> None:
    ds = make_ds()
    ds["metadata"]["deletionTimestamp"] = "2023-01-01T00:00:00Z"
    plan = planner.plan(snapshot(ds, make_nodes(2), [make_pod("orphan", "node-0")]))
    assert plan == Plan(key="default/foo")


@pytest.mark.parametrize("satisfied", [True, False])
def test_every_sync_claims_whether_or_not_expectations_are_satisfied(satisfied: bool) -> None:
    """Upstream's manage and updateDaemonSetStatus both begin with getNodesToDaemonPods
    (daemon_controller.go), which runs ClaimPods: the status-only pass of a sync waiting for
    expectations adopts orphans and releases pods that stopped matching, as a full sync
    does."""
    ds = make_ds()
    pods = [
        make_pod("orphan", "node-0"),
        make_pod("straying", "node-1", ds=ds, labels={"other": "x"}),
        make_pod("foreign", "node-2", labels={"other": "x"}),
    ]
    plan = planner.plan(snapshot(ds, make_nodes(3), pods, expectations_satisfied=satisfied))
    assert [(c.name, c.adopt) for c in plan.claims] == [("orphan", True), ("straying", False)]


def test_a_recreated_pod_gets_a_new_name_a_replayed_decision_the_same() -> None:
    """generateName (upstream's pod control): every creation is named anew, so a pod deleted
    and created again on its node is another name; the same decision (snapshot position)
    gives the same names, which is what makes a retried or replayed create idempotent."""
    ds = make_ds()
    first = dataclasses.replace(snapshot(ds, make_nodes(1)), position="1700000000000-5")
    names = [c.pod["metadata"]["name"] for c in _creates(planner.plan(first))]
    assert names == [c.pod["metadata"]["name"] for c in _creates(planner.plan(first))]
    # the pod was created, then deleted: the next decision reads through the deletion
    later = dataclasses.replace(first, position="1700000004000-0")
    again = [c.pod["metadata"]["name"] for c in _creates(planner.plan(later))]
    assert len(again) == 1 and again != names


def _creates(plan: Plan) -> list[Any]:
    assert plan.sync_nodes is not None
    return list(plan.sync_nodes.creates)


def test_expectations_pending_only_status() -> None:
    ds = make_ds()
    orphan = make_pod("orphan", "node-0")
    plan = planner.plan(snapshot(ds, make_nodes(3), [orphan], expectations_satisfied=False))
    assert plan.sync_nodes is None and plan.cleanup == [] and plan.events == []
    assert plan.status is not None and plan.status["desiredNumberScheduled"] == 3
    assert plan.update_observed_generation is False
    assert [c.name for c in plan.claims] == ["orphan"]  # the status pass claims too
    assert plan.reasons == {
        "node-1": "waiting for earlier pod creates/deletes to be observed",
        "node-2": "waiting for earlier pod creates/deletes to be observed",
    }


def test_plan_is_deterministic_and_does_not_modify_the_snapshot() -> None:
    ds = make_ds(strategy=rolling(0, 2))
    nodes = make_nodes(6)
    pods = [make_pod(f"old-{i}", f"node-{i}", ds=ds, hash="old") for i in range(4)]
    pods += [make_pod(f"orphan-{i}", f"node-{i}") for i in (4, 5)]
    snap = snapshot(ds, nodes, pods)
    before = copy.deepcopy((snap.ds, snap.nodes, snap.pods, snap.revisions))
    first = planner.plan(snap)
    second = planner.plan(snapshot(copy.deepcopy(ds), list(reversed(nodes)), list(reversed(pods))))
    assert first == second
    assert [c.name for c in first.claims] == ["orphan-4", "orphan-5"]
    assert (snap.ds, snap.nodes, snap.pods, snap.revisions) == before


def test_reasons_for_nodes_without_pods() -> None:
    ds = make_ds(pod_spec={"containers": [], "nodeSelector": {"color": "blue"}})
    nodes = [
        make_node("has-pod"),
        make_node("red", {"color": "red"}),
        make_node("terminating"),
        make_node("new"),
    ]
    pods = [daemon_pod(ds, "has-pod"), daemon_pod(ds, "terminating", deleting=True)]
    plan = planner.plan(snapshot(ds, nodes, pods))
    assert plan.reasons == {
        "red": "node selector does not match",
        "terminating": "waiting for the terminating pod to go away",
        "new": "pod creation planned",
    }


def test_requeue_after_is_the_earliest_of_backoff_and_min_ready() -> None:
    ds = make_ds(min_ready_seconds=30)
    from shared.daemonset.types import BackoffEntry

    key = f"{ds['metadata']['uid']}/0/node-0"
    pods = [
        daemon_pod(ds, "node-0", phase="Failed"),
        daemon_pod(ds, "node-1", ready_since=NOW - 1),
    ]
    plan = planner.plan(
        snapshot(ds, make_nodes(2), pods, backoff={key: BackoffEntry(4.0, NOW - 1)})
    )
    assert plan.requeue_after == 4.0


def test_its_pods_get_their_priority_from_their_class_as_the_api_server_admits_them() -> None:
    """The Priority admission plugin, which upstream applies to each pod the controller
    posts: a class named is resolved from the snapshot's PriorityClasses (a built-in one
    without its object); one that does not exist refuses every create."""
    ds = make_ds()
    ds["spec"]["template"]["spec"]["priorityClassName"] = "agents"
    classes = {"agents": {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                          "metadata": {"name": "agents"}, "value": 900,
                          "preemptionPolicy": "Never"}}
    snap = dataclasses.replace(snapshot(ds, make_nodes(2)), priority_classes=classes)
    specs = [c.pod["spec"] for c in _creates(planner.plan(snap))]
    assert [(s["priority"], s["preemptionPolicy"]) for s in specs] == [(900, "Never")] * 2

    refused = planner.plan(snapshot(ds, make_nodes(2)))
    assert _creates(refused) == []
    assert EmitEvent("Warning", "FailedCreate", 'Error creating: pods "foo-" is forbidden: '
                     "no PriorityClass with name agents was found") in refused.events

    ds["spec"]["template"]["spec"]["priorityClassName"] = "system-node-critical"
    specs = [c.pod["spec"] for c in _creates(planner.plan(snapshot(ds, make_nodes(1))))]
    assert [(s["priority"], s["preemptionPolicy"]) for s in specs] == [
        (2000001000, "PreemptLowerPriority")]
