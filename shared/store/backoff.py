"""Failed-pod backoff entries in Redis (spec §g.2), shared by every reconciler replica.

One hash (``Keys.backoff``): ``<ds uid>/<observedGeneration>/<node>`` → msgpack
``[delay, last_update]``. A sync reads all entries of its DaemonSet in one HMGET and writes the
entries its plan advanced in one HSET; the decisions (``next_entry``,
``is_in_backoff_since_update``) are the pure functions of ``shared.control.backoff``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import redis

from shared.control import backoff as bo
from shared.store import codec, errors
from shared.store import control_scripts as scripts
from shared.store.guard import redis_errors, text
from shared.store.keys import Keys

log = logging.getLogger(__name__)

SCAN_COUNT = 500


def _decode(raw: bytes | str) -> bo.BackoffEntry:
    if isinstance(raw, str):
        raise errors.CorruptEntryError("the client decodes responses; msgpack needs bytes")
    value: Any = codec.unpack(raw)
    try:
        if not isinstance(value, list) or len(value) != 2:
            raise TypeError
        return bo.BackoffEntry(float(value[0]), float(value[1]))
    except (TypeError, ValueError, OverflowError) as err:
        raise errors.CorruptEntryError(
            f"backoff entry is not [delay, last_update]: {value!r:.200}") from err


def _decoded(key: str, raw: bytes | str) -> bo.BackoffEntry | None:
    """An entry as read, or None (logged) for one that cannot be: read as no entry."""
    try:
        return _decode(raw)
    except errors.CorruptEntryError as err:
        log.error("ignored backoff entry %r: %s", key, err)
        return None


def _glob_escape(s: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in s)


class RedisBackoff:
    """Implements ``shared.control.protocols.BackoffStore``.

    The client must return bytes (``decode_responses=False``): values are msgpack.
    """

    def __init__(self, client: redis.Redis, keys: Keys, max_delay: float = bo.MAX_DELAY) -> None:
        self.r, self.keys, self.max_delay = client, keys, max_delay
        self._gc = client.register_script(scripts.BACKOFF_GC)

    def get_many(self, keys: Iterable[str]) -> dict[str, bo.BackoffEntry]:
        """The entries of ``keys`` that exist, in one round trip."""
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return {}
        with redis_errors("backoff get_many"):
            raws = self.r.hmget(self.keys.backoff, wanted)
        decoded = {k: _decoded(k, raw) for k, raw in zip(wanted, raws, strict=True)
                   if raw is not None}
        return {k: e for k, e in decoded.items() if e is not None}

    def put_many(self, entries: Mapping[str, bo.BackoffState]) -> None:
        """Store entries (as advanced by the planner) in one round trip."""
        if not entries:
            return
        mapping: dict[Any, Any] = {k: codec.pack([float(e.delay), float(e.last_update)])
                   for k, e in entries.items()}
        with redis_errors("backoff put_many"):
            self.r.hset(self.keys.backoff, mapping=mapping)

    def _scan(self, match: str | None = None) -> Iterator[list[tuple[str, bytes | str]]]:
        cursor = 0
        while True:
            with redis_errors("backoff scan"):
                cursor, chunk = self.r.hscan(self.keys.backoff, cursor, match=match,
                                             count=SCAN_COUNT)
            pairs = chunk.items() if isinstance(chunk, dict) else zip(chunk[::2], chunk[1::2], strict=True)
            if chunk:
                yield [(text(k), v) for k, v in pairs]
            if int(cursor) == 0:
                return

    def gc(self, now: float) -> int:
        """Drop entries not updated for more than ``2·max_delay``; returns how many.

        Scans in chunks; each chunk's candidates are deleted by a script that re-checks
        them, so an entry another replica advanced meanwhile survives.
        """
        dropped = 0
        for chunk in self._scan():
            old = []
            for k, raw in chunk:
                try:
                    if bo.collectable(_decode(raw), now, self.max_delay):
                        old.append(k)
                except errors.CorruptEntryError:
                    old.append(k)  # undecodable: nothing can use it
            if old:
                cutoff = repr(now - 2 * self.max_delay)
                with redis_errors("backoff gc"):
                    dropped += int(self._gc(keys=[self.keys.backoff], args=[cutoff, *old]))
        return dropped

    def delete_prefix(self, ds_uid: str) -> int:
        """Drop every entry of one DaemonSet (keys ``<ds_uid>/...``); returns how many."""
        match = _glob_escape(bo.key_prefix(ds_uid)) + "*"
        gone = 0
        for chunk in self._scan(match):
            with redis_errors("backoff delete_prefix"):
                gone += int(self.r.hdel(self.keys.backoff, *[k for k, _ in chunk]))
        return gone
