"""What a user's update may change in a Pod's spec (``ValidatePodUpdate``,
pkg/apis/core/validation/validation.go, as of Kubernetes 1.32). Pure.

A pod's spec is fixed once it is created, but for a few fields: its containers' and init
containers' images (not to empty), ``activeDeadlineSeconds`` (set when unset, or lowered),
tolerations (only added to; an existing one's ``tolerationSeconds`` may change),
``schedulingGates`` (only removed), ``terminationGracePeriodSeconds`` (to 1 when it was
negative) and, while the pod is gated, additions to its ``nodeSelector``. Anything else, a
``nodeName`` above all, is refused with upstream's message and a diff of the specs.

The rule is that of a user's update of the main resource (the registry's ValidateUpdate):
status writes and the node agent's binding (``spec.nodeName``) go through another path and
are not checked here. Ephemeral containers are not among what it may change: only the
``pods/ephemeralcontainers`` subresource adds them, under its own rule
(:func:`validate_ephemeral_update`: added, never removed nor changed). Functions append
to ``errs`` and never raise; they expect defaulted specs, as the API server holds both the
stored object and the request's.
"""

from __future__ import annotations

import copy
import difflib
import json
from typing import Any

from shared.model import defaults, fielderr, syntax, typed

C = fielderr.child

UPDATABLE_FIELDS = (
    "`spec.containers[*].image`",
    "`spec.initContainers[*].image`",
    "`spec.activeDeadlineSeconds`",
    "`spec.tolerations` (only additions to existing tolerations)",
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
)
"""``updatablePodSpecFieldsNoResources``: what the Forbidden message names (1.32, without
in-place resize, an alpha feature there)."""

FORBIDDEN_PREFIX = "pod updates may not change fields other than " + ",".join(UPDATABLE_FIELDS)


def _list(spec: dict[Any, Any], name: str) -> list[Any]:
    value = spec.get(name)
    return value if isinstance(value, list) else []


def _container_updates(new: list[Any], old: list[Any], path: str, errs: list[str]) -> bool:
    """``ValidateContainerUpdates``: as many containers as before, each with an image
    (no surrounding spaces). False: stop here (containers were added or removed)."""
    if len(new) != len(old):
        errs.append(fielderr.forbidden(path, "pod updates may not add or remove containers"))
        return False
    for i, ctr in enumerate(new):
        image = ctr.get("image") if isinstance(ctr, dict) else None
        ipath = C(fielderr.index(path, i), "image")
        if not isinstance(image, str):
            continue  # a wrong type: reported by the spec's validation
        if not image:
            required = fielderr.required(ipath)
            if required not in errs:  # upstream's aggregate lists one error once
                errs.append(required)
        if image.strip() != image:
            errs.append(fielderr.invalid(ipath, image,
                                         "must not have leading or trailing whitespace"))
    return True


def _deadline_update(new: Any, old: Any, path: str, errs: list[str]) -> bool:
    """``activeDeadlineSeconds``: set when unset, or lowered; never raised nor unset.
    False: stop here (upstream returns at once)."""
    if new is not None:
        if not typed.is_int(new):
            return True  # a wrong type: reported by the spec's validation
        if not 0 <= new <= syntax.MAX_INT32:
            errs.append(fielderr.invalid(path, new, syntax.inclusive_range_error(
                0, syntax.MAX_INT32)))
            return False
        if typed.is_int(old) and old < new:
            errs.append(fielderr.invalid(path, new, "must be less than or equal to previous value"))
            return False
    elif old is not None:
        errs.append(fielderr.invalid(path, None,
                                     "must not update from a positive integer to nil value"))
    return True


def _only_added_tolerations(new: list[Any], old: list[Any], path: str, errs: list[str]) -> None:
    """``validateOnlyAddedTolerations``: every old toleration is still there (its
    ``tolerationSeconds`` may differ)."""
    def bare(t: Any) -> Any:
        return _semantic({k: v for k, v in t.items() if k != "tolerationSeconds"}) \
            if isinstance(t, dict) else t
    kept = [bare(t) for t in new]
    for t in old:
        if bare(t) not in kept:
            errs.append(fielderr.forbidden(
                path, "existing toleration can not be modified except its tolerationSeconds"))
            return


def _only_deleted_gates(new: list[Any], old: list[Any], path: str, errs: list[str]) -> None:
    """``validateOnlyDeletedSchedulingGates``: no gate the pod did not have."""
    old_names = {g.get("name") for g in old if isinstance(g, dict)}
    added: dict[Any, int] = {}
    for i, g in enumerate(new):
        name = g.get("name") if isinstance(g, dict) else None
        if name not in old_names:
            added[name] = i
    for name, i in added.items():
        errs.append(fielderr.forbidden(
            C(fielderr.index(path, i), "name"),
            f"only deletion is allowed, but found new scheduling gate '{name}'"))


def _node_selector_additions(new: Any, old: Any, path: str, errs: list[str]) -> None:
    """``validateNodeSelectorMutation`` (a gated pod): the old entries all kept as they were."""
    new_map = new if isinstance(new, dict) else {}
    for k, v in (old if isinstance(old, dict) else {}).items():
        if new_map.get(k) != v:
            errs.append(fielderr.invalid(
                path, fielderr.str_map_literal(new_map) if new is not None else None,
                "only additions to spec.nodeSelector are allowed (no mutations or deletions)"))
            return


