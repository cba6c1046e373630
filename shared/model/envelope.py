"""Reading a versioned map that crossed processes (a status message, a decision record, a
lease): its version, and each field's type, checked before use. Pure.

A map carries its version under one field (``"v"``, or ``"rv"`` for decision records); a map
without one is of version 1 (as written before it carried one). A newer version than the
reader's, or a field of the wrong type, is refused with ``CorruptEntryError`` naming it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from shared.model.errors import CorruptEntryError

#: (field, type or types, required)
Field = tuple[str, type | tuple[type, ...], bool]


def version(doc: Any, what: str, current: int, field: str = "v") -> int:
    """The version of the map ``doc`` (a ``what``), 1 when absent; refused when it is not a
    map, or its version is not one from 1 to ``current``."""
    if not isinstance(doc, dict):
        raise CorruptEntryError(f"{what} is not a map")
    number = doc.get(field, 1)
    if not isinstance(number, int) or isinstance(number, bool) or not 0 < number <= current:
        raise CorruptEntryError(f"{what} of unsupported version {number!r}")
    return number


def check(doc: dict[str, Any], what: str, fields: Iterable[Field]) -> None:
    """Refuse ``doc`` if a field is of the wrong type (a bool is no int, an int is a float)
    or a required one is missing; an optional field may be absent or None."""
    for name, types, required in fields:
        value = doc.get(name)
        if value is None and not required:
            continue
        allowed = types if isinstance(types, tuple) else (types,)
        if float in allowed:
            allowed = (*allowed, int)
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            names = " or ".join(t.__name__ for t in (types if isinstance(types, tuple)
                                                      else (types,)))
            raise CorruptEntryError(f"{what} field {name!r} is not of type {names}")
