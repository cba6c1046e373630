"""The contract of the pure DaemonSet core: what a sync reads and what it decides.

Objects are plain Kubernetes-shaped dicts (the JSON of apps/v1 DaemonSet, core/v1 Node and
Pod, apps/v1 ControllerRevision), exactly as the store holds them. Nothing here does IO or
reads a clock: ``now`` (seconds since the epoch, float) is part of the snapshot.

``plan(snapshot) -> Plan`` (shared.daemonset.planner) turns one snapshot into the actions of
one ``syncDaemonSet`` pass (spec §c.1). The reconciler executes them in this order:

1. ``history``   — ControllerRevision claims, creates, updates and pod relabels
                   (constructHistory); an error here ends the sync, with no status.
2. ``claims``    — adopt/release pods, on every sync, also while expectations are pending
                   (upstream's status pass claims too); an error here aborts all pod
                   creates/deletes and the status.
3. if ``expectations_satisfied`` was false: only ``status`` (observedGeneration kept).
4. ``sync_nodes``— set expectations, then create pods in slow-start batches, then delete.
5. ``cleanup``   — delete old ControllerRevisions (cleanupHistory).
6. ``status``    — unless None (empty selector, DaemonSet being deleted) or step 1 or 2 failed.

``events``, ``backoff`` and ``requeue_after`` are applied whatever happens to the rest.
``error`` non-empty means the sync itself failed after the actions above (e.g. an invalid
maxSurge, or a rolling update meeting a pod on a missing node, §d.3): the executor applies
the plan as given (it holds no rolling-update or cleanup actions) and then reports failure, so
the key is requeued rate-limited.

Pod names in ``sync_nodes`` are derived from the snapshot's ``position`` (a new decision gives
new names, a replayed one the same), unique within the plan and distinct from every pod name
in the snapshot (``shared.daemonset.podtemplate.pod_name`` with the lowest free salt); the
executor retries with the next salt only on a collision its snapshot did not show.
"""

from __future__ import annotations

import bisect
import collections
import itertools
import operator
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shared.control import backoff as _backoff
from shared.model.meta import OwnerReference

Obj = dict[str, Any]

SCHEMA_VERSION = 1


# The failed-pod backoff state of one key (``<ds uid>/<observedGeneration>/<node>``).
BackoffEntry = _backoff.BackoffEntry


@dataclass(frozen=True)
class Snapshot:
    """Everything one sync of one DaemonSet may read. ``position`` is the log id read through."""

    key: str  # "namespace/name"
    ds: Obj | None  # None: not found
    nodes: Sequence[Obj]  # every Node
    pods: Sequence[Obj]  # all pods in the DaemonSet's namespace
    revisions: list[Obj]  # all ControllerRevisions in the DaemonSet's namespace
    backoff: dict[str, BackoffEntry]
    expectations_satisfied: bool
    now: float
    position: str = "0-0"
    # the stored PriorityClasses by name, its pods' priority read from (``shared.model.
    # priority.admit``; the built-in ones resolve without)
    priority_classes: Mapping[str, Obj] = field(default_factory=dict)


# ---- actions -------------------------------------------------------------------------------


@dataclass(frozen=True)
class CreatePod:
    """Create ``pod`` (a full object, named deterministically) for ``node``. Its name is
    ``podtemplate.pod_name(ds, node, hash, salt, snapshot.position)``; on a collision retry
    from ``salt + 1``."""

    node: str
    pod: Obj
    salt: int = 0


@dataclass(frozen=True)
class DeletePod:
    """Delete pod ``namespace/name`` whose uid is ``uid`` (precondition)."""

    namespace: str
    name: str
    uid: str
    node: str = ""


@dataclass(frozen=True)
class PatchOwner:
    """Adopt (``adopt=True``: add the controller ref) or release (remove the ref with
    the DaemonSet's uid) a Pod or ControllerRevision, with the object's uid as precondition."""

    kind: str  # "Pod" | "ControllerRevision"
    namespace: str
    name: str
    uid: str
    adopt: bool
    owner_ref: OwnerReference


@dataclass(frozen=True)
class CreateRevision:
    """Create ``revision``; on AlreadyExists the executor runs the collision rules of §e.3."""

    revision: Obj


@dataclass(frozen=True)
class UpdateRevision:
    """Replace labels and/or revision number of an existing ControllerRevision."""

    namespace: str
    name: str
    uid: str
    revision: int | None = None
    labels: dict[str, str] | None = None


@dataclass(frozen=True)
class DeleteRevision:
    namespace: str
    name: str
    uid: str


@dataclass(frozen=True)
class RelabelPod:
    """Merge-patch ``labels`` into a pod's labels (duplicate-revision dedup, §e.3 step 6)."""

    namespace: str
    name: str
    uid: str
    labels: dict[str, str]


@dataclass(frozen=True)
class EmitEvent:
    """An Event about the DaemonSet (spec §i)."""

    type: str  # "Normal" | "Warning"
    reason: str
    message: str


@dataclass(frozen=True)
class AdvanceBackoff:
    """flowcontrol.Backoff.Next(key, now): the executor stores the returned entry."""

    key: str
    entry: BackoffEntry


