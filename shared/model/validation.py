"""Validation of the stored kinds, with Kubernetes' rendered messages. Pure.

``validate(obj, old=None)`` dispatches on ``apiVersion``/``kind``. Every function returns a
list of error strings (empty when valid) and never raises, whatever it is given: a value of the
wrong JSON type is reported as ``<path>: Invalid value: <v>: must be of type <t>`` and the
rules beneath it are skipped.

Validation expects defaulted objects (the API server defaults before it validates): call
``shared.model.defaults.default`` first. DaemonSet errors are listed in upstream's order
(``ValidateDaemonSet``, spec §a.5): 10. metadata; 1. selector syntax; 2. selector matches the
template labels; 3. no empty selector; 4. pod template (restartPolicy Always, no
activeDeadlineSeconds); 5. minReadySeconds and templateGeneration non-negative; 6-9. update
strategy; then 5. revisionHistoryLimit non-negative. On update (``old`` given): metadata
identity, the internal ``spec.templateGeneration`` rules when both objects carry that field,
and the immutable selector (apps/v1).
"""

from __future__ import annotations

import json
from typing import Any

from shared.model import (
    accessvalidation,
    configmap,
    fielderr,
    intorstr,
    kinds,
    labels,
    metavalidation,
    podupdate,
    podvalidation,
    priority,
    rolloutopts,
    schedvalidation,
    servicevalidation,
    syntax,
    typed,
)

C = fielderr.child

_NONNEG = "must be greater than or equal to 0"
_UPDATE_STRATEGIES = ("RollingUpdate", "OnDelete")
_POD_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
_DS_COUNTERS = (
    ("currentNumberScheduled", 32),
    ("numberMisscheduled", 32),
    ("desiredNumberScheduled", 32),
    ("numberReady", 32),
    ("observedGeneration", 64),
    ("updatedNumberScheduled", 32),
    ("numberAvailable", 32),
    ("numberUnavailable", 32),
)




def _nonnegative(value: Any, path: str, errs: list[str], bits: int = 32) -> None:
    v = typed.as_int(value, path, errs, bits)
    if v is not None and v < 0:
        errs.append(fielderr.invalid(path, v, _NONNEG))


def _labels_value(value: Any) -> Any:
    """Template labels as the error shows them: ``map[string]string{...}`` or ``(nil)``."""
    if value is None:
        return fielderr.str_map_literal(None)
    return value


# ---- DaemonSet -------------------------------------------------------------------------


def _validate_int_or_percent(value: Any, path: str, errs: list[str]) -> None:
    """Rule 7 (``ValidatePositiveIntOrPercent``)."""
    if value is None:
        return  # nil: the zero value, int 0
    if isinstance(value, str):
        shown = intorstr.go_literal(value)
        errs.extend(fielderr.invalid(path, shown, m) for m in syntax.is_valid_percent(value))
    elif intorstr.is_int(value):  # ValidateNonnegativeField(int64(IntValue())): a plain int
        _nonnegative(value, path, errs)
    else:
        errs.append(fielderr.invalid(path, value, "must be an integer or percentage (e.g '5%')"))


def _validate_rolling_update(ru: dict[Any, Any], path: str, errs: list[str]) -> None:
    """Rules 7-9 (``ValidateRollingUpdateDaemonSet``). Bad values are shown as the
    ``intstr.IntOrString`` structs upstream passes to ``field.Invalid``."""
    mu_path, ms_path = C(path, "maxUnavailable"), C(path, "maxSurge")
    mu, ms = ru.get("maxUnavailable"), ru.get("maxSurge")
    _validate_int_or_percent(mu, mu_path, errs)
    _validate_int_or_percent(ms, ms_path, errs)
    for value, p in ((mu, mu_path), (ms, ms_path)):
        pct = intorstr.percent_value(value)
        if pct is not None and pct > 100:
            errs.append(fielderr.invalid(p, intorstr.go_literal(value),
                                         "must not be greater than 100%"))
    has_unavailable = intorstr.numeric_value(mu) != 0
    has_surge = intorstr.numeric_value(ms) != 0
    if has_unavailable and has_surge:
        errs.append(fielderr.invalid(ms_path, intorstr.go_literal(ms),
                                     "may not be set when maxUnavailable is non-zero"))
    elif not has_unavailable and not has_surge:
        errs.append(fielderr.required(mu_path, "cannot be 0 when maxSurge is 0"))


