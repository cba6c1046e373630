"""The DaemonSet controller's event handlers (spec §b), as decisions: one log change in,
the DaemonSet keys to enqueue and the expectation observations out. No IO here: the watcher
applies what these return.

A key is enqueued for a full sync (``enqueue``, ``enqueue_after``) or with node hints
(``enqueue_nodes``: the nodes whose decision may have changed, for a sync of those nodes
alone; the workqueue makes it a full sync when a full one is pending too). Hints come from
node events (added, removed, relabelled, retainted, cordoned, made Ready/NotReady: the
DaemonSets whose placement on that node changed or that have a pod there) and from the events
of a pod its controller ref resolves to a DaemonSet (its target node); a DaemonSet change of
its status alone asks for a sync of no node. Other DaemonSet changes, revision events,
orphans, adoption and release stay full syncs, as do replayed entries (previous state
unknown)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from typing import Any

from shared.daemonset import placement
from shared.model import labels as model_labels
from shared.model import meta, podutil

Obj = dict[str, Any]


@dataclass
class Reaction:
    """What one batch of changes asks for."""

    enqueue: set[str] = field(default_factory=set)
    enqueue_after: dict[str, float] = field(default_factory=dict)  # key -> delay seconds
    enqueue_nodes: dict[str, set[str]] = field(default_factory=dict)  # key -> node hints
    observe: list[tuple[str, int, int]] = field(default_factory=list)  # key, created, deleted seen
    delete_expectations: set[str] = field(default_factory=set)

    def empty(self) -> bool:
        """Nothing asked for: no key, hint or expectation change."""
        return not any(getattr(self, f.name) for f in fields(self))

    def after(self, key: str, delay: float) -> None:
        cur = self.enqueue_after.get(key)
        self.enqueue_after[key] = delay if cur is None else min(cur, delay)

    def hint(self, key: str, node: str) -> None:
        self.enqueue_nodes.setdefault(key, set()).add(node)

    def hints(self) -> dict[str, list[str]]:
        """The node hints of keys not also enqueued for a full sync, nodes in name order."""
        return {k: sorted(v) for k, v in sorted(self.enqueue_nodes.items())
                if k not in self.enqueue}


class DaemonSets:
    """Read access to the DaemonSets a handler needs (the watcher's cache)."""

    def __init__(self, get: Callable[[str], Obj | None], in_namespace: Callable[[str], list[Obj]],
                 all_: Callable[[], Iterable[Obj]],
                 pods_on: Callable[[str], Iterable[Obj]] | None = None) -> None:
        self.get = get
        self.in_namespace = in_namespace
        self.all = all_
        self.pods_on = pods_on or (lambda node: ())  # the pods whose target is that node

    def with_pods_on(self, node: str) -> set[str]:
        """The keys of the DaemonSets that have a pod (by controller ref) for ``node``."""
        out = set()
        for pod in self.pods_on(node):
            ds = self.resolve(meta.namespace(pod), meta.controller_ref(pod))
            if ds is not None:
                out.add(meta.key(ds))
        return out

    def resolve(self, namespace: str, ref: meta.OwnerReference | None) -> Obj | None:
        """resolveControllerRef: kind DaemonSet, same namespace, and the uid must match."""
        if ref is None or ref.get("kind") != "DaemonSet":
            return None
        ds = self.get(f"{namespace}/{ref.get('name')}")
        if ds is None or meta.uid(ds) != ref.get("uid"):
            return None
        return ds

    def matching(self, obj: Obj) -> list[Obj]:
        """DaemonSets in obj's namespace with a non-empty selector matching its labels."""
        lb = meta.labels(obj)
        if not lb:
            return []
        out = []
        for ds in self.in_namespace(meta.namespace(obj)):
            sel = (ds.get("spec") or {}).get("selector")
            if model_labels.is_empty_selector(sel):
                continue
            if model_labels.selector_matches(sel, lb):
                out.append(ds)
        return out


def _min_ready(ds: Obj) -> int:
    try:
        return int((ds.get("spec") or {}).get("minReadySeconds") or 0)
    except (TypeError, ValueError):
        return 0


# ---- DaemonSet (§b.1) ----------------------------------------------------------------------

def _but_status(ds: Obj) -> Obj:
    """A DaemonSet without what a status write changes (its status, resourceVersion and
    managed fields)."""
    md = {k: v for k, v in (ds.get("metadata") or {}).items()
          if k not in ("resourceVersion", "managedFields")}
    return {**{k: v for k, v in ds.items() if k != "status"}, "metadata": md}


def on_daemonset(r: Reaction, etype: str, old: Obj | None, new: Obj) -> None:
    key = meta.key(new)
    if etype == "DELETED":
        r.delete_expectations.add(key)
    elif etype == "MODIFIED" and old is not None and meta.uid(old) != meta.uid(new):
        r.delete_expectations.add(key)
    elif etype == "MODIFIED" and old is not None and _but_status(old) == _but_status(new):
        # only its status changed (most often the status-writer's write of what a sync
        # computed): upstream syncs it again; a sync of no node decides the same whenever
        # every node is steady, and is a full one otherwise (planner.plan_nodes)
        r.enqueue_nodes.setdefault(key, set())
        return
    r.enqueue.add(key)


def _enqueue_old_owner(r: Reaction, dss: DaemonSets, ns: str, old: Obj,
                       new: Obj) -> tuple[meta.OwnerReference | None, bool]:
    """Shared first step of the pod and revision update handlers: when the controller ref
    changed, enqueue the old owner if it resolves. Returns (current ref, whether it changed)."""
    cur_ref, old_ref = meta.controller_ref(new), meta.controller_ref(old)
    ref_changed = cur_ref != old_ref
    if ref_changed and old_ref is not None:
        old_ds = dss.resolve(ns, old_ref)
        if old_ds is not None:
            r.enqueue.add(meta.key(old_ds))
    return cur_ref, ref_changed


# ---- Pod (§b.2) ----------------------------------------------------------------------------

def _owner_sync(r: Reaction, key: str, pod: Obj) -> None:
    """Enqueue the owner of ``pod`` for its target node (a full sync when it has none)."""
    node = podutil.target_node(pod)
    if node:
        r.hint(key, node)
    else:
        r.enqueue.add(key)


def _pod_deleted(r: Reaction, dss: DaemonSets, pod: Obj) -> None:
    ds = dss.resolve(meta.namespace(pod), meta.controller_ref(pod))
    if ds is None:
        return
    key = meta.key(ds)
    r.observe.append((key, 0, 1))
    _owner_sync(r, key, pod)


def on_pod(r: Reaction, dss: DaemonSets, etype: str, old: Obj | None, new: Obj) -> None:
    ns = meta.namespace(new)
    if etype == "DELETED":
        _pod_deleted(r, dss, new)
        return
    if etype == "ADDED" or old is None:
        if meta.is_being_deleted(new):
            _pod_deleted(r, dss, new)
            return
        ref = meta.controller_ref(new)
        if ref is not None:
            ds = dss.resolve(ns, ref)
            if ds is not None:
                if etype == "ADDED":
                    r.observe.append((meta.key(ds), 1, 0))
                    _owner_sync(r, meta.key(ds), new)
                else:  # a replayed update: be conservative
                    r.enqueue.add(meta.key(ds))
            return
        r.enqueue.update(meta.key(d) for d in dss.matching(new))
        return
    # update
    if meta.resource_version(old) == meta.resource_version(new):
        return
    if meta.is_being_deleted(new):
        _pod_deleted(r, dss, new)
        return
    cur_ref, ref_changed = _enqueue_old_owner(r, dss, ns, old, new)
    if cur_ref is not None:
        ds = dss.resolve(ns, cur_ref)
        if ds is None:
            return
        if ref_changed or meta.labels(old) != meta.labels(new):
            r.enqueue.add(meta.key(ds))  # adopted, or its claim may change: a full sync
        else:
            _owner_sync(r, meta.key(ds), new)
        mrs = _min_ready(ds)
        if mrs > 0 and not podutil.is_ready(old) and podutil.is_ready(new):
            r.after(meta.key(ds), mrs + 1)
        return
    if meta.labels(old) != meta.labels(new) or ref_changed:
        r.enqueue.update(meta.key(d) for d in dss.matching(new))


# ---- Node (§b.3) ---------------------------------------------------------------------------

def _taints(node: Obj) -> Any:
    return (node.get("spec") or {}).get("taints") or []


def _unschedulable(node: Obj) -> bool:
    return bool((node.get("spec") or {}).get("unschedulable"))


def _ready_condition(node: Obj) -> Any:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            return cond.get("status")
    return None


def on_node(r: Reaction, dss: DaemonSets, etype: str, old: Obj | None, new: Obj) -> None:
    name = meta.name(new)
    if old is None and etype == "MODIFIED":  # replayed: previous state unknown
        r.enqueue.update(meta.key(ds) for ds in dss.all())
        return
    if etype in ("ADDED", "DELETED") or old is None:
        # a node appears or goes: the DaemonSets that would run on it (desired, creates) or
        # that have a pod for it (a node re-created under the name, or its pods' status)
        for ds in dss.all():
            decision = placement.node_should_run(new, ds)
            if decision[0] or (etype == "DELETED" and decision[1]):
                r.hint(meta.key(ds), name)
        for key in dss.with_pods_on(name):
            r.hint(key, name)
        return
    placed = meta.labels(old) != meta.labels(new) or _taints(old) != _taints(new)
    if placed:
        for ds in dss.all():
            if placement.node_should_run(old, ds) != placement.node_should_run(new, ds):
                r.hint(meta.key(ds), name)
    if (_unschedulable(old) != _unschedulable(new)
            or _ready_condition(old) != _ready_condition(new)):
        for key in dss.with_pods_on(name):  # the judgement of their pods there may change
            r.hint(key, name)


# ---- ControllerRevision (§b.4) --------------------------------------------------------------

def on_revision(r: Reaction, dss: DaemonSets, etype: str, old: Obj | None, new: Obj) -> None:
    ns = meta.namespace(new)
    if etype == "DELETED":
        ds = dss.resolve(ns, meta.controller_ref(new))
        if ds is not None:
            r.enqueue.add(meta.key(ds))
        return
    if etype == "ADDED" or old is None:
        if meta.is_being_deleted(new):
            ds = dss.resolve(ns, meta.controller_ref(new))
            if ds is not None:
                r.enqueue.add(meta.key(ds))
            return
        if meta.controller_ref(new) is not None:
            if old is None and etype != "ADDED":  # replayed update: be conservative
                ds = dss.resolve(ns, meta.controller_ref(new))
                if ds is not None:
                    r.enqueue.add(meta.key(ds))
            return  # upstream resolves but does not enqueue
        r.enqueue.update(meta.key(d) for d in dss.matching(new))
        return
    if meta.resource_version(old) == meta.resource_version(new):
        return
    cur_ref, ref_changed = _enqueue_old_owner(r, dss, ns, old, new)
    if cur_ref is not None:
        ds = dss.resolve(ns, cur_ref)
        if ds is not None:
            r.enqueue.add(meta.key(ds))
        return
    if meta.labels(old) != meta.labels(new) or ref_changed:
        r.enqueue.update(meta.key(d) for d in dss.matching(new))


def react(r: Reaction, dss: DaemonSets, kind: str, etype: str, old: Obj | None,
          new: Obj) -> None:
    """Route one change to its handler. ``old`` None on a MODIFIED entry means the previous
    state is unknown (entries replayed after a restart): handlers then err on the side of
    enqueueing, never of observing twice."""
    if kind == "DaemonSet":
        on_daemonset(r, etype, old, new)
    elif kind == "Pod":
        on_pod(r, dss, etype, old, new)
    elif kind == "Node":
        on_node(r, dss, etype, old, new)
    elif kind == "ControllerRevision":
        on_revision(r, dss, etype, old, new)
