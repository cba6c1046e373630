"""Log snapshots: every object as of one log id, so the log can be trimmed below that id and
still rebuild exactly (snapshot plus the entries after it).

A snapshot is stored under ``Keys.log_snapshot`` as one msgpack map::

    {"format": "daemonbus-snapshot", "version": 1, "id": "<log id>", "created": <epoch s>,
     "objects": [[kind, "<ns>/<name>", resourceVersion, payload], ...]}

``payload`` is exactly what the view hash holds for the object (msgpack without
resourceVersion), so a snapshot never re-encodes objects. Its id is also kept under
``Keys.log_snapshot_id`` (cheap to read): the log holds the entries from that id on, and a
reader whose position is older than it may have missed trimmed entries and must relist.

:class:`RawView` is the in-memory fold of raw entries over a snapshot that compaction, export
and replay share; :func:`store_and_trim` is the one atomic write (compare-and-set of the
snapshot id, then ``XTRIM MINID``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import redis

from shared.eventlog import fold
from shared.store import codec, errors
from shared.store.guard import redis_errors, text
from shared.store.keys import Keys

FORMAT = "daemonbus-snapshot"
VERSION = 1

# ------------------------------------------------------------------------------------------
STORE_AND_TRIM = r"""
-- store_and_trim: replace the log snapshot and trim the log below it, unless another
-- compaction replaced the snapshot since the caller read it.
--
-- KEYS[1]  the event log stream
-- KEYS[2]  the snapshot (string, msgpack)
-- KEYS[3]  the snapshot's log id (string)
-- ARGV[1]  the snapshot id the caller folded from ("" = there was none)
-- ARGV[2]  the new snapshot id (the log keeps entries >= it)
-- ARGV[3]  the new snapshot (msgpack)
--
-- Returns {"ok", <entries trimmed>} or {"conflict", <current snapshot id>}.
local current = redis.call("GET", KEYS[3]) or ""
if current ~= ARGV[1] then return {"conflict", current} end
redis.call("SET", KEYS[2], ARGV[3])
redis.call("SET", KEYS[3], ARGV[2])
local trimmed = redis.call("XTRIM", KEYS[1], "MINID", ARGV[2])
return {"ok", tostring(trimmed)}
"""


class RawView:
    """Objects as raw view payloads: kind → key → (resourceVersion, payload), as of the log
    id ``position``, folded by the log's one fold (``shared.eventlog.fold``). Applying is
    idempotent by id: entries not newer than ``position`` are ignored (acts on itself
    only)."""

    def __init__(self, position: str = "0-0") -> None:
        self.fold: fold.View[tuple[str, bytes]] = fold.View(position=position)

    @property
    def objects(self) -> dict[str, dict[str, tuple[str, bytes]]]:
        return self.fold.objects

    @property
    def position(self) -> str:
        return self.fold.position

    def put(self, kind: str, key: str, rv: str, payload: bytes) -> None:
        self.fold.put(kind, key, (rv, payload))

    def apply(self, eid: str, etype: str, kind: str, key: str, payload: bytes) -> None:
        """Apply one log entry (DECISION entries change no object)."""
        self.fold.apply(eid, etype, kind, key, (eid, payload))

    def count(self) -> int:
        return self.fold.count()

    def rows(self) -> Iterator[tuple[str, str, str, bytes]]:
        """(kind, key, rv, payload) in kind then key order."""
        for kind, key, (rv, payload) in self.fold.items():
            yield kind, key, rv, payload


def encode(view: RawView, created: float | None = None) -> bytes:
    """The stored form of a snapshot of ``view`` (as of ``view.position``). Decides."""
    return codec.pack({
        "format": FORMAT, "version": VERSION, "id": view.position,
        "created": time.time() if created is None else created,
        "objects": [list(row) for row in view.rows()],
    })


def decode(data: bytes) -> RawView:
    """Parse a stored snapshot; raises CorruptEntryError if it is not one. Decides."""
    doc: Any = codec.unpack(data)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise errors.CorruptEntryError("not a daemonbus log snapshot")
    if doc.get("version") != VERSION:
        raise errors.CorruptEntryError(f"unsupported snapshot version {doc.get('version')!r}")
    view = RawView(position=str(doc.get("id") or "0-0"))
    for row in doc.get("objects") or []:
        if not isinstance(row, list) or len(row) != 4 or not isinstance(row[3], bytes):
            raise errors.CorruptEntryError(f"malformed snapshot row {row!r:.80}")
        view.put(str(row[0]), str(row[1]), str(row[2]), row[3])
    return view


def read_id(client: redis.Redis, keys: Keys) -> str:
    """The id of the stored snapshot ("" when there is none). Acts (reads Redis)."""
    with redis_errors("read snapshot id"):
        raw: Any = client.get(keys.log_snapshot_id)
    return text(raw) if raw is not None else ""


def read(client: redis.Redis, keys: Keys) -> RawView | None:
    """The stored snapshot, or None. Acts (reads Redis)."""
    with redis_errors("read snapshot"):
        pipe = client.pipeline(transaction=True)
        pipe.get(keys.log_snapshot_id)
        pipe.get(keys.log_snapshot)
        sid, data = pipe.execute()
    if sid is None or data is None:
        return None
    view = decode(data)
    if view.position != text(sid):
        raise errors.CorruptEntryError(
            f"snapshot id {text(sid)!r} does not match the stored snapshot ({view.position!r})")
    return view


def store_and_trim(client: redis.Redis, keys: Keys, folded_from: str, view: RawView) -> int:
    """Store ``view`` as the snapshot and trim the log below its id, atomically; returns the
    entries trimmed. Raises ConflictError when another compaction won. Acts."""
    script = client.register_script(STORE_AND_TRIM)
    with redis_errors("store snapshot"):
        status, value = script(keys=[keys.log, keys.log_snapshot, keys.log_snapshot_id],
                               args=[folded_from, view.position, encode(view)])
    if text(status) != "ok":
        raise errors.ConflictError("LogSnapshot", keys.log_snapshot,
                                   f"another compaction stored snapshot {text(value)!r}; "
                                   "try again")
    return int(text(value))


def trimmed_without_snapshot(client: redis.Redis, keys: Keys, snapshot_id: str) -> bool:
    """Whether entries were removed from the log that no snapshot covers (e.g. an XTRIM by
    hand), so a fold from the log's start would not be exact: with a snapshot, the log must
    still start at its id (compaction keeps that entry); without one, every entry ever
    added must still be there (Redis 7 counts them; older servers are trusted). Acts."""
    with redis_errors("inspect the log"):
        first: Any = client.xrange(keys.log, count=1)
        if snapshot_id:
            return not first or text(first[0][0]) != snapshot_id
        try:
            info: Any = client.xinfo_stream(keys.log)
        except redis.ResponseError:
            return False  # no log yet
    added = info.get("entries-added")
    return added is not None and int(added) != int(info.get("length") or 0)
