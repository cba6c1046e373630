"""One contract for both expectations stores (spec §g.1): in memory and in Redis."""

from __future__ import annotations

import pytest

from shared.control.expectations import ControllerExpectations, Expectation
from shared.control.protocols import ExpectationsStore
from shared.store.expectations import RedisExpectations
from shared.store.keys import Keys
from tests.integration.contract import Counting, connect

T0 = 1_700_000_000.0


@pytest.fixture(params=["memory", "redis"])
def store(request: pytest.FixtureRequest) -> ExpectationsStore:
    if request.param == "memory":
        return ControllerExpectations()
    client = connect(request.getfixturevalue("redis_url"))
    return RedisExpectations(client, Keys(request.getfixturevalue("prefix")))


def test_no_entry_is_satisfied(store: ExpectationsStore) -> None:
    assert store.get("ns/ds") is None
    assert store.satisfied("ns/ds", T0)


def test_set_replaces_the_entry_with_a_new_timestamp(store: ExpectationsStore) -> None:
    store.set("ns/ds", 3, 1, T0)
    store.set("ns/ds", 2, 0, T0 + 10)
    assert store.get("ns/ds") == Expectation(2, 0, T0 + 10)


def test_pending_creates_and_deletes_are_unsatisfied_until_observed(
        store: ExpectationsStore) -> None:
    store.set("ns/ds", 2, 1, T0)
    assert not store.satisfied("ns/ds", T0)
    store.lower("ns/ds", 2, 0)
    assert not store.satisfied("ns/ds", T0)
    store.lower("ns/ds", 0, 1)
    assert store.satisfied("ns/ds", T0)


def test_lower_keeps_the_timestamp_and_may_go_negative(store: ExpectationsStore) -> None:
    store.set("ns/ds", 1, 0, T0 + 0.25)
    store.lower("ns/ds", 3, 2)
    assert store.get("ns/ds") == Expectation(-2, -2, T0 + 0.25)


def test_lower_and_observe_without_an_entry_are_noops(store: ExpectationsStore) -> None:
    store.lower("ns/ds", 1, 1)
    store.observe([("ns/ds", 1, 0), ("ns/other", 0, 1)])
    assert store.get("ns/ds") is None and store.get("ns/other") is None


def test_observe_lowers_many_entries_in_one_call(store: ExpectationsStore) -> None:
    for i in range(50):
        store.set(f"ns/ds{i}", 100, 100, T0)
    events = [(f"ns/ds{i % 50}", 1, 1) for i in range(5000)]  # thousands of pod events
    store.observe(events)
    assert all(store.get(f"ns/ds{i}") == Expectation(0, 0, T0) for i in range(50))
    assert store.satisfied("ns/ds7", T0)


def test_expectations_expire_after_five_minutes(store: ExpectationsStore) -> None:
    store.set("ns/ds", 1, 0, T0)
    assert not store.satisfied("ns/ds", T0 + 300)
    assert store.satisfied("ns/ds", T0 + 300.001)
    assert store.get("ns/ds") == Expectation(1, 0, T0)


def test_delete_removes_the_entry(store: ExpectationsStore) -> None:
    store.set("ns/ds", 1, 0, T0)
    store.delete("ns/ds")
    assert store.get("ns/ds") is None
    store.delete("ns/ds")


def test_redis_observe_is_one_round_trip(redis_url: str, prefix: str,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    client = connect(redis_url)
    store = RedisExpectations(client, Keys(prefix))
    store.set("ns/ds", 5000, 0, T0)
    store.lower("ns/ds", 1, 0)  # loads the script
    counting = Counting(client, monkeypatch)
    store.observe([("ns/ds", 1, 0)] * 4000 + [(f"ns/x{i}", 1, 0) for i in range(1000)])
    assert counting.calls == ["EVALSHA"]
    assert store.get("ns/ds") == Expectation(999, 0, T0)
