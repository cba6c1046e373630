"""The event log as a port: what its readers need of it, whatever holds it. Pure.

``shared.store.eventlog.RedisEventLog`` is the log in Redis (a stream); ``InMemoryEventLog``
(``shared.eventlog.memory``) is its twin for unit tests of semantics. Both are held to one
contract suite (``tests/integration/test_eventlog_contract.py``); so are a reader's stored
position, ``Cursor`` (``RedisCursor``, ``InMemoryCursor``: ``test_cursor_contract.py``).

Positions are entry ids (``"<ms>-<seq>"``); ``NO_POSITION`` is before the first entry.
Compaction trims the log below its snapshot's id (``start``): a reader whose position is
older than ``start`` may have missed entries (a *gap*) and must list again.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from shared.eventlog.entry import RawEntry, id_tuple

NO_POSITION = "0-0"


@dataclass(frozen=True)
class Page:
    """Entries read in one round trip, with the log's compaction point read with them
    (``start``: "" when the log was never compacted, or when ``follow`` saw that nothing
    after its position was trimmed and left the point unread); ``rewound``: the log went backwards
    below what the reader's process saw (``EventLog.follow``), nothing was read."""

    entries: list[RawEntry]
    start: str = ""
    rewound: bool = False

    @property
    def last(self) -> str:
        return self.entries[-1].id if self.entries else ""

    def gap_after(self, position: str) -> bool:
        """Whether entries after ``position`` may be gone (compacted) before this read."""
        return bool(self.start) and id_tuple(self.start) > id_tuple(position or NO_POSITION)


class EventLog(Protocol):
    def after(self, position: str, count: int, until: str = "") -> Page:
        """Up to ``count`` entries after ``position`` (exclusive; ``NO_POSITION`` or "" for
        the first) and up to ``until`` (inclusive; "" for the tip), oldest first."""

    def before(self, position: str, count: int) -> Page:
        """Up to ``count`` entries before ``position`` (exclusive; "" for the tip, which is
        then included), newest first."""

    def follow(self, position: str, count: int, block_ms: int | None = None) -> Page:
        """Up to ``count`` entries after ``position``, as ``after``, waiting up to
        ``block_ms`` for one when there is none yet (None: do not wait). A log that checks
        what its process saw of it (the Redis one given a log mark, ``shared.store.logmark``)
        checks it in the same round trip: when the log went backwards below that, the page
        is empty and ``rewound``."""

    def park(self, entry_id: str, record: Mapping[str, Any]) -> None:
        """Keep ``record`` (why a reader could not decode the entry ``entry_id``) unless one
        is kept for it already. Never fails: a reader parks and carries on."""

    def parked(self) -> dict[str, Any]:
        """Every parked record by entry id."""

    def at(self, entry_id: str) -> RawEntry | None:
        """The entry ``entry_id``, if the log holds it."""

    def tip(self) -> str:
        """The newest entry's id ("" when the log is empty)."""

    def first(self) -> str:
        """The oldest entry's id the log holds ("" when empty)."""

    def length(self) -> int:
        """How many entries the log holds."""


class Cursor(Protocol):
    """One reader's position in the log, kept across its restarts (the watcher's: the entry
    its last batch covered, from which a restarted watcher replays). The watcher moves its
    own in the fenced write of each batch (``shared.store.watcher_batch``); ``set`` is the
    unfenced write, for tools and tests."""

    def get(self) -> str | None:
        """The stored position (None: none was ever stored)."""

    def set(self, position: str) -> None:
        """Store ``position``."""


def pages(log: EventLog, position: str, page: int, until: str = "") -> Iterator[Page]:
    """Every entry after ``position`` up to ``until``, a page at a time (each page a round
    trip, its compaction point read with it)."""
    while True:
        got = log.after(position, page, until)
        if not got.entries:
            return
        yield got
        position = got.last
        if until and id_tuple(position) >= id_tuple(until):
            return
