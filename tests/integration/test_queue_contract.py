"""One contract for both workqueues: the in-memory reference and the Redis one (spec §g.3).

Each test gets a ``handles`` factory: every call returns another handle on the *same* queue
(the same object in memory; a new connection in Redis), as separate workers would have.
Where time matters, leases and delays are tiny and waits are bounded ``get`` calls.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

import pytest

from shared.control.protocols import Lease, WorkQueue
from shared.control.workqueue import MAX_NODE_HINTS, InMemoryWorkQueue
from shared.store.keys import Keys
from shared.store.workqueue import RedisWorkQueue
from tests.integration.contract import connect

Handles = Callable[..., WorkQueue]


@pytest.fixture(params=["memory", "redis"])
def handles(request: pytest.FixtureRequest) -> Handles:
    if request.param == "memory":
        shared: dict[str, InMemoryWorkQueue] = {}

        def memory(lease_seconds: float = 10.0) -> WorkQueue:
            if "q" not in shared:
                shared["q"] = InMemoryWorkQueue(lease_seconds=lease_seconds)
            return shared["q"]

        return memory
    url: str = request.getfixturevalue("redis_url")
    keys = Keys(request.getfixturevalue("prefix"))

    def in_redis(lease_seconds: float = 10.0) -> WorkQueue:
        return RedisWorkQueue(connect(url), keys, lease_seconds=lease_seconds)

    return in_redis


def check_invariants(q: WorkQueue) -> None:
    s = q.state()
    assert len(set(s.queue)) == len(s.queue), f"a key is queued twice: {s.queue}"
    assert set(s.queue) == s.dirty - s.processing, f"queue != dirty - processing: {s}"
    assert q.len() == len(s.queue)


def take(q: WorkQueue, worker: str = "w", block: float = 0.0) -> Lease:
    lease = q.get(worker, block_seconds=block)
    assert lease is not None, "expected a key"
    return lease


# ---- Add / Get / Done -------------------------------------------------------------------


def test_add_deduplicates_a_waiting_key(handles: Handles) -> None:
    q = handles()
    assert q.add(["a", "b", "a"]) == 2
    assert q.add(["b"]) == 0
    assert q.len() == 2
    check_invariants(q)


def test_add_takes_a_batch_and_refuses_a_bare_string(handles: Handles) -> None:
    q = handles()
    assert q.add([]) == 0
    assert q.add([f"ns/ds{i}" for i in range(1000)]) == 1000
    with pytest.raises(TypeError):
        q.add("ns/ds")


def test_keys_are_handed_out_in_fifo_order(handles: Handles) -> None:
    q = handles()
    q.add(["c", "a", "b"])
    assert [take(q).key for _ in range(3)] == ["c", "a", "b"]
    assert q.get("w") is None


def test_get_moves_the_key_from_dirty_to_processing(handles: Handles) -> None:
    q = handles()
    q.add(["a"])
    lease = take(q, "w1")
    assert (lease.key, lease.worker) == ("a", "w1")
    s = q.state()
    assert s.processing == {"a"} and not s.dirty and q.len() == 0


def test_a_key_being_processed_is_not_handed_to_a_second_worker(handles: Handles) -> None:
    q1, q2 = handles(), handles()
    q1.add(["a"])
    take(q1, "w1")
    q2.add(["a"])
    assert q2.len() == 0
    assert q2.get("w2") is None
    check_invariants(q2)


def test_a_key_added_during_processing_is_handed_out_after_done(handles: Handles) -> None:
    q1, q2 = handles(), handles()
    q1.add(["a"])
    first = take(q1, "w1")
    q2.add(["a"])
    q2.add(["a"])
    assert q2.get("w2") is None
    assert q1.done(first)
    second = take(q2, "w2")
    assert second.key == "a" and second.token != first.token
    assert q2.done(second)
    assert q1.get("w1") is None
    check_invariants(q1)


def test_done_without_a_readd_forgets_the_key(handles: Handles) -> None:
    q = handles()
    q.add(["a"])
    assert q.done(take(q))
    s = q.state()
    assert not s.processing and not s.dirty and not s.queue


def test_done_then_get_is_done_and_the_next_get(handles: Handles) -> None:
    """Done of the lease, then the worker's next key: a key re-added while it was held goes
    behind the ones queued before it, with its hints; a stale lease is no Done but still a
    Get; an empty queue tells how long nothing is due."""
    q = handles()
    q.add(["a", "b"])
    a = take(q, "w")
    q.add_nodes({"a": ["n1"]})
    done, b, _ = q.done_then_get(a, "w")
    assert done and b is not None and b.key == "b" and b.worker == "w"
    done, again, _ = q.done_then_get(b, "w")
    assert done and again is not None and (again.key, again.nodes, again.full) == \
        ("a", ("n1",), False)
    check_invariants(q)
    done, none, wait = q.done_then_get(again, "w")
    assert done and none is None and wait == -1.0, "nothing queued, delayed or held"
    done, _, _ = q.done_then_get(again, "w")
    assert not done, "a stale lease"
    q.add_after("later", 60)
    _, _, wait = q.done_then_get(again, "w")
    assert 50 < wait <= 60
    assert q.get("w", block_seconds=0.2, wait_first=0.1) is None
    q.add(["c"])
    assert take(q, "w").key == "c"
    s = q.state()
    assert s.processing == {"c"} and not s.queue
    check_invariants(q)


def _until(moment: float) -> None:
    """Wait for the clock to reach ``moment`` (a delay or a lease is time itself)."""
    while time.monotonic() < moment:
        time.sleep(0.01)


def test_done_then_get_of_a_dirty_key_keeps_its_place_before_a_promoted_key(
        handles: Handles) -> None:
    """The queue empty at Done: the key, dirty again, is handed back at once unless a key
    became due meanwhile; then it goes first, as its own push put it before the promotion."""
    q = handles()
    q.add(["a"])
    a = take(q)
    q.add(["a"])
    q.add_after("later", 0.05)
    _until(time.monotonic() + 0.1)
    done, again, _ = q.done_then_get(a, "w")
    assert done and again is not None and again.key == "a"
    assert q.state().queue == ("later",)
    check_invariants(q)
    q.add(["a"])
    done, nxt, _ = q.done_then_get(again, "w")
    assert done and nxt is not None and nxt.key == "later" and q.state().queue == ("a",)
    check_invariants(q)
    # hinted while held, and due from a delay: the promotion makes its hand-out a full sync
    b = take(q)
    assert b.key == "a"
    q.add_nodes({"a": ["n1"]})
    q.add_after("a", 0.05)
    _until(time.monotonic() + 0.1)
    done, again, _ = q.done_then_get(b, "w")
    assert done and again is not None and (again.key, again.full, again.nodes) == ("a", True, ())
    check_invariants(q)


def test_done_then_get_of_a_dirty_key_goes_behind_a_reclaimed_key(handles: Handles) -> None:
    q = handles(lease_seconds=1.0)
    q.add(["a", "x"])
    a = take(q, "w")
    dead = take(q, "dead")
    start = time.monotonic()
    _until(start + 0.5)
    renewed = q.renew(a)
    assert renewed is not None
    q.add(["a"])
    _until(start + 1.1)  # x's lease is over, a's renewed one is not
    done, nxt, _ = q.done_then_get(renewed, "w")
    assert done and nxt is not None and nxt.key == "x" and nxt.redelivered
    assert q.state().queue == ("a",) and not q.done(dead)
    check_invariants(q)


# ---- AddAfter / AddRateLimited ----------------------------------------------------------


def test_add_after_zero_or_negative_adds_now(handles: Handles) -> None:
    q = handles()
    q.add_after("a", 0)
    q.add_after("b", -1)
    assert q.len() == 2


def test_add_after_holds_the_key_until_it_is_due(handles: Handles) -> None:
    q = handles()
    start = time.monotonic()
    q.add_after("a", 0.2)
    assert q.get("w") is None and q.len() == 0
    assert set(q.state().waiting) == {"a"}
    lease = take(q, block=5)
    assert lease.key == "a"
    assert 0.15 <= time.monotonic() - start < 2.0


def test_add_after_a_duplicate_keeps_the_earlier_time(handles: Handles) -> None:
    q = handles()
    q.add_after("late-first", 60)
    q.add_after("late-first", 0.05)
    q.add_after("early-first", 0.05)
    q.add_after("early-first", 60)
    assert len(q.state().waiting) == 2
    got = {take(q, block=5).key, take(q, block=5).key}
    assert got == {"late-first", "early-first"}
    assert not q.state().waiting


def test_a_due_key_that_is_already_queued_is_deduplicated(handles: Handles) -> None:
    q = handles()
    q.add(["a"])
    q.add_after("a", 0.05)
    q.done(take(q, block=1))
    lease = q.get("w", block_seconds=0.5)  # the delayed add arrives and is handed out once
    assert lease is not None and lease.key == "a"
    q.done(lease)
    assert q.get("w", block_seconds=0.2) is None


def test_add_rate_limited_backs_off_exponentially_and_forget_resets(handles: Handles) -> None:
    q = handles()
    assert q.add_rate_limited("a") == pytest.approx(0.005)
    assert q.add_rate_limited("a") == pytest.approx(0.010)
    assert q.add_rate_limited("a") == pytest.approx(0.020)
    assert q.num_requeues("a") == 3
    assert handles().num_requeues("a") == 3
    q.forget("a")
    assert q.num_requeues("a") == 0
    assert take(q, block=2).key == "a"


def test_the_token_bucket_limits_retries_over_all_keys(handles: Handles) -> None:
    q = handles()
    assert [q.add_rate_limited(f"k{i}") for i in range(100)] == pytest.approx([0.005] * 100)
    more = [q.add_rate_limited(f"more{i}") for i in range(50)]
    # reservations queue up behind each other: the ready times (not the delays, which
    # shrink by however long the calls themselves take) never go backwards
    waiting = q.state().waiting
    ready = [waiting[f"more{i}"] for i in range(50)]
    assert ready == sorted(ready)
    assert 0.005 < more[-1] <= 5.0  # 50 tokens owed at 10/s, less what refilled meanwhile


def test_every_add_after_counts_as_a_retry(handles: Handles) -> None:
    q = handles()
    q.add_after("a", 0)
    q.add_after("b", 5)
    q.add_rate_limited("c")
    assert q.stats().retries_total == 3


# ---- leases -----------------------------------------------------------------------------


def test_an_expired_lease_is_handed_out_again_and_its_done_is_stale(handles: Handles) -> None:
    q = handles(lease_seconds=0.3)
    q.add(["a"])
    dead = take(q, "dead")
    start = time.monotonic()
    again = take(handles(lease_seconds=0.3), "alive", block=5)
    assert again.key == "a" and again.token != dead.token
    assert 0.2 <= time.monotonic() - start < 2.0
    assert not q.done(dead)
    assert q.state().processing == {"a"}
    assert q.done(again)
    stats = q.stats()
    assert stats.reclaimed_total == 1 and stats.stale_done_total == 1


def test_only_the_hand_out_after_a_reclaim_is_flagged_redelivered(handles: Handles) -> None:
    q = handles(lease_seconds=0.3)
    q.add(["a", "b"])
    dead = take(q, "dead")
    assert not dead.redelivered
    assert q.done(take(q, "alive"))  # b: finished normally
    again = take(handles(lease_seconds=0.3), "alive", block=5)
    assert again.key == "a" and again.redelivered
    renewed = q.renew(again)
    assert renewed is not None and renewed.redelivered  # the flag stays with its hand-out
    q.add(["a", "b"])
    assert q.done(again)
    assert [(lease.key, lease.redelivered) for lease in (take(q), take(q))] == [
        ("b", False), ("a", False)]


def test_renew_keeps_the_key_from_being_reclaimed(handles: Handles) -> None:
    q = handles(lease_seconds=0.6)
    q.add(["a"])
    lease = take(q)
    other = handles(lease_seconds=0.6)
    assert other.get("other", block_seconds=0.35) is None
    renewed = q.renew(lease)
    assert renewed is not None and renewed.deadline_ms > lease.deadline_ms
    assert other.get("other", block_seconds=0.35) is None  # past the first deadline
    assert q.done(renewed)


def test_renew_of_a_lost_lease_fails(handles: Handles) -> None:
    q = handles(lease_seconds=0.2)
    q.add(["a"])
    lease = take(q, "slow")
    take(q, "other", block=5)
    assert q.renew(lease) is None


def test_current_tokens_name_each_held_key_until_done_or_reclaimed(handles: Handles) -> None:
    q = handles(lease_seconds=0.3)
    q.add(["a", "b"])
    a, b = take(q, "dead"), take(q, "alive")
    assert q.current_tokens(["a", "b", "c"]) == {"a": a.token, "b": b.token}
    assert q.done(b)
    assert q.current_tokens(["a", "b"]) == {"a": a.token}  # held until done, or reclaimed by a get
    q.add(["a"])
    again = take(handles(lease_seconds=0.3), "alive", block=5)
    assert q.current_tokens(["a"]) == {"a": again.token} and again.token != a.token
    assert q.current_tokens([]) == {}


def test_remove_all_drops_every_trace_of_a_key(handles: Handles) -> None:
    q = handles()
    q.add(["a", "b"])
    q.add_after("a", 60)
    q.add_rate_limited("a")
    q.remove_all("a")
    s = q.state()
    assert "a" not in s.queue and "a" not in s.dirty and "a" not in s.waiting
    assert q.num_requeues("a") == 0
    lease = take(q)
    assert lease.key == "b"
    q.add(["b"])
    q.remove_all("b")  # while processing: the holder's done becomes stale
    assert not q.done(lease)
    assert q.get("w") is None
    check_invariants(q)


# ---- node hints ---------------------------------------------------------------------------


def test_node_hints_ride_the_next_hand_out_of_their_key(handles: Handles) -> None:
    q = handles()
    assert q.add_nodes({"a": ["n2", "n1"], "b": ["n1"]}) == 2
    assert q.add_nodes({"a": ["n3", "n1"]}) == 0  # already dirty: the hints join
    assert q.len() == 2
    check_invariants(q)
    a, b = take(q), take(q)
    assert (a.key, a.nodes, a.full) == ("a", ("n1", "n2", "n3"), False)
    assert (b.key, b.nodes, b.full) == ("b", ("n1",), False)
    assert q.done(a) and q.done(b)
    q.add(["a"])  # no hints since: a full sync
    again = take(q)
    assert (again.nodes, again.full) == ((), True)


def test_a_plain_add_makes_the_hand_out_full_whatever_the_hints(handles: Handles) -> None:
    q = handles()
    q.add_nodes({"a": ["n1"]})
    q.add(["a"])
    q.add_nodes({"a": ["n2"]})  # a full sync is pending: nothing to keep
    lease = take(q)
    assert lease.full
    assert q.done(lease)
    q.add_nodes({"b": []})  # no node named: a sync of no node (its status)
    status_only = take(q)
    assert (status_only.key, status_only.nodes, status_only.full) == ("b", (), False)
    assert q.done(status_only)
    q.add_nodes({"c": []})
    q.add_nodes({"c": ["n1"]})
    lease = take(q)
    assert (lease.nodes, lease.full) == (("n1",), False)
    assert q.done(lease)
    q.add_nodes({"d": []})
    q.add(["d"])
    assert take(q).full


def test_hints_given_while_the_key_is_held_go_to_its_next_hand_out(handles: Handles) -> None:
    q1, q2 = handles(), handles()
    q1.add_nodes({"a": ["n1"]})
    first = take(q1, "w1")
    q2.add_nodes({"a": ["n2"]})
    assert q2.get("w2") is None  # one holder per key, hinted or not
    assert q1.done(first)
    second = take(q2, "w2")
    assert (second.nodes, second.full) == (("n2",), False)


def test_delayed_and_rate_limited_adds_are_full_syncs(handles: Handles) -> None:
    q = handles()
    q.add_nodes({"a": ["n1"]})
    q.add_after("a", 0)
    assert take(q).full
    q.add_nodes({"b": ["n1"]})
    q.add_after("b", 0.5)
    lease = take(q, block=5)
    assert (lease.key, lease.nodes, lease.full) == ("b", ("n1",), False)  # not due yet
    assert q.done(lease)
    again = take(q, block=5)
    assert (again.key, again.full) == ("b", True)
    assert q.done(again)
    q.add_nodes({"c": ["n1"]})
    lease = take(q)
    q.add_rate_limited("c")
    assert q.done(lease)
    assert take(q, block=5).full


def test_a_redelivered_key_is_a_full_sync(handles: Handles) -> None:
    q = handles(lease_seconds=0.3)
    q.add_nodes({"a": ["n1"]})
    dead = take(q, "dead")
    assert not dead.full
    q.add_nodes({"a": ["n2"]})
    again = take(handles(lease_seconds=0.3), "alive", block=5)
    assert again.redelivered and again.full


def test_too_many_hints_for_one_key_make_a_full_sync(handles: Handles) -> None:
    q = handles()
    q.add_nodes({"a": [f"n{i:05d}" for i in range(MAX_NODE_HINTS)]})
    q.add_nodes({"b": [f"n{i:05d}" for i in range(MAX_NODE_HINTS)]})
    q.add_nodes({"b": ["one-more"]})
    a, b = take(q), take(q)
    assert (len(a.nodes), a.full) == (MAX_NODE_HINTS, False)
    assert b.full


def test_add_nodes_refuses_a_bare_string_or_a_newline(handles: Handles) -> None:
    q = handles()
    with pytest.raises(TypeError):
        q.add_nodes({"a": "n1"})
    with pytest.raises(ValueError):
        q.add_nodes({"a": ["n1\nn2"]})
    assert q.len() == 0


def test_remove_all_drops_the_hints_and_shutdown_ignores_them(handles: Handles) -> None:
    q = handles()
    q.add_nodes({"a": ["n1"]})
    q.remove_all("a")
    q.add(["a"])
    assert take(q).full  # the old hint is gone
    q.shutdown()
    assert q.add_nodes({"b": ["n1"]}) == 0
    assert q.len() == 0


# ---- shutdown -----------------------------------------------------------------------------


def test_shutdown_ignores_adds_and_hands_out_what_is_queued(handles: Handles) -> None:
    q = handles()
    q.add(["a"])
    q.shutdown()
    assert q.shutting_down() and handles().shutting_down()
    assert q.add(["b"]) == 0
    q.add_after("c", 0)
    assert q.len() == 1
    assert take(q, block=5).key == "a"
    start = time.monotonic()
    assert q.get("w", block_seconds=5) is None
    assert time.monotonic() - start < 1.0


def test_shutdown_wakes_blocked_workers(handles: Handles) -> None:
    q = handles()
    results: list[Lease | None] = []
    worker = threading.Thread(target=lambda: results.append(handles().get("w", 10)))
    start = time.monotonic()
    worker.start()
    time.sleep(0.1)  # let the worker block (not waiting for logic: the scenario needs it)
    q.shutdown()
    worker.join(5)
    assert results == [None] and time.monotonic() - start < 3.0


# ---- blocking and concurrency -------------------------------------------------------------


def test_a_blocked_get_wakes_on_an_add_from_another_handle(handles: Handles) -> None:
    q, adder = handles(), handles()
    threading.Timer(0.1, adder.add, args=(["a"],)).start()
    start = time.monotonic()
    lease = q.get("w", block_seconds=10)
    assert lease is not None and lease.key == "a"
    assert time.monotonic() - start < 2.0


def test_a_blocked_get_times_out(handles: Handles) -> None:
    q = handles()
    start = time.monotonic()
    assert q.get("w", block_seconds=0.3) is None
    assert 0.25 <= time.monotonic() - start < 2.0


def test_a_key_added_in_the_last_moments_of_a_blocked_get_is_handed_out_at_once(
        handles: Handles) -> None:
    """A get with less time left than Redis' tick (which times blocked waits no finer)
    still wakes for a key added meanwhile, rather than sleep out its time: a reconciler
    job's last keys waited up to 100 ms so."""
    q = handles()
    adder = threading.Timer(0.005, lambda: q.add(["a"]))
    start = time.monotonic()
    adder.start()
    lease = q.get("w", block_seconds=0.095)
    elapsed = time.monotonic() - start
    adder.join()
    assert lease is not None and lease.key == "a"
    assert elapsed < 0.09, f"handed out after {elapsed * 1000:.0f} ms, at the end of the wait"


