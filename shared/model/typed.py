"""Typed reads of JSON-like values for validation: a wrong type becomes a field error. Pure.

Every reader takes the value, its field path and the error list to append to. It returns the
value when it has the expected type, or None when it is absent (``None`` — JSON null decodes
like an absent field in Go) or of the wrong type (after appending a :func:`fielderr.type_error`).
Validators then treat None as the Go zero value, so a malformed object never crashes them.
"""

from __future__ import annotations

from typing import Any

from shared.model import fielderr

INT32 = (-(2**31), 2**31 - 1)
TEXT = (str, type(None))  # the types a text field may have (None: absent), for isinstance
INT64 = (-(2**63), 2**63 - 1)


def get(obj: Any, name: str) -> Any:
    """``obj[name]`` when ``obj`` is a dict, else None."""
    return obj.get(name) if isinstance(obj, dict) else None


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def as_map(value: Any, path: str, errs: list[str]) -> dict[Any, Any] | None:
    if value is None or isinstance(value, dict):
        return value
    errs.append(fielderr.type_error(path, value, "object"))
    return None


def as_list(value: Any, path: str, errs: list[str]) -> list[Any] | None:
    if value is None or isinstance(value, list):
        return value
    errs.append(fielderr.type_error(path, value, "array"))
    return None


def as_str(value: Any, path: str, errs: list[str]) -> str | None:
    if value is None or isinstance(value, str):
        return value
    errs.append(fielderr.type_error(path, value, "string"))
    return None


def as_bool(value: Any, path: str, errs: list[str]) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    errs.append(fielderr.type_error(path, value, "boolean"))
    return None


def as_int(value: Any, path: str, errs: list[str], bits: int = 32) -> int | None:
    """An int (not a bool, not a float) within int32 (or int64 with ``bits=64``)."""
    if value is None:
        return None
    lo, hi = INT32 if bits == 32 else INT64
    if is_int(value) and lo <= value <= hi:
        return int(value)
    errs.append(fielderr.type_error(path, value, f"int{bits}"))
    return None


def as_str_map(value: Any, path: str, errs: list[str]) -> dict[str, str] | None:
    """A ``map[string]string`` (labels, annotations, nodeSelector); entries of the wrong
    type are reported (at ``path[key]``) and left out of the result."""
    m = as_map(value, path, errs)
    if m is None:
        return None
    out: dict[str, str] = {}
    for k, v in m.items():
        if not isinstance(k, str):
            errs.append(fielderr.type_error(path, k, "string (as a key)"))
        elif not isinstance(v, str):
            errs.append(fielderr.type_error(fielderr.key(path, k), v, "string"))
        else:
            out[k] = v
    return out


def as_str_list(value: Any, path: str, errs: list[str]) -> list[str] | None:
    """A ``[]string``; items of the wrong type are reported and left out."""
    items = as_list(value, path, errs)
    if items is None:
        return None
    out: list[str] = []
    for i, v in enumerate(items):
        if isinstance(v, str):
            out.append(v)
        else:
            errs.append(fielderr.type_error(fielderr.index(path, i), v, "string"))
    return out


def maps(value: Any, path: str, errs: list[str]) -> list[tuple[int, dict[Any, Any]]]:
    """The object items of an array, with their indexes; a null item is an empty object (Go's
    zero value), other items are reported and left out."""
    items = as_list(value, path, errs)
    out: list[tuple[int, dict[Any, Any]]] = []
    for i, item in enumerate(items or []):
        if isinstance(item, dict):
            out.append((i, item))
        elif item is None:
            out.append((i, {}))
        else:  # the item's path made for its error alone: every reader checks every list
            errs.append(fielderr.type_error(fielderr.index(path, i), item, "object"))
    return out
