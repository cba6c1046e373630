"""The event log in Redis (the stream ``Keys.log``, its parked entries ``Keys.parked``), as
the port ``shared.eventlog.ports.EventLog``. Each read is one round trip; ``after`` reads the
compaction point (``Keys.log_snapshot_id``) in the same pipeline, and ``follow`` the checks of
a log mark too (``shared.store.logmark``) when the log is given one (and the compaction point
only when they need it). And a reader's stored
position, ``Keys.cursor(reader)``, as the port ``shared.eventlog.ports.Cursor``. Acts
(Redis)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import redis

from shared.eventlog.entry import RawEntry
from shared.eventlog.ports import NO_POSITION, Page
from shared.store import codec, errors
from shared.store.guard import redis_errors, text
from shared.store.keys import Keys
from shared.store.logmark import LogMark


def _entries(raw: Any) -> list[RawEntry]:
    return [RawEntry.from_fields(rid, fields) for rid, fields in raw or []]


class RedisEventLog:
    """``mark``: what this reader's process saw of the log, checked by every ``follow``."""

    def __init__(self, client: redis.Redis, keys: Keys, mark: LogMark | None = None) -> None:
        self.r = client
        self.keys = keys
        self.mark = mark

    def after(self, position: str, count: int, until: str = "") -> Page:
        lower = "(" + position if position and position != NO_POSITION else "-"
        with redis_errors("read the log"):
            pipe = self.r.pipeline(transaction=False)
            pipe.xrange(self.keys.log, min=lower, max=until or "+", count=count)
            pipe.get(self.keys.log_snapshot_id)
            raw, start = pipe.execute()
        return Page(_entries(raw), text(start) if start is not None else "")

    def before(self, position: str, count: int) -> Page:
        with redis_errors("read the log"):
            pipe = self.r.pipeline(transaction=False)
            pipe.xrevrange(self.keys.log, max="(" + position if position else "+", count=count)
            pipe.get(self.keys.log_snapshot_id)
            raw, start = pipe.execute()
        return Page(_entries(raw), text(start) if start is not None else "")

    def follow(self, position: str, count: int, block_ms: int | None = None) -> Page:
        """The read, then the mark's checks (``LogMark.queue``) after it, in one pipeline.
        The compaction point is read with them unless the reader is at the entry its mark saw
        last (the usual case): that entry still there after the read means nothing after it
        was trimmed before the read and the log was not cut back below it, so the point is
        needed only when the entry is gone, and is read then, in a round trip of its own
        (compaction moves it forward only: it is at least what it was after the read)."""
        known = None
        mark = self.mark
        at_seen = mark is not None and position == mark.seen and position != NO_POSITION
        try:
            pipe = self.r.pipeline(transaction=False)
            if block_ms is None:
                lower = "(" + position if position and position != NO_POSITION else "-"
                pipe.xrange(self.keys.log, min=lower, count=count)
            else:
                pipe.xread({self.keys.log: position or NO_POSITION}, count=count,
                           block=block_ms)
            if mark is not None:
                known = mark.queue(pipe, self.keys)
            if not at_seen:
                pipe.get(self.keys.log_snapshot_id)  # after the read: a trim during it counts
            replies: list[Any] = pipe.execute()
            trimmed_to = None if at_seen else replies[-1]
            if at_seen and not replies[2]:
                trimmed_to = self.r.get(self.keys.log_snapshot_id)
        except redis.RedisError as err:
            raise errors.UnavailableError(f"redis: {err}") from err
        resp = replies[0]
        start = text(trimmed_to) if trimmed_to is not None else ""
        if mark is not None and mark.settle(self.r, self.keys, replies[1], replies[2],
                                            trimmed_to, known):
            return Page([], start, rewound=True)
        entries = _entries(resp if block_ms is None else (resp[0][1] if resp else []))
        if entries and mark is not None:
            mark.saw(entries[-1].id)
        return Page(entries, start)

    def park(self, entry_id: str, record: Mapping[str, Any]) -> None:
        try:
            self.r.hsetnx(self.keys.parked, entry_id, codec.pack(dict(record)))
        except redis.RedisError:
            pass

    def parked(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        raw: Any
        with redis_errors("read the parked entries"):
            raw = self.r.hgetall(self.keys.parked)
        for eid, record in raw.items():
            try:
                out[text(eid)] = codec.unpack(record)
            except errors.CorruptEntryError:
                out[text(eid)] = {"error": "unreadable parked record"}
        return out

    def at(self, entry_id: str) -> RawEntry | None:
        raw: Any
        with redis_errors("read the log"):
            raw = self.r.xrange(self.keys.log, min=entry_id, max=entry_id, count=1)
        found = _entries(raw)
        return found[0] if found else None

    def tip(self) -> str:
        raw: Any
        with redis_errors("read the log"):
            raw = self.r.xrevrange(self.keys.log, count=1)
        return text(raw[0][0]) if raw else ""

    def first(self) -> str:
        raw: Any
        with redis_errors("read the log"):
            raw = self.r.xrange(self.keys.log, count=1)
        return text(raw[0][0]) if raw else ""

    def edge(self, start: str, end: str, newest: bool) -> str:
        """The newest (else the oldest) entry id from ``start`` to ``end``, both inclusive
        (Redis' range bounds: ``-`` and ``+`` for the log's ends); "" when there is none."""
        raw: Any
        with redis_errors("export range"):
            if newest:
                raw = self.r.xrevrange(self.keys.log, max=end, min=start, count=1)
            else:
                raw = self.r.xrange(self.keys.log, min=start, max=end, count=1)
        return text(raw[0][0]) if raw else ""

    def length(self) -> int:
        with redis_errors("read the log"):
            return int(self.r.xlen(self.keys.log))

    def append(self, entry: RawEntry) -> None:
        """Add ``entry`` with its own id (as ``replay FILE`` does; tests build logs so)."""
        with redis_errors("append to the log"):
            self.r.xadd(self.keys.log, entry.fields(), id=entry.id)  # type: ignore[arg-type]


class RedisCursor:
    """The cursor ``Keys.cursor(reader)`` (the watcher's batch writes it fenced, in the same
    script as its effects: ``shared.store.watcher_batch``)."""

    def __init__(self, client: redis.Redis, keys: Keys, reader: str) -> None:
        self.r = client
        self.key = keys.cursor(reader)

    def get(self) -> str | None:
        raw: Any
        with redis_errors("read the cursor"):
            raw = self.r.get(self.key)
        return text(raw) if raw else None

    def set(self, position: str) -> None:
        with redis_errors("store the cursor"):
            self.r.set(self.key, position)
