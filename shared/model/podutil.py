"""Pod helpers on plain dicts: readiness, availability, phase, target node, ordering, QoS
class. Pure.

Spec §d.4 (Ready / Available), §c.3 step 4 (target node), §c.4 (ordering).
"""

from __future__ import annotations

from typing import Any

from shared.model import meta, quantity

Obj = dict[str, Any]

PENDING = "Pending"
RUNNING = "Running"
SUCCEEDED = "Succeeded"
FAILED = "Failed"

BEST_EFFORT, BURSTABLE, GUARANTEED = "BestEffort", "Burstable", "Guaranteed"
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
"""A pod spec's lists of containers, in upstream's ``VisitContainers`` order (a name is one
container's of any of them)."""
STATUS_LISTS = ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses")
"""A pod status's lists of container statuses, in the same order."""

_QOS_RESOURCES = ("cpu", "memory")

_ZERO_TIME = float("-inf")  # a missing creationTimestamp sorts first, like Go's zero time
_NEVER = float("inf")


def spec(pod: Obj) -> Obj:
    s = pod.get("spec")
    return s if isinstance(s, dict) else {}


def status(pod: Obj) -> Obj:
    s = pod.get("status")
    return s if isinstance(s, dict) else {}


def phase(pod: Obj) -> str:
    s = pod.get("status")  # inlined status(pod), as meta's accessors do
    return str(s.get("phase") or "") if isinstance(s, dict) else ""


def is_failed(pod: Obj) -> bool:
    return phase(pod) == FAILED


def is_succeeded(pod: Obj) -> bool:
    return phase(pod) == SUCCEEDED


def is_terminal(pod: Obj) -> bool:
    """Phase Succeeded or Failed."""
    return phase(pod) in (SUCCEEDED, FAILED)


def node_name(pod: Obj) -> str:
    s = pod.get("spec")  # inlined spec(pod), as meta's accessors do
    return str(s.get("nodeName") or "") if isinstance(s, dict) else ""


def is_scheduled(pod: Obj) -> bool:
    return bool(node_name(pod))


def ready_condition(pod: Obj) -> Obj | None:
    """The first condition of type Ready, else None."""
    conditions = status(pod).get("conditions")
    for cond in conditions if isinstance(conditions, list) else []:
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            return cond
    return None


def is_ready(pod: Obj) -> bool:
    """The pod's Ready condition has status ``True``."""
    cond = ready_condition(pod)
    return cond is not None and cond.get("status") == "True"


def available_after(pod: Obj, min_ready_seconds: int | float) -> float:
    """The time after which ``pod`` is available (:func:`is_available` is ``available_after <
    now``): ``-inf`` when it is Ready and ``min_ready_seconds == 0``, the Ready condition's
    ``lastTransitionTime + min_ready_seconds`` when it is Ready and that is set, else ``inf``
    (never, until the pod changes)."""
    cond = ready_condition(pod)
    if cond is None or cond.get("status") != "True":
        return _NEVER
    if not min_ready_seconds:
        return _ZERO_TIME
    ltt = meta.parse_time(cond.get("lastTransitionTime"))
    return _NEVER if ltt is None else ltt + min_ready_seconds


def is_available(pod: Obj, min_ready_seconds: int | float, now: float) -> bool:
    """Ready, and either ``min_ready_seconds == 0`` or the Ready condition's
    lastTransitionTime is set and ``LTT + min_ready_seconds < now`` (strict, the baseline)."""
    return available_after(pod, min_ready_seconds) < now


def target_node(pod: Obj) -> str | None:
    """The node a daemon pod is for (``GetTargetNodeName``): ``spec.nodeName`` if set, else the
    single value of the first required-affinity matchFields ``metadata.name In [x]``.

    None when there is none, or when that first requirement has more than one value.
    """
    name = node_name(pod)
    if name:
        return name
    affinity = spec(pod).get("affinity")
    node_affinity = affinity.get("nodeAffinity") if isinstance(affinity, dict) else None
    required = (
        node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
        if isinstance(node_affinity, dict)
        else None
    )
    terms = required.get("nodeSelectorTerms") if isinstance(required, dict) else None
    for term in terms if isinstance(terms, list) else []:
        fields = term.get("matchFields") if isinstance(term, dict) else None
        for req in fields if isinstance(fields, list) else []:
            if (
                isinstance(req, dict)
                and req.get("key") == "metadata.name"
                and req.get("operator") == "In"
            ):
                values = req.get("values")
                if isinstance(values, list) and len(values) == 1:
                    return str(values[0])
                return None
    return None


def creation_time(pod: Obj) -> float:
    t = meta.parse_time(meta.creation_timestamp(pod))
    return _ZERO_TIME if t is None else t


def sort_key(pod: Obj) -> tuple[int, float, str]:
    """``podByCreationTimestampAndPhase``: scheduled first, then older creationTimestamp,
    then name ascending."""
    return (0 if is_scheduled(pod) else 1, creation_time(pod), meta.name(pod))


def sorted_pods(pods: list[Obj]) -> list[Obj]:
    return sorted(pods, key=sort_key)


def qos_class(spec: Obj) -> str:
    """The pod's QoS class (upstream's ``ComputePodQOS``), from its containers' and init
    containers' cpu and memory (quantities above zero; requests as defaulted from limits):
    BestEffort with none; Guaranteed when every container limits both and the sums of
    requests and limits agree; else Burstable."""
    requests: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    guaranteed = True
    containers = [c for field in ("containers", "initContainers")
                  if isinstance(spec.get(field), list) for c in spec[field]
                  if isinstance(c, dict)]
    for c in containers:
        resources = c.get("resources")
        found = set()
        for field, sums in (("requests", requests), ("limits", limits)):
            given = resources.get(field) if isinstance(resources, dict) else None
            if not isinstance(given, dict):
                continue
            for name in _QOS_RESOURCES:
                if name not in given:
                    continue
                try:
                    value = quantity.parse(given[name]).value
                except ValueError:
                    continue
                if value > 0:
                    sums[name] = sums.get(name, 0) + value
                    if field == "limits":
                        found.add(name)
        if found != set(_QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return BEST_EFFORT
    if guaranteed and len(requests) == len(limits) and \
            all(limits.get(name) == value for name, value in requests.items()):
        return GUARANTEED
    return BURSTABLE