def _validate_update_strategy(value: Any, path: str, errs: list[str]) -> None:
    """Rule 6 (``ValidateDaemonSetUpdateStrategy``)."""
    strategy = typed.as_map(value, path, errs)
    if strategy is None and value is not None:
        return
    strategy = strategy or {}
    raw_type = strategy.get("type")
    kind = typed.as_str(raw_type, C(path, "type"), errs)
    if kind is None and raw_type is not None:
        return
    if kind == "OnDelete":
        return
    if kind == "RollingUpdate":
        ru_path = C(path, "rollingUpdate")
        raw = strategy.get("rollingUpdate")
        if raw is None:
            errs.append(fielderr.required(ru_path))
            return
        ru = typed.as_map(raw, ru_path, errs)
        if ru is not None:
            _validate_rolling_update(ru, ru_path, errs)
        return
    errs.append(fielderr.not_supported(path, _strategy_literal(strategy), _UPDATE_STRATEGIES))


def _strategy_literal(strategy: dict[Any, Any]) -> fielderr.GoLiteral:
    """The ``*apps.DaemonSetUpdateStrategy`` that ``field.NotSupported`` gets, as ``%#v``
    prints the struct it points to. A set ``rollingUpdate`` is a pointer field, which Go
    prints as its address (``(*apps.RollingUpdateDaemonSet)(0xc000123450)``, a different
    one per request); a fixed address stands in for it."""
    kind = strategy.get("type")
    address = "nil" if strategy.get("rollingUpdate") is None else "0xc000000000"
    return fielderr.GoLiteral(
        f"apps.DaemonSetUpdateStrategy{{Type:{fielderr.go_quote(str(kind or ''))}, "
        f"RollingUpdate:(*apps.RollingUpdateDaemonSet)({address})}}")


def _validate_daemonset_spec(spec: dict[Any, Any], path: str, errs: list[str]) -> None:
    """``ValidateDaemonSetSpec``, rules 1-9 in the order of spec §a.5."""
    sel_path = C(path, "selector")
    raw_selector = spec.get("selector")
    sel_errs: list[str] = []
    metavalidation.validate_label_selector(raw_selector, sel_path, sel_errs)  # rule 1
    errs.extend(sel_errs)

    template = spec.get("template")
    tmpl_md = typed.get(template, "metadata")
    tmpl_labels = typed.get(tmpl_md, "labels")
    shapes_ok = (
        (template is None or isinstance(template, dict))
        and (tmpl_md is None or isinstance(tmpl_md, dict))
        and (tmpl_labels is None or isinstance(tmpl_labels, dict))
    )
    if not sel_errs and shapes_ok:  # rule 2: only when the selector converts
        try:
            selector: labels.Selector | None = labels.selector_from_label_selector(raw_selector)
        except ValueError:
            selector = None
        lb = {
            k: v
            for k, v in (tmpl_labels or {}).items()
            if isinstance(k, str) and isinstance(v, str)
        }
        if selector is not None and not selector.matches(lb):
            errs.append(
                fielderr.invalid(
                    C(path, "template", "metadata", "labels"),
                    _labels_value(tmpl_labels),
                    "`selector` does not match template `labels`",
                )
            )

    if isinstance(raw_selector, dict):  # rule 3
        ml, me = raw_selector.get("matchLabels"), raw_selector.get("matchExpressions")
        if ml in (None, {}) and me in (None, []):
            errs.append(
                fielderr.invalid(
                    sel_path,
                    metavalidation.label_selector_literal(raw_selector),
                    "empty selector is invalid for daemonset",
                )
            )

    tmpl_path = C(path, "template")  # rule 4
    podvalidation.validate_pod_template_spec(template, tmpl_path, errs)
    pod_spec = typed.get(template, "spec")
    restart = typed.get(pod_spec, "restartPolicy")
    if isinstance(restart, str) and restart not in ("", "Always"):
        errs.append(
            fielderr.not_supported(C(tmpl_path, "spec", "restartPolicy"), restart, ["Always"])
        )
    if typed.get(pod_spec, "activeDeadlineSeconds") is not None:
        errs.append(
            fielderr.forbidden(
                C(tmpl_path, "spec", "activeDeadlineSeconds"),
                "activeDeadlineSeconds in DaemonSet is not Supported",
            )
        )

    _nonnegative(spec.get("minReadySeconds"), C(path, "minReadySeconds"), errs)  # rule 5
    _nonnegative(spec.get("templateGeneration"), C(path, "templateGeneration"), errs, 64)
    # upstream checks the update strategy before revisionHistoryLimit (ValidateDaemonSetSpec)
    _validate_update_strategy(spec.get("updateStrategy"), C(path, "updateStrategy"), errs)
    _nonnegative(spec.get("revisionHistoryLimit"), C(path, "revisionHistoryLimit"), errs)


