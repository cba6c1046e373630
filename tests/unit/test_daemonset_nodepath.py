"""``planner.plan_nodes``, the sync of a few nodes, against ``planner.plan``: whenever the
per-node path does not ask for a full sync, it decides what a full plan of the same snapshot
decides (creates, deletes, events, backoff, requeue, status). Hypothesis drives random
clusters through random node and pod events, the per-DaemonSet index kept change by change
as the reconciler keeps it, and a simulated node agent that runs what the plans create."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from shared.daemonset import history, nodeindex, planner
from shared.daemonset import types as t
from shared.model import meta, podutil
from tests.unit.daemonset_fixtures import NOW, current_hash, make_pod, rolling, snapshot
from tests.unit.daemonset_strategies import blue_ds, node_of, node_ops, pod_fields, pod_of

Obj = dict[str, Any]

STRATEGIES = [rolling(1, 0), rolling(0, 1), rolling("30%", 0), {"type": "OnDelete"}]
NODES = 6  # n0..n5; pods may target n6, never a Node
POD_SLOTS = 12

node_st = node_ops(NODES, st.sampled_from(["blue", "blue", "red"]),
                   st.sampled_from([0, 0, 0, 1, 2]))
pod_fields_st = pod_fields(
    NODES,
    # no orphans: a full sync adopts them (their events queue it), the index does not
    # count them, so a per-node sync would count other pods than a full one
    ["ds", "ds", "ds", "other", "unmatched", "elsewhere"],
    st.sampled_from([1, 30, 100, 100]),
    phase=st.sampled_from(["Running", "Running", "Running", "Pending", "Failed", "Succeeded"]),
    ready=st.sampled_from([True, True, False]),
    deleting=st.sampled_from([False, False, False, True]),
    new=st.sampled_from([True, True, True, False]),
)
op_st = st.one_of(
    node_st,
    st.tuples(st.just("rmnode"), st.integers(0, NODES - 1)),
    st.tuples(st.just("pod"), st.integers(0, POD_SLOTS - 1), pod_fields_st),
    st.tuples(st.just("rmpod"), st.integers(0, POD_SLOTS - 1)),
    st.tuples(st.just("converge")),
    st.tuples(st.just("converge")),
)


def the_ds(strategy: int, min_ready: int) -> Obj:
    return blue_ds(min_ready, STRATEGIES[strategy])


def decided(plan: t.Plan) -> Obj:
    """What the two paths must agree on."""
    sync = plan.sync_nodes or t.SyncNodes(creates=[], deletes=[])
    return {
        "creates": [(c.node, meta.name(c.pod)) for c in sync.creates],
        "deletes": [(d.name, d.node) for d in sync.deletes],
        "events": [(e.type, e.reason, e.message) for e in plan.events],
        "backoff": [(b.key, b.entry) for b in plan.backoff],
        "requeue_after": plan.requeue_after,
        "status": plan.status,
        "unavailable": plan.unavailable,
        "error": plan.error,
    }


class Cluster:
    """Nodes and pods, with the DaemonSet's index kept change by change."""

    def __init__(self, ds: Obj, nodes: list[Obj], pods: list[Obj]) -> None:
        self.ds = ds
        self.hash = current_hash(ds)
        self.revisions = [history.new_revision(ds, self.hash, 1)]
        self.nodes = {meta.name(n): n for n in nodes}
        self.pods = {meta.key(p): p for p in pods}
        self.index = nodeindex.DaemonSetIndex(ds, self.hash, nodes, pods)

    def put(self, obj: Obj) -> set[str]:
        """A Node or Pod added or changed (see ``event``)."""
        kind = obj["kind"]
        return self.event(kind, meta.name(obj) if kind == "Node" else meta.key(obj), obj)

    def remove(self, kind: str, key: str) -> set[str]:
        """A Node (``key``: its name) or Pod (``key``: namespace/name) deleted (see ``event``)."""
        return self.event(kind, key, None)

    def event(self, kind: str, key: str, new: Obj | None) -> set[str]:
        """One event of a Node or Pod (``new`` None: deleted) in the cluster's objects and in
        the index, as the reconciler's cache feeds it; returns the nodes the event hints: the
        node, or the nodes the pod targets before and after."""
        objects = self.nodes if kind == "Node" else self.pods
        old = objects.pop(key, None)
        if new is not None:
            objects[key] = new
        if kind == "Node":
            if new is None:
                self.index.remove_node(key)
            else:
                self.index.set_node(new)
            return {key}
        if new is None:
            self.index.remove_pod(key)
        else:
            self.index.set_pod(new)
        return {n for p in (old, new) if p is not None and (n := podutil.target_node(p))}

    def in_namespace(self) -> list[Obj]:
        return [p for p in self.pods.values() if meta.namespace(p) == meta.namespace(self.ds)]

    def full(self, now: float = NOW, satisfied: bool = True) -> t.Snapshot:
        return snapshot(self.ds, list(self.nodes.values()), self.in_namespace(),
                        revisions=self.revisions, expectations_satisfied=satisfied, now=now)

    def per_node(self, nodes: set[str], now: float = NOW, satisfied: bool = True
                 ) -> t.Plan | None:
        snap = snapshot(self.ds, [n for name, n in self.nodes.items() if name in nodes],
                        [p for p in self.in_namespace() if podutil.target_node(p) in nodes],
                        revisions=self.revisions, expectations_satisfied=satisfied, now=now)
        names = {meta.name(p) for p in self.in_namespace()}
        return planner.plan_nodes(snap, nodes, self.index, names)

    def converge(self, plan: t.Plan) -> set[str]:
        """The node agent runs what ``plan`` created (ready long enough) and the deleted pods
        go; returns the nodes touched (their events' hints)."""
        touched: set[str] = set()
        for create in (plan.sync_nodes.creates if plan.sync_nodes else []):
            pod = dict(create.pod)
            pod["metadata"] = {**pod["metadata"], "uid": f"uid-{meta.name(pod)}",
                               "creationTimestamp": "2023-11-14T21:00:00Z"}
            pod["status"] = {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2023-11-14T21:00:00Z"}]}
            self.put(pod)
            touched.add(create.node)
        for delete in (plan.sync_nodes.deletes if plan.sync_nodes else []):
            self.remove("Pod", f"{delete.namespace}/{delete.name}")
            touched.add(delete.node)
        return touched


def check(cluster: Cluster, hinted: set[str], stats: dict[str, int]) -> None:
    for now in (NOW, NOW + 3):
        full = planner.plan(cluster.full(now))
        per = cluster.per_node(hinted, now)
        stats["asked"] += 1
        if per is None:
            continue
        stats["per-node"] += 1
        assert per.nodes == sorted(hinted)
        assert decided(per) == decided(full), (hinted, decided(per), decided(full))
        assert not full.history and not full.cleanup
        # a full sync also releases the pods of other nodes it does not count (nor does the
        # index): their own events queued it a full sync already
        assert all(not c.adopt for c in full.claims)
        for node in hinted:
            assert per.reasons.get(node) == full.reasons.get(node)
    # pending expectations always need the full sync (status only, observedGeneration kept)
    assert cluster.per_node(hinted, satisfied=False) is None


STATS = {"asked": 0, "per-node": 0}


@settings(max_examples=300, deadline=None)
@given(
    strategy=st.integers(0, len(STRATEGIES) - 1),
    min_ready=st.sampled_from([0, 0, 5]),
    initial_nodes=st.lists(node_st, max_size=NODES),
    initial_pods=st.lists(st.tuples(st.integers(0, POD_SLOTS - 1), pod_fields_st), max_size=8),
    ops=st.lists(op_st, max_size=20),
)
def test_the_per_node_path_decides_what_a_full_sync_decides(
    strategy: int, min_ready: int, initial_nodes: list[Any], initial_pods: list[Any],
    ops: list[Any]
) -> None:
    ds = the_ds(strategy, min_ready)
    nodes = {f"n{i}": node_of(i, c, tt) for _, i, c, tt in initial_nodes}
    pods = {f"p{j}": pod_of(ds, j, p) for j, p in initial_pods}
    cluster = Cluster(ds, list(nodes.values()), list(pods.values()))
    for op in ops:
        if op[0] == "node":
            hinted = cluster.put(node_of(*op[1:]))
        elif op[0] == "rmnode":
            hinted = cluster.remove("Node", f"n{op[1]}")
        elif op[0] == "pod":
            hinted = cluster.put(pod_of(ds, op[1], op[2]))
        elif op[0] == "rmpod":
            hinted = cluster.remove("Pod", f"default/p{op[1]}")
        else:
            hinted = cluster.converge(planner.plan(cluster.full()))
        for asked in (hinted or {"n0"}, set()):  # set(): a sync of no node (a status change)
            check(cluster, asked, STATS)
            # the reconciler widens a sync to the few other nodes that are not steady
            widened = cluster.index.widened(asked, 2)
            if widened is not None and widened != asked:
                check(cluster, set(widened), STATS)


def test_the_property_run_often_takes_the_per_node_path() -> None:
    """Guards the test above against asking only questions that need a full sync."""
    stats = {"asked": 0, "per-node": 0}
    ds = the_ds(0, 0)
    cluster = Cluster(ds, [node_of(i, "blue", 0) for i in range(4)], [])
    cluster.converge(planner.plan(cluster.full()))
    for i in range(4, 8):
        cluster.put(node_of(i, "blue", 0))
        check(cluster, {f"n{i}"}, stats)
        plan = cluster.per_node({f"n{i}"})
        assert plan is not None
        cluster.converge(plan)
    assert stats["per-node"] == stats["asked"] == 8


# ---- one case each ---------------------------------------------------------------------------


def steady_cluster(ds: Obj, count: int = 4) -> Cluster:
    cluster = Cluster(ds, [node_of(i, "blue", 0) for i in range(count)], [])
    cluster.converge(planner.plan(cluster.full()))
    assert planner.plan(cluster.full()).sync_nodes == t.SyncNodes(creates=[], deletes=[])
    return cluster


def test_a_node_added_to_a_steady_daemonset_gets_its_pod_from_the_per_node_path() -> None:
    cluster = steady_cluster(the_ds(0, 0))
    cluster.put(node_of(9, "blue", 0))
    plan = cluster.per_node({"n9"})
    assert plan is not None and plan.nodes == ["n9"]
    assert [c.node for c in (plan.sync_nodes or t.SyncNodes([], [])).creates] == ["n9"]
    assert plan.reasons == {"n9": planner.REASON_CREATE}
    assert plan.status is not None and plan.status["desiredNumberScheduled"] == 5
    assert decided(plan) == decided(planner.plan(cluster.full()))


def test_a_node_relabelled_away_loses_its_pod_by_the_per_node_path() -> None:
    cluster = steady_cluster(the_ds(0, 0))
    cluster.put(node_of(2, "red", 0))
    plan = cluster.per_node({"n2"})
    assert plan is not None
    assert [d.node for d in (plan.sync_nodes or t.SyncNodes([], [])).deletes] == ["n2"]
    assert decided(plan) == decided(planner.plan(cluster.full()))


def test_a_removed_node_loses_its_unbound_pod_then_counts_no_more() -> None:
    cluster = steady_cluster(the_ds(0, 0))
    cluster.remove("Node", "n1")
    plan = cluster.per_node({"n1"})  # its pod names it by affinity only: the sync deletes it
    assert plan is not None
    assert [d.node for d in (plan.sync_nodes or t.SyncNodes([], [])).deletes] == ["n1"]
    assert decided(plan) == decided(planner.plan(cluster.full()))
    cluster.converge(plan)
    plan = cluster.per_node({"n1"})
    assert plan is not None and plan.status is not None
    assert plan.status["desiredNumberScheduled"] == 3
    assert decided(plan) == decided(planner.plan(cluster.full()))


def test_global_steps_ask_for_a_full_sync() -> None:
    ds = the_ds(0, 0)
    cluster = steady_cluster(ds)
    cluster.put(node_of(9, "blue", 0))
    assert cluster.per_node({"n9"}, satisfied=False) is None  # expectations pending
    other = next(p for p in cluster.pods.values() if podutil.target_node(p) == "n0")
    cluster.remove("Pod", meta.key(other))
    old = make_pod("old", "n0", ds=ds, hash="old", ready_since=NOW - 100)
    cluster.put(old)
    assert cluster.per_node({"n9"}) is None  # an old pod elsewhere: the rollout's
    assert cluster.per_node({"n0", "n9"}) is None  # an old pod here: the rollout's too
    cluster.remove("Pod", meta.key(old))
    cluster.put(other)
    assert cluster.per_node({"n9"}) is not None
    cluster.revisions = []  # no revision yet: history must create it
    assert cluster.per_node({"n9"}) is None


def test_an_index_told_of_an_older_object_of_the_same_spec_is_used_with_the_newer_status(
) -> None:
    cluster = steady_cluster(the_ds(0, 0))
    cluster.put(node_of(9, "blue", 0))
    told = cluster.index.ds
    # a newer object of the DaemonSet the index was not told of: its status and generation
    # (an update strategy change), not its template
    cluster.ds = {**told, "metadata": {**told["metadata"], "generation": 2},
                  "spec": {**told["spec"], "updateStrategy": rolling(2, 0)},
                  "status": {"observedGeneration": 1, "numberReady": 4}}
    assert cluster.index.fits(cluster.ds) and cluster.index.ds is told
    plan = cluster.per_node({"n9"})
    assert plan is not None and plan.status is not None
    assert plan.status["observedGeneration"] == 2
    assert decided(plan) == decided(planner.plan(cluster.full()))


def test_an_index_of_another_spec_is_refused() -> None:
    cluster = steady_cluster(the_ds(0, 0))
    cluster.put(node_of(9, "blue", 0))
    # a spec the index's state derives from: with minReadySeconds longer than the pods
    # have been ready none is available, where the index counts all available
    cluster.ds = the_ds(0, 10_000)
    assert current_hash(cluster.ds) == cluster.index.hash  # the same revision
    assert not cluster.index.fits(cluster.ds)
    full = planner.plan(cluster.full())
    assert full.status is not None and full.status.get("numberAvailable", 0) == 0  # omitempty
    assert cluster.index.counts(NOW)[5] == 4
    assert cluster.per_node({"n9"}) is None


def test_a_node_added_while_the_one_before_waits_for_its_pod_joins_that_nodes_sync() -> None:
    """Nodes added one after another: the sync of the first node's pod event finds the next
    node without a pod. Widened to that node (``DaemonSetIndex.widened``), the per-node plan
    creates its pod, as the full sync it would otherwise go to does."""
    ds = the_ds(0, 0)
    cluster = steady_cluster(ds)
    cluster.put(node_of(8, "blue", 0))
    first = cluster.per_node({"n8"})
    assert first is not None
    cluster.converge(first)
    cluster.put(node_of(9, "blue", 0))
    assert cluster.per_node({"n8"}) is None  # n9 is not steady: alone, a full sync
    widened = cluster.index.widened({"n8"}, 1)
    assert widened == {"n8", "n9"}
    plan = cluster.per_node(set(widened))
    assert plan is not None and plan.nodes == ["n8", "n9"] and plan.sync_nodes is not None
    assert [c.node for c in plan.sync_nodes.creates] == ["n9"]
    assert decided(plan) == decided(planner.plan(cluster.full()))


def test_a_node_added_beside_pods_not_yet_available_takes_the_per_node_path() -> None:
    """Pods not ready, or ready inside minReadySeconds, need nothing of a sync: a node added
    meanwhile (the next of many added one at a time) is synced alone, the unavailable
    breakdown of every node from the index."""
    ds = the_ds(0, 5)
    cluster = steady_cluster(ds)
    pods = {podutil.target_node(p): p for p in cluster.pods.values()}
    cluster.put(make_pod(meta.name(pods["n0"]), "n0", ds=ds, hash=current_hash(ds),
                         ready=False, uid=meta.uid(pods["n0"])))
    cluster.put(make_pod(meta.name(pods["n1"]), "n1", ds=ds, hash=current_hash(ds),
                         ready_since=NOW - 1, uid=meta.uid(pods["n1"])))
    cluster.put(node_of(9, "blue", 0))
    plan = cluster.per_node({"n9"})
    assert plan is not None
    assert plan.unavailable == {"MinReadySeconds": ["n1"], "NoPod": ["n9"],
                                "PodNotReady": ["n0"]}
    assert decided(plan) == decided(planner.plan(cluster.full()))
    cluster.converge(plan)
    status_only = cluster.per_node(set())  # its status written: a sync of no node
    assert status_only is not None
    assert status_only.unavailable == {"MinReadySeconds": ["n1"], "PodNotReady": ["n0"]}
    assert decided(status_only) == decided(planner.plan(cluster.full()))
