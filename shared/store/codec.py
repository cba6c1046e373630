"""Encoding of everything that crosses a process boundary: msgpack with a schema version.

Log entries are Redis stream entries with these fields (all bytes):

=====  ==============================================================================
field  meaning
=====  ==============================================================================
v      schema version (``SCHEMA_VERSION``)
t      ADDED | MODIFIED | DELETED | DECISION
k      kind (Node, Pod, DaemonSet, ControllerRevision, Event)
n      object key "<namespace>/<name>" (empty namespace for cluster-scoped kinds)
o      msgpack of the object (without metadata.resourceVersion: the entry id is it),
       or of the decision record for DECISION entries
u      optional: the user who made the write (through the API server)
=====  ==============================================================================
"""

from __future__ import annotations

import datetime as _dt
import logging
from dataclasses import dataclass
from typing import Any

import msgpack

from shared.model import typed
from shared.model import validation as model_validation
from shared.store.errors import CorruptEntryError, MalformedObjectError

SCHEMA_VERSION = 1
ENTRY_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "DECISION"})
KINDS = frozenset({"Node", "Pod", "DaemonSet", "ControllerRevision", "Event"})

Obj = dict[str, Any]
log = logging.getLogger(__name__)


def pack(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)  # type: ignore[no-any-return]


def unpack(data: bytes) -> Any:
    """Decode msgpack; never executes anything (no ext hooks, no pickle)."""
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=True, max_bin_len=64 << 20)
    except Exception as err:
        raise CorruptEntryError(f"undecodable msgpack payload: {err}") from err


def plain(value: Any) -> Any:
    """Normalise a parsed manifest to JSON-shaped data (YAML dates → RFC 3339 strings)."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.UTC)
        return value.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, _dt.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def pack_object(obj: Obj) -> bytes:
    """Pack an object for the view and the log, leaving out its resourceVersion."""
    md = obj.get("metadata")
    if isinstance(md, dict) and "resourceVersion" in md:
        obj = dict(obj)
        obj["metadata"] = {k: v for k, v in md.items() if k != "resourceVersion"}
    return pack(obj)


def check_shape(kind: str, key: str, obj: Obj) -> None:
    """Raise MalformedObjectError when a stored ``kind`` object has a field of the wrong type:
    the one check between what Redis holds (anything that can write Redis can write it) and
    the readers, which may then rely on every field's type. Decides."""
    problems = model_validation.shape_errors(kind, obj)
    if problems:
        raise MalformedObjectError(kind, key, problems)


def unpack_object(data: bytes, rv: str, kind: str = "", key: str = "") -> Obj:
    """Decode a stored object of ``kind`` (its shape checked when ``kind`` is given)."""
    obj = unpack(data)
    if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
        raise CorruptEntryError("stored object is not a Kubernetes object (no metadata)")
    if kind:
        check_shape(kind, key, obj)
    obj["metadata"]["resourceVersion"] = rv
    return obj


def tombstone(kind: str, obj: Obj) -> Obj:
    """What is left of a malformed object's last state in its DELETED entry: its identity
    (name, namespace, uid) and the well-formed labels and ownerReferences handlers use to
    find what its deletion concerns (the owning DaemonSet). Decides."""
    md = obj["metadata"]
    errs: list[str] = []
    out_md: Obj = {f: md[f] for f in ("name", "namespace", "uid") if isinstance(md.get(f), str)}
    labels = typed.as_str_map(md.get("labels"), "labels", errs)
    if labels:
        out_md["labels"] = labels
    refs = [r for _i, r in typed.maps(md.get("ownerReferences"), "ownerReferences", errs)
            if all(isinstance(r.get(f), str) for f in ("apiVersion", "kind", "name", "uid"))
            and isinstance(r.get("controller", False), bool)]
    if refs:
        out_md["ownerReferences"] = refs
    return {"kind": kind, "apiVersion": obj.get("apiVersion"), "metadata": out_md}


@dataclass(frozen=True)
class Entry:
    """One decoded, validated log entry."""

    id: str
    type: str
    kind: str
    key: str
    obj: Obj  # the object (resourceVersion set to id), or the decision record
    user: str = ""  # who wrote it, when recorded (field "u")


def _s(fields: dict[bytes, bytes], name: bytes) -> str:
    raw = fields.get(name)
    if raw is None:
        raise CorruptEntryError(f"missing field {name.decode()!r}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise CorruptEntryError(f"field {name.decode()!r} is not UTF-8") from err


def decode_entry(entry_id: bytes | str, fields: dict[bytes, bytes]) -> Entry:
    """Decode and validate one stream entry; raises CorruptEntryError with a clear reason."""
    eid = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    version = _s(fields, b"v")
    if version != str(SCHEMA_VERSION):
        raise CorruptEntryError(f"entry {eid}: unsupported schema version {version!r}")
    etype = _s(fields, b"t")
    if etype not in ENTRY_TYPES:
        raise CorruptEntryError(f"entry {eid}: unknown entry type {etype!r}")
    kind = _s(fields, b"k")
    if kind not in KINDS:
        raise CorruptEntryError(f"entry {eid}: unknown kind {kind!r}")
    key = _s(fields, b"n")
    if "/" not in key or not key.split("/", 1)[1]:
        raise CorruptEntryError(f"entry {eid}: malformed object key {key!r}")
    raw = fields.get(b"o")
    if raw is None:
        raise CorruptEntryError(f"entry {eid}: missing field 'o'")
    try:
        obj = unpack(raw)
    except CorruptEntryError as err:
        raise CorruptEntryError(f"entry {eid}: {err}") from err
    if not isinstance(obj, dict):
        raise CorruptEntryError(f"entry {eid}: payload is not a map")
    if etype != "DECISION":
        md = obj.get("metadata")
        if not isinstance(md, dict):
            raise CorruptEntryError(f"entry {eid}: object has no metadata")
        ns, name = key.split("/", 1)
        if md.get("name") != name or (md.get("namespace") or "") != ns:
            raise CorruptEntryError(f"entry {eid}: object name does not match key {key!r}")
        if obj.get("kind", kind) != kind:
            raise CorruptEntryError(f"entry {eid}: object kind {obj.get('kind')!r} != {kind!r}")
        try:
            check_shape(kind, key, obj)
        except MalformedObjectError as err:
            if etype != "DELETED":
                raise CorruptEntryError(f"entry {eid}: {err}") from err
            # a deletion happened whatever the object looked like: readers must apply it
            log.warning("entry %s: deleted %s kept as its identity only: %s", eid, kind, err)
            obj = tombstone(kind, obj)
            md = obj["metadata"]
        md["resourceVersion"] = eid
    user = _s(fields, b"u") if b"u" in fields else ""
    return Entry(eid, etype, kind, key, obj, user)


def id_tuple(entry_id: str) -> tuple[int, int]:
    """Stream id → comparable tuple ("0-0" for empty)."""
    ms, _, seq = (entry_id or "0-0").partition("-")
    try:
        return int(ms), int(seq or 0)
    except ValueError:
        return 0, 0


def id_ge(a: str, b: str) -> bool:
    return id_tuple(a) >= id_tuple(b)
