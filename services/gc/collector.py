"""The garbage collector process, driven by the log (Kubernetes' garbage collector and pod GC
roles, for the kinds daemonbus keeps). Decisions are in ``decide``; this module acts.

* **Background cascade**: a Pod or ControllerRevision whose owner (by uid, never by name
  alone) no longer exists is deleted.
* **Foreground**: an owner with the ``foregroundDeletion`` finalizer has its dependents
  deleted; when no blocking one is left the finalizer is removed and the owner goes.
* **Orphan**: an owner with the ``orphan`` finalizer has its ownerReferences removed from its
  dependents, then the finalizer is removed.
* **Pod GC**: a pod bound to a node that no longer exists is deleted at once (grace 0).
* **Control state of deleted DaemonSets**: expectations, workqueue traces and failed-pod
  backoff entries (``shared.store.residue``) — this collector is their one home; and the
  backoff entries that expired (not advanced for twice the maximum delay) of any DaemonSet.
* **Event TTL**: Events older than ``event_ttl`` seconds are deleted.
* **Namespace deletion** (upstream's namespace controller): a Namespace being deleted has
  everything in it deleted (its DaemonSets first, then their pods, revisions and Events; pods
  gracefully, as their node agents finish them), and once nothing is left the Namespace goes.
* **NoExecute taint eviction** (Kubernetes' taint manager, ``pkg/controller/tainteviction``):
  a pod bound to a node with a NoExecute taint it does not tolerate is evicted at once, one
  that tolerates it for ``tolerationSeconds`` when that time has run out (unless the taint
  went first), each with the DisruptionTarget condition, an Event and a decision record in
  the log that ``replay --verify`` recomputes. It lives here, not in the reconciler (the
  DaemonSet controller only keeps pods off nodes they do not tolerate) nor the node agent
  (kubelet does not evict for taints): upstream runs it in kube-controller-manager beside the
  pod GC, and like the pod GC it acts on any pod by its node, whoever owns it. The decision
  is ``shared.model.tainteviction``, from state and the injected clock; this module wakes for
  a node's next deadline and writes.
* **Node lifecycle** (``nodelifecycle``, upstream's node lifecycle controller): nodes whose
  lease and heartbeat went quiet for the grace period are marked Ready Unknown and tainted
  ``node.kubernetes.io/unreachable`` (``not-ready`` for Ready False), untainted when they are
  heard from again; one gc at a time does it, under a leader lease.

The collector follows the log without hurry: after a read that returned entries it pauses
``gc_read_gap_seconds`` (0.1 s) before the next, so the commits of that time come in one
read rather than one read each (two Redis commands per commit, which nodes added one after
another would pay for every process that follows the log). None of its work is waited on
by a pod's start.

Everything is decided from state, not from remembered progress, so a collector killed
half-way through a cascade finishes it after a restart: it starts with a full pass.
Deletes may be throttled (``batch``, ``max_deletes_per_second``) so that a cascade of a huge
DaemonSet does not flood the log and the node agents in one burst.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import Counter

from services import common
from services.gc import decide
from services.gc.nodelifecycle import NodeLifecycle
from shared import settings
from shared.api import writes
from shared.eventlog.entry import CommitResult, EntryType
from shared.model import events as model_events
from shared.model import meta, tainteviction
from shared.store import adapters, codec, errors
from shared.store.cache import Cache, Change
from shared.store.client import FOREGROUND, ORPHAN, Op, Result, Store
from shared.store.recorder import Recorder
from shared.store.residue import BUSY, GONE, RedisResidue

log = logging.getLogger("gc")

Obj = dict[str, Any]
DEPENDENT_KINDS = decide.DEPENDENT_KINDS
COLLECTED = Counter("daemonbus_gc_deleted_total", "Objects deleted by the garbage collector",
                    ["kind", "reason"])
BACKOFF_GC_EVERY = 60.0  # seconds: upstream's BackoffGCInterval
FORGOTTEN = Counter("daemonbus_gc_forgotten_total",
                    "Control-state entries of deleted DaemonSets removed", ["what"])


class Collector:
    def __init__(self, store: Store, clock: Callable[[], float] = time.time,
                 event_ttl: float = 3600.0, full_pass_every: float = 60.0,
                 batch: int = 500, max_deletes_per_second: float = 0.0,
                 node_lifecycle: NodeLifecycle | None = None,
                 read_gap: float | None = None) -> None:
        """``node_lifecycle``: run the node lifecycle controller too (None: do not);
        ``read_gap``: the pause after a read of entries (None: ``gc_read_gap_seconds``)."""
        self.store = store
        self.read_gap = settings.current.gc_read_gap_seconds if read_gap is None else read_gap
        self.node_lifecycle = node_lifecycle
        self.clock = clock
        self.event_ttl = event_ttl
        self.full_pass_every = full_pass_every
        self.batch = max(1, batch)
        self.max_rate = max_deletes_per_second
        # no decision records: handle acts on objects alone (a DaemonSet's record names
        # every node without a pod while it fans out, megabytes at 50,000 nodes)
        self.cache = Cache(store, ["Node", "Namespace", *decide.NAMESPACED_KINDS],
                           name="gc", decisions=False, indexes={
                               "owner-pods": ("Pod", decide.owner_uids),
                               "owner-revisions": ("ControllerRevision", decide.owner_uids),
                               "node": ("Pod", decide.bound_node),
                           })
        self.residue = adapters.on(store, RedisResidue)
        self.busy_keys: set[str] = set()  # deleted DaemonSet keys a pending sync still holds
        self.settling: dict[str, str] = {}  # key cleaned -> newest status message id then
        self.deleted = 0
        self.evicted = 0
        self.evict_at: dict[str, float] = {}  # node → its next toleration deadline
        self.recorder = Recorder(store, prepared=True)  # (the taint eviction controller's)
        self.backoff_gc_at = clock() + BACKOFF_GC_EVERY  # next expiry of backoff entries
        self._stop = threading.Event()

    # ---- loop -------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        self._stop = stop
        outage = common.Outage(log)
        while not stop.is_set():
            try:
                self.cache.sync()
                outage.ok()
                self.full_pass()
                last_full = time.monotonic()
                while not stop.is_set():
                    if self.step(block_ms=1000) and self.read_gap > 0:
                        stop.wait(self.read_gap)
                    if time.monotonic() - last_full > self.full_pass_every:
                        self.full_pass()
                        last_full = time.monotonic()
            except common.REDIS_DOWN as err:
                stop.wait(outage.failed(err))

    def step(self, block_ms: int = 1000) -> int:
        """Act on the next log entries; then go on with the clean-up of deleted keys."""
        pending = self.busy_keys or self.settling
        wait_ms = 200 if pending else block_ms
        if self.evict_at:  # wake for the next toleration that runs out
            due_ms = (min(self.evict_at.values()) - self.clock()) * 1000
            wait_ms = max(1, min(wait_ms, int(due_ms) + 1))
        changes = self.cache.poll(count=5000, block_ms=wait_ms)
        if changes:
            self.handle(changes)
        now = self.clock()
        due = {n for n, at in self.evict_at.items() if at <= now}
        if due:
            self._taint_evictions(due)
        if self.node_lifecycle is not None:
            self.node_lifecycle.tick(self.cache, now)
        if self.busy_keys:
            self._forget_keys(set(self.busy_keys))
        if self.settling:
            self._settle()
        return len(changes)

    def handle(self, changes: Iterable[Change]) -> None:
        owners: set[str] = set()
        deleted: dict[str, str] = {}  # uid -> key of DaemonSets gone
        dependents: list[Obj] = []
        gone_nodes: set[str] = set()
        pods: list[Obj] = []
        tainting: set[str] = set()  # nodes whose NoExecute evictions may have changed
        emptying: set[str] = set()  # namespaces being deleted whose content changed
        terminating = self._terminating()  # (a few namespaces: no cost per change without)
        for ch in changes:
            if terminating and (ch.kind == "Namespace" or ch.kind in decide.NAMESPACED_KINDS):
                ns = meta.name(ch.new) if ch.kind == "Namespace" else meta.namespace(ch.new)
                if ns in terminating:
                    emptying.add(ns)
            if ch.type != EntryType.DECISION and ch.type != EntryType.DELETED:
                if ch.kind == "Node":
                    tainting.add(meta.name(ch.new))
                elif ch.kind == "Pod" and decide.bound_node(ch.new):
                    tainting.update(decide.bound_node(ch.new))
            if ch.kind == "DaemonSet":
                if ch.type == EntryType.DELETED:
                    deleted[meta.uid(ch.new)] = ch.key
                elif meta.is_being_deleted(ch.new):
                    owners.add(ch.key)
            elif ch.kind in DEPENDENT_KINDS:
                if ch.type != EntryType.DELETED:
                    dependents.append(ch.new)
                    if ch.kind == "Pod":
                        pods.append(ch.new)
                for uid in decide.owner_uids(ch.new):
                    owner = self._owner_by_uid(ch.new, uid)
                    if owner is not None and meta.is_being_deleted(owner):
                        owners.add(meta.key(owner))
            elif ch.kind == "Node" and ch.type == EntryType.DELETED:
                gone_nodes.add(meta.name(ch.new))
        for uid in deleted:
            dependents += self._dependents(uid)
        self._collect_orphaned(dependents)
        for key in sorted(owners):
            self._finalize_owner(key)
        pods += [p for n in gone_nodes for p in self.cache.by_index("node", n)]
        self._pod_gc(pods)
        if deleted:
            self._forget_deleted(deleted)
        for name in gone_nodes:
            self.evict_at.pop(name, None)
        if tainting:
            self._taint_evictions(tainting)
        if emptying:
            self._empty_namespaces(emptying)

    def full_pass(self) -> None:
        """Everything from state: finish owners being deleted, collect dependents of gone
        owners, pods of gone nodes, control state of gone DaemonSets, expired backoff
        entries and Events."""
        for ds in list(self.cache.objects["DaemonSet"].values()):
            if meta.is_being_deleted(ds):
                self._finalize_owner(meta.key(ds))
        deps = [o for k in DEPENDENT_KINDS for o in self.cache.objects[k].values()]
        self._collect_orphaned(deps)
        self._pod_gc(list(self.cache.objects["Pod"].values()))
        self._taint_evictions({meta.name(n) for n in self.cache.objects["Node"].values()
                               if tainteviction.no_execute_taints(n)})
        self._sweep_residue()
        self._expire_backoff()
        self._expire_events()
        self._empty_namespaces(self._terminating())

    # ---- owners and dependents ----------------------------------------------------------------

    def _owner_by_uid(self, dep: Obj, uid: str) -> Obj | None:
        for ref in meta.owner_references(dep):
            if ref.get("uid") == uid and ref.get("kind") == decide.OWNER_KIND:
                ds = self.cache.get("DaemonSet", f"{meta.namespace(dep)}/{ref.get('name')}")
                if ds is not None and meta.uid(ds) == uid:
                    return ds
        return None

    def _dependents(self, uid: str) -> list[Obj]:
        return self.cache.by_index("owner-pods", uid) + self.cache.by_index("owner-revisions", uid)

    def _collect_orphaned(self, deps: Iterable[Obj]) -> None:
        """Acts: delete dependents whose DaemonSet owners are all gone (background cascade)."""
        verified: dict[tuple[str, str, str], bool] = {}
        doomed = []
        for dep in deps:
            if decide.doomed_by_owners(dep, functools.partial(self._owner_gone, dep,
                                                              verified=verified)):
                doomed.append(dep)
        self._delete(doomed, "owner-gone")

    def _owner_gone(self, dep: Obj, ref: meta.OwnerReference, verified: dict[tuple[str, str, str], bool]) -> bool:
        ns, name, uid = meta.namespace(dep), str(ref.get("name")), str(ref.get("uid"))
        cached = self.cache.get("DaemonSet", f"{ns}/{name}")
        if cached is not None and meta.uid(cached) == uid:
            return False
        k = (ns, name, uid)
        if k not in verified:  # confirm with a live read, as the Kubernetes GC does
            try:
                live = self.store.try_get("DaemonSet", f"{ns}/{name}")
            except errors.CorruptEntryError as err:
                # an owner that exists but cannot be read is not gone: keep its dependents
                log.error("owner of %s %s/%s unreadable, kept: %s", dep.get("kind"), ns,
                          meta.name(dep), err)
                verified[k] = False
            else:
                verified[k] = live is None or meta.uid(live) != uid
        return verified[k]

    def _finalize_owner(self, key: str) -> None:
        """Acts: one step of a foreground or orphan deletion of the DaemonSet ``key``."""
        ds = self.cache.get("DaemonSet", key)
        if ds is None or not meta.is_being_deleted(ds):
            return
        fins = meta.finalizers(ds)
        uid = meta.uid(ds)
        deps = self._dependents(uid)
        if ORPHAN in fins:
            ops = [self.store.raw_update_op(decide.without_owner(d, uid),
                                            meta.resource_version(d)) for d in deps]
            results = self._commit(ops, throttle=False)
            if all(r.ok or r.status == CommitResult.NOTFOUND for r in results):
                self._remove_finalizer(key, uid, ORPHAN)
            # a conflict: the newer version's log entry brings us back here
            return
        if FOREGROUND in fins:
            to_delete, finished = decide.foreground_step(deps, uid)
            self._delete(to_delete, "foreground")
            if finished:
                self._remove_finalizer(key, uid, FOREGROUND)

    def _remove_finalizer(self, key: str, uid: str, finalizer: str) -> None:
        def drop(obj: Obj) -> Obj | None:
            fins = meta.finalizers(obj)
            if meta.uid(obj) != uid or finalizer not in fins:
                return None
            obj["metadata"]["finalizers"] = [f for f in fins if f != finalizer]
            return obj

        try:
            self.store.mutate("DaemonSet", key, drop)
        except errors.NotFoundError:
            pass
        except errors.CorruptEntryError as err:
            log.error("finalizer %s of DaemonSet %s not removed: %s", finalizer, key, err)

    # ---- namespaces ---------------------------------------------------------------------------

    def _terminating(self) -> set[str]:
        """The namespaces being deleted."""
        return {meta.name(ns) for ns in self.cache.objects["Namespace"].values()
                if meta.is_being_deleted(ns)}

    def _empty_namespaces(self, names: set[str]) -> None:
        """Acts: one step of the deletion of each namespace being deleted in ``names``: what
        is in it deleted, or when nothing is, the Namespace itself."""
        members: dict[str, list[Obj]] = {name: [] for name in names}
        if not members:
            return
        for kind in decide.NAMESPACED_KINDS:
            for obj in self.cache.objects[kind].values():
                found = members.get(meta.namespace(obj))
                if found is not None:
                    found.append(obj)
        for name, objs in sorted(members.items()):
            doomed, empty = decide.namespace_step(objs)
            ns = self.cache.get("Namespace", "/" + name)
            assert ns is not None
            if not empty:
                self._delete(doomed, "namespace-deleted")
                status = ns.get("status") or {}
                conditions = decide.namespace_conditions(
                    objs, status.get("conditions"), meta.format_time(self.clock()))
                if conditions is not None:  # what is left, for kubectl describe namespace
                    self._commit([self.store.status_op(
                        {"status": {**status, "conditions": conditions}}, ns)], throttle=False)
                continue
            res = self._commit([Op.of(writes.final_delete(ns))], throttle=False)[0]
            if res.ok:
                COLLECTED.labels("Namespace", "emptied").inc()
                log.info("namespace %s is empty: deleted", name)

    # ---- pod GC and Events ----------------------------------------------------------------------

    def _pod_gc(self, pods: Iterable[Obj]) -> None:
        """Acts: force-delete pods bound to nodes that do not exist (confirmed live)."""
        nodes = self.cache.objects["Node"]
        doomed = decide.on_missing_nodes(pods, lambda n: f"/{n}" in nodes)
        if doomed:
            live_nodes = self.store.names("Node")  # a malformed node is not a missing one
            doomed = decide.on_missing_nodes(doomed, lambda n: f"/{n}" in live_nodes)
        self._delete(doomed, "node-gone", grace=0)

    def _expire_backoff(self) -> None:
        """Acts: drop failed-pod backoff entries not advanced for twice the maximum delay,
        whatever DaemonSet they are of (upstream's ``failedPodsBackoff.GC`` every
        ``BackoffGCInterval``): on the full pass, at most every ``BACKOFF_GC_EVERY`` seconds
        of the collector's clock, the first that long after it started."""
        now = self.clock()
        if now < self.backoff_gc_at:
            return
        self.backoff_gc_at = now + BACKOFF_GC_EVERY
        dropped = self.residue.backoff.gc(now)
        if dropped:
            FORGOTTEN.labels("backoff-expired").inc(dropped)
            log.info("dropped %d expired failed-pod backoff entries", dropped)

    def _expire_events(self) -> None:
        old = decide.expired_events(self.cache.objects["Event"].values(),
                                    self.clock() - self.event_ttl)
        self._delete(old, "event-ttl", grace=0)

    # ---- NoExecute taint eviction -----------------------------------------------------------

    def _taint_evictions(self, names: Iterable[str]) -> None:
        """Acts: decide the evictions of each node in ``names`` now, write them, and keep the
        node's next deadline for ``step`` to wake on."""
        now = self.clock()
        for name in sorted(names):
            node = self.cache.get("Node", f"/{name}")
            if node is None:
                self.evict_at.pop(name, None)
                continue
            decision = tainteviction.decide(node, self.cache.by_index("node", name), now)
            if decision.next_at is None:
                self.evict_at.pop(name, None)
            else:
                self.evict_at[name] = decision.next_at
            if decision.evictions:
                self._evict(decision, now)

    def _evict(self, decision: tainteviction.NodeEvictions, now: float) -> None:
        """Acts: ``addConditionAndDeletePod`` for each eviction (the DisruptionTarget
        condition and the graceful delete in one write), its Event, and the decision record,
        in one commit. A pod changed since the cache read it (a conflict) is decided again
        when its newer version's entry arrives."""
        position = self.cache.position
        ops: list[Op] = []
        for e in decision.evictions:
            pod = self.cache.get("Pod", f"{e.namespace}/{e.name}")
            if pod is None or meta.uid(pod) != e.uid:
                continue
            op = self.store.delete_op(tainteviction.with_disruption_condition(pod, now))
            if op is None:
                continue
            ops.append(op)
            self.recorder.tell(model_events.event(
                pod, "Normal", tainteviction.EVENT_REASON, tainteviction.event_message(pod),
                now=now, salt=f"{position}|{now}", component=tainteviction.COMPONENT), now)
        told, event_ops = self.recorder.ops(now)
        record = tainteviction.make_record(decision, position, now)
        ops += [*event_ops, Op.record("Node", f"/{decision.node}", record.to_map())]
        results = self.store.commit(ops)
        self.recorder.written(told, results)
        for res in results:
            if res.ok and res.op.kind == "Pod":
                COLLECTED.labels("Pod", "taint-eviction").inc()
                self.evicted += 1
            elif not res.ok:
                log.info("taint eviction: %s %s: %s", res.op.kind, res.op.key, res.status)

    # ---- control state of deleted DaemonSets -----------------------------------------------------

    def _forget_deleted(self, deleted: dict[str, str]) -> None:
        """Acts: drop the backoff entries (by uid) and, unless a DaemonSet of that name exists
        again, the expectations and workqueue traces (by key) of DaemonSets gone."""
        for uid in deleted:
            n = self.residue.forget_uid(uid)
            FORGOTTEN.labels("backoff").inc(n)
        self._forget_keys(set(deleted.values()))

    def _forget_keys(self, keys: set[str], final: bool = False) -> None:
        """Acts: clean ``keys`` up (see ``shared.store.residue``). Busy keys are tried again
        on the next steps; cleaned ones once more when the status messages that were in
        flight are consumed (unless ``final``)."""
        statuses, newest = self.residue.forget_keys(keys)
        for key, status in statuses.items():
            self.busy_keys.discard(key)
            self.settling.pop(key, None)
            if status == BUSY:
                self.busy_keys.add(key)
            elif status == GONE:
                FORGOTTEN.labels("key").inc()
                if not final and newest != "0-0":
                    self.settling[key] = newest

    def _settle(self) -> None:
        """Acts: the last clean-up of keys whose status messages in flight are consumed."""
        oldest = self.residue.oldest_status_id()
        done = {k for k, newest in self.settling.items()
                if oldest is None or codec.id_tuple(oldest) > codec.id_tuple(newest)}
        if done:
            self._forget_keys(done, final=True)

    def _sweep_residue(self) -> None:
        """Acts: the state-based clean-up behind ``_forget_deleted`` (after a restart, or a
        DELETED entry missed): keys of no cached DaemonSet (the script re-checks the live
        view) and backoff entries of uids no live DaemonSet has (read after the entries, so
        a DaemonSet created meanwhile is in the listing)."""
        cached = set(self.cache.objects["DaemonSet"])
        self._forget_keys(self.residue.key_candidates() - cached)
        uids = self.residue.backoff_uids()
        if uids:
            live = {meta.uid(ds) for ds in self.store.list("DaemonSet")}
            for uid in uids - live:
                FORGOTTEN.labels("backoff").inc(self.residue.forget_uid(uid))

    # ---- writes ---------------------------------------------------------------------------------

    def _delete(self, objs: list[Obj], reason: str, grace: int | None = None) -> None:
        ops: list[Op] = []
        for obj in objs:
            op = self.store.delete_op(obj, grace_seconds=grace)
            if op is not None:
                ops.append(op)
        for res in self._commit(ops):
            if res.ok:
                COLLECTED.labels(res.op.kind, reason).inc()
                self.deleted += 1

    def _commit(self, ops: list[Op], throttle: bool = True) -> list[Result]:
        """Acts: commit ``ops`` in batches; with a rate limit, pause after each batch so that
        at most ``max_deletes_per_second`` ops are written per second."""
        results: list[Result] = []
        for i in range(0, len(ops), self.batch):
            chunk = ops[i:i + self.batch]
            results += self.store.commit(chunk)
            if throttle and self.max_rate > 0 and i + self.batch < len(ops):
                self._stop.wait(len(chunk) / self.max_rate)
        return results
