"""The event log in memory: the twin of ``shared.store.eventlog.RedisEventLog``, for unit
tests of semantics (both pass ``tests/integration/test_eventlog_contract.py``); and a
reader's cursor, the twin of ``RedisCursor`` (``test_cursor_contract.py``). Acts on itself
only."""

from __future__ import annotations

import bisect
import copy
from collections.abc import Mapping
from typing import Any

from shared.eventlog.entry import RawEntry, id_tuple
from shared.eventlog.ports import Page


class InMemoryEventLog:
    def __init__(self) -> None:
        self.entries: list[RawEntry] = []
        self._ids: list[tuple[int, int]] = []
        self.start = ""  # the compaction point ("" = never compacted)
        self.parked_records: dict[str, Any] = {}

    def append(self, entry: RawEntry) -> None:
        """Add ``entry`` at the end; its id must be newer than the tip (as XADD demands)."""
        at = id_tuple(entry.id)
        if (self._ids and at <= self._ids[-1]) or at == (0, 0):
            raise ValueError(f"entry id {entry.id} is not newer than the tip")
        self.entries.append(entry)
        self._ids.append(at)

    def trim(self, start: str) -> int:
        """Drop the entries below ``start`` and make it the compaction point (as compaction's
        ``STORE_AND_TRIM`` does); returns how many were dropped."""
        cut = bisect.bisect_left(self._ids, id_tuple(start))
        del self.entries[:cut], self._ids[:cut]
        self.start = start
        return cut

    def after(self, position: str, count: int, until: str = "") -> Page:
        lo = bisect.bisect_right(self._ids, id_tuple(position))
        hi = bisect.bisect_right(self._ids, id_tuple(until)) if until else len(self._ids)
        return Page(self.entries[lo:min(hi, lo + count)], self.start)

    def before(self, position: str, count: int) -> Page:
        hi = bisect.bisect_left(self._ids, id_tuple(position)) if position else len(self._ids)
        lo = max(0, hi - count)
        return Page(self.entries[lo:hi][::-1], self.start)

    def follow(self, position: str, count: int, block_ms: int | None = None) -> Page:
        """``after``: nothing can be appended while its one caller waits, so it does not."""
        return self.after(position, count)

    def park(self, entry_id: str, record: Mapping[str, Any]) -> None:
        self.parked_records.setdefault(entry_id, copy.deepcopy(dict(record)))

    def parked(self) -> dict[str, Any]:
        return copy.deepcopy(self.parked_records)

    def at(self, entry_id: str) -> RawEntry | None:
        i = bisect.bisect_left(self._ids, id_tuple(entry_id))
        return self.entries[i] if i < len(self._ids) and self.entries[i].id == entry_id \
            else None

    def tip(self) -> str:
        return self.entries[-1].id if self.entries else ""

    def first(self) -> str:
        return self.entries[0].id if self.entries else ""

    def length(self) -> int:
        return len(self.entries)


class InMemoryCursor:
    def __init__(self, position: str | None = None) -> None:
        self.position = position

    def get(self) -> str | None:
        return self.position

    def set(self, position: str) -> None:
        self.position = position
