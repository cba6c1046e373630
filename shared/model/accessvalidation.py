"""Validation of the kinds of access control: ServiceAccount (``ValidateServiceAccount``) and
the RBAC group's Role, ClusterRole, RoleBinding and ClusterRoleBinding (upstream's
pkg/apis/rbac/validation), with Kubernetes' rendered messages. Pure.

daemonbus keeps these objects so that a bundle applies whole and ``kubectl get`` shows what
it holds; they grant nothing (its users' roles are its token file's, and its pods call no
API). Every function returns a list of error strings (empty when valid) and never raises.
"""

from __future__ import annotations

from typing import Any

from shared.model import fielderr, kinds, metavalidation, syntax, typed

C = fielderr.child
SERVICE_ACCOUNT_KIND, USER_KIND, GROUP_KIND = "ServiceAccount", "User", "Group"
SUBJECT_KINDS = (SERVICE_ACCOUNT_KIND, USER_KIND, GROUP_KIND)


def _object_reference(value: Any, path: str, errs: list[str]) -> None:
    ref = typed.as_map(value, path, errs) or {}
    for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath"):
        typed.as_str(ref.get(f), C(path, f), errs)


def validate_service_account(obj: Any, old: Any = None) -> list[str]:
    """``ValidateServiceAccount`` (and with ``old``, its update): metadata named as a DNS
    subdomain; the types of ``secrets``, ``imagePullSecrets`` and
    ``automountServiceAccountToken``. Decides only."""
    if not isinstance(obj, dict):
        return fielderr.not_an_object(obj)
    errs: list[str] = []
    metavalidation.validate_update_of(obj, old, errs)
    metavalidation.validate_namespaced_meta(obj.get("metadata"), "metadata", errs)
    for i, ref in enumerate(typed.as_list(obj.get("secrets"), "secrets", errs) or []):
        _object_reference(ref, fielderr.index("secrets", i), errs)
    for i, ref in typed.maps(obj.get("imagePullSecrets"), "imagePullSecrets", errs):
        typed.as_str(ref.get("name"), C(fielderr.index("imagePullSecrets", i), "name"), errs)
    typed.as_bool(obj.get("automountServiceAccountToken"), "automountServiceAccountToken", errs)
    return errs


# ---- RBAC ---------------------------------------------------------------------------------


def _meta(obj: dict[Any, Any], old: Any, namespaced: bool, errs: list[str]) -> None:
    """A role's or binding's metadata, named by the minimal rule (a path segment)."""
    metavalidation.validate_object_meta(obj.get("metadata"), "metadata", errs,
                                        namespaced=namespaced,
                                        name_fn=syntax.is_valid_path_segment_name)
    metavalidation.validate_update_of(obj, old, errs)


def _policy_rule(value: Any, namespaced: bool, path: str, errs: list[str]) -> None:
    """``validatePolicyRule``: verbs; non-resource URLs alone, and only cluster-wide; or
    at least one API group and one resource (resource names for one resource only)."""
    rule = typed.as_map(value, path, errs) or {}
    lists = {f: typed.as_str_list(rule.get(f), C(path, f), errs) or []
             for f in ("verbs", "apiGroups", "resources", "resourceNames", "nonResourceURLs")}
    if not lists["verbs"]:
        errs.append(fielderr.required(C(path, "verbs"), "verbs must contain at least one value"))
    urls = lists["nonResourceURLs"]
    if urls:
        literal = fielderr.str_list_literal(urls)
        if namespaced:
            errs.append(fielderr.invalid(C(path, "nonResourceURLs"), literal,
                                         "namespaced rules cannot apply to non-resource URLs"))
        if lists["apiGroups"] or lists["resources"] or lists["resourceNames"]:
            errs.append(fielderr.invalid(
                C(path, "nonResourceURLs"), literal,
                "rules cannot apply to both regular resources and non-resource URLs"))
        return
    if not lists["apiGroups"]:
        errs.append(fielderr.required(C(path, "apiGroups"),
                                      "resource rules must supply at least one api group"))
    if not lists["resources"]:
        errs.append(fielderr.required(C(path, "resources"),
                                      "resource rules must supply at least one resource"))
    if lists["resourceNames"] and len(lists["resources"]) > 1:
        errs.append(fielderr.required(C(path, "resourceNames"),
                                      "resource names cannot apply to multiple resources"))


def _rules(obj: dict[Any, Any], namespaced: bool, errs: list[str]) -> None:
    for i, rule in enumerate(typed.as_list(obj.get("rules"), "rules", errs) or []):
        _policy_rule(rule, namespaced, fielderr.index("rules", i), errs)


def validate_role(obj: Any, old: Any = None) -> list[str]:
    """``ValidateRole`` (and with ``old``, ``ValidateRoleUpdate``). Decides only."""
    if not isinstance(obj, dict):
        return fielderr.not_an_object(obj)
    errs: list[str] = []
    _meta(obj, old, True, errs)
    _rules(obj, True, errs)
    return errs


def validate_cluster_role(obj: Any, old: Any = None) -> list[str]:
    """``ValidateClusterRole`` (and its update): its rules, and an ``aggregationRule``'s
    selectors (at least one). Decides only."""
    if not isinstance(obj, dict):
        return fielderr.not_an_object(obj)
    errs: list[str] = []
    _meta(obj, old, False, errs)
    _rules(obj, False, errs)
    aggregation = typed.as_map(obj.get("aggregationRule"), "aggregationRule", errs)
    if aggregation is not None:
        path = C("aggregationRule", "clusterRoleSelectors")
        selectors = typed.as_list(aggregation.get("clusterRoleSelectors"), path, errs) or []
        if not selectors:
            errs.append(fielderr.required(
                path, "at least one clusterRoleSelector required if aggregationRule is non-nil"))
        for i, selector in enumerate(selectors):
            metavalidation.validate_label_selector(selector, fielderr.index(path, i), errs)
    return errs


