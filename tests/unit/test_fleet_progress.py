"""The fleet view's progress history (services.apiserver.fleet.progress_points) over the
event log port, here its in-memory twin: a DaemonSet's status counters each time they
changed, oldest first, from its own entries only, and bounded."""

from __future__ import annotations

from typing import Any

from services.apiserver import fleet
from shared.eventlog import wire
from shared.eventlog.entry import RawEntry
from shared.eventlog.memory import InMemoryEventLog

KEY = "default/agent"


def _ds(uid: str, desired: int, updated: int, available: int, name: str = "agent"
        ) -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": "default", "uid": uid},
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "main", "image": "x"}]}}},
            "status": {"desiredNumberScheduled": desired, "updatedNumberScheduled": updated,
                       "numberAvailable": available}}


def _entry(ms: int, etype: str, obj: dict[str, Any]) -> RawEntry:
    key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
    return RawEntry(f"{ms}-0", "1", etype, "DaemonSet", key, wire.pack_object(obj))


def _log(*entries: RawEntry) -> InMemoryEventLog:
    log = InMemoryEventLog()
    for e in entries:
        log.append(e)
    return log


def test_the_counters_each_time_they_changed_oldest_first() -> None:
    log = _log(
        _entry(1000, "ADDED", _ds("u1", 0, 0, 0)),
        _entry(2000, "MODIFIED", _ds("u1", 3, 0, 0)),
        _entry(2500, "MODIFIED", _ds("other", 9, 9, 9, name="other")),  # another DaemonSet
        _entry(3000, "MODIFIED", _ds("u1", 3, 3, 0)),
        _entry(3500, "MODIFIED", _ds("u1", 3, 3, 0)),  # an annotation: no change
        _entry(4000, "DECISION", _ds("u1", 1, 1, 1)),  # a decision record is no status
        _entry(5000, "MODIFIED", _ds("u1", 3, 3, 3)),
    )
    assert fleet.progress_points(log, KEY, "u1") == [
        [1.0, 0, 0, 0], [2.0, 3, 0, 0], [3.0, 3, 3, 0], [5.0, 3, 3, 3]]


def test_an_earlier_daemonset_of_the_same_name_is_not_its_history() -> None:
    log = _log(
        _entry(1000, "ADDED", _ds("old", 2, 2, 2)),
        _entry(2000, "DELETED", _ds("old", 2, 2, 2)),
        _entry(3000, "ADDED", _ds("new", 0, 0, 0)),
        _entry(4000, "MODIFIED", _ds("new", 1, 0, 0)),
    )
    assert fleet.progress_points(log, KEY, "new") == [[3.0, 0, 0, 0], [4.0, 1, 0, 0]]


def test_the_history_is_bounded_in_entries_read_and_points_returned() -> None:
    log = _log(*[_entry(1000 * (i + 1), "ADDED" if i == 0 else "MODIFIED", _ds("u1", 10, i, 0))
                 for i in range(10)])
    assert [p[2] for p in fleet.progress_points(log, KEY, "u1", read=4)] == [6, 7, 8, 9]
    assert [p[2] for p in fleet.progress_points(log, KEY, "u1", points=3)] == [7, 8, 9]
    assert len(fleet.progress_points(log, KEY, "u1")) == 10
