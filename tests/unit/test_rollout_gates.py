"""Rollout gates (``rollout.daemonbus.io/paused|partition|node-selector``) through ``plan``:
which old pods a rolling update replaces, on a fake clock; and their validation."""

from __future__ import annotations

from typing import Any

import pytest

from shared.daemonset import gates, planner
from shared.model import rolloutopts, validation
from tests.unit.daemonset_fixtures import (
    NOW,
    daemon_pod,
    make_ds,
    make_node,
    make_nodes,
    rolling,
    snapshot,
)
from tests.unit.test_daemonset_rollout import created, deleted, old_pod

Obj = dict[str, Any]


def gated(strategy: Obj, **annotations: str) -> Obj:
    ds = make_ds(strategy=strategy)
    ds["metadata"]["annotations"].update(
        {rolloutopts.PREFIX + k.replace("_", "-"): v for k, v in annotations.items()})
    return ds


# ---- paused ----------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", [rolling(2, 0), rolling(0, 2)])
def test_paused_replaces_no_old_pod(strategy: Obj) -> None:
    ds = gated(strategy, paused="true")
    pods = [old_pod(ds, f"node-{i}") for i in range(4)]
    plan = planner.plan(snapshot(ds, make_nodes(4), pods))
    assert deleted(plan) == [] and created(plan) == []
    assert plan.reasons == {f"node-{i}": gates.REASON_PAUSED for i in range(4)}


@pytest.mark.parametrize("strategy", [rolling(1, 0), rolling(0, 1)])
def test_paused_keeps_unavailable_old_pods(strategy: Obj) -> None:
    # unpaused, an unavailable old pod is replaced whatever the budget
    ds = gated(strategy, paused="true")
    pods = [old_pod(ds, f"node-{i}", ready=False) for i in range(3)]
    plan = planner.plan(snapshot(ds, make_nodes(3), pods))
    assert deleted(plan) == [] and created(plan) == []


def test_paused_new_node_gets_the_current_revision() -> None:
    ds = gated(rolling(1, 0), paused="true")
    pods = [old_pod(ds, f"node-{i}") for i in range(2)]
    plan = planner.plan(snapshot(ds, make_nodes(3), pods))
    assert created(plan) == ["node-2"] and deleted(plan) == []
    assert plan.sync_nodes is not None
    pod = plan.sync_nodes.creates[0].pod
    assert pod["metadata"]["labels"]["controller-revision-hash"] == plan.hash


def test_paused_mid_surge_keeps_the_old_pod_beside_an_available_new_one() -> None:
    ds = gated(rolling(0, 1), paused="true")
    pods = [old_pod(ds, "node-0"), daemon_pod(ds, "node-0", ready=False), old_pod(ds, "node-1")]
    plan = planner.plan(snapshot(ds, make_nodes(2), pods))
    assert deleted(plan) == [] and created(plan) == []


@pytest.mark.parametrize("value", ["false", None])
def test_not_paused_is_todays_rollout(value: str | None) -> None:
    ds = make_ds(strategy=rolling(2, 0))
    if value is not None:
        ds["metadata"]["annotations"][rolloutopts.PAUSED] = value
        ds["metadata"]["annotations"][rolloutopts.PARTITION] = "0"
    pods = [old_pod(ds, f"node-{i}") for i in range(5)]
    plan = planner.plan(snapshot(ds, make_nodes(5), pods))
    assert deleted(plan) == ["old-node-0", "old-node-1"]


# ---- partition -------------------------------------------------------------------------------


def test_partition_keeps_the_last_nodes_by_name_at_the_old_revision() -> None:
    ds = gated(rolling(5, 0), partition="2")
    pods = [old_pod(ds, f"node-{i}") for i in range(5)]
    plan = planner.plan(snapshot(ds, make_nodes(5), pods))
    assert deleted(plan) == ["old-node-0", "old-node-1", "old-node-2"]
    assert plan.reasons == {n: gates.partition_reason(2) for n in ("node-3", "node-4")}


@pytest.mark.parametrize(
    ("partition", "updated", "replaced"),
    [
        ("2", 3, []),  # reached the partition: stop
        ("1", 3, ["old-node-3"]),  # lowered: the next node by name goes
        ("0", 3, ["old-node-3", "old-node-4"]),
        ("4", 3, []),  # raised past the old pods: no updated node rolls back
        ("40%", 2, ["old-node-2"]),  # ceil(40% of 5) = 2 kept
        ("50%", 2, []),  # ceil(2.5) = 3 kept
        ("100%", 0, []),
    ],
)
def test_partition_table(partition: str, updated: int, replaced: list[str]) -> None:
    ds = gated(rolling(5, 0), partition=partition)
    pods = [daemon_pod(ds, f"node-{i}") for i in range(updated)]
    pods += [old_pod(ds, f"node-{i}") for i in range(updated, 5)]
    plan = planner.plan(snapshot(ds, make_nodes(5), pods))
    assert deleted(plan) == replaced


def test_partition_with_surge_creates_only_below_the_partition() -> None:
    ds = gated(rolling(0, 5), partition="3")
    pods = [old_pod(ds, f"node-{i}") for i in range(5)]
    plan = planner.plan(snapshot(ds, make_nodes(5), pods))
    assert created(plan) == ["node-0", "node-1"] and deleted(plan) == []


