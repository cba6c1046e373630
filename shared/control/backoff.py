"""Failed-pod backoff, ``flowcontrol.Backoff`` (spec §g.2), production parameters 1 s..900 s.

Keys are ``<ds uid>/<observedGeneration>/<node>``. The pure functions decide over one
``BackoffEntry``; ``Backoff`` is the in-memory store (twin of
``shared.store.backoff.RedisBackoff``) and also offers client-go's ``next``/``get``/
``is_in_backoff_since_update`` with an injected clock.

* expired ⇔ ``now - last_update > 2·max``;
* in backoff since update ⇔ entry exists, not expired, ``now - last_update < delay``;
* next: missing or expired → ``initial``, else ``min(2·delay, max)``; ``last_update = now``;
* GC drops entries with ``now - last_update > 2·max`` (30 minutes).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from shared.control.clock import Clock, RealClock

INITIAL_DELAY = 1.0  # seconds
MAX_DELAY = 900.0  # seconds (15 minutes)
GC_INTERVAL = 60.0  # seconds: the controller runs GC every minute


class BackoffState(Protocol):
    """Anything carrying a delay and a last update (e.g. the planner's own entry type)."""

    @property
    def delay(self) -> float: ...

    @property
    def last_update(self) -> float: ...


@dataclass(frozen=True)
class BackoffEntry:
    """The backoff of one key: the current delay and when it was last advanced (seconds)."""

    delay: float
    last_update: float


def has_expired(entry: BackoffState, now: float, max_delay: float = MAX_DELAY) -> bool:
    """Decides ``hasExpired``: not updated for more than twice the maximum delay."""
    return now - entry.last_update > 2 * max_delay


def is_in_backoff_since_update(
    entry: BackoffState | None, now: float, max_delay: float = MAX_DELAY
) -> bool:
    """Decides ``IsInBackOffSinceUpdate(key, now)``."""
    if entry is None or has_expired(entry, now, max_delay):
        return False
    return now - entry.last_update < entry.delay


def next_entry(
    entry: BackoffState | None,
    now: float,
    initial: float = INITIAL_DELAY,
    max_delay: float = MAX_DELAY,
) -> BackoffEntry:
    """Decides ``Next(key, now)``: start at ``initial`` or double (capped); stamp ``now``."""
    if entry is None or has_expired(entry, now, max_delay):
        return BackoffEntry(initial, now)
    return BackoffEntry(min(entry.delay * 2, max_delay), now)


def delay_of(entry: BackoffState | None) -> float:
    """Decides ``Get(key)``: the current delay, or 0 without an entry."""
    return 0.0 if entry is None else entry.delay


def collectable(entry: BackoffState, now: float, max_delay: float = MAX_DELAY) -> bool:
    """Decides whether GC drops the entry (``now - last_update > 2·max``)."""
    return has_expired(entry, now, max_delay)


def key_prefix(ds_uid: str) -> str:
    """The prefix shared by every backoff key of one DaemonSet."""
    return ds_uid + "/"


class Backoff:
    """In-memory backoff store; thread-safe. ``now`` defaults to the injected clock."""

    def __init__(
        self,
        clock: Clock | None = None,
        initial: float = INITIAL_DELAY,
        max_delay: float = MAX_DELAY,
    ) -> None:
        self.clock: Clock = clock or RealClock()
        self.initial, self.max_delay = initial, max_delay
        self._entries: dict[str, BackoffEntry] = {}
        self._lock = threading.Lock()

    # ---- store (the BackoffStore protocol) ----------------------------------------------

    def get_many(self, keys: Iterable[str]) -> dict[str, BackoffEntry]:
        with self._lock:
            return {k: self._entries[k] for k in keys if k in self._entries}

    def put_many(self, entries: Mapping[str, BackoffState]) -> None:
        with self._lock:
            for k, e in entries.items():
                self._entries[k] = BackoffEntry(float(e.delay), float(e.last_update))

    def gc(self, now: float | None = None) -> int:
        """Drop entries older than twice the maximum delay; returns how many."""
        at = self.clock.now() if now is None else now
        with self._lock:
            old = [k for k, e in self._entries.items() if collectable(e, at, self.max_delay)]
            for k in old:
                del self._entries[k]
        return len(old)

    def delete_prefix(self, ds_uid: str) -> int:
        """Drop every entry of one DaemonSet; returns how many."""
        p = key_prefix(ds_uid)
        with self._lock:
            gone = [k for k in self._entries if k.startswith(p)]
            for k in gone:
                del self._entries[k]
        return len(gone)

    # ---- client-go's flowcontrol.Backoff API ----------------------------------------------

    def get(self, key: str) -> float:
        with self._lock:
            return delay_of(self._entries.get(key))

    def next(self, key: str, now: float | None = None) -> BackoffEntry:
        at = self.clock.now() if now is None else now
        with self._lock:
            entry = next_entry(self._entries.get(key), at, self.initial, self.max_delay)
            self._entries[key] = entry
        return entry

    def is_in_backoff_since_update(self, key: str, now: float | None = None) -> bool:
        at = self.clock.now() if now is None else now
        with self._lock:
            return is_in_backoff_since_update(self._entries.get(key), at, self.max_delay)
