"""The DaemonSet controller's event handlers (spec §b), as decisions: one log change in,
the DaemonSet keys to enqueue and the expectation observations out. No IO here: the watcher
applies what these return."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
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
    observe: list[tuple[str, int, int]] = field(default_factory=list)  # key, created, deleted seen
    delete_expectations: set[str] = field(default_factory=set)

    def after(self, key: str, delay: float) -> None:
        cur = self.enqueue_after.get(key)
        self.enqueue_after[key] = delay if cur is None else min(cur, delay)


class DaemonSets:
    """Read access to the DaemonSets a handler needs (the watcher's cache)."""

    def __init__(self, get: Callable[[str], Obj | None], in_namespace: Callable[[str], list[Obj]],
                 all_: Callable[[], Iterable[Obj]]) -> None:
        self.get = get
        self.in_namespace = in_namespace
        self.all = all_

    def resolve(self, namespace: str, ref: Obj | None) -> Obj | None:
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

def on_daemonset(r: Reaction, etype: str, old: Obj | None, new: Obj) -> None:
    key = meta.key(new)
    if etype == "DELETED":
        r.delete_expectations.add(key)
    elif etype == "MODIFIED" and old is not None and meta.uid(old) != meta.uid(new):
        r.delete_expectations.add(key)
    r.enqueue.add(key)


def _enqueue_old_owner(r: Reaction, dss: DaemonSets, ns: str, old: Obj,
                       new: Obj) -> tuple[Obj | None, bool]:
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

def _pod_deleted(r: Reaction, dss: DaemonSets, pod: Obj) -> None:
    ds = dss.resolve(meta.namespace(pod), meta.controller_ref(pod))
    if ds is None:
        return
    key = meta.key(ds)
    r.observe.append((key, 0, 1))
    r.enqueue.add(key)


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
        r.enqueue.add(meta.key(ds))
        mrs = _min_ready(ds)
        if mrs > 0 and not podutil.is_ready(old) and podutil.is_ready(new):
            r.after(meta.key(ds), mrs + 1)
        return
    if meta.labels(old) != meta.labels(new) or ref_changed:
        r.enqueue.update(meta.key(d) for d in dss.matching(new))


# ---- Node (§b.3) ---------------------------------------------------------------------------

def _taints(node: Obj) -> Any:
    return (node.get("spec") or {}).get("taints") or []


def on_node(r: Reaction, dss: DaemonSets, etype: str, old: Obj | None, new: Obj) -> None:
    if etype == "DELETED":
        return  # no handler: noticed on the next sync of each DaemonSet
    if etype == "ADDED" or old is None:
        for ds in dss.all():
            if placement.node_should_run(new, ds)[0] or (old is None and etype != "ADDED"):
                r.enqueue.add(meta.key(ds))
        return
    if meta.labels(old) == meta.labels(new) and _taints(old) == _taints(new):
        return
    for ds in dss.all():
        if placement.node_should_run(old, ds) != placement.node_should_run(new, ds):
            r.enqueue.add(meta.key(ds))


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
