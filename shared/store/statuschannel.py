"""The status stream in Redis (``Keys.status_stream``, consumer group ``status-writers``) as
the port ``shared.daemonset.messages.StatusChannel``; and the positions of the statuses
written (``Keys.status_positions``), which status-writers claim before writing. Acts
(Redis)."""

from __future__ import annotations

import time
from typing import Any

import redis

from shared.daemonset.messages import Received, StatusMessage
from shared.store import codec, errors, scripts
from shared.store.guard import redis_errors, text
from shared.store.keys import Keys

GROUP = "status-writers"
CLAIM_EVERY = 1.0  # seconds: at most this often (and the claim time) a look for idle messages


class RedisStatusChannel:
    def __init__(self, client: redis.Redis, keys: Keys, maxlen: int = 100_000) -> None:
        self.r = client
        self.stream = keys.status_stream
        self.maxlen = maxlen
        self._group = False
        self._claim_at = 0.0  # monotonic time of the next look for idle messages

    def publish(self, message: StatusMessage) -> None:
        with redis_errors("publish a status"):
            self.r.xadd(self.stream, {"m": codec.pack(message.to_map())}, maxlen=self.maxlen,
                        approximate=True)

    def ensure(self) -> None:
        """Create the consumer group (and the stream) unless it exists."""
        try:
            self.r.xgroup_create(self.stream, GROUP, id="0", mkstream=True)
        except redis.ResponseError as err:
            if "BUSYGROUP" not in str(err):
                raise
        self._group = True

    def receive(self, consumer: str, count: int, block_ms: int | None,
                claim_idle_ms: int) -> list[Received]:
        if not self._group:
            self.ensure()
        r = self.r
        messages: list[Any] = []
        if time.monotonic() >= self._claim_at:
            # a message left undone is claimed within its idle time and CLAIM_EVERY after it
            # (or twice its idle time, the shorter), not looked for on every receive
            claimed: Any = r.xautoclaim(self.stream, GROUP, consumer, claim_idle_ms,
                                        start_id="0-0", count=count)
            messages = list(claimed[1]) if claimed and len(claimed) > 1 else []
            more = bool(claimed) and text(claimed[0]) != "0-0"  # a cursor: more to look at
            self._claim_at = 0.0 if more else \
                time.monotonic() + min(CLAIM_EVERY, claim_idle_ms / 1000.0)
        resp: Any = r.xreadgroup(GROUP, consumer, {self.stream: ">"}, count=count,
                                 block=None if messages else block_ms)
        for _stream, entries in resp or []:
            messages += entries
        out = []
        for mid, fields in messages:
            if mid is None or fields is None:
                continue
            try:
                out.append(Received(text(mid), StatusMessage.from_map(codec.unpack(fields[b"m"]))))
            except (KeyError, errors.CorruptEntryError) as err:
                out.append(Received(text(mid), None, str(err) or "no field 'm'"))
        return out

    def done(self, ids: list[str]) -> None:
        if ids:
            self.r.xack(self.stream, GROUP, *ids)
            self.r.xdel(self.stream, *ids)


class RedisStatusPositions:
    """Per DaemonSet, the log position of the newest status written (script
    ``NEWER_POSITION``)."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self._keys = [keys.status_positions, keys.log]
        self._newer = client.register_script(scripts.NEWER_POSITION)

    def claim(self, key: str, position: str) -> int:
        """Record ``position`` as the newest status of ``key`` being written: 1 done; 0 a
        status computed at a later position was claimed already; -1 (nothing recorded) a
        position that is malformed or that the log has not reached."""
        return int(self._newer(keys=self._keys, args=[key, position]))
