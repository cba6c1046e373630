"""The per-node state of one DaemonSet at one revision, kept change by change. Pure.

A full sync reads every Node and Pod to decide placement, read the pod facts and count the
status (``planner.plan``): at 50,000 nodes that is most of a second. A
:class:`DaemonSetIndex` holds the same per-node state for one DaemonSet ``ds`` at its
current-revision ``hash`` and is told of one Node or Pod at a time, so a node or pod event
costs the same at 50 nodes as at 50,000:

* ``decisions[node]``: ``placement.Placement(ds).decide(node)``, for every Node it was given;
* ``node_pods[node]``: the facts (``podfacts.read``, updated against ``hash`` and the template
  generation) of the DaemonSet's pods targeting ``node``, in name order, as
  ``podfacts.by_node`` groups the claimed pods: a pod counts when it is in the DaemonSet's
  namespace, ``claim.sorter`` says OWNED (controller ref with the DaemonSet's uid, labels
  matching the selector) and ``podfacts.kept`` (a target node, not deleted-and-terminal).
  Orphans a sync would adopt are not here: a plan that adopts reads the pods' facts itself;
* the pods a sync claims (``claimed_pods``) and those it might adopt or release
  (``claim_candidates``), so a plan claims only the few of the latter;
* the status counters as running sums of ``status.node_count`` (the one counting rule), the
  ready counted pods' ``podutil.available_after`` times in a sorted list, so
  :meth:`DaemonSetIndex.status` at any ``now`` is one bisection;
* the nodes that should run and have no ready counted pod, so the unavailable breakdown
  (:meth:`DaemonSetIndex.unavailable`) costs what it lists, not a pass over every node;
* which nodes are not *steady* (:func:`steady`), for :meth:`DaemonSetIndex.settled_except`;
* the nodes a full plan must look at one by one, split so that it visits only those that
  can act (:meth:`DaemonSetIndex.plan_sets`): the listed nodes that should run and have no
  pod (``bare``, name order), those whose one pod is old, running and ready (``ready_old``,
  name order: the rolling update's candidates), the other unsteady listed nodes
  (``other``), the nodes with pods missing from the node list (``missing``), the listed
  nodes that should not run with their reason (``off``), and the unavailable nodes by cause,
  so a full plan costs what it changes and lists, not a pass over every node.

The API (everything else is private):

``DaemonSetIndex(ds, hash, nodes=(), pods=())``
    build from scratch (the Nodes, the Pods of any namespace: others are ignored).
``fits(ds)`` / ``update_ds(ds)``
    whether a newer object of the DaemonSet leaves the derived state valid (same uid,
    namespace, pod template spec, selector, template generation, minReadySeconds); update_ds
    takes it (its ``.status`` and generation feed :meth:`status`) and says whether it did.
    A DaemonSet whose current revision's hash changed needs a new index.
``set_node(node)`` / ``remove_node(name)`` / ``set_pod(pod)`` / ``remove_pod(key)``
    a Node added or changed / deleted; a Pod added or changed / deleted (``"ns/name"``).
``decisions``, ``node_pods``, ``node(name)``, ``node_names()``, ``nodes()``,
``claimed_pods()``, ``claim_candidates()``, ``namespace``
    read-only views; ``node_names()`` is sorted, ``nodes()`` the (name, Node) pairs in that
    order. Do not modify what they return.
``status(now, update_observed_generation)``, ``counts(now)``
    equals ``status.compute_status(ds, node_names(), decisions, node_pods, now, update)``;
    the six sums it is made of (``status.with_counts``).
``unavailable(now)``
    equals ``unavailable.breakdown(minReadySeconds, nodes(), decisions, node_pods, now)``.
``settled_except(names)``
    whether every node not in ``names`` is steady (pods on a node missing from the node list
    are never steady).
``widened(names, most)``
    ``names`` and every node not steady, when at most ``most`` are not among ``names``; None
    when more are.
``backoff_keys(ds)``
    ``inputs.backoff_keys`` of the namespace's pods, from the failed pods the index keeps.
``plan_sets()``, ``steady_unavailable(now)``
    the node sets a full plan visits (:class:`PlanSets`); the steady nodes that should run
    (one running, updated pod) and how many of them are not available at ``now``.

Objects are held, not copied: the caller must not modify a Node or Pod it passed in (the
caches replace objects on change, they never modify them).
"""

