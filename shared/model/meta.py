"""Accessors for Kubernetes object metadata on plain dicts, and RFC 3339 timestamps. Pure.

Objects stay plain dicts; :class:`ObjectMeta` and :class:`OwnerReference` name the fields
the accessors read (upstream's ``metav1.ObjectMeta`` and ``metav1.OwnerReference``) for
the type checker only: nothing is converted or checked at run time (``shape_errors`` in
``shared.model.validation`` checks a stored object's shape).
"""

import functools
from datetime import UTC, datetime
from typing import Any, TypedDict, cast

Obj = dict[str, Any]

# apimachinery's utilrand alphabet (``String``, ``SafeEncodeString``) and its names'
# SimpleNameGenerator: generateName cut to 58 characters, then 5 of the alphabet
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
NAME_RANDOM_LENGTH = 5
MAX_GENERATED_NAME_LENGTH = 63 - NAME_RANDOM_LENGTH


def generated_name(base: str, suffix: str) -> str:
    """A name generated from ``base`` (a generateName) and a random ``suffix``."""
    return base[:MAX_GENERATED_NAME_LENGTH] + suffix


class OwnerReference(TypedDict, total=False):
    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool
    blockOwnerDeletion: bool


class ObjectMeta(TypedDict, total=False):
    name: str
    generateName: str
    namespace: str
    uid: str
    resourceVersion: str
    generation: int
    creationTimestamp: str
    deletionTimestamp: str
    deletionGracePeriodSeconds: int
    labels: dict[str, str]
    annotations: dict[str, str]
    ownerReferences: list[OwnerReference]
    finalizers: list[str]
    managedFields: list[Obj]


def metadata(obj: Obj) -> ObjectMeta:
    md = obj.get("metadata")
    return cast(ObjectMeta, md) if isinstance(md, dict) else {}


# The accessors read ``metadata`` themselves rather than call :func:`metadata`: the planner
# calls them for every pod and node, and a call costs as much as the read.


def name(obj: Obj) -> str:
    md = obj.get("metadata")
    return str(md.get("name") or "") if isinstance(md, dict) else ""


def namespace(obj: Obj) -> str:
    md = obj.get("metadata")
    return str(md.get("namespace") or "") if isinstance(md, dict) else ""


def key(obj: Obj) -> str:
    """The store/queue key: "namespace/name" ("/name" style is never used: cluster-scoped
    objects have an empty namespace, so their key is "/name")."""
    return f"{namespace(obj)}/{name(obj)}"


def uid(obj: Obj) -> str:
    md = obj.get("metadata")
    return str(md.get("uid") or "") if isinstance(md, dict) else ""


def resource_version(obj: Obj) -> str:
    return str(metadata(obj).get("resourceVersion") or "")


def labels(obj: Obj) -> dict[str, str]:
    md = obj.get("metadata")
    lb = md.get("labels") if isinstance(md, dict) else None
    return lb if isinstance(lb, dict) else {}


def annotations(obj: Obj) -> dict[str, str]:
    an = metadata(obj).get("annotations")
    return an if isinstance(an, dict) else {}


def owner_references(obj: Obj) -> list[OwnerReference]:
    refs = metadata(obj).get("ownerReferences")
    return [r for r in refs if isinstance(r, dict)] if isinstance(refs, list) else []


def controller_ref(obj: Obj) -> OwnerReference | None:
    """The first ownerReference with ``controller: true``, else None."""
    for ref in owner_references(obj):
        if ref.get("controller") is True:
            return ref
    return None


def deletion_timestamp(obj: Obj) -> str | None:
    md = obj.get("metadata")
    ts = md.get("deletionTimestamp") if isinstance(md, dict) else None
    return str(ts) if ts else None


def is_being_deleted(obj: Obj) -> bool:
    md = obj.get("metadata")
    return isinstance(md, dict) and bool(md.get("deletionTimestamp"))


def finalizers(obj: Obj) -> list[str]:
    f = metadata(obj).get("finalizers")
    return [str(x) for x in f] if isinstance(f, list) else []


def creation_timestamp(obj: Obj) -> str:
    return str(metadata(obj).get("creationTimestamp") or "")


def format_time(epoch: float) -> str:
    """Epoch seconds → RFC 3339 in UTC with second precision, as Kubernetes prints it."""
    return _format_second(int(epoch))


@functools.lru_cache(maxsize=256)  # a burst stamps thousands of objects within one second
def _format_second(second: int) -> str:
    return datetime.fromtimestamp(second, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str | None) -> float | None:
    """RFC 3339 → epoch seconds; None for empty or unparsable values."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def controller_owner_ref(owner: Obj, kind: str = "DaemonSet", api_version: str = "apps/v1"
                         ) -> OwnerReference:
    """The controller ownerReference pointing at ``owner`` (blockOwnerDeletion set)."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name(owner),
        "uid": uid(owner),
        "controller": True,
        "blockOwnerDeletion": True,
    }
