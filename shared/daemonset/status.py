"""DaemonSet status (spec §f): the counters, when to write them, when to requeue. Pure.

Computed from the node list and the claimed pods grouped by node; pods on nodes missing from
the node list are ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from shared.daemonset import dsutil, podfacts
from shared.daemonset.placement import Decision
from shared.daemonset.podfacts import PodFacts
from shared.model import meta, podutil

Obj = dict[str, Any]

COUNTERS = (
    "desiredNumberScheduled",
    "currentNumberScheduled",
    "numberMisscheduled",
    "numberReady",
    "updatedNumberScheduled",
    "numberAvailable",
    "numberUnavailable",
)


# apps/v1 DaemonSetStatus fields tagged ``json:",omitempty"`` (k8s.io/api/apps/v1/types.go):
# observedGeneration, updatedNumberScheduled, numberAvailable and numberUnavailable are plain
# numbers, left out when zero; collisionCount is a pointer (left out when nil, kept at 0);
# conditions a slice (left out when empty). The other four counters are always present.
OMIT_WHEN_ZERO = ("observedGeneration", "updatedNumberScheduled", "numberAvailable",
                  "numberUnavailable")


def json_shape(status: Obj) -> Obj:
    """``status`` as the API server serialises a DaemonSetStatus: the ``omitempty`` fields
    left out when zero (so ``{.status.numberUnavailable}`` reads nothing, not 0), ``collisionCount``
    when None, ``conditions`` when empty. Decides; returns a new map."""
    out = dict(status)
    for name in OMIT_WHEN_ZERO:
        if name in out and out[name] == 0 and not isinstance(out[name], bool):
            del out[name]
    if out.get("collisionCount", 0) is None:
        del out["collisionCount"]
    if "conditions" in out and not out["conditions"]:
        del out["conditions"]
    return out


def is_pod_updated(pod: Obj, hash: str, template_generation: int | None) -> bool:
    """``IsPodUpdated``: the hash label equals ``hash`` (non-empty), or the
    ``pod-template-generation`` label equals the template generation (when known)."""
    return labels_updated_check(hash, template_generation)(meta.labels(pod))


def labels_updated_check(
    hash: str, template_generation: int | None
) -> Callable[[Mapping[str, str]], bool]:
    """:func:`is_pod_updated` on a pod's labels, with ``hash`` and the generation bound (for
    many pods)."""
    generation = None if template_generation is None else str(template_generation)

    def check(labels: Mapping[str, str]) -> bool:
        if hash and labels.get(dsutil.HASH_LABEL, "") == hash:
            return True
        return generation is not None and labels.get(dsutil.GENERATION_LABEL, "") == generation

    return check


class NodeCount(NamedTuple):
    """One node's part of the counters (``updateDaemonSetStatus``'s loop body): the four
    counters that do not depend on the time, and the counted pod when it is ready (available
    or not depending on ``now`` and minReadySeconds)."""

    desired: int
    current: int
    misscheduled: int
    ready: int
    updated: int
    ready_pod: PodFacts | None


NOTHING = NodeCount(0, 0, 0, 0, 0, None)
_MISSCHEDULED = NodeCount(0, 0, 1, 0, 0, None)
_NO_POD = NodeCount(1, 0, 0, 0, 0, None)


def node_count(decision: Decision, pods: list[PodFacts] | None) -> NodeCount:
    """What node with placement ``decision`` and claimed pods ``pods`` (``podfacts.by_node``'s
    list, or None) adds to the counters: desired when it should run; then current when it has
    a pod, and ready and updated as its counted pod (:func:`counted`) is; misscheduled when it
    should not run and has one. The one home of the counting rule. Decides."""
    if not decision.should_run:
        return _MISSCHEDULED if pods else NOTHING
    if not pods:
        return _NO_POD
    pod = counted(pods)
    ready = pod.ready
    # _make: the generated keyword-capable constructor costs half again as much
    return NodeCount._make((1, 1, 0, int(ready), int(pod.updated), pod if ready else None))


def compute_status(
    ds: Obj,
    node_names: Sequence[str],
    decisions: Mapping[str, Decision],
    node_pods: Mapping[str, list[PodFacts]],
    now: float,
    update_observed_generation: bool,
) -> Obj:
    """``updateDaemonSetStatus``: a copy of the cached status with the seven counters and
    observedGeneration (``metadata.generation`` if ``update_observed_generation``, else kept);
    collisionCount and conditions are kept. In its JSON shape (:func:`json_shape`): counters
    that are zero and ``omitempty`` are left out.

    ``decisions[n]`` is the placement decision for node ``n``; ``node_pods`` the facts of the
    claimed pods by target node (``podfacts.by_node``: deleted terminal pods left out, updated
    against the current hash). Each node counts as :func:`node_count` says.
    """
    available_check = podfacts.availability(dsutil.min_ready_seconds(ds), now)
    desired = current = misscheduled = ready = updated = available = 0
    for name in node_names:
        d, c, m, r, u, ready_pod = node_count(decisions[name], node_pods.get(name))
        desired += d
        current += c
        misscheduled += m
        ready += r
        updated += u
        if ready_pod is not None:
            available += available_check(ready_pod)
    return with_counts(ds, (desired, current, misscheduled, ready, updated, available),
                       update_observed_generation)


def with_counts(ds: Obj, counts: tuple[int, int, int, int, int, int],
                update_observed_generation: bool) -> Obj:
    """The status :func:`compute_status` returns for the sums ``counts`` (desired, current,
    misscheduled, ready, updated, available) of ``ds``'s nodes. Decides."""
    desired, current, misscheduled, ready, updated, available = counts
    new: Obj = dict(dsutil.status(ds))
    new.update(
        {
            "desiredNumberScheduled": desired,
            "currentNumberScheduled": current,
            "numberMisscheduled": misscheduled,
            "numberReady": ready,
            "updatedNumberScheduled": updated,
            "numberAvailable": available,
            "numberUnavailable": desired - available,
        }
    )
    if update_observed_generation:
        new["observedGeneration"] = dsutil.generation(ds)
    return json_shape(new)