def _validate_daemonset_update(new: dict[Any, Any], old: dict[Any, Any], errs: list[str]) -> None:
    metavalidation.validate_object_meta_update(
        new.get("metadata"), old.get("metadata"), "metadata", errs
    )
    new_spec, old_spec = typed.get(new, "spec") or {}, typed.get(old, "spec") or {}
    if not isinstance(new_spec, dict) or not isinstance(old_spec, dict):
        return
    raw_new_tg: Any = new_spec.get("templateGeneration")
    raw_old_tg: Any = old_spec.get("templateGeneration")
    if typed.is_int(raw_new_tg) and typed.is_int(raw_old_tg):
        new_tg, old_tg = int(raw_new_tg), int(raw_old_tg)
        tg_path = C("spec", "templateGeneration")
        changed = new_spec.get("template") != old_spec.get("template")
        if new_tg < old_tg:
            errs.append(fielderr.invalid(tg_path, new_tg, "must not be decremented"))
        if new_tg == old_tg and changed:
            errs.append(
                fielderr.invalid(tg_path, new_tg, "must be incremented upon template update")
            )
        elif new_tg > old_tg and not changed:
            errs.append(
                fielderr.invalid(tg_path, new_tg, "must not be incremented without template update")
            )
    new_sel, old_sel = new_spec.get("selector"), old_spec.get("selector")
    if metavalidation.normalized_selector(new_sel) != metavalidation.normalized_selector(old_sel):
        shown = None if new_sel is None else metavalidation.label_selector_literal(new_sel)
        errs.append(fielderr.invalid(C("spec", "selector"), shown, "field is immutable"))


def validate_daemonset(obj: Any, old: Any = None) -> list[str]:
    """Validate a (defaulted) DaemonSet; with ``old``, also the update rules. Decides only."""
    if not isinstance(obj, dict):
        return fielderr.not_an_object(obj)
    errs: list[str] = []
    # ValidateDaemonSet: ObjectMeta first, then the spec
    metavalidation.validate_namespaced_meta(obj.get("metadata"), "metadata", errs)
    raw_spec = obj.get("spec")
    rolloutopts.validate(typed.get(obj.get("metadata"), "annotations"),
                         C("metadata", "annotations"), errs,
                         typed.get(raw_spec, "minReadySeconds") or 0)
    spec = typed.as_map(raw_spec, "spec", errs)
    if spec is not None or raw_spec is None:
        _validate_daemonset_spec(spec or {}, "spec", errs)
    typed.as_map(obj.get("status"), "status", errs)
    if isinstance(old, dict):
        _validate_daemonset_update(obj, old, errs)
    return errs


def validate_daemonset_status(status: Any, old_status: Any = None) -> list[str]:
    """``ValidateDaemonSetStatus`` (+ the status-update rule): counters and
    observedGeneration ≥ 0; collisionCount ≥ 0 and never lower than ``old_status``'s."""
    errs: list[str] = []
    st = typed.as_map(status, "status", errs)
    if st is None:
        if status is not None:
            return errs
        st = {}
    for name, bits in _DS_COUNTERS:
        _nonnegative(st.get(name), C("status", name), errs, bits)
    cc_path = C("status", "collisionCount")
    _nonnegative(st.get("collisionCount"), cc_path, errs)
    typed.maps(st.get("conditions"), C("status", "conditions"), errs)
    old_cc = typed.get(old_status, "collisionCount")
    new_cc = st.get("collisionCount")
    if typed.is_int(old_cc) and (new_cc is None or (typed.is_int(new_cc) and new_cc < old_cc)):
        errs.append(fielderr.invalid(cc_path, new_cc or 0, "cannot be decremented"))
    return errs


# ---- Node, Pod, ControllerRevision, Event ----------------------------------------------


def _taint_literal(t: dict[Any, Any]) -> fielderr.GoLiteral:
    def q(k: str) -> str:
        v = t.get(k)
        return fielderr.go_quote(v if isinstance(v, str) else "")

    return fielderr.GoLiteral(
        f"core.Taint{{Key:{q('key')}, Value:{q('value')}, Effect:{q('effect')}, "
        "TimeAdded:(*v1.Time)(nil)}"
    )


def _validate_taints(value: Any, path: str, errs: list[str]) -> None:
    """``validateNodeTaints``: key, value, effect (required), unique by key and effect."""
    seen: set[tuple[str, str]] = set()
    for i, t in typed.maps(value, path, errs):
        tpath = fielderr.index(path, i)
        el: list[str] = []
        key = typed.as_str(t.get("key"), C(tpath, "key"), el)
        val = typed.as_str(t.get("value"), C(tpath, "value"), el)
        effect = typed.as_str(t.get("effect"), C(tpath, "effect"), el)
        typed.as_str(t.get("timeAdded"), C(tpath, "timeAdded"), el)
        if el:
            errs.extend(el)
            continue
        metavalidation.validate_label_name(key or "", C(tpath, "key"), errs)
        msgs = syntax.is_valid_label_value(val or "")
        if msgs:
            errs.append(fielderr.invalid(C(tpath, "value"), val or "", ";".join(msgs)))
        if not effect:
            errs.append(fielderr.required(C(tpath, "effect")))
        elif effect not in schedvalidation.TAINT_EFFECTS:
            errs.append(
                fielderr.not_supported(C(tpath, "effect"), effect, schedvalidation.TAINT_EFFECTS)
            )
        pair = (key or "", effect or "")
        if pair in seen:
            errs.append(
                fielderr.duplicate(
                    tpath, _taint_literal(t), "taints must be unique by key and effect pair"
                )
            )
            continue
        seen.add(pair)


