"""NoExecute taint eviction (upstream's taint manager, ``pkg/controller/tainteviction``, part of
kube-controller-manager). Pure: decides which pods of one node to evict at ``now`` and when to
look again; the caller performs the evictions.

For each pod bound to the node (``spec.nodeName``) and not already terminating, against the
node's NoExecute taints (``getNoExecuteTaints``):

* a taint no toleration tolerates → evict now (``GetMatchingTolerations`` false);
* else each taint is tolerated by its first matching toleration (``GetMatchingTolerations``);
  one without ``tolerationSeconds`` tolerates it forever; one with N seconds (N <= 0 counts as
  0, as ``getMinTolerationTime`` has it) until N seconds after the taint reached the pod: its
  ``timeAdded`` (the node's creation when it has none), or the pod's creation when the pod
  came later. The pod is evicted at the earliest of these times; a taint removed first takes
  its deadline with it, so the pod stays.

Upstream times from when its in-memory queue first saw the pod under a finitely tolerated
taint and keeps one deadline per pod (``CreatedAt`` + the minimum toleration). This module
keeps no memory: it times from the taint's ``timeAdded`` (which the API server's clients stamp
when they add a NoExecute taint) and the pod's creation, per taint, so a restarted collector,
another replica and ``replay --verify`` all reach the same decision from the same state. The
two agree whenever the taint manager sees taints and pods promptly.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from shared.model import envelope, meta, taints

Obj = dict[str, Any]

EVENT_REASON = "TaintManagerEviction"
CONDITION_REASON = "DeletionByTaintManager"
CONDITION_MESSAGE = "Taint manager: deleting due to NoExecute taint"
COMPONENT = "taint-eviction-controller"
RECORD_TYPE = "taint-eviction"
RECORD_VERSION = 1


def event_message(pod: Obj) -> str:
    """The Event upstream's ``emitPodDeletionEvent`` writes when it evicts ``pod``."""
    return f"Marking for deletion Pod {meta.namespace(pod)}/{meta.name(pod)}"


@dataclass(frozen=True)
class Eviction:
    """Evict pod ``namespace/name`` (uid ``uid``) from its node, because of ``taint``
    (``key=value:NoExecute``), due at ``due`` (epoch seconds): when its toleration ran out,
    or at once (``tolerated`` False)."""

    namespace: str
    name: str
    uid: str
    taint: str
    due: float
    tolerated: bool = True


@dataclass
class NodeEvictions:
    """What one look at a node decided: the pods to evict now, and when the next deadline of
    a pod on it falls (None: no pod is waiting out a toleration)."""

    node: str
    evictions: list[Eviction] = field(default_factory=list)
    next_at: float | None = None


def no_execute_taints(node: Obj) -> list[Obj]:
    """``getNoExecuteTaints``: the node's taints with effect NoExecute, in order."""
    return [t for t in taints.node_taints(node) if t.get("effect") == taints.NO_EXECUTE]


def matching_tolerations(
    node_taints: list[Obj], tolerations: list[Obj]
) -> tuple[bool, list[Obj]]:
    """``GetMatchingTolerations``: whether every taint is tolerated, and for each taint the
    first toleration that tolerates it (empty when one is not)."""
    used: list[Obj] = []
    for taint in node_taints:
        match = next((t for t in tolerations if taints.tolerates(t, taint)), None)
        if match is None:
            return False, []
        used.append(match)
    return True, used


def toleration_seconds(toleration: Obj) -> float | None:
    """How long ``toleration`` tolerates a NoExecute taint: None = forever, <= 0 → 0."""
    value = toleration.get("tolerationSeconds")
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return max(0.0, float(value))


def _since(taint: Obj, node: Obj, pod: Obj) -> float:
    """When ``taint`` reached ``pod``: its timeAdded (else the node's creation), or the pod's
    creation if later."""
    added = meta.parse_time(str(taint.get("timeAdded") or "")) or meta.parse_time(
        meta.creation_timestamp(node)
    )
    created = meta.parse_time(meta.creation_timestamp(pod))
    return max(added or 0.0, created or 0.0)


