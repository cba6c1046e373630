"""The pure rules behind what the executor writes: Event aggregation and naming, the
ownerReferences change of a claim, the collision-count rule and the status-writer's merge."""

from __future__ import annotations

from typing import Any

import pytest

from shared.daemonset import claim, events, history, status
from shared.daemonset.types import EmitEvent, PatchOwner
from shared.model import meta
from tests.unit.daemonset_fixtures import DS_UID, make_ds

Obj = dict[str, Any]
NOW = 1_700_000_000.0


def _created(n: int, reason: str = "SuccessfulCreate") -> list[EmitEvent]:
    return [EmitEvent("Normal", reason, f"Created pod: p{i}") for i in range(n)]


@pytest.mark.parametrize(("given", "expected"), [
    ([], []),
    # up to ten of one reason: each on its own
    (_created(10), [(e, 1) for e in _created(10)]),
    # eleven: one Event with the count and the last message
    (_created(11), [(EmitEvent("Normal", "SuccessfulCreate",
                               "(combined from similar events): Created pod: p10"), 11)]),
    # grouped by type and reason, in order of each group's first event
    ([EmitEvent("Warning", "FailedCreate", "x"), *_created(2),
      EmitEvent("Warning", "FailedCreate", "y")],
     [(EmitEvent("Warning", "FailedCreate", "x"), 1), (EmitEvent("Warning", "FailedCreate", "y"), 1),
      (_created(2)[0], 1), (_created(2)[1], 1)]),
    # one type, two reasons: aggregated apart
    ([*_created(12), *_created(3, "SuccessfulDelete")],
     [(EmitEvent("Normal", "SuccessfulCreate",
                 "(combined from similar events): Created pod: p11"), 12),
      *[(e, 1) for e in _created(3, "SuccessfulDelete")]]),
], ids=["none", "ten", "eleven", "groups-in-first-order", "two-reasons"])
def test_events_of_one_reason_are_combined_past_ten(
        given: list[EmitEvent], expected: list[tuple[EmitEvent, int]]) -> None:
    assert events.aggregate(given) == expected


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
