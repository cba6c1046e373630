"""``status.conditions`` Paused / Progressing and the progress deadline, through ``plan`` on a
fake clock (each plan's status fed back as the next snapshot's cached status); and what
``rollout status``, ``pause``, ``resume`` and ``promote`` decide from them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from services.cli import rollout_views as views
from shared.api import schema
from shared.daemonset import conditions, planner
from shared.daemonset.types import Plan
from shared.model import meta, rolloutopts
from tests.unit.daemonset_fixtures import NOW, daemon_pod, make_ds, make_nodes, rolling, snapshot
from tests.unit.test_daemonset_rollout import old_pod

Obj = dict[str, Any]


def annotated(**annotations: str) -> Obj:
    ds = make_ds(strategy=rolling(1, 0))
    ds["metadata"]["annotations"].update(
        {rolloutopts.PREFIX + k.replace("_", "-"): v for k, v in annotations.items()})
    return ds


def progressing(plan: Plan) -> Obj:
    assert plan.status is not None
    got = conditions.find(plan.status.get("conditions") or [], conditions.PROGRESSING)
    assert got is not None
    return got


def fed_back(ds: Obj, plan: Plan) -> Obj:
    """``ds`` as the status-writer leaves it after writing ``plan``'s status."""
    new = copy.deepcopy(ds)
    new["status"] = copy.deepcopy(plan.status)
    return new


def test_no_annotation_no_conditions() -> None:
    ds = make_ds(strategy=rolling(1, 0))
    plan = planner.plan(snapshot(ds, make_nodes(2), [old_pod(ds, "node-0"), old_pod(ds, "node-1")]))
    assert plan.status is not None and "conditions" not in plan.status


def test_conditions_dropped_with_the_annotations() -> None:
    ds = annotated(paused="true")
    pods = [old_pod(ds, "node-0")]
    ds = fed_back(ds, planner.plan(snapshot(ds, make_nodes(1), pods)))
    del ds["metadata"]["annotations"][rolloutopts.PAUSED]
    plan = planner.plan(snapshot(ds, make_nodes(1), pods))
    assert plan.status is not None and "conditions" not in plan.status


def test_paused_sets_paused_and_progressing_unknown() -> None:
    ds = annotated(paused="true")
    plan = planner.plan(snapshot(ds, make_nodes(2), [old_pod(ds, "node-0"), old_pod(ds, "node-1")]))
    assert plan.status is not None
    paused = conditions.find(plan.status["conditions"], conditions.PAUSED)
    assert paused is not None and paused["status"] == "True"
    assert (progressing(plan)["status"], progressing(plan)["reason"]) == ("Unknown", "RolloutPaused")


def test_complete_rollout_is_new_revision_available() -> None:
    ds = annotated(partition="1")
    plan = planner.plan(snapshot(ds, make_nodes(2), [daemon_pod(ds, "node-0"),
                                                      daemon_pod(ds, "node-1")]))
    assert progressing(plan)["reason"] == "NewRevisionAvailable"


def test_stopped_at_the_partition_is_partitioned() -> None:
    ds = annotated(partition="1")
    pods = [daemon_pod(ds, "node-0"), old_pod(ds, "node-1")]
    plan = planner.plan(snapshot(ds, make_nodes(2), pods))
    assert (progressing(plan)["status"], progressing(plan)["reason"]) == (
        "True", "RolloutPartitioned")
    assert plan.sync_nodes is not None and plan.sync_nodes.deletes == []


def never_ready_rollout(deadline: str = "60") -> tuple[Obj, list[Obj]]:
    ds = annotated(progress_deadline_seconds=deadline)
    return ds, [daemon_pod(ds, "node-0", ready=False), old_pod(ds, "node-1")]


def test_progress_deadline_table_on_a_fake_clock() -> None:
    ds, pods = never_ready_rollout("60")
    nodes = make_nodes(2)
    # t=0: the rollout starts: Progressing True, lastTransitionTime now (DaemonSetCondition has
    # no lastUpdateTime), requeued for the deadline
    first = planner.plan(snapshot(ds, nodes, pods, now=NOW))
    cond = progressing(first)
    assert (cond["status"], cond["reason"]) == ("True", "DaemonSetUpdated")
    assert cond["lastTransitionTime"] == meta.format_time(NOW)
    assert set(cond) == {"type", "status", "lastTransitionTime", "reason", "message"}
    assert first.requeue_after == 60.0
    assert not [e for e in first.events if e.reason == "ProgressDeadlineExceeded"]
    ds = fed_back(ds, first)
    # t=59: no progress, still inside the deadline; the same condition
    at59 = planner.plan(snapshot(ds, nodes, pods, now=NOW + 59))
    assert progressing(at59) == cond and at59.requeue_after == pytest.approx(1.0)
    # t=60: the deadline passes: False/ProgressDeadlineExceeded and a Warning Event, once
    at60 = planner.plan(snapshot(ds, nodes, pods, now=NOW + 60))
    cond = progressing(at60)
    assert (cond["status"], cond["reason"]) == ("False", "ProgressDeadlineExceeded")
    assert cond["message"] == 'daemon set "foo" has timed out progressing.'
    assert [(e.type, e.reason) for e in at60.events] == [("Warning", "ProgressDeadlineExceeded")]
    ds = fed_back(ds, at60)
    at300 = planner.plan(snapshot(ds, nodes, pods, now=NOW + 300))
    assert progressing(at300) == cond and at300.events == []
    # t=301: the new pod becomes ready: progress sets it back to True
    pods[0] = daemon_pod(ds, "node-0", ready_since=NOW + 301)
    at301 = planner.plan(snapshot(ds, nodes, pods, now=NOW + 301))
    cond = progressing(at301)
    assert (cond["status"], cond["reason"]) == ("True", "DaemonSetUpdated")
    assert cond["lastTransitionTime"] == meta.format_time(NOW + 301)