def counted(pods: list[PodFacts]) -> PodFacts:
    """The pod of a node that status counts (ready, available, updated): the first by
    ``podutil.sort_key``. ``pods`` is not empty."""
    return pods[0] if len(pods) == 1 else min(pods, key=_sort_key)


def _sort_key(facts: PodFacts) -> tuple[int, float, str]:
    return podutil.sort_key(facts.pod)


def status_changed(old_status: Obj | None, new_status: Obj, generation: int) -> bool:
    """Whether ``storeDaemonSetStatus`` writes: not if all seven counters (and the
    conditions, which only the rollout annotations set) equal the cached ones and the cached
    observedGeneration ≥ ``generation`` (``metadata.generation``)."""
    old = old_status or {}
    if any(int(old.get(c) or 0) != int(new_status.get(c) or 0) for c in COUNTERS):
        return True
    if (old.get("conditions") or []) != (new_status.get("conditions") or []):
        return True
    return int(old.get("observedGeneration") or 0) < generation


def merged_status(old_status: Obj | None, computed: Obj, generation: int,
                  observe: bool) -> Obj | None:
    """The status the status-writer stores (``storeDaemonSetStatus``) for a status
    ``computed`` by a sync of a DaemonSet at ``generation``, over the stored ``old_status``;
    None when nothing changed (:func:`status_changed`).

    ``computed`` is in JSON shape (zero ``omitempty`` counters left out): a missing counter is
    0, not the stored value. observedGeneration is ``generation`` when ``observe``, else the
    stored one; collisionCount is always the stored one (only the collision rule raises it);
    conditions are the computed ones, none when it has none (computed from the cached
    status, where they were dropped)."""
    old = old_status or {}
    new = {**dict.fromkeys(COUNTERS, 0), **computed}
    new["observedGeneration"] = generation if observe else old.get("observedGeneration", 0)
    if "collisionCount" in old:
        new["collisionCount"] = old["collisionCount"]
    if not status_changed(old, new, generation):
        return None
    out = {**old, **new}
    if "conditions" not in new:
        out.pop("conditions", None)
    return out


def requeue_after(ds: Obj, status: Obj) -> float | None:
    """Seconds after which to sync again: minReadySeconds when it is > 0 and some ready pods
    are not yet available; else None."""
    min_ready = dsutil.min_ready_seconds(ds)
    if min_ready > 0 and status.get("numberReady") != status.get("numberAvailable"):
        return float(min_ready)
    return None
