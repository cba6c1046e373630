"""RollingUpdate (§d): budget, maxSurge == 0 and maxSurge > 0 paths, through ``plan``."""

from __future__ import annotations

from typing import Any

import pytest

from shared.daemonset import dsutil, planner, rollout
from shared.daemonset.types import Plan
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

Obj = dict[str, Any]


def created(plan: Plan) -> list[str]:
    assert plan.sync_nodes is not None
    return sorted(c.node for c in plan.sync_nodes.creates)


def deleted(plan: Plan) -> list[str]:
    assert plan.sync_nodes is not None
    return sorted(d.name for d in plan.sync_nodes.deletes)


def old_pod(ds: Obj, node: str, **kwargs: Any) -> Obj:
    return make_pod(f"old-{node}", node, ds=ds, hash="old-hash", **kwargs)


@pytest.mark.parametrize(
    ("value", "total", "expected"),
    [
        (1, 10, 1),
        ("50%", 3, 2),
        ("10%", 15, 2),
        ("1%", 1, 1),
        ("0%", 5, 0),
        ("100%", 2, 2),
        (0, 5, 0),
    ],
)
def test_scaled(value: Any, total: int, expected: int) -> None:
    assert rollout._scaled(value, total) == expected


@pytest.mark.parametrize("value", [None, "5", "x%", "", True, 1.5])
def test_scaled_errors(value: Any) -> None:
    with pytest.raises(ValueError):
        rollout._scaled(value, 10)


@pytest.mark.parametrize(
    ("strategy", "desired", "expected"),
    [
        (rolling(1, 0), 5, (0, 1)),
        (rolling("50%", 0), 5, (0, 3)),
        (rolling(0, "20%"), 5, (1, 0)),
        (rolling(0, 0), 5, (0, 1)),  # both zero: fallback to one unavailable
        (rolling(0, 0), 0, (0, 0)),
        ({"type": "OnDelete"}, 5, (0, 1)),
        (None, 5, (0, 1)),  # undefaulted manifest: maxUnavailable 1, maxSurge 0
        ({"type": "RollingUpdate"}, 5, (0, 1)),
    ],
)
def test_get_unavailable_numbers(
    strategy: Obj | None, desired: int, expected: tuple[int, int]
) -> None:
    assert rollout.budget(make_ds(strategy=strategy), desired) == expected


def test_allows_surge() -> None:
    assert rollout.allows_surge(make_ds(strategy=rolling(0, 1)))
    assert rollout.allows_surge(make_ds(strategy=rolling(0, "1%")))
    assert not rollout.allows_surge(make_ds(strategy=rolling(1, 0)))
    assert not rollout.allows_surge(make_ds(strategy={"type": "OnDelete"}))
    assert not rollout.allows_surge(make_ds())


def test_rolling_update_max_unavailable_deletes_within_budget() -> None:
    ds = make_ds(strategy=rolling(2, 0))
    nodes = make_nodes(5)
    pods = [old_pod(ds, f"node-{i}") for i in range(5)]
    plan = planner.plan(snapshot(ds, nodes, pods))
    assert deleted(plan) == ["old-node-0", "old-node-1"]
    assert created(plan) == []
    assert {n: r for n, r in plan.reasons.items()} == {
        f"node-{i}": "rolling update budget exhausted" for i in range(2, 5)
    }


def test_rolling_update_max_unavailable_percent() -> None:
    ds = make_ds(strategy=rolling("50%", 0))
    pods = [old_pod(ds, f"node-{i}") for i in range(3)]
    assert len(deleted(planner.plan(snapshot(ds, make_nodes(3), pods)))) == 2


def test_rolling_update_max_unavailable_counts_unavailable_new_pods() -> None:
    ds = make_ds(strategy=rolling(2, 0))
    pods = [daemon_pod(ds, "node-0", ready=False), daemon_pod(ds, "node-1", ready=False)]
    pods += [old_pod(ds, f"node-{i}") for i in range(2, 5)]
    plan = planner.plan(snapshot(ds, make_nodes(5), pods))
    assert deleted(plan) == [] and created(plan) == []


