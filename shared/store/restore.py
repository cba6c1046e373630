"""Writing a rebuilt history into an empty Redis key prefix, for ``replay FILE``
(``services.replay.rebuild``, which decides what is written and checks it): whether the
target is empty, the log appended with its original ids, the view hashes, the snapshot.
Acts (Redis)."""

from __future__ import annotations

from typing import Any

import redis

from shared.store import snapshot
from shared.store.guard import redis_errors, text
from shared.store.keys import Keys

VIEW_BATCH = 1000
MEMO = 100_000  # Appender: the objects whose fixed XADD arguments are kept encoded


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


def _len(lens: dict[int, bytes], n: int) -> bytes:
    """A bulk string's header for length ``n``, kept in ``lens`` (emptied at MEMO)."""
    if len(lens) >= MEMO:
        lens.clear()
    got = lens[n] = b"$%d\r\n" % n
    return got


def _bulk(data: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(data), data)


class Appender:
    """``XADD <log> <id> v … t … k … n … o … [u …]`` for each entry (``u``, the user who made
    the write, when the file names one), written to one connection as
    pre-encoded RESP with replies switched off (``CLIENT REPLY OFF``): Redis appends while
    the next batch is encoded, and the socket's own backpressure paces the sender. Whether
    every entry landed is checked afterwards (``log_extent``). Acts."""

    def __init__(self, client: redis.Redis, log_key: str) -> None:
        self.pool: Any = client.connection_pool
        conn: Any = self.pool.get_connection()
        self.conn: Any = conn
        self.head = b"*13\r\n$4\r\nXADD\r\n" + _bulk(log_key.encode())
        self.fields: dict[tuple[str, str, str, str], bytes] = {}
        self.lens: dict[int, bytes] = {}
        with redis_errors("append log entries"):
            conn.send_command("CLIENT", "REPLY", "OFF", check_health=False)

    def _fields(self, v: str, t: str, k: str, n: str) -> bytes:
        """What comes between an entry's id and its payload's length: ``CRLF $1 v $n <v>
        $1 t … $1 k … $1 n $n <n> $1 o``, memoised: an object's entries repeat it (the cache
        is emptied when it holds MEMO of them, so it stays small whatever the log)."""
        if len(self.fields) >= MEMO:
            self.fields.clear()
        got = self.fields[(v, t, k, n)] = b"".join(
            [b"\r\n$1\r\nv\r\n", _bulk(v.encode()), b"$1\r\nt\r\n", _bulk(t.encode()),
             b"$1\r\nk\r\n", _bulk(k.encode()), b"$1\r\nn\r\n", _bulk(n.encode()),
             b"$1\r\no\r\n"])
        return got

    def send(self, entries: list[list[Any]]) -> None:
        """Append ``entries`` (export records, see ``logfile``)."""
        self.send_raw(self.encode(entries))

    def encode(self, entries: list[list[Any]]) -> bytes:
        """The RESP of the ``XADD`` of each of ``entries``. Decides."""
        head, memo, fields, lens = self.head, self.fields, self._fields, self.lens
        parts: list[bytes] = []
        add = parts.append
        for r in entries:  # once per entry: no format but for a user; the payload joined as it is
            eid, payload = r[1].encode(), r[6]
            vtkn = memo.get((r[2], r[3], r[4], r[5])) or fields(r[2], r[3], r[4], r[5])
            if len(r) > 7 and r[7]:  # the user (checked by logfile.entry_user): 2 more args
                add(b"*15%s$%d\r\n%s%s$%d\r\n" % (head[3:], len(eid), eid, vtkn,
                                                  len(payload)))
                add(payload)
                add(b"\r\n$1\r\nu\r\n" + _bulk(r[7].encode()))
            else:
                add(head)
                add(lens.get(len(eid)) or _len(lens, len(eid)))
                add(eid)
                add(vtkn)
                add(lens.get(len(payload)) or _len(lens, len(payload)))
                add(payload)
                add(b"\r\n")
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


def log_extent(client: redis.Redis, keys: Keys) -> tuple[int, str]:
    """The rebuilt log's length and newest id ("" when empty), in one round trip. Acts."""
    with redis_errors("check the rebuilt log"):
        pipe = client.pipeline(transaction=False)
        pipe.xlen(keys.log)
        pipe.xrevrange(keys.log, count=1)
        length, newest = pipe.execute()
    return int(length), text(newest[0][0]) if newest else ""


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


def store_snapshot(client: redis.Redis, keys: Keys, stored: snapshot.RawView) -> None:
    """Store the file's snapshot as the target's (its id too). Acts."""
    with redis_errors("store the snapshot"):
        client.set(keys.log_snapshot, snapshot.encode(stored))
        client.set(keys.log_snapshot_id, stored.position)