@dataclass(frozen=True)
class FailRollout:
    """The rollout failed past ``max-failure-ratio`` (``shared.daemonset.failure``): one
    update of the DaemonSet, as a user's ``rollout pause`` or ``rollout undo`` would write it,
    with ``resource_version`` (the DaemonSet the plan saw) as precondition: ``annotations``
    set (the failure record; ``paused`` for a pause) and, for a rollback, the pod
    ``template`` replaced by the previous revision's."""

    action: str  # "pause" | "rollback"
    namespace: str
    name: str
    uid: str
    resource_version: str
    annotations: dict[str, str]
    template: Obj | None
    message: str


@dataclass(frozen=True)
class SyncNodes:
    """One ``syncNodes`` call (§c.6): set expectations to (len(creates), len(deletes)) —
    already capped at burstReplicas — then create and delete."""

    creates: list[CreatePod]
    deletes: list[DeletePod]


def in_sorted(names: Sequence[str], name: str) -> bool:
    """Whether ``name`` is in ``names`` (sorted), looked up in place."""
    at = bisect.bisect_left(names, name)
    return at < len(names) and names[at] == name


class Reasons(Mapping[str, str]):
    """Node → why it has no (up-to-date) daemon pod, as a full plan from an index gives it
    (``Plan.reasons``). At 50,000 nodes most nodes have one reason (no pod yet: the burst
    limit, or expectations pending), every sync of an apply; ``group`` keeps those nodes as
    the sorted list the plan already holds, never copied into a map, with ``reason``;
    ``own`` has every other node's reason, and ``shadowed`` the nodes of the group that
    ``own`` gives another reason or none. Read as a mapping, it builds the whole map once;
    :meth:`grouped` gives the decision record's form without building it. Immutable."""

    __slots__ = ("_group", "_map", "_own", "_reason", "_shadowed")

    def __init__(self, own: dict[str, str], group: Sequence[str] = (), reason: str = "",
                 shadowed: Collection[str] = ()) -> None:
        self._own = own
        self._group = group  # sorted
        self._reason = reason
        self._shadowed = shadowed
        self._map: dict[str, str] | None = None

    def _whole(self) -> dict[str, str]:
        if self._map is None:
            if not self._group:
                self._map = self._own
            else:
                whole = dict.fromkeys(self._group, self._reason)
                whole.update(self._own)
                for name in self._shadowed:
                    if name not in self._own:
                        del whole[name]
                self._map = whole
        return self._map

    def __getitem__(self, name: str) -> str:
        return self._whole()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._whole())

    def __len__(self) -> int:
        return len(self._whole())

    def __repr__(self) -> str:
        return f"Reasons({self._whole()!r})"

    def grouped(self, most: int) -> tuple[dict[str, list[str]], dict[str, int]]:
        """:func:`group_reasons` of the map, costing ``own`` alone when the group's reason
        is counted: the group's nodes are then counted by their number."""
        count = len(self._group) - len(self._shadowed)
        if count and count + operator.countOf(self._own.values(), self._reason) > most:
            return group_reasons(self._own, most, {self._reason: count})
        return group_reasons(self._whole(), most)


def group_reasons(reasons: Mapping[str, str], most: int, more: Mapping[str, int] | None = None,
                  ) -> tuple[dict[str, list[str]], dict[str, int]]:
    """reason → its nodes (in the map's order) for each reason of at most ``most`` nodes,
    and reason → how many nodes have it for the others; ``more``: nodes of each reason
    besides the map's, counted, never named. Counted in C first (most nodes have a counted
    reason), then the nodes to name picked out in C."""
    tally = collections.Counter(reasons.values())
    if more:
        tally.update(more)
    counts: dict[str, int] = {}
    named_reasons: set[str] = set()
    for why, n in tally.items():
        if n > most:
            counts[why] = n
        else:
            named_reasons.add(why)
    listed: Iterable[str] = reasons
    if counts:
        listed = itertools.compress(reasons, map(named_reasons.__contains__, reasons.values()))
    named: dict[str, list[str]] = {}
    for name in listed:
        named.setdefault(reasons[name], []).append(name)
    return named, counts


@dataclass
class Plan:
    """What one sync decided. ``reasons`` maps node name → why it has no pod, or why its old
    pod is not replaced yet (for `why`); nodes that should run and have a pod are left out."""

    key: str
    history: list[CreateRevision | UpdateRevision | DeleteRevision | RelabelPod | PatchOwner] = (
        field(default_factory=list)
    )
    claims: list[PatchOwner] = field(default_factory=list)
    sync_nodes: SyncNodes | None = None
    cleanup: list[DeleteRevision] = field(default_factory=list)
    events: list[EmitEvent] = field(default_factory=list)
    backoff: list[AdvanceBackoff] = field(default_factory=list)
    requeue_after: float | None = None
    status: Obj | None = None
    failure: FailRollout | None = None  # the rollout pauses or rolls back itself
    update_observed_generation: bool = True
    delete_expectations: bool = False  # DaemonSet not found
    hash: str = ""
    reasons: Mapping[str, str] = field(default_factory=dict)  # a dict, or Reasons
    # why the unavailable nodes are (``unavailable.breakdown``: reason → node names), and
    # which nodes the rollout gates hold at the old revision (node → reason); for `why ds`
    # and the unavailable-pods gauge, not part of the decision record
    unavailable: dict[str, list[str]] = field(default_factory=dict)
    held: dict[str, str] = field(default_factory=dict)
    # the nodes a per-node sync decided for (``planner.plan_nodes``); None: a full sync
    nodes: list[str] | None = None
    error: str = ""  # the sync fails with this message (see the module docstring)
