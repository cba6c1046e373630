"""The garbage collector's decisions (pure): what to delete, orphan or finalize, given state.

Dependents are Pods and ControllerRevisions; their owners are DaemonSets, always identified
by uid (a DaemonSet re-created under the same name is another owner).
"""

from __future__ import annotations

import collections
import copy
from collections.abc import Callable, Iterable
from typing import Any

from shared.model import kinds, meta

Obj = dict[str, Any]
DEPENDENT_KINDS = ("Pod", "ControllerRevision")
OWNER_KIND = "DaemonSet"


def owner_uids(obj: Obj) -> list[str]:
    """Decides: the uids of every owner of ``obj`` (the collector's owner index)."""
    return [str(r.get("uid")) for r in meta.owner_references(obj) if r.get("uid")]


def bound_node(obj: Obj) -> list[str]:
    """Decides: the node a pod is bound to, as an index value (none if unbound)."""
    node = (obj.get("spec") or {}).get("nodeName")
    return [str(node)] if node else []


def doomed_by_owners(dep: Obj, owner_gone: Callable[[meta.OwnerReference], bool]) -> bool:
    """Decides the background cascade for one dependent: delete it when it has owners, all of
    them DaemonSets and all gone (``owner_gone(ref)``). A dependent that another kind of owner
    still holds is left alone; a terminating revision needs nothing more. Pods already
    terminating still count (a pod GC may finish them at once)."""
    refs = meta.owner_references(dep)
    if not refs or any(r.get("kind") != OWNER_KIND for r in refs):
        return False
    if meta.is_being_deleted(dep) and dep.get("kind") != "Pod":
        return False
    return all(owner_gone(r) for r in refs)


def without_owner(dep: Obj, owner_uid: str) -> Obj:
    """Decides the orphaning patch: a copy of ``dep`` without its reference to the owner."""
    new = copy.deepcopy(dep)
    refs = [r for r in meta.owner_references(dep) if r.get("uid") != owner_uid]
    if refs:
        new["metadata"]["ownerReferences"] = refs
    else:
        new["metadata"].pop("ownerReferences", None)
    return new


def blocks(dep: Obj, owner_uid: str) -> bool:
    """Decides whether ``dep`` holds up the foreground deletion of its owner: its reference
    to that owner has ``blockOwnerDeletion: true``."""
    return any(r.get("uid") == owner_uid and r.get("blockOwnerDeletion") is True
               for r in meta.owner_references(dep))


def foreground_step(deps: Iterable[Obj], owner_uid: str) -> tuple[list[Obj], bool]:
    """Decides one step of a foreground deletion: the dependents to delete now (all not
    already terminating), and whether the owner may go (no blocking dependent is left)."""
    deps = list(deps)
    to_delete = [d for d in deps if not meta.is_being_deleted(d)]
    finished = not any(blocks(d, owner_uid) for d in deps)
    return to_delete, finished


def on_missing_nodes(pods: Iterable[Obj], node_exists: Callable[[str], bool]) -> list[Obj]:
    """Decides pod GC (``gcOrphaned``): the pods bound to a node that does not exist."""
    out = []
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and not node_exists(str(node)):
            out.append(pod)
    return out


def expired_events(events: Iterable[Obj], cutoff: float) -> list[Obj]:
    """Decides the Event TTL: the Events last seen before ``cutoff`` (epoch seconds)."""
    out = []
    for e in events:
        seen = meta.parse_time(str(e.get("lastTimestamp") or meta.creation_timestamp(e)))
        if (seen or 0) < cutoff:
            out.append(e)
    return out


#: what a namespace holds, in the order its deletion deletes them (upstream's namespace
#: controller deletes every kind at once; the DaemonSets first here, so that none makes a
#: pod again while its pods go)
NAMESPACED_KINDS = ("DaemonSet", "Pod", "ControllerRevision", "Event",
                    *(k.kind for k in kinds.USER_KINDS if k.namespaced))


def namespace_step(members: Iterable[Obj]) -> tuple[list[Obj], bool]:
    """One step of the deletion of a namespace holding ``members``: what to delete now
    (nothing already being deleted), and whether the namespace may go (it is empty). The
    DaemonSets go first; what they own goes by their cascade (the collector's own), what
    nothing owns then."""
    left = list(members)
    if not left:
        return [], True
    dss = [o for o in left if o.get("kind") == OWNER_KIND]
    now = dss if any(not meta.is_being_deleted(o) for o in dss) else \
        [o for o in left if not owner_uids(o)]
    return [o for o in now if not meta.is_being_deleted(o)], False


#: the conditions of a namespace being deleted (upstream's namespace deleter keeps these five),
#: each with its reason and message while nothing is wrong
NAMESPACE_CONDITIONS = {
    "NamespaceDeletionDiscoveryFailure": ("ResourcesDiscovered",
                                          "All resources successfully discovered"),
    "NamespaceDeletionGroupVersionParsingFailure": ("ParsedGroupVersions",
                                                    "All legacy kube types successfully parsed"),
    "NamespaceDeletionContentFailure": ("ContentDeleted", "All content successfully deleted, "
                                        "may be waiting on finalization"),
    "NamespaceContentRemaining": ("ContentRemoved", "All content successfully removed"),
    "NamespaceFinalizersRemaining": ("ContentRemoved", "All content successfully removed"),
}


def _resource(obj: Obj) -> str:
    """How upstream names a kind in these conditions: ``pods.``, ``daemonsets.apps`` (its
    resource and group joined by a dot even when the group is the core one's, empty)."""
    info = kinds.by_kind(str(obj.get("kind")))
    return f"{info.plural}.{info.group}" if info else str(obj.get("kind"))


def namespace_conditions(members: Iterable[Obj], old: Any, now: str) -> list[Obj] | None:
    """The status conditions of a namespace being deleted that still holds ``members``, as
    upstream's namespace deleter reports them (what remains, by resource and by finalizer),
    over its conditions ``old``; a condition's lastTransitionTime moves only when its status
    does. None: they are as they were."""
    left = list(members)
    resources = collections.Counter(_resource(o) for o in left)
    finalizers = collections.Counter(f for o in left for f in meta.finalizers(o))
    failing: dict[str, tuple[str, str]] = {}
    if resources:
        failing["NamespaceContentRemaining"] = ("SomeResourcesRemain", (
            "Some resources are remaining: " + ", ".join(sorted(
                f"{r} has {n} resource instances" for r, n in resources.items()))))
    if finalizers:
        failing["NamespaceFinalizersRemaining"] = ("SomeFinalizerRemain", (
            "Some finalizers are remaining: " + ", ".join(sorted(
                f"{f} in {n} resource instances" for f, n in finalizers.items()))))
    before = {c.get("type"): c for c in old if isinstance(c, dict)} \
        if isinstance(old, list) else {}
    out: list[Obj] = [c for t, c in before.items() if t not in NAMESPACE_CONDITIONS]
    changed = False
    for ctype, ok in NAMESPACE_CONDITIONS.items():
        status = "True" if ctype in failing else "False"
        reason, message = failing.get(ctype, ok)
        prev = before.get(ctype)
        if prev is not None and (prev.get("status"), prev.get("reason"), prev.get("message")) \
                == (status, reason, message):
            out.append(prev)
            continue
        changed = True
        since = prev.get("lastTransitionTime") if prev is not None and \
            prev.get("status") == status else now
        out.append({"type": ctype, "status": status, "lastTransitionTime": since,
                    "reason": reason, "message": message})
    return out if changed else None
