"""The pure rules behind what the executor writes: Event naming and correlation, the
ownerReferences change of a claim, the collision-count rule and the status-writer's merge."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from shared.daemonset import claim, events, history, status
from shared.daemonset.types import EmitEvent, PatchOwner
from shared.model import events as model_events
from shared.model import meta
from tests.unit.daemonset_fixtures import DS_UID, make_ds

Obj = dict[str, Any]
NOW = 1_700_000_000.0


def _created(n: int, reason: str = "SuccessfulCreate") -> list[EmitEvent]:
    return [EmitEvent("Normal", reason, f"Created pod: p{i}") for i in range(n)]


def test_a_syncs_events_through_the_correlator_combine_past_nine_and_a_retry_is_itself(
        ) -> None:
    """What the reconciler's recorder makes of a sync's Events: nine creates each on its
    own, the tenth on combined with their count; the same sync's Events told again (a
    retried write) are themselves, not repeats."""
    ds = make_ds()
    correlator = model_events.Correlator()
    told = [correlator.correlate(ev, NOW)
            for ev in events.event_objects(ds, _created(12), NOW, "5-0")]
    assert all(t is not None for t in told)
    written = [t for t in told if t is not None]
    assert [t.repeat for t in written] == [False] * 10 + [True] * 2
    assert written[-1].event["message"] == "(combined from similar events): Created pod: p11"
    assert written[-1].event["count"] == 3  # the tenth, eleventh and twelfth
    failed = EmitEvent("Warning", "FailedCreate", "Error creating: no")
    (first,) = events.event_objects(ds, [failed], NOW, "5-0")
    retried = correlator.correlate(copy.deepcopy(first), NOW)
    assert retried is not None and not retried.repeat
    assert correlator.correlate(copy.deepcopy(first), NOW) == retried  # itself again
    (later,) = events.event_objects(ds, [failed], NOW + 5, "7-0")  # the next sync's
    repeat = correlator.correlate(later, NOW + 5)
    assert repeat is not None and repeat.repeat and repeat.event["count"] == 2
    assert meta.name(repeat.event) == meta.name(first)


def test_event_names_follow_the_sync_and_its_messages() -> None:
    ds = make_ds()
    one = events.event_objects(ds, _created(2), NOW, "5-0")
    assert [o["count"] for o in one] == [1, 1]
    assert [o["involvedObject"]["uid"] for o in one] == [DS_UID, DS_UID]
    assert all(meta.name(o).startswith(f"{meta.name(ds)}.") for o in one)
    # the same sync (position and now) names the same Events: a retry is create-if-absent
    assert [meta.name(o) for o in events.event_objects(ds, _created(2), NOW, "5-0")] == \
        [meta.name(o) for o in one]
    # another message, position or time: other names
    names = {meta.name(o) for o in one}
    assert len(names) == 2
    for other in (events.event_objects(ds, _created(2), NOW, "6-0"),
                  events.event_objects(ds, _created(2), NOW + 1, "5-0")):
        assert names.isdisjoint(meta.name(o) for o in other)


OWNER = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": DS_UID,
         "controller": True, "blockOwnerDeletion": True}
OTHER_REF = {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "other"}


def _pod(refs: list[Obj] | None) -> Obj:
    md: Obj = {"name": "p", "namespace": "default", "uid": "uid-p"}
    if refs is not None:
        md["ownerReferences"] = refs
    return {"kind": "Pod", "metadata": md}


@pytest.mark.parametrize(("refs", "adopt", "expected"), [
    (None, True, [OWNER]),  # an orphan adopted
    ([OTHER_REF], True, [OTHER_REF, OWNER]),  # other references kept, ours appended
    ([dict(OWNER, controller=False)], True, [OWNER]),  # a stale ref of ours replaced
    ([OWNER], False, None),  # released: no ownerReferences left at all
    ([OTHER_REF, OWNER], False, [OTHER_REF]),  # released, the others kept
    ([], False, None),
], ids=["adopt-orphan", "adopt-keeps-others", "adopt-replaces-ours", "release-last",
        "release-keeps-others", "release-none"])
def test_a_claim_changes_only_the_daemonsets_owner_references(
        refs: list[Obj] | None, adopt: bool, expected: list[Obj] | None) -> None:
    pod = _pod(refs)
    before = repr(pod)
    action = PatchOwner("Pod", "default", "p", "uid-p", adopt, OWNER)
    new = claim.owner_change(pod, action, DS_UID)
    assert new["metadata"].get("ownerReferences") == expected
    assert {k: v for k, v in new["metadata"].items() if k != "ownerReferences"} == \
        {"name": "p", "namespace": "default", "uid": "uid-p"}
    assert repr(pod) == before  # the cached object is not changed


def _with_status(st: Obj) -> Obj:
    ds = make_ds()
    ds["status"] = st
    return ds


@pytest.mark.parametrize(("cached", "fresh", "expected"), [
    ({}, {}, {"collisionCount": 1}),  # nil → 1
    ({"collisionCount": 0}, {"collisionCount": 0}, {"collisionCount": 1}),
    ({"collisionCount": 2}, {"collisionCount": 2, "numberReady": 3},
     {"collisionCount": 3, "numberReady": 3}),  # the rest of the stored status kept
    ({}, {"collisionCount": 1}, None),  # the sync decided on a stale count: retried
    ({"collisionCount": 2}, {"collisionCount": 1}, None),
    ({"collisionCount": 0}, {}, None),  # 0 and nil hash differently
], ids=["nil", "zero", "keeps-status", "stale-nil", "stale-number", "zero-is-not-nil"])
def test_a_collision_raises_the_stored_count_unless_the_sync_saw_another(
        cached: Obj, fresh: Obj, expected: Obj | None) -> None:
    assert history.bumped_collision_count(_with_status(cached), _with_status(fresh)) == expected


COUNTS = {"desiredNumberScheduled": 2, "currentNumberScheduled": 2, "numberMisscheduled": 0,
          "numberReady": 2, "updatedNumberScheduled": 2, "numberAvailable": 2}


@pytest.mark.parametrize(("old", "computed", "generation", "observe", "expected"), [
    # unchanged counters, observedGeneration current: nothing to write
    ({**COUNTS, "numberUnavailable": 0, "observedGeneration": 1}, COUNTS, 1, True, None),
    # a counter missing from the computed (JSON-shaped) status is 0, not the stored value
    ({**COUNTS, "numberUnavailable": 1, "observedGeneration": 1}, COUNTS, 1, True,
     {**COUNTS, "numberUnavailable": 0, "observedGeneration": 1}),
    # observe: observedGeneration becomes the sync's generation
    ({**COUNTS, "numberUnavailable": 0, "observedGeneration": 1}, COUNTS, 2, True,
     {**COUNTS, "numberUnavailable": 0, "observedGeneration": 2}),
    # not observing: the stored observedGeneration stays; with the counters equal but the
    # generation behind, it is still written
    ({**COUNTS, "numberUnavailable": 0, "observedGeneration": 1}, COUNTS, 2, False,
     {**COUNTS, "numberUnavailable": 0, "observedGeneration": 1}),
    # collisionCount: always the stored one
    ({"collisionCount": 3, "observedGeneration": 1}, {**COUNTS, "collisionCount": 0}, 1, True,
     {**COUNTS, "numberUnavailable": 0, "collisionCount": 3, "observedGeneration": 1}),
    # conditions: the computed ones; none when the computed status has none
    ({**COUNTS, "numberUnavailable": 0, "observedGeneration": 1, "conditions": [{"t": 1}]},
     COUNTS, 1, True, {**COUNTS, "numberUnavailable": 0, "observedGeneration": 1}),
    ({**COUNTS, "numberUnavailable": 0, "observedGeneration": 1}, {**COUNTS, "conditions":
     [{"t": 2}]}, 1, True, {**COUNTS, "numberUnavailable": 0, "observedGeneration": 1,
                            "conditions": [{"t": 2}]}),
    # fields the computed status does not name are kept
    ({"other": "x"}, COUNTS, 1, True,
     {**COUNTS, "numberUnavailable": 0, "observedGeneration": 1, "other": "x"}),
], ids=["unchanged", "missing-counter-is-zero", "observe", "behind-not-observed",
        "collision-count-kept", "conditions-dropped", "conditions-set", "other-fields-kept"])
def test_the_status_writer_merges_a_computed_status_over_the_stored_one(
        old: Obj, computed: Obj, generation: int, observe: bool, expected: Obj | None) -> None:
    assert status.merged_status(old, computed, generation, observe) == expected
