"""What only the Redis workqueue must show: round trips, log positions, real processes."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from shared.store.keys import Keys
from shared.store.workqueue import RedisWorkQueue
from tests.integration import queue_worker
from tests.integration.contract import Counting, connect, wait_for

ROOT = Path(__file__).resolve().parents[2]


def spawn(mode: str, url: str, prefix: str, worker: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.integration.queue_worker", mode, url, prefix, worker],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        stdout=subprocess.PIPE, text=True,
    )


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
            p.wait(5)


# ---- round trips ----------------------------------------------------------------------------


def test_adding_1000_keys_is_one_round_trip(client: redis.Redis, keys: Keys,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    q = RedisWorkQueue(client, keys)
    q.add(["warm-up"])  # the first call of a script also loads it (SCRIPT LOAD)
    counting = Counting(client, monkeypatch)
    assert q.add([f"ns/ds{i}" for i in range(1000)]) == 1000
    assert len(counting.calls) == 1


def test_get_and_done_are_one_round_trip_each(client: redis.Redis, keys: Keys,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    q = RedisWorkQueue(client, keys)
    q.add(["a"])
    q.done(q.get("w") or pytest.fail("no key"))  # scripts are loaded now
    q.add(["a"])
    counting = Counting(client, monkeypatch)
    lease = q.get("w", block_seconds=5)
    assert lease is not None and len(counting.calls) == 1
    assert q.done(lease) and len(counting.calls) == 2


def _script_commands(client: redis.Redis) -> int:
    """Commands Redis has run so far, a script's own and the calls of scripts left out."""
    stats: dict[str, dict[str, int]] = client.info("commandstats")  # type: ignore[assignment]
    return sum(v["calls"] for k, v in stats.items()
               if k not in ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_info"))


def test_hints_a_dirty_key_already_holds_are_not_written_again(client: redis.Redis,
                                                              keys: Keys) -> None:
    q = RedisWorkQueue(client, keys)
    q.add_nodes({"ns/a": ["n1", "n2"]})
    q.add_nodes({"ns/a": ["n2"]})  # loaded now
    before = _script_commands(client)
    q.add_nodes({"ns/a": ["n1"]})
    # EXISTS, HGET hints (dirty, not full): no time, write or signal
    assert _script_commands(client) - before == 2
    q.add_nodes({"ns/a": ["n3"]})
    lease = q.get("w") or pytest.fail("no key")
    assert (lease.nodes, lease.full) == (("n1", "n2", "n3"), False)


def test_an_older_versions_dirty_set_and_stamps_are_folded_into_the_hints(
        client: redis.Redis, keys: Keys) -> None:
    """What a queue of the older layout left (the dirty set, the enqueue stamps, hints
    without a stamp, a dirty key with no hints: a full sync) is taken over as it was: no
    key queued twice, the same syncs handed out, the stamps kept."""
    client.rpush(keys.wq_queue, "ns/full", "ns/hinted", "ns/bare")
    client.sadd(keys.wq_dirty, "ns/full", "ns/hinted", "ns/bare")
    client.hset(keys.wq_enqueued, mapping={"ns/full": 1000, "ns/hinted": 2000, "ns/bare": 3000})
    client.hset(keys.wq_hints, mapping={"ns/full": "*", "ns/hinted": "\nn1\n"})
    q = RedisWorkQueue(client, keys)
    assert not client.exists(keys.wq_dirty) and not client.exists(keys.wq_enqueued)
    assert q.add_nodes({"ns/bare": ["n2"], "ns/hinted": ["n3"]}) == 0, "all dirty already"
    assert q.state().queue == ("ns/full", "ns/hinted", "ns/bare")
    got = [q.get("w") or pytest.fail("no key") for _ in range(3)]
    assert [(g.key, g.full, g.nodes, g.enqueued_ms) for g in got] == [
        ("ns/full", True, (), 1000), ("ns/hinted", False, ("n1", "n3"), 2000),
        ("ns/bare", True, (), 3000)]
    assert RedisWorkQueue(client, keys).state().dirty == frozenset(), "idempotent"


def test_a_blocked_get_waits_on_the_signal_list_without_polling(
        client: redis.Redis, keys: Keys, monkeypatch: pytest.MonkeyPatch) -> None:
    q = RedisWorkQueue(client, keys)
    q.len()
    counting = Counting(client, monkeypatch)
    assert q.get("w", block_seconds=1.5) is None
    assert counting.calls.count("BLPOP") <= 2 and len(counting.calls) <= 5


def test_the_signal_list_stays_bounded(client: redis.Redis, keys: Keys) -> None:
    q = RedisWorkQueue(client, keys)
    q.add([f"k{i}" for i in range(1000)])
    assert client.llen(keys.wq_signal) <= 64
    while (lease := q.get("w")) is not None:
        q.done(lease)
    assert client.llen(keys.wq_signal) == 0


# ---- positions ----------------------------------------------------------------------------


def test_the_lease_position_is_the_log_tip(client: redis.Redis, keys: Keys) -> None:
    q = RedisWorkQueue(client, keys)
    q.add(["a", "b"])
    first = q.get("w")
    assert first is not None and first.position == "0-0"  # empty log
    client.xadd(keys.log, {"t": "ADDED"})
    tip = client.xadd(keys.log, {"t": "MODIFIED"})
    second = q.get("w")
    assert second is not None and second.position == (
        tip.decode() if isinstance(tip, bytes) else tip)


def test_lease_times_come_from_the_redis_clock(client: redis.Redis, keys: Keys) -> None:
    q = RedisWorkQueue(client, keys, lease_seconds=7)
    q.add(["a"])
    lease = q.get("w")
    assert lease is not None
    secs, micros = client.time()
    server_ms = secs * 1000 + micros // 1000
    assert abs(server_ms - lease.leased_ms) < 5000
    assert lease.deadline_ms - lease.leased_ms == 7000
    assert lease.enqueued_ms <= lease.leased_ms


# ---- shared state between replicas -----------------------------------------------------------


def test_shutdown_is_seen_by_every_replica_and_reopen_clears_it(
        redis_url: str, keys: Keys) -> None:
    a, b = RedisWorkQueue(connect(redis_url), keys), RedisWorkQueue(connect(redis_url), keys)
    a.shutdown()
    assert b.shutting_down() and b.add(["x"]) == 0
    b.reopen()
    assert not a.shutting_down() and a.add(["x"]) == 1


def test_shutdown_with_drain_waits_for_the_holder(redis_url: str, keys: Keys) -> None:
    q = RedisWorkQueue(connect(redis_url), keys)
    q.add(["a"])
    lease = q.get("w")
    assert lease is not None
    assert not q.shutdown_with_drain(timeout=0.1)
    q.done(lease)
    assert q.shutdown_with_drain(timeout=1)


# ---- real processes ---------------------------------------------------------------------------


def test_two_worker_processes_never_hold_the_same_key(
        redis_url: str, prefix: str, keys: Keys, client: redis.Redis,
        procs: list[subprocess.Popen[str]]) -> None:
    procs += [spawn("work", redis_url, prefix, f"worker-{i}") for i in range(2)]
    q = RedisWorkQueue(client, keys)
    rng = random.Random(1)
    for _ in range(1000):
        q.add([f"ns/ds{rng.randrange(25)}" for _ in range(rng.choice((1, 1, 1, 3)))])

    def drained() -> bool:
        s = q.stats()
        return s.dirty == 0 and s.processing == 0 and s.waiting == 0

    wait_for(drained, timeout=30)
    q.shutdown()
    for p in procs:
        assert p.wait(10) == 0
    assert int(client.get(queue_worker.violations_key(keys)) or 0) == 0
    processed = int(client.get(queue_worker.processed_key(keys)) or 0)
    assert processed == q.stats().done_total >= 25


def test_a_dead_workers_key_is_handed_out_again_after_the_lease(
        redis_url: str, prefix: str, keys: Keys, client: redis.Redis,
        procs: list[subprocess.Popen[str]]) -> None:
    q = RedisWorkQueue(client, keys, lease_seconds=1.0)
    q.add(["ns/ds"])
    dying = spawn("die", redis_url, prefix, "doomed", LEASE_SECONDS="1.0")
    procs.append(dying)
    out, _ = dying.communicate(timeout=20)
    assert out.strip() == "ns/ds"
    assert q.get("survivor") is None  # still leased to the dead worker
    start = time.monotonic()
    lease = q.get("survivor", block_seconds=10)
    assert lease is not None and lease.key == "ns/ds"
    assert time.monotonic() - start < 2.0
    assert q.stats().reclaimed_total == 1
    assert q.done(lease)
