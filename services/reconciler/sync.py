"""One sync of one DaemonSet key: read a consistent snapshot → plan → execute → publish.

A sync is full (``planner.plan``) or, when the key was handed out with node hints and no
reason for a full one (``Lease.nodes``, not ``Lease.full``), per node: ``planner.plan_nodes``
over those Nodes and their pods, with the DaemonSet's index (``indexes``) for the status and
the check that every other node is steady; a few other nodes that are not (a node added since
the hand-out) join the sync. When the per-node plan needs a full sync (or no
index is kept yet), the full one runs.

The worker's cache may lag the watcher's, so a sync first catches the cache up to the log
position at which its key was handed out (``Lease.position``) — never deciding on older state
than the event that caused it.

When the log went backwards below what this worker read or wrote (``shared.store.logmark``),
its cache lists again, and before deciding it re-derives expectations as a restarted
controller does: the expectations of every DaemonSet are dropped (creates and deletes they
count may be gone with the lost entries, and no event would lower them) and every DaemonSet is
queued (adds of the lost part are gone too).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from prometheus_client import Counter, Histogram

from services.reconciler.executor import Executor, Outcome, status_message
from services.reconciler.indexes import Indexes
from shared import settings
from shared.control.protocols import BackoffStore, ExpectationsStore, WorkQueue
from shared.daemonset import inputs, planner
from shared.daemonset import record as ds_record
from shared.daemonset import types as t
from shared.daemonset.messages import StatusChannel
from shared.model import meta, podutil
from shared.store import adapters
from shared.store.cache import Cache
from shared.store.client import Op, Store
from shared.store.statuschannel import RedisStatusChannel

log = logging.getLogger("reconciler")
Obj = dict[str, Any]

SYNCS = Counter("daemonbus_reconcile_total", "DaemonSet syncs", ["result"])
SYNC_SECONDS = Histogram("daemonbus_reconcile_duration_seconds", "Duration of one sync",
                         buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
PODS_CREATED = Counter("daemonbus_pods_created_total", "Daemon pods created")
PODS_DELETED = Counter("daemonbus_pods_deleted_total", "Daemon pods deleted")

CATCH_UP_CPU = Counter("daemonbus_reconcile_catch_up_cpu_seconds_total",
                       "CPU seconds spent bringing the worker's cache and indexes up to a key's "
                       "hand-out position (every worker follows the whole log)")
WIDEN_MOST = 16  # other unsteady nodes a per-node sync takes in before it goes full
PER_NODE = Counter("daemonbus_reconcile_per_node_total",
                   "Syncs handed out with node hints, by the path they took",
                   ["path"])  # per-node, or full (the per-node plan asked for one)

KINDS = list(inputs.KINDS)
STATUS_STREAM_MAXLEN = settings.current.status_stream_maxlen


def _ns_index(obj: dict) -> list[str]:  # type: ignore[type-arg]
    return [meta.namespace(obj)]


def _node_index(obj: dict) -> list[str]:  # type: ignore[type-arg]
    node = podutil.target_node(obj)
    return [f"{meta.namespace(obj)}/{node}"] if node else []


class _CacheSource:
    """The worker's cache as what a sync reads (``shared.daemonset.inputs.Source``)."""

    def __init__(self, cache: Cache) -> None:
        self.cache = cache

    def daemonset(self, key: str) -> Obj | None:
        return self.cache.get("DaemonSet", key)

    def nodes(self) -> inputs.Listed:
        return self._listed(lambda: list(self.cache.objects["Node"].values()))

    def pods(self, namespace: str) -> inputs.Listed:
        return self._listed(lambda: self.cache.by_index("pods-ns", namespace))

    def _listed(self, read: Callable[[], list[Obj]]) -> inputs.Listed:
        """``read`` when a pass first reads it, which must be before the cache moves (a
        sync plans before it writes and polls)."""
        position, view = self.cache.position, self.cache.view

        def listing() -> list[Obj]:
            if self.cache.position != position or self.cache.view is not view:
                raise RuntimeError(f"a snapshot at {position} read after its cache moved "
                                   f"to {self.cache.position}")
            return read()

        return inputs.Listed(listing)

    def revisions(self, namespace: str) -> list[Obj]:
        return self.cache.by_index("revisions-ns", namespace)

    def priority_classes(self) -> dict[str, Obj]:
        return {meta.name(pc): pc for pc in self.cache.objects["PriorityClass"].values()}

    # a per-node sync's (``inputs.NodeSource``)

    def node(self, name: str) -> Obj | None:
        return self.cache.get("Node", f"/{name}")

    def pods_on(self, namespace: str, node: str) -> list[Obj]:
        return self.cache.by_index("pods-node", f"{namespace}/{node}")