def _validate_quantities(value: Any, path: str, errs: list[str]) -> None:
    for name, q in (typed.as_map(value, path, errs) or {}).items():
        if not (isinstance(q, str | float) or typed.is_int(q)):
            errs.append(fielderr.type_error(fielderr.key(path, name), q, "quantity"))


# the status checks run on every status update every reader of the log decodes (a node's
# heartbeat, a pod's): their paths are made once, a condition's only for an error
_NODE_QUANTITIES = tuple((f, C("status", f)) for f in ("capacity", "allocatable"))
_NODE_CONDITIONS = C("status", "conditions")
_CONDITION_TEXT = ("type", "status", "reason", "message", "lastHeartbeatTime",
                   "lastTransitionTime")
_NODE_ADDRESSES, _NODE_INFO = C("status", "addresses"), C("status", "nodeInfo")
_POD_PHASE = C("status", "phase")
_POD_TEXT = tuple((f, C("status", f)) for f in ("hostIP", "podIP", "startTime", "reason",
                                                 "message"))
_POD_LISTS = tuple((f, C("status", f)) for f in ("conditions", "containerStatuses",
                                                  "initContainerStatuses",
                                                  "ephemeralContainerStatuses"))


def _validate_node_status(value: Any, errs: list[str]) -> None:
    status = typed.as_map(value, "status", errs) or {}
    for f, path in _NODE_QUANTITIES:
        _validate_quantities(status.get(f), path, errs)
    for i, cond in typed.maps(status.get("conditions"), _NODE_CONDITIONS, errs):
        for f in _CONDITION_TEXT:
            text = cond.get(f)
            if not isinstance(text, typed.TEXT):
                typed.as_str(text, C(fielderr.index(_NODE_CONDITIONS, i), f), errs)
    typed.maps(status.get("addresses"), _NODE_ADDRESSES, errs)
    typed.as_map(status.get("nodeInfo"), _NODE_INFO, errs)


def _pod_status_clean(status: dict[Any, Any]) -> bool:
    """Whether ``_validate_pod_status`` finds nothing in ``status``: every check at once,
    no path made (every reader checks the status of each pod's every update)."""
    phase = status.get("phase")
    if phase is not None and not (isinstance(phase, str)
                                  and (not phase or phase in _POD_PHASES)):
        return False
    for f, _path in _POD_TEXT:
        if not isinstance(status.get(f), typed.TEXT):
            return False
    for f, _path in _POD_LISTS:
        items = status.get(f)
        if items is not None:
            if not isinstance(items, list):
                return False
            for item in items:
                if not (item is None or isinstance(item, dict)):
                    return False
    return True


def _validate_pod_status(value: Any, errs: list[str]) -> None:
    """A pod's status: the types of the fields the node agent writes, its phase known."""
    if not (isinstance(value, dict) and _pod_status_clean(value)):
        _walk_pod_status(value, errs)


def _walk_pod_status(value: Any, errs: list[str]) -> None:
    """``_validate_pod_status`` of any value: every error, in order."""
    status = typed.as_map(value, "status", errs) or {}
    phase = typed.as_str(status.get("phase"), _POD_PHASE, errs)
    if phase and phase not in _POD_PHASES:
        errs.append(fielderr.not_supported(_POD_PHASE, phase, _POD_PHASES))
    for f, path in _POD_TEXT:
        typed.as_str(status.get(f), path, errs)
    for f, path in _POD_LISTS:
        typed.maps(status.get(f), path, errs)


def validate_status(kind: str, status: Any, old_status: Any = None) -> list[str]:
    """The /status subresource's checks of one kind: ``status`` as a Node's, a Pod's or a
    DaemonSet's (the rest of the object is the stored one). Decides only."""
    errs: list[str] = []
    if kind == "Node":
        _validate_node_status(status, errs)
    elif kind == "Pod":
        _validate_pod_status(status, errs)
    elif kind == "DaemonSet":
        errs = validate_daemonset_status(status, old_status or {})
    elif kind == "Namespace":
        _validate_namespace_status(status, errs)
    else:
        errs.append(f"status: Invalid value: {kind} has no status subresource")
    return errs


