"""The namespaces the API server serves, kept from the objects in its watch cache. Decides.

A namespace needs no object (``shared.model.kinds.NAMESPACE``): one exists while something
lives in it, and the four every cluster has always; one with an object (``kubectl create
namespace``) exists while that object does, and is served as it is stored. ``Namespaces``
counts the objects in each as the watch cache folds the log, so a list of namespaces costs
their number, not a pass over every object, and the change that makes a namespace exist (the
first object in it, or its Namespace created) or end is the namespace's ADDED (DELETED)
event, at that change's position, for ``kubectl get ns -w``. A namespace without an object is
as old as the object that made it exist; after a relist, which does not know that history,
as the oldest object in it. The four built-in ones are as old as the cluster's oldest object.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from shared.model import defaults, kinds, meta, validation
from shared.model.objkey import ObjectKey

Obj = dict[str, Any]

_NAMESPACED = frozenset(k.kind for k in kinds.ALL if k.namespaced)
_BUILTIN = frozenset(kinds.BUILTIN_NAMESPACES)


def namespace_object(name: str, created: str | None = None, rv: str = "0") -> Obj:
    """The Namespace ``name`` as it is served, created at ``created`` (None: not known), at
    resourceVersion ``rv``."""
    md: Obj = {"name": name, "uid": "", "resourceVersion": rv,
               "labels": {defaults.NAMESPACE_NAME_LABEL: name}}
    if created is not None:
        md["creationTimestamp"] = created
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": md,
            "spec": {"finalizers": [validation.NAMESPACE_FINALIZER]},
            "status": {"phase": "Active"}}


def has_object(namespace: Obj) -> bool:
    """Whether a Namespace as served is stored (one without an object has no uid)."""
    return bool(meta.uid(namespace))


def _earlier(a: str | None, b: str | None) -> str | None:
    """The earlier of two creation times (RFC 3339 in UTC: text order is time order)."""
    if a is None or b is None:
        return a if b is None else b
    return min(a, b)


class Namespaces:
    """The objects in each namespace, counted as a fold changes them, and the Namespaces
    stored."""

    def __init__(self) -> None:
        self.members: dict[str, int] = {}
        self.born: dict[str, str | None] = {}
        self.cluster_born: str | None = None  # the oldest object's creation, of any kind
        self.stored: dict[str, Obj] = {}  # name → its Namespace object, where it has one

    def reset(self, objects: Mapping[str, Iterable[Obj]]) -> None:
        """Count the objects of a listing afresh (kind → its objects)."""
        self.members.clear()
        self.born.clear()
        self.stored.clear()
        self.cluster_born = None
        for kind, objs in objects.items():
            for obj in objs:
                if kind == "Namespace":
                    self.stored[meta.name(obj)] = obj
                created = meta.creation_timestamp(obj) or None
                self.cluster_born = _earlier(self.cluster_born, created)
                if kind in _NAMESPACED:
                    ns = meta.namespace(obj)
                    self.members[ns] = self.members.get(ns, 0) + 1
                    self.born[ns] = _earlier(self.born[ns], created) if ns in self.born \
                        else created

    def served(self, name: str, rv: str = "0") -> Obj | None:
        """The Namespace ``name`` as it is served (one without an object at ``rv``), or None
        when it does not exist."""
        if name in self.stored:
            return self.stored[name]
        if name in _BUILTIN:
            return namespace_object(name, self.cluster_born, rv)
        if name in self.members:
            return namespace_object(name, self.born.get(name), rv)
        return None

    def change(self, eid: str, etype: str, kind: str, key: str, obj: Obj,
               prev: Obj | None) -> tuple[str, Obj, Obj | None] | None:
        """Count one folded change of the log entry ``eid`` (``prev``: the object before
        it, None when it was not there); the Namespace event it makes (its type, the
        Namespace at ``eid`` and the one served before, None if none or not known), or
        None."""
        if etype == "ADDED":
            self.cluster_born = _earlier(self.cluster_born, meta.creation_timestamp(obj) or None)
        if kind == "Namespace":
            name = meta.name(obj)
            before = self.served(name, eid)
            if etype == "DELETED":
                self.stored.pop(name, None)
            else:
                self.stored[name] = obj
            now = self.served(name, eid)
            if now is None:
                return "DELETED", obj, before
            return ("MODIFIED" if before is not None else "ADDED"), now, before
        if kind not in _NAMESPACED:
            return None
        delta = (etype != "DELETED") - (prev is not None)
        if not delta:
            return None
        ns = ObjectKey.parse(key).namespace
        count = self.members.get(ns, 0) + delta
        if count > 0:
            self.members[ns] = count
            if count > 1 or delta < 0:
                return None
            born = self.born[ns] = meta.creation_timestamp(obj) or None
            return None if ns in _BUILTIN or ns in self.stored else \
                ("ADDED", namespace_object(ns, born, eid), None)
        self.members.pop(ns, None)
        born = self.born.pop(ns, None)
        return None if ns in _BUILTIN or ns in self.stored else \
            ("DELETED", namespace_object(ns, born, eid), None)

    def current(self) -> dict[str, str | None]:
        """Every namespace something lives in or that has an object, and the four built-in
        ones, with when each was created."""
        out = dict(self.born)
        out.update(dict.fromkeys(kinds.BUILTIN_NAMESPACES, self.cluster_born))
        out.update((name, meta.creation_timestamp(o) or None) for name, o in self.stored.items())
        return out

    def objects(self) -> list[Obj]:
        """The Namespaces as they are served, by name."""
        out = []
        for name in sorted(self.current()):
            obj = self.served(name)
            assert obj is not None
            out.append(obj)
        return out


def served(objects: Mapping[str, Iterable[Obj]]) -> Namespaces:
    """The namespaces of a listing (kind → its objects), as the API server serves them."""
    out = Namespaces()
    out.reset(objects)
    return out