def pod_deadline(
    node: Obj, node_taints: list[Obj], pod: Obj, now: float
) -> tuple[float, str, bool] | None:
    """When ``pod`` must leave ``node``, for which taint and whether it tolerated it for a
    while, or None (it may stay): ``now`` for a taint it does not tolerate."""
    spec = pod.get("spec")
    raw = spec.get("tolerations") if isinstance(spec, dict) else None
    tolerations = [t for t in raw if isinstance(t, dict)] if isinstance(raw, list) else []
    tolerated, used = matching_tolerations(node_taints, tolerations)
    if not tolerated:
        blocking = taints.find_untolerated(node_taints, tolerations, {taints.NO_EXECUTE})
        return now, taints.taint_string(blocking or node_taints[0]), False
    best: tuple[float, str, bool] | None = None
    for taint, toleration in zip(node_taints, used, strict=True):
        seconds = toleration_seconds(toleration)
        if seconds is None:
            continue
        due = _since(taint, node, pod) + seconds
        if best is None or due < best[0]:
            best = (due, taints.taint_string(taint), True)
    return best


def decide(node: Obj, pods: Iterable[Obj], now: float) -> NodeEvictions:
    """Which of ``pods`` (those bound to ``node``; others are ignored) to evict at ``now``."""
    name = meta.name(node)
    result = NodeEvictions(node=name)
    node_taints = no_execute_taints(node)
    if not node_taints:
        return result
    for pod in sorted(pods, key=meta.key):
        spec = pod.get("spec")
        if not isinstance(spec, dict) or spec.get("nodeName") != name:
            continue
        if meta.is_being_deleted(pod):
            continue
        deadline = pod_deadline(node, node_taints, pod, now)
        if deadline is None:
            continue
        due, taint, tolerated = deadline
        if due <= now:
            result.evictions.append(
                Eviction(meta.namespace(pod), meta.name(pod), meta.uid(pod), taint, due, tolerated)
            )
        elif result.next_at is None or due < result.next_at:
            result.next_at = due
    return result


def disruption_condition(now: float) -> Obj:
    """The condition upstream's ``addConditionAndDeletePod`` sets before the delete."""
    return {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": CONDITION_REASON,
        "message": CONDITION_MESSAGE,
        "lastTransitionTime": meta.format_time(now),
    }


def with_disruption_condition(pod: Obj, now: float) -> Obj:
    """A copy of ``pod`` (status level) with the DisruptionTarget condition set."""
    raw = pod.get("status")
    status = dict(raw) if isinstance(raw, dict) else {}
    old = status.get("conditions")
    conditions = [
        c
        for c in (old if isinstance(old, list) else [])
        if isinstance(c, dict) and c.get("type") != "DisruptionTarget"
    ]
    conditions.append(disruption_condition(now))
    status["conditions"] = conditions
    return {**pod, "status": status}


def summarize(decision: NodeEvictions) -> dict[str, Any]:
    """The comparable effects of one decision, as plain data (what a record keeps)."""
    return {
        "node": decision.node,
        "evictions": [
            [f"{e.namespace}/{e.name}", e.uid, e.taint, e.due, e.tolerated]
            for e in decision.evictions
        ],
        "next": decision.next_at,
    }


@dataclass(frozen=True)
class EvictionRecord:
    """The decision record of one look at a node: what it read (the log ``position``, the
    time ``now``) and what it decided (``summarize``), for the log and ``replay --verify``.
    On the wire a map with its version under ``"rv"`` (none means 1) and ``type``
    ``RECORD_TYPE``."""

    node: str = ""
    position: str = "0-0"
    now: float = 0.0
    actions: Obj = field(default_factory=dict)
    worker: str = COMPONENT
    version: int = RECORD_VERSION

    def to_map(self) -> Obj:
        return {"rv": self.version, "type": RECORD_TYPE, "node": self.node,
                "position": self.position, "now": self.now, "actions": self.actions,
                "worker": self.worker}

    @classmethod
    def from_map(cls, doc: Any) -> EvictionRecord:
        """A record as logged; raises CorruptEntryError naming the first field of the wrong
        type, or a version this code does not read. Decides."""
        what = "taint eviction record"
        version = envelope.version(doc, what, RECORD_VERSION, field="rv")
        envelope.check(doc, what, _RECORD_FIELDS)
        return cls(node=doc.get("node") or "", position=doc.get("position") or "0-0",
                   now=float(doc.get("now") or 0.0), actions=doc.get("actions") or {},
                   worker=doc.get("worker") or "", version=version)


_RECORD_FIELDS: tuple[envelope.Field, ...] = (
    ("node", str, False), ("position", str, False), ("now", float, False),
    ("actions", dict, False), ("worker", str, False))


def make_record(decision: NodeEvictions, position: str, now: float) -> EvictionRecord:
    """The decision record of one look at a node."""
    return EvictionRecord(node=decision.node, position=position, now=now,
                          actions=summarize(decision))
