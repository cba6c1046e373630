"""The watcher's per-batch writes on real Redis: expectations, workqueue adds and the cursor
in one atomic call, fenced by the watcher's leader lease (``shared.store.watcher_batch``)."""

from __future__ import annotations

import random
import threading
import time

import pytest
import redis
from prometheus_client import REGISTRY

from services.node_agent.lifecycle import new_node
from services.replay import compact
from services.watcher import watcher as watcher_module
from services.watcher.watcher import Watcher
from shared.store.client import Store
from shared.store.eventlog import RedisCursor
from shared.store.expectations import RedisExpectations
from shared.store.keys import Keys
from shared.store.lease import RedisLeaderLease
from shared.store.watcher_batch import NotLeader, RedisWatcherBatch, Written
from shared.store.workqueue import RedisWorkQueue
from tests.integration import controller_kit as kit
from tests.integration.contract import Counting, connect, wait_for
from tests.integration.test_queue_contract import check_invariants

HOLDER = "watcher-a"
SIGNAL_CAP = 64  # control_scripts._WQ_PRELUDE


@pytest.fixture
def lease(client: redis.Redis, keys: Keys) -> RedisLeaderLease:
    held = RedisLeaderLease(client, keys, "watcher", HOLDER)
    assert held.acquire()
    return held


@pytest.fixture
def batch(client: redis.Redis, keys: Keys, lease: RedisLeaderLease) -> RedisWatcherBatch:
    return RedisWatcherBatch(client, keys, lease.holder)


@pytest.fixture
def queue(client: redis.Redis, keys: Keys) -> RedisWorkQueue:
    return RedisWorkQueue(client, keys)


@pytest.fixture
def exp(client: redis.Redis, keys: Keys) -> RedisExpectations:
    return RedisExpectations(client, keys)


def _cursor(client: redis.Redis, keys: Keys) -> str | None:
    """The cursor the batch wrote, as the watcher reads it (the port)."""
    return RedisCursor(client, keys, "watcher").get()


def _dump(client: redis.Redis, keys: Keys) -> dict[bytes, bytes | None]:
    """Every key of the test's prefix with its serialized value (TTLs aside)."""
    found: list[bytes] = []
    for pattern in keys.all_patterns():
        found += list(client.scan_iter(match=pattern))
    return {k: client.dump(k) for k in sorted(found)}


def _signal_tokens_match(client: redis.Redis, keys: Keys, queue: RedisWorkQueue) -> None:
    want = min(queue.len(), SIGNAL_CAP)
    if want == 0 and queue.shutting_down():
        want = 1
    assert client.llen(keys.wq_signal) == want


def _lose_lease(client: redis.Redis, keys: Keys, to: str | None) -> None:
    """Our lease lapses (a pause longer than its TTL); ``to`` (a stand-by) then takes it."""
    client.pexpire(keys.lease("watcher"), 1)
    wait_for(lambda: not client.exists(keys.lease("watcher")))
    if to is not None:
        assert RedisLeaderLease(client, keys, "watcher", to).acquire()


# ---- one batch, one call ---------------------------------------------------------------------


