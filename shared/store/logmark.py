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
one the process saw is too. The check is two reads (``queue``) and the compaction point,
sent in the pipeline of a ``LogReader``'s read after the read itself (``RedisEventLog.follow``,
which reads the compaction point only when it is needed: the entry ``seen`` is gone, or the
reader is not at it), or run inside the
``SNAPSHOT`` script of a listing (``Store.snapshot``) and the ``COMMIT`` script of a write
(``Store.commit``), so it
costs no round trip of its own, and neither a listing nor a write at a new tip can hide a
rewind (the ``Store``'s mark is the process's: what it listed, read and wrote):

- the epoch differs, or is gone while we knew one: another log (a replaced or flushed Redis,
  or a file cut back before the epoch was written);
- ``seen`` is gone although no compaction trimmed past it (``Keys.log_snapshot_id``): the
  log was cut back below what we saw.

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
from typing import Any

import redis

from shared.store import codec, scripts
from shared.store.guard import redis_errors, text
from shared.store.keys import Keys

log = logging.getLogger(__name__)

EPOCH_FIELD = "epoch"  # the field of ``Keys.meta`` holding the log's identity


@dataclass
class LogMark:
    """What one process saw of the log: its ``epoch`` (None until first checked) and the
    newest entry id read or written (``seen``); ``rewinds`` counts the rewinds noticed."""

    epoch: str | None = None
    seen: str = "0-0"
    rewinds: int = 0
    name: str = "log reader"

    def saw(self, entry_id: str) -> None:
        """Record an entry id read from or written to the log."""
        if codec.id_tuple(entry_id) > codec.id_tuple(self.seen):
            self.seen = entry_id

    def known(self) -> tuple[str | None, str]:
        """What the mark knows now (epoch, seen): what a check sent now is judged against."""
        return self.epoch, self.seen

    def queue(self, pipe: Any, keys: Keys) -> tuple[str | None, str]:
        """Add the check's two reads to ``pipe``: the epoch, then the entry ``seen``;
        returns ``known()`` for ``settle``."""
        known = self.known()
        pipe.hget(keys.meta, EPOCH_FIELD)
        seen = known[1] if known[1] != "0-0" else "0-1"
        pipe.xrange(keys.log, min=seen, max=seen, count=1)
        return known

    def settle(self, client: redis.Redis, keys: Keys, raw_epoch: Any, found: Any,
               trimmed_to: Any, known: tuple[str | None, str] | None = None) -> bool:
        """Judge the two replies of ``queue`` and the compaction point read with them
        (``Keys.log_snapshot_id``) against ``known``, what the mark knew when the check was
        sent (default: now); True when the log is behind it (a rewind: counted and logged,
        ``seen`` forgotten, the current epoch adopted). Creates the epoch when the log has
        none yet (see ``ensure_epoch``). The mark is the process's: another thread may move
        it while a check is on its way (a blocked read of a new log, then the first commit
        that created it and its epoch), which is no rewind."""
        known_epoch, seen = known if known is not None else self.known()
        epoch = text(raw_epoch) if raw_epoch is not None else None
        why = ""
        if known_epoch is not None and epoch != known_epoch:
            why = f"the log's identity is {epoch or 'gone'}, not {known_epoch}"
        elif seen != "0-0" and not found and not (
                trimmed_to is not None and codec.id_ge(text(trimmed_to), seen)):
            why = f"entry {seen} is gone from the log"
        if epoch is None:
            epoch = ensure_epoch(client, keys)
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
            known = self.queue(pipe, keys)
            pipe.get(keys.log_snapshot_id)
            raw_epoch, found, trimmed_to = pipe.execute()
        return self.settle(client, keys, raw_epoch, found, trimmed_to, known)


def ensure_epoch(client: redis.Redis, keys: Keys) -> str | None:
    """The log's identity, created (a random id) if the log has none; None while there is no
    log (nothing is written then)."""
    with redis_errors("log epoch"):
        raw = client.register_script(scripts.ENSURE_EPOCH)(keys=[keys.log, keys.meta],
                                                            args=[uuid.uuid4().hex])
    return text(raw) if raw is not None else None
