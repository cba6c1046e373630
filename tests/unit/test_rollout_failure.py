"""A failed rollout pauses or rolls itself back (``rollout.daemonbus.io/failure-action``),
through ``plan`` on a fake clock; the validation of the annotations; the RolloutFailed
condition."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from shared.daemonset import conditions, failure, planner, unavailable
from shared.daemonset import record as ds_record
from shared.daemonset.types import Plan
from shared.model import meta, rolloutopts, validation
from tests.unit.daemonset_fixtures import (
    NOW,
    current_hash,
    make_ds,
    make_node,
    make_nodes,
    make_pod,
    rolling,
    snapshot,
)
from tests.unit.test_daemonset_history import revision_for, with_image
from tests.unit.test_daemonset_rollout import deleted

Obj = dict[str, Any]

V1 = make_ds(strategy=rolling(1, 0))
V2 = with_image(V1, "foo/bar:2")
REVISIONS = [revision_for(V1, 1), revision_for(V2, 2)]


def failing(ds: Obj = V2, **annotations: str) -> Obj:
    """``ds`` with a failure action (pause by default) and the given annotations."""
    out = copy.deepcopy(ds)
    out["metadata"]["resourceVersion"] = "7-0"
    out["metadata"]["annotations"][rolloutopts.FAILURE_ACTION] = "pause"
    out["metadata"]["annotations"].update(
        {rolloutopts.PREFIX + k.replace("_", "-"): v for k, v in annotations.items()})
    return out


def old(node: str, **kwargs: Any) -> Obj:
    return make_pod(f"old-{node}", node, ds=V1, hash=current_hash(V1), **kwargs)


def new(node: str, state: str = "ready", created: float = NOW - 60, **kwargs: Any) -> Obj:
    """A pod of V2 on ``node``: ``ready``, ``crash`` (CrashLoopBackOff), ``failed`` (phase
    Failed) or ``starting`` (Running, not ready)."""
    pod = make_pod(f"new-{node}", node, ds=V2, hash=current_hash(V2), created=created,
                   ready=state == "ready", phase="Failed" if state == "failed" else "Running",
                   **kwargs)
    if state == "crash":
        pod["status"]["containerStatuses"] = [{
            "name": "foo", "ready": False, "restartCount": 3,
            "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]
    return pod


def plan_of(ds: Obj, pods: list[Obj], nodes: int = 4, now: float = NOW,
            revisions: list[Obj] | None = None) -> Plan:
    return planner.plan(snapshot(ds, make_nodes(nodes), pods, now=now,
                                 revisions=REVISIONS if revisions is None else revisions))


def record_of(plan: Plan) -> Obj:
    assert plan.failure is not None
    value = json.loads(plan.failure.annotations[rolloutopts.FAILURE_RECORD])
    assert isinstance(value, dict)
    return value


# ---- the judgement -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "created", "cause"),
    [
        ("crash", NOW - 10, unavailable.CRASH_LOOPING),  # inside the window: failed already
        ("failed", NOW - 10, unavailable.FAILED),
        ("starting", NOW - 300, failure.NOT_AVAILABLE),  # the default window: 300 s
        ("starting", NOW - 600, failure.NOT_AVAILABLE),
    ],
)
def test_a_failed_new_pod_past_the_ratio_pauses_the_rollout(
        state: str, created: float, cause: str) -> None:
    ds = failing()
    pods = [new("node-0", state, created), old("node-1"), old("node-2"), old("node-3")]
    plan = plan_of(ds, pods)
    assert plan.failure is not None and plan.failure.action == rolloutopts.PAUSE
    assert plan.failure.annotations[rolloutopts.PAUSED] == "true"
    assert plan.failure.template is None
    assert plan.failure.resource_version == "7-0"  # the DaemonSet it judged, as precondition
    rec = record_of(plan)
    assert (rec["failed"], rec["attempted"], rec["nodes"]) == (1, 1, {"node-0": cause})
    assert (rec["revision"], rec["hash"], rec["time"]) == (2, current_hash(V2),
                                                          meta.format_time(NOW))
    assert "1 of 1 new pods failed" in plan.failure.message
    # this pass already holds every old pod (a Failed pod is replaced as ever)
    assert deleted(plan) == (["new-node-0"] if state == "failed" else [])
    assert plan.reasons["node-1"] == f"rollout paused ({rolloutopts.PAUSED})"


@pytest.mark.parametrize(
    ("window", "age", "requeue"),
    [(None, 60, 240.0), ("120", 60, 60.0), ("120", 119, 1.0)],
)
def test_a_new_pod_inside_its_window_is_pending_and_the_sync_waits_for_the_window(
        window: str | None, age: float, requeue: float) -> None:
    ds = failing(**({"failure_window_seconds": window} if window else {}))
    pods = [new("node-0", "starting", NOW - age), old("node-1")]
    plan = plan_of(ds, pods, nodes=2)
    assert plan.failure is None
    assert plan.requeue_after == requeue
    later = plan_of(ds, pods, nodes=2, now=NOW + requeue)
    assert later.failure is not None and record_of(later)["nodes"] == {
        "node-0": failure.NOT_AVAILABLE}


@pytest.mark.parametrize(
    ("ratio", "states", "acts"),
    [
        # failed / attempted, where attempted = nodes with a judged pod of the new revision
        ("0", ["crash"], True),
        ("0.5", ["crash", "ready"], False),  # 1/2 is not more than 0.5
        ("0.4", ["crash", "ready"], True),
        ("0.4", ["crash", "starting"], True),  # a pending pod is attempted too
        ("0.5", ["crash", "ready", "ready"], False),
        ("0.5", ["crash", "crash", "ready"], True),
        ("1", ["crash", "crash"], False),  # 1: never
    ],
)
def test_the_ratio_counts_failed_of_the_new_pods_attempted_not_of_desired(
        ratio: str, states: list[str], acts: bool) -> None:
    ds = failing(max_failure_ratio=ratio)
    pods = [new(f"node-{i}", s) for i, s in enumerate(states)]
    pods += [old(f"node-{i}") for i in range(len(states), 10)]  # 10 desired
    plan = plan_of(ds, pods, nodes=10)
    assert (plan.failure is not None) == acts
    if acts:
        rec = record_of(plan)
        assert rec["attempted"] == len(states) and rec["maxFailureRatio"] == ratio


def test_a_rollback_restores_the_previous_revisions_template() -> None:
    ds = failing(failure_action="rollback")
    pods = [new("node-0", "crash"), old("node-1"), old("node-2")]
    plan = plan_of(ds, pods, nodes=3)
    assert plan.failure is not None and plan.failure.action == rolloutopts.ROLLBACK
    assert plan.failure.template == V1["spec"]["template"]
    assert rolloutopts.PAUSED not in plan.failure.annotations
    rec = record_of(plan)
    assert (rec["toRevision"], rec["toHash"]) == (1, current_hash(V1))
    assert "rolled back to revision 1" in plan.failure.message
    # the rollback's own update starts the next rollout: this pass replaces nothing
    assert deleted(plan) == []


def rolled_back() -> Obj:
    """V1 again after an automatic rollback from V2, its record on the DaemonSet."""
    ds = failing(V1, failure_action="rollback")
    plan = plan_of(failing(failure_action="rollback"), [new("node-0", "crash"), old("node-1")],
                   nodes=2)
    assert plan.failure is not None
    ds["metadata"]["annotations"].update(plan.failure.annotations)
    return ds


def test_a_rollback_does_not_loop_the_revision_rolled_back_to_is_not_judged() -> None:
    ds = rolled_back()
    # V2's crash-looping pod is now old; V1's pod on node-1 fails too, long past its window
    pods = [new("node-0", "crash"), old("node-1", ready=False)]
    plan = plan_of(ds, pods, nodes=2)
    assert plan.hash == current_hash(V1)
    assert plan.failure is None
    assert "new-node-0" in deleted(plan)  # the rolled-back rollout replaces V2's pod


def test_the_revision_rolled_back_from_is_judged_again_on_new_pods_when_reapplied() -> None:
    record = rolled_back()["metadata"]["annotations"][rolloutopts.FAILURE_RECORD]
    ds = failing(failure_action="rollback", failure_record=record)
    assert plan_of(ds, [new("node-0", "crash"), old("node-1")], nodes=2).failure is None
    again = new("node-0", "crash", created=NOW + 5)
    plan = plan_of(ds, [again, old("node-1")], nodes=2, now=NOW + 10)
    assert plan.failure is not None and plan.failure.action == rolloutopts.ROLLBACK


def test_a_resumed_rollout_judges_only_the_pods_created_after_the_pause() -> None:
    paused = plan_of(failing(), [new("node-0", "crash"), old("node-1")], nodes=2)
    assert paused.failure is not None
    resumed = failing(failure_record=paused.failure.annotations[rolloutopts.FAILURE_RECORD])
    assert rolloutopts.PAUSED not in meta.annotations(resumed)
    later = NOW + 100
    plan = plan_of(resumed, [new("node-0", "crash"), old("node-1")], nodes=2, now=later)
    assert plan.failure is None  # acknowledged by the resume
    plan = plan_of(resumed, [new("node-0", "crash"), new("node-1", "crash", created=NOW + 50)],
                   nodes=2, now=later)
    assert plan.failure is not None and record_of(plan)["nodes"] == {
        "node-1": unavailable.CRASH_LOOPING}


def test_nothing_is_judged_while_paused_before_a_previous_revision_or_after_the_rollout() -> None:
    crash = [new("node-0", "crash"), old("node-1")]
    assert plan_of(failing(paused="true"), crash, nodes=2).failure is None
    first = failing(with_image(V1, "foo/bar:2"))
    assert plan_of(first, crash, nodes=2, revisions=[]).failure is None
    # a complete rollout stays complete while every pod is of its revision (a Deployment's
    # rule): a pod failing later is not the rollout's
    done = failing()
    done["status"] = {"conditions": [{"type": conditions.PROGRESSING, "status": "True",
                                      "reason": conditions.REASON_AVAILABLE}]}
    later = [new("node-0", "crash"), new("node-1")]
    plan = plan_of(done, later, nodes=2)
    assert plan.failure is None
    assert plan.status is not None
    progressing = conditions.find(plan.status["conditions"], conditions.PROGRESSING)
    assert progressing is not None and progressing["reason"] == conditions.REASON_AVAILABLE
    assert plan_of(failing(), later, nodes=2).failure is not None  # not complete: judged


def test_without_a_failure_action_nothing_is_judged() -> None:
    ds = copy.deepcopy(V2)
    ds["metadata"]["annotations"][rolloutopts.MAX_FAILURE_RATIO] = "0"
    plan = plan_of(ds, [new("node-0", "crash"), old("node-1")], nodes=2)
    assert plan.failure is None and "failure" not in ds_record.summarize(plan)


def test_a_pod_on_a_node_that_is_not_ready_is_not_judged() -> None:
    ds = failing()
    nodes = make_nodes(2)
    nodes[0]["status"] = {"conditions": [{"type": "Ready", "status": "False"}]}
    pods = [new("node-0", "crash"), old("node-1")]
    snap = snapshot(ds, nodes, pods, revisions=REVISIONS)
    assert planner.plan(snap).failure is None
    nodes[0] = make_node("node-0")
    assert planner.plan(snapshot(ds, nodes, pods, revisions=REVISIONS)).failure is not None


def test_the_decision_is_recorded_for_replay() -> None:
    plan = plan_of(failing(failure_action="rollback"), [new("node-0", "crash"), old("node-1")],
                   nodes=2)
    summary = ds_record.summarize(plan)
    assert summary["failure"][0] == "rollback"
    again = plan_of(failing(failure_action="rollback"), [new("node-0", "crash"), old("node-1")],
                    nodes=2)
    assert ds_record.first_difference(summary, ds_record.summarize(again)) is None


# ---- the condition -------------------------------------------------------------------------


def test_the_rollout_failed_condition_names_the_pause_or_the_rollback() -> None:
    paused = plan_of(failing(), [new("node-0", "crash"), old("node-1")], nodes=2)
    assert paused.failure is not None
    ds = failing()
    ds["metadata"]["annotations"].update(paused.failure.annotations)
    plan = plan_of(ds, [new("node-0", "crash"), old("node-1")], nodes=2)
    assert plan.status is not None
    cond = conditions.find(plan.status["conditions"], conditions.ROLLOUT_FAILED)
    assert cond is not None and cond["status"] == "True"
    assert (cond["reason"], cond["message"]) == (conditions.REASON_FAILURE_PAUSED,
                                                 paused.failure.message)
    plan = plan_of(rolled_back(), [new("node-0", "crash"), old("node-1")], nodes=2)
    assert plan.status is not None
    cond = conditions.find(plan.status["conditions"], conditions.ROLLOUT_FAILED)
    assert cond is not None and cond["reason"] == conditions.REASON_ROLLED_BACK
    # a new revision: the record speaks of neither, the condition goes
    third = failing(with_image(V1, "foo/bar:3"))
    third["metadata"]["annotations"].update(paused.failure.annotations)
    third["metadata"]["annotations"].pop(rolloutopts.PAUSED)
    plan = plan_of(third, [old("node-0"), old("node-1")], nodes=2)
    assert plan.status is not None
    assert conditions.find(plan.status.get("conditions") or [], conditions.ROLLOUT_FAILED) is None


# ---- validation ----------------------------------------------------------------------------


def errors_of(min_ready: int | None = None, **annotations: str) -> list[str]:
    ds = make_ds(strategy=rolling(1, 0), min_ready_seconds=min_ready)
    ds["metadata"]["annotations"].update(
        {rolloutopts.PREFIX + k.replace("_", "-"): v for k, v in annotations.items()})
    return [e for e in validation.validate(ds) if rolloutopts.PREFIX in e]


def field(name: str) -> str:
    return f"metadata.annotations[{rolloutopts.PREFIX}{name}]"


@pytest.mark.parametrize(
    ("annotations", "min_ready", "expected"),
    [
        ({"failure_action": "stop"}, None,
         f'{field("failure-action")}: Unsupported value: "stop": supported values: '
         '"pause", "rollback"'),
        ({"max_failure_ratio": "1.5"}, None,
         f'{field("max-failure-ratio")}: Invalid value: "1.5": must be a decimal number from 0 '
         "to 1 (e.g. '0.1')"),
        ({"max_failure_ratio": "-0.1"}, None, None),
        ({"max_failure_ratio": "10%"}, None, None),
        ({"failure_window_seconds": "0"}, None,
         f'{field("failure-window-seconds")}: Invalid value: "0": must be a positive integer '
         "(seconds)"),
        ({"failure_window_seconds": "30"}, 30,
         f'{field("failure-window-seconds")}: Invalid value: "30": must be greater than '
         "minReadySeconds"),
        ({"failure_record": "[1]"}, None,
         f'{field("failure-record")}: Invalid value: "[1]": must be a JSON object (written by '
         "the controller)"),
    ],
)
def test_bad_values_are_refused_with_the_annotations_field(
        annotations: dict[str, str], min_ready: int | None, expected: str | None) -> None:
    got = errors_of(min_ready, **annotations)
    assert len(got) == 1
    if expected is not None:
        assert got == [expected]


@pytest.mark.parametrize("ratio", ["0", "0.1", "1", "1.0", ".25", "0.000001"])
def test_good_values_pass_and_parse(ratio: str) -> None:
    assert errors_of(failure_action="rollback", max_failure_ratio=ratio,
                     failure_window_seconds="31", min_ready=30) == []
    ds = make_ds()
    ds["metadata"]["annotations"].update({rolloutopts.FAILURE_ACTION: "rollback",
                                          rolloutopts.MAX_FAILURE_RATIO: ratio})
    opts = rolloutopts.options(ds)
    assert opts.failure_action == "rollback" and float(opts.max_failure_ratio) == float(ratio)
    assert opts.failure_window == rolloutopts.DEFAULT_FAILURE_WINDOW
