"""Reading the event log: follow from any position, decode and validate each entry, park
the ones that cannot be decoded (with the reason) instead of failing the reader."""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Iterator
from typing import Any

import redis

from shared.eventlog.entry import (
    OVER_KINDS,
    SCHEMA_VERSION,
    EntryType,
    Prior,
    RawEntry,
    Siblings,
    decode,
    decode_as_stored,
    written,
)
from shared.eventlog.ports import NO_POSITION, EventLog
from shared.store import codec, errors
from shared.store.eventlog import RedisEventLog
from shared.store.keys import Keys
from shared.store.logmark import LogMark
from shared.store.ownwrites import OwnWrites

log = logging.getLogger(__name__)
DECISION = EntryType.DECISION.value
DELETED = EntryType.DELETED.value
VERSION = str(SCHEMA_VERSION)


class Activity:
    """When this process's log readers last read entries (``time.monotonic``): a process
    busy with a burst of them is not idle (``services.common.collect_between_bursts``)."""

    last_entries = 0.0


activity = Activity()


class LogReader:
    """Reads an event log (the port ``shared.eventlog.ports.EventLog``) forward from
    ``position`` (exclusive). ``redis_reader`` is one of the log in Redis whose every read
    also checks, in the same round trip, that the log still holds what was read before (a
    log mark, shared by the caches of one process: see ``shared.store.logmark``)."""

    def __init__(self, events: EventLog, position: str = NO_POSITION,
                 name: str = "reader", kinds: Collection[str] | None = None,
                 decisions: bool = True) -> None:
        """``kinds``: decode only entries of these kinds (None: every kind); ``decisions``:
        decode DECISION entries too. An entry passed over is not decoded (its position is
        still read past): the log holds every kind, and a reader that keeps Pods and Nodes
        alone need not unpack and shape-check every Event and decision record as well."""
        self.log = events
        self.position = position
        self.name = name
        self.kinds = frozenset(kinds) if kinds is not None else None
        self.decisions = decisions
        # what this process wrote (``shared.store.ownwrites``): read back without a shape
        # check; None: every entry is checked
        self.own: OwnWrites | None = None
        self.parked = 0
        # (kind, key) → the version of each Pod and Node decoded last, for the next to be
        # decoded over (``shared.eventlog.entry.Prior``: a status update decodes its status)
        self.priors: dict[tuple[str, str], Prior] = {}
        # the Pod created last, for the next created to be decoded beside (``Siblings``)
        self.siblings = Siblings()
        self.gap = False  # the log was trimmed past our position (see ``read``)
        self.rewound = False  # the log went backwards below what was read (see ``read``)

    def read(self, count: int = 1000, block_ms: int | None = None) -> list[codec.Entry]:
        """The next entries after ``position`` (at most ``count``); waits up to ``block_ms``
        when there are none (None: do not wait). Advances ``position`` past every entry
        read, including parked ones. Sets ``gap`` when compaction trimmed the log past the
        position read from (entries may be missing: the reader must relist). Sets
        ``rewound``, reads nothing and keeps ``position`` when the log is behind what was
        read (a restored, truncated or replaced Redis): the position is no longer one of
        this log's, and the reader must relist. ``fetch`` then ``decode``; when decoding
        fails (a parked record that could not be written), ``position`` stays where it was,
        so the next read reads the same entries again."""
        before = self.position
        page = self.fetch(count, block_ms)
        try:
            return self.decode(page)
        except BaseException:
            self.position = before
            raise

    def fetch(self, count: int = 1000, block_ms: int | None = None) -> list[RawEntry]:
        """``read``'s first half: the next entries as stored, undecoded, ``position``
        advanced past them (``gap`` and ``rewound`` as ``read`` sets them), for ``decode``,
        in order, before anything else is made of them."""
        start = self.position
        page = self.log.follow(start, count, block_ms)
        if page.rewound:
            self.rewound = True
            self.priors.clear()
            return []
        if page.gap_after(start):
            self.gap = True
            self.priors.clear()  # a deletion may be among the entries missed
        if page.entries:
            self.position = page.entries[-1].id
            activity.last_entries = time.monotonic()
        return page.entries

    def decode(self, page: list[RawEntry]) -> list[codec.Entry]:
        """``read``'s second half: the entries of ``page`` (from ``fetch``) this reader
        keeps, decoded and validated; an undecodable one is parked."""
        out: list[codec.Entry] = []
        kinds, decisions, own, priors = self.kinds, self.decisions, self.own, self.priors
        for raw in page:
            if raw.exact and ((kinds is not None and raw.kind not in kinds)
                              or (not decisions and raw.type == DECISION)):
                continue  # not this reader's: passed over undecoded
            over = raw.exact and raw.kind in OVER_KINDS and raw.version == VERSION
            okey = (raw.kind, raw.key)
            try:
                prior = priors.get(okey) if over else None
                mine = own.mine(raw.id, raw.payload) if own is not None and raw.exact \
                    else None
                if mine is not None:
                    entry = written(raw, mine)  # this process wrote it
                elif over:
                    entry = decode(raw, True, prior, self.siblings)
                else:
                    entry = decode_as_stored(raw)
            except errors.CorruptEntryError as err:
                self.park(raw, str(err))
                continue
            out.append(entry)
            if over:
                if raw.type == DELETED:
                    priors.pop(okey, None)
                else:
                    priors[okey] = Prior(raw.payload, entry.obj)
        return out

    def park(self, raw: RawEntry, reason: str) -> None:
        """Record a poison entry in the parked records (once per entry id) and carry on."""
        self.parked += 1
        log.error("parked log entry %s (%s): %s", raw.id, self.name, reason)
        fields = {k.decode("utf-8", "replace"): v for k, v in raw.stored.items()} \
            if raw.stored is not None else \
            {k: v.encode() if isinstance(v, str) else v for k, v in raw.fields().items()}
        self.log.park(raw.id, {"reader": self.name, "error": reason, "at": time.time(),
                               "fields": fields})

    def follow(self, count: int = 1000, block_ms: int = 1000) -> Iterator[list[codec.Entry]]:
        while True:
            yield self.read(count=count, block_ms=block_ms)


def redis_reader(client: redis.Redis, keys: Keys, position: str = NO_POSITION,
                 name: str = "reader", mark: LogMark | None = None,
                 kinds: Collection[str] | None = None, decisions: bool = True) -> LogReader:
    """A reader of the log in Redis, checking ``mark`` (default: a mark of its own) on each
    read; ``kinds`` and ``decisions`` as ``LogReader``'s."""
    return LogReader(RedisEventLog(client, keys, mark if mark is not None else
                                   LogMark(name=name)), position, name, kinds, decisions)


def parked_entries(client: redis.Redis, keys: Keys) -> dict[str, Any]:
    return RedisEventLog(client, keys).parked()
