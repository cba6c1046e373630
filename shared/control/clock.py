"""Clocks, injected wherever a decision depends on time (habit 3: time is an input).

``Clock.now()`` is epoch seconds as a float. Production code gets ``RealClock``; tests get
``FakeClock`` and move it explicitly, so no test ever sleeps to wait for logic.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

#: An arbitrary, fixed starting point for fake clocks (2023-11-14T22:13:20Z).
FAKE_EPOCH = 1_700_000_000.0


class Clock(Protocol):
    """A source of the current time."""

    def now(self) -> float:
        """Seconds since the Unix epoch."""
        ...


class RealClock:
    """The wall clock (``time.time``)."""

    def now(self) -> float:
        return time.time()


class FakeClock:
    """A clock that only moves when told to; safe to share between threads."""

    def __init__(self, start: float = FAKE_EPOCH) -> None:
        self._now = float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def set(self, t: float) -> None:
        """Jump to ``t`` (epoch seconds); jumping backwards is allowed, as real clocks do."""
        with self._lock:
            self._now = float(t)

    def advance(self, seconds: float) -> float:
        """Move forward by ``seconds`` and return the new time."""
        with self._lock:
            self._now += seconds
            return self._now
