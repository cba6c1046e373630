"""``replay FILE``: rebuild a cluster's objects and log into an empty Redis or key prefix.

The log entries are written with their ORIGINAL ids (``XADD`` with an explicit id), so every
object keeps its resourceVersion and a reader of the rebuilt log sees the same history. The
view hashes are written once at the end from an in-memory fold of each object's newest
entry (noted as the entries stream by: one dict store per entry), so the work is one append
per entry plus one write per live object. Entries go to Redis as pipelined ``XADD`` commands, encoded once and sent in
batches on one connection with replies switched off; the log's length and newest id are
checked at the end (``shared.store.restore``, which writes the target, and ``_check_log``). The view is held in memory (one payload
per live object: the size of the cluster, not of the log); the file is streamed.

The target must be empty (no key of the prefix exists): a rebuild never merges into a live
cluster, and a refused rebuild writes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain, islice, takewhile
from pathlib import Path
from typing import Any

from services.replay import logfile
from shared import settings
from shared.eventlog.entry import EntryType
from shared.store import codec, restore, snapshot
from shared.store.adapters import Connection
from shared.store.keys import Keys

BATCH = settings.current.rebuild_batch
_DECISION = str(EntryType.DECISION)  # plain str: fast ==


class RebuildError(Exception):
    """The rebuild was refused (target not empty, partial file, bound before the snapshot)
    or failed; the message says which."""


@dataclass
class RebuildStats:
    entries: int
    objects: int
    last: str
    seconds: float

    @property
    def rate(self) -> float:
        return self.entries / self.seconds if self.seconds > 0 else 0.0


def rebuild(path: str | Path, client: Connection, keys: Keys, until: str = "",
            allow_partial: bool = False, batch: int = BATCH) -> RebuildStats:
    """Rebuild the file's history (up to ``until``, inclusive) into the empty prefix
    ``keys``. Acts."""
    started = time.monotonic()
    with logfile.Reader(path) as reader:
        header = reader.header
        if not header.complete and not allow_partial:
            raise RebuildError(
                f"{path} holds only part of the history (exported with --since, or from a "
                "log trimmed without a snapshot): a rebuild from it would not be exact; "
                "pass --partial to rebuild what it holds anyway")
        if until and header.snapshot and \
                codec.id_tuple(until) < codec.id_tuple(header.snapshot):
            raise RebuildError(f"--until {until} is before the file's snapshot "
                               f"({header.snapshot}): that state is not in the file")
        taken = restore.existing_key(client, keys)
        if taken is not None:
            raise RebuildError(f"the target is not empty: key {taken!r} exists under prefix "
                               f"{keys.prefix!r}; replay only rebuilds into an empty Redis "
                               "or key prefix (pick another --prefix)")
        append = restore.Appender(client, keys.log)
        try:
            view, snap_rows, entries, last = _fold_and_append(reader, append, until, batch)
        finally:
            append.close()
    _check_log(client, keys, entries, last)
    restore.write_view(client, keys, view)
    if header.snapshot:
        stored = snapshot.RawView(position=header.snapshot)
        for kind, key, rv, payload in snap_rows:
            stored.put(kind, key, rv, payload)
        restore.store_snapshot(client, keys, stored)
    return RebuildStats(entries, view.count(), last, time.monotonic() - started)


def _fold_and_append(reader: logfile.Reader, append: restore.Appender, until: str, batch: int,
                     ) -> tuple[snapshot.RawView, list[tuple[str, str, str, bytes]], int, str]:
    """Stream the file: append each entry to the log, keeping each object's newest entry,
    then fold those into the view (the newest payload of each object). Returns the view,
    the file's snapshot rows, the entries appended and the last id. Acts."""
    header = reader.header
    view = snapshot.RawView(position=header.snapshot or "0-0")
    snap_rows: list[tuple[str, str, str, bytes]] = []
    limit = codec.id_tuple(until) if until else None
    newest: dict[tuple[str, str], list[Any]] = {}
    records = reader.records()
    first: list[list[Any]] = []
    for rec in records:  # the snapshot's objects, which come before the entries
        if rec[0] != logfile.OBJECT:
            first.append(rec)
            break
        _, kind, key, rv, payload = rec
        view.put(kind, key, rv, payload)
        snap_rows.append((kind, key, rv, payload))
    rest: Iterator[list[Any]] = chain(first, records)
    entries, last = 0, ""
    while pending := list(islice(rest, batch)):  # the entries, a batch at a time
        if limit is not None and codec.id_tuple(pending[-1][1]) > limit:
            pending = list(takewhile(lambda r: codec.id_tuple(r[1]) <= limit, pending))
            rest = iter(())  # past the bound: this batch is the last
        if pending:
            _send(append, pending, newest)
            entries, last = entries + len(pending), pending[-1][1]
    _fold_newest(view, newest)
    return view, snap_rows, entries, last


def _fold_newest(view: snapshot.RawView, newest: dict[tuple[str, str], list[Any]]) -> None:
    """Fold each object's newest entry into ``view``, in log order: the view folding every
    entry would hold (an object's state is its newest entry's; the snapshot's own entries,
    not newer than its id, are passed over as ever). The file's ids need no check here:
    Redis refuses an entry not newer than the one before, and ``_check_log`` refuses the
    rebuild then, before the view is written. Acts on ``view``."""
    for rec in sorted(newest.values(), key=_order):
        view.apply(rec[1], rec[3], rec[4], rec[5], rec[6])


def _order(rec: list[Any]) -> tuple[int, int]:
    return codec.id_tuple(rec[1])


def _send(append: restore.Appender, records: list[list[Any]],
          newest: dict[tuple[str, str], list[Any]]) -> None:
    """Append ``records`` and note each object's newest entry in ``newest`` (decisions change
    no object); raises LogFileError naming the first malformed record (and sends none of
    them then). Acts."""
    try:
        for rec in records:  # once per entry
            if rec[3] != _DECISION:
                newest[rec[4], rec[5]] = rec
            if len(rec) > 7:
                logfile.entry_user(rec)  # refuses a malformed user before any write
        data = append.encode(records)
    except (TypeError, AttributeError, IndexError):
        for rec in records:  # the slow path, for the message: which record is it
            logfile.check_entry(rec)
        raise
    append.send_raw(data)


def _check_log(client: Connection, keys: Keys, entries: int, last: str) -> None:
    """Every entry landed: the log has ``entries`` entries, the last one ``last``. Acts."""
    length, tip = restore.log_extent(client, keys)
    if length != entries or tip != last:
        raise RebuildError(f"Redis took {length} of {entries} log entries (newest {tip or '-'}, "
                           f"expected {last or '-'}): another client wrote to the target "
                           "during the rebuild, or Redis refused entries (memory limit?)")
