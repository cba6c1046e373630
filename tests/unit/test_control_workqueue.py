"""The in-memory reference workqueue: client-go semantics (spec §g.3) plus worker leases."""

from __future__ import annotations

import threading

import pytest

from shared.control.clock import FakeClock
from shared.control.workqueue import InMemoryWorkQueue


def make(lease_seconds: float = 10.0) -> tuple[InMemoryWorkQueue, FakeClock]:
    clock = FakeClock()
    return InMemoryWorkQueue(clock, lease_seconds=lease_seconds), clock


def check_invariants(q: InMemoryWorkQueue) -> None:
    s = q.state()
    assert len(set(s.queue)) == len(s.queue), "a key is queued twice"
    assert set(s.queue) == s.dirty - s.processing, "queue != dirty - processing"


def test_add_deduplicates_a_waiting_key() -> None:
    q, _ = make()
    assert q.add(["a", "b", "a"]) == 2
    assert q.add(["a"]) == 0
    assert q.len() == 2
    check_invariants(q)


def test_keys_are_handed_out_in_fifo_order() -> None:
    q, _ = make()
    q.add(["c", "a", "b"])
    assert [q.try_get("w").key for _ in range(3)] == ["c", "a", "b"]  # type: ignore[union-attr]
    assert q.try_get("w") is None


def test_get_moves_the_key_from_dirty_to_processing() -> None:
    q, _ = make()
    q.add(["a"])
    lease = q.try_get("w1")
    assert lease is not None and lease.key == "a" and lease.worker == "w1"
    s = q.state()
    assert s.processing == {"a"} and s.dirty == frozenset() and q.len() == 0


def test_a_key_being_processed_is_not_handed_to_a_second_worker() -> None:
    q, _ = make()
    q.add(["a"])
    assert q.try_get("w1") is not None
    q.add(["a"])
    assert q.len() == 0
    assert q.try_get("w2") is None
    check_invariants(q)


def test_a_key_added_during_processing_is_handed_out_after_done() -> None:
    q, _ = make()
    q.add(["a"])
    first = q.try_get("w1")
    assert first is not None
    q.add(["a"])
    q.add(["a"])  # still one dirty entry
    assert q.done(first)
    assert q.len() == 1
    second = q.try_get("w2")
    assert second is not None and second.key == "a" and second.token != first.token
    assert q.done(second)
    assert q.try_get("w1") is None


def test_done_without_readd_forgets_the_key() -> None:
    q, _ = make()
    q.add(["a"])
    lease = q.try_get("w")
    assert lease is not None and q.done(lease)
    assert q.state().processing == frozenset() and q.len() == 0


def test_add_rejects_a_bare_string() -> None:
    q, _ = make()
    with pytest.raises(TypeError):
        q.add("abc")


def test_add_after_zero_or_negative_adds_now() -> None:
    q, _ = make()
    q.add_after("a", 0)
    q.add_after("b", -1)
    assert q.len() == 2


def test_add_after_holds_the_key_until_it_is_due() -> None:
    q, clock = make()
    q.add_after("a", 2.0)
    assert q.try_get("w") is None and q.len() == 0
    clock.advance(1.999)
    assert q.try_get("w") is None
    clock.advance(0.001)
    lease = q.try_get("w")
    assert lease is not None and lease.key == "a"


def test_add_after_a_duplicate_keeps_the_earlier_time() -> None:
    q, clock = make()
    q.add_after("a", 10.0)
    q.add_after("a", 1.0)
    q.add_after("a", 5.0)
    assert len(q.state().waiting) == 1
    clock.advance(1.0)
    lease = q.try_get("w")
    assert lease is not None and q.done(lease)
    clock.advance(10.0)
    assert q.try_get("w") is None  # the later entries were merged, not kept


def test_a_due_key_that_is_already_queued_is_deduplicated() -> None:
    q, clock = make()
    q.add(["a"])
    q.add_after("a", 1.0)
    clock.advance(1.0)
    assert q.try_get("w") is not None
    assert q.try_get("w") is None
    assert q.stats().adds_total == 1


def test_due_keys_are_added_in_ready_order() -> None:
    q, clock = make()
    q.add_after("late", 3.0)
    q.add_after("early", 1.0)
    q.add_after("mid", 2.0)
    clock.advance(5)
    keys = [q.try_get("w") for _ in range(3)]
    assert [lease.key for lease in keys if lease] == ["early", "mid", "late"]


def test_add_rate_limited_backs_off_exponentially_per_key() -> None:
    q, clock = make()
    assert q.add_rate_limited("a") == pytest.approx(0.005)
    assert q.add_rate_limited("a") == pytest.approx(0.010)
    assert q.add_rate_limited("a") == pytest.approx(0.020)
    assert q.num_requeues("a") == 3
    assert q.try_get("w") is None
    clock.advance(0.005)  # the earliest of the three adds wins
    assert q.try_get("w") is not None


def test_forget_resets_the_requeue_count() -> None:
    q, _ = make()
    q.add_rate_limited("a")
    q.add_rate_limited("a")
    q.forget("a")
    assert q.num_requeues("a") == 0
    assert q.add_rate_limited("a") == pytest.approx(0.005)


def test_retries_are_counted_for_every_add_after() -> None:
    q, _ = make()
    q.add_after("a", 0)
    q.add_after("b", 1)
    q.add_rate_limited("c")
    assert q.stats().retries_total == 3


