"""The log mark (shared.store.logmark): a process notices when the log is behind what it read
or wrote, on real Redis. The log is cut back here by hand (the entries and their view rows
removed, as a restored older copy has them); test_log_rewind does it with a real
append-only file."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import redis

from services.apiserver.watchcache import WatchCache
from services.node_agent.lifecycle import new_node
from shared.store.cache import Cache
from shared.store.client import Store, connect
from shared.store.keys import Keys
from shared.store.log import redis_reader
from shared.store.logmark import EPOCH_FIELD, LogMark


@pytest.fixture
def store(redis_url: str, prefix: str) -> Store:
    return Store(connect(redis_url), Keys(prefix))


def _cut_back(store: Store, count: int) -> None:
    """Remove the newest ``count`` Node entries and their objects, as a log cut back."""
    last: Any = store.r.xrevrange(store.keys.log, count=count)
    for eid, fields in last:
        store.r.xdel(store.keys.log, eid)
        field = fields[b"n"]
        store.r.hdel(store.keys.objects("Node"), field)
        store.r.hdel(store.keys.versions("Node"), field)


def test_a_cache_lists_again_when_the_log_is_cut_back_below_what_it_read(store: Store) -> None:
    for i in range(3):
        store.create(new_node(f"n{i}"))
    cache = Cache(store, ["Node"])
    cache.sync()
    store.create(new_node("n3"))
    store.create(new_node("n4"))
    assert [c.key for c in cache.poll()] == ["/n3", "/n4"]
    _cut_back(store, 2)
    store.create(new_node("n5"))  # the tip is past what the cache read again
    changes = cache.poll()
    assert sorted((c.type, c.key) for c in changes) == [
        ("ADDED", "/n5"), ("DELETED", "/n3"), ("DELETED", "/n4")]
    assert sorted(cache.objects["Node"]) == ["/n0", "/n1", "/n2", "/n5"]
    assert store.mark.rewinds == 1
    assert cache.poll() == [] and store.mark.rewinds == 1  # once noticed, carries on


def test_a_write_of_the_process_lost_from_the_log_is_noticed_at_its_next_read(
        store: Store) -> None:
    store.create(new_node("n0"))
    cache = Cache(store, ["Node"])
    cache.sync()
    store.create(new_node("n1"))  # written, not read yet
    _cut_back(store, 1)
    assert cache.poll() == [] and store.mark.rewinds == 1


def test_a_replaced_log_is_noticed_by_its_identity_once_the_client_connects_again(
        store: Store, redis_url: str) -> None:
    store.create(new_node("n0"))
    cache = Cache(store, ["Node"])
    cache.sync()
    assert cache.poll() == []
    store.r.hset(store.keys.meta, EPOCH_FIELD, "another-log")
    # a Redis replaced under the process: its connections drop, its clients connect again
    assert redis.Redis.from_url(redis_url).client_kill_filter(_type="normal") >= 1
    changes = cache.poll()
    assert changes == [] and store.mark.rewinds == 1 and store.mark.epoch == "another-log"
    assert cache.poll() == [] and store.mark.rewinds == 1


def test_a_commit_after_the_client_connects_again_checks_the_identity(
        store: Store, redis_url: str) -> None:
    store.create(new_node("n0"))  # the first check and connection: the identity read
    store.create(new_node("n1"))  # read once more: the connection was made during the first
    store.r.hset(store.keys.meta, EPOCH_FIELD, "another-log")
    store.create(new_node("n2"))  # the same connection: the entry seen is there, no re-read
    assert store.mark.rewinds == 0
    redis.Redis.from_url(redis_url).client_kill_filter(_type="normal")
    store.create(new_node("n3"))
    assert store.mark.rewinds == 1 and store.mark.epoch == "another-log"


def test_a_listing_at_a_newer_tip_does_not_hide_a_cut_back(store: Store) -> None:
    store.create(new_node("n0"))
    store.create(new_node("n1"))
    cache = Cache(store, ["Node"])
    cache.sync()
    _cut_back(store, 1)
    store.create(new_node("n2"))
    cache.sync()  # a process listing again (restarted loop) at a tip past what it had
    assert store.mark.rewinds == 1


def test_compaction_past_the_position_is_a_gap_not_a_rewind(store: Store) -> None:
    ids = [store.create(new_node(f"n{i}"))["metadata"]["resourceVersion"] for i in range(3)]
    mark = LogMark()
    reader = redis_reader(store.r, store.keys, mark=mark)
    assert len(reader.read()) == 3
    store.r.set(store.keys.log_snapshot_id, ids[2])
    store.r.xtrim(store.keys.log, minid=ids[2])
    store.r.xdel(store.keys.log, ids[2])  # even the entry read last: compaction covers it
    assert reader.read() == [] and not reader.rewound and mark.rewinds == 0


def _commands(store: Store) -> int:
    stats: dict[str, dict[str, int]] = store.r.info("commandstats")  # type: ignore[assignment]
    return sum(v["calls"] for k, v in stats.items() if k != "cmdstat_info")


def test_a_read_at_the_entry_read_last_is_two_commands_and_still_sees_a_cut_back(
        store: Store) -> None:
    for i in range(3):
        store.create(new_node(f"n{i}"))
    mark = LogMark()
    reader = redis_reader(store.r, store.keys, mark=mark)
    assert len(reader.read()) == 3
    before = _commands(store)
    assert reader.read(block_ms=10) == []  # the read, the entry read last
    assert _commands(store) - before == 2
    _cut_back(store, 1)
    store.create(new_node("n3"))  # a new tip above what was cut
    assert reader.read(block_ms=10) == [] and reader.rewound and mark.rewinds == 1


def test_a_process_reading_back_its_own_commit_is_two_commands(store: Store) -> None:
    """The commit moved the mark past the reader: the read returning that entry proves it
    is there, and the entry at the reader's position that nothing before it was trimmed."""
    store.create(new_node("n0"))
    reader = redis_reader(store.r, store.keys, mark=store.mark)
    assert len(reader.read()) == 1
    store.create(new_node("n1"))
    before = _commands(store)
    assert [e.id for e in reader.read(block_ms=10)] == [store.mark.seen]
    assert _commands(store) - before == 2 and store.mark.rewinds == 0


