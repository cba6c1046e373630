"""client-go's default controller rate limiter (spec §g.3, AddRateLimited)."""

from __future__ import annotations

import pytest

from shared.control import ratelimit
from shared.control.clock import FakeClock


def test_exponential_delay_starts_at_5ms_and_doubles() -> None:
    assert [ratelimit.exponential_delay(n) for n in range(5)] == pytest.approx(
        [0.005, 0.010, 0.020, 0.040, 0.080]
    )


def test_exponential_delay_is_capped_at_1000_seconds() -> None:
    assert ratelimit.exponential_delay(17) == pytest.approx(655.36)
    assert ratelimit.exponential_delay(18) == 1000.0
    assert ratelimit.exponential_delay(5000) == 1000.0


def test_item_limiter_counts_each_when_and_forget_resets() -> None:
    lim = ratelimit.ItemExponentialFailureRateLimiter()
    assert [lim.when("a") for _ in range(3)] == pytest.approx([0.005, 0.01, 0.02])
    assert lim.num_requeues("a") == 3
    assert lim.num_requeues("b") == 0
    assert lim.when("b") == pytest.approx(0.005)  # per item
    lim.forget("a")
    assert lim.num_requeues("a") == 0
    assert lim.when("a") == pytest.approx(0.005)


def test_bucket_allows_a_burst_of_100_then_10_per_second() -> None:
    clock = FakeClock()
    lim = ratelimit.BucketRateLimiter(clock)
    assert [lim.when(f"k{i}") for i in range(100)] == [0.0] * 100
    assert lim.when("x") == pytest.approx(0.1)
    assert lim.when("y") == pytest.approx(0.2)  # reservations queue up
    clock.advance(1.0)  # 10 tokens refilled, 2 owed
    assert [lim.when("z") for _ in range(8)] == [0.0] * 8
    assert lim.when("z") == pytest.approx(0.1)


def test_bucket_refills_no_more_than_burst() -> None:
    clock = FakeClock()
    lim = ratelimit.BucketRateLimiter(clock)
    lim.when("a")
    clock.advance(3600)
    assert [lim.when("a") for _ in range(100)] == [0.0] * 100
    assert lim.when("a") == pytest.approx(0.1)


def test_bucket_never_forgets_or_counts_requeues() -> None:
    lim = ratelimit.BucketRateLimiter(FakeClock())
    lim.when("a")
    lim.forget("a")
    assert lim.num_requeues("a") == 0


def test_reserve_is_pure() -> None:
    b0 = ratelimit.Bucket()
    b1, wait = ratelimit.reserve(b0, 10.0, qps=1.0, burst=1)
    assert (b1, wait) == (ratelimit.Bucket(0.0, 10.0), 0.0)
    b2, wait = ratelimit.reserve(b1, 10.0, qps=1.0, burst=1)
    assert wait == pytest.approx(1.0) and b2.tokens == pytest.approx(-1.0)
    assert b0 == ratelimit.Bucket()


def test_reserve_does_not_refill_when_the_clock_goes_back() -> None:
    b, _ = ratelimit.reserve(ratelimit.Bucket(), 100.0, qps=1.0, burst=1)
    b, wait = ratelimit.reserve(b, 50.0, qps=1.0, burst=1)
    assert wait == pytest.approx(1.0)


def test_default_limiter_is_the_max_of_item_and_bucket() -> None:
    clock = FakeClock()
    lim = ratelimit.default_controller_rate_limiter(clock)
    assert lim.when("a") == pytest.approx(0.005)
    assert lim.when("a") == pytest.approx(0.010)
    for i in range(98):
        lim.when(f"other{i}")
    # 100 tokens used: the next reservation waits 0.1 s, more than the item's 5 ms
    assert lim.when("b") == pytest.approx(0.1)
    assert lim.num_requeues("a") == 2
    lim.forget("a")
    assert lim.num_requeues("a") == 0