def test_partition_counts_a_node_mid_surge_as_updated() -> None:
    ds = gated(rolling(0, 5), partition="3")
    pods = [old_pod(ds, f"node-{i}") for i in range(5)]
    pods += [daemon_pod(ds, "node-0"), daemon_pod(ds, "node-1", ready=False)]
    plan = planner.plan(snapshot(ds, make_nodes(5), pods))
    assert deleted(plan) == ["old-node-0"] and created(plan) == []


def test_partition_waits_for_min_ready_seconds_on_a_fake_clock() -> None:
    ds = gated(rolling(1, 0), partition="1")
    ds["spec"]["minReadySeconds"] = 30
    pods = [daemon_pod(ds, "node-0", ready_since=NOW - 20), old_pod(ds, "node-1"),
            old_pod(ds, "node-2")]
    assert deleted(planner.plan(snapshot(ds, make_nodes(3), pods))) == []
    later = planner.plan(snapshot(ds, make_nodes(3), pods, now=NOW + 11))
    assert deleted(later) == ["old-node-1"]
    assert later.reasons == {"node-2": gates.partition_reason(1)}


def test_partition_of_an_unavailable_old_pod_holds_it_and_counts_it() -> None:
    ds = gated(rolling(1, 0), partition="1")
    pods = [old_pod(ds, "node-0"), old_pod(ds, "node-1", ready=False)]
    plan = planner.plan(snapshot(ds, make_nodes(2), pods))
    assert deleted(plan) == []  # node-1 held, and unavailable: no budget left for node-0


# ---- node selector ---------------------------------------------------------------------------


def canary_nodes() -> list[Obj]:
    nodes = make_nodes(5)
    for node in nodes[1:3]:
        node["metadata"]["labels"]["pool"] = "canary"
    return nodes


def test_node_selector_updates_only_matching_nodes() -> None:
    ds = gated(rolling(5, 0), node_selector="pool=canary")
    pods = [old_pod(ds, f"node-{i}") for i in range(5)]
    plan = planner.plan(snapshot(ds, canary_nodes(), pods))
    assert deleted(plan) == ["old-node-1", "old-node-2"]
    assert plan.reasons == {n: gates.REASON_SELECTOR for n in ("node-0", "node-3", "node-4")}


def test_node_selector_with_partition_counts_matching_nodes_only() -> None:
    ds = gated(rolling(5, 0), node_selector="pool in (canary)", partition="50%")
    pods = [old_pod(ds, f"node-{i}") for i in range(5)]
    plan = planner.plan(snapshot(ds, canary_nodes(), pods))
    assert deleted(plan) == ["old-node-1"]  # ceil(50% of 2 canaries) = 1 kept: node-2


def test_node_selector_new_nodes_get_the_current_revision_anywhere() -> None:
    ds = gated(rolling(1, 0), node_selector="pool=canary")
    plan = planner.plan(snapshot(ds, [make_node("node-9")], []))
    assert created(plan) == ["node-9"]


# ---- validation ------------------------------------------------------------------------------


def annotated(**annotations: str) -> Obj:
    ds = make_ds(strategy=rolling(1, 0))
    ds["metadata"]["annotations"].update(annotations)
    return ds


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (rolloutopts.PARTITION, "x",
         "metadata.annotations[rollout.daemonbus.io/partition]: Invalid value: \"x\": must be a "
         "non-negative integer or a percentage (e.g. '10%')"),
        (rolloutopts.PARTITION, "-1",
         "metadata.annotations[rollout.daemonbus.io/partition]: Invalid value: \"-1\": must be a "
         "non-negative integer or a percentage (e.g. '10%')"),
        (rolloutopts.PARTITION, "101%",
         'metadata.annotations[rollout.daemonbus.io/partition]: Invalid value: "101%": must not '
         "be greater than 100%"),
        (rolloutopts.PAUSED, "yes",
         'metadata.annotations[rollout.daemonbus.io/paused]: Invalid value: "yes": must be '
         '"true" or "false"'),
        (rolloutopts.NODE_SELECTOR, "pool in canary",
         'metadata.annotations[rollout.daemonbus.io/node-selector]: Invalid value: "pool in '
         "canary\": unable to parse requirement: found 'canary' expected: '('"),
        (rolloutopts.PROGRESS_DEADLINE, "0",
         'metadata.annotations[rollout.daemonbus.io/progress-deadline-seconds]: Invalid value: '
         '"0": must be a positive integer (seconds)'),
    ],
)
def test_bad_annotation_is_refused_with_a_field_named_message(
    name: str, value: str, message: str
) -> None:
    assert validation.validate(annotated(**{name: value})) == [message]


def test_progress_deadline_must_exceed_min_ready_seconds() -> None:
    ds = annotated(**{rolloutopts.PROGRESS_DEADLINE: "30"})
    ds["spec"]["minReadySeconds"] = 30
    assert validation.validate(ds) == [
        'metadata.annotations[rollout.daemonbus.io/progress-deadline-seconds]: Invalid value: '
        '"30": must be greater than minReadySeconds']


def test_good_annotations_validate() -> None:
    ds = annotated(**{rolloutopts.PAUSED: "false", rolloutopts.PARTITION: "25%",
                      rolloutopts.NODE_SELECTOR: "pool=canary,zone!=b",
                      rolloutopts.PROGRESS_DEADLINE: "600"})
    assert validation.validate(ds) == []
    assert rolloutopts.options(ds) == rolloutopts.Options(
        partition="25%", node_selector=rolloutopts.selectors.parse_selector("pool=canary,zone!=b"),
        progress_deadline=600)
