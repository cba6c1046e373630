"""The decision record, versioned: it round-trips to the map it is logged as, a reason of
many nodes is logged as its count (version 2), a record without a version is version 1
(every reason named), every record of an older daemonbus's export reads (and
writes back the same map), and a newer version or a field of the wrong type is refused."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.replay import logfile
from shared.daemonset import planner
from shared.daemonset.record import LISTED_MAX, RECORD_VERSION, DecisionRecord, read
from shared.daemonset.types import Reasons, group_reasons
from shared.eventlog.entry import EntryType
from shared.model.errors import CorruptEntryError
from shared.model.tainteviction import EvictionRecord
from shared.store import codec

OLD_EXPORT = Path(__file__).parent.parent / "data" / "main-5c07e65.dblog"

REC = DecisionRecord(key="ns/ds", position="5-0", now=1.5, uid="u1",
                     expectations_satisfied=True, backoff={"u1/1/n1": [1.0, 2.0]},
                     actions={"hash": "h", "creates": [["n1", "p1"]]},
                     reasons={"n1": "pod creation planned"}, worker="w1", errors=["e"])


def test_a_record_round_trips_through_msgpack_with_its_version() -> None:
    doc = codec.unpack(codec.pack(REC.to_map()))
    assert doc["rv"] == RECORD_VERSION and DecisionRecord.from_map(doc) == REC
    assert list(doc) == ["rv", "key", "position", "now", "uid", "expectationsSatisfied",
                         "backoff", "actions", "worker", "errors", "reasonsBy"]


def test_reasons_are_logged_grouped_by_reason_and_read_back_node_by_node() -> None:
    reasons = {f"n{i}": "no pod yet" if i % 3 else "pod creation planned" for i in range(6)}
    rec = DecisionRecord(key="ns/ds", reasons=reasons)
    doc = codec.unpack(codec.pack(rec.to_map()))
    assert doc["reasonsBy"] == {"pod creation planned": ["n0", "n3"],
                                "no pod yet": ["n1", "n2", "n4", "n5"]}
    assert "reasons" not in doc
    assert DecisionRecord.from_map(doc) == rec


def test_a_record_of_reasons_node_by_node_is_read_as_ever() -> None:
    """Records logged before reasons were grouped (node → reason) read the same."""
    doc = {**REC.to_map(), "reasons": dict(REC.reasons)}
    del doc["reasonsBy"]
    assert DecisionRecord.from_map(doc) == REC


def test_a_reason_of_more_nodes_than_a_sync_creates_is_logged_as_its_count() -> None:
    """Version 2: a reason of more than LISTED_MAX nodes (most nodes' "no pod yet" or
    "burst limit" at 50,000 nodes) is counted, not named; the rest are named as ever."""
    many = {f"n{i}": planner.REASON_BURST for i in range(LISTED_MAX + 1)}
    created = {f"c{i}": planner.REASON_CREATE for i in range(LISTED_MAX)}
    rec = DecisionRecord(key="ns/ds", reasons={**many, **created})
    doc = codec.unpack(codec.pack(rec.to_map()))
    assert doc["reasonsBy"] == {planner.REASON_CREATE: list(created)}
    assert doc["reasonCounts"] == {planner.REASON_BURST: LISTED_MAX + 1}
    back = DecisionRecord.from_map(doc)
    assert back.reasons == created and back.reason_counts == doc["reasonCounts"]
    assert back.to_map() == doc  # written back the same


def test_the_named_nodes_among_counted_ones_keep_the_plans_order() -> None:
    """The nodes of reasons under the count are named by reason, in the plan's order, when
    they come between the nodes of counted reasons."""
    reasons: dict[str, str] = {}
    for i in range(3 * LISTED_MAX):
        reasons[f"n{i}"] = planner.REASON_BURST
        if i % 7 == 0:
            reasons[f"c{i}"] = planner.REASON_CREATE
        if i % 11 == 0:
            reasons[f"w{i}"] = "waiting"
    doc = DecisionRecord(key="ns/ds", reasons=reasons).to_map()
    want: dict[str, list[str]] = {}
    for node, reason in reasons.items():
        if reason != planner.REASON_BURST:
            want.setdefault(reason, []).append(node)
    assert doc["reasonsBy"] == want and list(doc["reasonsBy"]) == list(want)
    assert doc["reasonCounts"] == {planner.REASON_BURST: 3 * LISTED_MAX}


def test_a_first_version_record_keeps_every_reason() -> None:
    many = {f"n{i}": planner.REASON_BURST for i in range(LISTED_MAX + 1)}
    doc = {**DecisionRecord(key="ns/ds", reasons=many, version=1).to_map()}
    assert doc["rv"] == 1 and "reasonCounts" not in doc
    back = DecisionRecord.from_map(doc)
    assert back.reasons == many and back.reason_counts == {} and back.version == 1


@pytest.mark.parametrize("counts", [[], {"r": "1"}, {"r": True}, {"r": -1}, {1: 2}])
def test_malformed_reason_counts_are_refused(counts: object) -> None:
    with pytest.raises(CorruptEntryError, match="'reasonCounts'"):
        DecisionRecord.from_map({**REC.to_map(), "reasonCounts": counts})


@pytest.mark.parametrize("grouped", [[], {"r": "n1"}, {"r": ["n1", 2]}, {"r": [None]}])
def test_malformed_grouped_reasons_are_refused(grouped: object) -> None:
    with pytest.raises(CorruptEntryError, match="'reasonsBy'"):
        DecisionRecord.from_map({**REC.to_map(), "reasonsBy": grouped})


def test_a_record_without_a_version_or_optional_fields_is_the_first() -> None:
    doc = REC.to_map()
    del doc["rv"]
    assert DecisionRecord.from_map(doc) == dataclasses.replace(REC, version=1)
    assert DecisionRecord.from_map({"key": "ns/ds", "now": 3}) == DecisionRecord(
        key="ns/ds", now=3.0, version=1)


@pytest.mark.parametrize("change,error", [
    ({"rv": RECORD_VERSION + 1}, "unsupported version"), ({"rv": "1"}, "unsupported version"),
    ({"now": "5"}, "'now' is not of type float"), ({"now": True}, "'now'"),
    ({"expectationsSatisfied": 1}, "'expectationsSatisfied' is not of type bool"),
    ({"actions": []}, "'actions' is not of type dict"), ({"key": 3}, "'key'")])
def test_a_newer_or_malformed_record_is_refused(change: dict[str, object], error: str) -> None:
    with pytest.raises(CorruptEntryError, match=error):
        DecisionRecord.from_map({**REC.to_map(), **change})
    with pytest.raises(CorruptEntryError, match="not a map"):
        DecisionRecord.from_map([1])


def test_an_eviction_record_is_read_as_one() -> None:
    rec = EvictionRecord(node="n1", position="5-0", now=2.0,
                         actions={"node": "n1", "evictions": [], "next": None})
    assert read(codec.unpack(codec.pack(rec.to_map()))) == rec
    with pytest.raises(CorruptEntryError, match="'node' is not of type str"):
        read({**rec.to_map(), "node": 1})


def test_every_record_of_an_older_export_reads_and_writes_back_the_same() -> None:
    """The same fields written back, a decision record's reasons grouped (and read back
    node by node as they were logged)."""
    seen: set[type] = set()
    with logfile.Reader(OLD_EXPORT) as reader:
        for raw in reader.records():
            if raw[0] != logfile.ENTRY or raw[3] != EntryType.DECISION:
                continue
            doc = codec.unpack(raw[6])
            rec = read(doc)
            seen.add(type(rec))
            written = rec.to_map()
            if isinstance(rec, DecisionRecord):
                assert rec.reasons == doc.get("reasons", {})
                assert read(written) == rec
                doc = {k: v for k, v in doc.items() if k != "reasons"}
                written.pop("reasonsBy")
            assert written == doc
    assert DecisionRecord in seen


class _Unwalkable(list[str]):
    """A plan's sorted group of nodes that fails the test if anything walks it whole."""

    def __iter__(self):  # type: ignore[no-untyped-def]
        raise AssertionError("the group was walked node by node")


