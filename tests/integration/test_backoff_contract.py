"""One contract for both failed-pod backoff stores (spec §g.2): in memory and in Redis."""

from __future__ import annotations

import pytest

from shared.control import backoff as bo
from shared.control.protocols import BackoffStore
from shared.daemonset.types import BackoffEntry as PlannerEntry
from shared.store.backoff import RedisBackoff
from shared.store.keys import Keys
from tests.integration.contract import connect

T0 = 1_700_000_000.0


@pytest.fixture(params=["memory", "redis"])
def store(request: pytest.FixtureRequest) -> BackoffStore:
    if request.param == "memory":
        return bo.Backoff()
    client = connect(request.getfixturevalue("redis_url"))
    return RedisBackoff(client, Keys(request.getfixturevalue("prefix")))


def test_get_many_returns_only_existing_entries(store: BackoffStore) -> None:
    assert store.get_many([]) == {}
    store.put_many({"u1/1/a": bo.BackoffEntry(2.0, T0), "u1/1/b": bo.BackoffEntry(4.0, T0 + 0.5)})
    assert store.get_many(["u1/1/a", "u1/1/b", "u1/1/zzz"]) == {
        "u1/1/a": bo.BackoffEntry(2.0, T0), "u1/1/b": bo.BackoffEntry(4.0, T0 + 0.5)}


def test_put_many_accepts_the_planners_entries_and_overwrites(store: BackoffStore) -> None:
    store.put_many({"u1/1/a": PlannerEntry(1.0, T0)})
    store.put_many({"u1/1/a": PlannerEntry(2.0, T0 + 1)})
    assert store.get_many(["u1/1/a"]) == {"u1/1/a": bo.BackoffEntry(2.0, T0 + 1)}


def test_advancing_through_the_store_doubles_to_the_cap(store: BackoffStore) -> None:
    now, delays = T0, []
    for _ in range(12):
        entry = bo.next_entry(store.get_many(["k"]).get("k"), now)
        store.put_many({"k": entry})
        delays.append(entry.delay)
        now += 1
    assert delays == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 900, 900]


def test_gc_drops_entries_not_updated_for_thirty_minutes(store: BackoffStore) -> None:
    store.put_many({f"old/1/n{i}": bo.BackoffEntry(1.0, T0) for i in range(1200)})
    store.put_many({"young/1/n": bo.BackoffEntry(1.0, T0 + 1000)})
    assert store.gc(T0 + 1800) == 0
    assert store.gc(T0 + 1800.5) == 1200
    assert set(store.get_many(["old/1/n0", "young/1/n"])) == {"young/1/n"}


def test_delete_prefix_drops_every_entry_of_one_daemonset(store: BackoffStore) -> None:
    keys = ["u1/1/a", "u1/2/b", "u10/1/a", "u2/1/a", "u[1]/1/a", "u*/1/a"]
    store.put_many({k: bo.BackoffEntry(1.0, T0) for k in keys})
    assert store.delete_prefix("u1") == 2
    assert store.delete_prefix("u*") == 1  # glob characters are literal
    assert sorted(store.get_many(keys)) == ["u10/1/a", "u2/1/a", "u[1]/1/a"]