from __future__ import annotations

import bisect
import sys
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from shared.daemonset import claim, dsutil, inputs, manage, podfacts, status, unavailable
from shared.daemonset.placement import Decision, Placement
from shared.daemonset.podfacts import PodFacts
from shared.daemonset.status import NodeCount
from shared.model import meta, podutil

Obj = dict[str, Any]

_ALWAYS = float("-inf")  # podutil.available_after of a ready pod without minReadySeconds


def steady(decision: Decision, pods: Sequence[PodFacts] | None) -> bool:
    """Whether a sync leaves a node alone: it should run the daemon and has exactly one pod,
    running (not deleting, not terminal) and updated, or it should not and has none. Such a
    node gets no action (``manage`` and the rolling update pass it by: with every pod
    updated there is nothing to roll) and no reason; ready or not, available or not, it
    matters only to the status and the unavailable breakdown, which the index counts.
    Decides."""
    if not decision.should_run:
        return not pods
    if not pods or len(pods) != 1:
        return False
    pod = pods[0]
    return pod.running and pod.updated


class PlanSets(NamedTuple):
    """The index's split of the nodes for a full plan (module docstring). Read-only views
    of the index's state: use them before the index is told of the next change."""

    bare: Sequence[str]  # listed, should run, no pod (name order)
    ready_old: Sequence[str]  # listed, should run, one running pod, old and ready (name order)
    other: Sequence[str]  # every other unsteady listed node (name order)
    missing: Sequence[str]  # nodes with pods, missing from the node list (name order)
    off: Mapping[str, str]  # listed, should not run → the decision's reason


def _basis(ds: Obj) -> tuple[Any, ...]:
    """What the derived state of an index reads of its DaemonSet (besides the hash)."""
    return (meta.uid(ds), meta.namespace(ds), dsutil.template_spec(ds), dsutil.selector(ds),
            dsutil.template_generation(ds), dsutil.min_ready_seconds(ds))


class _NodeSet(set[str]):
    """A set of node names whose table shrinks with it. A Python set never gives back the
    slots of what it discarded, and walking it visits every slot: the unsteady nodes were
    all 50,000 during a fan-out and are a handful after it, yet each walk of them (every
    per-node sync asks ``widened``) cost 0.4 ms, a pass over the cluster. Once fewer than a
    sixteenth of its slots are used, a discard copies what is left into a fresh table: the
    copy costs the table's size, paid for by the discards that emptied it."""

    __slots__ = ()

    def discard(self, name: object) -> None:
        super().discard(name)
        # a set's size is its header plus 16 bytes a slot once it outgrows its inline 8
        if 16 * 16 * len(self) < sys.getsizeof(self) - _SET_HEADER:
            kept = list(self)
            self.clear()  # back to the inline table
            self.update(kept)


_SET_HEADER = sys.getsizeof(set())


class _Names:
    """Node names in name order, where a removal is only marked until the list is next
    read (``names``: once a full plan) or a quarter of it is marked: an apply creates the
    first 250 bare nodes' pods each sync, and taking each out of a list of 50,000 in place
    shifted the rest of the list every time."""

    __slots__ = ("_gone", "_names")

    def __init__(self) -> None:
        self._names: list[str] = []
        self._gone: set[str] = set()  # still in _names, not in the set it stands for

    def __len__(self) -> int:
        return len(self._names) - len(self._gone)

    def append(self, name: str) -> None:
        """While building: ``sort`` when done."""
        self._names.append(name)

    def sort(self) -> None:
        self._names.sort()

    def add(self, name: str) -> None:
        if name in self._gone:
            self._gone.discard(name)  # still in its place
            return
        names = self._names
        at = bisect.bisect_left(names, name)
        if at == len(names) or names[at] != name:
            names.insert(at, name)

    def discard(self, name: str) -> None:
        if name in self._gone:
            return
        names = self._names
        at = bisect.bisect_left(names, name)
        if at < len(names) and names[at] == name:
            self._gone.add(name)
            if len(self._gone) > 64 and 4 * len(self._gone) > len(names):
                self._sweep()

    def names(self) -> list[str]:
        """The names, sorted. Do not modify it."""
        if self._gone:
            self._sweep()
        return self._names

    def _sweep(self) -> None:
        gone, names = self._gone, self._names
        k = len(gone)
        if all(name in gone for name in names[:k]):  # an apply's: the first names
            del names[:k]
        else:
            self._names = [name for name in names if name not in gone]
        gone.clear()


