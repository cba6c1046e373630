"""What a deleted DaemonSet leaves in the control state, and its removal.

The event log and the Events about a DaemonSet are history and stay (Events expire by the
collector's TTL). Everything else that names a DaemonSet must go with it:

* per **key** (``<namespace>/<name>``): its expectations entry, its workqueue traces
  (delayed add, failure count) and the position of its last status write;
* per **uid**: its failed-pod backoff entries (``<uid>/<generation>/<node>``).

The garbage collector is the one home of this clean-up (``services.gc``): it acts on a
DaemonSet DELETED entry and sweeps on every full pass. Per-key state is removed by one script
that re-checks, atomically, that no DaemonSet of that key exists (a DaemonSet re-created under
the same name owns the key now) and that the key is neither waiting in the queue nor being
synced: a pending sync will see NotFound (spec §c.1 step 2) and its Forget and Done clear
what it touched, so such keys are reported busy and tried again later (an unconditional
``RedisWorkQueue.remove_all`` could drop the lease of a sync in flight, or the pending sync of
a DaemonSet re-created under the same name). A status message of
the DaemonSet still in the status stream would make a status-writer record its position
again, so the caller repeats the clean-up of a key once every message that was in the stream
at the time is consumed (``oldest_status_id``). Backoff entries are removed by uid, which is
never reused, so no check is needed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import redis

from shared.store.backoff import RedisBackoff
from shared.store.guard import redis_errors, text
from shared.store.keys import Keys

FORGET_DELETED = r"""
-- forget_deleted: drop the per-key control state of DaemonSet keys that name no DaemonSet.
-- KEYS[1] obj:DaemonSet  hash  "<ns>/<name>" -> object (the materialised view)
-- KEYS[2] exp            hash  DaemonSet key -> expectations
-- KEYS[3] wq:hints       hash  the dirty keys (keys needing processing) -> their hints
-- KEYS[4] wq:processing  zset  keys being processed
-- KEYS[5] wq:waiting     zset  key -> ready time of a delayed add
-- KEYS[6] wq:failures    hash  key -> failures counted by the rate limiter
-- KEYS[7] status:pos     hash  key -> log position of the newest status written
-- KEYS[8] status         stream computed status messages (read only: its newest id)
-- ARGV: DaemonSet keys
-- Returns {newest status-stream id ('0-0' when empty), then one status per key: 'live' (a
-- DaemonSet of that key exists: untouched), 'busy' (dirty or being processed: untouched,
-- try again later) or 'gone' (state removed)}.
local newest = redis.call('XREVRANGE', KEYS[8], '+', '-', 'COUNT', 1)
local out = {'0-0'}
if #newest > 0 then out[1] = newest[1][1] end
for i, key in ipairs(ARGV) do
  if redis.call('HEXISTS', KEYS[1], key) == 1 then
    out[i + 1] = 'live'
  elseif redis.call('HEXISTS', KEYS[3], key) == 1 or redis.call('ZSCORE', KEYS[4], key) then
    out[i + 1] = 'busy'
  else
    redis.call('HDEL', KEYS[2], key)
    redis.call('ZREM', KEYS[5], key)
    redis.call('HDEL', KEYS[6], key)
    redis.call('HDEL', KEYS[7], key)
    out[i + 1] = 'gone'
  end
end
return out
"""

LIVE, BUSY, GONE = "live", "busy", "gone"


class RedisResidue:
    """Removes the control state of deleted DaemonSets from one cluster (one key prefix)."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.r, self.keys = client, keys
        self.backoff = RedisBackoff(client, keys)
        self._forget = client.register_script(FORGET_DELETED)

    def forget_keys(self, ds_keys: Iterable[str]) -> tuple[dict[str, str], str]:
        """Drop the per-key state of ``ds_keys`` that name no DaemonSet and are not busy.
        Returns each key's status (``live``, ``busy`` or ``gone``) and the newest status
        stream id at that moment (see ``oldest_status_id``)."""
        wanted = sorted(set(ds_keys))
        if not wanted:
            return {}, "0-0"
        k = self.keys
        with redis_errors("residue forget_keys"):
            raw = self._forget(keys=[k.objects("DaemonSet"), k.expectations, k.wq_hints,
                                     k.wq_processing, k.wq_waiting, k.wq_failures,
                                     k.status_positions, k.status_stream],
                               args=wanted)
        statuses = {key: text(status) for key, status in zip(wanted, raw[1:], strict=True)}
        return statuses, text(raw[0])

    def forget_uid(self, ds_uid: str) -> int:
        """Drop the backoff entries of a deleted DaemonSet; returns how many."""
        return self.backoff.delete_prefix(ds_uid) if ds_uid else 0

    def oldest_status_id(self) -> str | None:
        """The id of the oldest message left in the status stream (None: empty). Writers
        delete what they have handled, so every message older than it has been consumed."""
        with redis_errors("residue oldest_status_id"):
            first: Any = self.r.xrange(self.keys.status_stream, count=1)
        return text(first[0][0]) if first else None

    def key_candidates(self) -> set[str]:
        """Every DaemonSet key with expectations, workqueue state or a status position (read
        in one transaction)."""
        k = self.keys
        with redis_errors("residue key_candidates"):
            pipe = self.r.pipeline(transaction=True)
            pipe.hkeys(k.expectations)
            pipe.zrange(k.wq_waiting, 0, -1)
            pipe.hkeys(k.wq_failures)
            pipe.hkeys(k.status_positions)
            found = pipe.execute()
        return {text(v) for group in found for v in group}

    def backoff_uids(self) -> set[str]:
        """The DaemonSet uids that have backoff entries."""
        uids: set[str] = set()
        cursor = 0
        while True:
            with redis_errors("residue backoff_uids"):
                cursor, fields = self.r.hscan(self.keys.backoff, cursor, count=1000)
            uids.update(text(f).split("/", 1)[0] for f in fields)
            if int(cursor) == 0:
                return uids