def test_rolling_update_max_unavailable_min_ready_seconds() -> None:
    ds = make_ds(strategy=rolling(1, 0), min_ready_seconds=30)
    pods = [daemon_pod(ds, "node-0", ready_since=NOW - 20), old_pod(ds, "node-1")]
    assert deleted(planner.plan(snapshot(ds, make_nodes(2), pods))) == []
    later = snapshot(ds, make_nodes(2), pods, now=NOW + 11)
    assert deleted(planner.plan(later)) == ["old-node-1"]


def test_rolling_update_max_unavailable_all_old_pods_not_ready() -> None:
    ds = make_ds(strategy=rolling(1, 0))
    pods = [old_pod(ds, f"node-{i}", ready=False) for i in range(4)]
    plan = planner.plan(snapshot(ds, make_nodes(4), pods))
    assert len(deleted(plan)) == 4  # unavailable old pods are always replaced


@pytest.mark.parametrize(
    ("max_unavailable", "unhealthy", "expected"),
    [
        (1, ["node-1"], ["old-node-1"]),  # the unhealthy one uses the whole budget
        (2, ["node-1"], ["old-node-0", "old-node-1"]),  # one left for a healthy pod
        (2, ["node-1", "node-3"], ["old-node-1", "old-node-3"]),
        (1, ["node-0", "node-3"], ["old-node-0", "old-node-3"]),  # replaced beyond the budget
    ],
)
def test_rolling_update_old_unhealthy_pods_count_against_max_unavailable(
    max_unavailable: int, unhealthy: list[str], expected: list[str]
) -> None:
    # kubernetes#123233 (1.31, rollingUpdate in pkg/controller/daemon/update.go): an old pod
    # that is not available is replaced whatever the budget, and counts as unavailable, so
    # it leaves that much less of maxUnavailable for available old pods (before the fix a
    # rollout took down maxUnavailable healthy pods beside every unhealthy one)
    ds = make_ds(strategy=rolling(max_unavailable, 0))
    pods = [old_pod(ds, f"node-{i}", ready=f"node-{i}" not in unhealthy) for i in range(4)]
    plan = planner.plan(snapshot(ds, make_nodes(4), pods))
    assert deleted(plan) == expected
    assert created(plan) == []


def test_rolling_update_max_unavailable_empty_node_uses_budget() -> None:
    ds = make_ds(strategy=rolling(1, 0))
    # a node that should run but has only a terminating pod counts as unavailable
    pods = [daemon_pod(ds, "node-0", deleting=True), old_pod(ds, "node-1")]
    plan = planner.plan(snapshot(ds, make_nodes(2), pods))
    assert deleted(plan) == [] and created(plan) == []


def test_rolling_update_template_generation_label_counts_as_updated() -> None:
    ds = make_ds(strategy=rolling(1, 0), template_generation=4)
    legacy = make_pod(
        "legacy",
        "node-0",
        ds=ds,
        labels={"name": "simple-daemon", "type": "production", dsutil.GENERATION_LABEL: "4"},
    )
    plan = planner.plan(snapshot(ds, make_nodes(1), [legacy]))
    assert deleted(plan) == []
    assert plan.status is not None and plan.status["updatedNumberScheduled"] == 1


def test_rolling_update_no_template_change_does_nothing() -> None:
    ds = make_ds(strategy=rolling(1, 0))
    pods = [daemon_pod(ds, f"node-{i}") for i in range(3)]
    plan = planner.plan(snapshot(ds, make_nodes(3), pods))
    assert deleted(plan) == [] and created(plan) == [] and plan.reasons == {}


def test_rolling_update_skipped_when_manage_acts() -> None:
    ds = make_ds(strategy=rolling(5, 0))
    pods = [old_pod(ds, f"node-{i}") for i in range(3)]
    plan = planner.plan(snapshot(ds, make_nodes(4), pods))
    assert created(plan) == ["node-3"] and deleted(plan) == []


def test_on_delete_never_replaces_old_pods() -> None:
    ds = make_ds(strategy={"type": "OnDelete"})
    pods = [old_pod(ds, f"node-{i}") for i in range(3)]
    plan = planner.plan(snapshot(ds, make_nodes(3), pods))
    assert deleted(plan) == [] and created(plan) == []


