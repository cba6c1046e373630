"""ControllerExpectations (spec §g.1): pending creates/deletes per DaemonSet key.

An entry is ``(add, delete, timestamp)``; ``timestamp`` is the time of the last ``set``.
The pure functions decide; ``ControllerExpectations`` is the in-memory store (the reference
twin of ``shared.store.expectations.RedisExpectations``), with an injected clock.

* ``set`` replaces the entry and stamps it; ``lower`` subtracts (no-op without an entry;
  counters may go negative; the timestamp is kept).
* fulfilled ⇔ ``add <= 0 and delete <= 0``.
* satisfied ⇔ no entry, or fulfilled, or expired (set more than 5 minutes ago).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, replace

from shared import settings
from shared.control.clock import Clock, RealClock

EXPECTATIONS_TIMEOUT = settings.current.expectations_timeout_seconds  # client-go: 5 min


@dataclass(frozen=True)
class Expectation:
    """``ControlleeExpectations``: creates and deletes still expected, and when they were set."""

    add: int
    delete: int
    timestamp: float  # epoch seconds of the last set

    def fulfilled(self) -> bool:
        """Decides: every expected create and delete has been observed."""
        return self.add <= 0 and self.delete <= 0

    def expired(self, now: float, timeout: float = EXPECTATIONS_TIMEOUT) -> bool:
        """Decides: more than ``timeout`` seconds since the entry was set."""
        return now - self.timestamp > timeout


def satisfied(entry: Expectation | None, now: float, timeout: float = EXPECTATIONS_TIMEOUT) -> bool:
    """Decides ``SatisfiedExpectations``: no entry, fulfilled, or expired."""
    return entry is None or entry.fulfilled() or entry.expired(now, timeout)


def lowered(entry: Expectation, add: int, delete: int) -> Expectation:
    """Decides ``LowerExpectations``: subtract the observed amounts, keep the timestamp."""
    return replace(entry, add=entry.add - add, delete=entry.delete - delete)


class ControllerExpectations:
    """In-memory expectations store; thread-safe. ``now`` defaults to the injected clock."""

    def __init__(self, clock: Clock | None = None, timeout: float = EXPECTATIONS_TIMEOUT) -> None:
        self.clock: Clock = clock or RealClock()
        self.timeout = timeout
        self._entries: dict[str, Expectation] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> Expectation | None:
        with self._lock:
            return self._entries.get(key)

    def set(self, key: str, add: int, delete: int, now: float | None = None) -> None:
        """``SetExpectations``: replace the entry with ``(add, delete)`` stamped ``now``."""
        stamp = self.clock.now() if now is None else now
        with self._lock:
            self._entries[key] = Expectation(add, delete, stamp)

    def lower(self, key: str, add: int, delete: int) -> None:
        """``LowerExpectations``: subtract; no-op when there is no entry."""
        self.observe([(key, add, delete)])

    def observe(self, observations: Iterable[tuple[str, int, int]]) -> None:
        """Lower many entries: each ``(key, creates_seen, deletes_seen)``; missing keys no-op."""
        with self._lock:
            for key, add, delete in observations:
                entry = self._entries.get(key)
                if entry is not None:
                    self._entries[key] = lowered(entry, add, delete)

    def creation_observed(self, key: str) -> None:
        self.lower(key, 1, 0)

    def deletion_observed(self, key: str) -> None:
        self.lower(key, 0, 1)

    def satisfied(self, key: str, now: float | None = None) -> bool:
        """``SatisfiedExpectations`` at ``now`` (default: the clock)."""
        at = self.clock.now() if now is None else now
        return satisfied(self.get(key), at, self.timeout)

    def delete(self, key: str) -> None:
        """``DeleteExpectations``."""
        with self._lock:
            self._entries.pop(key, None)
