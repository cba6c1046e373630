"""Noticing that the log went backwards: the one check every position-keeping reader calls.

Redis can come back with less than a process saw: an append-only file cut back by a crash
under ``appendfsync everysec`` (up to about a second of writes), a restored backup, a replaced
or flushed server. What came back is then a consistent but older prefix of the history, while
a reader's position, its cache and what it wrote are ahead of it. New entries get ids above
every old one (Redis' clock moved on), so a reader that simply carries on reads them and never
learns that entries it acted on are gone.

A ``LogMark`` is what one process saw of the log: the log's identity (``epoch``, a random id
stored in ``Keys.meta`` beside the log by the first check once the log exists, so it lives
and dies with the log's own history; an empty prefix stays empty) and
the newest entry id it read or wrote (``seen``). The log holds what the mark saw when the
epoch is the same and the entry ``seen`` is still there: entries are appended in id order
and a cut-back history is a prefix, so when the newest surviving entry is there, every older
one the process saw is too. The check reads the entry ``seen`` (``queue``; a log read may
prove it instead: ``RedisEventLog.follow``) and, when needed, the epoch and the compaction
point, sent in the pipeline of a ``LogReader``'s read after the read itself, or run inside
the ``SNAPSHOT`` script of a listing (``Store.snapshot``) and the ``COMMIT`` script of a
write (``Store.commit``), so it costs no round trip of its own, and neither a listing nor a
write at a new tip can hide a rewind (the ``Store``'s mark is the process's: what it
listed, read and wrote):

- the epoch differs, or is gone while we knew one: another log (a replaced or flushed Redis,
  or a file cut back before the epoch was written);
- ``seen`` is gone although no compaction trimmed past it (``Keys.log_snapshot_id``): the
  log was cut back below what we saw.

The epoch is read when it can have changed under the entry ``seen``: by the first check,
whenever that entry is gone, and after the client connected again (``ConnectCount``: a
replaced or restarted Redis is a new connection). While one connection stays up and the
entry the mark saw is still there, the log is the one it was: a flushed log has lost that
entry, and another log holds an entry of the same id only by chance of the same millisecond.
A client not made by ``shared.store.client.connect`` (no ``ConnectCount``) has the epoch read
by every check.

Either is a rewind: ``settle`` counts it in ``rewinds``, logs it once and forgets ``seen``;
the owner of the mark then drops its state and lists again (``Cache`` relists every cache
reading through the mark; the watcher also replays from its stored cursor and drops
expectations; see each process). Trimming the log by anything but compaction (an XTRIM
outside ``shared.store.snapshot``) would look like a rewind and cost a relist, nothing worse.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any, NamedTuple

import redis

from shared.store import codec, scripts
from shared.store.guard import redis_errors, text
from shared.store.keys import Keys

log = logging.getLogger(__name__)

EPOCH_FIELD = "epoch"  # the field of ``Keys.meta`` holding the log's identity
NOT_READ = b"?"  # for ``settle``: the check did not read the epoch (an epoch is hex)


class ConnectCount:
    """A client's ``redis_connect_func`` (``shared.store.client.connect`` installs one): runs
    redis-py's handshake and counts the connections made, so a mark knows when its client
    connected again, to a Redis that may be another (see the module's text)."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, connection: Any) -> None:
        connection.on_connect()
        self.n += 1


def connects(client: redis.Redis) -> int | None:
    """How many connections ``client`` made so far; None when it does not count them."""
    counter = client.connection_pool.connection_kwargs.get("redis_connect_func")
    return counter.n if isinstance(counter, ConnectCount) else None


class Known(NamedTuple):
    """What a mark knew when a check was sent: its epoch, its ``seen``, the client's
    connection count then (None: not counted), and whether the check reads the epoch."""

    epoch: str | None
    seen: str
    connects: int | None
    reads_epoch: bool = True


@dataclass
class LogMark:
    """What one process saw of the log: its ``epoch`` (None until first checked) and the
    newest entry id read or written (``seen``); ``rewinds`` counts the rewinds noticed."""

    epoch: str | None = None
    seen: str = "0-0"
    rewinds: int = 0
    name: str = "log reader"
    verified: int | None = None  # the client's connection count when the epoch was last read

    def saw(self, entry_id: str) -> None:
        """Record an entry id read from or written to the log."""
        if codec.id_tuple(entry_id) > codec.id_tuple(self.seen):
            self.seen = entry_id

    def known(self, client: redis.Redis | None = None) -> Known:
        """What the mark knows now, with ``client``'s connection count: what a check sent now
        is judged against."""
        return Known(self.epoch, self.seen, connects(client) if client is not None else None)

    def wants_epoch(self, known: Known) -> bool:
        """Whether a check sent with ``known`` must read the epoch: the first check, and the
        first after the client connected again (or one that does not count connections)."""
        return known.epoch is None or known.connects is None or known.connects != self.verified

    def queue(self, pipe: Any, keys: Keys, client: redis.Redis, epoch: bool | None = None,
              known: Known | None = None, at: str | None = None) -> Known:
        """Add the check's reads to ``pipe``: the epoch when wanted (``epoch``: True always,
        None: ``wants_epoch``), then the entry ``at`` (default: ``seen``; a log read may
        check its own position instead, ``RedisEventLog.follow``); returns ``known`` (default:
        what the mark knows now) for ``settle``, which is given ``NOT_READ`` for the epoch
        when it was not read (``Known.reads_epoch``)."""
        if known is None:
            known = self.known(client)
        reads = bool(epoch) or (epoch is None and self.wants_epoch(known))
        if reads:
            pipe.hget(keys.meta, EPOCH_FIELD)
        entry = at or (known.seen if known.seen != "0-0" else "0-1")
        pipe.xrange(keys.log, min=entry, max=entry, count=1)
        return known._replace(reads_epoch=reads)

    def settle(self, client: redis.Redis, keys: Keys, raw_epoch: Any, found: Any,
               trimmed_to: Any, known: Known | None = None) -> bool:
        """Judge the replies of a check (the epoch or ``NOT_READ``, the entry ``seen``) and
        the compaction point read with them (``Keys.log_snapshot_id``) against ``known``, what
        the mark knew when the check was sent (default: now); True when the log is behind it
        (a rewind: counted and logged, ``seen`` forgotten, the current epoch adopted). An
        epoch not read is read now when the entry was gone or the client connected again
        since the check was sent. Creates the epoch when the log has none yet (see
        ``ensure_epoch``). The mark is the process's: another thread may move it while a
        check is on its way (a blocked read of a new log, then the first commit that created
        it and its epoch), which is no rewind."""
        if known is None:
            known = self.known(client)
        known_epoch, seen, sent_at, _ = known
        if raw_epoch == NOT_READ:
            now = connects(client)
            if found and known_epoch is not None and now is not None and now == sent_at:
                raw_epoch = known_epoch  # the same connection: the same log (see above)
            else:
                sent_at = now
                with redis_errors("log epoch"):
                    raw_epoch = client.hget(keys.meta, EPOCH_FIELD)
        epoch = text(raw_epoch) if raw_epoch is not None else None
        why = ""
        if known_epoch is not None and epoch != known_epoch:
            why = f"the log's identity is {epoch or 'gone'}, not {known_epoch}"
        elif seen != "0-0" and not found and not (
                trimmed_to is not None and codec.id_ge(text(trimmed_to), seen)):
            why = f"entry {seen} is gone from the log"
        if epoch is None:
            epoch = ensure_epoch(client, keys)
        if epoch is not None:
            self.verified = sent_at
        if not why:
            if epoch is not None:
                self.epoch = epoch
            return False
        self.rewinds += 1
        log.warning("%s: the log went backwards (%s: a restored, truncated or replaced Redis)"
                    "; dropping what was read and listing again", self.name, why)
        self.epoch, self.seen = epoch, "0-0"
        return True

    def check(self, client: redis.Redis, keys: Keys) -> bool:
        """``queue`` and ``settle`` in a round trip of their own, for a process that does
        not read the log (True: a rewind)."""
        with redis_errors("log check"):
            pipe = client.pipeline(transaction=False)
            known = self.queue(pipe, keys, client)
            pipe.get(keys.log_snapshot_id)
            replies = pipe.execute()
        raw_epoch = replies[0] if known.reads_epoch else NOT_READ
        return self.settle(client, keys, raw_epoch, replies[-2], replies[-1], known)


def ensure_epoch(client: redis.Redis, keys: Keys) -> str | None:
    """The log's identity, created (a random id) if the log has none; None while there is no
    log (nothing is written then)."""
    with redis_errors("log epoch"):
        raw = client.register_script(scripts.ENSURE_EPOCH)(keys=[keys.log, keys.meta],
                                                            args=[uuid.uuid4().hex])
    return text(raw) if raw is not None else None