class _PodNames:
    """The names of the cached pods of one namespace, looked up one by one."""

    def __init__(self, cache: Cache, namespace: str) -> None:
        self.cache, self.namespace = cache, namespace

    def __contains__(self, name: object) -> bool:
        return self.cache.get("Pod", f"{self.namespace}/{name}") is not None


@dataclass
class SyncResult:
    key: str
    ok: bool
    error: str = ""
    created: int = 0
    deleted: int = 0
    seconds: float = 0.0
    requeue_after: float | None = None  # seconds: sync again then (``Plan.requeue_after``)


class Reconciler:
    """Holds the worker's cache and performs syncs; one instance per worker process."""

    def __init__(self, store: Store, queue: WorkQueue, expectations: ExpectationsStore,
                 backoff: BackoffStore, clock: Callable[[], float] | None = None,
                 worker: str = "", status: StatusChannel | None = None) -> None:
        """``clock``: the process's one clock, read once per sync for the snapshot's
        ``now`` (default: the store's, which the store's own timestamps read). ``status``:
        where computed statuses are published (default: the status stream in Redis)."""
        self.store = store
        self.queue = queue
        self.expectations = expectations
        self.backoff = backoff
        self.clock = clock or store.clock
        self.worker = worker
        self.status = status if status is not None else \
            adapters.on(store, RedisStatusChannel, maxlen=STATUS_STREAM_MAXLEN)
        self.cache = Cache(store, KINDS, name=f"reconciler-{worker}", decisions=False,
                           own_writes=True, indexes={
            "pods-ns": ("Pod", _ns_index),
            "revisions-ns": ("ControllerRevision", _ns_index),
            "pods-node": ("Pod", _node_index),
        })
        self.executor = Executor(store, self.cache, expectations, backoff)
        self._rewinds = store.mark.rewinds
        # each synced DaemonSet's per-node state, fed from the cache: a full plan reads it
        # instead of every Node and Pod (and the per-node path reads it alone)
        self.indexes = Indexes()

    def _rederive(self) -> None:
        """Acts, after the log went backwards: start every DaemonSet afresh (see above)."""
        if self.store.mark.rewinds == self._rewinds:
            return
        self._rewinds = self.store.mark.rewinds
        keys = sorted(self.cache.objects["DaemonSet"])
        log.warning("the log went backwards: dropping the expectations of %d DaemonSets and "
                    "queueing them again", len(keys))
        for key in keys:
            self.expectations.delete(key)
        self.queue.add(keys)

    def _catch_up(self, position: str) -> None:
        """The cache at least as new as ``position``, the indexes following it."""
        started = time.thread_time()
        try:
            self._follow(position)
        finally:
            CATCH_UP_CPU.inc(time.thread_time() - started)

    def _follow(self, position: str) -> None:
        if not self.cache.synced:
            self.cache.sync()
        self.indexes.check(self.cache.view)
        self.cache.catch_up(position, self.indexes.follow)
        self.indexes.check(self.cache.view)  # it listed again: the indexes are rebuilt
        self._rederive()

    def plan_nodes(self, key: str, position: str, nodes: Collection[str]
                   ) -> tuple[t.Snapshot, t.Plan] | None:
        """The per-node snapshot and plan of ``key`` for ``nodes``; None when a full sync
        is needed (``planner.plan_nodes``, or no index kept yet)."""
        self._catch_up(position)
        index = self.indexes.get(key)
        if index is None:
            return None
        now = self.clock()
        # the few other nodes that are not steady join the sync (a node added since the
        # hand-out, whose own hint is queued): with every node outside the set steady the
        # sync of the set decides what a full one would; with more of them (a DaemonSet
        # fanning out or rolling), plan_nodes would ask for the full sync anyway
        widened = index.widened(nodes, WIDEN_MOST)
        if widened is None:
            return None
        nodes = widened
        snap = inputs.build_nodes(key, nodes, _CacheSource(self.cache), now,
                                  self.cache.position, self.backoff.get_many,
                                  lambda: self.expectations.satisfied(key, now))
        if snap.ds is None or not snap.expectations_satisfied:
            return None
        plan = planner.plan_nodes(snap, nodes, index,
                                  _PodNames(self.cache, meta.namespace(snap.ds)))
        return None if plan is None else (snap, plan)

    def snapshot(self, key: str, position: str) -> t.Snapshot:
        self._catch_up(position)
        now = self.clock()
        index = self.indexes.get(key)
        return inputs.build(key, _CacheSource(self.cache), now, self.cache.position,
                            self.backoff.get_many,
                            lambda: self.expectations.satisfied(key, now),
                            None if index is None else
                            lambda ds: index.backoff_keys(ds) if index.fits(ds) else None)

    def sync(self, key: str, position: str, redelivered: bool = False,
             lease_token: str = "", nodes: Collection[str] | None = None) -> SyncResult:
        """Sync ``key`` on state read through at least ``position`` (its hand-out position).

        ``redelivered``: the key's last holder lost its lease mid-sync (it died or stalled).
        Its expectations may count creates and deletes it never made, which no event would
        ever lower, stalling this DaemonSet until they expire; every write it did make is in
        the log before ``position``, which this sync reads through. So they are dropped, as a
        restarted upstream controller starts with none.

        ``lease_token``: the lease this sync holds ``key`` by; its pod creates are fenced by
        it, so should this sync stall past its lease and the key go to another worker, it
        creates nothing (one that did not stall wrote everything before that hand-out).

        ``nodes``: a sync of these nodes alone is enough (the key's node hints, with no reason
        for a full sync; none: of no node, for a status change); when the per-node plan needs
        a full one, the full one runs. None: a full sync.
        """
        started = time.monotonic()
        if redelivered:
            self.expectations.delete(key)
        hinted = nodes is not None and not redelivered
        per_node = self.plan_nodes(key, position, nodes) if nodes is not None and hinted \
            else None
        if hinted:
            PER_NODE.labels("per-node" if per_node is not None else "full").inc()
        if per_node is not None:
            snap, plan = per_node
        else:
            snap = self.snapshot(key, position)
            # the index first: a full plan without one walks every Node and Pod, and then
            # building it after the plan walks them again
            index = self.indexes.keep(snap, planner.current_hash(snap))
            plan = planner.plan(snap, index, None if snap.ds is None else
                                _PodNames(self.cache, meta.namespace(snap.ds)))
            self.indexes.keep(snap, plan.hash)
        outcome: Outcome = self.executor.execute(
            plan, snap, lease_token, record=lambda out: self._record(snap, plan, out))
        if outcome.publish_status:
            self._publish(snap, plan)
        seconds = time.monotonic() - started
        SYNC_SECONDS.observe(seconds)
        SYNCS.labels("success" if outcome.ok else "error").inc()
        PODS_CREATED.inc(outcome.created)
        PODS_DELETED.inc(outcome.deleted)
        return SyncResult(key, outcome.ok, "; ".join(outcome.errors), outcome.created,
                          outcome.deleted, seconds, plan.requeue_after)

    def _publish(self, snap: t.Snapshot, plan: t.Plan) -> None:
        if plan.status is None or snap.ds is None:
            return
        self.status.publish(status_message(snap, plan))

    def _record(self, snap: t.Snapshot, plan: t.Plan, outcome: Outcome) -> Op | None:
        """The decision's log record (with what it read and when) so replay can recompute
        it; the executor writes it with the sync's Events. Syncs that decided nothing but a
        status are not recorded (None): their status is the record."""
        summary = ds_record.summarize(plan)
        if not (summary["creates"] or summary["deletes"] or summary["claims"]
                or summary["history"] or summary["cleanup"] or summary["events"]
                or summary["backoff"] or "failure" in summary):
            return None
        rec = ds_record.make_record(snap, plan, self.worker, outcome.errors)
        return Op.record("DaemonSet", snap.key, rec.to_map())
