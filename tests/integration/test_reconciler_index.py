"""The reconciler keeps one ``DaemonSetIndex`` per DaemonSet, fed from its cache's changes
(real Redis; the reconciler runs in-process, the test observes expectations): after node
and pod changes the kept index equals one built from scratch from the cache, and a template
change gives a new index at the new revision."""

from __future__ import annotations

from typing import Any

import pytest

from services.node_agent.lifecycle import new_node
from services.reconciler import sync
from services.reconciler.sync import Reconciler
from shared.daemonset import inputs, nodeindex
from shared.model import meta
from shared.store.backoff import RedisBackoff
from shared.store.client import Store, connect
from shared.store.expectations import RedisExpectations
from shared.store.keys import Keys
from shared.store.workqueue import RedisWorkQueue
from tests.integration import controller_kit as kit

KEY = "default/agent"


def _sync(queue: RedisWorkQueue, r: Reconciler, store: Store) -> None:
    queue.add([KEY])
    lease = queue.get(r.worker)
    assert lease is not None and lease.key == KEY
    result = r.sync(KEY, lease.position)
    queue.done(lease)
    assert result.ok, result.error
    exp = RedisExpectations(store.r, store.keys)  # what the watcher would observe
    entry = exp.get(KEY)
    if entry is not None:
        exp.observe([(KEY, max(entry.add, 0), max(entry.delete, 0))])


def _synced_on(redis_url: str, prefix: str, *nodes: str
               ) -> tuple[Store, RedisWorkQueue, Reconciler]:
    """A reconciler in-process after its first sync of DaemonSet ``agent`` over ``nodes``."""
    store = Store(connect(redis_url), Keys(prefix))
    queue = RedisWorkQueue(store.r, store.keys)
    r = Reconciler(store, queue, RedisExpectations(store.r, store.keys),
                   RedisBackoff(store.r, store.keys), worker="a")
    for n in nodes:
        store.create(new_node(n))
    store.apply(kit.daemonset("agent"))
    _sync(queue, r, store)
    return store, queue, r


def _assert_current(r: Reconciler) -> nodeindex.DaemonSetIndex:
    """The kept index equals one built now from the cache's objects."""
    index = r.indexes.get(KEY)
    assert index is not None
    ds = r.cache.get("DaemonSet", KEY)
    assert ds is not None
    fresh = nodeindex.DaemonSetIndex(ds, index.hash, r.cache.list("Node"),
                                     r.cache.list("Pod", "default"))
    assert dict(index.decisions) == dict(fresh.decisions)
    assert dict(index.node_pods) == dict(fresh.node_pods)
    assert list(index.node_names()) == list(fresh.node_names())
    now = r.clock()
    assert index.status(now, True) == fresh.status(now, True)
    assert sorted(map(meta.key, index.claimed_pods())) == \
        sorted(map(meta.key, fresh.claimed_pods()))
    assert sorted(map(meta.key, index.claim_candidates())) == \
        sorted(map(meta.key, fresh.claim_candidates()))
    return index


