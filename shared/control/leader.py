"""The in-memory twin of ``shared.store.lease.RedisLeaderLease``: one holder per role.

A ``LeaseBoard`` stands for the shared store (one per test or process); each contender owns
an ``InMemoryLeaderLease`` on it. A lease lapses ``ttl`` seconds after it was last taken or
renewed, and another contender may then take it — the "one active watcher, the others stand
by and take over within 10 s" rule.
"""

from __future__ import annotations

import threading

from shared.control.clock import Clock, RealClock

DEFAULT_TTL_SECONDS = 10.0


class LeaseBoard:
    """Role → (holder, expiry) shared by every contender; thread-safe."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock: Clock = clock or RealClock()
        self._held: dict[str, tuple[str, float]] = {}
        self.lock = threading.Lock()

    def holder(self, role: str) -> str | None:
        """The live holder of ``role`` (caller holds ``lock``)."""
        entry = self._held.get(role)
        if entry is None or entry[1] <= self.clock.now():
            return None
        return entry[0]

    def put(self, role: str, holder: str, ttl: float) -> None:
        self._held[role] = (holder, self.clock.now() + ttl)

    def drop(self, role: str) -> None:
        self._held.pop(role, None)


class InMemoryLeaderLease:
    """Implements ``shared.control.protocols.LeaderLease`` over a ``LeaseBoard``."""

    def __init__(self, board: LeaseBoard, role: str, holder: str,
                 ttl_seconds: float = DEFAULT_TTL_SECONDS) -> None:
        self.board, self.role, self.holder, self.ttl = board, role, holder, ttl_seconds

    def acquire(self) -> bool:
        with self.board.lock:
            current = self.board.holder(self.role)
            if current not in (None, self.holder):
                return False
            self.board.put(self.role, self.holder, self.ttl)
            return True

    def renew(self) -> bool:
        with self.board.lock:
            if self.board.holder(self.role) != self.holder:
                return False
            self.board.put(self.role, self.holder, self.ttl)
            return True

    def release(self) -> bool:
        with self.board.lock:
            if self.board.holder(self.role) != self.holder:
                return False
            self.board.drop(self.role)
            return True

    def current_holder(self) -> str | None:
        with self.board.lock:
            return self.board.holder(self.role)
