"""Why a DaemonSet's pods are unavailable, node by node (``why ds/NAME``, and the gauge
``daemonbus_daemonset_unavailable_pods{reason}``). Pure: decides.

A node counts as in ``status.numberUnavailable`` when it should run the daemon and its pod
(the one status counts: the oldest by ``podutil.sort_key``) is missing or not available. Each
such node gets the first cause that applies, in this order: the node (not ready, unreachable),
then the pod (none, terminating, not bound, failed, crash-looping, pending, not ready, ready
but inside minReadySeconds). The nodes the rollout gates hold at the old revision are listed
apart (``held``): they are not unavailable, they wait.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shared.daemonset import podfacts, status
from shared.daemonset.placement import Decision
from shared.daemonset.podfacts import PodFacts
from shared.model import podutil

Obj = dict[str, Any]

NODE_NOT_READY = "NodeNotReady"
NODE_UNREACHABLE = "NodeUnreachable"
NO_POD = "NoPod"
TERMINATING = "Terminating"
NOT_BOUND = "PodNotBound"
FAILED = "PodFailed"
CRASH_LOOPING = "CrashLoopBackOff"
PENDING = "PodPending"
NOT_READY = "PodNotReady"
MIN_READY = "MinReadySeconds"

# every reason, in the order causes are tried (the gauge exports each, 0 when none)
REASONS = (NODE_NOT_READY, NODE_UNREACHABLE, NO_POD, TERMINATING, NOT_BOUND, FAILED,
           CRASH_LOOPING, PENDING, NOT_READY, MIN_READY)

_UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"


def node_cause(node: Obj) -> str:
    """NODE_UNREACHABLE or NODE_NOT_READY when the node is so, else ""."""
    spec = node.get("spec")
    for taint in (spec.get("taints") if isinstance(spec, dict) else None) or []:
        if isinstance(taint, dict) and taint.get("key") == _UNREACHABLE_TAINT:
            return NODE_UNREACHABLE
    node_status = node.get("status")
    for cond in (node_status.get("conditions") if isinstance(node_status, dict) else None) or []:
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            if cond.get("status") == "Unknown":
                return NODE_UNREACHABLE
            if cond.get("status") != "True":
                return NODE_NOT_READY
    return ""


def crash_looping(pod: Obj) -> bool:
    """A container of ``pod`` waits in CrashLoopBackOff."""
    for cs in podutil.status(pod).get("containerStatuses") or []:
        waiting = ((cs.get("state") or {}).get("waiting") or {}) if isinstance(cs, dict) else {}
        if isinstance(waiting, dict) and waiting.get("reason") == CRASH_LOOPING:
            return True
    return False


def _pod_cause(facts: PodFacts) -> str:
    pod = facts.pod
    if facts.deleting:
        return TERMINATING
    if not podutil.node_name(pod):
        return NOT_BOUND
    if podutil.is_failed(pod):
        return FAILED
    if crash_looping(pod):
        return CRASH_LOOPING
    if podutil.phase(pod) in ("", "Pending"):
        return PENDING
    if not facts.ready:
        return NOT_READY
    return MIN_READY


def cause(node: Obj, pods: list[PodFacts] | None) -> str:
    """The reason a node that should run the daemon, with the claimed pods ``pods``
    (``podfacts.by_node``'s list, or None) on it, is in the breakdown when its counted pod is
    missing or not available: the first cause that applies (module docstring)."""
    return node_cause(node) or (_pod_cause(status.counted(pods)) if pods else NO_POD)


def breakdown(
    min_ready_seconds: int,
    nodes: Sequence[tuple[str, Obj]],
    decisions: Mapping[str, Decision],
    node_pods: Mapping[str, list[PodFacts]],
    now: float,
) -> dict[str, list[str]]:
    """Reason → the names of the nodes whose daemon pod is unavailable for it (name order;
    reasons without a node left out). ``nodes`` are (name, Node) pairs in name order."""
    available = podfacts.availability(min_ready_seconds, now)
    out: dict[str, list[str]] = {}
    for name, node in nodes:
        if not decisions[name].should_run:
            continue
        pods = node_pods.get(name)
        if pods:
            pod = status.counted(pods)
            if pod.ready and available(pod):
                continue
        out.setdefault(cause(node, pods), []).append(name)
    return out