def _role_ref(value: Any, allowed: tuple[str, ...], errs: list[str]) -> dict[Any, Any]:
    ref = typed.as_map(value, "roleRef", errs) or {}
    group = typed.as_str(ref.get("apiGroup"), C("roleRef", "apiGroup"), errs) or ""
    if group != kinds.RBAC_GROUP:
        errs.append(fielderr.not_supported(C("roleRef", "apiGroup"), group,
                                           [kinds.RBAC_GROUP]))
    kind = typed.as_str(ref.get("kind"), C("roleRef", "kind"), errs) or ""
    if kind not in allowed:
        errs.append(fielderr.not_supported(C("roleRef", "kind"), kind, allowed))
    name = typed.as_str(ref.get("name"), C("roleRef", "name"), errs) or ""
    if not name:
        errs.append(fielderr.required(C("roleRef", "name")))
    errs.extend(fielderr.invalid(C("roleRef", "name"), name, m)
                for m in syntax.is_valid_path_segment_name(name) if name)
    return ref


def _subject(value: Any, namespaced: bool, path: str, errs: list[str]) -> None:
    """``validateRoleBindingSubject``."""
    subject = typed.as_map(value, path, errs) or {}
    name = typed.as_str(subject.get("name"), C(path, "name"), errs) or ""
    group = typed.as_str(subject.get("apiGroup"), C(path, "apiGroup"), errs) or ""
    namespace = typed.as_str(subject.get("namespace"), C(path, "namespace"), errs) or ""
    kind = typed.as_str(subject.get("kind"), C(path, "kind"), errs) or ""
    if not name:
        errs.append(fielderr.required(C(path, "name")))
    if kind == SERVICE_ACCOUNT_KIND:
        if name:
            errs.extend(fielderr.invalid(C(path, "name"), name, m)
                        for m in syntax.name_is_dns_subdomain(name))
        if group:
            errs.append(fielderr.not_supported(C(path, "apiGroup"), group, [""]))
        if not namespaced and not namespace:
            errs.append(fielderr.required(C(path, "namespace")))
    elif kind in (USER_KIND, GROUP_KIND):
        if not name:
            errs.append(fielderr.invalid(C(path, "name"), name,
                                         f"{kind.lower()} name cannot be empty"))
        if group != kinds.RBAC_GROUP:
            errs.append(fielderr.not_supported(C(path, "apiGroup"), group, [kinds.RBAC_GROUP]))
    else:
        errs.append(fielderr.not_supported(C(path, "kind"), kind, SUBJECT_KINDS))


def _ref_literal(ref: dict[Any, Any]) -> fielderr.GoLiteral:
    """``%#v`` of a ``rbac.RoleRef``, as upstream's "cannot change roleRef" shows it."""
    parts = ", ".join(f"{go}:{fielderr.go_quote(str(ref.get(f) or ''))}"
                      for go, f in (("APIGroup", "apiGroup"), ("Kind", "kind"), ("Name", "name")))
    return fielderr.GoLiteral("rbac.RoleRef{" + parts + "}")


def _binding(obj: Any, old: Any, namespaced: bool) -> list[str]:
    if not isinstance(obj, dict):
        return fielderr.not_an_object(obj)
    errs: list[str] = []
    metavalidation.validate_object_meta(obj.get("metadata"), "metadata", errs,
                                        namespaced=namespaced,
                                        name_fn=syntax.is_valid_path_segment_name)
    ref = _role_ref(obj.get("roleRef"),
                    ("Role", "ClusterRole") if namespaced else ("ClusterRole",), errs)
    for i, subject in enumerate(typed.as_list(obj.get("subjects"), "subjects", errs) or []):
        _subject(subject, namespaced, fielderr.index("subjects", i), errs)
    metavalidation.validate_update_of(obj, old, errs)
    if isinstance(old, dict):
        old_ref = old.get("roleRef")
        old_ref = old_ref if isinstance(old_ref, dict) else {}
        if any((ref.get(f) or "") != (old_ref.get(f) or "")
               for f in ("apiGroup", "kind", "name")):
            errs.append(fielderr.invalid("roleRef", _ref_literal(ref), "cannot change roleRef"))
    return errs


def validate_role_binding(obj: Any, old: Any = None) -> list[str]:
    """``ValidateRoleBinding`` (and with ``old``, its update: the roleRef never changes).
    Decides only."""
    return _binding(obj, old, True)


def validate_cluster_role_binding(obj: Any, old: Any = None) -> list[str]:
    """``ValidateClusterRoleBinding`` (and its update): a ClusterRole only, and every
    ServiceAccount subject names its namespace. Decides only."""
    return _binding(obj, old, False)


VALIDATORS = {
    kinds.SERVICE_ACCOUNT.kind: validate_service_account,
    kinds.ROLE.kind: validate_role,
    kinds.CLUSTER_ROLE.kind: validate_cluster_role,
    kinds.ROLE_BINDING.kind: validate_role_binding,
    kinds.CLUSTER_ROLE_BINDING.kind: validate_cluster_role_binding,
}
