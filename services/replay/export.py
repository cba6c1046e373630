"""``log export``: the log (with its snapshot, if it was compacted) → an export file.

Streams in constant memory: the snapshot's objects are written first, then the log is read
with ``XRANGE`` in pages and each page written as it arrives. The range is fixed at the
start (``first``..``last``: the log only grows at its end), so a file is one consistent
prefix of history. A compaction that trims entries the export has not read yet is detected
(the snapshot id is read with every page) and fails the export instead of leaving a gap.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from services.replay import logfile
from shared import settings
from shared.eventlog.entry import previous_id
from shared.eventlog.ports import pages
from shared.store import codec, snapshot
from shared.store.adapters import Connection
from shared.store.eventlog import RedisEventLog
from shared.store.keys import Keys

PAGE = settings.current.log_page


class ExportError(Exception):
    """The export cannot be made as asked (range compacted away, compaction during export)."""


@dataclass
class ExportStats:
    entries: int
    objects: int
    first: str
    last: str
    snapshot: str
    complete: bool
    seconds: float


def export(client: Connection, keys: Keys, path: str | Path, since: str = "",
           until: str = "", page: int = PAGE) -> ExportStats:
    """Write the log of ``keys.prefix`` to ``path``. Without ``since`` the file holds the
    whole history (the snapshot plus every entry after it, up to ``until``); with it, only
    the entries from ``since`` on (a partial file: fine to read, not to rebuild). Acts."""
    started = time.monotonic()
    snap = None if since else snapshot.read(client, keys)
    snap_id = snap.position if snap is not None else snapshot.read_id(client, keys)
    if until and snap is not None and codec.id_tuple(until) < codec.id_tuple(snap_id):
        raise ExportError(f"the log before {snap_id} was compacted into a snapshot; "
                          f"--until {until} asks for a state that is no longer kept")
    start, end = since or (snap_id if snap is not None else "-"), until or "+"
    log = RedisEventLog(client, keys)
    last = log.edge(start, end, newest=True)
    first = log.edge(start, end, newest=False) if last else ""
    complete = not since and not snapshot.trimmed_without_snapshot(
        client, keys, snap.position if snap is not None else "")
    header = logfile.Header(
        prefix=keys.prefix, first=first, last=last, complete=complete,
        snapshot=snap.position if snap is not None else "",
        objects=snap.count() if snap is not None else 0, since=since, until=until,
        entry_schema=codec.SCHEMA_VERSION)
    with logfile.Writer(path, header) as out:
        if snap is not None:
            for kind, key, rv, payload in snap.rows():
                out.object(kind, key, rv, payload)
        # the range first..last, a page at a time, each read with the compaction point: a
        # compaction past what was read would leave a gap
        for got in pages(log, previous_id(first), page, until=last) \
                if first else ():
            if got.start != snap_id and codec.id_tuple(got.start) > codec.id_tuple(got.last):
                raise ExportError(f"the log was compacted to {got.start} during the export; "
                                  "run it again")
            for e in got.entries:
                out.entry(e.id, e.version, e.type, e.kind, e.key, e.payload, e.user)
        entries = out.entries
    return ExportStats(entries, header.objects, first, last, header.snapshot, complete,
                       time.monotonic() - started)
