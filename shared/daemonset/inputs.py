"""What one sync of a DaemonSet reads, built once for the live sync
(``services.reconciler.sync``) and for ``replay --verify`` (``services.replay.verify``), so a
recomputed decision reads exactly what the recorded one did. Pure.

A sync reads the DaemonSet by key, every Node, the Pods and ControllerRevisions of the
DaemonSet's namespace, the PriorityClasses (its pods' priority), the failed-pod backoff of
the nodes where one of its pods failed (``backoff_keys``), whether its expectations are
satisfied, and the time.

A per-node sync (``planner.plan_nodes``) reads, by ``build_nodes``, the DaemonSet, the Nodes
it is for, the Pods of the namespace targeting them, every ControllerRevision of the
namespace, the PriorityClasses, the backoff of those nodes, the expectations and the time:
nothing that grows with the cluster.

A source may hand out its listings (every Node, a namespace's Pods) as :class:`Listed`, made
when a pass first reads them: a full plan from a DaemonSet index reads neither.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any, Protocol, overload

from shared.daemonset import manage
from shared.daemonset import types as t
from shared.model import meta, podutil
from shared.model.objkey import ObjectKey

Obj = dict[str, Any]

#: the kinds a sync reads
KINDS: tuple[str, ...] = ("DaemonSet", "Node", "Pod", "ControllerRevision", "PriorityClass")


class Source(Protocol):
    """The objects a sync reads from (the worker's cache, or verify's fold of an export)."""

    def daemonset(self, key: str) -> Obj | None: ...

    def nodes(self) -> Sequence[Obj]: ...

    def pods(self, namespace: str) -> Sequence[Obj]: ...

    def revisions(self, namespace: str) -> list[Obj]: ...

    def priority_classes(self) -> Mapping[str, Obj]:
        """The PriorityClasses by name."""
        ...


class NodeSource(Source, Protocol):
    """What a per-node sync reads besides: single Nodes, and the pods targeting a node."""

    def node(self, name: str) -> Obj | None: ...

    def pods_on(self, namespace: str, node: str) -> list[Obj]:
        """The namespace's Pods whose target node (``podutil.target_node``) is ``node``."""
        ...


class Listed(Sequence[Obj]):
    """A source's listing, made by ``read`` when it is first read. A full plan with a
    DaemonSet index reads no Node and no Pod of its snapshot (``planner.plan``), and at
    50,000 nodes a listing costs milliseconds, most of a sync that decides one node.
    ``read`` must give what it would have given when the Listed was made: the source does
    not move while a sync reads its snapshot."""

    def __init__(self, read: Callable[[], Sequence[Obj]]) -> None:
        self._read: Callable[[], Sequence[Obj]] | None = read
        self._items: Sequence[Obj] = ()

    def _listed(self) -> Sequence[Obj]:
        if self._read is not None:
            self._items, self._read = self._read(), None
        return self._items

    def __len__(self) -> int:
        return len(self._listed())

    @overload
    def __getitem__(self, i: int) -> Obj: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[Obj]: ...

    def __getitem__(self, i: int | slice) -> Obj | Sequence[Obj]:
        return self._listed()[i]

    def __iter__(self) -> Iterator[Obj]:
        return iter(self._listed())


def backoff_keys(ds: Obj, pods: Sequence[Obj]) -> list[str]:
    """The failed-pod backoff entries a sync of ``ds`` reads: one per node with a failed
    pod of ``ds`` (only those can need one). Decides."""
    uid = meta.uid(ds)
    return [manage.backoff_key(ds, node) for p in pods
            if (node := failed_node(uid, p)) is not None]


def failed_node(uid: str, pod: Obj) -> str | None:
    """The target node of ``pod`` ("" when none) if it failed and ``uid`` controls it: the
    pods :func:`backoff_keys` reads an entry for. Decides."""
    # the phase first: the one cheap test that rules out nearly every pod
    if (pod.get("status") or {}).get("phase") != "Failed":
        return None
    ref = meta.controller_ref(pod)
    if ref and ref.get("uid") == uid:
        return podutil.target_node(pod) or ""
    return None


def build(key: str, source: Source, now: float, position: str,
          backoff: Callable[[list[str]], dict[str, t.BackoffEntry]],
          satisfied: Callable[[], bool],
          failed: Callable[[Obj], list[str] | None] | None = None) -> t.Snapshot:
    """The Snapshot of one sync of ``key``: ``backoff`` looks entries up (asked only when
    there are some to read), ``satisfied`` answers whether the expectations of ``key`` are
    met (asked only when the DaemonSet exists). ``failed``, given the DaemonSet, may answer
    :func:`backoff_keys` of its pods itself (a DaemonSet index that keeps its failed pods,
    ``nodeindex.DaemonSetIndex.backoff_keys``), or None to have them read. Decides, given
    its callables."""
    ds = source.daemonset(key)
    if ds is None:
        return t.Snapshot(key=key, ds=None, nodes=[], pods=[], revisions=[], backoff={},
                          expectations_satisfied=True, now=now, position=position)
    ns = ObjectKey.parse(key).namespace
    pods = source.pods(ns)
    revisions = source.revisions(ns)
    nodes = source.nodes()
    wanted = failed(ds) if failed is not None else None
    if wanted is None:
        wanted = backoff_keys(ds, pods)
    entries = backoff(wanted) if wanted else {}
    return t.Snapshot(key=key, ds=ds, nodes=nodes, pods=pods, revisions=revisions,
                      backoff=entries, expectations_satisfied=satisfied(), now=now,
                      position=position, priority_classes=source.priority_classes())


def build_nodes(key: str, nodes: Collection[str], source: NodeSource, now: float,
                position: str, backoff: Callable[[list[str]], dict[str, t.BackoffEntry]],
                satisfied: Callable[[], bool]) -> t.Snapshot:
    """The Snapshot of a per-node sync of ``key`` for ``nodes``: ``build``'s, with only those
    Nodes (the ones that exist) and the Pods targeting them. Decides, given its callables."""
    ds = source.daemonset(key)
    if ds is None:
        return t.Snapshot(key=key, ds=None, nodes=[], pods=[], revisions=[], backoff={},
                          expectations_satisfied=True, now=now, position=position)
    ns = ObjectKey.parse(key).namespace
    names = sorted(set(nodes))
    found = [source.node(name) for name in names]
    pods = [p for name in names for p in source.pods_on(ns, name)]
    wanted = backoff_keys(ds, pods)
    entries = backoff(wanted) if wanted else {}
    return t.Snapshot(key=key, ds=ds, nodes=[n for n in found if n is not None], pods=pods,
                      revisions=source.revisions(ns), backoff=entries,
                      expectations_satisfied=satisfied(), now=now, position=position,
                      priority_classes=source.priority_classes())
