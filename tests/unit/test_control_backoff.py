"""Failed-pod backoff, flowcontrol.Backoff (spec §g.2): 1 s doubling to 900 s, GC after 30 min."""

from __future__ import annotations

from shared.control import backoff as bo
from shared.control.clock import FakeClock

KEY = "uid-1/3/node-a"


def make() -> tuple[bo.Backoff, FakeClock]:
    clock = FakeClock()
    return bo.Backoff(clock), clock


def test_next_doubles_from_one_second_to_the_cap() -> None:
    b, clock = make()
    delays = []
    for _ in range(12):
        delays.append(b.next(KEY).delay)
        clock.advance(1)
    assert delays == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 900, 900]


def test_get_is_zero_without_entry_and_the_delay_with_one() -> None:
    b, _ = make()
    assert b.get(KEY) == 0
    b.next(KEY)
    b.next(KEY)
    assert b.get(KEY) == 2


def test_in_backoff_since_update_until_the_delay_has_passed() -> None:
    b, clock = make()
    assert not b.is_in_backoff_since_update(KEY)
    b.next(KEY)
    b.next(KEY)  # delay 2 s
    assert b.is_in_backoff_since_update(KEY)
    clock.advance(1.999)
    assert b.is_in_backoff_since_update(KEY)
    clock.advance(0.001)
    assert not b.is_in_backoff_since_update(KEY)


def test_an_expired_entry_is_not_in_backoff_and_restarts_at_initial() -> None:
    b, clock = make()
    for _ in range(5):
        b.next(KEY)  # 16 s
    clock.advance(1800)
    assert b.next(KEY).delay == 32  # exactly 2·max: not expired
    clock.advance(1800.001)
    assert not b.is_in_backoff_since_update(KEY)
    assert b.next(KEY).delay == 1


def test_next_stamps_last_update_with_now() -> None:
    b, clock = make()
    clock.advance(5)
    assert b.next(KEY) == bo.BackoffEntry(1.0, clock.now())


def test_gc_drops_entries_older_than_thirty_minutes() -> None:
    b, clock = make()
    b.next("old/1/n")
    clock.advance(1000)
    b.next("young/1/n")
    clock.advance(800)
    assert b.gc() == 0  # "old" is exactly 1800 s old: kept
    clock.advance(0.5)
    assert b.gc() == 1
    assert b.get_many(["old/1/n", "young/1/n"]).keys() == {"young/1/n"}


def test_delete_prefix_drops_every_entry_of_one_daemonset() -> None:
    b, _ = make()
    for key in ("u1/1/a", "u1/2/b", "u10/1/a", "u2/1/a"):
        b.next(key)
    assert b.delete_prefix("u1") == 2
    assert sorted(b.get_many(["u1/1/a", "u1/2/b", "u10/1/a", "u2/1/a"])) == ["u10/1/a", "u2/1/a"]


def test_put_many_accepts_any_entry_shape() -> None:
    from shared.daemonset.types import BackoffEntry as PlannerEntry

    b, _ = make()
    b.put_many({"a/1/n": PlannerEntry(4.0, 10.0)})
    assert b.get_many(["a/1/n", "zzz"]) == {"a/1/n": bo.BackoffEntry(4.0, 10.0)}


def test_pure_functions() -> None:
    e = bo.BackoffEntry(8.0, 100.0)
    assert bo.next_entry(None, 5.0) == bo.BackoffEntry(1.0, 5.0)
    assert bo.next_entry(e, 101.0) == bo.BackoffEntry(16.0, 101.0)
    assert bo.next_entry(bo.BackoffEntry(600.0, 0.0), 1.0) == bo.BackoffEntry(900.0, 1.0)
    assert bo.is_in_backoff_since_update(e, 107.9)
    assert not bo.is_in_backoff_since_update(e, 108.0)
    assert not bo.is_in_backoff_since_update(None, 0.0)
    assert bo.delay_of(None) == 0.0 and bo.delay_of(e) == 8.0
    assert not bo.collectable(e, 1900.0) and bo.collectable(e, 1900.1)
