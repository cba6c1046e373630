"""Reading consistently from a lagging cache (ARCHITECTURE): a sync decides on state at least
as new as the log position its key was handed out at, and pod creation is idempotent, so a
replayed plan or a stale replica never puts a second pod of one revision on one node.

The reconcilers run in-process here (two of them, on one real Redis), so the test controls
exactly how stale each one's cache is; no watcher runs, the test observes expectations."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable

import pytest

from services.node_agent.lifecycle import new_node
from services.reconciler.executor import COMMIT_OPS, MAX_NAME_SALT, _whole_batches
from services.reconciler.sync import Reconciler
from shared.daemonset import planner, podtemplate
from shared.daemonset.types import Plan, Snapshot
from shared.model import meta
from shared.store import codec
from shared.store.backoff import RedisBackoff
from shared.store.client import Store, connect
from shared.store.expectations import RedisExpectations
from shared.store.keys import Keys
from shared.store.workqueue import RedisWorkQueue
from tests.integration import controller_kit as kit

KEY = "default/agent"
NODES = ["n1", "n2", "n3"]

Make = Callable[[str], Reconciler]


@pytest.fixture
def store(redis_url: str, prefix: str) -> Store:
    return Store(connect(redis_url), Keys(prefix))


@pytest.fixture
def queue(store: Store) -> RedisWorkQueue:
    return RedisWorkQueue(store.r, store.keys)


@pytest.fixture
def make(store: Store, queue: RedisWorkQueue) -> Make:
    def build(worker: str) -> Reconciler:
        return Reconciler(store, queue, RedisExpectations(store.r, store.keys),
                          RedisBackoff(store.r, store.keys), worker=worker)

    return build


def _cluster(store: Store) -> None:
    for n in NODES:
        store.create(new_node(n))
    store.apply(kit.daemonset("agent"))


def _sync_next(queue: RedisWorkQueue, r: Reconciler) -> str:
    """Hand the key to ``r`` as the worker loop does and sync it; returns the lease position."""
    queue.add([KEY])
    lease = queue.get(r.worker)
    assert lease is not None and lease.key == KEY
    r.sync(KEY, lease.position)
    queue.done(lease)
    return lease.position


def _observe_all(store: Store) -> None:
    """What the watcher does for the creates it sees: here, all of them at once."""
    exp = RedisExpectations(store.r, store.keys)
    entry = exp.get(KEY)
    if entry is not None:
        exp.observe([(KEY, max(entry.add, 0), max(entry.delete, 0))])


def test_decision_position_is_at_least_the_lease_position(store: Store, queue: RedisWorkQueue,
                                                          make: Make) -> None:
    worker = make("a")
    worker.cache.sync()  # the cache is older than everything below
    _cluster(store)
    position = _sync_next(queue, worker)
    [record] = kit.decisions(store, KEY)
    assert codec.id_ge(record["position"], position)
    assert len(record["actions"]["creates"]) == 3
    assert kit.nodes_of(kit.owned_pods(store, KEY)) == NODES


def test_a_replica_with_a_stale_cache_catches_up_before_deciding(store: Store,
                                                               queue: RedisWorkQueue,
                                                               make: Make) -> None:
    _cluster(store)
    stale, lagging = make("stale"), make("lagging")
    stale.cache.sync()  # both see the DaemonSet and no pods
    lagging.cache.sync()
    _sync_next(queue, make("fresh"))
    assert kit.nodes_of(kit.owned_pods(store, KEY)) == NODES
    _observe_all(store)
    # deciding without reading up to a lease position, a lagging replica plans three creates
    unread = planner.plan(lagging.snapshot(KEY, lagging.cache.position)).sync_nodes
    assert unread is not None and len(unread.creates) == 3

    position = _sync_next(queue, stale)
    assert codec.id_ge(stale.cache.position, position)
    assert [d for d in kit.decisions(store, KEY) if d["worker"] == "stale"] == []
    assert kit.nodes_of(kit.owned_pods(store, KEY)) == NODES


def _execute_twice(store: Store, make: Make, nodes: list[str]) -> None:
    """Plan once and execute that plan twice: the first creates a pod per node, the second,
    its names taken, creates none and still succeeds."""
    worker = make("a")
    snap = worker.snapshot(KEY, store.log_tip())
    plan = planner.plan(snap)
    assert plan.sync_nodes is not None and len(plan.sync_nodes.creates) == len(nodes)
    first = worker.executor.execute(plan, snap)
    again = worker.executor.execute(plan, snap)
    assert (first.created, again.created) == (len(nodes), 0)
    assert again.ok, again.errors
    assert kit.nodes_of(kit.owned_pods(store, KEY)) == nodes


def test_replaying_the_same_plan_creates_no_second_pod(store: Store, make: Make) -> None:
    _cluster(store)
    _execute_twice(store, make, NODES)
    assert kit.events(store, KEY, "FailedCreate") == []


def test_a_stale_plan_executed_late_creates_no_second_pod(store: Store, queue: RedisWorkQueue,
                                                          make: Make) -> None:
    _cluster(store)
    stale = make("stale")
    stale_snap = stale.snapshot(KEY, store.log_tip())  # taken before any pod exists
    stale_plan = planner.plan(stale_snap)
    _sync_next(queue, make("fresh"))
    before = {meta.uid(p) for p in kit.owned_pods(store, KEY)}
    assert len(before) == 3
    outcome = stale.executor.execute(stale_plan, stale_snap)
    assert outcome.created == 0 and outcome.ok, outcome.errors
    assert {meta.uid(p) for p in kit.owned_pods(store, KEY)} == before


def test_a_worker_whose_lease_ran_out_creates_no_second_pod(store: Store, make: Make) -> None:
    """A worker stalls between its decision and its creates, past its lease; the key goes to
    another worker, which decides later (on a newer position: other names) and creates the
    pods. The stalled worker's creates are fenced by its lease: none is written."""
    _cluster(store)
    queue = RedisWorkQueue(store.r, store.keys, lease_seconds=0.2)
    queue.add([KEY])
    stalled = make("stalled")
    lease = queue.get(stalled.worker)
    assert lease is not None
    snap = stalled.snapshot(KEY, lease.position)
    stalled_plan = planner.plan(snap)
    store.apply(kit.daemonset("unrelated", "elsewhere"))  # the log moves on meanwhile
    fresh = make("fresh")
    taken = queue.get(fresh.worker, block_seconds=5)
    assert taken is not None and taken.redelivered
    assert fresh.sync(KEY, taken.position, taken.redelivered, taken.token).ok
    queue.done(taken)
    pods = kit.owned_pods(store, KEY)
    assert kit.nodes_of(pods) == NODES
    assert stalled_plan.sync_nodes is not None
    stalled_names = {c.pod["metadata"]["name"] for c in stalled_plan.sync_nodes.creates}
    assert stalled_names.isdisjoint(meta.name(p) for p in pods)  # create-if-absent alone
    outcome = stalled.executor.execute(stalled_plan, snap, lease.token)
    assert outcome.created == 0
    assert outcome.errors and "lost the lease of default/agent" in outcome.errors[0]
    assert {meta.uid(p) for p in kit.owned_pods(store, KEY)} == {meta.uid(p) for p in pods}


