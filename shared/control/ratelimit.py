"""client-go's default controller rate limiter (spec §g.3), pure and clock-injected.

``DefaultControllerRateLimiter`` is the max of two limiters, both consulted on every call:

* per item: ``5 ms · 2^failures(item)``, capped at 1000 s; each ``when`` counts a failure;
* overall: a token bucket of 10 tokens/s with burst 100 (``rate.NewLimiter(10, 100)``);
  ``when`` reserves one token and returns how long the reservation must wait.

The pure functions ``exponential_delay`` and ``reserve`` *decide*; the Redis queue's Lua
script (shared.store.workqueue) implements the same arithmetic and the contract tests hold
both to it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Protocol

from shared.control.clock import Clock

BASE_DELAY = 0.005  # seconds
MAX_DELAY = 1000.0  # seconds
QPS = 10.0
BURST = 100


class RateLimiter(Protocol):
    """``workqueue.RateLimiter``: how long to wait before re-adding an item."""

    def when(self, key: str) -> float:
        """Seconds to wait before the item is retried; counts one requeue."""
        ...

    def forget(self, key: str) -> None:
        """Stop tracking the item (it succeeded)."""
        ...

    def num_requeues(self, key: str) -> int:
        """How many times the item has been requeued since the last ``forget``."""
        ...


def exponential_delay(failures: int, base: float = BASE_DELAY, cap: float = MAX_DELAY) -> float:
    """Decides the per-item delay after ``failures`` earlier failures: ``base·2^failures`` ≤ cap."""
    if failures >= 1024:  # 2.0**1024 overflows a float; the cap has long been reached
        return cap
    return min(base * 2.0**failures, cap)


@dataclass(frozen=True)
class Bucket:
    """Token-bucket state. ``last is None`` means never used: the bucket is full."""

    tokens: float = 0.0
    last: float | None = None


def reserve(bucket: Bucket, now: float, qps: float = QPS, burst: int = BURST) -> tuple[Bucket, float]:
    """Decides ``rate.Limiter.Reserve().Delay()``: take one token, possibly going into debt.

    Tokens refill at ``qps`` up to ``burst``; a negative balance is a reservation that must
    wait ``-tokens/qps`` seconds. Returns the new state and that wait (0 if a token was there).
    """
    if bucket.last is None:
        tokens = float(burst)
    else:
        elapsed = max(0.0, now - bucket.last)  # a clock going backwards refills nothing
        tokens = min(float(burst), bucket.tokens + elapsed * qps)
    tokens -= 1.0
    wait = -tokens / qps if tokens < 0 else 0.0
    return Bucket(tokens=tokens, last=now), wait


class ItemExponentialFailureRateLimiter:
    """Per-item exponential backoff: ``base·2^n`` capped at ``cap``; thread-safe."""

    def __init__(self, base: float = BASE_DELAY, cap: float = MAX_DELAY) -> None:
        self.base, self.cap = base, cap
        self._failures: dict[str, int] = {}
        self._lock = threading.Lock()

    def when(self, key: str) -> float:
        with self._lock:
            n = self._failures.get(key, 0)
            self._failures[key] = n + 1
        return exponential_delay(n, self.base, self.cap)

    def forget(self, key: str) -> None:
        with self._lock:
            self._failures.pop(key, None)

    def num_requeues(self, key: str) -> int:
        with self._lock:
            return self._failures.get(key, 0)


class BucketRateLimiter:
    """One token bucket for all items (``qps`` tokens/s, ``burst`` deep); never forgets."""

    def __init__(self, clock: Clock, qps: float = QPS, burst: int = BURST) -> None:
        self.clock, self.qps, self.burst = clock, qps, burst
        self._bucket = Bucket()
        self._lock = threading.Lock()

    def when(self, key: str) -> float:
        with self._lock:
            self._bucket, wait = reserve(self._bucket, self.clock.now(), self.qps, self.burst)
        return wait

    def forget(self, key: str) -> None:
        return None

    def num_requeues(self, key: str) -> int:
        return 0


class MaxOfRateLimiter:
    """The longest wait of all limiters; every limiter sees every call (as in client-go)."""

    def __init__(self, *limiters: RateLimiter) -> None:
        self.limiters = limiters

    def when(self, key: str) -> float:
        return max((lim.when(key) for lim in self.limiters), default=0.0)

    def forget(self, key: str) -> None:
        for lim in self.limiters:
            lim.forget(key)

    def num_requeues(self, key: str) -> int:
        return max((lim.num_requeues(key) for lim in self.limiters), default=0)


def default_controller_rate_limiter(clock: Clock) -> MaxOfRateLimiter:
    """``workqueue.DefaultControllerRateLimiter()``: exponential 5 ms..1000 s, bucket 10 qps/100."""
    return MaxOfRateLimiter(ItemExponentialFailureRateLimiter(), BucketRateLimiter(clock))
