"""The in-memory reference workqueue: client-go's rate-limited delaying queue (spec §g.3)
plus worker leases. ``shared.store.workqueue.RedisWorkQueue`` must behave the same; the
contract suite (tests/integration/test_queue_contract.py) runs against both.

State, with the invariants client-go's ``queue.go`` writes on its fields:

``queue``
    The order in which keys are handed out. Every element of ``queue`` is in ``dirty`` and
    not in ``processing``; no key appears twice.
``dirty``
    Every key that needs processing. A key may be in ``dirty`` *and* ``processing`` at once:
    it was added again while a worker held it; ``done`` then pushes it onto ``queue``.
    Hence ``queue == dirty - processing`` (as a set) at every moment.
``processing``
    Keys currently handed out, each with its lease (worker, token, deadline). A key is held
    by at most one worker at a time.
``waiting``
    Delayed adds: key → ready time; a duplicate keeps the *earlier* time. When due, a key
    is ``add``-ed (and deduplicated then). Independent of the three sets above.

``full`` and ``hints``
    Why a dirty key needs processing. ``add`` (and a due delayed add, a reclaimed lease) puts
    the key in ``full``: its next hand-out is a full sync. ``add_nodes`` records node names
    in ``hints[key]`` instead, unless the key is in ``full`` (a full sync covers every node),
    and puts it in ``full`` once it holds more than ``MAX_NODE_HINTS``; ``hints[key]`` may be
    empty (a sync of no node: the status and whatever else needs no node). Both are subsets
    of ``dirty``, and a dirty key not in ``full`` is in ``hints``. A hand-out takes both:
    ``Lease.nodes`` are the hints, ``Lease.full`` whether the key was in ``full`` (or is
    redelivered). The key stays the unit of work, so one worker holds a DaemonSet at a time
    whatever its hints.

Leases: a key whose lease deadline has passed is treated as ``done`` and ``add``-ed again
(ahead of the rest of the queue), so a dead worker's key is handed out again; the dead
worker's late ``done`` then carries a stale token and is ignored. The next hand-out of a
reclaimed key is flagged ``Lease.redelivered``, so its new holder knows the last one may have
stopped half way. Due delayed keys are promoted and expired leases reclaimed at every ``get``.

You must call ``done`` for every key you get (or let the lease run out).
During shutdown ``add``/``add_after`` are ignored; ``get`` still hands out what is queued and
returns None once the queue is empty.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from shared import settings
from shared.control.clock import Clock, RealClock
from shared.control.protocols import NO_POSITION, Lease, QueueState, QueueStats
from shared.control.ratelimit import RateLimiter, default_controller_rate_limiter

DEFAULT_LEASE_SECONDS = settings.current.worker_lease_seconds
HEARTBEAT_SECONDS = 10.0  # client-go's delaying queue re-checks its heap at least this often
MAX_NODE_HINTS = 1000  # node hints kept per key; beyond, its next hand-out is a full sync


def _ms(seconds: float) -> int:
    return int(seconds * 1000)


def _pop(members: set[str], key: str) -> bool:
    """Remove ``key`` from ``members``; whether it was there."""
    if key in members:
        members.discard(key)
        return True
    return False


def check_keys(keys: Sequence[str]) -> Sequence[str]:
    """Refuse a bare string where a batch of keys is expected (it would add its letters)."""
    if isinstance(keys, str):
        raise TypeError("add() takes a sequence of keys, not a single str")
    return keys


def check_hints(hints: Mapping[str, Sequence[str]]) -> Mapping[str, Sequence[str]]:
    """Refuse a bare string as a key's node list, and a node name with a newline (no node
    name has one: the Redis queue separates names with it)."""
    for nodes in hints.values():
        if isinstance(nodes, str):
            raise TypeError("add_nodes() takes a sequence of node names per key, not a str")
        if any("\n" in n for n in nodes):
            raise ValueError("a node name cannot hold a newline")
    return hints


@dataclass
class _Held:
    worker: str
    token: str
    leased_ms: int
    deadline_ms: int


class InMemoryWorkQueue:
    """Thread-safe reference implementation of ``shared.control.protocols.WorkQueue``.

    ``position_source`` supplies ``Lease.position`` when the caller passes none (the Redis
    queue reads the log tip itself). Blocking ``get`` waits in real time; with a
    ``FakeClock`` use ``try_get`` and move the clock instead.
    """

    def __init__(
        self,
        clock: Clock | None = None,
        rate_limiter: RateLimiter | None = None,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        position_source: Callable[[], str] | None = None,
    ) -> None:
        self.clock: Clock = clock or RealClock()
        self.rate_limiter: RateLimiter = rate_limiter or default_controller_rate_limiter(self.clock)
        self.lease_seconds = lease_seconds
        self.position_source = position_source or (lambda: NO_POSITION)
        self._queue: deque[str] = deque()
        self._dirty: set[str] = set()
        self._processing: dict[str, _Held] = {}
        self._waiting: dict[str, float] = {}  # key → ready time (s)
        self._heap: list[tuple[float, int, str]] = []  # lazy: valid iff _waiting[key] == ready
        self._enqueued: dict[str, int] = {}  # key → ms it became dirty
        self._redelivered: set[str] = set()  # reclaimed keys not handed out since
        self._full: set[str] = set()  # dirty keys a full sync is asked for
        self._hints: dict[str, dict[str, None]] = {}  # dirty key → its hinted nodes
        self._seq = itertools.count(1)
        self._counts = dict.fromkeys(("adds", "retries", "gets", "done", "stale", "reclaimed"), 0)
        self._shutting_down = False
        self._cond = threading.Condition(threading.Lock())

    # ---- adding ---------------------------------------------------------------------------

    def add(self, keys: Sequence[str]) -> int:
        """``Add`` each key; returns how many were newly marked dirty."""
        check_keys(keys)
        with self._cond:
            return self._add_locked(keys, _ms(self.clock.now()))

    def _add_locked(self, keys: Sequence[str], now_ms: int) -> int:
        if self._shutting_down:
            return 0
        added = 0
        for key in keys:
            added += self._dirty_locked(key, now_ms)
            self._full_locked(key)
        return added

    def _dirty_locked(self, key: str, now_ms: int) -> int:
        """Mark ``key`` dirty (queued unless processing); 1 if it was not."""
        if key in self._dirty:
            return 0
        self._dirty.add(key)
        self._enqueued[key] = now_ms
        self._counts["adds"] += 1
        if key not in self._processing:
            self._queue.append(key)
            self._cond.notify()
        return 1

    def _full_locked(self, key: str) -> None:
        self._full.add(key)
        self._hints.pop(key, None)

    def add_nodes(self, hints: Mapping[str, Sequence[str]]) -> int:
        """``add`` with node hints (see the module docstring); returns how many keys were
        newly marked dirty."""
        check_hints(hints)
        with self._cond:
            if self._shutting_down:
                return 0
            now_ms = _ms(self.clock.now())
            added = 0
            for key, nodes in hints.items():
                added += self._dirty_locked(key, now_ms)
                if key in self._full:
                    continue
                held = self._hints.setdefault(key, {})
                held.update(dict.fromkeys(nodes))
                if len(held) > MAX_NODE_HINTS:
                    self._full_locked(key)
            return added

    def add_after(self, key: str, seconds: float) -> None:
        """``AddAfter``: add now if ``seconds <= 0``, else when due; earliest ready time wins."""
        with self._cond:
            if self._shutting_down:
                return
            self._counts["retries"] += 1
            now = self.clock.now()
            if seconds <= 0:
                self._add_locked([key], _ms(now))
                return
            ready = now + seconds
            current = self._waiting.get(key)
            if current is None or ready < current:
                self._waiting[key] = ready
                heapq.heappush(self._heap, (ready, next(self._seq), key))
                self._cond.notify_all()  # blocked getters re-compute how long to wait

    def add_rate_limited(self, key: str) -> float:
        """``AddRateLimited``: ``add_after(key, when(key))``; returns the delay."""
        delay = self.rate_limiter.when(key)
        self.add_after(key, delay)
        return delay

    def forget(self, key: str) -> None:
        self.rate_limiter.forget(key)

    def num_requeues(self, key: str) -> int:
        return self.rate_limiter.num_requeues(key)

    # ---- handing out ------------------------------------------------------------------------

    def try_get(self, worker: str, position: str | None = None) -> Lease | None:
        """Non-blocking ``Get``: promote due delayed keys, reclaim expired leases, pop one."""
        with self._cond:
            return self._try_get_locked(worker, position)

    def _try_get_locked(self, worker: str, position: str | None) -> Lease | None:
        now = self.clock.now()
        now_ms = _ms(now)
        self._promote(now)
        self._reclaim(now_ms)
        if not self._queue:
            return None
        key = self._queue.popleft()
        self._dirty.discard(key)
        held = _Held(worker, str(next(self._seq)), now_ms, now_ms + _ms(self.lease_seconds))
        self._processing[key] = held
        self._counts["gets"] += 1
        redelivered = _pop(self._redelivered, key)
        hinted = self._hints.pop(key, None)
        nodes = tuple(sorted(hinted or {}))
        full = _pop(self._full, key) or redelivered or hinted is None
        return Lease(
            key=key,
            worker=worker,
            token=held.token,
            enqueued_ms=self._enqueued.pop(key, now_ms),
            leased_ms=now_ms,
            deadline_ms=held.deadline_ms,
            position=self.position_source() if position is None else position,
            redelivered=redelivered,
            nodes=nodes,
            full=full,
        )

    def get(self, worker: str, block_seconds: float = 0.0, position: str | None = None,
            wait_first: float | None = None) -> Lease | None:
        """``Get``, waiting up to ``block_seconds`` (real time) for a key. ``wait_first`` (see
        the Redis queue's) changes nothing here: a look costs no round trip."""
        deadline = time.monotonic() + block_seconds  # real time, whatever the clock
        with self._cond:
            while True:
                lease = self._try_get_locked(worker, position)
                if lease is not None or self._shutting_down:
                    return lease
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                now = self.clock.now()
                self._cond.wait(max(min(remaining, HEARTBEAT_SECONDS,
                                        self._next_event(now) - now), 0.001))

    def _next_event(self, now: float) -> float:
        """When a delayed key becomes due or a lease runs out (whichever is first)."""
        times = [self._heap[0][0]] if self._heap else []
        times += [h.deadline_ms / 1000.0 for h in self._processing.values()]
        return min(times, default=now + HEARTBEAT_SECONDS)

    def _promote(self, now: float) -> None:
        while self._heap and self._heap[0][0] <= now:
            ready, _, key = heapq.heappop(self._heap)
            if self._waiting.get(key) == ready:
                del self._waiting[key]
                self._add_locked([key], _ms(now))

    def _reclaim(self, now_ms: int) -> None:
        expired = [k for k, h in self._processing.items() if h.deadline_ms <= now_ms]
        expired.sort(key=lambda k: self._processing[k].deadline_ms, reverse=True)
        for key in expired:  # latest deadline first, so the earliest ends up at the front
            del self._processing[key]
            self._counts["reclaimed"] += 1
            if key not in self._dirty:
                if self._shutting_down:
                    continue  # Done, and the re-Add is ignored during shutdown
                self._dirty.add(key)
                self._enqueued[key] = now_ms
            self._full_locked(key)
            self._redelivered.add(key)
            self._queue.appendleft(key)
            self._cond.notify()

    # ---- finishing --------------------------------------------------------------------------

    def _current(self, lease: Lease) -> _Held | None:
        held = self._processing.get(lease.key)
        return held if held is not None and held.token == lease.token else None

    def renew(self, lease: Lease) -> Lease | None:
        """Extend the lease by ``lease_seconds`` from now; None if it is no longer current."""
        with self._cond:
            held = self._current(lease)
            if held is None:
                return None
            held.deadline_ms = _ms(self.clock.now() + self.lease_seconds)
            return replace(lease, deadline_ms=held.deadline_ms)

    def done(self, lease: Lease) -> bool:
        """``Done``: release the key; if it was re-added meanwhile, queue it again."""
        with self._cond:
            return self._done_locked(lease)

    def _done_locked(self, lease: Lease) -> bool:
        if self._current(lease) is None:
            self._counts["stale"] += 1
            return False
        del self._processing[lease.key]
        self._counts["done"] += 1
        if lease.key in self._dirty:
            self._queue.append(lease.key)
            self._cond.notify()
        elif not self._processing:
            self._cond.notify_all()  # wake a draining shutdown
        return True

    def done_then_get(self, lease: Lease, worker: str) -> tuple[bool, Lease | None, float]:
        """``done``, then ``try_get`` for ``worker``, atomically: (done, the next lease or
        None, seconds until the next delayed key or lease deadline when none, -1: none)."""
        with self._cond:
            done = self._done_locked(lease)
            nxt = self._try_get_locked(worker, None)
            if nxt is not None or self._shutting_down:
                return done, nxt, 0.0
            now = self.clock.now()
            if not self._heap and not self._processing:
                return done, None, -1.0
            return done, None, max(0.0, self._next_event(now) - now)

    def remove_all(self, key: str) -> None:
        """Forget everything about ``key`` (its DaemonSet is gone); a holder's done is stale."""
        with self._cond:
            self._dirty.discard(key)
            try:
                self._queue.remove(key)
            except ValueError:
                pass
            self._waiting.pop(key, None)
            self._processing.pop(key, None)
            self._enqueued.pop(key, None)
            self._redelivered.discard(key)
            self._full.discard(key)
            self._hints.pop(key, None)
        self.rate_limiter.forget(key)

    # ---- shutdown and introspection --------------------------------------------------------------

    def shutdown(self) -> None:
        """``ShutDown``: ignore new adds; ``get`` returns None once the queue is empty."""
        with self._cond:
            self._shutting_down = True
            self._cond.notify_all()

    def shutdown_with_drain(self, timeout: float) -> bool:
        """``ShutDownWithDrain``: shut down, then wait (real time) until nothing is processing."""
        self.shutdown()
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                self._reclaim(_ms(self.clock.now()))
                if not self._processing:
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(min(remaining, 0.1))

    def shutting_down(self) -> bool:
        with self._cond:
            return self._shutting_down

    def len(self) -> int:
        """``Len``: queued keys, not counting those being processed or delayed."""
        with self._cond:
            return len(self._queue)

    def __len__(self) -> int:
        return self.len()

    def current_tokens(self, keys: Sequence[str]) -> dict[str, str]:
        with self._cond:
            return {k: self._processing[k].token for k in keys if k in self._processing}

    def stats(self) -> QueueStats:
        with self._cond:
            now_ms = _ms(self.clock.now())
            running = [max(0, now_ms - h.leased_ms) / 1000.0 for h in self._processing.values()]
            c = self._counts
            return QueueStats(
                depth=len(self._queue), dirty=len(self._dirty),
                processing=len(self._processing), waiting=len(self._waiting),
                adds_total=c["adds"], retries_total=c["retries"], gets_total=c["gets"],
                done_total=c["done"], stale_done_total=c["stale"],
                reclaimed_total=c["reclaimed"],
                unfinished_work_seconds=sum(running),
                longest_running_seconds=max(running, default=0.0),
                shutting_down=self._shutting_down,
            )

    def state(self) -> QueueState:
        with self._cond:
            return QueueState(
                queue=tuple(self._queue), dirty=frozenset(self._dirty),
                processing=frozenset(self._processing),
                waiting={k: _ms(t) for k, t in self._waiting.items()},
            )