def test_one_call_writes_expectations_queue_and_cursor(
        client: redis.Redis, keys: Keys, batch: RedisWatcherBatch, queue: RedisWorkQueue,
        exp: RedisExpectations, monkeypatch: pytest.MonkeyPatch) -> None:
    now = time.time()
    exp.set("ns/a", 2, 0, now)
    exp.set("ns/b", 1, 1, now)
    exp.set("ns/recreated", 3, 0, now)
    queue.add(["ns/processing"])
    held = queue.get("worker") or pytest.fail("no key")
    queue.add(["ns/queued"])
    queue.add_after("ns/later", 60)
    queue.add_after("ns/sooner", 60)
    waiting_before = queue.state().waiting
    stats_before = queue.stats()
    batch.apply("1-0")  # loads the script (SCRIPT LOAD) so the batch below is one call

    counting = Counting(client, monkeypatch)
    result = batch.apply(
        "7-0",
        delete_expectations=["ns/recreated"],
        observe=[("ns/a", 1, 0), ("ns/a", 1, 0), ("ns/b", 0, 1), ("ns/none", 1, 0)],
        enqueue=["ns/processing", "ns/queued", "ns/new"],
        enqueue_after={"ns/later": 120.0, "ns/sooner": 30.0, "ns/now": 0.0},
    )
    assert counting.calls == ["EVALSHA"]

    # "ns/processing" becomes dirty again (queued after its Done), "ns/new" is new,
    # "ns/queued" was already dirty; "ns/now" (no delay) is added by AddAfter
    assert result == Written(added=2, queue_shut_down=False, lowered=2)
    assert exp.get("ns/recreated") is None
    assert (exp.get("ns/a") or pytest.fail("ns/a")).add == 0
    b = exp.get("ns/b") or pytest.fail("ns/b")
    assert (b.add, b.delete) == (1, 0)
    assert exp.get("ns/none") is None, "observing a key without an entry creates none"
    state = queue.state()
    assert state.queue == ("ns/queued", "ns/new", "ns/now")
    assert state.dirty == {"ns/processing", "ns/queued", "ns/new", "ns/now"}
    assert state.processing == {"ns/processing"}
    assert state.waiting["ns/later"] == waiting_before["ns/later"], "the earlier time is kept"
    assert state.waiting["ns/sooner"] < waiting_before["ns/sooner"]
    stats = queue.stats()
    assert stats.adds_total - stats_before.adds_total == 3
    assert stats.retries_total - stats_before.retries_total == 3
    assert _cursor(client, keys) == "7-0"
    check_invariants(queue)
    _signal_tokens_match(client, keys, queue)

    assert queue.done(held)
    assert queue.state().queue[-1] == "ns/processing", "re-added while processing: after Done"


def test_node_hints_are_written_in_the_same_call(
        client: redis.Redis, keys: Keys, batch: RedisWatcherBatch, queue: RedisWorkQueue,
        monkeypatch: pytest.MonkeyPatch) -> None:
    queue.add_nodes({"ns/hinted": ["n0"]})
    batch.apply("1-0")  # loads the script
    counting = Counting(client, monkeypatch)
    result = batch.apply("2-0", enqueue=["ns/full"],
                         enqueue_nodes={"ns/hinted": ["n2", "n1"], "ns/full": ["n1"],
                                        "ns/new": ["n3"]})
    assert counting.calls == ["EVALSHA"]
    assert result == Written(added=2, queue_shut_down=False, lowered=0)
    leases = {lease.key: lease for lease in (queue.get("w"), queue.get("w"), queue.get("w"))
              if lease is not None}
    assert {k: (v.nodes, v.full) for k, v in leases.items()} == {
        "ns/hinted": (("n0", "n1", "n2"), False),
        "ns/full": ((), True),  # a plain add in the same batch: a full sync
        "ns/new": (("n3",), False),
    }
    check_invariants(queue)
    _signal_tokens_match(client, keys, queue)


def test_node_hints_are_read_after_every_other_part_of_the_batch(
        keys: Keys, batch: RedisWatcherBatch, queue: RedisWorkQueue,
        exp: RedisExpectations) -> None:
    exp.set("ns/gone", 1, 0, time.time())
    exp.set("ns/seen", 1, 1, time.time())
    result = batch.apply(
        "3-0", delete_expectations=["ns/gone"], observe=[("ns/seen", 1, 1)],
        enqueue=["ns/full"], enqueue_after={"ns/later": 60.0},
        enqueue_nodes={"ns/a": ["n1", "n2"], "ns/none": [], "ns/b": ["n3"]})
    assert result == Written(added=4, queue_shut_down=False, lowered=1)
    assert exp.get("ns/gone") is None
    seen = exp.get("ns/seen") or pytest.fail("ns/seen")
    assert (seen.add, seen.delete) == (0, 0)
    assert set(queue.state().waiting) == {"ns/later"}
    leases = [queue.get("w") for _ in range(4)]
    assert {lease.key: (lease.nodes, lease.full) for lease in leases if lease is not None} == {
        "ns/full": ((), True),
        "ns/a": (("n1", "n2"), False),
        "ns/none": ((), False),  # a sync of no node between two groups
        "ns/b": (("n3",), False),
    }
    check_invariants(queue)


def test_an_empty_batch_only_moves_the_cursor(client: redis.Redis, keys: Keys,
                                              batch: RedisWatcherBatch,
                                              queue: RedisWorkQueue) -> None:
    before = _dump(client, keys)
    assert batch.apply("3-0") == Written(added=0, queue_shut_down=False, lowered=0)
    after = _dump(client, keys)
    assert after.pop(keys.cursor("watcher").encode()) is not None
    assert after == before
    assert _cursor(client, keys) == "3-0"


