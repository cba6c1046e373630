"""Transient outcomes of one sync as upstream's ``syncDaemonSet`` has them
(pkg/controller/daemon/daemon_controller.go): a failed constructHistory returns its error
before any status is computed, and the claim (adopt/release, ``getNodesToDaemonPods``) runs
on every sync, also one that only updates status because expectations are pending.

The reconciler runs in-process on a real Redis, so the test sees exactly what one sync
wrote; no watcher runs (expectations stay as the test sets them)."""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest

from services.node_agent.lifecycle import new_node
from services.reconciler.sync import Reconciler
from shared.daemonset import dsutil, history, planner
from shared.daemonset import types as t
from shared.model import meta
from shared.store import codec
from shared.store.backoff import RedisBackoff
from shared.store.client import Store, connect
from shared.store.expectations import RedisExpectations
from shared.store.keys import Keys
from shared.store.workqueue import RedisWorkQueue
from tests.integration import controller_kit as kit

Obj = dict[str, Any]
KEY = "default/agent"


@pytest.fixture
def store(redis_url: str, prefix: str) -> Store:
    return Store(connect(redis_url), Keys(prefix))


@pytest.fixture
def reconciler(store: Store) -> Reconciler:
    return Reconciler(store, RedisWorkQueue(store.r, store.keys),
                      RedisExpectations(store.r, store.keys),
                      RedisBackoff(store.r, store.keys), worker="w")


def _statuses(store: Store) -> list[Obj]:
    """The status messages published for the status-writer, oldest first."""
    return [codec.unpack(f[b"m"]) for _, f in store.r.xrange(store.keys.status_stream)]


def _pod(name: str, node: str, labels: dict[str, str], owner: Obj | None = None) -> Obj:
    md: Obj = {"name": name, "namespace": "default", "labels": dict(labels)}
    if owner is not None:
        md["ownerReferences"] = [meta.controller_owner_ref(owner)]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md,
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "pause"}]}}


def test_failed_revision_history_returns_the_error_and_writes_no_status(
        store: Store, reconciler: Reconciler) -> None:
    store.create(new_node("n1"))
    ds = store.create(kit.daemonset("agent"))
    # somebody else's revision holds the name of the DaemonSet's first revision: creating it
    # fails (AlreadyExists, collisionCount raised) and constructHistory returns the error
    taken = history.compute_hash(dsutil.template(ds), None)
    store.create({"apiVersion": "apps/v1", "kind": "ControllerRevision",
                  "metadata": {"name": f"agent-{taken}", "namespace": "default",
                               "labels": {"app": "other"}},
                  "data": {"spec": {"template": {"$patch": "replace"}}}, "revision": 1})

    failed = reconciler.sync(KEY, store.log_tip())

    # upstream: return fmt.Errorf("failed to construct revisions of DaemonSet: %v", err),
    # before updateDaemonSetStatus
    assert not failed.ok
    assert failed.error == ("failed to construct revisions of DaemonSet: "
                            f'controllerrevisions.apps "agent-{taken}" already exists')
    assert _statuses(store) == []
    assert (failed.created, kit.owned_pods(store, KEY)) == (0, [])

    healed = reconciler.sync(KEY, store.log_tip())  # with the raised collisionCount
    assert healed.ok and healed.created == 1, healed
    [published] = _statuses(store)
    assert published["key"] == KEY and published["observe"] is True


def test_pods_are_adopted_and_released_while_expectations_are_pending(
        store: Store, reconciler: Reconciler) -> None:
    store.create(new_node("n1"))
    store.create(new_node("n2"))
    ds = store.create(kit.daemonset("agent"))
    orphan = store.create(_pod("orphan", "n1", {"app": "agent"}))
    straying = store.create(_pod("straying", "n2", {"app": "elsewhere"}, owner=ds))
    RedisExpectations(store.r, store.keys).set(KEY, 2, 0, time.time())  # creates in flight

    result = reconciler.sync(KEY, store.log_tip())

    # upstream: SatisfiedExpectations false → updateDaemonSetStatus(…, false), which starts
    # with getNodesToDaemonPods → ClaimPods: the orphan is adopted, the mismatch released
    assert result.ok and (result.created, result.deleted) == (0, 0), result
    adopted = store.get("Pod", meta.key(orphan))
    assert (meta.controller_ref(adopted) or {}).get("uid") == meta.uid(ds)
    assert meta.controller_ref(store.get("Pod", meta.key(straying))) is None
    [published] = _statuses(store)
    assert published["observe"] is False  # observedGeneration not raised
    [record] = kit.decisions(store, KEY)
    assert record["actions"]["claims"] == [["adopt", "Pod", "orphan"],
                                           ["release", "Pod", "straying"]]


def test_a_failed_claim_while_expectations_are_pending_writes_no_status(
        store: Store, reconciler: Reconciler) -> None:
    store.create(new_node("n1"))
    store.create(kit.daemonset("agent"))
    store.create(_pod("orphan", "n1", {"app": "agent"}))
    RedisExpectations(store.r, store.keys).set(KEY, 1, 0, time.time())
    reconciler.cache.sync()
    # the DaemonSet goes before the adoption's fresh read: the claim fails
    gone = copy.deepcopy(store.get("DaemonSet", KEY))
    store.delete("DaemonSet", KEY)
    reconciler.cache.objects["DaemonSet"][KEY] = gone

    result = reconciler.executor.execute(*_plan(reconciler, gone))

    # upstream: updateDaemonSetStatus returns "couldn't get node to daemon pod mapping …"
    # before it computes any status
    assert not result.ok and not result.publish_status
    assert result.errors[0].startswith(
        'couldn\'t get node to daemon pod mapping for daemon set "agent"')


def _plan(reconciler: Reconciler, ds: Obj) -> tuple[Any, Any]:
    """The plan and snapshot of one sync of ``ds`` as the cache holds it (without catching
    up: the cache keeps the DaemonSet the store no longer has)."""
    cache = reconciler.cache
    snap = t.Snapshot(key=KEY, ds=ds, nodes=list(cache.objects["Node"].values()),
                      pods=cache.by_index("pods-ns", "default"),
                      revisions=cache.by_index("revisions-ns", "default"), backoff={},
                      expectations_satisfied=False, now=time.time(), position=cache.position)
    return planner.plan(snap), snap
