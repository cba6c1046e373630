"""The export file format, the ``ID|TIME`` bounds, the tail lines, the compaction cut and the
stored snapshot: the pure parts of the log commands."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest

from services.replay import bounds, compact, logfile, tail
from shared.store import codec, errors, snapshot


def _header(**kw: object) -> logfile.Header:
    base: dict = {"prefix": "p", "first": "1-0", "last": "2-0", "complete": True}
    base.update(kw)
    return logfile.Header(**base)


def test_export_file_round_trips_header_objects_and_entries(tmp_path: Path) -> None:
    path = tmp_path / "x.dblog"
    with logfile.Writer(path, _header(snapshot="1-0", objects=1)) as w:
        w.object("Node", "/n1", "1-0", b"\x81\xa1a\x01")
        w.entry("1-0", "1", "ADDED", "Node", "/n1", b"\x80")
        w.entry("2-0", "1", "DECISION", "DaemonSet", "ns/x", b"\x81\xa1k\xa1v")
    with logfile.Reader(path) as r:
        assert r.header == _header(snapshot="1-0", objects=1, created=r.header.created)
        assert list(r.records()) == [
            ["O", "Node", "/n1", "1-0", b"\x81\xa1a\x01"],
            ["E", "1-0", "1", "ADDED", "Node", "/n1", b"\x80"],
            ["E", "2-0", "1", "DECISION", "DaemonSet", "ns/x", b"\x81\xa1k\xa1v"],
        ]
    assert not (tmp_path / "x.dblog.part").exists()


def test_export_file_cut_short_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.dblog"
    with logfile.Writer(path, _header()) as w:
        w.entry("1-0", "1", "ADDED", "Node", "/n1", b"\x80")
    data = path.read_bytes()
    path.write_bytes(data[: data.rindex(msgpack.packb(["Z", 1, "1-0"]))])
    with logfile.Reader(path) as r, pytest.raises(logfile.LogFileError, match="cut short"):
        list(r.records())


def test_entries_of_a_type_are_scanned_in_order_and_a_damaged_file_refused(
        tmp_path: Path) -> None:
    path = tmp_path / "x.dblog"
    with logfile.Writer(path, _header(snapshot="1-0", objects=1)) as w:
        w.object("Node", "/n1", "1-0", b"\x80")
        w.entry("1-0", "1", "ADDED", "Node", "/n1", b"\x80")
        w.entry("2-0", "1", "DECISION", "DaemonSet", "ns/x", b"\x80", u="alice")
        w.entry("3-0", "1", "MODIFIED", "Node", "/n1", b"\x80")
        w.entry("4-0", "1", "DECISION", "DaemonSet", "ns/y", b"\x81")
    with logfile.Reader(path) as r:
        assert list(r.entries_of("DECISION")) == [
            ["E", "2-0", "1", "DECISION", "DaemonSet", "ns/x", b"\x80", "alice"],
            ["E", "4-0", "1", "DECISION", "DaemonSet", "ns/y", b"\x81"],
        ]
    data = path.read_bytes()
    trailer = msgpack.packb(["Z", 4, "4-0"])
    path.write_bytes(data[: data.rindex(trailer)])
    with logfile.Reader(path) as r, pytest.raises(logfile.LogFileError, match="cut short"):
        list(r.entries_of("DECISION"))
    path.write_bytes(data.replace(trailer, msgpack.packb(7) + trailer))
    with logfile.Reader(path) as r, pytest.raises(logfile.LogFileError, match="damaged"):
        list(r.entries_of("DECISION"))


def test_failed_export_leaves_no_file(tmp_path: Path) -> None:
    path = tmp_path / "x.dblog"
    with pytest.raises(RuntimeError), logfile.Writer(path, _header()):
        raise RuntimeError("redis went away")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("doc, message", [
    ({"format": "something-else"}, "not a daemonbus log export"),
    ({"format": "daemonbus-log", "version": 2}, "unsupported export version 2"),
])
def test_foreign_or_newer_files_are_refused(tmp_path: Path, doc: dict, message: str) -> None:
    path = tmp_path / "x.dblog"
    path.write_bytes(msgpack.packb(doc))
    with pytest.raises(logfile.LogFileError, match=message):
        logfile.Reader(path)


def test_bounds_accept_ids_milliseconds_seconds_and_times() -> None:
    assert bounds.upper("1714557600000-3") == "1714557600000-3"
    assert bounds.upper("1714557600000") == f"1714557600000-{bounds.MAX_SEQ}"
    assert bounds.lower("1714557600000") == "1714557600000-0"
    assert bounds.upper("1714557600") == f"1714557600000-{bounds.MAX_SEQ}"
    assert bounds.upper("1714557600.25") == f"1714557600250-{bounds.MAX_SEQ}"
    assert bounds.lower("2024-05-01T10:00:00Z") == "1714557600000-0"
    assert bounds.lower("2024-05-01T12:00:00+02:00") == "1714557600000-0"
    with pytest.raises(bounds.BoundError, match="neither a log id"):
        bounds.upper("yesterday")


def test_durations() -> None:
    assert bounds.duration("90s") == 90
    assert bounds.duration("1h30m") == 5400
    assert bounds.duration("7d") == 7 * 86400
    assert bounds.duration("250ms") == 0.25
    assert bounds.duration("45") == 45
    with pytest.raises(bounds.BoundError):
        bounds.duration("10 minutes")


def test_id_time_is_the_commit_time() -> None:
    assert bounds.id_time("1714557600123-7") == "2024-05-01T10:00:00.123Z"


def test_tail_line_summarises_a_decision() -> None:
    rec = {"position": "5-0", "worker": "r1", "expectationsSatisfied": True,
           "actions": {"hash": "abc", "creates": [["n1", "p1"], ["n2", "p2"]],
                       "deletes": [["p0", "n0"]], "events": [["Normal", "x", "y"]]}}
    e = codec.Entry("1714557600123-0", "DECISION", "DaemonSet", "ns/ds", rec)
    assert tail.line(e) == (
        "1714557600123-0  2024-05-01T10:00:00.123Z  DECISION  DaemonSet           ns/ds  "
        "creates 2 deletes 1 events 1 hash abc worker r1 read-through 5-0")


def test_tail_line_summarises_a_pod() -> None:
    pod = {"kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "labels": {
        "controller-revision-hash": "abc"}}, "spec": {"nodeName": "n1"},
        "status": {"phase": "Running"}}
    e = codec.Entry("1714557600123-0", "MODIFIED", "Pod", "ns/p", pod)
    assert tail.line(e).endswith("ns/p  node=n1 phase=Running rev=abc")


def test_compaction_cut_keeps_n_entries() -> None:
    # without a snapshot the fold runs through the first entry kept
    assert compact.cut_by_count(10, 4, has_snapshot=False) == 7
    # with one, the log's first entry is the snapshot's own (already folded)
    assert compact.cut_by_count(10, 4, has_snapshot=True) == 6
    assert compact.cut_by_count(3, 4, has_snapshot=False) == 0
    assert compact.cut_by_age(1000.0, 60.0) == (940_000, (1 << 64) - 1)


def test_raw_view_folds_entries_idempotently_by_id() -> None:
    view = snapshot.RawView()
    view.apply("1-0", "ADDED", "Node", "/a", b"a1")
    view.apply("2-0", "ADDED", "Node", "/b", b"b1")
    view.apply("3-0", "MODIFIED", "Node", "/a", b"a2")
    view.apply("2-0", "ADDED", "Node", "/b", b"stale")  # already applied
    view.apply("4-0", "DELETED", "Node", "/b", b"b1")
    view.apply("5-0", "DECISION", "DaemonSet", "ns/x", b"rec")
    assert view.objects == {"Node": {"/a": ("3-0", b"a2")}}
    assert view.position == "5-0"


def test_snapshot_round_trips_and_rejects_foreign_data() -> None:
    view = snapshot.RawView(position="9-1")
    view.put("Pod", "ns/p", "7-0", b"payload")
    back = snapshot.decode(snapshot.encode(view, created=1.0))
    assert (back.position, back.objects) == ("9-1", {"Pod": {"ns/p": ("7-0", b"payload")}})
    with pytest.raises(errors.CorruptEntryError, match="not a daemonbus log snapshot"):
        snapshot.decode(codec.pack({"format": "x"}))


def test_an_entry_record_carries_its_user_only_when_it_has_one(tmp_path: Path) -> None:
    path = tmp_path / "x.dblog"
    with logfile.Writer(path, _header()) as w:
        w.entry("1-0", "1", "ADDED", "Node", "/n1", b"\x80", "alice")
        w.entry("2-0", "1", "MODIFIED", "Node", "/n1", b"\x80")
    with logfile.Reader(path) as r:
        records = list(r.records())
    assert records == [["E", "1-0", "1", "ADDED", "Node", "/n1", b"\x80", "alice"],
                       ["E", "2-0", "1", "MODIFIED", "Node", "/n1", b"\x80"]]
    assert [logfile.raw_entry(rec).user for rec in records] == ["alice", ""]
    with pytest.raises(logfile.LogFileError, match="bad user field"):
        logfile.raw_entry(["E", "3-0", "1", "ADDED", "Node", "/n1", b"\x80", b"alice"])
