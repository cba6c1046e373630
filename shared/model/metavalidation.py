"""Validation of ObjectMeta, labels, annotations and label selectors (apimachinery). Pure.

Functions append upstream-worded field errors to ``errs`` (see :mod:`shared.model.fielderr`)
and never raise, whatever the shape of their input.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shared.model import fielderr, memo, syntax, typed

NameFn = Callable[[str, bool], list[str]]

TOTAL_ANNOTATION_SIZE_LIMIT_B = 256 * 1024
_BANNED_OWNERS = {("", "v1", "Event")}
_FINALIZER_ORPHAN = "orphan"
_FINALIZER_FOREGROUND = "foregroundDeletion"


def validate_label_name(name: str, path: str, errs: list[str]) -> None:
    """``ValidateLabelName``: a qualified name."""
    errs.extend(fielderr.invalid(path, name, m) for m in syntax.is_qualified_name(name))


@memo.by_value  # the same for every pod of a DaemonSet
def validate_labels(value: Any, path: str, errs: list[str]) -> None:
    """``ValidateLabels`` on a label map (keys qualified names, values label values)."""
    labels = typed.as_str_map(value, path, errs) or {}
    for k, v in labels.items():
        validate_label_name(k, path, errs)
        errs.extend(fielderr.invalid(path, v, m) for m in syntax.is_valid_label_value(v))


def validate_annotations(value: Any, path: str, errs: list[str]) -> None:
    """``ValidateAnnotations``: keys are qualified names (case-insensitive), total ≤ 256 KiB."""
    annotations = typed.as_str_map(value, path, errs) or {}
    for k in annotations:
        errs.extend(fielderr.invalid(path, k, m) for m in syntax.is_qualified_name(k.lower()))
    size = sum(syntax.byte_len(k) + syntax.byte_len(v) for k, v in annotations.items())
    if size > TOTAL_ANNOTATION_SIZE_LIMIT_B:
        errs.append(fielderr.too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT_B))


def _split_api_version(api_version: str) -> tuple[str, str]:
    """``schema.ParseGroupVersion`` → (group, version); a malformed value gives ("", "")."""
    parts = api_version.split("/")
    if len(parts) == 1:
        return "", parts[0]
    if len(parts) == 2:
        return parts[0], parts[1]
    return "", ""


@memo.by_value  # the same for every pod of a DaemonSet
def validate_owner_references(value: Any, path: str, errs: list[str]) -> None:
    """``ValidateOwnerReferences`` (errors use the list's path, without an index, as upstream)."""
    refs = typed.maps(value, path, errs)
    first_controller = ""
    for i, ref in refs:
        ipath = fielderr.index(path, i)
        api_version = typed.as_str(ref.get("apiVersion"), fielderr.child(ipath, "apiVersion"), errs)
        kind = typed.as_str(ref.get("kind"), fielderr.child(ipath, "kind"), errs)
        name = typed.as_str(ref.get("name"), fielderr.child(ipath, "name"), errs)
        uid = typed.as_str(ref.get("uid"), fielderr.child(ipath, "uid"), errs)
        controller = typed.as_bool(ref.get("controller"), fielderr.child(ipath, "controller"), errs)
        typed.as_bool(
            ref.get("blockOwnerDeletion"), fielderr.child(ipath, "blockOwnerDeletion"), errs
        )
        group, version = _split_api_version(api_version or "")
        if not version:
            errs.append(
                fielderr.invalid(
                    fielderr.child(path, "apiVersion"),
                    api_version or "",
                    "version must not be empty",
                )
            )
        if not kind:
            errs.append(
                fielderr.invalid(fielderr.child(path, "kind"), kind or "", "must not be empty")
            )
        if not name:
            errs.append(
                fielderr.invalid(fielderr.child(path, "name"), name or "", "must not be empty")
            )
        if not uid:
            errs.append(
                fielderr.invalid(fielderr.child(path, "uid"), uid or "", "must not be empty")
            )
        if (group, version, kind or "") in _BANNED_OWNERS:
            errs.append(
                fielderr.invalid(
                    path, ref, f"{group}/{version}, Kind={kind} is disallowed from being an owner"
                )
            )
        if controller:
            current = f"{kind or ''}/{name or ''}"
            if first_controller:
                errs.append(
                    fielderr.invalid(
                        path,
                        value,
                        "Only one reference can have Controller set to true. "
                        f'Found "true" in references for {first_controller} and {current}',
                    )
                )
            else:
                first_controller = current


def validate_finalizers(value: Any, path: str, errs: list[str]) -> None:
    """``ValidateFinalizers``: qualified names; orphan and foregroundDeletion exclusive."""
    finalizers = typed.as_str_list(value, path, errs) or []
    for f in finalizers:
        errs.extend(fielderr.invalid(path, f, m) for m in syntax.is_qualified_name(f))
    if _FINALIZER_ORPHAN in finalizers and _FINALIZER_FOREGROUND in finalizers:
        errs.append(
            fielderr.invalid(
                path,
                fielderr.str_list_literal(finalizers),
                f"finalizer {_FINALIZER_ORPHAN} and {_FINALIZER_FOREGROUND} cannot be both set",
            )
        )


def validate_object_meta(
    value: Any,
    path: str,
    errs: list[str],
    *,
    namespaced: bool,
    name_fn: NameFn = syntax.name_is_dns_subdomain,
) -> None:
    """``ValidateObjectMeta``: name (or generateName), namespace, generation, labels,
    annotations, ownerReferences, finalizers, and the types of the server-set fields."""
    md = typed.as_map(value, path, errs)
    if md is None:
        if value is not None:
            return  # wrong type: reported; nothing else to say about it
        md = {}
    generate_name = typed.as_str(md.get("generateName"), fielderr.child(path, "generateName"), errs)
    if generate_name:
        errs.extend(
            fielderr.invalid(fielderr.child(path, "generateName"), generate_name, m)
            for m in name_fn(generate_name, True)
        )
    name = typed.as_str(md.get("name"), fielderr.child(path, "name"), errs)
    if not name:
        if md.get("name") in (None, ""):  # (a wrong type is reported already)
            errs.append(
                fielderr.required(fielderr.child(path, "name"), "name or generateName is required")
            )
    else:
        errs.extend(
            fielderr.invalid(fielderr.child(path, "name"), name, m) for m in name_fn(name, False)
        )
    ns_path = fielderr.child(path, "namespace")
    namespace = typed.as_str(md.get("namespace"), ns_path, errs)
    if namespaced:
        if not namespace:
            if md.get("namespace") in (None, ""):
                errs.append(fielderr.required(ns_path))
        else:
            errs.extend(
                fielderr.invalid(ns_path, namespace, m) for m in syntax.name_is_dns_label(namespace)
            )
    elif namespace:
        errs.append(fielderr.forbidden(ns_path, "not allowed on this type"))
    generation = typed.as_int(md.get("generation"), fielderr.child(path, "generation"), errs, 64)
    if generation is not None and generation < 0:
        errs.append(
            fielderr.invalid(
                fielderr.child(path, "generation"), generation, "must be greater than or equal to 0"
            )
        )
    validate_labels(md.get("labels"), fielderr.child(path, "labels"), errs)
    validate_annotations(md.get("annotations"), fielderr.child(path, "annotations"), errs)
    validate_owner_references(
        md.get("ownerReferences"), fielderr.child(path, "ownerReferences"), errs
    )
    validate_finalizers(md.get("finalizers"), fielderr.child(path, "finalizers"), errs)
    for f in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp"):
        typed.as_str(md.get(f), fielderr.child(path, f), errs)
    typed.as_int(
        md.get("deletionGracePeriodSeconds"),
        fielderr.child(path, "deletionGracePeriodSeconds"),
        errs,
        64,
    )


# the fields of an object's metadata that are its own (each pod a DaemonSet creates has its
# own name, uid and creation time; the rest is the same in all of them): checked by
# themselves, the rest remembered by value (``_meta``)
_PER_OBJECT = ("name", "uid", "creationTimestamp", "resourceVersion")
_STAND_IN = "a"  # a valid name in the place of the object's own, in the rest's check


def validate_namespaced_meta(value: Any, path: str, errs: list[str]) -> None:
    """``validate_object_meta`` of a namespaced object named as a DNS subdomain."""
    _meta(value, path, errs, _namespaced_rest, True)


def validate_cluster_meta(value: Any, path: str, errs: list[str]) -> None:
    """``validate_object_meta`` of a cluster-scoped object named as a DNS subdomain."""
    _meta(value, path, errs, _cluster_rest, False)


def _meta(value: Any, path: str, errs: list[str], rest_of: memo.Validator,
          namespaced: bool) -> None:
    """``validate_object_meta`` of ``value``: nothing when its own fields (``_PER_OBJECT``)
    are valid and so is the rest, with a valid name in the place of its own (``rest_of``,
    remembered by value: the same in every pod of a DaemonSet's revision, and in each
    version of one object); otherwise the whole of it, for its errors in upstream's order.
    No rule of the metadata relates its name, uid or times to another field."""
    if isinstance(value, dict):
        name = value.get("name")
        if (isinstance(name, str) and name and not syntax.name_is_dns_subdomain(name)
                and isinstance(value.get("uid"), typed.TEXT)
                and isinstance(value.get("creationTimestamp"), typed.TEXT)
                and isinstance(value.get("resourceVersion"), typed.TEXT)):
            rest = {k: v for k, v in value.items() if k not in _PER_OBJECT}
            rest["name"] = _STAND_IN
            found: list[str] = []
            rest_of(rest, path, found)
            if not found:
                return
    validate_object_meta(value, path, errs, namespaced=namespaced)


@memo.by_value  # the same in every pod of a DaemonSet's revision (``_meta``)
def _namespaced_rest(value: Any, path: str, errs: list[str]) -> None:
    validate_object_meta(value, path, errs, namespaced=True)


@memo.by_value  # the same in every version of a node (``_meta``)
def _cluster_rest(value: Any, path: str, errs: list[str]) -> None:
    validate_object_meta(value, path, errs, namespaced=False)


def validate_update_of(obj: Any, old: Any, errs: list[str]) -> None:
    """:func:`validate_object_meta_update` of two objects' metadata, when ``old`` is one (an
    update's validation; a create's has none)."""
    if isinstance(obj, dict) and isinstance(old, dict):
        validate_object_meta_update(obj.get("metadata"), old.get("metadata"), "metadata", errs)


def validate_object_meta_update(new: Any, old: Any, path: str, errs: list[str]) -> None:
    """The parts of ``ValidateObjectMetaUpdate`` a client controls: name and namespace are
    immutable; uid and creationTimestamp too, when the new object carries them (the store
    copies them from the old object otherwise); no finalizer is added to an object being
    deleted (``ValidateNoNewFinalizers``: the deletion's own, foreground or orphan, are the
    server's, not an update's)."""
    new_md = new if isinstance(new, dict) else {}
    old_md = old if isinstance(old, dict) else {}
    if old_md.get("deletionTimestamp"):
        fins = new_md.get("finalizers")
        added = sorted(set(fins if isinstance(fins, list) else []) -
                       set(old_md.get("finalizers") or []))
        if added:
            errs.append(fielderr.forbidden(
                fielderr.child(path, "finalizers"), "no new finalizers can be added if the "
                f"object is being deleted, found new finalizers "
                f"{fielderr.str_list_literal([str(f) for f in added])}"))
    for f, always in (
        ("name", True),
        ("namespace", True),
        ("uid", False),
        ("creationTimestamp", False),
    ):
        nv, ov = new_md.get(f), old_md.get(f)
        if not always and not nv:
            continue
        if (nv or "") != (ov or ""):
            errs.append(fielderr.invalid(fielderr.child(path, f), nv or "", "field is immutable"))


# ---- label selectors ---------------------------------------------------------------------


def label_selector_literal(selector: Any) -> fielderr.GoLiteral:
    """A LabelSelector as Go's ``%#v`` prints the ``v1.LabelSelector`` struct, e.g.
    ``v1.LabelSelector{MatchLabels:map[string]string{"a":"b"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}``.
    """
    sel = selector if isinstance(selector, dict) else {}
    ml = sel.get("matchLabels")
    ml_text = (
        fielderr.str_map_literal({str(k): str(v) for k, v in ml.items()})
        if isinstance(ml, dict)
        else fielderr.str_map_literal(None)
    )
    exprs = sel.get("matchExpressions")
    if isinstance(exprs, list):
        items = []
        for e in exprs:
            e = e if isinstance(e, dict) else {}
            vals = e.get("values")
            vals_text = fielderr.str_list_literal(
                [str(v) for v in vals] if isinstance(vals, list) else None
            )
            items.append(
                "v1.LabelSelectorRequirement{"
                f"Key:{fielderr.go_quote(str(e.get('key') or ''))}, "
                f"Operator:{fielderr.go_quote(str(e.get('operator') or ''))}, "
                f"Values:{vals_text}}}"
            )
        exprs_text = "[]v1.LabelSelectorRequirement{" + ", ".join(items) + "}"
    else:
        exprs_text = "[]v1.LabelSelectorRequirement(nil)"
    return fielderr.GoLiteral(
        f"v1.LabelSelector{{MatchLabels:{ml_text}, MatchExpressions:{exprs_text}}}"
    )


def validate_label_selector(value: Any, path: str, errs: list[str]) -> None:
    """``ValidateLabelSelector``: matchLabels as labels; each requirement's operator, values
    and key (values for In/NotIn required, for Exists/DoesNotExist forbidden)."""
    sel = typed.as_map(value, path, errs)
    if sel is None:
        return
    validate_labels(sel.get("matchLabels"), fielderr.child(path, "matchLabels"), errs)
    for i, req in typed.maps(
        sel.get("matchExpressions"), fielderr.child(path, "matchExpressions"), errs
    ):
        rpath = fielderr.index(fielderr.child(path, "matchExpressions"), i)
        vpath = fielderr.child(rpath, "values")
        op = typed.as_str(req.get("operator"), fielderr.child(rpath, "operator"), errs)
        values = typed.as_str_list(req.get("values"), vpath, errs) or []
        if op in ("In", "NotIn"):
            if not values:
                errs.append(
                    fielderr.required(vpath, "must be specified when `operator` is 'In' or 'NotIn'")
                )
        elif op in ("Exists", "DoesNotExist"):
            if values:
                errs.append(
                    fielderr.forbidden(
                        vpath, "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
                    )
                )
        elif op is not None or req.get("operator") is None:
            errs.append(
                fielderr.invalid(
                    fielderr.child(rpath, "operator"), op or "", "not a valid selector operator"
                )
            )
        key = typed.as_str(req.get("key"), fielderr.child(rpath, "key"), errs)
        if key is not None or req.get("key") is None:
            validate_label_name(key or "", fielderr.child(rpath, "key"), errs)
        for j, v in enumerate(values):
            errs.extend(
                fielderr.invalid(fielderr.index(vpath, j), v, m)
                for m in syntax.is_valid_label_value(v)
            )


def normalized_selector(selector: Any) -> Any:
    """A selector with nil and empty maps/lists made equal, as ``Semantic.DeepEqual`` treats
    them (used for the immutability check)."""
    if not isinstance(selector, dict):
        return selector
    exprs = selector.get("matchExpressions") or []
    if isinstance(exprs, list):
        exprs = [
            {**e, "values": e.get("values") or []} if isinstance(e, dict) else e for e in exprs
        ]
    return {"matchLabels": selector.get("matchLabels") or {}, "matchExpressions": exprs}