def test_a_batch_without_a_position_adds_and_leaves_the_cursor(
        client: redis.Redis, keys: Keys, batch: RedisWatcherBatch,
        queue: RedisWorkQueue) -> None:
    batch.apply("3-0")
    assert batch.apply(None, enqueue=["ns/a"], enqueue_nodes={"ns/b": ["node-1"]}) == \
        Written(added=2, queue_shut_down=False, lowered=0)
    assert _cursor(client, keys) == "3-0"
    assert queue.state().queue == ("ns/a", "ns/b")
    _signal_tokens_match(client, keys, queue)
    check_invariants(queue)


def test_a_bare_string_is_refused_as_the_keys_to_enqueue(batch: RedisWatcherBatch) -> None:
    with pytest.raises(TypeError):
        batch.apply("1-0", enqueue="ns/ds")


# ---- fencing ---------------------------------------------------------------------------------


@pytest.mark.parametrize("taken_by", ["watcher-b", None], ids=["taken-over", "lapsed"])
def test_a_deposed_watcher_writes_nothing(
        client: redis.Redis, keys: Keys, batch: RedisWatcherBatch, queue: RedisWorkQueue,
        exp: RedisExpectations, taken_by: str | None) -> None:
    exp.set("ns/a", 1, 0, time.time())
    exp.set("ns/b", 1, 0, time.time())
    queue.add(["ns/queued"])
    assert isinstance(batch.apply("2-0"), Written)
    _lose_lease(client, keys, taken_by)
    before = _dump(client, keys)

    result = batch.apply("9-0", delete_expectations=["ns/b"], observe=[("ns/a", 1, 0)],
                         enqueue=["ns/queued", "ns/new"], enqueue_after={"ns/later": 5.0})

    assert result == NotLeader(holder=taken_by)
    assert _dump(client, keys) == before
    assert _cursor(client, keys) == "2-0"


def test_the_holder_it_was_built_for_is_the_one_fenced(
        client: redis.Redis, keys: Keys, lease: RedisLeaderLease) -> None:
    """A second batch writer under another name is refused while the lease is ours."""
    other = RedisWatcherBatch(client, keys, "watcher-b")
    assert other.apply("4-0", enqueue=["ns/x"]) == NotLeader(holder=HOLDER)
    assert _cursor(client, keys) is None


# ---- shutdown --------------------------------------------------------------------------------


def test_while_the_queue_is_shut_down_adds_are_ignored_but_the_rest_is_written(
        client: redis.Redis, keys: Keys, batch: RedisWatcherBatch, queue: RedisWorkQueue,
        exp: RedisExpectations) -> None:
    # Adds are ignored as client-go ignores them during ShutDown (and as WQ_ADD /
    # WQ_ADD_AFTER do). Expectations and the cursor are still written: the observations are
    # facts about pods already created or deleted, whoever syncs next must see them lowered;
    # and the cursor must move with them, or a replay would observe them a second time.
    exp.set("ns/a", 2, 0, time.time())
    exp.set("ns/gone", 1, 0, time.time())
    queue.add(["ns/queued"])
    queue.shutdown()
    state_before, stats_before = queue.state(), queue.stats()

    result = batch.apply("5-0", delete_expectations=["ns/gone"], observe=[("ns/a", 1, 0)],
                         enqueue=["ns/queued", "ns/new"], enqueue_after={"ns/later": 1.0})

    assert result == Written(added=0, queue_shut_down=True, lowered=1)
    assert queue.state() == state_before
    stats = queue.stats()
    assert (stats.adds_total, stats.retries_total) == (stats_before.adds_total,
                                                       stats_before.retries_total)
    assert (exp.get("ns/a") or pytest.fail("ns/a")).add == 1
    assert exp.get("ns/gone") is None
    assert _cursor(client, keys) == "5-0"
    check_invariants(queue)
    _signal_tokens_match(client, keys, queue)


# ---- workqueue invariants --------------------------------------------------------------------


def test_random_batches_keep_the_workqueue_invariants(
        client: redis.Redis, keys: Keys, batch: RedisWatcherBatch,
        queue: RedisWorkQueue) -> None:
    rng = random.Random(7)
    names = [f"ns/ds{i}" for i in range(12)]
    held = []
    for step in range(150):
        roll = rng.random()
        if roll < 0.4:
            result = batch.apply(
                f"{step + 1}-0",
                enqueue=rng.sample(names, rng.randint(0, 5)),
                enqueue_after={k: rng.choice([0.0, 0.001, 30.0]) for k in rng.sample(names, 2)})
            assert isinstance(result, Written)
        elif roll < 0.7:
            lease = queue.try_get("w")
            if lease is not None:
                held.append(lease)
        elif held:
            queue.done(held.pop(rng.randrange(len(held))))
        if step == 120:
            queue.shutdown()
        check_invariants(queue)
        _signal_tokens_match(client, keys, queue)
    assert _cursor(client, keys) is not None


