"""One contract for both leader leases: in memory and in Redis (SET NX PX)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from shared.control.leader import InMemoryLeaderLease, LeaseBoard
from shared.control.protocols import LeaderLease
from shared.store.keys import Keys
from shared.store.lease import RedisLeaderLease
from tests.integration.contract import connect, wait_for

Contender = Callable[[str, float], LeaderLease]


@pytest.fixture(params=["memory", "redis"])
def contender(request: pytest.FixtureRequest) -> Contender:
    if request.param == "memory":
        board = LeaseBoard()
        return lambda holder, ttl: InMemoryLeaderLease(board, "watcher", holder, ttl)
    url, keys = request.getfixturevalue("redis_url"), Keys(request.getfixturevalue("prefix"))
    return lambda holder, ttl: RedisLeaderLease(connect(url), keys, "watcher", holder, ttl)


def test_one_holder_while_the_others_stand_by(contender: Contender) -> None:
    a, b = contender("a", 10), contender("b", 10)
    assert a.acquire() and not b.acquire()
    assert a.acquire()  # re-acquiring our own lease extends it
    assert a.current_holder() == b.current_holder() == "a"
    assert a.renew() and not b.renew() and not b.release()


def test_a_stand_by_takes_over_when_the_holder_stops_renewing(contender: Contender) -> None:
    a, b = contender("a", 0.3), contender("b", 0.3)
    assert a.acquire()
    start = time.monotonic()
    wait_for(b.acquire, timeout=5)
    assert 0.2 <= time.monotonic() - start < 2.0
    assert b.current_holder() == "b"
    assert not a.renew()


def test_release_hands_over_at_once(contender: Contender) -> None:
    a, b = contender("a", 10), contender("b", 10)
    assert a.acquire() and a.release()
    assert a.current_holder() is None
    assert b.acquire()