class DaemonSetIndex:
    """The per-node state of one DaemonSet at one current-revision hash (module docstring)."""

    def __init__(self, ds: Obj, hash: str, nodes: Iterable[Obj] = (),
                 pods: Iterable[Obj] = ()) -> None:
        self.ds = ds
        self.hash = hash
        self._basis = _basis(ds)
        self._namespace = meta.namespace(ds)
        self._uid = meta.uid(ds)
        self._failed: dict[str, str] = {}  # pod key → target node: inputs.failed_node
        self._placement = Placement(ds)
        self._sort = claim.sorter(ds)
        self._is_updated = status.labels_updated_check(hash, dsutil.template_generation(ds))
        self._min_ready = dsutil.min_ready_seconds(ds)
        self._nodes: dict[str, Obj] = {}
        self._names: list[str] = []
        self._pairs: list[tuple[str, Obj]] | None = None  # nodes(), until a Node changes
        self._decisions: dict[str, Decision] = {}
        self._pods: dict[str, PodFacts] = {}  # pod key → facts, kept pods only
        self._unkept: dict[str, Obj] = {}  # the DaemonSet's pods podfacts.kept leaves out
        self._maybe: dict[str, Obj] = {}  # pods claim.sorter says MAYBE of
        self._node_pods: dict[str, list[PodFacts]] = {}
        # per node in the node list: its NodeCount unless NOTHING; the sums of the first five
        self._counts: dict[str, NodeCount] = {}
        self._sums = [0, 0, 0, 0, 0]
        self._after: dict[str, float] = {}  # node → available_after of its ready counted pod
        self._after_sorted: list[tuple[float, str]] = []  # (available_after, node), sorted
        self._unsettled = _NodeSet()
        self._bare = _Names()  # listed, should run, no pod
        self._ready_old = _Names()  # listed, should run, one old ready pod
        self._other = _NodeSet()  # the other unsteady listed nodes
        self._missing = _NodeSet()  # nodes with pods missing from the node list
        self._off: dict[str, str] = {}  # listed, should not run → reason
        self._slot: dict[str, _Names] = {}  # node → its list: _bare or _ready_old
        # nodes that should run, without a ready counted pod → unavailable.cause
        self._cause: dict[str, str] = {}
        self._by_cause: dict[str, _Names] = {}  # cause → its nodes in _cause
        self._steady_run = 0  # steady nodes that should run (one running, updated pod)
        self._steady_down = 0  # of them, those in _cause (their pod is not ready)
        self._bulk = True  # while building: append, sort once at the end
        for node in nodes:
            name = meta.name(node)
            self._nodes[name] = node
            self._decisions[name] = self._placement.decide(node, name)
        self._names = sorted(self._nodes)
        for pod in pods:
            key = meta.key(pod)
            self._note_failed(key, pod)
            facts = self._file(key, pod)
            if facts is not None:
                self._pods[key] = facts
                self._node_pods.setdefault(str(facts.node), []).append(facts)
        for bucket in self._node_pods.values():
            if len(bucket) > 1:
                bucket.sort(key=podfacts.name_key)
        for name in self._nodes.keys() | self._node_pods.keys():
            self._recount(name)
        self._after_sorted.sort()
        self._bare.sort()
        self._ready_old.sort()
        for names in self._by_cause.values():
            names.sort()
        self._bulk = False

    # ---- the DaemonSet ------------------------------------------------------------------

    def fits(self, ds: Obj) -> bool:
        """Whether ``ds`` (a newer object of the same DaemonSet) leaves this index valid."""
        return _basis(ds) == self._basis

    def update_ds(self, ds: Obj) -> bool:
        """Take ``ds`` if it :meth:`fits`; False (nothing changed) if it does not."""
        if not self.fits(ds):
            return False
        self.ds = ds
        return True

    # ---- changes ------------------------------------------------------------------------

    def set_node(self, node: Obj) -> None:
        """A Node was added or changed."""
        name = meta.name(node)
        if name not in self._nodes:
            bisect.insort(self._names, name)
        self._nodes[name] = node
        self._pairs = None
        self._decisions[name] = self._placement.decide(node, name)
        self._recount(name)

    def remove_node(self, name: str) -> None:
        """The Node ``name`` was deleted (its pods stay until they are deleted)."""
        if self._nodes.pop(name, None) is None:
            return
        del self._names[bisect.bisect_left(self._names, name)]
        self._pairs = None
        del self._decisions[name]
        self._recount(name)

    def set_pod(self, pod: Obj) -> None:
        """A Pod was added or changed (any pod: those that are not the DaemonSet's are
        ignored, or dropped if they were)."""
        key = meta.key(pod)
        self._unkept.pop(key, None)
        self._maybe.pop(key, None)
        self._failed.pop(key, None)
        self._note_failed(key, pod)
        facts = self._file(key, pod)
        old = self._pods.pop(key, None)
        if old is not None:
            self._unbucket(old)
        if facts is not None:
            self._pods[key] = facts
            node = str(facts.node)
            bucket = self._node_pods.get(node)
            if bucket is None:
                self._node_pods[node] = [facts]
            else:
                new = list(bucket)
                bisect.insort(new, facts, key=podfacts.name_key)
                self._node_pods[node] = new
            self._recount(node)
        if old is not None and old.node != (facts.node if facts is not None else None):
            self._recount(str(old.node))

    def remove_pod(self, key: str) -> None:
        """The Pod ``key`` (``"namespace/name"``) was deleted."""
        self._failed.pop(key, None)
        self._unkept.pop(key, None)
        self._maybe.pop(key, None)
        old = self._pods.pop(key, None)
        if old is not None:
            self._unbucket(old)
            self._recount(str(old.node))

    # ---- reads --------------------------------------------------------------------------

    @property
    def decisions(self) -> Mapping[str, Decision]:
        """Node name → placement decision, for every Node."""
        return self._decisions

    @property
    def node_pods(self) -> Mapping[str, list[PodFacts]]:
        """Node name → the DaemonSet's pods there (``podfacts.by_node``'s shape)."""
        return self._node_pods

    @property
    def namespace(self) -> str:
        return self._namespace

    def claimed_pods(self) -> list[Obj]:
        """The pods ``claim.claim`` claims without adopting: the DaemonSet's own whose
        labels match its selector (any order)."""
        return [f.pod for f in self._pods.values()] + list(self._unkept.values())

    def claim_candidates(self) -> list[Obj]:
        """The pods ``claim.claim`` may adopt or release (``claim.MAYBE``; any order):
        claiming them and adding :meth:`claimed_pods` is claiming every pod of the
        namespace."""
        return list(self._maybe.values())

    def node(self, name: str) -> Obj | None:
        return self._nodes.get(name)

    def node_names(self) -> Sequence[str]:
        """Every Node's name, sorted."""
        return self._names

    def nodes(self) -> list[tuple[str, Obj]]:
        """(name, Node) pairs in name order, as the planner's passes take them."""
        if self._pairs is None:
            nodes = self._nodes
            self._pairs = [(name, nodes[name]) for name in self._names]
        return self._pairs

    def counts(self, now: float) -> tuple[int, int, int, int, int, int]:
        """The sums of ``status.node_count`` over the index's nodes at ``now``: desired,
        current, misscheduled, ready, updated, available (``status.with_counts``' input)."""
        available = bisect.bisect_left(self._after_sorted, (now, ""))  # how many are < now
        s = self._sums
        return (s[0], s[1], s[2], s[3], s[4], available)

    def status(self, now: float, update_observed_generation: bool) -> Obj:
        """``status.compute_status`` over the index's nodes at ``now``. Decides."""
        return status.with_counts(self.ds, self.counts(now), update_observed_generation)

    def unavailable(self, now: float) -> dict[str, list[str]]:
        """``unavailable.breakdown`` of the index's nodes at ``now``: reason → the names of
        the nodes whose daemon pod is missing or not available then (name order). Cost: a
        copy of the lists kept by cause (the nodes whose pod is missing or not ready), and
        the cause of each ready pod not yet available, whatever the number of nodes.
        Decides."""
        out = {cause: list(names.names()) for cause, names in self._by_cause.items() if names}
        extra: dict[str, list[str]] = {}
        for name in self.not_yet_available(now):
            extra.setdefault(unavailable.cause(self._nodes[name], self._node_pods.get(name)),
                             []).append(name)
        for cause, names in extra.items():
            out[cause] = sorted(out.get(cause, []) + names)
        return out

    def not_yet_available(self, now: float) -> list[str]:
        """The nodes whose counted pod is ready but not available at ``now``."""
        after = self._after_sorted
        return [name for _, name in after[bisect.bisect_left(after, (now, "")):]]

    def backoff_keys(self, ds: Obj) -> list[str]:
        """``inputs.backoff_keys`` of ``ds`` (this index's DaemonSet, any newer object of it
        that fits) over the namespace's pods: one key per failed pod it controls. Cost: those
        pods, whatever the number of nodes."""
        return [manage.backoff_key(ds, node) for node in self._failed.values()]

    def plan_sets(self) -> PlanSets:
        """The node sets a full plan visits (:class:`PlanSets`); cost: the unsteady nodes
        besides ``bare`` and ``ready_old`` (sorting them), whatever the number of nodes."""
        return PlanSets(self._bare.names(), self._ready_old.names(), sorted(self._other),
                        sorted(self._missing), self._off)

    def steady_unavailable(self, now: float) -> tuple[int, int]:
        """The steady nodes that should run (one running, updated pod: ``steady``), and how
        many of them are not available at ``now`` (their pod not ready, or ready inside
        minReadySeconds)."""
        later = sum(1 for name in self.not_yet_available(now) if name not in self._unsettled)
        return self._steady_run, self._steady_down + later

    def settled_except(self, names: Collection[str]) -> bool:
        """Whether every node not in ``names`` is steady (:func:`steady`): cost
        O(len(names)), whatever the number of nodes."""
        if len(self._unsettled) > len(names):
            return False
        return all(name in names for name in self._unsettled)

    def widened(self, names: Collection[str], most: int) -> frozenset[str] | None:
        """``names`` and every node that is not steady, if at most ``most`` of those are not
        in ``names``; else None. With it every node outside the set is steady, so a sync of
        the set decides what a full one does. Cost O(len(names) + most)."""
        if len(self._unsettled) > len(names) + most:
            return None
        others = [name for name in self._unsettled if name not in names]
        if len(others) > most:
            return None
        return frozenset(names).union(others)

    # ---- inside ---------------------------------------------------------------------------

    def _note_failed(self, key: str, pod: Obj) -> None:
        if meta.namespace(pod) == self._namespace:
            node = inputs.failed_node(self._uid, pod)
            if node is not None:
                self._failed[key] = node

    def _file(self, key: str, pod: Obj) -> PodFacts | None:
        """The facts of ``pod`` if it is one of the DaemonSet's that ``podfacts.by_node``
        keeps; the DaemonSet's others and the MAYBE ones go to their maps."""
        if meta.namespace(pod) != self._namespace:
            return None
        case = self._sort(pod)
        if case == claim.MAYBE:
            self._maybe[key] = pod
        if case != claim.OWNED:
            return None
        facts = podfacts.read(pod, self._is_updated)
        if podfacts.kept(facts):
            return facts
        self._unkept[key] = pod
        return None

    def _unbucket(self, old: PodFacts) -> None:
        node = str(old.node)
        left = [p for p in self._node_pods.get(node, ()) if p is not old]
        if left:
            self._node_pods[node] = left
        else:
            self._node_pods.pop(node, None)

    def _insert(self, values: list[Any], value: Any) -> None:
        if self._bulk:
            values.append(value)
        else:
            bisect.insort(values, value)

    def _put(self, names: _Names, name: str) -> None:
        if self._bulk:
            names.append(name)
        else:
            names.add(name)

    def _add(self, count: NodeCount, sign: int) -> None:
        s = self._sums
        s[0] += sign * count.desired
        s[1] += sign * count.current
        s[2] += sign * count.misscheduled
        s[3] += sign * count.ready
        s[4] += sign * count.updated

    def _forget(self, name: str) -> tuple[float | None, str | None, _Names | None]:
        """Take node ``name``'s part out of the sums and sets; its places in the sorted
        lists are returned, not taken out (``_recount`` moves it only if they change): its
        available-after time, its unavailable cause and its list (bare or ready-old)."""
        old = self._counts.pop(name, None)
        if old is not None:
            self._add(old, -1)
        was = self._after.pop(name, None)
        cause = self._cause.pop(name, None)
        slot: _Names | None = None
        if name in self._unsettled:
            self._unsettled.discard(name)
            self._other.discard(name)
            self._missing.discard(name)
            slot = self._slot.pop(name, None)
        elif old is not None and old.desired:  # steady and should run
            self._steady_run -= 1
            self._steady_down -= old.ready_pod is None
        self._off.pop(name, None)
        return was, cause, slot

    @staticmethod
    def _remove(values: list[Any], value: Any) -> None:
        at = bisect.bisect_left(values, value)
        if at < len(values) and values[at] == value:
            del values[at]

    def _recount(self, name: str) -> None:
        """Take node ``name``'s part out of the sums and sets, and put its current one in.
        A node whose places in the sorted lists stay (most changes: a Node's heartbeat, a
        pod's status) is not moved in them."""
        was, old_cause, old_slot = (None, None, None) if self._bulk else self._forget(name)
        after: float | None = None
        cause: str | None = None
        slot: _Names | None = None
        decision = self._decisions.get(name)
        pods = self._node_pods.get(name)
        if decision is None:  # pods on a node missing from the node list: not counted
            if pods:
                self._unsettled.add(name)
                self._missing.add(name)
        else:
            count = status.node_count(decision, pods)
            if count is not status.NOTHING:
                self._counts[name] = count
                self._add(count, 1)
            if count.ready_pod is not None:  # ready: available after -inf w/o minReadySeconds
                after = podutil.available_after(count.ready_pod.pod, self._min_ready) \
                    if self._min_ready else _ALWAYS
                self._after[name] = after
            elif decision.should_run:
                cause = unavailable.cause(self._nodes[name], pods)
                self._cause[name] = cause
            if not decision.should_run:
                self._off[name] = decision.reason
            if not steady(decision, pods):
                self._unsettled.add(name)
                if decision.should_run and not pods:
                    slot = self._bare
                elif decision.should_run and pods is not None and len(pods) == 1 \
                        and pods[0].running and pods[0].ready:  # and old: not steady
                    slot = self._ready_old
                else:
                    self._other.add(name)
                if slot is not None:
                    self._slot[name] = slot
            elif decision.should_run:
                self._steady_run += 1
                self._steady_down += count.ready_pod is None
        if was != after:
            if was is not None:
                self._remove(self._after_sorted, (was, name))
            if after is not None:
                self._insert(self._after_sorted, (after, name))
        if old_cause != cause:
            if old_cause is not None:
                self._by_cause[old_cause].discard(name)
            if cause is not None:
                self._put(self._by_cause.setdefault(cause, _Names()), name)
        if old_slot is not slot:
            if old_slot is not None:
                old_slot.discard(name)
            if slot is not None:
                self._put(slot, name)