def test_an_expired_lease_is_treated_as_done_and_handed_out_again() -> None:
    q, clock = make(lease_seconds=10)
    q.add(["a", "b"])
    dead = q.try_get("dead")
    assert dead is not None and dead.key == "a"
    clock.advance(10)
    again = q.try_get("alive")
    assert again is not None and again.key == "a"  # ahead of "b"
    assert again.token != dead.token
    assert not q.done(dead)  # the dead worker's late done is stale
    assert q.state().processing == {"a"}
    assert q.done(again)
    stats = q.stats()
    assert (stats.reclaimed_total, stats.stale_done_total) == (1, 1)


def test_a_reclaimed_key_that_was_readded_is_queued_once() -> None:
    q, clock = make(lease_seconds=1)
    q.add(["a"])
    assert q.try_get("dead") is not None
    q.add(["a"])
    clock.advance(1)
    assert q.try_get("w") is not None
    assert q.try_get("w") is None
    check_invariants(q)


def test_renew_keeps_the_lease() -> None:
    q, clock = make(lease_seconds=10)
    q.add(["a"])
    lease = q.try_get("w")
    assert lease is not None
    clock.advance(9)
    renewed = q.renew(lease)
    assert renewed is not None and renewed.deadline_ms > lease.deadline_ms
    clock.advance(9)
    assert q.try_get("other") is None
    assert q.done(renewed)


def test_renew_of_a_lost_lease_fails() -> None:
    q, clock = make(lease_seconds=1)
    q.add(["a"])
    lease = q.try_get("w")
    assert lease is not None
    clock.advance(1)
    assert q.try_get("other") is not None
    assert q.renew(lease) is None


def test_done_after_the_deadline_but_before_a_reclaim_still_counts() -> None:
    q, clock = make(lease_seconds=1)
    q.add(["a"])
    lease = q.try_get("slow")
    assert lease is not None
    clock.advance(5)
    assert q.done(lease)
    assert q.try_get("w") is None


def test_lease_carries_the_position_and_enqueue_time() -> None:
    clock = FakeClock()
    q = InMemoryWorkQueue(clock, position_source=lambda: "42-0")
    q.add(["a", "b"])
    clock.advance(2)
    lease = q.try_get("w")
    assert lease is not None and lease.position == "42-0"
    assert lease.queue_seconds == pytest.approx(2.0)
    other = q.try_get("w", position="43-1")
    assert other is not None and other.position == "43-1"


def test_remove_all_drops_every_trace_of_a_key() -> None:
    q, _ = make()
    q.add(["a", "b"])
    q.add_after("a", 5)
    q.add_rate_limited("a")
    q.remove_all("a")
    s = q.state()
    assert "a" not in s.queue and "a" not in s.dirty and "a" not in s.waiting
    assert q.num_requeues("a") == 0
    lease = q.try_get("w")
    assert lease is not None and lease.key == "b"
    q.add(["b"])
    q.remove_all("b")  # while processing: its done becomes stale
    assert not q.done(lease)
    check_invariants(q)


def test_shutdown_ignores_adds_but_hands_out_what_is_queued() -> None:
    q, _ = make()
    q.add(["a"])
    q.shutdown()
    assert q.shutting_down()
    assert q.add(["b"]) == 0
    q.add_after("c", 0)
    assert q.len() == 1
    lease = q.get("w", block_seconds=5)
    assert lease is not None and lease.key == "a"
    assert q.get("w", block_seconds=5) is None  # returns at once: shut down and empty


def test_done_during_shutdown_still_queues_a_dirty_key() -> None:
    q, _ = make()
    q.add(["a"])
    lease = q.try_get("w")
    assert lease is not None
    q.add(["a"])
    q.shutdown()
    assert q.done(lease)
    assert q.try_get("w") is not None


def test_delayed_keys_are_not_promoted_after_shutdown() -> None:
    q, clock = make()
    q.add_after("a", 1)
    q.shutdown()
    clock.advance(2)
    assert q.try_get("w") is None


def test_shutdown_with_drain_waits_for_processing_keys() -> None:
    q = InMemoryWorkQueue(lease_seconds=30)
    q.add(["a"])
    lease = q.get("w")
    assert lease is not None
    assert not q.shutdown_with_drain(timeout=0.05)
    threading.Timer(0.05, q.done, args=(lease,)).start()
    assert q.shutdown_with_drain(timeout=5)


def test_blocking_get_wakes_on_add() -> None:
    q = InMemoryWorkQueue()
    threading.Timer(0.05, q.add, args=(["a"],)).start()
    lease = q.get("w", block_seconds=5)
    assert lease is not None and lease.key == "a"


def test_blocking_get_times_out() -> None:
    q = InMemoryWorkQueue()
    assert q.get("w", block_seconds=0.01) is None


def test_stats_report_depth_and_counters() -> None:
    q, clock = make()
    q.add(["a", "b", "c"])
    lease = q.try_get("w")
    assert lease is not None
    clock.advance(3)
    stats = q.stats()
    assert (stats.depth, stats.dirty, stats.processing) == (2, 2, 1)
    assert (stats.adds_total, stats.gets_total) == (3, 1)
    assert stats.longest_running_seconds == pytest.approx(3.0)
    q.done(lease)
    assert q.stats().done_total == 1


def test_blocking_get_with_a_fake_clock_times_out_in_real_time() -> None:
    q, _ = make()
    q.add_after("a", 60)  # due only in fake time
    assert q.get("w", block_seconds=0.02) is None
