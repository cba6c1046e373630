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
from shared.store.logmark import NOT_READ, LogMark


def _entries(raw: Any) -> list[RawEntry]:
    """The entries of an ``XRANGE`` reply, or of one stream's in an ``XREAD`` reply, as the
    wire gave them (each entry's fields a flat list: read on ``RedisEventLog.reads``)."""
    return [RawEntry.from_flat(rid, fields) for rid, fields in raw or []]


def _stream(reply: Any) -> Any:
    """The entries of the one stream of an ``XREAD`` reply, as RESP3 (a map of streams) or
    RESP2 (a list of [stream, entries]) gives it: none when the read timed out."""
    if not reply:
        return []
    return next(iter(reply.values())) if isinstance(reply, dict) else reply[0][1]


def _as_read(response: Any, **_options: Any) -> Any:
    return response


#: the log's reads, answered as read: redis-py would make a map of each entry's fields
#: (``pairs_to_dict``) for ``RawEntry.from_fields`` to pick its five fields from again, for
#: every entry every reader reads
_UNPARSED = ("XRANGE", "XREVRANGE", "XREAD")


def _returned(entries: list[RawEntry], entry_id: str) -> bool:
    """Whether a read that returned ``entries`` (oldest first) returned the entry
    ``entry_id``; False also when it stopped short of it."""
    wanted = codec.id_tuple(entry_id)
    for entry in reversed(entries):
        here = codec.id_tuple(entry.id)
        if here <= wanted:
            return here == wanted
    return False


class RedisEventLog:
    """``mark``: what this reader's process saw of the log, checked by every ``follow``."""

    def __init__(self, client: redis.Redis, keys: Keys, mark: LogMark | None = None) -> None:
        self.r = client
        self.keys = keys
        self.mark = mark
        # a client of its own on the same connections, whose stream reads are not parsed
        self.reads = redis.Redis(connection_pool=client.connection_pool)
        for command in _UNPARSED:
            self.reads.set_response_callback(command, _as_read)

    def after(self, position: str, count: int, until: str = "") -> Page:
        lower = "(" + position if position and position != NO_POSITION else "-"
        with redis_errors("read the log"):
            pipe = self.reads.pipeline(transaction=False)
            pipe.xrange(self.keys.log, min=lower, max=until or "+", count=count)
            pipe.get(self.keys.log_snapshot_id)
            raw, start = pipe.execute()
        return Page(_entries(raw), text(start) if start is not None else "")

    def before(self, position: str, count: int) -> Page:
        with redis_errors("read the log"):
            pipe = self.reads.pipeline(transaction=False)
            pipe.xrevrange(self.keys.log, max="(" + position if position else "+", count=count)
            pipe.get(self.keys.log_snapshot_id)
            raw, start = pipe.execute()
        return Page(_entries(raw), text(start) if start is not None else "")

    def follow(self, position: str, count: int, block_ms: int | None = None) -> Page:
        """The read, then the mark's checks after it, in one pipeline: the entry at the
        reader's own position when it has one at or below the entry its mark saw last (the
        usual case), else that entry and the compaction point; the epoch only when the mark
        wants it (``LogMark.queue``).

        The entry at the position still there after the read means nothing after it was
        trimmed before the read and the log was not cut back below it: the compaction point
        is needed only when it is gone. The entry the mark saw is then that same entry, or
        one past the position, which the read itself returns while it is there (a process
        reading back its own commit): when the read does not say (a full page short of it),
        or an entry is gone, the rest of the check follows in a round trip of its own
        (compaction moves the point forward only: it is at least what it was after the
        read)."""
        mark = self.mark
        if mark is None:
            return self._follow_unmarked(position, count, block_ms)
        anchored = bool(position) and position != NO_POSITION
        known = mark.known(self.r)
        seen = known.seen
        anchor = anchored and (seen == NO_POSITION or codec.id_ge(seen, position))
        try:
            pipe = self.reads.pipeline(transaction=False)
            self._queue_read(pipe, position, count, block_ms)
            known = mark.queue(pipe, self.keys, self.r, known=known,
                               at=position if anchor else None)
            if not anchor:
                pipe.get(self.keys.log_snapshot_id)  # after the read: a trim during it counts
            replies: list[Any] = pipe.execute()
        except redis.RedisError as err:
            raise errors.UnavailableError(f"redis: {err}") from err
        resp = replies[0]
        entries = _entries(resp if block_ms is None else _stream(resp))
        raw_epoch = replies[1] if known.reads_epoch else NOT_READ
        if anchor:
            found = bool(replies[-1])
            seen_there = (found if position == seen else
                          seen == NO_POSITION or _returned(entries, seen))
            trimmed_to = None
            if not found or not seen_there:
                with redis_errors("read the log"):
                    pipe = self.r.pipeline(transaction=False)
                    pipe.xrange(self.keys.log, min=seen, max=seen, count=1)
                    pipe.get(self.keys.log_snapshot_id)
                    seen_found, trimmed_to = pipe.execute()
                seen_there = bool(seen_found)
        else:
            seen_there, trimmed_to = bool(replies[-2]), replies[-1]
        start = text(trimmed_to) if trimmed_to is not None else ""
        if mark.settle(self.r, self.keys, raw_epoch, seen_there, trimmed_to, known):
            return Page([], start, rewound=True)
        if entries:
            mark.saw(entries[-1].id)
        return Page(entries, start)

    def _queue_read(self, pipe: Any, position: str, count: int, block_ms: int | None) -> None:
        if block_ms is None:
            lower = "(" + position if position and position != NO_POSITION else "-"
            pipe.xrange(self.keys.log, min=lower, count=count)
        else:
            pipe.xread({self.keys.log: position or NO_POSITION}, count=count, block=block_ms)

    def _follow_unmarked(self, position: str, count: int, block_ms: int | None) -> Page:
        with redis_errors("read the log"):
            pipe = self.reads.pipeline(transaction=False)
            self._queue_read(pipe, position, count, block_ms)
            pipe.get(self.keys.log_snapshot_id)
            resp, trimmed_to = pipe.execute()
        entries = _entries(resp if block_ms is None else _stream(resp))
        return Page(entries, text(trimmed_to) if trimmed_to is not None else "")

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
            raw = self.reads.xrange(self.keys.log, min=entry_id, max=entry_id, count=1)
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