# ---- the watcher process ---------------------------------------------------------------------


def _leader_gauge() -> float | None:
    return REGISTRY.get_sample_value("daemonbus_watcher_leader")


def _watcher(redis_url: str, keys: Keys, holder: str = HOLDER) -> tuple[Watcher, Store]:
    store = Store(connect(redis_url), keys)
    lease = RedisLeaderLease(store.r, keys, "watcher", holder)
    assert lease.acquire()
    # no renewal during the test: only the batch's fence can notice the lost lease
    watcher = Watcher(store, lease, renew_every=3600.0)
    return watcher, store


def test_a_deposed_watcher_stands_by_at_its_next_batch(redis_url: str, keys: Keys) -> None:
    watcher, store = _watcher(redis_url, keys)
    store.create(new_node("node-1"))
    stop = threading.Event()
    leading = threading.Thread(target=watcher.lead, args=(stop,), daemon=True)
    leading.start()
    try:
        wait_for(lambda: _cursor(store.r, keys) == store.log_tip())
        assert _leader_gauge() is not None
        _lose_lease(store.r, keys, to="watcher-b")
        cursor = _cursor(store.r, keys)
        store.apply(kit.daemonset("agent"))
        leading.join(timeout=10)
        assert not leading.is_alive(), "the watcher kept leading without its lease"
    finally:
        stop.set()
        leading.join(timeout=10)
    assert _cursor(store.r, keys) == cursor
    assert "default/agent" not in RedisWorkQueue(store.r, keys).state().dirty
    assert _leader_gauge() == 0


def test_every_daemonset_is_queued_again_for_a_full_sync_each_resync_period(
        redis_url: str, keys: Keys) -> None:
    """Upstream's informer resync: with nothing new in the log, each DaemonSet is handed out
    again, for a full sync, once a period; within the period nothing is queued."""
    store = Store(connect(redis_url), keys)
    lease = RedisLeaderLease(store.r, keys, "watcher", HOLDER)
    assert lease.acquire()
    watcher = Watcher(store, lease, renew_every=3600.0, resync_every=0.5)
    store.create(new_node("node-1"))
    store.apply(kit.daemonset("agent"))
    store.apply(kit.daemonset("other"))
    queue = RedisWorkQueue(store.r, keys)
    assert watcher.start()
    for _ in range(2):  # the start's own queueing, done
        handed = queue.try_get("w")
        assert handed is not None
        queue.done(handed)
    tip = store.log_tip()
    steps_before = 0
    while not queue.state().queue:
        assert watcher.step(block_ms=20)
        steps_before += 1
        assert steps_before < 500, "no resync within 10 s"
    assert steps_before > 1, "queued at once, not after the period"
    assert sorted(queue.state().queue) == ["default/agent", "default/other"]
    handed = queue.try_get("w")
    assert handed is not None and handed.full and handed.nodes == ()
    assert store.log_tip() == tip  # nothing written to the log for it

    quiet = Watcher(store, lease, renew_every=3600.0, resync_every=3600.0)
    assert quiet.start()
    while (handed := queue.try_get("w")) is not None:
        queue.done(handed)
    for _ in range(10):
        assert quiet.step(block_ms=20)
    assert queue.state().queue == ()


def test_the_resync_period_is_drawn_between_the_setting_and_twice_it(
        redis_url: str, keys: Keys) -> None:
    store = Store(connect(redis_url), keys)
    lease = RedisLeaderLease(store.r, keys, "watcher", HOLDER)
    periods = {Watcher(store, lease).resync_every for _ in range(5)}
    least = watcher_module.settings.current.min_resync_seconds
    assert all(least <= p < 2 * least for p in periods)
    assert len(periods) > 1