def test_a_commit_of_the_process_cut_back_under_its_reader_is_a_rewind(store: Store) -> None:
    store.create(new_node("n0"))
    reader = redis_reader(store.r, store.keys, mark=store.mark)
    assert len(reader.read()) == 1
    store.create(new_node("n1"))
    store.create(new_node("n2"))
    _cut_back(store, 1)  # n2, which the process wrote and its reader has not read
    assert reader.read(block_ms=10) == [] and reader.rewound and store.mark.rewinds == 1


def test_a_page_that_stops_short_of_the_entry_the_mark_saw_is_no_rewind(
        store: Store) -> None:
    store.create(new_node("n0"))
    reader = redis_reader(store.r, store.keys, mark=store.mark)
    assert len(reader.read()) == 1
    for i in range(1, 4):
        store.create(new_node(f"n{i}"))
    page = reader.log.follow(reader.position, 2)  # two of the three: n3 not returned
    assert len(page.entries) == 2 and not page.rewound and store.mark.rewinds == 0


def test_a_log_gets_one_identity_and_reading_an_empty_prefix_writes_nothing(
        store: Store) -> None:
    first, second = LogMark(), LogMark()
    assert not first.check(store.r, store.keys) and first.epoch is None
    store.list("Node")
    assert store.r.keys(store.keys.tag + ":*") == []  # `replay` can still rebuild into it
    store.create(new_node("n0"))
    assert not first.check(store.r, store.keys) and not second.check(store.r, store.keys)
    assert first.epoch and first.epoch == second.epoch


def test_a_check_sent_before_the_first_commit_created_the_log_is_no_rewind(
        store: Store) -> None:
    # the watch cache's read of a new, empty log blocks while a request thread's first
    # commit creates the log and its identity, and teaches the process' mark both: the read
    # then answers "no identity", which the mark knew when it was sent
    mark = store.mark
    pipe = store.r.pipeline(transaction=False)
    known = mark.queue(pipe, store.keys, store.r, epoch=True)
    pipe.get(store.keys.log_snapshot_id)
    raw_epoch, found, trimmed_to = pipe.execute()
    store.create(new_node("n0"))
    assert mark.epoch is not None and mark.seen != "0-0"
    assert not mark.settle(store.r, store.keys, raw_epoch, found, trimmed_to, known)
    assert mark.rewinds == 0 and mark.epoch is not None


def test_catch_up_to_a_position_behind_the_cache_still_checks_the_log(store: Store) -> None:
    """A worker handed a key at a position its cache is past still reads once: a cache ahead
    of a log that went backwards would otherwise decide on objects the log lost."""
    first = store.create(new_node("n0"))["metadata"]["resourceVersion"]
    cache = Cache(store, ["Node"])
    cache.sync()
    other = Store(store.r, store.keys)  # another process wrote n1, which this cache read
    other.create(new_node("n1"))
    assert [c.key for c in cache.poll()] == ["/n1"]
    _cut_back(store, 1)
    cache.catch_up(first)
    assert store.mark.rewinds == 1 and sorted(cache.objects["Node"]) == ["/n0"]


def test_the_api_servers_watch_cache_lists_again_when_the_log_is_cut_back(store: Store) -> None:
    for i in range(3):
        store.create(new_node(f"n{i}"))

    async def until(cond: Any, what: str) -> None:
        deadline = time.monotonic() + 20
        while not cond():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            await asyncio.sleep(0.02)

    async def scenario() -> None:
        cache = WatchCache(store, ("Node",))
        cache.start()
        try:
            await until(lambda: "/n2" in cache.objects["Node"], "the first listing")
            store.create(new_node("n3"))
            store.create(new_node("n4"))
            await until(lambda: "/n4" in cache.objects["Node"], "the tail")
            _cut_back(store, 2)
            store.create(new_node("n5"))
            # n5 may be folded in before the rewind is noticed (the tail can read it before
            # the commit's reply counts the rewind); the listing after it drops n3 and n4
            await until(lambda: sorted(cache.objects["Node"]) == ["/n0", "/n1", "/n2", "/n5"],
                        "the cache listed again after the cut")
        finally:
            cache.stop()

    asyncio.run(scenario())
