"""Claiming (adopt / release) pods and ControllerRevisions, and grouping pods by node
(spec §c.3, ``ControllerRefManager.ClaimObject`` and ``getNodesToDaemonPods``). Pure: decides.

The pure planner cannot call the API, so adoptions and releases are returned as
:class:`PatchOwner` actions and adopted objects are treated as claimed. The executor runs the
adoption preconditions (fresh GET of the DaemonSet, object uid) and aborts the sync's creates
and deletes if any patch fails.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any, cast

from shared.daemonset import dsutil
from shared.daemonset.types import PatchOwner
from shared.model import labels, meta, podutil

Obj = dict[str, Any]


def claim(ds: Obj, objects: Iterable[Obj], kind: str = "Pod") -> tuple[list[Obj], list[PatchOwner]]:
    """Claim ``objects`` (all of ``kind`` in the DaemonSet's namespace) for ``ds``.

    * owned by another controller → ignored;
    * owned by ``ds`` and matching the selector → claimed (even if either is being deleted);
    * owned by ``ds`` but not matching → released, unless ``ds`` is being deleted;
    * orphan → adopted (and claimed) when ``ds`` is not being deleted, the selector matches,
      the object is not being deleted and is in the DaemonSet's namespace.

    Returns (claimed objects in input order, PatchOwner actions in input order).
    """
    ds_uid = meta.uid(ds)
    ds_namespace = meta.namespace(ds)
    ds_deleting = meta.is_being_deleted(ds)
    matches = selector_matcher(dsutil.selector(ds))
    claimed: list[Obj] = []
    actions: list[PatchOwner] = []
    adopt_ref: meta.OwnerReference | None = None
    for obj in objects:
        md = obj.get("metadata")  # meta.metadata, inlined: this runs for every pod
        if not isinstance(md, dict):
            md = {}
        obj_labels = md.get("labels")
        if not isinstance(obj_labels, dict):
            obj_labels = {}
        ref = _controller_ref(md)
        if ref is not None:
            if str(ref.get("uid") or "") != ds_uid:
                continue
            if matches(obj_labels):
                claimed.append(obj)
            elif not ds_deleting:
                actions.append(_patch(kind, obj, adopt=False, owner_ref=cast(meta.OwnerReference, dict(ref))))
            continue
        if ds_deleting or not matches(obj_labels):
            continue
        if md.get("deletionTimestamp"):
            continue
        if ds_namespace and meta.namespace(obj) != ds_namespace:
            continue
        if adopt_ref is None:
            adopt_ref = meta.controller_owner_ref(ds)
        actions.append(_patch(kind, obj, adopt=True, owner_ref=adopt_ref.copy()))
        claimed.append(obj)
    return claimed, actions


OWNED, MAYBE, FOREIGN = "owned", "maybe", "foreign"


def sorter(ds: Obj) -> Callable[[Obj], str]:
    """Which of :func:`claim`'s cases an object is in, one object at a time: ``OWNED`` (its
    controller ref has the DaemonSet's uid and its labels match the selector: claimed as
    is), ``FOREIGN`` (another controller's: ignored), else ``MAYBE`` (no controller ref, or
    the DaemonSet's with labels that do not match: adopted, released or ignored as
    :func:`claim` decides). Claiming only the ``MAYBE`` objects and taking the ``OWNED`` ones
    as claimed gives what claiming all of them does. Decides."""
    ds_uid = meta.uid(ds)
    matches = selector_matcher(dsutil.selector(ds))

    def sort(obj: Obj) -> str:
        md = obj.get("metadata")
        if not isinstance(md, dict):
            md = {}
        ref = _controller_ref(md)
        if ref is not None and str(ref.get("uid") or "") != ds_uid:
            return FOREIGN
        obj_labels = md.get("labels")
        if ref is not None and matches(obj_labels if isinstance(obj_labels, dict) else {}):
            return OWNED
        return MAYBE

    return sort


def _controller_ref(md: Obj) -> Obj | None:
    """``meta.controller_ref`` on an object's metadata."""
    refs = md.get("ownerReferences")
    if not refs or not isinstance(refs, list):
        return None
    for ref in refs:
        if isinstance(ref, dict) and ref.get("controller") is True:
            return ref
    return None


def selector_matcher(selector: Any) -> Callable[[dict[str, str]], bool]:
    """``labels.selector_matches`` with ``selector`` bound; matchLabels-only selectors (the
    usual DaemonSet selector) take a fast path."""
    if isinstance(selector, dict) and not selector.get("matchExpressions"):
        match_labels = selector.get("matchLabels") or {}
        if isinstance(match_labels, dict):
            wanted = tuple(match_labels.items())

            def match(obj_labels: dict[str, str]) -> bool:
                for k, v in wanted:
                    if obj_labels.get(k) != v:
                        return False
                return True

            return match

    def general(obj_labels: dict[str, str]) -> bool:
        return labels.selector_matches(selector, obj_labels)

    return general


def owner_change(obj: Obj, claim: PatchOwner, ds_uid: str) -> Obj:
    """``obj`` as ``claim`` leaves it (a copy; ``obj`` is not changed): every reference to
    the DaemonSet ``ds_uid`` dropped, and on an adoption its controller ref appended; no
    ``ownerReferences`` at all when none is left (upstream's patch with ``$patch: delete``)."""
    new = copy.deepcopy(obj)
    refs = [r for r in meta.owner_references(new) if r.get("uid") != ds_uid]
    if claim.adopt:
        refs.append(claim.owner_ref.copy())
    if refs:
        new["metadata"]["ownerReferences"] = refs
    else:
        new["metadata"].pop("ownerReferences", None)
    return new


def _patch(kind: str, obj: Obj, *, adopt: bool, owner_ref: meta.OwnerReference) -> PatchOwner:
    return PatchOwner(
        kind=kind,
        namespace=meta.namespace(obj),
        name=meta.name(obj),
        uid=meta.uid(obj),
        adopt=adopt,
        owner_ref=owner_ref,
    )


def nodes_to_daemon_pods(
    claimed: Iterable[Obj], include_deleted_terminal: bool = False
) -> dict[str, list[Obj]]:
    """Group claimed pods by target node (``getNodesToDaemonPods`` after the claim).

    Terminal pods with a deletionTimestamp are dropped unless ``include_deleted_terminal``;
    pods with no determinable node are skipped. Input order is kept within each node.
    """
    result: dict[str, list[Obj]] = {}
    for pod in claimed:
        if (
            not include_deleted_terminal
            and meta.metadata(pod).get("deletionTimestamp")
            and podutil.is_terminal(pod)
        ):
            continue
        node = podutil.target_node(pod)
        if node is None:
            continue
        bucket = result.get(node)
        if bucket is None:
            result[node] = [pod]
        else:
            bucket.append(pod)
    return result