def validate_node(obj: Any, old: Any = None) -> list[str]:
    """``ValidateNode`` (subset). Taint errors are reported under ``metadata.taints``, as
    upstream does. Decides only."""
    if not isinstance(obj, dict):
        return fielderr.not_an_object(obj)
    errs: list[str] = []
    metavalidation.validate_cluster_meta(obj.get("metadata"), "metadata", errs)
    spec = typed.as_map(obj.get("spec"), "spec", errs) or {}
    typed.as_bool(spec.get("unschedulable"), C("spec", "unschedulable"), errs)
    for f in ("podCIDR", "providerID"):
        typed.as_str(spec.get(f), C("spec", f), errs)
    _validate_taints(spec.get("taints"), C("metadata", "taints"), errs)
    _validate_node_status(obj.get("status"), errs)
    if isinstance(old, dict):
        metavalidation.validate_object_meta_update(
            obj.get("metadata"), old.get("metadata"), "metadata", errs
        )
    return errs


def validate_pod(obj: Any, old: Any = None) -> list[str]:
    """``ValidatePod`` (subset): metadata, the pod spec (containers first of all), and the
    types of the status fields the kubelet simulator writes; with ``old`` (a user's update,
    ``ValidatePodUpdate``) also that the spec changes only where a pod's may
    (:mod:`shared.model.podupdate`). Decides only."""
    if not isinstance(obj, dict):
        return fielderr.not_an_object(obj)
    errs: list[str] = []
    metavalidation.validate_namespaced_meta(obj.get("metadata"), "metadata", errs)
    podvalidation.validate_pod_spec(obj.get("spec"), "spec", errs)
    _validate_pod_status(obj.get("status"), errs)
    if isinstance(old, dict):
        metavalidation.validate_object_meta_update(
            obj.get("metadata"), old.get("metadata"), "metadata", errs
        )
        podupdate.validate_spec_update(obj.get("spec"), old.get("spec"), "spec", errs)
    return errs


def validate_pod_create(obj: Any) -> list[str]:
    """The rule ``ValidatePodCreate`` adds to a new pod's validation (``validate_pod``):
    no ephemeral containers, which only the ``pods/ephemeralcontainers`` subresource adds
    to an existing pod. Only a user's create must be checked with it, never a stored pod (a
    read, a controller's metadata change, the node agent's writes), which may carry
    ephemeral containers once added; anything but a Pod has no such rule. Decides only."""
    if not isinstance(obj, dict) or obj.get("kind") != kinds.POD.kind:
        return []
    spec = obj.get("spec")
    ephemeral = spec.get("ephemeralContainers") if isinstance(spec, dict) else None
    if isinstance(ephemeral, list) and ephemeral:
        return [fielderr.forbidden(C("spec", "ephemeralContainers"), "cannot be set on create")]
    return []


def validate_controller_revision(obj: Any, old: Any = None) -> list[str]:
    """``ValidateControllerRevision``: metadata, ``data`` present, ``revision`` ≥ 0; on
    update ``data`` is immutable. Decides only."""
    if not isinstance(obj, dict):
        return fielderr.not_an_object(obj)
    errs: list[str] = []
    metavalidation.validate_namespaced_meta(obj.get("metadata"), "metadata", errs)
    if obj.get("data") is None:
        errs.append(fielderr.required("data", "data is mandatory"))
    _nonnegative(obj.get("revision"), "revision", errs, 64)
    if isinstance(old, dict):
        metavalidation.validate_object_meta_update(
            obj.get("metadata"), old.get("metadata"), "metadata", errs
        )
        if old.get("data") is not None and obj.get("data") != old.get("data"):
            errs.append(fielderr.invalid("data", obj.get("data"), "field is immutable"))
    return errs


def validate_event(obj: Any, old: Any = None) -> list[str]:
    """A core/v1 Event: generic metadata (path-segment name), and upstream's legacy rule that
    ``involvedObject.namespace`` matches the event's namespace (or, for new-style events with
    ``eventTime``, the reporting fields). Decides only."""
    if not isinstance(obj, dict):
        return fielderr.not_an_object(obj)
    errs: list[str] = []
    metavalidation.validate_object_meta(
        obj.get("metadata"),
        "metadata",
        errs,
        namespaced=True,
        name_fn=syntax.is_valid_path_segment_name,
    )
    involved = typed.as_map(obj.get("involvedObject"), "involvedObject", errs) or {}
    for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath"):
        typed.as_str(involved.get(f), C("involvedObject", f), errs)
    for f in (
        "reason",
        "message",
        "type",
        "firstTimestamp",
        "lastTimestamp",
        "eventTime",
        "action",
        "reportingComponent",
        "reportingInstance",
    ):
        typed.as_str(obj.get(f), f, errs)
    typed.as_int(obj.get("count"), "count", errs)
    typed.as_map(obj.get("source"), "source", errs)
    md = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    assert isinstance(md, dict)
    ns = md.get("namespace") if isinstance(md.get("namespace"), str) else ""
    inv_ns = involved.get("namespace") if isinstance(involved.get("namespace"), str) else ""
    ns_path = C("involvedObject", "namespace")
    if not obj.get("eventTime"):
        if not inv_ns:
            if ns not in ("", "default"):
                errs.append(fielderr.invalid(ns_path, inv_ns, "does not match event.namespace"))
        elif ns != inv_ns:
            errs.append(fielderr.invalid(ns_path, inv_ns, "does not match event.namespace"))
    else:
        if not inv_ns and ns not in ("default", "kube-system"):
            errs.append(fielderr.invalid(ns_path, inv_ns, "does not match event.namespace"))
        for f in ("reportingComponent", "reportingInstance", "action", "reason"):
            if not obj.get(f):
                errs.append(fielderr.required(f))
    if isinstance(old, dict):
        metavalidation.validate_object_meta_update(
            obj.get("metadata"), old.get("metadata"), "metadata", errs
        )
    return errs