def test_concurrent_workers_never_hold_the_same_key(handles: Handles) -> None:
    holding: dict[str, str] = {}
    violations: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()

    def work(name: str) -> None:
        q = handles()
        while not stop.is_set():
            lease = q.get(name, block_seconds=0.2)
            if lease is None:
                continue
            with lock:
                if lease.key in holding:
                    violations.append(lease.key)
                holding[lease.key] = name
            time.sleep(0.0005)
            with lock:
                del holding[lease.key]
            q.done(lease)

    workers = [threading.Thread(target=work, args=(f"w{i}",)) for i in range(3)]
    for w in workers:
        w.start()
    adder, rng = handles(), random.Random(7)
    for _ in range(1000):
        adder.add([f"ns/ds{rng.randrange(20)}"])
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        s = adder.stats()
        if s.dirty == 0 and s.processing == 0:
            break
        time.sleep(0.02)
    stop.set()
    for w in workers:
        w.join(5)
    assert not violations
    s = adder.stats()
    assert (s.depth, s.dirty, s.processing) == (0, 0, 0)  # nothing lost


def test_random_operations_keep_the_invariants(handles: Handles) -> None:
    q = handles()
    rng = random.Random(42)
    leases: list[Lease] = []
    for _ in range(300):
        op = rng.randrange(6)
        key = f"k{rng.randrange(6)}"
        if op == 0:
            q.add([key, f"k{rng.randrange(6)}"])
        elif op == 1:
            q.add_after(key, rng.choice([0, 0.001, 60]))
        elif op == 2 or op == 3:
            lease = q.get(f"w{rng.randrange(3)}")
            if lease is not None:
                assert all(x.key != lease.key for x in leases), "handed out twice"
                leases.append(lease)
        elif op == 4 and leases:
            assert q.done(leases.pop(rng.randrange(len(leases))))
        elif op == 5:
            q.add_rate_limited(key)
        if rng.random() < 0.3:
            q.add_nodes({key: [f"n{rng.randrange(4)}"]})
        check_invariants(q)


