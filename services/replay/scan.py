"""Reading the log backwards, cheaply: entries are filtered as they are stored
(``shared.eventlog.entry.RawEntry``: their small fields and a byte search of the payload)
before anything is unpacked. Acts (reads the log, through its port)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from shared import settings
from shared.eventlog.entry import EntryType, RawEntry, decode
from shared.eventlog.ports import EventLog
from shared.store import errors

PAGE = settings.current.scan_page


@dataclass(frozen=True)
class Hit:
    id: str
    type: EntryType
    kind: str
    key: str
    obj: dict[str, Any]  # the object (resourceVersion = id) or the decision record
    user: str = ""  # who wrote it, when the log records it (writes through the API server)


def backwards_in(log: EventLog, want: Callable[[RawEntry], bool],
                 page: int = PAGE, limit: int = 0) -> Iterator[Hit]:
    """Decoded entries of ``log`` for which ``want(raw)`` is true, newest first (an entry
    that does not decode is passed over), among the newest ``limit`` entries (0: all)."""
    upper = ""
    left = limit
    while True:
        count = min(page, left) if limit else page
        got = log.before(upper, count).entries if count > 0 else []
        if not got:
            return
        left -= len(got)
        for stored in got:
            if want(stored):
                hit = _hit(stored)
                if hit is not None:
                    yield hit
        upper = got[-1].id


def _hit(stored: RawEntry) -> Hit | None:
    try:
        e = decode(stored)
    except errors.CorruptEntryError:
        return None
    return Hit(e.id, e.type, e.kind, e.key, e.obj, e.user)


def entry_at(log: EventLog, entry_id: str) -> Hit | None:
    """The entry with id ``entry_id``, if the log still holds it."""
    stored = log.at(entry_id)
    return _hit(stored) if stored is not None else None


def first_id(log: EventLog) -> str:
    """The oldest id the log still holds ("" if empty)."""
    return log.first()