NAMESPACE_FINALIZER = "kubernetes"  # a Namespace's spec finalizer: its content is not gone yet
NAMESPACE_PHASES = ("Active", "Terminating")


def _validate_namespace_status(value: Any, errs: list[str]) -> None:
    status = typed.as_map(value, "status", errs) or {}
    phase = typed.as_str(status.get("phase"), C("status", "phase"), errs)
    if phase and phase not in NAMESPACE_PHASES:
        errs.append(fielderr.not_supported(C("status", "phase"), phase, NAMESPACE_PHASES))
    for i, cond in enumerate(typed.as_list(status.get("conditions"), C("status", "conditions"),
                                           errs) or []):
        path = fielderr.index(C("status", "conditions"), i)
        cond = typed.as_map(cond, path, errs) or {}
        for f in ("type", "status", "reason", "message", "lastTransitionTime"):
            typed.as_str(cond.get(f), C(path, f), errs)


def validate_namespace(obj: Any, old: Any = None) -> list[str]:
    """``ValidateNamespace``: metadata named as a DNS label, ``spec.finalizers`` qualified
    names (an unqualified one must be ``kubernetes``), ``status.phase`` one of its two.
    Decides only."""
    if not isinstance(obj, dict):
        return fielderr.not_an_object(obj)
    errs: list[str] = []
    metavalidation.validate_object_meta(obj.get("metadata"), "metadata", errs,
                                        namespaced=False, name_fn=syntax.name_is_dns_label)
    spec = typed.as_map(obj.get("spec"), "spec", errs) or {}
    path = C("spec", "finalizers")
    for f in typed.as_str_list(spec.get("finalizers"), path, errs) or []:
        problems = syntax.is_qualified_name(f)
        if not problems and "/" not in f and f != NAMESPACE_FINALIZER:
            problems = ["name is neither a standard finalizer name nor is it fully qualified"]
        errs.extend(fielderr.invalid(path, f, m) for m in problems)
    _validate_namespace_status(obj.get("status"), errs)
    if isinstance(old, dict):
        metavalidation.validate_object_meta_update(
            obj.get("metadata"), old.get("metadata"), "metadata", errs
        )
    return errs


_IMMUTABLE_SET = "field is immutable when `immutable` is set"


def _config_map_update(obj: dict[Any, Any], old: dict[Any, Any], errs: list[str]) -> None:
    metavalidation.validate_object_meta_update(obj.get("metadata"), old.get("metadata"),
                                               "metadata", errs)
    if old.get("immutable") is True:
        if obj.get("immutable") is not True:
            errs.append(fielderr.forbidden("immutable", _IMMUTABLE_SET))
        for f in ("data", "binaryData"):
            if (obj.get(f) or None) != (old.get(f) or None):
                errs.append(fielderr.forbidden(f, _IMMUTABLE_SET))


def validate_config_map(obj: Any, old: Any = None) -> list[str]:
    """``ValidateConfigMap`` (and with ``old``, ``ValidateConfigMapUpdate``): metadata named
    as a DNS subdomain; each key of ``data`` and ``binaryData`` a config key, none in both;
    ``binaryData`` values base64; the values' total size at most 1 MiB; an ``immutable``
    ConfigMap keeps its data, its binaryData and ``immutable: true``. Decides only."""
    if not isinstance(obj, dict):
        return fielderr.not_an_object(obj)
    errs: list[str] = []
    if isinstance(old, dict):
        _config_map_update(obj, old, errs)
    metavalidation.validate_namespaced_meta(obj.get("metadata"), "metadata", errs)
    typed.as_bool(obj.get("immutable"), "immutable", errs)
    data = typed.as_str_map(obj.get("data"), "data", errs) or {}
    binary = typed.as_str_map(obj.get("binaryData"), "binaryData", errs) or {}
    size = 0
    for key, value in sorted(data.items()):
        path = fielderr.key("data", key)
        errs.extend(fielderr.invalid(path, key, m) for m in syntax.is_config_map_key(key))
        if key in binary:
            errs.append(fielderr.invalid(path, key, "duplicate of key present in binaryData"))
        size += syntax.byte_len(value)
    for key, value in sorted(binary.items()):
        path = fielderr.key("binaryData", key)
        errs.extend(fielderr.invalid(path, key, m) for m in syntax.is_config_map_key(key))
        try:
            size += len(configmap.decode_binary(value))
        except ValueError as err:
            errs.append(fielderr.invalid(path, fielderr.cut(value), str(err)))
    if size > configmap.MAX_SIZE:
        errs.append(fielderr.too_long("", configmap.MAX_SIZE))
    return errs