def test_the_kept_index_follows_node_and_pod_changes(redis_url: str, prefix: str) -> None:
    # the first sync creates three pods; the index is built at its snapshot
    store, queue, r = _synced_on(redis_url, prefix, "n1", "n2", "n3")
    first = _assert_current(r)
    assert len(first.node_pods) == 0 and len(first.node_names()) == 3

    store.create(new_node("n4"))
    store.mutate("Node", "/n2", lambda n: {**n, "spec": {**n["spec"], "taints": [
        {"key": "dedicated", "effect": "NoExecute"}]}})
    _sync(queue, r, store)  # sees three pods, the new node, the taint
    assert r.indexes.get(KEY) is first  # kept, not rebuilt
    _assert_current(r)
    assert len(first.node_pods) == 3 and not first.decisions["n2"].should_run

    [pod] = [p for p in kit.owned_pods(store, KEY) if kit.nodes_of([p]) == ["n1"]]
    store.delete("Pod", meta.key(pod), grace_seconds=0)
    store.delete("Node", "/n3")
    _sync(queue, r, store)
    assert r.indexes.get(KEY) is first
    index = _assert_current(r)
    assert "n3" not in index.node_names()

    orphan = kit.owned_pods(store, KEY)[0]  # its twin without an owner, on the new node
    store.create({"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": "orphan", "namespace": "default",
                               "labels": dict(orphan["metadata"]["labels"])},
                  "spec": {**orphan["spec"], "nodeName": "n4"}})
    _sync(queue, r, store)  # sees the orphan: adopts it
    assert [p for p in _assert_current(r).claim_candidates() if meta.name(p) == "orphan"]
    _sync(queue, r, store)  # sees it adopted: a second pod on n4, one is deleted
    assert r.indexes.get(KEY) is first
    assert "default/orphan" in map(meta.key, _assert_current(r).claimed_pods())

    ds = store.get("DaemonSet", KEY)
    ds["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.k8s.io/pause:3.10"
    store.update(ds)
    _sync(queue, r, store)
    rolled = _assert_current(r)
    assert rolled is not first and rolled.hash != first.hash


def test_a_hinted_sync_takes_in_a_few_unsteady_nodes_and_past_that_goes_full_at_once(
        redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """While more other nodes are not steady than a per-node sync takes in (a DaemonSet
    fanning out), a sync handed out with node hints is a full sync at once: no per-node
    snapshot is built for a plan that would ask for the full one. Within that many, they
    join the sync's snapshot; once every other node is steady the hinted node is planned
    alone."""
    # the first sync creates both pods (not bound: neither node is steady)
    store, _queue, r = _synced_on(redis_url, prefix, "n1", "n2")
    built: list[list[str]] = []
    real = inputs.build_nodes

    def counting(key: str, nodes: Any, *args: Any) -> Any:
        built.append(sorted(nodes))
        return real(key, nodes, *args)

    monkeypatch.setattr(inputs, "build_nodes", counting)
    monkeypatch.setattr(sync, "WIDEN_MOST", 0)
    assert r.plan_nodes(KEY, r.cache.position, ["n1"]) is None and built == []
    monkeypatch.setattr(sync, "WIDEN_MOST", 1)
    r.plan_nodes(KEY, r.cache.position, ["n1"])
    assert built == [["n1", "n2"]]
    built.clear()
    position = r.cache.position
    for pod in kit.owned_pods(store, KEY):  # both pods bound and ready (as a node agent
        node = kit.nodes_of([pod])[0]        # writes it: a user's update may not): steady
        ran = {**pod, "spec": {**pod["spec"], "nodeName": node}, "status": {
            "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
        [result] = store.commit([store.status_op(ran, pod)])
        assert result.ok, result
        position = result.value
    r.plan_nodes(KEY, position, ["n1"])
    assert built == [["n1"]]


def test_a_full_sync_with_its_index_kept_lists_no_pod_and_no_node(
        redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full sync whose DaemonSet has an index that fits plans from it: its snapshot's
    listings of every Node and every Pod of the namespace are never made (at 50,000 nodes
    they were most of a sync that decides one node); a template change (a new index, built
    from the snapshot) makes them. A listing read after the cache moved is refused."""
    # the first sync builds the index from the listings
    store, queue, r = _synced_on(redis_url, prefix, "n1", "n2")
    listed: list[str] = []
    real = r.cache.by_index

    def counting(index: str, value: str) -> list[dict[str, Any]]:
        listed.append(index)
        return real(index, value)

    monkeypatch.setattr(r.cache, "by_index", counting)
    store.create(new_node("n3"))
    _sync(queue, r, store)  # a full sync (no hints): creates the pod of n3 from the index
    assert "pods-ns" not in listed
    assert len(kit.owned_pods(store, KEY)) == 3
    _assert_current(r)

    ds = store.get("DaemonSet", KEY)
    ds["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.k8s.io/pause:3.10"
    store.update(ds)
    _sync(queue, r, store)  # a new revision: a new index, from the listings
    assert "pods-ns" in listed
    _assert_current(r)

    snap = r.snapshot(KEY, r.cache.position)
    store.create(new_node("n4"))
    r.cache.catch_up(store.log_tip())
    with pytest.raises(RuntimeError, match="after its cache moved"):
        len(snap.pods)