def test_a_plans_group_of_one_reason_is_counted_without_walking_it() -> None:
    """A full plan's many nodes of one reason (``Reasons``' group) are logged as their count
    by their number alone: the record looks up only the nodes given one by one."""
    group = _Unwalkable(f"n{i:05d}" for i in range(3 * LISTED_MAX))
    own = {"n00001": planner.REASON_CREATE, "x1": "node selector does not match"}
    reasons = Reasons(own, group, planner.REASON_BURST, shadowed={"n00001", "n00002"})
    doc = DecisionRecord(key="ns/ds", reasons=reasons).to_map()
    assert doc["reasonCounts"] == {planner.REASON_BURST: 3 * LISTED_MAX - 2}
    assert doc["reasonsBy"] == {planner.REASON_CREATE: ["n00001"],
                                "node selector does not match": ["x1"]}


@settings(max_examples=300, deadline=None)
@given(group=st.sets(st.integers(0, 40)), own=st.dictionaries(
    st.integers(0, 50), st.sampled_from([None, "a", "b", planner.REASON_BURST])),
    most=st.integers(0, 45))
def test_a_plans_reasons_are_grouped_as_the_same_map(
        group: set[int], own: dict[int, str | None], most: int) -> None:
    """``Reasons.grouped`` gives the counts and the named nodes that grouping the whole map
    gives, whichever nodes of the group are given again one by one (None: no reason)."""
    name = "n{:02d}".format
    whole = dict.fromkeys(map(name, group), planner.REASON_BURST)
    for i, why in own.items():
        if why is None:
            whole.pop(name(i), None)
        else:
            whole[name(i)] = why
    reasons = Reasons({name(i): why for i, why in own.items() if why is not None},
                      sorted(map(name, group)), planner.REASON_BURST,
                      shadowed={name(i) for i in own if i in group})
    assert dict(reasons) == whole
    named, counts = reasons.grouped(most)
    want_named, want_counts = group_reasons(whole, most)
    assert counts == want_counts
    assert {r: sorted(n) for r, n in named.items()} == \
        {r: sorted(n) for r, n in want_named.items()}
