"""Validation of the scheduling fields of a pod spec: tolerations and node affinity. Pure.

Upstream's ``ValidateTolerations`` and ``validateAffinity`` (node affinity in full, pod
(anti-)affinity by type only). Functions append to ``errs`` and never raise.
"""

from __future__ import annotations

from typing import Any

from shared.model import fielderr, memo, metavalidation, nodeaffinity, syntax, typed

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TOLERATION_OPERATORS = ("Equal", "Exists")

C = fielderr.child


def toleration_literal(t: dict[Any, Any]) -> fielderr.GoLiteral:
    """A toleration as ``%#v`` prints ``core.Toleration`` (the seconds shown as ``&N``)."""

    def q(k: str) -> str:
        v = t.get(k)
        return fielderr.go_quote(v if isinstance(v, str) else "")

    secs = t.get("tolerationSeconds")
    secs_text = f"&{secs}" if typed.is_int(secs) else "(*int64)(nil)"
    return fielderr.GoLiteral(
        f"core.Toleration{{Key:{q('key')}, Operator:{q('operator')}, Value:{q('value')}, "
        f"Effect:{q('effect')}, TolerationSeconds:{secs_text}}}"
    )


@memo.by_value  # the same for every pod of a DaemonSet
def validate_tolerations(value: Any, path: str, errs: list[str]) -> None:
    """``ValidateTolerations``."""
    for i, t in typed.maps(value, path, errs):
        tpath = fielderr.index(path, i)
        el: list[str] = []
        key = typed.as_str(t.get("key"), C(tpath, "key"), el) or ""
        op = typed.as_str(t.get("operator"), C(tpath, "operator"), el) or ""
        val = typed.as_str(t.get("value"), C(tpath, "value"), el) or ""
        effect = typed.as_str(t.get("effect"), C(tpath, "effect"), el) or ""
        secs = typed.as_int(t.get("tolerationSeconds"), C(tpath, "tolerationSeconds"), el, 64)
        if el:  # wrong types: reported; the rules below would only add noise
            errs.extend(el)
            continue
        if key:
            metavalidation.validate_label_name(key, C(tpath, "key"), errs)
        if not key and op != "Exists":
            errs.append(
                fielderr.invalid(
                    C(tpath, "operator"),
                    op,
                    'operator must be Exists when `key` is empty, which means "match all values '
                    'and all keys"',
                )
            )
        if secs is not None and effect != "NoExecute":
            errs.append(
                fielderr.invalid(
                    C(tpath, "effect"),
                    effect,
                    "effect must be 'NoExecute' when `tolerationSeconds` is set",
                )
            )
        if op in ("Equal", ""):
            msgs = syntax.is_valid_label_value(val)
            if msgs:
                errs.append(fielderr.invalid(C(tpath, "operator"), val, ";".join(msgs)))
        elif op == "Exists":
            if val:
                errs.append(
                    fielderr.invalid(
                        C(tpath, "operator"),
                        toleration_literal(t),
                        "value must be empty when `operator` is 'Exists'",
                    )
                )
        else:
            errs.append(fielderr.not_supported(C(tpath, "operator"), op, TOLERATION_OPERATORS))
        if effect and effect not in TAINT_EFFECTS:
            errs.append(fielderr.not_supported(C(tpath, "effect"), effect, TAINT_EFFECTS))


