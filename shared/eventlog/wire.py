"""msgpack, the encoding of everything that crosses a process boundary: log entries, view
payloads, snapshots, status messages, decision records. Pure.

Decoding never executes anything: no extension hooks, nothing is ever unpickled."""

from __future__ import annotations

import datetime as _dt
from typing import Any

import msgpack

from shared.model import validation as model_validation
from shared.model.errors import CorruptEntryError, MalformedObjectError

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