SECRET_REQUIRED_KEYS = {
    "kubernetes.io/dockercfg": (".dockercfg",),
    "kubernetes.io/dockerconfigjson": (".dockerconfigjson",),
    "kubernetes.io/ssh-auth": ("ssh-privatekey",),
    "kubernetes.io/tls": ("tls.crt", "tls.key"),
}
SERVICE_ACCOUNT_NAME_KEY = "kubernetes.io/service-account.name"


def _secret_type_errors(kind: str, data: dict[str, bytes], annotations: Any,
                        errs: list[str]) -> None:
    """What each built-in type of Secret needs (``ValidateSecret``'s switch)."""
    if kind == "kubernetes.io/service-account-token":
        if not (annotations if isinstance(annotations, dict) else {}).get(
                SERVICE_ACCOUNT_NAME_KEY):
            errs.append(fielderr.required(fielderr.key(C("metadata", "annotations"),
                                                       SERVICE_ACCOUNT_NAME_KEY)))
    elif kind == "kubernetes.io/basic-auth":
        if "username" not in data and "password" not in data:
            errs.append(fielderr.required(fielderr.key("data", "username")))
            errs.append(fielderr.required(fielderr.key("data", "password")))
    elif kind == "kubernetes.io/ssh-auth":
        if not data.get("ssh-privatekey"):
            errs.append(fielderr.required(fielderr.key("data", "ssh-privatekey")))
    elif kind in SECRET_REQUIRED_KEYS:
        for key in SECRET_REQUIRED_KEYS[kind]:
            if key not in data:
                errs.append(fielderr.required(fielderr.key("data", key)))
        if kind in ("kubernetes.io/dockercfg", "kubernetes.io/dockerconfigjson") and \
                SECRET_REQUIRED_KEYS[kind][0] in data:
            key = SECRET_REQUIRED_KEYS[kind][0]
            try:
                parsed = json.loads(data[key])
                if not isinstance(parsed, dict):
                    raise ValueError("not a JSON object")
            except ValueError as err:
                errs.append(fielderr.invalid(fielderr.key("data", key),
                                             "<secret contents redacted>", str(err)))


def validate_secret(obj: Any, old: Any = None) -> list[str]:
    """``ValidateSecret`` (and with ``old``, ``ValidateSecretUpdate``: its type never
    changes, and an ``immutable`` one keeps its data): metadata named as a DNS subdomain;
    each key of ``data`` a config key, each value base64, 1 MiB in all; what its type needs.
    Decides only."""
    if not isinstance(obj, dict):
        return fielderr.not_an_object(obj)
    errs: list[str] = []
    metavalidation.validate_update_of(obj, old, errs)
    if isinstance(old, dict):
        if obj.get("type") != old.get("type"):
            errs.append(fielderr.invalid("type", obj.get("type"), "field is immutable"))
        if old.get("immutable") is True:
            if obj.get("immutable") is not True:
                errs.append(fielderr.forbidden("immutable", _IMMUTABLE_SET))
            if (obj.get("data") or None) != (old.get("data") or None):
                errs.append(fielderr.forbidden("data", _IMMUTABLE_SET))
    metavalidation.validate_namespaced_meta(obj.get("metadata"), "metadata", errs)
    typed.as_bool(obj.get("immutable"), "immutable", errs)
    kind = typed.as_str(obj.get("type"), "type", errs) or ""
    data: dict[str, bytes] = {}
    for key, value in sorted((typed.as_str_map(obj.get("data"), "data", errs) or {}).items()):
        path = fielderr.key("data", key)
        errs.extend(fielderr.invalid(path, key, m) for m in syntax.is_config_map_key(key))
        try:
            data[key] = configmap.decode_binary(value)
        except ValueError as err:
            errs.append(fielderr.invalid(path, "<secret contents redacted>", str(err)))
    if sum(len(v) for v in data.values()) > configmap.MAX_SIZE:
        errs.append(fielderr.too_long("data", configmap.MAX_SIZE))
    _secret_type_errors(kind, data, (obj.get("metadata") or {}).get("annotations")
                        if isinstance(obj.get("metadata"), dict) else None, errs)
    return errs


