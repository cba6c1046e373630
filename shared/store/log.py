"""Reading the event log: follow from any position, decode and validate each entry, park
the ones that cannot be decoded (with the reason) instead of failing the reader."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import redis

from shared.store import codec, errors
from shared.store.keys import Keys
from shared.store.logmark import LogMark

log = logging.getLogger(__name__)


class LogReader:
    """Reads ``keys.log`` forward from ``position`` (exclusive).

    Every read also checks, in the same round trip, that the log still holds what was read
    before (``mark``, shared by the caches of one process: see ``shared.store.logmark``)."""

    def __init__(self, client: redis.Redis, keys: Keys, position: str = "0-0",
                 name: str = "reader", mark: LogMark | None = None) -> None:
        self.r = client
        self.keys = keys
        self.position = position
        self.name = name
        self.parked = 0
        self.gap = False  # the log was trimmed past our position (see ``read``)
        self.rewound = False  # the log went backwards below what was read (see ``read``)
        self.mark = mark if mark is not None else LogMark(name=name)

    def read(self, count: int = 1000, block_ms: int | None = None) -> list[codec.Entry]:
        """The next entries after ``position`` (at most ``count``); waits up to ``block_ms``
        when there are none (None: do not wait). Advances ``position`` past every entry
        read, including parked ones. Sets ``gap`` when compaction trimmed the log past the
        position read from (entries may be missing: the reader must relist). Sets
        ``rewound``, reads nothing and keeps ``position`` when the log is behind what was
        read (a restored, truncated or replaced Redis): the position is no longer one of
        this log's, and the reader must relist."""
        start = self.position
        try:
            resp: Any
            pipe = self.r.pipeline(transaction=False)
            known = self.mark.queue(pipe, self.keys)
            if block_ms is None:
                if self.position != "0-0":
                    pipe.xrange(self.keys.log, min="(" + self.position, count=count)
                else:
                    pipe.xrange(self.keys.log, count=count)
            else:
                pipe.xread({self.keys.log: self.position}, count=count, block=block_ms)
            pipe.get(self.keys.log_snapshot_id)  # after the read: a trim during it counts
            epoch, found, resp, trimmed_to = pipe.execute()
            batch: list[Any] = resp if block_ms is None else (resp[0][1] if resp else [])
        except redis.RedisError as err:
            raise errors.UnavailableError(f"redis: {err}") from err
        if self.mark.settle(self.r, self.keys, epoch, found, trimmed_to, known):
            self.rewound = True
            return []
        if trimmed_to is not None and \
                codec.id_tuple(trimmed_to.decode()) > codec.id_tuple(start):
            self.gap = True
        out: list[codec.Entry] = []
        for entry_id, fields in batch:
            eid = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
            try:
                out.append(codec.decode_entry(eid, fields))
            except errors.CorruptEntryError as err:
                self.park(eid, fields, str(err))
            self.position = eid
        if batch:
            self.mark.saw(self.position)
        return out

    def park(self, eid: str, fields: dict[bytes, bytes], reason: str) -> None:
        """Record a poison entry in the parked hash (once per entry id) and carry on."""
        self.parked += 1
        log.error("parked log entry %s (%s): %s", eid, self.name, reason)
        try:
            self.r.hsetnx(self.keys.parked, eid, codec.pack({
                "reader": self.name, "error": reason, "at": time.time(),
                "fields": {k.decode("utf-8", "replace"): v for k, v in fields.items()},
            }))
        except redis.RedisError:
            pass

    def follow(self, count: int = 1000, block_ms: int = 1000) -> Iterator[list[codec.Entry]]:
        while True:
            yield self.read(count=count, block_ms=block_ms)


def parked_entries(client: redis.Redis, keys: Keys) -> dict[str, Any]:
    out: dict[str, Any] = {}
    parked: Any = client.hgetall(keys.parked)
    for eid, raw in parked.items():
        try:
            out[eid.decode()] = codec.unpack(raw)
        except errors.CorruptEntryError:
            out[eid.decode()] = {"error": "unreadable parked record"}
    return out
