"""The workqueue in Redis, shared by every reconciler-worker process (spec §g.3).

Semantics are those of the in-memory reference ``shared.control.workqueue.InMemoryWorkQueue``
(its docstring states the invariants); the contract suite holds both to them. Each
operation is one atomic Lua call (``shared.store.control_scripts``) or one single Redis
command, so ``add`` of any batch, ``get`` with work available and ``done`` are one round trip
each. Time is Redis ``TIME``: one clock for all replicas.

A blocked ``get`` waits on the signal list with ``BLPOP`` — never busy polling — for at most
the time until the next delayed key is due or the next lease runs out (the script returns
that hint), so promotion and reclaiming need no timer process.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import redis

from shared.control import ratelimit
from shared.control.protocols import Lease, QueueState, QueueStats
from shared.control.workqueue import (
    DEFAULT_LEASE_SECONDS,
    HEARTBEAT_SECONDS,
    check_hints,
    check_keys,
)
from shared.store import control_scripts as scripts
from shared.store.guard import redis_errors, text
from shared.store.keys import Keys

BATCH = 1000  # delayed keys promoted / leases reclaimed per get, at most
SERVER_TICK = 0.1  # seconds: redis-server's default hz=10 resolves BLPOP timeouts this late
SUB_TICK_BLOCK = 0.01  # seconds: a BLPOP timeout under the tick (it ends at the next tick)
_COUNTERS = ("adds", "retries", "gets", "done", "stale", "reclaimed")


def wq_keys(keys: Keys) -> list[str]:
    """The KEYS of every workqueue script, in the order their header documents."""
    return [
        keys.wq_queue, keys.wq_dirty, keys.wq_processing, keys.wq_owner, keys.wq_waiting,
        keys.wq_failures, keys.wq_bucket, keys.wq_signal, keys.wq_stats, keys.wq_enqueued,
        keys.wq_shutdown, keys.log, keys.wq_redelivered, keys.wq_hints,
    ]


def upgrade(client: redis.Redis, keys: Keys) -> int:
    """Fold an older version's dirty set and enqueue stamps into the hints (``WQ_UPGRADE``);
    returns how many keys were folded in. Every process that opens the queue runs it once,
    before its first script call."""
    with redis_errors("workqueue upgrade"):
        return int(client.register_script(scripts.WQ_UPGRADE)(keys=wq_keys(keys)))


def hint_args(hints: Mapping[str, Sequence[str]]) -> list[str]:
    """The ARGV groups of node hints (``key, m, m node names`` each), as WQ_ADD_NODES and
    WATCHER_BATCH read them."""
    args: list[str] = []
    for key, nodes in check_hints(hints).items():
        args += [key, str(len(nodes)), *nodes]
    return args


class RedisWorkQueue:
    """Implements ``shared.control.protocols.WorkQueue`` over one Redis (one key prefix)."""

    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        base_delay: float = ratelimit.BASE_DELAY,
        max_delay: float = ratelimit.MAX_DELAY,
        qps: float = ratelimit.QPS,
        burst: int = ratelimit.BURST,
    ) -> None:
        self.r, self.keys = client, keys
        self.lease_seconds = lease_seconds
        self._limits = [base_delay * 1000, max_delay * 1000, qps, burst]
        self._keys = wq_keys(keys)
        pool = getattr(client, "connection_pool", None)
        socket_timeout = pool.connection_kwargs.get("socket_timeout") if pool else None
        # one BLPOP must return before the socket read times out
        self.max_block = HEARTBEAT_SECONDS if not socket_timeout else max(
            0.05, min(HEARTBEAT_SECONDS, float(socket_timeout) * 0.8))
        reg = client.register_script
        self._add, self._get = reg(scripts.WQ_ADD), reg(scripts.WQ_GET)
        self._add_nodes = reg(scripts.WQ_ADD_NODES)
        self._done, self._renew = reg(scripts.WQ_DONE), reg(scripts.WQ_RENEW)
        self._done_get = reg(scripts.WQ_DONE_GET)
        self._add_after = reg(scripts.WQ_ADD_AFTER)
        self._add_rate_limited = reg(scripts.WQ_ADD_RATE_LIMITED)
        self._remove_all, self._shutdown = reg(scripts.WQ_REMOVE_ALL), reg(scripts.WQ_SHUTDOWN)
        self._stats = reg(scripts.WQ_STATS)
        upgrade(client, keys)

    def _call(self, script: Any, what: str, *args: Any) -> Any:
        with redis_errors(f"workqueue {what}"):
            return script(keys=self._keys, args=list(args))

    # ---- adding ---------------------------------------------------------------------------

    def add(self, keys: Sequence[str]) -> int:
        """``Add`` a batch of keys in one round trip; returns how many were newly dirty."""
        if not check_keys(keys):
            return 0
        return int(self._call(self._add, "add", *keys))

    def add_nodes(self, hints: Mapping[str, Sequence[str]]) -> int:
        """``add`` with node hints, a batch in one round trip (see the protocol)."""
        if not hints:
            return 0
        return int(self._call(self._add_nodes, "add_nodes", *hint_args(hints)))

    def add_after(self, key: str, seconds: float) -> None:
        self._call(self._add_after, "add_after", key, repr(seconds * 1000.0))

    def add_rate_limited(self, key: str) -> float:
        """``AddRateLimited``; the limiter state is in Redis, shared by all replicas."""
        ms = self._call(self._add_rate_limited, "add_rate_limited", key, *self._limits)
        return float(text(ms)) / 1000.0

    def forget(self, key: str) -> None:
        with redis_errors("workqueue forget"):
            self.r.hdel(self.keys.wq_failures, key)

    def num_requeues(self, key: str) -> int:
        with redis_errors("workqueue num_requeues"):
            raw = self.r.hget(self.keys.wq_failures, key)
        return int(text(raw)) if raw is not None else 0

    # ---- handing out ------------------------------------------------------------------------

    def try_get(self, worker: str) -> Lease | None:
        """One non-blocking attempt (one round trip)."""
        lease, _down, _hint = self._try(worker)
        return lease

    def _try(self, worker: str) -> tuple[Lease | None, bool, float]:
        raw = self._call(self._get, "get", worker, int(self.lease_seconds * 1000), BATCH)
        return self._handed(worker, raw)

    @staticmethod
    def _handed(worker: str, raw: Any) -> tuple[Lease | None, bool, float]:
        """WQ_GET's reply: the lease, or none with whether the queue is shut down and the
        seconds until the next delayed key or lease deadline (-1: none)."""
        if len(raw) == 2:
            hint_ms = int(raw[1])
            return None, bool(int(raw[0])), (hint_ms / 1000.0 if hint_ms >= 0 else -1.0)
        key, token, enq, leased, deadline, position, redelivered, full, hinted = (
            text(v) for v in raw)
        return Lease(key, worker, token, int(enq), int(leased), int(deadline), position,
                     redelivered=redelivered == "1",
                     nodes=tuple(sorted(n for n in hinted.split("\n") if n)),
                     full=full == "1"), False, 0

    def get(self, worker: str, block_seconds: float = 0.0,
            wait_first: float | None = None) -> Lease | None:
        """``Get``: the next key for ``worker``, waiting up to ``block_seconds``.

        Returns None on timeout, or at once when the queue is shut down and empty. Redis
        times a blocked wait only to its tick (``SERVER_TICK``): with less than a tick left
        and nothing due before then, the last wait still listens for a key (it may end up
        to a tick past ``block_seconds``) rather than sleep blind, which kept a key added
        meanwhile waiting for the rest of the time: a job's last keys waited up to 100 ms
        for their sync.
        ``wait_first``: the queue was just found empty with nothing due for that many
        seconds (-1: nothing due), as ``done_then_get`` tells: wait before the first look.
        """
        deadline = time.monotonic() + block_seconds
        told = wait_first  # the first look's answer, when the caller has it
        while True:
            if told is not None:
                lease, down, hint, told = None, False, told, None
            else:
                lease, down, hint = self._try(worker)
            if lease is not None or down:
                return lease
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            wait = min(remaining, self.max_block)
            due = 0 <= hint <= wait  # a delayed key or a lease deadline ends the wait
            if due:
                wait = hint
            block = wait - SERVER_TICK
            if wait <= SERVER_TICK:
                # Redis expires BLPOP timeouts on its cron tick (up to 100 ms late), too
                # coarse for a key due in a few ms: sleep until it is due (a known wait).
                if due:
                    time.sleep(max(wait, 0.001))
                    continue
                # the caller's time runs out first: wait for a signal to the next tick
                block = SUB_TICK_BLOCK
            with redis_errors("workqueue wait"):  # returns early on a signal
                self.r.blpop([self.keys.wq_signal], timeout=block)

    def renew(self, lease: Lease) -> Lease | None:
        """Extend the lease by ``lease_seconds`` from now; None if it is no longer ours."""
        raw = self._call(self._renew, "renew", lease.key, lease.token,
                         int(self.lease_seconds * 1000))
        if raw is None:
            return None
        return replace(lease, deadline_ms=int(text(raw)))

    def done(self, lease: Lease) -> bool:
        """``Done``; a stale lease (the key was handed out again since) is ignored."""
        return bool(self._call(self._done, "done", lease.key, lease.token))

    def done_then_get(self, lease: Lease, worker: str) -> tuple[bool, Lease | None, float]:
        """``done``, then one non-blocking ``get`` for ``worker``, in one round trip:
        (done, the next lease or None, seconds until the next delayed key or lease deadline
        when none: pass it to ``get`` as ``wait_first``)."""
        raw = self._call(self._done_get, "done_then_get", lease.key, lease.token, worker,
                         int(self.lease_seconds * 1000), BATCH)
        nxt, down, hint = self._handed(worker, raw[1:])
        return bool(int(raw[0])), nxt, (0.0 if down else hint)

    def remove_all(self, key: str) -> None:
        self._call(self._remove_all, "remove_all", key)

    def current_tokens(self, keys: Sequence[str]) -> dict[str, str]:
        """One HMGET of the owner hash (``<token>:<leased ms>:<worker>`` per held key)."""
        if not keys:
            return {}
        with redis_errors("workqueue current_tokens"):
            owners = self.r.hmget(self.keys.wq_owner, list(keys))
        return {k: text(o).split(":", 1)[0] for k, o in zip(keys, owners, strict=True)
                if o is not None}

    # ---- shutdown and introspection --------------------------------------------------------------

    def shutdown(self) -> None:
        """Shut the queue down for every replica: adds are ignored, blocked gets return."""
        self._call(self._shutdown, "shutdown", "1")

    def reopen(self) -> None:
        """Clear a shutdown (the flag outlives processes: a restarted cluster reopens)."""
        self._call(self._shutdown, "reopen", "0")

    def shutdown_with_drain(self, timeout: float, poll: float = 0.05) -> bool:
        """Shut down, then wait until no key is being processed (polls ``poll`` seconds;
        a lease that has run out counts as finished)."""
        self.shutdown()
        deadline = time.monotonic() + timeout
        while True:
            with redis_errors("workqueue drain"):
                t = self.r.time()
                now_ms = int(t[0]) * 1000 + int(t[1]) // 1000
                live = self.r.zcount(self.keys.wq_processing, f"({now_ms}", "+inf")
            if not live:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll)

    def shutting_down(self) -> bool:
        with redis_errors("workqueue shutting_down"):
            return bool(self.r.exists(self.keys.wq_shutdown))

    def len(self) -> int:
        """``Len``: queued keys, not counting those being processed or delayed."""
        with redis_errors("workqueue len"):
            return int(self.r.llen(self.keys.wq_queue))

    def __len__(self) -> int:
        return self.len()

    def stats(self) -> QueueStats:
        raw = self._call(self._stats, "stats")
        counters = dict.fromkeys(_COUNTERS, 0)
        for i in range(7, len(raw), 2):
            counters[text(raw[i])] = int(text(raw[i + 1]))
        return QueueStats(
            depth=int(raw[0]), dirty=int(raw[1]), processing=int(raw[2]), waiting=int(raw[3]),
            adds_total=counters["adds"], retries_total=counters["retries"],
            gets_total=counters["gets"], done_total=counters["done"],
            stale_done_total=counters["stale"], reclaimed_total=counters["reclaimed"],
            unfinished_work_seconds=int(text(raw[5])) / 1000.0,
            longest_running_seconds=int(text(raw[6])) / 1000.0,
            shutting_down=bool(int(raw[4])),
        )

    def state(self) -> QueueState:
        """The queue, dirty, processing and waiting sets, read in one transaction."""
        k = self.keys
        with redis_errors("workqueue state"):
            pipe = self.r.pipeline(transaction=True)
            pipe.lrange(k.wq_queue, 0, -1)
            pipe.hkeys(k.wq_hints)
            pipe.zrange(k.wq_processing, 0, -1)
            pipe.zrange(k.wq_waiting, 0, -1, withscores=True)
            queue, dirty, processing, waiting = pipe.execute()
        return QueueState(
            queue=tuple(text(v) for v in queue),
            dirty=frozenset(text(v) for v in dirty),
            processing=frozenset(text(v) for v in processing),
            waiting={text(m): int(s) for m, s in waiting},
        )
