"""The log entry's module: its layout both ways, its types, and the upcaster hook that
brings an entry of an older schema version up to this one."""

from __future__ import annotations

import dataclasses

import pytest

from shared.eventlog import entry, wire
from shared.model.errors import CorruptEntryError

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
       "spec": {"containers": [{"name": "c", "image": "i"}]}}


def _fields(**over: bytes) -> dict[bytes, bytes]:
    fields = {b"v": b"1", b"t": b"ADDED", b"k": b"Pod", b"n": b"ns/p",
              b"o": wire.pack_object(POD)}
    fields.update({k.encode(): v for k, v in over.items()})
    return fields


def test_a_stored_entry_reads_back_as_its_fields_and_decodes() -> None:
    raw = entry.RawEntry.from_fields(b"5-1", _fields(u=b"alice"))
    assert raw == entry.RawEntry("5-1", "1", "ADDED", "Pod", "ns/p", wire.pack_object(POD),
                                 "alice")
    assert {k.encode(): v if isinstance(v, bytes) else v.encode()
            for k, v in raw.fields().items()} == _fields(u=b"alice")
    e = entry.decode(raw)
    assert (e.id, e.type, e.kind, e.key, e.user) == ("5-1", entry.EntryType.ADDED, "Pod",
                                                     "ns/p", "alice")
    assert e.obj["metadata"]["resourceVersion"] == "5-1"
    assert entry.decode_fields(b"5-1", _fields(u=b"alice")) == e


def _outcome(fn: object, *args: object) -> object:
    try:
        return fn(*args)  # type: ignore[operator]
    except CorruptEntryError as err:
        return f"refused: {err}"


@pytest.mark.parametrize("fields", [
    _fields(), _fields(u=b"alice"), _fields(v=b"2"), _fields(v=b"\xff"), _fields(t=b"\xff"),
    _fields(k=b"Pod\xff"), _fields(n=b"ns/p\xff"), _fields(u=b"\xff"), _fields(o=b"\x80"),
    {k: v for k, v in _fields().items() if k != b"v"},
    {k: v for k, v in _fields().items() if k != b"t"},
    {k: v for k, v in _fields().items() if k != b"o"},
    {k: v for k, v in _fields(v=b"2").items() if k != b"t"},
])
def test_an_entry_read_from_the_stream_decodes_as_its_stored_fields(
        fields: dict[bytes, bytes]) -> None:
    """What the caches' reader decodes through the log port (``decode_as_stored`` of
    ``from_fields``) is what ``decode_fields`` makes of the stream's fields, refusal and
    message included, though the str fields replace what is not UTF-8."""
    raw = entry.RawEntry.from_fields(b"5-1", fields)
    assert _outcome(entry.decode_as_stored, raw) == _outcome(entry.decode_fields, b"5-1",
                                                             fields)
    assert raw.stored is fields


def test_every_write_mode_appends_the_entry_type_commit_gives_it() -> None:
    assert {m.value: t.value for m, t in entry.ENTRY_TYPE_OF.items()} == {
        "create": "ADDED", "ensure": "ADDED", "update": "MODIFIED", "delete": "DELETED",
        "record": "DECISION"}


def test_an_entry_of_an_unknown_version_is_refused() -> None:
    for version in (b"2", b"0", b"x"):
        with pytest.raises(CorruptEntryError, match="unsupported schema version"):
            entry.decode_fields("5-0", _fields(v=version))


def test_an_older_entry_is_upcast_before_it_is_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Were the schema at version 3, a version 1 entry goes through both upcasters."""
    def v1_to_v2(raw: entry.RawEntry) -> entry.RawEntry:
        return dataclasses.replace(raw, type={"CREATED": "ADDED"}.get(raw.type, raw.type))

    def v2_to_v3(raw: entry.RawEntry) -> entry.RawEntry:
        return dataclasses.replace(raw, user=raw.user or "before-users")

    monkeypatch.setattr(entry, "SCHEMA_VERSION", 3)
    monkeypatch.setattr(entry, "UPCASTERS", {1: v1_to_v2, 2: v2_to_v3})
    e = entry.decode_fields("5-0", _fields(t=b"CREATED"))
    assert (e.type, e.user) == (entry.EntryType.ADDED, "before-users")
    assert entry.decode_fields("6-0", _fields(v=b"3")).user == ""
    monkeypatch.setattr(entry, "UPCASTERS", {2: v2_to_v3})
    with pytest.raises(CorruptEntryError, match="no upcaster from schema version 1"):
        entry.decode_fields("5-0", _fields())


def test_the_id_before_an_id_is_the_greatest_below_it() -> None:
    assert entry.previous_id("5-3") == "5-2"
    assert entry.previous_id("5-0") == f"4-{(1 << 64) - 1}"
    assert entry.previous_id("0-1") == "0-0" and entry.previous_id("0-0") == "0-0"
    assert entry.id_tuple(entry.previous_id("7-0")) < entry.id_tuple("7-0")
