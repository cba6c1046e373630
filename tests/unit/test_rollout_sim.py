"""Rolling updates step by step (spec §d): the pure planner driven by a simulated cluster on a
fake clock. The simulation plays the rest of the system faithfully enough to count exactly:
the controller syncs after every change it would be told about (its own writes, the kubelet's
pod updates) and when a requeue falls due — the planner's status requeue and the watcher's
pod-update handler (``services.watcher.handlers``, minReadySeconds + 1 s after a pod turns
Ready) — and at no other time. A simulated kubelet binds each new pod, makes it Ready
``ready_delay`` seconds later (never, for an image in ``never_ready``) and removes a deleted
pod after ``grace`` seconds. After every change the budget is checked: nodes without an
available pod ≤ maxUnavailable, nodes running an old and a new pod ≤ maxSurge.
"""

from __future__ import annotations

import copy
import heapq
import itertools
from dataclasses import dataclass, field
from typing import Any

import pytest

from services.watcher import handlers
from shared.daemonset import dsutil, planner, rollout
from shared.daemonset import types as t
from shared.model import meta, podutil
from tests.unit.daemonset_fixtures import NOW, make_ds, make_nodes, rolling, snapshot, ts

Obj = dict[str, Any]


@dataclass
class Wave:
    """One sync that created or deleted pods."""

    at: float
    created: int
    deleted: int
    deleted_nodes: list[str]