def test_the_redis_queue_hands_out_what_the_reference_does_step_by_step(
        redis_url: str, prefix: str) -> None:
    """Random adds, hinted adds, gets, dones and done-then-gets sent to both queues at once:
    after every step they hold the same queue (in order), dirty and processing keys, and
    hand out the same keys with the same hints (no delay falls due and no lease runs out)."""
    memory = InMemoryWorkQueue(lease_seconds=60.0)
    in_redis = RedisWorkQueue(connect(redis_url), Keys(prefix), lease_seconds=60.0)
    rng = random.Random(7)
    held: list[tuple[Lease, Lease]] = []

    def same(a: Lease | None, b: Lease | None) -> tuple[Lease, Lease] | None:
        assert (a is None) == (b is None)
        if a is None or b is None:
            return None
        assert (a.key, a.worker, a.full, a.nodes) == (b.key, b.worker, b.full, b.nodes)
        return a, b

    for _ in range(400):
        op = rng.randrange(7)
        key = f"k{rng.randrange(5)}"
        worker = f"w{rng.randrange(2)}"
        if op == 0:
            for q in (memory, in_redis):
                q.add([key])
        elif op == 1:
            nodes = {key: [f"n{rng.randrange(3)}"]}
            for q in (memory, in_redis):
                q.add_nodes(nodes)
        elif op == 2:
            for q in (memory, in_redis):
                q.add_after(key, 60)
        elif op == 3:
            pair = same(memory.get(worker), in_redis.get(worker))
            if pair:
                held.append(pair)
        elif op in (4, 5) and held:
            a, b = held.pop(rng.randrange(len(held)))
            if op == 4:
                assert memory.done(a) and in_redis.done(b)
            else:
                done_a, next_a, _ = memory.done_then_get(a, a.worker)
                done_b, next_b, _ = in_redis.done_then_get(b, b.worker)
                assert done_a and done_b
                pair = same(next_a, next_b)
                if pair:
                    held.append(pair)
        elif op == 6:
            keys = [key, f"k{rng.randrange(5)}"]
            for q in (memory, in_redis):
                q.add(keys)
        sm, sr = memory.state(), in_redis.state()
        assert (sm.queue, sm.dirty, sm.processing) == (sr.queue, sr.dirty, sr.processing)
        check_invariants(in_redis)


def test_stats_report_depth_and_counters(handles: Handles) -> None:
    q = handles()
    q.add(["a", "b", "c"])
    lease = take(q)
    s = q.stats()
    assert (s.depth, s.dirty, s.processing, s.waiting) == (2, 2, 1, 0)
    assert (s.adds_total, s.gets_total, s.done_total) == (3, 1, 0)
    assert not s.shutting_down
    assert s.longest_running_seconds >= 0.0
    q.done(lease)
    assert q.stats().done_total == 1
