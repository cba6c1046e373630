"""``log compact``: bound the log by length or age without losing the ability to rebuild.

A compaction folds the entries from the current snapshot (or the log's start) up to the cut
into a new snapshot — every object as of the cut id — then stores it and trims the log below
the cut in one Lua call (``shared.store.snapshot.store_and_trim``), so an export (snapshot plus
the entries from the cut on) still rebuilds exactly. The cut entry itself is kept, so the log
is never empty once it had entries. Readers whose position is older than the cut relist.

``cut_by_count`` and ``cut_by_age`` decide where to cut; ``compact`` acts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from shared import settings
from shared.store import codec, errors, snapshot
from shared.store.adapters import Connection
from shared.store.eventlog import RedisEventLog
from shared.store.keys import Keys

PAGE = settings.current.log_page


class CompactError(Exception):
    """Compaction cannot be exact (the log was trimmed by other means) or lost a race."""


@dataclass
class CompactResult:
    snapshot: str  # the new snapshot id ("" when nothing was compacted)
    objects: int
    trimmed: int
    length: int  # entries left in the log
    seconds: float


def cut_by_count(length: int, keep: int, has_snapshot: bool) -> int:
    """How many entries are folded into the snapshot so that ``keep`` remain: the fold runs
    through the first entry kept. With a snapshot, the log's first entry is the snapshot's
    own (already folded). Decides."""
    return max(0, length - max(keep, 1) + (0 if has_snapshot else 1))


def cut_by_age(now: float, max_age: float) -> tuple[int, int]:
    """The newest entry id a cut by age may fold (entries older than ``now - max_age``).
    Decides."""
    return (int((now - max_age) * 1000), (1 << 64) - 1)


def compact(client: Connection, keys: Keys, keep: int | None = None,
            max_age: float | None = None, now: float | None = None) -> CompactResult:
    """Snapshot and trim the log so at most ``keep`` entries (or only entries younger than
    ``max_age`` seconds, plus the cut entry) remain. Acts."""
    started = time.monotonic()
    if (keep is None) == (max_age is None):
        raise ValueError("give exactly one of keep and max_age")
    prev = snapshot.read(client, keys)
    base = prev if prev is not None else snapshot.RawView()
    folded_from = prev.position if prev is not None else ""
    if snapshot.trimmed_without_snapshot(client, keys, folded_from):
        raise CompactError("the log lost entries no snapshot covers (trimmed by other means); "
                           "a snapshot folded from it would not be exact")
    log = RedisEventLog(client, keys)
    length = log.length()
    count_limit = cut_by_count(length, keep, prev is not None) if keep is not None else None
    age_limit = cut_by_age(time.time() if now is None else now, max_age) \
        if max_age is not None else None
    position = folded_from
    folded, cut = 0, ""
    while count_limit is None or folded < count_limit:
        want = PAGE if count_limit is None else min(PAGE, count_limit - folded)
        got = log.after(position, want).entries
        if not got:
            break
        for e in got:
            if age_limit is not None and codec.id_tuple(e.id) > age_limit:
                got = []
                break
            base.apply(e.id, e.type, e.kind, e.key, e.payload)
            folded += 1
            cut = e.id
        if not got:
            break
        position = got[-1].id
    if not cut or cut == folded_from:
        return CompactResult("", base.count(), 0, length, time.monotonic() - started)
    try:
        trimmed = snapshot.store_and_trim(client, keys, folded_from, base)
    except errors.ConflictError as err:
        raise CompactError(str(err)) from err
    left = log.length()
    return CompactResult(cut, base.count(), trimmed, left, time.monotonic() - started)
