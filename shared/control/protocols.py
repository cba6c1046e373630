"""The seams between the controller and its state: queue, expectations, backoff, leader lease.

Each Protocol has two implementations — the in-memory reference in ``shared.control`` and the
Redis one in ``shared.store`` — held to one contract suite (tests/integration/*_contract.py).
Times in ``Lease``/``QueueStats`` are milliseconds on the *queue's* clock (Redis ``TIME`` for
the Redis queue), so compare them only with each other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from shared.control.backoff import BackoffEntry, BackoffState
from shared.control.expectations import Expectation

NO_POSITION = "0-0"  # the position of an empty event log


@dataclass(frozen=True)
class Lease:
    """One key handed to one worker until ``done`` or until ``deadline_ms`` passes.

    ``position`` is the newest event-log id when the key was handed out: the worker must read
    state at least that new before deciding (ARCHITECTURE, "Reading consistently ...").
    """

    key: str
    worker: str
    token: str  # identifies this hand-out; a done/renew with an older token is stale
    enqueued_ms: int  # when the key became dirty (queue-wait metric starts here)
    leased_ms: int  # when it was handed out (work-duration metric starts here)
    deadline_ms: int  # the lease ends here unless renewed
    position: str = NO_POSITION
    # the key's previous hand-out ended by its lease running out (the holder died or stalled
    # without ``done``), as a message broker flags a redelivered message: whatever that holder
    # began may be half done
    redelivered: bool = False
    # the nodes hinted for this hand-out (``add_nodes``), taken from the key atomically when
    # it was handed out, in name order
    nodes: tuple[str, ...] = ()
    # whether this hand-out must be a full sync: a plain ``add``, ``add_after`` or
    # ``add_rate_limited`` was pending, the lease is redelivered, or there were hints the
    # queue could not keep (more than ``MAX_NODE_HINTS``); False: a sync of ``nodes`` alone
    # (none: of no node, its status) is enough
    full: bool = True

    @property
    def queue_seconds(self) -> float:
        """How long the key waited in the queue before this hand-out."""
        return max(0, self.leased_ms - self.enqueued_ms) / 1000.0


@dataclass(frozen=True)
class QueueStats:
    """Gauges and counters for Prometheus (client-go names in comments)."""

    depth: int  # workqueue_depth: queued, not processing
    dirty: int
    processing: int
    waiting: int  # delayed adds not yet due
    adds_total: int  # workqueue_adds_total
    retries_total: int  # workqueue_retries_total (every add_after / add_rate_limited)
    gets_total: int
    done_total: int
    stale_done_total: int  # done() with a lease that was no longer current
    reclaimed_total: int  # leases that expired and were handed out again
    unfinished_work_seconds: float  # workqueue_unfinished_work_seconds
    longest_running_seconds: float  # workqueue_longest_running_processor_seconds
    shutting_down: bool


@dataclass(frozen=True)
class QueueState:
    """A consistent picture of the three client-go sets plus the delayed keys (for tests/CLI)."""

    queue: tuple[str, ...]
    dirty: frozenset[str]
    processing: frozenset[str]
    waiting: Mapping[str, int] = field(default_factory=dict)  # key → ready time (ms)


class WorkQueue(Protocol):
    """A client-go rate-limited delaying workqueue (spec §g.3) with worker leases."""

    def add(self, keys: Sequence[str]) -> int:
        """Add keys (deduplicated) for a full sync; returns how many were newly marked
        dirty."""
        ...

    def add_nodes(self, hints: Mapping[str, Sequence[str]]) -> int:
        """Add each key as ``add`` does, with node hints: the key's next hand-out carries
        these nodes (``Lease.nodes``) and is not a full sync unless a plain add is pending
        for it too (or it holds more than ``MAX_NODE_HINTS`` nodes). An empty node list asks
        for a sync of no node (its status): a hand-out with no ``nodes`` and not ``full``.
        Returns how many keys were newly marked dirty."""
        ...

    def get(self, worker: str, block_seconds: float = 0.0,
            wait_first: float | None = None) -> Lease | None:
        """Hand out the next key, waiting up to ``block_seconds``; None on timeout/shutdown.
        ``wait_first``: the queue was just found empty (``done_then_get``) with nothing due
        for that many seconds (-1: nothing due); an implementation may wait before its
        first look."""
        ...

    def renew(self, lease: Lease) -> Lease | None:
        """Extend a current lease; None when it is no longer ours."""
        ...

    def done(self, lease: Lease) -> bool:
        """Finish a key; False (and no effect) when the lease is stale."""
        ...

    def done_then_get(self, lease: Lease, worker: str) -> tuple[bool, Lease | None, float]:
        """``done``, then one non-blocking ``get`` for ``worker``, atomically: (done, the next
        lease or None, seconds until the next delayed key or lease deadline when none, -1:
        none)."""
        ...

    def add_after(self, key: str, seconds: float) -> None: ...

    def add_rate_limited(self, key: str) -> float:
        """``add_after(key, when(key))``; returns the delay chosen (seconds)."""
        ...

    def forget(self, key: str) -> None: ...

    def num_requeues(self, key: str) -> int: ...

    def len(self) -> int: ...

    def remove_all(self, key: str) -> None:
        """Drop every trace of ``key`` (queued, dirty, delayed, failures, lease)."""
        ...

    def current_tokens(self, keys: Sequence[str]) -> dict[str, str]:
        """The lease token of each of ``keys`` being processed (a lease past its deadline
        counts until a ``get`` reclaims it); keys not held are absent."""
        ...

    def shutdown(self) -> None: ...

    def shutting_down(self) -> bool: ...

    def stats(self) -> QueueStats: ...

    def state(self) -> QueueState: ...


class ExpectationsStore(Protocol):
    """ControllerExpectations (spec §g.1)."""

    def get(self, key: str) -> Expectation | None: ...

    def set(self, key: str, add: int, delete: int, now: float) -> None: ...

    def lower(self, key: str, add: int, delete: int) -> None: ...

    def observe(self, observations: Iterable[tuple[str, int, int]]) -> None:
        """Lower many entries at once: ``(key, creates_seen, deletes_seen)`` each."""
        ...

    def satisfied(self, key: str, now: float) -> bool: ...

    def delete(self, key: str) -> None: ...


class BackoffStore(Protocol):
    """Failed-pod backoff entries (spec §g.2); the decisions are in shared.control.backoff."""

    def get_many(self, keys: Iterable[str]) -> dict[str, BackoffEntry]: ...

    def put_many(self, entries: Mapping[str, BackoffState]) -> None: ...

    def gc(self, now: float) -> int: ...

    def delete_prefix(self, ds_uid: str) -> int: ...


class LeaderLease(Protocol):
    """One active holder per role; others stand by and take over when the lease lapses."""

    holder: str

    def acquire(self) -> bool:
        """Take the lease if free, or extend it if already ours; True when we hold it."""
        ...

    def renew(self) -> bool:
        """Extend the lease only if we still hold it."""
        ...

    def release(self) -> bool:
        """Give the lease up if we hold it."""
        ...

    def current_holder(self) -> str | None: ...
