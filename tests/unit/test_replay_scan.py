"""A backwards scan over the event log port (here its in-memory twin): newest first, across
pages, filtered before decoding, undecodable entries passed over."""

from __future__ import annotations

from services.replay import scan
from shared.eventlog import wire
from shared.eventlog.entry import RawEntry
from shared.eventlog.memory import InMemoryEventLog


def _node(eid: str, name: str) -> RawEntry:
    obj = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}
    return RawEntry(eid, "1", "ADDED", "Node", f"/{name}", wire.pack_object(obj))


def test_a_backwards_scan_filters_before_decoding_across_pages() -> None:
    log = InMemoryEventLog()
    for i in range(1, 8):
        log.append(_node(f"{i}-0", "a" if i % 2 else "b"))
    log.append(RawEntry("8-0", "1", "ADDED", "Node", "/a", b"\xc1"))  # not msgpack
    hits = list(scan.backwards_in(log, lambda e: e.key == "/a", page=2))
    assert [h.id for h in hits] == ["7-0", "5-0", "3-0", "1-0"]
    assert all(h.obj["metadata"]["resourceVersion"] == h.id for h in hits)


def test_a_backwards_scan_reads_no_more_than_its_limit() -> None:
    log = InMemoryEventLog()
    for i in range(1, 11):
        log.append(_node(f"{i}-0", "a"))
    assert [h.id for h in scan.backwards_in(log, lambda e: True, page=3, limit=5)] == \
        ["10-0", "9-0", "8-0", "7-0", "6-0"]
    assert len(list(scan.backwards_in(log, lambda e: True, page=3))) == 10