@dataclass
class Cluster:
    """One DaemonSet on ``nodes`` nodes, its pods and revisions, a kubelet and a clock."""

    ds: Obj
    node_count: int
    ready_delay: float = 0.0
    grace: float = 0.0
    never_ready: tuple[str, ...] = ()
    now: float = NOW
    pods: dict[str, Obj] = field(default_factory=dict)
    revisions: dict[str, Obj] = field(default_factory=dict)
    waves: list[Wave] = field(default_factory=list)
    syncs: int = 0
    max_unavailable_seen: int = 0
    max_surge_seen: int = 0
    checking: bool = False  # check the budget after every change (during a rollout)
    _timers: list[tuple[float, int, str, str]] = field(default_factory=list)
    _seq: itertools.count[int] = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        self.nodes = make_nodes(self.node_count)
        self._uid = itertools.count(1)

    # ---- the user ---------------------------------------------------------------------------

    def set_image(self, image: str) -> None:
        """A template change as the store makes it: generation and templateGeneration + 1."""
        spec = self.ds["spec"]["template"]["spec"]
        spec["containers"][0]["image"] = image
        md = self.ds["metadata"]
        md["generation"] += 1
        ann = md["annotations"]
        ann[dsutil.GENERATION_ANNOTATION] = str(int(ann[dsutil.GENERATION_ANNOTATION]) + 1)

    def delete_pod(self, name: str) -> None:
        self._delete(name)

    # ---- reads --------------------------------------------------------------------------------

    def live_pods(self, node: str) -> list[Obj]:
        return [p for p in self.pods.values()
                if podutil.target_node(p) == node and not meta.is_being_deleted(p)]

    def hashes(self) -> dict[str, list[str]]:
        """Node → hash labels of its non-terminating pods."""
        return {meta.name(n): sorted(meta.labels(p).get(dsutil.HASH_LABEL, "")
                                     for p in self.live_pods(meta.name(n)))
                for n in self.nodes}

    def unavailable(self) -> int:
        """Nodes with no available, non-terminating daemon pod (the rolling-update meaning)."""
        min_ready = dsutil.min_ready_seconds(self.ds)
        return sum(1 for n in self.nodes
                   if not any(podutil.is_available(p, min_ready, self.now)
                              for p in self.live_pods(meta.name(n))))

    def surged(self) -> int:
        return sum(1 for n in self.nodes if len(self.live_pods(meta.name(n))) > 1)

    def current_hash(self) -> str:
        return planner.plan(self._snapshot()).hash

    # ---- the loop -----------------------------------------------------------------------------

    def run(self, until: float | None = None) -> None:
        """Sync, let the kubelet and timers move, until nothing is left to happen (or the
        clock passes ``until``; default: an hour from now)."""
        until = self.now + 3600 if until is None else until
        self._sync()
        while self._timers and self._timers[0][0] <= until:
            self.now = self._timers[0][0]
            due = []
            while self._timers and self._timers[0][0] <= self.now:
                due.append(heapq.heappop(self._timers))
            for _, _, what, name in due:
                if what != "sync":
                    self._kubelet(what, name)
            self._sync()

    def _later(self, delay: float, what: str, name: str = "") -> None:
        heapq.heappush(self._timers, (self.now + delay, next(self._seq), what, name))

    def _snapshot(self) -> t.Snapshot:
        return snapshot(self.ds, self.nodes, list(self.pods.values()),
                        revisions=list(self.revisions.values()), now=self.now)

    def _sync(self) -> None:
        """One controller sync, its actions applied; then syncs again while it acts (its own
        writes come back as events)."""
        for _ in range(100):
            plan = planner.plan(self._snapshot())
            self.syncs += 1
            acted = self._apply(plan)
            self._check()
            if not acted:
                return
        raise AssertionError("the controller keeps acting at one instant")

    def _apply(self, plan: t.Plan) -> bool:
        assert not plan.error, plan.error
        acted = False
        for a in [*plan.history, *plan.cleanup]:
            acted = True
            if isinstance(a, t.CreateRevision):
                cr = copy.deepcopy(a.revision)
                cr["metadata"]["uid"] = f"cr-{next(self._uid)}"
                assert meta.name(cr) not in self.revisions, "hash collision in the simulation"
                self.revisions[meta.name(cr)] = cr
            elif isinstance(a, t.UpdateRevision):
                cr = self.revisions[a.name]
                if a.revision is not None:
                    cr["revision"] = a.revision
                if a.labels is not None:
                    cr["metadata"]["labels"] = {**meta.labels(cr), **a.labels}
            elif isinstance(a, t.DeleteRevision):
                del self.revisions[a.name]
            else:
                raise AssertionError(f"unexpected history action {a}")
        created = deleted = 0
        deleted_nodes = []
        if plan.sync_nodes is not None:
            for c in plan.sync_nodes.creates:
                pod = copy.deepcopy(c.pod)
                pod["metadata"]["uid"] = f"pod-{next(self._uid)}"
                pod["metadata"]["creationTimestamp"] = ts(self.now)
                self.pods[meta.name(pod)] = pod
                created += 1
                self._later(0.0, "bind", meta.name(pod))
            for d in plan.sync_nodes.deletes:
                self._delete(d.name)
                deleted += 1
                deleted_nodes.append(d.node)
        if created or deleted:
            acted = True
            self.waves.append(Wave(self.now, created, deleted, sorted(deleted_nodes)))
        if plan.status is not None:
            self.ds["status"] = plan.status
        if plan.requeue_after is not None:
            self._later(plan.requeue_after, "sync")
        return acted

    def _delete(self, name: str) -> None:
        pod = self.pods[name]
        if self.grace <= 0 or not podutil.node_name(pod):
            del self.pods[name]
            return
        pod["metadata"]["deletionTimestamp"] = ts(self.now)
        self._later(self.grace, "remove", name)

    def _kubelet(self, what: str, name: str) -> None:
        pod = self.pods.get(name)
        if pod is None:
            return
        if what == "remove":
            del self.pods[name]
            return
        old = copy.deepcopy(pod)
        if what == "bind":
            pod["spec"]["nodeName"] = podutil.target_node(pod)
            pod["status"] = {"phase": "Pending"}
            images = [c["image"] for c in pod["spec"]["containers"]]
            if not any(i in self.never_ready for i in images):
                self._later(self.ready_delay, "ready", name)
        elif what == "ready":
            pod["status"] = {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": ts(self.now)}]}
        pod["metadata"]["resourceVersion"] = f"{next(self._seq)}-0"
        # the watcher's pod-update handler: the delayed enqueue of §b.2
        reaction = handlers.Reaction()
        dss = handlers.DaemonSets(get=lambda _k: self.ds, in_namespace=lambda _ns: [self.ds],
                                  all_=lambda: [self.ds])
        handlers.on_pod(reaction, dss, "MODIFIED", old, pod)
        for delay in reaction.enqueue_after.values():
            self._later(delay, "sync")

    def _check(self) -> None:
        if not self.checking:
            return
        max_surge, max_unavailable = rollout.budget(self.ds, self.node_count)
        unavailable, surged = self.unavailable(), self.surged()
        self.max_unavailable_seen = max(self.max_unavailable_seen, unavailable)
        self.max_surge_seen = max(self.max_surge_seen, surged)
        assert unavailable <= max_unavailable, (
            f"{unavailable} nodes unavailable at {self.now - NOW}s, budget {max_unavailable}")
        assert surged <= max_surge, f"{surged} nodes surged at {self.now - NOW}s"


def started(nodes: int, strategy: Obj, *, min_ready_seconds: int | None = None,
            **kwargs: Any) -> Cluster:
    """A cluster whose DaemonSet has rolled out (all pods available), then got a new image."""
    ds = make_ds(strategy=strategy, min_ready_seconds=min_ready_seconds)
    cluster = Cluster(ds, nodes, **kwargs)
    cluster.run()
    assert cluster.unavailable() == 0
    cluster.now += 3600  # long since available, whatever minReadySeconds is
    cluster.waves.clear()
    cluster.max_unavailable_seen = cluster.max_surge_seen = 0
    cluster.set_image("foo/bar:v2")
    cluster.checking = True
    return cluster


def rolled_out(cluster: Cluster) -> bool:
    new = cluster.current_hash()
    return all(h == [new] for h in cluster.hashes().values()) and cluster.unavailable() == 0


# ---- maxUnavailable (maxSurge 0): delete, then create ------------------------------------------


@pytest.mark.parametrize(
    ("nodes", "max_unavailable", "deletes"),
    [
        (15, 1, [1] * 15),
        (15, "10%", [2] * 7 + [1]),  # ceil(1.5) = 2
        (5, "10%", [1] * 5),  # ceil(0.5) = 1
        (15, "100%", [15]),
        (15, 4, [4, 4, 4, 3]),
    ],
)
def test_daemonset_updates_pods(
    nodes: int, max_unavailable: Any, deletes: list[int]
) -> None:
    cluster = started(nodes, rolling(max_unavailable, 0))
    cluster.run()
    assert rolled_out(cluster)
    assert [w.deleted for w in cluster.waves if w.deleted] == deletes
    assert [w.created for w in cluster.waves if w.created] == deletes  # manage refills
    assert all(not (w.created and w.deleted) for w in cluster.waves)
    budget = rollout.budget(cluster.ds, nodes)[1]
    assert cluster.max_unavailable_seen == budget


# ---- maxSurge (maxUnavailable 0): create, then delete --------------------------------------------


@pytest.mark.parametrize(
    ("nodes", "max_surge", "creates"),
    [
        (15, 1, [1] * 15),
        (15, "50%", [8, 7]),  # ceil(7.5) = 8
        (3, "50%", [2, 1]),
        (15, "100%", [15]),
    ],
)
def test_daemonset_updates_pods_with_max_surge(
    nodes: int, max_surge: Any, creates: list[int]
) -> None:
    cluster = started(nodes, rolling(0, max_surge), grace=2)
    cluster.run()
    assert rolled_out(cluster)
    assert [w.created for w in cluster.waves if w.created] == creates
    assert [w.deleted for w in cluster.waves if w.deleted] == creates
    assert cluster.max_unavailable_seen == 0  # old pods go only once new ones are available
    assert cluster.max_surge_seen == rollout.budget(cluster.ds, nodes)[0]


# ---- unavailable old pods go first ---------------------------------------------------------------


def _make_unready(cluster: Cluster, nodes: list[str]) -> None:
    for pod in cluster.pods.values():
        if podutil.target_node(pod) in nodes:
            pod["status"]["conditions"][0]["status"] = "False"


def test_daemonset_updates_old_pods_not_ready_first() -> None:
    cluster = started(10, rolling(1, 0))
    _make_unready(cluster, ["node-2", "node-7"])
    cluster.checking = False  # two are unavailable from the start
    cluster.run()
    # both unavailable old pods go at once, over the budget of 1, and no available one
    first = cluster.waves[0]
    assert (first.deleted, first.deleted_nodes) == (2, ["node-2", "node-7"])
    assert [w.deleted for w in cluster.waves if w.deleted] == [2] + [1] * 8
    assert rolled_out(cluster)


def test_daemonset_updates_counts_old_pods_not_ready_in_budget() -> None:
    cluster = started(10, rolling(3, 0))
    _make_unready(cluster, ["node-5"])
    cluster.run()
    first = cluster.waves[0]
    assert (first.deleted, first.deleted_nodes) == (3, ["node-0", "node-1", "node-5"])
    assert cluster.max_unavailable_seen == 3


def test_daemonset_updates_old_pods_not_ready_max_surge() -> None:
    cluster = started(10, rolling(0, 1), grace=2)
    _make_unready(cluster, ["node-3", "node-8"])
    cluster.checking = False  # two are unavailable from the start
    cluster.run()
    first = cluster.waves[0]
    assert (first.created, first.deleted) == (3, 0)  # node-3, node-8 and one candidate
    assert rolled_out(cluster)


# ---- minReadySeconds --------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", [rolling(1, 0), rolling(0, 1)])
def test_daemonset_updates_wait_min_ready_seconds_per_step(strategy: Obj) -> None:
    """With no other events, the requeues alone drive the rollout: a step every
    minReadySeconds + 1 s (the pod-update handler's delay), never earlier."""
    cluster = started(4, strategy, min_ready_seconds=5, ready_delay=2, grace=1)
    start = cluster.now
    cluster.run()
    assert rolled_out(cluster)
    key = "deleted" if strategy == rolling(1, 0) else "created"
    steps = [w.at - start for w in cluster.waves if getattr(w, key)]
    gaps = [b - a for a, b in itertools.pairwise(steps)]
    if key == "deleted":  # delete → gone after grace → create → Ready → available
        assert gaps == [1 + 2 + 5 + 1] * 3
    else:  # create → Ready → available → delete old + create next
        assert gaps == [2 + 5 + 1] * 3


def test_daemonset_updates_when_new_pod_is_not_ready() -> None:
    cluster = started(10, rolling(2, 0), never_ready=("foo/bar:v2",), grace=1)
    cluster.run()
    new = cluster.current_hash()
    updated = [n for n, h in cluster.hashes().items() if h == [new]]
    assert len(updated) == 2 and cluster.unavailable() == 2  # stuck: the budget is spent
    # the rollback (the old template again) recovers every node
    cluster.set_image("foo/bar")
    cluster.run()
    assert rolled_out(cluster)
    assert cluster.max_unavailable_seen == 2


# ---- OnDelete ---------------------------------------------------------------------------------


def test_on_delete_replaces_a_pod_only_when_it_is_deleted() -> None:
    cluster = started(5, {"type": "OnDelete"}, grace=1)
    old = cluster.hashes()["node-0"]
    cluster.run()
    assert cluster.waves == [] and all(h == old for h in cluster.hashes().values())
    victim = next(p for p in cluster.pods.values() if podutil.target_node(p) == "node-3")
    cluster.delete_pod(meta.name(victim))
    cluster.run()
    new = cluster.current_hash()
    assert cluster.hashes()["node-3"] == [new]
    assert all(h == old for n, h in cluster.hashes().items() if n != "node-3")
    assert [(w.created, w.deleted) for w in cluster.waves] == [(1, 0)]
