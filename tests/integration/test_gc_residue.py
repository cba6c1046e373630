"""The clean-up of a deleted DaemonSet's control state on a real Redis
(``shared.store.residue``) and the collector acting on it, without other processes."""

from __future__ import annotations

from typing import Any

import pytest

from services.gc import collector as gc_collector
from services.gc.collector import Collector
from shared.control import backoff
from shared.control.backoff import BackoffEntry
from shared.control.clock import FakeClock
from shared.model import meta
from shared.store import codec
from shared.store.backoff import RedisBackoff
from shared.store.client import Store
from shared.store.expectations import RedisExpectations
from shared.store.keys import Keys
from shared.store.residue import RedisResidue
from shared.store.workqueue import RedisWorkQueue
from tests.integration.contract import connect

Obj = dict[str, Any]
T0 = 1_700_000_000.0


@pytest.fixture
def store(redis_url: str, prefix: str) -> Store:
    return Store(connect(redis_url), Keys(prefix))


def daemonset(name: str) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "x"}]}}}}


def plant(store: Store, key: str, uid: str) -> None:
    """What a controller may hold about a DaemonSet at any moment."""
    RedisExpectations(store.r, store.keys).set(key, 1, 0, T0)
    queue = RedisWorkQueue(store.r, store.keys)
    queue.add_after(key, 600)
    store.r.hset(store.keys.wq_failures, key, 3)
    store.r.hset(store.keys.status_positions, key, "1-0")
    RedisBackoff(store.r, store.keys).put_many({f"{uid}/1/node-a": BackoffEntry(2.0, T0),
                                                f"{uid}/2/node-b": BackoffEntry(4.0, T0)})


def held(store: Store, key: str) -> dict[str, bool]:
    k, r = store.keys, store.r
    return {"expectations": bool(r.hexists(k.expectations, key)),
            "waiting": r.zscore(k.wq_waiting, key) is not None,
            "failures": bool(r.hexists(k.wq_failures, key)),
            "status position": bool(r.hexists(k.status_positions, key))}


def test_forget_keys_removes_the_state_of_a_key_no_daemonset_has(store: Store) -> None:
    plant(store, "default/gone", "u-gone")

    statuses, newest = RedisResidue(store.r, store.keys).forget_keys(["default/gone"])

    assert statuses == {"default/gone": "gone"}
    assert newest == "0-0"  # no status message in flight
    assert not any(held(store, "default/gone").values())


def test_forget_keys_leaves_a_recreated_daemonset_alone(store: Store) -> None:
    store.create(daemonset("back"))
    plant(store, "default/back", "u-old")

    statuses, _ = RedisResidue(store.r, store.keys).forget_keys(["default/back"])

    assert statuses == {"default/back": "live"}
    assert all(held(store, "default/back").values())


def test_forget_keys_waits_while_a_sync_of_the_key_is_pending(store: Store) -> None:
    plant(store, "default/busy", "u-busy")
    queue = RedisWorkQueue(store.r, store.keys)
    queue.add(["default/busy"])
    residue = RedisResidue(store.r, store.keys)

    assert residue.forget_keys(["default/busy"])[0] == {"default/busy": "busy"}  # queued
    lease = queue.get("w1")
    assert lease is not None
    assert residue.forget_keys(["default/busy"])[0] == {"default/busy": "busy"}  # syncing
    assert all(held(store, "default/busy").values())
    queue.done(lease)
    assert residue.forget_keys(["default/busy"])[0] == {"default/busy": "gone"}


def test_forget_uid_removes_only_that_daemonsets_backoff(store: Store) -> None:
    backoff = RedisBackoff(store.r, store.keys)
    plant(store, "default/a", "u-a")
    backoff.put_many({"u-b/1/node-a": BackoffEntry(2.0, T0)})

    assert RedisResidue(store.r, store.keys).forget_uid("u-a") == 2

    assert list(store.r.hkeys(store.keys.backoff)) == [b"u-b/1/node-a"]


def test_collector_cleans_up_once_the_status_messages_in_flight_are_consumed(
        store: Store) -> None:
    """A status message of the deleted DaemonSet still in the stream would make a writer
    record its position again: the collector cleans the key once more after it is gone."""
    ds = store.create(daemonset("late"))
    gc = Collector(store)
    gc.cache.sync()
    plant(store, "default/late", ds["metadata"]["uid"])
    mid = store.r.xadd(store.keys.status_stream, {"m": codec.pack({"key": "default/late"})})
    store.delete("DaemonSet", "default/late")

    gc.step(block_ms=0)
    assert gc.settling == {"default/late": mid.decode()}
    assert not any(held(store, "default/late").values())
    assert not store.r.hkeys(store.keys.backoff)

    store.r.hset(store.keys.status_positions, "default/late", "2-0")  # a writer, late
    gc.step(block_ms=0)
    assert held(store, "default/late")["status position"], "message not consumed yet"
    store.r.xdel(store.keys.status_stream, mid)
    gc.step(block_ms=0)
    assert gc.settling == {}
    assert not any(held(store, "default/late").values())


def test_full_pass_sweeps_what_a_deleted_daemonset_left(store: Store) -> None:
    """After a restart the collector has no DELETED entry to act on: its full pass finds
    the keys and uids of no DaemonSet from state."""
    live = store.create(daemonset("live"))
    plant(store, "default/live", live["metadata"]["uid"])
    plant(store, "default/dead", "u-dead")
    gc = Collector(store)
    gc.cache.sync()

    gc.full_pass()

    assert not any(held(store, "default/dead").values())
    assert all(held(store, "default/live").values())
    assert sorted(store.r.hkeys(store.keys.backoff)) == sorted(
        f"{live['metadata']['uid']}/{g}/node-{n}".encode() for g, n in ((1, "a"), (2, "b")))


def test_a_full_pass_each_minute_drops_expired_backoff_entries(store: Store) -> None:
    """Upstream's ``failedPodsBackoff.GC`` every ``BackoffGCInterval`` (a minute): an entry
    not advanced for twice the maximum delay goes, even while its DaemonSet lives; a recent
    one stays; none goes before the minute is up."""
    uid = meta.uid(store.create(daemonset("live")))
    clock = FakeClock(T0)
    collector = Collector(store, clock=clock.now)
    collector.cache.sync()
    clock.advance(2 * backoff.MAX_DELAY + 1)
    backoffs = RedisBackoff(store.r, store.keys)
    keys = [f"{uid}/1/node-old", f"{uid}/1/node-recent"]
    backoffs.put_many({keys[0]: BackoffEntry(backoff.MAX_DELAY, T0),
                       keys[1]: BackoffEntry(2.0, clock.now() - 1)})

    collector.full_pass()  # the first collection, a minute after the start
    assert sorted(backoffs.get_many(keys)) == [keys[1]]

    backoffs.put_many({keys[0]: BackoffEntry(backoff.MAX_DELAY, T0)})
    clock.advance(gc_collector.BACKOFF_GC_EVERY - 1)
    collector.full_pass()  # within the minute: kept
    assert sorted(backoffs.get_many(keys)) == keys
    clock.advance(1)
    collector.full_pass()
    assert sorted(backoffs.get_many(keys)) == [keys[1]]