def test_a_status_with_conditions_has_only_fields_of_the_apps_v1_schema() -> None:
    # a stored field the schema lacks would fail strict field validation of every later apply
    ds, pods = never_ready_rollout("60")
    for now in (NOW, NOW + 60):
        ds = fed_back(ds, planner.plan(snapshot(ds, make_nodes(2), pods, now=now)))
        assert schema.unknown_fields(ds) == []


def test_without_a_deadline_no_progress_stays_progressing() -> None:
    ds = annotated(partition="0")
    pods = [daemon_pod(ds, "node-0", ready=False), old_pod(ds, "node-1")]
    first = planner.plan(snapshot(ds, make_nodes(2), pods))
    later = planner.plan(snapshot(fed_back(ds, first), make_nodes(2), pods, now=NOW + 86400))
    assert progressing(later) == progressing(first) and later.requeue_after is None


def test_paused_rollout_does_not_run_into_the_deadline() -> None:
    ds = annotated(paused="true", progress_deadline_seconds="10")
    pods = [old_pod(ds, "node-0"), old_pod(ds, "node-1")]
    first = planner.plan(snapshot(ds, make_nodes(2), pods))
    later = planner.plan(snapshot(fed_back(ds, first), make_nodes(2), pods, now=NOW + 600))
    assert progressing(later)["reason"] == "RolloutPaused"


def test_plans_with_conditions_are_reproducible() -> None:
    ds, pods = never_ready_rollout("60")
    ds = fed_back(ds, planner.plan(snapshot(ds, make_nodes(2), pods)))
    one = planner.plan(snapshot(ds, make_nodes(2), pods, now=NOW + 90))
    two = planner.plan(snapshot(ds, make_nodes(2), list(reversed(pods)), now=NOW + 90))
    assert one.status == two.status and one.events == two.events


# ---- rollout status, pause, resume, promote --------------------------------------------------


def with_conditions(ds: Obj, reason: str, **counts: int) -> Obj:
    ds["status"] = {"observedGeneration": 1, **counts,
                    "conditions": [{"type": "Progressing", "status": "True", "reason": reason}]}
    return ds


def test_status_paused_stops_waiting() -> None:
    ds = with_conditions(annotated(paused="true"), "RolloutPaused", desiredNumberScheduled=5,
                         updatedNumberScheduled=2, numberAvailable=5)
    assert views.status_message(ds) == (
        'daemon set "foo" rollout is paused: 2 out of 5 new pods have been updated\n', True)


def test_status_partitioned_stops_waiting() -> None:
    ds = with_conditions(annotated(partition="2"), "RolloutPartitioned",
                         desiredNumberScheduled=5, updatedNumberScheduled=3, numberAvailable=5)
    assert views.status_message(ds) == (
        'daemon set "foo" partitioned roll out complete: 3 out of 5 new pods have been '
        "updated...\n", True)


def test_status_in_progress_before_the_partition_waits() -> None:
    ds = with_conditions(annotated(partition="2"), "DaemonSetUpdated",
                         desiredNumberScheduled=5, updatedNumberScheduled=1, numberAvailable=4)
    assert views.status_message(ds)[1] is False


def test_status_deadline_exceeded_fails() -> None:
    ds = with_conditions(annotated(progress_deadline_seconds="5"), "ProgressDeadlineExceeded",
                         desiredNumberScheduled=5, updatedNumberScheduled=1)
    with pytest.raises(views.RolloutError, match='daemon set "foo" exceeded its progress deadline'):
        views.status_message(ds)


def test_pause_resume_promote_edit_the_annotations() -> None:
    ds = annotated(partition="3", node_selector="pool=canary")
    paused = views.paused(ds)
    assert paused is not None and meta.annotations(paused)[rolloutopts.PAUSED] == "true"
    assert views.paused(paused) is None  # already paused
    resumed = views.resumed(paused)
    assert resumed is not None and rolloutopts.PAUSED not in meta.annotations(resumed)
    promoted = views.promoted(ds)
    assert promoted is not None
    assert not {rolloutopts.PARTITION, rolloutopts.NODE_SELECTOR} & set(meta.annotations(promoted))
    assert views.promoted(promoted) is None