def test_rolling_update_max_surge_creates_within_budget() -> None:
    ds = make_ds(strategy=rolling(0, 2))
    pods = [old_pod(ds, f"node-{i}") for i in range(5)]
    plan = planner.plan(snapshot(ds, make_nodes(5), pods))
    assert created(plan) == ["node-0", "node-1"]
    assert deleted(plan) == []
    assert sorted(n for n, r in plan.reasons.items() if r == "rolling update budget exhausted") == [
        "node-2",
        "node-3",
        "node-4",
    ]


def test_rolling_update_max_surge_waits_for_new_pods() -> None:
    ds = make_ds(strategy=rolling(0, 1))
    pods = [old_pod(ds, f"node-{i}") for i in range(3)]
    pods.append(daemon_pod(ds, "node-0", ready=False))
    plan = planner.plan(snapshot(ds, make_nodes(3), pods))
    assert created(plan) == [] and deleted(plan) == []


def test_rolling_update_max_surge_deletes_old_when_new_available() -> None:
    ds = make_ds(strategy=rolling(0, 1))
    pods = [old_pod(ds, f"node-{i}") for i in range(3)]
    pods.append(daemon_pod(ds, "node-0"))
    plan = planner.plan(snapshot(ds, make_nodes(3), pods))
    # the surge rules of manage already delete the old pod (§c.4), as the rollout would
    assert deleted(plan) == ["old-node-0"]


def test_rolling_update_max_surge_all_old_pods_not_ready() -> None:
    ds = make_ds(strategy=rolling(0, 1))
    pods = [old_pod(ds, f"node-{i}", ready=False) for i in range(4)]
    plan = planner.plan(snapshot(ds, make_nodes(4), pods))
    assert created(plan) == [f"node-{i}" for i in range(4)]
    assert deleted(plan) == []


def test_rolling_update_max_surge_percent() -> None:
    ds = make_ds(strategy=rolling(0, "50%"))
    pods = [old_pod(ds, f"node-{i}") for i in range(3)]
    assert len(created(planner.plan(snapshot(ds, make_nodes(3), pods)))) == 2


def test_rolling_update_max_surge_moves_placement_keeping_availability() -> None:
    ds = make_ds(strategy=rolling(0, 1))
    sunset = make_node("node-a", taints=[{"key": "drain", "effect": "NoSchedule"}])
    nodes = [sunset, make_node("node-b")]
    pods = [old_pod(ds, "node-a"), daemon_pod(ds, "node-b")]
    plan = planner.plan(snapshot(ds, nodes, pods))
    assert deleted(plan) == ["old-node-a"]


def test_rolling_update_max_surge_keeps_sunset_pod_while_needed() -> None:
    ds = make_ds(strategy=rolling(0, 1))
    sunset = make_node("node-a", taints=[{"key": "drain", "effect": "NoSchedule"}])
    nodes = [sunset, make_node("node-b")]
    pods = [old_pod(ds, "node-a"), daemon_pod(ds, "node-b", ready=False)]
    assert deleted(planner.plan(snapshot(ds, nodes, pods))) == []


def test_rolling_update_max_surge_old_pod_on_missing_node_is_an_error() -> None:
    ds = make_ds(strategy=rolling(0, 1))
    pods = [daemon_pod(ds, "node-0"), old_pod(ds, "gone")]
    plan = planner.plan(snapshot(ds, make_nodes(1), pods))
    assert plan.error == 'couldn\'t get node for nodeName "gone": node "gone" not found'
    assert created(plan) == [] and deleted(plan) == []
    assert plan.cleanup == [] and plan.status is not None


def test_rolling_update_invalid_budget_is_an_error() -> None:
    ds = make_ds(strategy=rolling("abc", 0))
    plan = planner.plan(snapshot(ds, make_nodes(1), [old_pod(ds, "node-0")]))
    assert plan.error.startswith(
        "couldn't get unavailable numbers: invalid value for MaxUnavailable"
    )
    assert plan.status is not None
