"""The garbage collector process, driven by the log (Kubernetes' garbage collector and pod GC
roles, for the kinds daemonbus keeps).

* **Background cascade**: a Pod or ControllerRevision whose owner (by uid, never by name
  alone) no longer exists is deleted.
* **Foreground**: an owner with the ``foregroundDeletion`` finalizer has its dependents
  deleted; when none is left the finalizer is removed and the owner goes.
* **Orphan**: an owner with the ``orphan`` finalizer has its ownerReferences removed from its
  dependents, then the finalizer is removed.
* **Pod GC**: a pod bound to a node that no longer exists is deleted at once.
* **Event TTL**: Events older than ``event_ttl`` seconds are deleted.

Everything is decided from state, not from remembered progress, so a collector killed
half-way through a cascade finishes it after a restart: it starts with a full pass.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import Counter

from shared.model import meta
from shared.store import errors
from shared.store.cache import Cache, Change
from shared.store.client import FOREGROUND, ORPHAN, Op, Store

log = logging.getLogger("gc")

Obj = dict[str, Any]
DEPENDENT_KINDS = ("Pod", "ControllerRevision")
COLLECTED = Counter("daemonbus_gc_deleted_total", "Objects deleted by the garbage collector",
                    ["kind", "reason"])


def _owner_uids(obj: Obj) -> list[str]:
    return [str(r.get("uid")) for r in meta.owner_references(obj) if r.get("uid")]


def _bound_node(obj: Obj) -> list[str]:
    node = (obj.get("spec") or {}).get("nodeName")
    return [str(node)] if node else []


class Collector:
    def __init__(self, store: Store, clock: Callable[[], float] = time.time,
                 event_ttl: float = 3600.0, full_pass_every: float = 60.0) -> None:
        self.store = store
        self.clock = clock
        self.event_ttl = event_ttl
        self.full_pass_every = full_pass_every
        self.cache = Cache(store, ["DaemonSet", "Pod", "ControllerRevision", "Node", "Event"],
                           name="gc", indexes={
                               "owner-pods": ("Pod", _owner_uids),
                               "owner-revisions": ("ControllerRevision", _owner_uids),
                               "node": ("Pod", _bound_node),
                           })
        self.deleted = 0

    # ---- loop -------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self.cache.sync()
                self.full_pass()
                last_full = time.monotonic()
                while not stop.is_set():
                    self.step(block_ms=1000)
                    if time.monotonic() - last_full > self.full_pass_every:
                        self.full_pass()
                        last_full = time.monotonic()
            except errors.UnavailableError as err:
                log.warning("redis unavailable: %s; retrying", err)
                stop.wait(1.0)

    def step(self, block_ms: int = 1000) -> int:
        changes = self.cache.poll(count=5000, block_ms=block_ms)
        if changes:
            self.handle(changes)
        return len(changes)

    def handle(self, changes: Iterable[Change]) -> None:
        owners: set[str] = set()
        deleted_owner_uids: set[str] = set()
        dependents: list[Obj] = []
        gone_nodes: set[str] = set()
        for ch in changes:
            if ch.kind == "DaemonSet":
                if ch.type == "DELETED":
                    deleted_owner_uids.add(meta.uid(ch.new))
                elif meta.is_being_deleted(ch.new):
                    owners.add(ch.key)
            elif ch.kind in DEPENDENT_KINDS and ch.type != "DELETED":
                dependents.append(ch.new)
                for uid in _owner_uids(ch.new):
                    owner = self._owner_by_uid(ch.new, uid)
                    if owner is not None and meta.is_being_deleted(owner):
                        owners.add(meta.key(owner))
            elif ch.kind in DEPENDENT_KINDS and ch.type == "DELETED":
                for ref in meta.owner_references(ch.new):
                    owner = self._owner_by_uid(ch.new, str(ref.get("uid")))
                    if owner is not None and meta.is_being_deleted(owner):
                        owners.add(meta.key(owner))
            elif ch.kind == "Node" and ch.type == "DELETED":
                gone_nodes.add(meta.name(ch.new))
        for uid in deleted_owner_uids:
            dependents += self._dependents(uid)
        self._collect_orphaned(dependents)
        for key in sorted(owners):
            self._finalize_owner(key)
        pods = [p for n in gone_nodes for p in self.cache.by_index("node", n)]
        self._pod_gc(pods)

    def full_pass(self) -> None:
        for ds in list(self.cache.objects["DaemonSet"].values()):
            if meta.is_being_deleted(ds):
                self._finalize_owner(meta.key(ds))
        deps = [o for k in DEPENDENT_KINDS for o in self.cache.objects[k].values()]
        self._collect_orphaned(deps)
        self._pod_gc(list(self.cache.objects["Pod"].values()))
        self._expire_events()

    # ---- decisions and actions ------------------------------------------------------------------

    def _owner_by_uid(self, dep: Obj, uid: str) -> Obj | None:
        for ref in meta.owner_references(dep):
            if ref.get("uid") == uid and ref.get("kind") == "DaemonSet":
                ds = self.cache.get("DaemonSet", f"{meta.namespace(dep)}/{ref.get('name')}")
                if ds is not None and meta.uid(ds) == uid:
                    return ds
        return None

    def _dependents(self, uid: str) -> list[Obj]:
        return self.cache.by_index("owner-pods", uid) + self.cache.by_index("owner-revisions", uid)

    def _collect_orphaned(self, deps: Iterable[Obj]) -> None:
        """Delete dependents whose DaemonSet owner is gone (background cascade)."""
        doomed: list[Obj] = []
        verified: dict[tuple[str, str, str], bool] = {}
        for dep in deps:
            refs = [r for r in meta.owner_references(dep) if r.get("kind") == "DaemonSet"]
            if not refs or (meta.is_being_deleted(dep) and dep.get("kind") != "Pod"):
                continue
            if all(self._owner_gone(dep, r, verified) for r in refs) and \
                    len(refs) == len(meta.owner_references(dep)):
                doomed.append(dep)
        self._delete(doomed, "owner-gone")

    def _owner_gone(self, dep: Obj, ref: Obj, verified: dict[tuple[str, str, str], bool]) -> bool:
        ns, name, uid = meta.namespace(dep), str(ref.get("name")), str(ref.get("uid"))
        cached = self.cache.get("DaemonSet", f"{ns}/{name}")
        if cached is not None and meta.uid(cached) == uid:
            return False
        k = (ns, name, uid)
        if k not in verified:  # confirm with a live read, as the Kubernetes GC does
            live = self.store.try_get("DaemonSet", f"{ns}/{name}")
            verified[k] = live is None or meta.uid(live) != uid
        return verified[k]

    def _finalize_owner(self, key: str) -> None:
        ds = self.cache.get("DaemonSet", key)
        if ds is None or not meta.is_being_deleted(ds):
            return
        fins = meta.finalizers(ds)
        deps = self._dependents(meta.uid(ds))
        if ORPHAN in fins:
            ops = []
            for dep in deps:
                new = copy.deepcopy(dep)
                refs = [r for r in meta.owner_references(dep) if r.get("uid") != meta.uid(ds)]
                if refs:
                    new["metadata"]["ownerReferences"] = refs
                else:
                    new["metadata"].pop("ownerReferences", None)
                ops.append(self.store.raw_update_op(new, meta.resource_version(dep)))
            results = self._commit(ops)
            if all(r.ok or r.status == "notfound" for r in results):
                self._remove_finalizer(key, ORPHAN)
            return
        if FOREGROUND in fins:
            live = [d for d in deps if not (d.get("kind") == "Pod" and meta.is_being_deleted(d))]
            if live:
                self._delete(live, "foreground")
            if not deps:
                self._remove_finalizer(key, FOREGROUND)

    def _remove_finalizer(self, key: str, finalizer: str) -> None:
        def drop(obj: Obj) -> Obj | None:
            fins = meta.finalizers(obj)
            if finalizer not in fins:
                return None
            obj["metadata"]["finalizers"] = [f for f in fins if f != finalizer]
            return obj

        try:
            self.store.mutate("DaemonSet", key, drop)
        except errors.NotFoundError:
            pass

    def _pod_gc(self, pods: Iterable[Obj]) -> None:
        nodes = self.cache.objects["Node"]
        doomed = []
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if node and f"/{node}" not in nodes:
                doomed.append(pod)
        if doomed:
            live_nodes = {meta.name(n) for n in self.store.list("Node")}
            doomed = [p for p in doomed if p["spec"]["nodeName"] not in live_nodes]
        self._delete(doomed, "node-gone", grace=0)

    def _expire_events(self) -> None:
        cutoff = self.clock() - self.event_ttl
        old = [e for e in self.cache.objects["Event"].values()
               if (meta.parse_time(str(e.get("lastTimestamp") or meta.creation_timestamp(e)))
                   or 0) < cutoff]
        self._delete(old, "event-ttl", grace=0)

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

    def _commit(self, ops: list[Op]) -> list[Any]:
        results = []
        for i in range(0, len(ops), 500):
            results += self.store.commit(ops[i:i + 500])
        return results
