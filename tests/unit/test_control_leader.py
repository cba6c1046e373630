"""The in-memory leader lease: one holder per role, take-over after the TTL."""

from __future__ import annotations

from shared.control.clock import FakeClock
from shared.control.leader import InMemoryLeaderLease, LeaseBoard


def test_one_holder_others_stand_by_and_take_over_after_the_ttl() -> None:
    clock = FakeClock()
    board = LeaseBoard(clock)
    a = InMemoryLeaderLease(board, "watcher", "a", ttl_seconds=10)
    b = InMemoryLeaderLease(board, "watcher", "b", ttl_seconds=10)
    assert a.acquire() and not b.acquire()
    clock.advance(9)
    assert a.renew() and not b.renew()
    clock.advance(9.9)
    assert not b.acquire()
    clock.advance(0.1)  # a stopped renewing 10 s ago
    assert b.acquire() and b.current_holder() == "b"
    assert not a.renew() and not a.release()


def test_release_lets_a_stand_by_take_over_at_once() -> None:
    board = LeaseBoard(FakeClock())
    a = InMemoryLeaderLease(board, "watcher", "a")
    b = InMemoryLeaderLease(board, "watcher", "b")
    assert a.acquire()
    assert a.release() and board_holder(board) is None
    assert b.acquire()


def test_roles_are_independent() -> None:
    board = LeaseBoard(FakeClock())
    assert InMemoryLeaderLease(board, "watcher", "a").acquire()
    assert InMemoryLeaderLease(board, "gc", "b").acquire()


def board_holder(board: LeaseBoard) -> str | None:
    with board.lock:
        return board.holder("watcher")
