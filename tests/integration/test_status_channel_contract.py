"""One contract for both status channels: the status stream in Redis (a consumer group) and
the in-memory twin. Each message goes to one consumer; one not done is handed to another
consumer once idle long enough; a message done is never handed out again."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from shared.daemonset.messages import InMemoryStatusChannel, StatusChannel, StatusMessage
from shared.store.keys import Keys
from shared.store.statuschannel import RedisStatusChannel
from tests.integration.contract import connect, wait_for

Channels = Callable[[], StatusChannel]


@pytest.fixture(params=["memory", "redis"])
def channels(request: pytest.FixtureRequest) -> Channels:
    """Every call: another handle on the same channel (as separate processes have)."""
    if request.param == "memory":
        shared = InMemoryStatusChannel()
        return lambda: shared
    url: str = request.getfixturevalue("redis_url")
    keys = Keys(request.getfixturevalue("prefix"))
    return lambda: RedisStatusChannel(connect(url), keys)


def _msg(key: str, position: str) -> StatusMessage:
    return StatusMessage(key=key, status={"numberReady": 1}, uid="u", generation=1,
                         observe=True, position=position, unavailable={"NoPod": 2})


def test_a_published_message_reaches_one_consumer_once(channels: Channels) -> None:
    publisher, a, b = channels(), channels(), channels()
    for ch in (a, b):
        ch.ensure()
    publisher.publish(_msg("ns/x", "5-0"))
    publisher.publish(_msg("ns/y", "6-0"))
    got = a.receive("a", 10, None, 60_000)
    assert [r.message for r in got] == [_msg("ns/x", "5-0"), _msg("ns/y", "6-0")]
    assert b.receive("b", 10, None, 60_000) == []  # held by a, not idle long enough
    a.done([r.id for r in got])
    assert a.receive("a", 10, None, 0) == [] and b.receive("b", 10, None, 0) == []


def test_a_message_left_undone_is_claimed_by_another_consumer(channels: Channels) -> None:
    publisher, a, b = channels(), channels(), channels()
    a.ensure()
    publisher.publish(_msg("ns/x", "5-0"))
    [first] = a.receive("a", 10, None, 60_000)  # a dies holding it
    [again] = wait_for(lambda: b.receive("b", 10, None, 1))
    assert (again.id, again.message) == (first.id, first.message)
    b.done([again.id])
    assert a.receive("a", 10, None, 0) == []


def test_count_bounds_a_batch(channels: Channels) -> None:
    publisher, a = channels(), channels()
    a.ensure()
    for i in range(5):
        publisher.publish(_msg(f"ns/d{i}", f"{i + 1}-0"))
    first = a.receive("a", 3, None, 60_000)
    rest = a.receive("a", 3, None, 60_000)
    assert [r.message.key for r in first + rest if r.message] == [f"ns/d{i}" for i in range(5)]
