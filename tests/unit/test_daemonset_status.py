"""Status (§f): counters, observedGeneration, when to write, requeue after minReadySeconds."""

from __future__ import annotations

from typing import Any

import pytest

from shared.daemonset import dsutil, planner, status
from tests.unit.daemonset_fixtures import (
    NOW,
    daemon_pod,
    make_ds,
    make_node,
    make_pod,
    snapshot,
)


def test_status_counts() -> None:
    ds = make_ds(
        pod_spec={"containers": [], "nodeSelector": {"color": "blue"}},
        min_ready_seconds=30,
        generation=4,
    )
    nodes = [make_node(f"n{i}") for i in range(5)] + [make_node("red", {"color": "red"})]
    pods = [
        daemon_pod(ds, "n0"),  # ready, available, updated
        make_pod(
            "old-n1", "n1", ds=ds, hash="old", ready_since=NOW - 5
        ),  # ready, not available, old
        daemon_pod(ds, "n2", ready=False),  # not ready, updated
        daemon_pod(ds, "n3", deleting=True),  # terminating still counts as scheduled
        # n4: no pod
        daemon_pod(ds, "red"),  # misscheduled
        daemon_pod(ds, "gone"),  # node missing from the list: ignored
    ]
    plan = planner.plan(snapshot(ds, nodes, pods))
    assert plan.status == {
        "desiredNumberScheduled": 5,
        "currentNumberScheduled": 4,
        "numberMisscheduled": 1,
        "numberReady": 3,
        "updatedNumberScheduled": 3,
        "numberAvailable": 2,
        "numberUnavailable": 3,
        "observedGeneration": 4,
    }
    assert plan.requeue_after == 30.0  # numberReady != numberAvailable


def test_status_leaves_out_zero_omitempty_counters() -> None:
    # k8s.io/api/apps/v1 DaemonSetStatus: observedGeneration, updatedNumberScheduled,
    # numberAvailable and numberUnavailable are `json:",omitempty"`; the other four are not
    ds = make_ds(pod_spec={"containers": [], "nodeSelector": {"color": "blue"}})
    plan = planner.plan(snapshot(ds, [make_node("n0", {"color": "red"})], []))
    assert plan.status == {
        "desiredNumberScheduled": 0,
        "currentNumberScheduled": 0,
        "numberMisscheduled": 0,
        "numberReady": 0,
        "observedGeneration": 1,
    }


@pytest.mark.parametrize(
    ("given", "shaped"),
    [
        # omitempty int fields: left out at 0, kept otherwise
        ({"numberReady": 0, "observedGeneration": 0, "updatedNumberScheduled": 0,
          "numberAvailable": 0, "numberUnavailable": 0},
         {"numberReady": 0}),
        ({"numberUnavailable": 2, "observedGeneration": 3}, {"numberUnavailable": 2,
                                                            "observedGeneration": 3}),
        # collisionCount *int32 omitempty: nil left out, 0 kept
        ({"collisionCount": None}, {}),
        ({"collisionCount": 0}, {"collisionCount": 0}),
        # conditions []DaemonSetCondition omitempty: an empty slice left out
        ({"conditions": []}, {}),
        ({"conditions": [{"type": "X"}]}, {"conditions": [{"type": "X"}]}),
        # not omitempty: always kept
        ({"currentNumberScheduled": 0, "desiredNumberScheduled": 0, "numberMisscheduled": 0},
         {"currentNumberScheduled": 0, "desiredNumberScheduled": 0, "numberMisscheduled": 0}),
    ],
)
def test_json_shape_follows_the_omitempty_tags(given: dict[str, Any],
                                               shaped: dict[str, Any]) -> None:
    assert status.json_shape(given) == shaped


def test_status_uses_oldest_pod_per_node() -> None:
    ds = make_ds()
    old_ready = make_pod("a", "n0", ds=ds, hash="old", created=NOW - 100)
    new_unready = daemon_pod(ds, "n0", name="b", ready=False, created=NOW - 10)
    plan = planner.plan(snapshot(ds, [make_node("n0")], [new_unready, old_ready]))
    assert plan.status is not None
    assert plan.status["numberReady"] == 1
    assert "updatedNumberScheduled" not in plan.status  # 0, omitempty


def test_status_terminal_deleted_pods_do_not_count() -> None:
    ds = make_ds()
    pod = daemon_pod(ds, "n0", phase="Failed", deleting=True)
    plan = planner.plan(snapshot(ds, [make_node("n0")], [pod]))
    assert plan.status is not None and plan.status["currentNumberScheduled"] == 0


def test_status_keeps_collision_count_and_conditions() -> None:
    ds = make_ds(
        status={"collisionCount": 2, "conditions": [{"type": "X"}], "observedGeneration": 1}
    )
    plan = planner.plan(snapshot(ds, []))
    assert plan.status is not None
    assert plan.status["collisionCount"] == 2
    assert plan.status["conditions"] == [{"type": "X"}]


def test_observed_generation_kept_while_expectations_pending() -> None:
    ds = make_ds(generation=5, status={"observedGeneration": 3})
    plan = planner.plan(snapshot(ds, [make_node("n0")], expectations_satisfied=False))
    assert plan.update_observed_generation is False
    assert plan.status is not None and plan.status["observedGeneration"] == 3
    plan = planner.plan(snapshot(ds, [make_node("n0")]))
    assert plan.update_observed_generation is True
    assert plan.status is not None and plan.status["observedGeneration"] == 5


def test_is_pod_updated() -> None:
    pod = make_pod("p", "n", hash="h", labels={dsutil.GENERATION_LABEL: "3"})
    assert status.is_pod_updated(pod, "h", None)
    assert status.is_pod_updated(pod, "other", 3)
    assert not status.is_pod_updated(pod, "other", 4)
    assert not status.is_pod_updated(pod, "other", None)
    bare = make_pod("p", "n", labels={})
    assert not status.is_pod_updated(bare, "", None)


def test_status_changed() -> None:
    computed = {c: 1 for c in status.COUNTERS} | {"observedGeneration": 2}
    same = dict(computed)
    assert not status.status_changed(same, computed, 2)
    assert status.status_changed(same, computed, 3)  # observedGeneration behind
    assert status.status_changed(same | {"numberReady": 0}, computed, 2)
    assert status.status_changed(None, computed, 1)
    assert not status.status_changed(same | {"observedGeneration": 9}, computed, 2)


def test_number_ready_status_requeue_only_with_min_ready_seconds() -> None:
    ds = make_ds()
    plan = planner.plan(snapshot(ds, [make_node("n0")], [daemon_pod(ds, "n0")]))
    assert plan.requeue_after is None
    slow = make_ds(min_ready_seconds=15)
    plan = planner.plan(
        snapshot(slow, [make_node("n0")], [daemon_pod(slow, "n0", ready_since=NOW - 1)])
    )
    assert plan.status is not None
    assert (plan.status["numberReady"], plan.status.get("numberAvailable", 0)) == (1, 0)
    assert plan.requeue_after == 15.0
