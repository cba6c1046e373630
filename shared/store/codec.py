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
=====  ==============================================================================
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import Any

import msgpack

from shared.store.errors import CorruptEntryError

SCHEMA_VERSION = 1
ENTRY_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "DECISION"})
KINDS = frozenset({"Node", "Pod", "DaemonSet", "ControllerRevision", "Event"})

Obj = dict[str, Any]


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


def unpack_object(data: bytes, rv: str) -> Obj:
    obj = unpack(data)
    if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
        raise CorruptEntryError("stored object is not a Kubernetes object (no metadata)")
    obj["metadata"]["resourceVersion"] = rv
    return obj


@dataclass(frozen=True)
class Entry:
    """One decoded, validated log entry."""

    id: str
    type: str
    kind: str
    key: str
    obj: Obj  # the object (resourceVersion set to id), or the decision record


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
        md["resourceVersion"] = eid
    return Entry(eid, etype, kind, key, obj)


def id_tuple(entry_id: str) -> tuple[int, int]:
    """Stream id → comparable tuple ("0-0" for empty)."""
    ms, _, seq = (entry_id or "0-0").partition("-")
    try:
        return int(ms), int(seq or 0)
    except ValueError:
        return 0, 0


def id_ge(a: str, b: str) -> bool:
    return id_tuple(a) >= id_tuple(b)
