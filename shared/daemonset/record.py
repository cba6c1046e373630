"""Decision records: the canonical, comparable summary of a Plan and the inputs a replay
needs beyond the log (decides nothing, does no IO).

A record (:class:`DecisionRecord`) is written to the log after each sync, as a msgpack map
(``to_map``) with its version under ``"rv"`` (none means 1). ``replay --verify`` rebuilds
the objects up to ``position``, builds the same Snapshot with the recorded ``now``,
expectations flag and backoff entries, re-plans, and compares ``summarize(plan)`` with the
recorded ``actions``. ``read`` turns a DECISION entry's map back into its record (this one,
or gc's ``tainteviction.EvictionRecord``), every field's type checked.

Versions: 1 logged every node's reason; 2 (since a sync at 50,000 nodes gave ~45,000 nodes
one of a few reasons, 200 times an apply) names the nodes of a reason only when it has at
most ``LISTED_MAX`` of them, and counts the others by reason (``reasonCounts``). Nothing
that ``replay --verify`` recomputes is left out (it compares the actions); ``why`` looks a
node's reason up and, when the record does not name it, judges the node on the current
state. A version 1 record reads as ever (every reason, no counts), and is written back as
it was read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.daemonset import types as t
from shared.model import envelope, tainteviction
from shared.model.errors import CorruptEntryError

RECORD_VERSION = 2
WHAT = "decision record"
#: a reason given to more nodes than this is logged as its count alone (version 2): a sync
#: creates at most this many pods, so the nodes it acts on are always named
LISTED_MAX = 250
Obj = dict[str, Any]


@dataclass(frozen=True)
class DecisionRecord:
    """What one DaemonSet sync read and decided. A new field is an attribute with a
    default, a line in ``_FIELDS`` (wire name, attribute, type) and, when an older record
    may lack it, nothing else: absent reads as the default."""

    key: str = ""  # the DaemonSet
    position: str = "0-0"  # the log id the sync's cache had applied
    now: float = 0.0  # the time the sync used
    uid: str = ""  # of the DaemonSet it read
    expectations_satisfied: bool = False
    backoff: dict[str, list[float]] = field(default_factory=dict)  # key -> [delay, last]
    actions: Obj = field(default_factory=dict)  # summarize(plan)
    # node -> why (not) placed: a dict, or a plan's t.Reasons (not copied node by node)
    reasons: Mapping[str, str] = field(default_factory=dict)
    worker: str = ""
    errors: list[str] = field(default_factory=list)  # what the executor failed to write
    # the nodes of a per-node sync (``planner.plan_nodes``), which replay recomputes by that
    # function; None (not written): a full sync
    nodes: list[str] | None = None
    # reason → how many nodes had it, for the reasons whose nodes the record does not name
    # (version 2: more than LISTED_MAX of them)
    reason_counts: dict[str, int] = field(default_factory=dict)
    version: int = RECORD_VERSION

    def to_map(self) -> Obj:
        """The record as logged. Its reasons are grouped by reason (``reasonsBy``: reason →
        the nodes, in the plan's order): at 50,000 nodes a full sync gives most of them one
        of a few reasons, and node → reason wrote each again per node. From version 2 a
        reason of more than ``LISTED_MAX`` nodes is logged as its count (``reasonCounts``)."""
        out: Obj = {"rv": self.version}
        for wire, attr, _type in _FIELDS:
            value = getattr(self, attr)
            if value is not None:
                out[wire] = value
        del out["reasons"]
        counts = dict(self.reason_counts)
        reasons = self.reasons
        most = LISTED_MAX if self.version >= 2 else len(reasons)  # version 1 names every one
        if isinstance(reasons, t.Reasons):
            grouped, counted = reasons.grouped(most)
        else:
            grouped, counted = t.group_reasons(reasons, most)
        for reason, n in counted.items():
            counts[reason] = counts.get(reason, 0) + n
        out["reasonsBy"] = grouped
        if counts:
            out["reasonCounts"] = counts
        return out

    @classmethod
    def from_map(cls, doc: Any) -> DecisionRecord:
        """A record as logged; raises CorruptEntryError naming the first field of the wrong
        type, or a version this code does not read. Decides."""
        version = envelope.version(doc, WHAT, RECORD_VERSION, field="rv")
        envelope.check(doc, WHAT, ((wire, type_, False) for wire, _a, type_ in _FIELDS))
        values = {attr: doc[wire] for wire, attr, _t in _FIELDS if doc.get(wire) is not None}
        if "now" in values:
            values["now"] = float(values["now"])
        grouped = doc.get("reasonsBy")
        if grouped is not None:  # older records have node → reason under "reasons"
            values["reasons"] = _ungroup(grouped)
        counts = doc.get("reasonCounts")
        if counts is not None:
            values["reason_counts"] = _counts(counts)
        return cls(**values, version=version)


def _ungroup(grouped: Any) -> dict[str, str]:
    """Node → reason from ``reasonsBy`` (reason → nodes); CorruptEntryError unless it is a
    map of strings to lists of strings."""
    if not isinstance(grouped, dict):
        raise CorruptEntryError(f"{WHAT} field 'reasonsBy' is not of type dict")
    out: dict[str, str] = {}
    for reason, nodes in grouped.items():
        if not isinstance(reason, str) or not isinstance(nodes, list) \
                or not all(isinstance(n, str) for n in nodes):
            raise CorruptEntryError(f"{WHAT} field 'reasonsBy' is not reasons to node lists")
        out.update(dict.fromkeys(nodes, reason))
    return out


def _counts(counts: Any) -> dict[str, int]:
    """Reason → count from ``reasonCounts``; CorruptEntryError unless it maps strings to
    counts (ints, not bools, not negative)."""
    if not isinstance(counts, dict) or not all(
            isinstance(r, str) and isinstance(n, int) and not isinstance(n, bool) and n >= 0
            for r, n in counts.items()):
        raise CorruptEntryError(f"{WHAT} field 'reasonCounts' is not reasons to counts")
    return dict(counts)


# wire name, attribute, type (in the order records are written)
_FIELDS: tuple[tuple[str, str, type], ...] = (
    ("key", "key", str), ("position", "position", str), ("now", "now", float),
    ("uid", "uid", str), ("expectationsSatisfied", "expectations_satisfied", bool),
    ("backoff", "backoff", dict), ("actions", "actions", dict), ("reasons", "reasons", dict),
    ("worker", "worker", str), ("errors", "errors", list), ("nodes", "nodes", list))


def read(doc: Any) -> DecisionRecord | tainteviction.EvictionRecord:
    """The record a DECISION entry holds: a taint eviction's (gc, field ``type``) or a
    DaemonSet sync's. Raises CorruptEntryError. Decides."""
    if isinstance(doc, dict) and doc.get("type") == tainteviction.RECORD_TYPE:
        return tainteviction.EvictionRecord.from_map(doc)
    return DecisionRecord.from_map(doc)


def summarize(plan: t.Plan) -> dict[str, Any]:
    """Every effect of a plan, as plain data in a stable order."""
    out: dict[str, Any] = {"hash": plan.hash}
    history: list[list[Any]] = []
    for h in plan.history:
        if isinstance(h, t.CreateRevision):
            md = h.revision.get("metadata") or {}
            history.append(["create-revision", md.get("name"), h.revision.get("revision")])
        elif isinstance(h, t.UpdateRevision):
            history.append(
                ["update-revision", h.name, h.revision, sorted((h.labels or {}).items())]
            )
        elif isinstance(h, t.DeleteRevision):
            history.append(["delete-revision", h.name])
        elif isinstance(h, t.RelabelPod):
            history.append(["relabel-pod", h.name, sorted(h.labels.items())])
        elif isinstance(h, t.PatchOwner):
            history.append(["adopt" if h.adopt else "release", h.kind, h.name])
    out["history"] = history
    out["claims"] = [["adopt" if c.adopt else "release", c.kind, c.name] for c in plan.claims]
    if plan.sync_nodes is not None:
        out["creates"] = [
            [c.node, (c.pod.get("metadata") or {}).get("name")] for c in plan.sync_nodes.creates
        ]
        out["deletes"] = [[d.name, d.node] for d in plan.sync_nodes.deletes]
    else:
        out["creates"], out["deletes"] = [], []
    out["cleanup"] = [c.name for c in plan.cleanup]
    if plan.failure is not None:  # only when taken: older records compare unchanged
        f = plan.failure
        out["failure"] = [f.action, f.resource_version, sorted(f.annotations.items()),
                          f.template]
    out["events"] = [[e.type, e.reason, e.message] for e in plan.events]
    out["backoff"] = [[b.key, b.entry.delay, b.entry.last_update] for b in plan.backoff]
    out["requeue_after"] = plan.requeue_after
    out["status"] = plan.status
    out["observed"] = plan.update_observed_generation
    return out


def make_record(snap: t.Snapshot, plan: t.Plan, worker: str = "",
                errors: list[str] | None = None) -> DecisionRecord:
    return DecisionRecord(
        key=snap.key, position=snap.position, now=snap.now,
        uid=((snap.ds or {}).get("metadata") or {}).get("uid", ""),
        expectations_satisfied=snap.expectations_satisfied,
        backoff={k: [v.delay, v.last_update] for k, v in sorted(snap.backoff.items())},
        # the plan's reasons as it gave them (node by node, in its order): sorting them
        # again cost 0.1-0.6 s a sync at 50,000 nodes while most had no pod yet
        actions=summarize(plan), worker=worker,
        reasons=plan.reasons if isinstance(plan.reasons, t.Reasons) else dict(plan.reasons),
        errors=list(errors or []), nodes=None if plan.nodes is None else list(plan.nodes))


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """Where two summaries first differ ("creates[3]: ['n1', 'x'] != ['n2', 'x']")."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            d = first_difference(a.get(k), b.get(k), f"{path}.{k}" if path else str(k))
            if d:
                return d
        return None
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        for i in range(max(len(a), len(b))):
            if i >= len(a) or i >= len(b):
                return (
                    f"{path}[{i}]: {a[i] if i < len(a) else '<none>'!r} != "
                    f"{b[i] if i < len(b) else '<none>'!r}"
                )
            d = first_difference(a[i], b[i], f"{path}[{i}]")
            if d:
                return d
        return None
    if a != b:
        return f"{path}: {a!r} != {b!r}"
    return None