def test_start_after_compaction_drops_expectations_in_its_one_batch(
        redis_url: str, keys: Keys) -> None:
    watcher, store = _watcher(redis_url, keys)
    store.create(new_node("node-1"))
    store.apply(kit.daemonset("agent"))
    store.r.set(keys.cursor("watcher"), store.log_tip())
    exp = RedisExpectations(store.r, keys)
    exp.set("default/agent", 1, 0, time.time())
    for i in range(2, 6):  # entries the stored cursor has not seen, then trimmed away
        store.create(new_node(f"node-{i}"))
    compact.compact(store.r, keys, keep=1)

    assert watcher.start()

    assert exp.get("default/agent") is None
    assert _cursor(store.r, keys) == store.log_tip()
    assert RedisWorkQueue(store.r, keys).state().queue == ("default/agent",)


def _listing_outlasts_the_lease(watcher: Watcher, client: redis.Redis, keys: Keys,
                                to: str | None) -> None:
    """The watcher's listing takes longer than its lease: the lease lapses meanwhile (and
    ``to``, a stand-by, takes it)."""
    sync = watcher.cache.sync

    def slow_sync() -> str:
        tip = sync()
        _lose_lease(client, keys, to)
        return tip

    watcher.cache.sync = slow_sync  # type: ignore[method-assign]


def test_a_listing_that_outlasts_the_lease_takes_the_lease_again(redis_url: str,
                                                                   keys: Keys) -> None:
    watcher, store = _watcher(redis_url, keys)
    store.create(new_node("node-1"))
    store.apply(kit.daemonset("agent"))
    _listing_outlasts_the_lease(watcher, store.r, keys, to=None)

    assert watcher.start()  # before: its batch refused, it stood by and listed again

    assert RedisLeaderLease(store.r, keys, "watcher", HOLDER).current_holder() == HOLDER
    assert RedisWorkQueue(store.r, keys).state().queue == ("default/agent",)
    assert _cursor(store.r, keys) == store.log_tip()


def test_a_listing_during_which_another_watcher_took_the_lease_writes_nothing(
        redis_url: str, keys: Keys) -> None:
    watcher, store = _watcher(redis_url, keys)
    store.apply(kit.daemonset("agent"))
    _listing_outlasts_the_lease(watcher, store.r, keys, to="watcher-b")

    assert not watcher.start()

    assert RedisWorkQueue(store.r, keys).state().queue == ()
    assert _cursor(store.r, keys) is None


def test_an_idle_watcher_writes_the_cursor_it_left_behind(
        redis_url: str, keys: Keys, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch that asks for nothing right after a written one is not written; once the log
    is idle for CURSOR_EVERY, the cursor catches up to where the watcher read."""
    monkeypatch.setattr(watcher_module, "CURSOR_EVERY", 3.0)  # slow machines: room to spare
    watcher, store = _watcher(redis_url, keys)
    assert watcher.start()
    store.create(new_node("node-1"))  # no DaemonSet: asks for nothing
    assert watcher.step(block_ms=2000)
    assert _cursor(store.r, keys) != store.log_tip(), "written although it asked for nothing"
    assert watcher.step(block_ms=10)  # idle, but not for CURSOR_EVERY yet: nothing written
    assert _cursor(store.r, keys) != store.log_tip()
    wait_for(lambda: watcher.step(block_ms=50) and _cursor(store.r, keys) == store.log_tip(),
             timeout=20)


def test_a_batch_of_syncs_alone_leaves_the_cursor_behind_an_expectation_moves_it(
        redis_url: str, keys: Keys, monkeypatch: pytest.MonkeyPatch) -> None:
    """Right after a written cursor, a batch that only asks for syncs (a node added) writes
    its adds and leaves the cursor; a batch that changes expectations (the DaemonSet
    deleted) moves it to where the watcher read, past both."""
    monkeypatch.setattr(watcher_module, "CURSOR_EVERY", 30.0)  # slow machines: room to spare
    watcher, store = _watcher(redis_url, keys)
    store.apply(kit.daemonset("agent"))
    assert watcher.start()
    started = _cursor(store.r, keys)
    assert started == store.log_tip()
    wq = RedisWorkQueue(store.r, keys)
    wq.done(wq.try_get("w") or pytest.fail("the start's full sync"))

    store.create(new_node("node-1"))
    assert watcher.step(block_ms=2000)
    assert wq.state().queue == ("default/agent",), "the node's sync was added"
    assert _cursor(store.r, keys) == started, "the cursor moved for a batch of syncs alone"

    store.delete("DaemonSet", "default/agent")
    assert watcher.step(block_ms=2000)
    assert _cursor(store.r, keys) == store.log_tip()
