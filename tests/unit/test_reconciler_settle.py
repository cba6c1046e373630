"""The worker's one switch from a sync's result to queue calls (``worker.settle``), as
controller-runtime's reconcileHandler: error, requeue after, success, and always Done."""

from __future__ import annotations

import pytest

from services.reconciler.sync import SyncResult
from services.reconciler.worker import settle
from shared.control.clock import FakeClock
from shared.control.workqueue import InMemoryWorkQueue

KEY = "default/agent"


@pytest.mark.parametrize(("result", "failures", "ready_in_ms"), [
    # success: forgotten, nothing waiting
    (SyncResult(KEY, ok=True), 0, None),
    # requeue after: forgotten, due after exactly that long
    (SyncResult(KEY, ok=True, requeue_after=30.0), 0, 30_000),
    # an error: AddRateLimited (the second failure in a row: 10 ms)
    (SyncResult(KEY, ok=False, error="boom"), 2, 10),
    # an error keeps the requeue it asked for too; the earlier time wins
    (SyncResult(KEY, ok=False, error="boom", requeue_after=30.0), 2, 10),
    (SyncResult(KEY, ok=False, error="boom", requeue_after=0.001), 2, 1),
    # the sync raised: AddRateLimited
    (None, 2, 10),
], ids=["success", "requeue-after", "error", "error-and-later-requeue",
        "error-and-sooner-requeue", "raised"])
def test_a_result_becomes_queue_calls_and_always_done(
        result: SyncResult | None, failures: int, ready_in_ms: int | None) -> None:
    clock = FakeClock()
    q = InMemoryWorkQueue(clock)
    q.add_rate_limited(KEY)  # the last sync of the key failed
    clock.advance(1.0)
    lease = q.try_get("w")
    assert lease is not None and lease.key == KEY and q.num_requeues(KEY) == 1

    settle(q, lease, result)

    state = q.state()
    assert KEY not in state.processing  # Done, whatever the result
    assert q.num_requeues(KEY) == failures
    if ready_in_ms is None:
        assert KEY not in state.waiting and KEY not in state.queue
    else:
        assert state.waiting[KEY] - int(clock.now() * 1000) == pytest.approx(ready_in_ms, abs=1)
