"""Pod priority: the PriorityClass kind (scheduling.k8s.io/v1) and what upstream's Priority
admission plugin does with it. Pure.

- :func:`validate_priority_class` is ``ValidatePriorityClass`` (and its update): a name with
  the ``system-`` prefix is one of the two classes every cluster has, with their values;
  another's value is at most 1,000,000,000; the value and the preemption policy never change.
- :func:`default_conflict` is the plugin's check of a class that would be the global default
  while another one is.
- :func:`admit` resolves a new pod's ``priorityClassName`` to its ``priority`` and
  ``preemptionPolicy`` (the global default class's when it names none), or says why the pod
  is forbidden, in the plugin's words.

The built-in classes (:data:`SYSTEM`) resolve whether or not their objects are stored: the
API server writes them when it starts, as upstream's bootstraps them, but a cluster driven
without one has them too. Every function decides only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from shared.model import fielderr, kinds, meta, metavalidation, typed

Obj = dict[str, Any]

SYSTEM_PREFIX = "system-"
HIGHEST_USER_DEFINABLE = 1_000_000_000
PREEMPT_LOWER = "PreemptLowerPriority"
PREEMPTION_POLICIES = (PREEMPT_LOWER, "Never")
#: the priority classes every cluster has (upstream's SystemPriorityClasses)
SYSTEM: Mapping[str, Obj] = {
    "system-node-critical": {
        "value": 2000001000,
        "description": "Used for system critical pods that must not be moved from their "
                       "current node."},
    "system-cluster-critical": {
        "value": 2000000000,
        "description": "Used for system critical pods that must run in the cluster, but can "
                       "be moved to another node if necessary."},
}


def system_classes() -> list[Obj]:
    """The built-in classes as objects (what the API server writes when it starts)."""
    return [{"apiVersion": kinds.PRIORITY_CLASS.api_version, "kind": kinds.PRIORITY_CLASS.kind,
             "metadata": {"name": name}, "value": c["value"], "description": c["description"],
             "preemptionPolicy": PREEMPT_LOWER} for name, c in SYSTEM.items()]


def default_priority_class(obj: Obj) -> None:
    """``SetDefaults_PriorityClass``: the preemption policy PreemptLowerPriority; in place."""
    if obj.get("preemptionPolicy") is None:
        obj["preemptionPolicy"] = PREEMPT_LOWER


def _known_system_error(name: str, value: Any, global_default: bool) -> str | None:
    """``IsKnownSystemPriorityClass``'s error for a ``system-`` name, None when it is one."""
    known = SYSTEM.get(name)
    if known is None:
        return f"{name} is not a known system priority class"
    if value != known["value"]:
        return f"value of {name} PriorityClass must be {known['value']}"
    if global_default:
        return f"globalDefault of {name} PriorityClass must be false"
    return None


def validate_priority_class(obj: Any, old: Any = None) -> list[str]:
    """``ValidatePriorityClass``, and with ``old`` ``ValidatePriorityClassUpdate`` too."""
    if not isinstance(obj, dict):
        return fielderr.not_an_object(obj)
    errs: list[str] = []
    metavalidation.validate_update_of(obj, old, errs)
    metavalidation.validate_cluster_meta(obj.get("metadata"), "metadata", errs)
    value = typed.as_int(obj.get("value"), "value", errs) or 0
    global_default = bool(typed.as_bool(obj.get("globalDefault"), "globalDefault", errs))
    typed.as_str(obj.get("description"), "description", errs)
    policy = typed.as_str(obj.get("preemptionPolicy"), "preemptionPolicy", errs)
    name = str((obj.get("metadata") or {}).get("name") or "")
    if name.startswith(SYSTEM_PREFIX):
        why = _known_system_error(name, value, global_default)
        if why is not None:
            errs.append(fielderr.forbidden(
                "metadata.name", f"priority class names with '{SYSTEM_PREFIX}' prefix are "
                f"reserved for system use only. error: {why}"))
    elif value > HIGHEST_USER_DEFINABLE:
        errs.append(fielderr.forbidden(
            "value", f"maximum allowed value of a user defined priority is "
            f"{HIGHEST_USER_DEFINABLE}"))
    if policy is not None and policy not in PREEMPTION_POLICIES:
        errs.append(fielderr.not_supported("preemptionPolicy", policy, PREEMPTION_POLICIES))
    if isinstance(old, dict):
        if obj.get("value") != old.get("value"):
            errs.append(fielderr.forbidden("value", "may not be changed in an update."))
        if obj.get("preemptionPolicy") != old.get("preemptionPolicy"):
            errs.append(fielderr.invalid("preemptionPolicy", policy or "",
                                         "field is immutable"))
    return errs


def global_default(classes: Iterable[Obj]) -> Obj | None:
    """The global default class: of several (a race let them be), the lowest value's."""
    found: Obj | None = None
    for pc in classes:
        if pc.get("globalDefault") is True and (
                found is None or int(pc.get("value") or 0) < int(found.get("value") or 0)):
            found = pc
    return found


def default_conflict(obj: Obj, classes: Iterable[Obj]) -> str | None:
    """Why the class ``obj``, created or updated, may not be the global default (another
    one is), in the admission plugin's words; None when it may."""
    if obj.get("globalDefault") is not True:
        return None
    other = global_default(c for c in classes if meta.name(c) != meta.name(obj))
    if other is None:
        return None
    return f"PriorityClass {meta.name(other)} is already marked as default. Only one default " \
           "can exist"


class Forbidden(ValueError):
    """A pod the Priority admission plugin refuses (its message the plugin's)."""


def admit(spec: Obj, classes: Mapping[str, Obj]) -> None:
    """The Priority admission plugin's mutation of a new pod's ``spec``, in place:
    ``priority`` and ``preemptionPolicy`` from the class it names (``classes``: the stored
    ones by name; the built-in ones resolve without being stored), or from the global
    default class, whose name it then gets, else 0 and PreemptLowerPriority. Raises
    :class:`Forbidden` for a class that does not exist, or a priority or a preemption
    policy given that differs from the class's."""
    name = spec.get("priorityClassName")
    if not name:
        pc = global_default(classes.values())
        if pc is not None:
            spec["priorityClassName"] = meta.name(pc)
    else:
        pc = classes.get(str(name))
        if pc is None and name in SYSTEM:
            pc = {"value": SYSTEM[name]["value"], "preemptionPolicy": PREEMPT_LOWER}
        elif pc is None:
            raise Forbidden(f"no PriorityClass with name {name} was found")
    value, policy = (int(pc.get("value") or 0), pc.get("preemptionPolicy")) if pc is not None \
        else (0, PREEMPT_LOWER)
    given = spec.get("priority")
    if given is not None and given != value:
        raise Forbidden(f"the integer value of priority ({given}) must not be provided in pod "
                        f"spec; priority admission controller computed {value} from the "
                        "given PriorityClass name")
    spec["priority"] = value
    if policy is not None:
        given_policy = spec.get("preemptionPolicy")
        if given_policy is not None and given_policy != policy:
            raise Forbidden(f"the string value of PreemptionPolicy ({given_policy}) must not "
                            "be provided in pod spec; priority admission controller computed "
                            f"{policy} from the given PriorityClass name")
        spec["preemptionPolicy"] = policy
