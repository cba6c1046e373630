"""One contract for both event logs: the stream in Redis and the in-memory twin.

Each test gets a ``Log``: the port, a way to append entries with their ids, and a way to
compact (trim below a snapshot id, as ``STORE_AND_TRIM`` does).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import cast

import pytest

from services.node_agent.lifecycle import new_node
from shared.eventlog import wire
from shared.eventlog.entry import RawEntry
from shared.eventlog.memory import InMemoryEventLog
from shared.eventlog.ports import NO_POSITION, EventLog, pages
from shared.model.errors import UnavailableError
from shared.store.eventlog import RedisEventLog
from shared.store.keys import Keys
from shared.store.log import LogReader
from tests.integration.contract import connect


@dataclass
class Log:
    port: EventLog
    append: Callable[[RawEntry], None]
    trim: Callable[[str], None]


@pytest.fixture(params=["memory", "redis"])
def log(request: pytest.FixtureRequest) -> Log:
    if request.param == "memory":
        mem = InMemoryEventLog()

        def trim_memory(start: str) -> None:
            mem.trim(start)

        return Log(mem, mem.append, trim_memory)
    client = connect(request.getfixturevalue("redis_url"))
    keys = Keys(request.getfixturevalue("prefix"))
    red = RedisEventLog(client, keys)

    def trim(start: str) -> None:
        client.set(keys.log_snapshot_id, start)
        client.xtrim(keys.log, minid=start, approximate=False)

    return Log(red, red.append, trim)


def _entry(eid: str, n: int = 0) -> RawEntry:
    return RawEntry(eid, "1", "ADDED", "Node", f"/n{n}", b"\x80", "u" if n % 2 else "")


IDS = ["5-0", "5-1", "7-0", "9-3", "12-0"]


def _fill(log: Log) -> None:
    for i, eid in enumerate(IDS):
        log.append(_entry(eid, i))


def test_an_empty_log(log: Log) -> None:
    assert (log.port.tip(), log.port.first(), log.port.length()) == ("", "", 0)
    assert log.port.after(NO_POSITION, 10).entries == []
    assert log.port.before("", 10).entries == []
    assert log.port.at("1-0") is None


def test_entries_read_back_as_they_were_appended(log: Log) -> None:
    _fill(log)
    assert log.port.after("", 100).entries == [_entry(e, i) for i, e in enumerate(IDS)]
    assert (log.port.tip(), log.port.first(), log.port.length()) == ("12-0", "5-0", 5)
    assert log.port.at("9-3") == _entry("9-3", 3) and log.port.at("9-2") is None


def test_after_is_exclusive_bounded_by_until_and_counted(log: Log) -> None:
    _fill(log)
    ids = lambda page: [e.id for e in page.entries]  # noqa: E731
    assert ids(log.port.after("5-1", 100)) == ["7-0", "9-3", "12-0"]
    assert ids(log.port.after("6-0", 100)) == ["7-0", "9-3", "12-0"]  # no such id: the next
    assert ids(log.port.after(NO_POSITION, 2)) == ["5-0", "5-1"]
    assert ids(log.port.after("5-0", 100, until="9-3")) == ["5-1", "7-0", "9-3"]
    assert ids(log.port.after("12-0", 100)) == []


def test_before_is_exclusive_newest_first(log: Log) -> None:
    _fill(log)
    ids = lambda page: [e.id for e in page.entries]  # noqa: E731
    assert ids(log.port.before("", 2)) == ["12-0", "9-3"]
    assert ids(log.port.before("9-3", 100)) == ["7-0", "5-1", "5-0"]
    assert ids(log.port.before("8-0", 1)) == ["7-0"]
    assert ids(log.port.before("5-0", 10)) == []


def test_pages_cover_every_entry_once_up_to_until(log: Log) -> None:
    _fill(log)
    got = [[e.id for e in p.entries] for p in pages(log.port, NO_POSITION, 2)]
    assert got == [["5-0", "5-1"], ["7-0", "9-3"], ["12-0"]]
    got = [[e.id for e in p.entries] for p in pages(log.port, "5-0", 2, until="9-3")]
    assert got == [["5-1", "7-0"], ["9-3"]]


def test_a_read_names_the_compaction_point_and_a_gap_behind_it(log: Log) -> None:
    _fill(log)
    assert log.port.after(NO_POSITION, 1).start == ""
    log.trim("7-0")
    page = log.port.after("5-0", 10)
    assert [e.id for e in page.entries] == ["7-0", "9-3", "12-0"] and page.start == "7-0"
    assert page.gap_after("5-0") and page.gap_after(NO_POSITION)
    assert not page.gap_after("7-0") and not page.gap_after("9-3")
    assert (log.port.first(), log.port.length()) == ("7-0", 3)
    assert log.port.before("", 10).start == "7-0"


def test_follow_reads_after_a_position_and_waits_only_when_asked(log: Log) -> None:
    _fill(log)
    ids = lambda page: [e.id for e in page.entries]  # noqa: E731
    assert ids(log.port.follow(NO_POSITION, 2)) == ["5-0", "5-1"]
    assert ids(log.port.follow("7-0", 100, block_ms=50)) == ["9-3", "12-0"]
    assert ids(log.port.follow("12-0", 100)) == [] and not log.port.follow("12-0", 1).rewound
    assert ids(log.port.follow("12-0", 100, block_ms=20)) == []
    log.trim("7-0")
    assert log.port.follow("5-0", 10).gap_after("5-0")


def test_a_parked_record_is_kept_once_per_entry(log: Log) -> None:
    assert log.port.parked() == {}
    log.port.park("5-0", {"reader": "a", "error": "first"})
    log.port.park("5-0", {"reader": "b", "error": "second"})
    log.port.park("7-0", {"reader": "b", "error": "other"})
    assert log.port.parked() == {"5-0": {"reader": "a", "error": "first"},
                                 "7-0": {"reader": "b", "error": "other"}}


def test_a_reader_over_the_port_parks_what_it_cannot_decode_and_moves_on(log: Log) -> None:
    good = RawEntry("13-0", "1", "ADDED", "Node", "/n1",
                    wire.pack_object(new_node("n1")))
    _fill(log)  # payload b"\x80": not msgpack
    log.append(good)
    reader = LogReader(log.port, "5-1", name="test")
    got = reader.read(count=100)
    assert [e.id for e in got] == ["13-0"] and got[0].obj["metadata"]["name"] == "n1"
    assert (reader.position, reader.parked, reader.gap) == ("13-0", 3, False)
    parked = log.port.parked()
    assert sorted(parked) == ["12-0", "7-0", "9-3"]
    assert parked["9-3"]["reader"] == "test" and "9-3" in parked["9-3"]["error"]
    assert parked["9-3"]["fields"]["k"] == b"Node"
    log.trim("13-0")
    behind = LogReader(log.port, "5-0")
    assert [e.id for e in behind.read()] == ["13-0"] and behind.gap


def test_a_reader_of_some_kinds_passes_the_others_over_undecoded(log: Log) -> None:
    """Entries of kinds a reader does not keep, and DECISION entries when it takes none, are
    read past without being decoded: an undecodable one (0xc1: never msgpack) is neither
    returned nor parked."""
    node = RawEntry("5-0", "1", "ADDED", "Node", "/n1", wire.pack_object(new_node("n1")))
    log.append(node)
    log.append(RawEntry("5-1", "1", "ADDED", "Event", "ns/e1", b"\xc1"))
    log.append(RawEntry("7-0", "1", "DECISION", "Node", "/n1", b"\xc1"))
    log.append(RawEntry("9-0", "1", "MODIFIED", "Node", "/n1", b"\xc1"))
    some = LogReader(log.port, NO_POSITION, name="some", kinds=["Node"], decisions=False)
    got = some.read(count=100)
    assert [e.id for e in got] == ["5-0"]
    assert (some.position, some.parked) == ("9-0", 1)  # the Node entry it keeps is parked
    assert sorted(log.port.parked()) == ["9-0"]
    every = LogReader(log.port, NO_POSITION, name="every")
    assert [e.id for e in every.read(count=100)] == ["5-0"]
    assert (every.position, every.parked) == ("9-0", 3)
    assert sorted(log.port.parked()) == ["5-1", "7-0", "9-0"]


def test_a_read_whose_parking_fails_reads_the_same_entries_again(log: Log) -> None:
    """A read that cannot write its parked record (Redis unavailable) returns nothing and
    keeps its position: the next read gets the good entries before the poison one again,
    which a read that moved past them would have lost."""
    node = RawEntry("5-0", "1", "ADDED", "Node", "/n1", wire.pack_object(new_node("n1")))
    log.append(node)
    log.append(RawEntry("7-0", "1", "MODIFIED", "Node", "/n1", b"\xc1"))
    reader = LogReader(log.port, NO_POSITION, name="test")
    park = log.port.park

    def unavailable(eid: str, record: object) -> None:
        raise UnavailableError("parking failed")

    reader.log = cast(EventLog, SimpleNamespace(follow=log.port.follow, park=unavailable))
    with pytest.raises(UnavailableError):
        reader.read(count=100)
    assert reader.position == NO_POSITION
    reader.log = cast(EventLog, SimpleNamespace(follow=log.port.follow, park=park))
    assert [e.id for e in reader.read(count=100)] == ["5-0"]
    assert (reader.position, reader.parked) == ("7-0", 2)


def test_a_reader_decodes_a_status_update_over_the_version_it_read_before(log: Log) -> None:
    """A Node's status update (its heartbeat) shares the unchanged values with the version
    the reader decoded before it and is what a whole decode gives; a hostile status is
    parked as ever; after the Node's deletion its next version is decoded whole."""
    node = new_node("n1")
    beat = {**node, "status": {**node["status"], "conditions": [{"type": "Ready",
                                                                  "status": "True"}]}}
    bad = {**node, "status": {**node["status"], "conditions": "Ready"}}
    for eid, etype, obj in (("5-0", "ADDED", node), ("6-0", "MODIFIED", beat),
                            ("7-0", "MODIFIED", bad), ("8-0", "MODIFIED", node),
                            ("9-0", "DELETED", node), ("10-0", "ADDED", node),
                            ("11-0", "MODIFIED", beat)):
        log.append(RawEntry(eid, "1", etype, "Node", "/n1", wire.pack_object(obj)))
    reader = LogReader(log.port, NO_POSITION, name="test", kinds=["Node"])
    got = reader.read(count=100)
    assert [e.id for e in got] == ["5-0", "6-0", "8-0", "9-0", "10-0", "11-0"]
    assert [e.obj for e in got] == [wire.unpack_object(wire.pack_object(o), eid)
                                    for eid, o in (("5-0", node), ("6-0", beat), ("8-0", node),
                                                   ("9-0", node), ("10-0", node),
                                                   ("11-0", beat))]
    assert got[1].obj["spec"] is got[0].obj["spec"] and got[2].obj["spec"] is got[0].obj["spec"]
    assert got[5].obj["spec"] is got[4].obj["spec"]
    assert got[4].obj["spec"] is not got[0].obj["spec"]  # decoded whole after the deletion
    assert sorted(log.port.parked()) == ["7-0"]
    assert "status.conditions" in log.port.parked()["7-0"]["error"]