def test_a_key_redelivered_after_its_holder_died_is_not_held_by_its_expectations(
        store: Store, make: Make) -> None:
    """A worker killed mid-sync leaves expectations for creates it never made; the next
    holder must not wait the five minutes until they expire (no event will lower them)."""
    _cluster(store)
    queue = RedisWorkQueue(store.r, store.keys, lease_seconds=0.2)
    queue.add([KEY])
    dead = queue.get("dead")
    assert dead is not None
    RedisExpectations(store.r, store.keys).set(KEY, len(NODES), 0, time.time())  # then killed
    alive = make("alive")
    lease = queue.get(alive.worker, block_seconds=5)
    assert lease is not None and lease.key == KEY and lease.redelivered
    held = alive.sync(KEY, lease.position)  # as if not told: the expectations hold it back
    assert (held.created, kit.owned_pods(store, KEY)) == (0, [])
    result = alive.sync(KEY, lease.position, lease.redelivered)
    assert result.ok and result.created == len(NODES), result
    assert kit.nodes_of(kit.owned_pods(store, KEY)) == NODES


# ---- a sync of one pod: the pod in the commit of its Events --------------------------------


def _one_node(store: Store) -> None:
    store.create(new_node("n1"))
    store.apply(kit.daemonset("agent"))


def _counting_commits(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The kinds of each commit's ops, from now on."""
    commits: list[list[str]] = []
    original = store.commit

    def counted(ops, *args, **kwargs):  # type: ignore[no-untyped-def]
        commits.append([op.kind for op in ops])
        return original(ops, *args, **kwargs)

    monkeypatch.setattr(store, "commit", counted)
    return commits


def test_a_sync_of_one_pod_writes_it_with_its_events_and_decision_in_one_commit(
        store: Store, queue: RedisWorkQueue, make: Make,
        monkeypatch: pytest.MonkeyPatch) -> None:
    _one_node(store)
    worker = make("a")
    queue.add([KEY])
    lease = queue.get(worker.worker) or pytest.fail("no key")
    commits = _counting_commits(store, monkeypatch)
    result = worker.sync(KEY, lease.position, lease.redelivered, lease.token)
    assert result.ok and result.created == 1, result.error
    # the revision first (a new DaemonSet), then the pod, its Event and the decision record
    assert commits == [["ControllerRevision"], ["Pod", "Event", "DaemonSet"]]
    assert kit.nodes_of(kit.owned_pods(store, KEY)) == ["n1"]
    assert len(kit.events(store, KEY, "SuccessfulCreate")) == 1
    assert len(kit.decisions(store, KEY)) == 1


def test_a_one_pod_plan_replayed_creates_no_second_pod_and_reports_none_created(
        store: Store, make: Make) -> None:
    _one_node(store)
    _execute_twice(store, make, ["n1"])  # one pod: written with its Event, then found taken
    assert len(kit.events(store, KEY, "SuccessfulCreate")) == 1
    assert kit.events(store, KEY, "FailedCreate") == []


def test_a_one_pod_plan_of_a_lost_lease_writes_no_pod_and_says_so(store: Store,
                                                                  make: Make) -> None:
    _one_node(store)
    queue = RedisWorkQueue(store.r, store.keys, lease_seconds=0.2)
    queue.add([KEY])
    stalled = make("stalled")
    lease = queue.get(stalled.worker) or pytest.fail("no key")
    snap = stalled.snapshot(KEY, lease.position)
    plan = planner.plan(snap)
    taken = queue.get("other", block_seconds=5)  # the lease ran out: reclaimed
    assert taken is not None and taken.redelivered
    outcome = stalled.executor.execute(plan, snap, lease.token)
    assert outcome.created == 0
    assert outcome.errors and "lost the lease of default/agent" in outcome.errors[0]
    assert kit.owned_pods(store, KEY) == []
    assert kit.events(store, KEY, "SuccessfulCreate") == []


# ---- slow start: the batches of a sync's creates in one commit -----------------------------

SEVEN = [f"n{i}" for i in range(1, 8)]  # batches of 1, 2 and 4 creates


def _plan_for_seven(store: Store, make: Make) -> tuple[Reconciler, Snapshot, Plan]:
    for n in SEVEN:
        store.create(new_node(n))
    store.apply(kit.daemonset("agent"))
    worker = make("a")
    snap = worker.snapshot(KEY, store.log_tip())
    plan = planner.plan(snap)
    assert plan.sync_nodes is not None and len(plan.sync_nodes.creates) == len(SEVEN)
    return worker, snap, plan


def _take_names(store: Store, snap: Snapshot, plan: Plan, index: int, salts: range) -> None:
    """Pods of no DaemonSet under the names the plan's create ``index`` would try."""
    assert plan.sync_nodes is not None and snap.ds is not None
    create = plan.sync_nodes.creates[index]
    for salt in salts:
        pod = copy.deepcopy(create.pod)
        pod["metadata"] = {"namespace": "default", "labels": {"app": "other"},
                           "name": podtemplate.pod_name(snap.ds, create.node, plan.hash, salt,
                                                        snap.position)}
        store.create(pod)


def _pod_commits(commits: list[list[str]]) -> list[int]:
    return [len(kinds) for kinds in commits if set(kinds) == {"Pod"}]


def test_a_sync_writes_its_slow_start_batches_of_creates_in_one_commit(
        store: Store, make: Make, monkeypatch: pytest.MonkeyPatch) -> None:
    worker, snap, plan = _plan_for_seven(store, make)
    commits = _counting_commits(store, monkeypatch)
    outcome = worker.executor.execute(plan, snap)
    assert outcome.ok and outcome.created == len(SEVEN), outcome.errors
    assert _pod_commits(commits) == [7]
    assert kit.nodes_of(kit.owned_pods(store, KEY)) == SEVEN


def test_a_name_taken_in_a_batch_is_retried_and_the_later_batches_go_on(
        store: Store, make: Make, monkeypatch: pytest.MonkeyPatch) -> None:
    worker, snap, plan = _plan_for_seven(store, make)
    _take_names(store, snap, plan, 1, range(1))  # in the second batch
    commits = _counting_commits(store, monkeypatch)
    outcome = worker.executor.execute(plan, snap)
    assert outcome.ok and outcome.created == len(SEVEN), outcome.errors
    # the commit stopped after the second batch; its taken name went again with the next
    # salt, then the third batch
    assert _pod_commits(commits) == [7, 1, 4]
    assert kit.nodes_of(kit.owned_pods(store, KEY)) == SEVEN
    assert kit.events(store, KEY, "FailedCreate") == []


def test_a_failed_create_stops_the_slow_start_after_its_batch(
        store: Store, make: Make, monkeypatch: pytest.MonkeyPatch) -> None:
    worker, snap, plan = _plan_for_seven(store, make)
    _take_names(store, snap, plan, 1, range(MAX_NAME_SALT))  # every name it may try
    commits = _counting_commits(store, monkeypatch)
    outcome = worker.executor.execute(plan, snap)
    assert outcome.created == 2 and len(outcome.errors) == 1, outcome
    assert "Error creating" in outcome.errors[0]
    # its batch-mate is created, the third batch is not tried (upstream's slow start)
    assert kit.nodes_of(kit.owned_pods(store, KEY)) == ["n1", SEVEN[2]]
    assert len(_pod_commits(commits)) == MAX_NAME_SALT
    assert len(kit.events(store, KEY, "FailedCreate")) == 1
    entry = RedisExpectations(store.r, store.keys).get(KEY)
    assert entry is not None and (entry.add, entry.delete) == (2, 0)  # the two created


@pytest.mark.parametrize(("count", "first", "carried"), [
    (7, 1, 7),  # 1 + 2 + 4
    (250, 1, 250),  # a burst: the last batch (123 of 128) cut at the end
    (1000, 1, 255),  # 1 + 2 + ... + 128: the batch of 256 would pass COMMIT_OPS
    (1000, 256, 256),  # at least one batch
    (3, 8, 3),
])
def test_a_commit_carries_whole_slow_start_batches_within_its_size(count: int, first: int,
                                                                   carried: int) -> None:
    assert COMMIT_OPS == 500
    assert _whole_batches(count, first) == carried