def _validate_node_selector_term(term: dict[Any, Any], path: str, errs: list[str]) -> None:
    for j, req in typed.maps(term.get("matchExpressions"), C(path, "matchExpressions"), errs):
        rpath = fielderr.index(C(path, "matchExpressions"), j)
        op = typed.as_str(req.get("operator"), C(rpath, "operator"), errs)
        values = typed.as_str_list(req.get("values"), C(rpath, "values"), errs) or []
        if op in ("In", "NotIn"):
            if not values:
                errs.append(
                    fielderr.required(
                        C(rpath, "values"), "must be specified when `operator` is 'In' or 'NotIn'"
                    )
                )
        elif op in ("Exists", "DoesNotExist"):
            if values:
                errs.append(
                    fielderr.forbidden(
                        C(rpath, "values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    )
                )
        elif op in ("Gt", "Lt"):
            if len(values) != 1:
                errs.append(
                    fielderr.required(
                        C(rpath, "values"),
                        "must be specified single value when `operator` is 'Lt' or 'Gt'",
                    )
                )
        elif op is not None or req.get("operator") is None:
            errs.append(
                fielderr.invalid(C(rpath, "operator"), op or "", "not a valid selector operator")
            )
        key = typed.as_str(req.get("key"), C(rpath, "key"), errs)
        if key is not None or req.get("key") is None:
            metavalidation.validate_label_name(key or "", C(rpath, "key"), errs)
    for j, req in typed.maps(term.get("matchFields"), C(path, "matchFields"), errs):
        rpath = fielderr.index(C(path, "matchFields"), j)
        op = typed.as_str(req.get("operator"), C(rpath, "operator"), errs)
        values = typed.as_str_list(req.get("values"), C(rpath, "values"), errs) or []
        if op in ("In", "NotIn"):
            if len(values) != 1:
                errs.append(
                    fielderr.required(
                        C(rpath, "values"),
                        "must be only one value when `operator` is 'In' or 'NotIn' for node "
                        "field selector",
                    )
                )
        elif op is not None or req.get("operator") is None:
            errs.append(
                fielderr.invalid(C(rpath, "operator"), op or "", "not a valid selector operator")
            )
        key = typed.as_str(req.get("key"), C(rpath, "key"), errs)
        if key != "metadata.name":
            if key is not None or req.get("key") is None:
                errs.append(
                    fielderr.invalid(C(rpath, "key"), key or "", "not a valid field selector key")
                )
        else:
            for k, v in enumerate(values):
                errs.extend(
                    fielderr.invalid(fielderr.index(C(rpath, "values"), k), v, m)
                    for m in syntax.name_is_dns_subdomain(v)
                )


def _daemon_node(value: Any) -> str | None:
    """The node of ``value`` when it is exactly the affinity of a daemon pod aimed at that
    node, nothing but the required node selector naming it
    (``nodeaffinity.node_name_selector``): each map with those keys alone, each list of one
    item; else None. Looked at in place: every reader checks the affinity of every pod a
    DaemonSet creates."""
    affinity = _only(value, "nodeAffinity")
    required = _only(affinity, "requiredDuringSchedulingIgnoredDuringExecution")
    terms = _only(required, "nodeSelectorTerms")
    fields = _only(_only(terms, 0), "matchFields")
    req = _only(fields, 0)
    if type(req) is not dict or len(req) != 3 or req.get("key") != nodeaffinity.NODE_NAME_FIELD \
            or req.get("operator") != "In":
        return None
    node = _only(req.get("values"), 0)
    return node if type(node) is str else None


def _only(value: Any, key: str | int) -> Any:
    """``value[key]`` when ``value`` has ``key`` as its only key (a map's, for a str) or
    index (a list's, for 0), else None."""
    if isinstance(key, str):
        return value.get(key) if type(value) is dict and len(value) == 1 else None
    return value[0] if type(value) is list and len(value) == 1 and key == 0 else None


def validate_affinity(value: Any, path: str, errs: list[str]) -> None:
    """``validateAffinity``: node affinity in full, pod (anti-)affinity by type only.

    The affinity of a daemon pod (every pod a DaemonSet creates, each naming its node, and
    each checked by every reader of the log) has one rule that can fail, its node's name:
    that one is checked alone, with the message and path the general walk below gives."""
    node = _daemon_node(value)
    if node is not None:
        problems = syntax.name_is_dns_subdomain(node)
        if problems:  # (the path is made for an error alone)
            terms = C(C(C(path, "nodeAffinity"),
                        "requiredDuringSchedulingIgnoredDuringExecution"), "nodeSelectorTerms")
            values = C(fielderr.index(C(fielderr.index(terms, 0), "matchFields"), 0), "values")
            errs.extend(fielderr.invalid(fielderr.index(values, 0), node, m) for m in problems)
        return
    _walk_affinity(value, path, errs)


def _walk_affinity(value: Any, path: str, errs: list[str]) -> None:
    """``validate_affinity`` of any value: every rule."""
    aff = typed.as_map(value, path, errs)
    if aff is None:
        return
    na_path = C(path, "nodeAffinity")
    na = typed.as_map(aff.get("nodeAffinity"), na_path, errs)
    if na is not None:
        req_path = C(na_path, "requiredDuringSchedulingIgnoredDuringExecution")
        req = typed.as_map(na.get("requiredDuringSchedulingIgnoredDuringExecution"), req_path, errs)
        if req is not None:
            terms_path = C(req_path, "nodeSelectorTerms")
            terms = typed.maps(req.get("nodeSelectorTerms"), terms_path, errs)
            if not terms and req.get("nodeSelectorTerms") in (None, []):
                errs.append(
                    fielderr.required(terms_path, "must have at least one node selector term")
                )
            for i, term in terms:
                _validate_node_selector_term(term, fielderr.index(terms_path, i), errs)
        pref_path = C(na_path, "preferredDuringSchedulingIgnoredDuringExecution")
        for i, pref in typed.maps(
            na.get("preferredDuringSchedulingIgnoredDuringExecution"), pref_path, errs
        ):
            ppath = fielderr.index(pref_path, i)
            weight = typed.as_int(pref.get("weight"), C(ppath, "weight"), errs)
            if (weight is not None or pref.get("weight") is None) and not 1 <= (weight or 0) <= 100:
                errs.append(
                    fielderr.invalid(C(ppath, "weight"), weight or 0, "must be in the range 1-100")
                )
            preference = typed.as_map(pref.get("preference"), C(ppath, "preference"), errs)
            _validate_node_selector_term(preference or {}, C(ppath, "preference"), errs)
    for f in ("podAffinity", "podAntiAffinity"):
        typed.as_map(aff.get(f), C(path, f), errs)
