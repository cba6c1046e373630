"""``manage`` (spec §c.2, §c.4, §c.6 step 1): which nodes need a daemon pod and which pods to
delete, with failed-pod backoff. Pure: decides; events, backoff updates and requeues are
returned, not performed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shared.control import backoff as control_backoff
from shared.daemonset import dsutil, rollout
from shared.daemonset.placement import Decision
from shared.daemonset.podfacts import PodFacts
from shared.daemonset.types import AdvanceBackoff, BackoffEntry, EmitEvent
from shared.model import meta, podutil

Obj = dict[str, Any]

BURST_REPLICAS = 250
BACKOFF_INITIAL = control_backoff.INITIAL_DELAY  # 1 s
BACKOFF_MAX = control_backoff.MAX_DELAY  # 15 min


def backoff_key(ds: Obj, node: str) -> str:
    """``failedPodsBackoffKey``: ``<ds uid>/<status.observedGeneration>/<node>``."""
    return f"{meta.uid(ds)}/{dsutil.observed_generation(ds)}/{node}"


# The backoff rules themselves live with the other control primitives.
in_backoff = control_backoff.is_in_backoff_since_update
next_backoff = control_backoff.next_entry


@dataclass
class NodeResult:
    """What ``podsShouldBeOnNode`` decided for one node."""

    create: bool = False
    deletes: list[Obj] = field(default_factory=list)
    events: list[EmitEvent] = field(default_factory=list)
    backoff: list[AdvanceBackoff] = field(default_factory=list)
    requeue_after: float | None = None  # a failed pod waits for its backoff
    backoff_until: float | None = None


def pods_should_be_on_node(
    ds: Obj,
    node: str,
    decision: Decision,
    pods: list[Obj] | None,
    hash: str,
    now: float,
    backoff: dict[str, BackoffEntry],
    surge: bool,
) -> NodeResult:
    """``podsShouldBeOnNode`` (§c.4), branches in upstream order. ``pods`` is None when the
    node has no entry. ``backoff`` is the working backoff state: advancing it here updates it,
    so a second failed pod on the same node in one sync waits. ``surge`` = ``AllowsSurge``."""
    result = NodeResult()
    if decision.should_run and pods is None:
        result.create = True
        return result
    if decision.should_continue_running:
        running: list[Obj] = []
        for pod in pods or []:
            if meta.is_being_deleted(pod):
                continue
            if podutil.is_failed(pod):
                key = backoff_key(ds, node)
                entry = backoff.get(key)
                if in_backoff(entry, now):
                    assert entry is not None
                    delay = entry.delay
                    result.requeue_after = _min(result.requeue_after, delay)
                    result.backoff_until = entry.last_update + delay
                    continue
                entry = next_backoff(entry, now)
                backoff[key] = entry
                result.backoff.append(AdvanceBackoff(key=key, entry=entry))
                result.events.append(
                    EmitEvent(
                        "Warning",
                        "FailedDaemonPod",
                        f"Found failed daemon pod {meta.namespace(pod)}/{meta.name(pod)} "
                        f"on node {node}, will try to kill it",
                    )
                )
                result.deletes.append(pod)
            elif podutil.is_succeeded(pod):
                result.events.append(
                    EmitEvent(
                        "Normal",
                        "SucceededDaemonPod",
                        f"Found succeeded daemon pod {meta.namespace(pod)}/{meta.name(pod)} "
                        f"on node {node}, will try to delete it",
                    )
                )
                result.deletes.append(pod)
            else:
                running.append(pod)
        if not surge:
            if len(running) > 1:
                result.deletes.extend(podutil.sorted_pods(running)[1:])
            return result
        if len(running) <= 1:
            if not running and decision.should_run:
                result.create = True
            return result
        oldest_new: Obj | None = None
        oldest_old: Obj | None = None
        for pod in podutil.sorted_pods(running):
            if meta.labels(pod).get(dsutil.HASH_LABEL, "") == hash:
                if oldest_new is None:
                    oldest_new = pod
                    continue
            elif oldest_old is None:
                oldest_old = pod
                continue
            result.deletes.append(pod)
        if oldest_new is not None and oldest_old is not None:
            if not podutil.is_ready(oldest_old) or podutil.is_available(
                oldest_new, dsutil.min_ready_seconds(ds), now
            ):
                result.deletes.append(oldest_old)
        return result
    if pods is not None:
        result.deletes.extend(p for p in pods if not meta.is_being_deleted(p))
    return result


def _min(a: float | None, b: float) -> float:
    return b if a is None else min(a, b)


def unscheduled_pods_on_missing_nodes(
    node_names: set[str] | frozenset[str], node_pods: Mapping[str, list[PodFacts]]
) -> list[Obj]:
    """``getUnscheduledPodsWithoutNode`` (§c.2.3): pods of nodes missing from the node list
    that have no ``spec.nodeName`` (bound only through affinity). Nodes in name order."""
    return unscheduled_pods(sorted(node for node in node_pods if node not in node_names),
                            node_pods)


def unscheduled_pods(missing: Sequence[str], node_pods: Mapping[str, list[PodFacts]]
                     ) -> list[Obj]:
    """The pods without ``spec.nodeName`` of the nodes ``missing`` (missing from the node
    list, in name order): :func:`unscheduled_pods_on_missing_nodes` of those nodes."""
    return [
        facts.pod
        for node in missing
        for facts in node_pods[node]
        if not podutil.node_name(facts.pod)
    ]


@dataclass
class Manage:
    """What ``manage`` decided; ``creates`` and ``deletes`` are capped at burstReplicas."""

    creates: list[str] = field(default_factory=list)  # node names
    deletes: list[Obj] = field(default_factory=list)  # pods
    deferred: list[str] = field(default_factory=list)  # nodes needing a pod beyond the cap
    events: list[EmitEvent] = field(default_factory=list)
    backoff: list[AdvanceBackoff] = field(default_factory=list)
    requeue_after: float | None = None
    backoff_until: dict[str, float] = field(default_factory=dict)  # node → epoch seconds


def manage(
    ds: Obj,
    node_names: Sequence[str],
    decisions: Mapping[str, Decision],
    node_pods: Mapping[str, list[PodFacts]],
    hash: str,
    now: float,
    backoff: Mapping[str, BackoffEntry],
    *,
    bare: Sequence[str] = (),
    missing: Sequence[str] | None = None,
) -> Manage:
    """``manage`` without the claim (§c.2 steps 2-4): podsShouldBeOnNode for every listed
    node in ``node_names`` order, then unscheduled pods on missing nodes, then the
    burstReplicas cap (first 250 creates, first 250 deletes). ``node_pods`` are the facts of
    the claimed pods by target node (``podfacts.by_node``).

    ``bare`` and ``missing`` (a DaemonSet index's split, ``nodeindex.PlanSets``): the listed
    nodes that should run and have no pod, in name order, which ``node_names`` then leaves
    out; the nodes with pods missing from the node list (name order; None: those of
    ``node_pods`` not in ``node_names``). With ``missing`` given, ``node_names`` may leave
    out any node podsShouldBeOnNode leaves alone (one running pod where it may continue to
    run, or no pod where it should not): the outcome is the same, in the same order."""
    surge = rollout.allows_surge(ds)
    work = dict(backoff)
    result = Manage()
    needing: list[str] = []
    deletes: list[Obj] = []
    for name in node_names:
        decision = decisions[name]
        pods = node_pods.get(name)
        if pods is None:
            if decision.should_run:
                needing.append(name)
            continue
        if decision.should_continue_running and len(pods) == 1 and pods[0].running:
            continue  # the common case: exactly one running pod, nothing to do (§c.4)
        node_result = pods_should_be_on_node(
            ds, name, decision, [facts.pod for facts in pods], hash, now, work, surge
        )
        if node_result.create:
            needing.append(name)
        deletes.extend(node_result.deletes)
        result.events.extend(node_result.events)
        result.backoff.extend(node_result.backoff)
        if node_result.requeue_after is not None:
            result.requeue_after = _min(result.requeue_after, node_result.requeue_after)
        if node_result.backoff_until is not None:
            result.backoff_until[name] = node_result.backoff_until
    if missing is None:
        deletes.extend(unscheduled_pods_on_missing_nodes(frozenset(node_names), node_pods))
    else:
        deletes.extend(unscheduled_pods(missing, node_pods))
    if bare:  # disjoint from the nodes visited: merged in name order
        needing = list(bare) if not needing else sorted([*bare, *needing])
    result.creates = needing[:BURST_REPLICAS]
    result.deferred = needing[BURST_REPLICAS:]
    result.deletes = deletes[:BURST_REPLICAS]
    return result