def _semantic(value: Any) -> Any:
    """``value`` as ``apiequality.Semantic.DeepEqual`` compares it: an absent, null, empty
    list or empty map field is no field (Go's nil and empty are equal there)."""
    if isinstance(value, dict):
        out = {k: _semantic(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in (None, [], {}, "")}
    if isinstance(value, list):
        return [_semantic(v) for v in value]
    return value


def _munged(new: dict[Any, Any], old: dict[Any, Any]) -> dict[Any, Any]:
    """``new`` with what an update may change set back to ``old``'s (upstream's
    ``mungedPodSpec``): what is left different is what may not change."""
    munged = copy.deepcopy(new)
    for name in ("containers", "initContainers"):
        ctrs, before = _list(munged, name), _list(old, name)
        for ctr, was in zip(ctrs, before, strict=False):
            if isinstance(ctr, dict) and isinstance(was, dict):
                if "image" in was:
                    ctr["image"] = was["image"]
                else:
                    ctr.pop("image", None)
    for name in ("activeDeadlineSeconds", "schedulingGates", "tolerations"):
        if name in old:
            munged[name] = old[name]
        else:
            munged.pop(name, None)
    grace_was: Any = old.get("terminationGracePeriodSeconds")
    if typed.is_int(grace_was) and grace_was < 0 \
            and munged.get("terminationGracePeriodSeconds") == 1:
        munged["terminationGracePeriodSeconds"] = grace_was
    if _list(old, "schedulingGates") and "nodeSelector" in munged | old:
        munged["nodeSelector"] = old.get("nodeSelector")  # checked by itself
        if munged["nodeSelector"] is None:
            del munged["nodeSelector"]
    return munged


def spec_diff(old: Any, new: Any) -> str:
    """A readable diff of two specs (upstream prints ``cmp.Diff(oldPod.Spec, mungedPodSpec)``):
    the lines of their JSON that differ, ``-`` for the old, ``+`` for the new, with a line of
    context; ``...`` where identical lines are left out."""
    def lines(v: Any) -> list[str]:
        return json.dumps(v, indent=2, sort_keys=True, default=str).splitlines()
    diff = difflib.unified_diff(lines(old), lines(new), lineterm="", n=1)
    return "\n".join("  ..." if line.startswith("@@") else line for line in diff
                     if not line.startswith(("---", "+++")))


def validate_spec_update(new: Any, old: Any, path: str, errs: list[str]) -> None:
    """The spec rules of ``ValidatePodUpdate`` for ``new`` over ``old`` (both a pod's
    defaulted spec), in upstream's order. Decides only."""
    if not isinstance(new, dict) or not isinstance(old, dict):
        return  # a wrong type: reported by the spec's validation
    for name in ("containers", "initContainers"):
        if not _container_updates(_list(new, name), _list(old, name), C(path, name), errs):
            return
    if not _deadline_update(new.get("activeDeadlineSeconds"), old.get("activeDeadlineSeconds"),
                            C(path, "activeDeadlineSeconds"), errs):
        return
    _only_added_tolerations(_list(new, "tolerations"), _list(old, "tolerations"),
                            C(path, "tolerations"), errs)
    _only_deleted_gates(_list(new, "schedulingGates"), _list(old, "schedulingGates"),
                        C(path, "schedulingGates"), errs)
    if _semantic(new) == _semantic(old):
        return
    if _list(old, "schedulingGates") and \
            _semantic(new.get("nodeSelector")) != _semantic(old.get("nodeSelector")):
        _node_selector_additions(new.get("nodeSelector"), old.get("nodeSelector"),
                                 C(path, "nodeSelector"), errs)
    munged = _munged(new, old)
    if _semantic(munged) != _semantic(old):
        errs.append(fielderr.forbidden(path, FORBIDDEN_PREFIX + "\n" + spec_diff(old, munged)))


EPHEMERAL_PATH = C("spec", "ephemeralContainers")


def validate_ephemeral_update(new: Any, old: Any, errs: list[str]) -> None:
    """The rule of ``ValidatePodEphemeralContainersUpdate`` (the ``pods/ephemeralcontainers``
    subresource) for ``new`` over ``old``, both a pod's spec: ephemeral containers may only
    be added; each of ``old``'s must still be in ``new`` (found by name: a patch need not
    keep their order) and unchanged, the two compared defaulted (``defaults``), with a diff
    of them when they differ. The rest of the pod (its metadata and spec validation, what
    else changed) is the caller's. Decides only."""
    if not isinstance(new, dict) or not isinstance(old, dict):
        return  # a wrong type: reported by the spec's validation
    found = {ctr.get("name") or "": ctr for ctr in _list(new, "ephemeralContainers")
             if isinstance(ctr, dict)}
    for was in _list(old, "ephemeralContainers"):
        name = (was.get("name") or "") if isinstance(was, dict) else None
        if not isinstance(name, str):
            continue  # a wrong type: reported by the spec's validation
        if name not in found:
            errs.append(fielderr.forbidden(EPHEMERAL_PATH, "existing ephemeral containers "
                                           f"{fielderr.go_quote(name)} may not be removed\n"))
            continue
        before, after = defaults.default_container(was), defaults.default_container(found[name])
        if _semantic(before) != _semantic(after):
            errs.append(fielderr.forbidden(
                EPHEMERAL_PATH, f"existing ephemeral containers {fielderr.go_quote(name)} may "
                f"not be changed\n{spec_diff(before, after)}"))
