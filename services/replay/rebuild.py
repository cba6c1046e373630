"""``replay FILE``: rebuild a cluster's objects and log into an empty Redis or key prefix.

The log entries are written with their ORIGINAL ids (``XADD`` with an explicit id), so every
object keeps its resourceVersion and a reader of the rebuilt log sees the same history. The
view hashes are written once at the end from an in-memory fold of the entries (the newest
state of each object only), so the work is one append per entry plus one write per live
object. Entries go to Redis as pipelined ``XADD`` commands, encoded once and sent in
batches on one connection with replies switched off; the log's length and newest id are
checked at the end (``Appender``, ``_check_log``). The view is held in memory (one payload
per live object: the size of the cluster, not of the log); the file is streamed.

The target must be empty (no key of the prefix exists): a rebuild never merges into a live
cluster, and a refused rebuild writes nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from services.replay import logfile
from shared import settings
from shared.store import codec, snapshot
from shared.store.guard import redis_errors, text
from shared.store.keys import Keys

BATCH = settings.current.rebuild_batch
VIEW_BATCH = 1000


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


def _glob_escape(s: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in s)


def existing_key(client: redis.Redis, keys: Keys) -> str | None:
    """A key of ``keys.prefix`` that exists in the target, or None if the prefix is empty.
    Acts (reads Redis)."""
    pattern = _glob_escape(keys.tag) + ":*"
    cursor: Any = 0
    with redis_errors("check the target is empty"):
        while True:
            cursor, found = client.scan(cursor=cursor, match=pattern, count=1000)
            if found:
                return text(found[0])
            if not cursor:
                return None


def rebuild(path: str | Path, client: redis.Redis, keys: Keys, until: str = "",
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
        taken = existing_key(client, keys)
        if taken is not None:
            raise RebuildError(f"the target is not empty: key {taken!r} exists under prefix "
                               f"{keys.prefix!r}; replay only rebuilds into an empty Redis "
                               "or key prefix (pick another --prefix)")
        append = Appender(client, keys.log)
        try:
            view, snap_rows, entries, last = _fold_and_append(reader, append, until, batch)
        finally:
            append.close()
    _check_log(client, keys, entries, last)
    write_view(client, keys, view)
    if header.snapshot:
        stored = snapshot.RawView(position=header.snapshot)
        for kind, key, rv, payload in snap_rows:
            stored.put(kind, key, rv, payload)
        with redis_errors("store the snapshot"):
            client.set(keys.log_snapshot, snapshot.encode(stored))
            client.set(keys.log_snapshot_id, header.snapshot)
    return RebuildStats(entries, view.count(), last, time.monotonic() - started)


def _fold_and_append(reader: logfile.Reader, append: Appender, until: str, batch: int,
                     ) -> tuple[snapshot.RawView, list[tuple[str, str, str, bytes]], int, str]:
    """Stream the file: append each entry to the log, fold it into the view (the newest
    payload of each object). Returns the view, the file's snapshot rows, the entries
    appended and the last id. Acts."""
    header = reader.header
    view = snapshot.RawView(position=header.snapshot or "0-0")
    snap_rows: list[tuple[str, str, str, bytes]] = []
    limit = codec.id_tuple(until) if until else None
    pending: list[list[Any]] = []
    entries, last = 0, ""
    apply = view.fold.apply  # once per entry: the fold itself, without RawView's wrapper
    for rec in reader.records():
        if rec[0] == logfile.OBJECT:
            _, kind, key, rv, payload = rec
            view.put(kind, key, rv, payload)
            snap_rows.append((kind, key, rv, payload))
            continue
        eid = rec[1]
        if limit is not None and codec.id_tuple(eid) > limit:
            break
        if len(rec) > 7:
            logfile.entry_user(rec)  # refuses a record with a malformed user before any write
        pending.append(rec)
        entries += 1
        last = eid
        apply(eid, rec[3], rec[4], rec[5], (eid, rec[6]))  # the snapshot's own: passed over
        if len(pending) >= batch:
            append.send(pending)
            pending = []
    append.send(pending)
    return view, snap_rows, entries, last


def _bulk(data: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(data), data)


class Appender:
    """``XADD <log> <id> v … t … k … n … o … [u …]`` for each entry (``u``, the user who made
    the write, when the file names one), written to one connection as
    pre-encoded RESP with replies switched off (``CLIENT REPLY OFF``): Redis appends while
    the next batch is encoded, and the socket's own backpressure paces the sender. Whether
    every entry landed is checked afterwards (``_check_log``). Acts."""

    def __init__(self, client: redis.Redis, log_key: str) -> None:
        self.pool: Any = client.connection_pool
        conn: Any = self.pool.get_connection()
        self.conn: Any = conn
        self.head = b"$4\r\nXADD\r\n" + _bulk(log_key.encode())
        self.small: dict[tuple[str, str, str], bytes] = {}
        with redis_errors("append log entries"):
            conn.send_command("CLIENT", "REPLY", "OFF", check_health=False)

    def _fields(self, v: str, t: str, k: str) -> bytes:
        """``$1 v $n <v> $1 t $n <t> $1 k $n <k> $1 n``, memoised: v, t and k take a handful
        of values."""
        got = self.small.get((v, t, k))
        if got is None:
            got = self.small[(v, t, k)] = b"".join(
                [b"$1\r\nv\r\n", _bulk(v.encode()), b"$1\r\nt\r\n", _bulk(t.encode()),
                 b"$1\r\nk\r\n", _bulk(k.encode()), b"$1\r\nn\r\n"])
        return got

    def send(self, entries: list[list[Any]]) -> None:
        """Append ``entries`` (export records, see ``logfile``)."""
        self.send_raw(self.encode(entries))

    def encode(self, entries: list[list[Any]]) -> bytes:
        """The RESP of the ``XADD`` of each of ``entries``. Decides."""
        head, fields, small = self.head, self._fields, self.small
        parts: list[bytes] = []
        add = parts.append
        for r in entries:  # once per entry: one format, the payload copied as it is
            eid, key, payload = r[1].encode(), r[5].encode(), r[6]
            vtk = small.get((r[2], r[3], r[4])) or fields(r[2], r[3], r[4])
            user = r[7] if len(r) > 7 else ""  # checked by logfile.entry_user
            add(b"%s%s$%d\r\n%s\r\n%s$%d\r\n%s\r\n$1\r\no\r\n$%d\r\n%s\r\n" % (
                b"*15\r\n" if user else b"*13\r\n", head, len(eid), eid, vtk, len(key), key,
                len(payload), payload))
            if user:
                add(b"$1\r\nu\r\n" + _bulk(user.encode()))
        return b"".join(parts)

    def send_raw(self, data: bytes) -> None:
        """Write pre-encoded commands (``encode``). Acts."""
        if data:
            try:
                with redis_errors("append log entries"):
                    self.conn.send_packed_command([data], check_health=False)
            except BaseException:
                self._drop()
                raise

    def close(self) -> None:
        if self.conn is None:
            return
        try:
            with redis_errors("append log entries"):
                self.conn.send_command("CLIENT", "REPLY", "ON", check_health=False)
                self.conn.read_response()
        except BaseException:
            self._drop()
            raise
        self.pool.release(self.conn)
        self.conn = None

    def _drop(self) -> None:
        if self.conn is not None:
            self.conn.disconnect()
            self.pool.release(self.conn)
            self.conn = None


def _check_log(client: redis.Redis, keys: Keys, entries: int, last: str) -> None:
    """Every entry landed: the log has ``entries`` entries, the last one ``last``. Acts."""
    with redis_errors("check the rebuilt log"):
        pipe = client.pipeline(transaction=False)
        pipe.xlen(keys.log)
        pipe.xrevrange(keys.log, count=1)
        length, newest = pipe.execute()
    tip = text(newest[0][0]) if newest else ""
    if int(length) != entries or tip != last:
        raise RebuildError(f"Redis took {length} of {entries} log entries (newest {tip or '-'}, "
                           f"expected {last or '-'}): another client wrote to the target "
                           "during the rebuild, or Redis refused entries (memory limit?)")


def write_view(client: redis.Redis, keys: Keys, view: snapshot.RawView) -> None:
    """HSET the view hashes in batches (one pipeline round trip per batch)."""
    with redis_errors("write the view"):
        for kind, objs in sorted(view.objects.items()):
            items = sorted(objs.items())
            for i in range(0, len(items), VIEW_BATCH):
                chunk = items[i:i + VIEW_BATCH]
                pipe = client.pipeline(transaction=False)
                pipe.hset(keys.objects(kind), mapping={k: p for k, (_rv, p) in chunk})
                pipe.hset(keys.versions(kind), mapping={k: rv for k, (rv, _p) in chunk})
                pipe.execute()