_VALIDATORS = {
    kinds.DAEMONSET.kind: validate_daemonset,
    kinds.POD.kind: validate_pod,
    kinds.NODE.kind: validate_node,
    kinds.CONTROLLER_REVISION.kind: validate_controller_revision,
    kinds.EVENT.kind: validate_event,
    kinds.NAMESPACE.kind: validate_namespace,
    kinds.CONFIG_MAP.kind: validate_config_map,
    kinds.SECRET.kind: validate_secret,
    **accessvalidation.VALIDATORS,
    kinds.PRIORITY_CLASS.kind: priority.validate_priority_class,
    kinds.SERVICE.kind: servicevalidation.validate_service,
}


def _validate(obj: Any, old: Any) -> list[str]:
    if not isinstance(obj, dict):
        return fielderr.not_an_object(obj)
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    if kind is None or kind == "":
        return [fielderr.required("kind")]
    if not isinstance(kind, str):
        return [fielderr.type_error("kind", kind, "string")]
    if api_version is None or api_version == "":
        return [fielderr.required("apiVersion")]
    if not isinstance(api_version, str):
        return [fielderr.type_error("apiVersion", api_version, "string")]
    try:
        info = kinds.lookup(api_version, kind)
    except kinds.NoKindMatchError as err:
        return [str(err)]
    return _VALIDATORS[info.kind](obj, old)


def validate(obj: Any, old: Any = None) -> list[str]:
    """Validate any stored object by its ``apiVersion``/``kind`` (``old``: the stored version,
    for an update). An unknown kind/version gives one error, ``no matches for kind "Foo" in
    version "v9"``. Decides only; never raises."""
    try:
        return _validate(obj, old)
    except Exception as err:  # a bug must not take the API down; the fuzz tests look for it
        return [f"internal error: validation failed: {type(err).__name__}: {err}"]


def _shape_of_daemonset(obj: Any, old: Any = None) -> list[str]:
    errs = validate_daemonset(obj)
    if isinstance(obj, dict):
        errs += validate_daemonset_status(obj.get("status"))
    return errs


_SHAPES = {**_VALIDATORS, kinds.DAEMONSET.kind: _shape_of_daemonset}


def _pod_spec_shape(value: Any, errs: list[str]) -> None:
    podvalidation.validate_pod_spec(value, "spec", errs)


def _node_name_shape(value: Any, errs: list[str]) -> None:
    podvalidation.validate_node_name(value, C("spec", "nodeName"), errs)


def _pod_meta_shape(value: Any, errs: list[str]) -> None:
    metavalidation.validate_namespaced_meta(value, "metadata", errs)


_PART_SHAPES = {(kinds.POD.kind, "metadata"): _pod_meta_shape,
                (kinds.POD.kind, "status"): _validate_pod_status,
                (kinds.POD.kind, "spec"): _pod_spec_shape,
                (kinds.POD.kind, "spec.nodeName"): _node_name_shape,
                (kinds.NODE.kind, "status"): _validate_node_status}
#: the kinds whose shape check checks the status by itself (``part_shape_errors``)
STATUS_ALONE = frozenset(kind for kind, _part in _PART_SHAPES)
#: the kinds whose shape check is that of each of these top-level parts by itself, nothing
#: else of the object counted (``validate_pod``): a part equal to that of a version already
#: checked need not be checked again
SHAPE_PARTS = {kinds.POD.kind: ("metadata", "spec", "status")}


def part_shape_errors(kind: str, part: str, value: Any) -> list[str]:
    """The type errors ``shape_errors`` finds in a ``kind`` object's ``part`` (a Pod's
    metadata, spec, status or its spec's nodeName, a Node's status: its shape check checks
    each by itself), ``value``: of an object whose other parts have none, its
    ``shape_errors`` are these, in their order. Decides only; never raises."""
    errs: list[str] = []
    try:
        _PART_SHAPES[kind, part](value, errs)
        if not errs:
            return errs
        return list(dict.fromkeys(e for e in errs if fielderr.is_type_error(e)))
    except Exception as err:  # as in ``shape_errors``
        return [f"internal error: shape check failed: {type(err).__name__}: {err}"]


def shape_errors(kind: str, obj: Any) -> list[str]:
    """The wrong JSON types in a stored object of ``kind`` (``status.conditions`` a string,
    ``metadata.labels`` a list, …): what would make a reader of it fail. Only type errors
    count: the other rules are the writer's (controllers write their own objects without
    re-validating them), and a stored object that breaks one of them is still readable.
    Unknown kinds have no shape rules. Decides only; never raises."""
    check = _SHAPES.get(kind)
    if check is None:
        return []
    if not isinstance(obj, dict):
        return fielderr.not_an_object(obj)
    try:
        return list(dict.fromkeys(e for e in check(obj, None) if fielderr.is_type_error(e)))
    except Exception as err:  # as in ``validate``: a bug here must not take a reader down
        return [f"internal error: shape check failed: {type(err).__name__}: {err}"]
