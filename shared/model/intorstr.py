"""IntOrString values (``maxUnavailable``, ``maxSurge``): resolution and numeric value. Pure.

An IntOrString in a JSON object is either an int or a string; a bool is neither.
"""

from __future__ import annotations

import re
from typing import Any

from shared.model import fielderr

_ATOI_RE = re.compile(r"[+-]?[0-9]+")
_PERCENT_RE = re.compile(r"[0-9]+%")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def is_int(value: Any) -> bool:
    """An int that is not a bool (``True`` is an ``int`` in Python, not in JSON)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _atoi(s: str) -> int | None:
    """``strconv.Atoi``: optional sign and ASCII digits only; None when it fails.
    Out-of-range values fail too (Go returns an error and a clamped value)."""
    if not _ATOI_RE.fullmatch(s):
        return None
    v = int(s)
    return v if _INT64_MIN <= v <= _INT64_MAX else None


def scaled_value(value: Any, total: int, round_up: bool = True) -> int:
    """``intstr.GetScaledValueFromIntOrPercent`` (spec §a.6). Decides; no effects.

    An int is returned as is; ``"N%"`` becomes ceil(N·total/100) (floor when ``round_up`` is
    false), computed exactly. Raises ValueError for None ("nil value for IntOrString"), a
    string without ``%``, an unparsable number, or a value that is neither int nor string.
    """
    if value is None:
        raise ValueError("nil value for IntOrString")
    if is_int(value):
        return int(value)
    if not isinstance(value, str):
        raise ValueError("invalid value for IntOrString: invalid type: neither int nor percentage")
    if not value.endswith("%"):
        raise ValueError("invalid value for IntOrString: invalid type: string is not a percentage")
    number = value[:-1]
    v = _atoi(number)
    if v is None:
        raise ValueError(
            f'invalid value for IntOrString: invalid value "{value}": '
            f'strconv.Atoi: parsing "{number}": invalid syntax'
        )
    product = v * int(total)
    return -((-product) // 100) if round_up else product // 100


def percent_value(value: Any) -> int | None:
    """The number of a valid percent string (``^[0-9]+%$``), else None."""
    if isinstance(value, str) and _PERCENT_RE.fullmatch(value):
        return int(value[:-1])
    return None


def numeric_value(value: Any) -> int:
    """The "numeric value" of validation rule 9 (upstream ``getIntOrPercentValue``).

    The percent number for a valid percent string; else ``IntOrString.IntValue()``: the int,
    or ``strconv.Atoi`` of a string (0 when unparsable). Anything else counts as 0.
    """
    pct = percent_value(value)
    if pct is not None:
        return pct
    if is_int(value):
        return int(value)
    if isinstance(value, str) and _ATOI_RE.fullmatch(value):
        # Atoi fails on overflow but still yields the clamped value, which IntValue keeps.
        return max(_INT64_MIN, min(_INT64_MAX, int(value)))
    return 0


def go_literal(value: Any) -> fielderr.GoLiteral:
    """An IntOrString as ``%#v`` prints ``intstr.IntOrString`` (a field error's bad value;
    the API server holds ``maxUnavailable``/``maxSurge`` by value, and ``String()`` has a
    pointer receiver, so ``field.Error`` falls back to ``%#v``): ``Type:0`` with ``IntVal``
    for an int, ``Type:1`` with ``StrVal`` for a string; None is the zero value."""
    if isinstance(value, str):
        return fielderr.GoLiteral(
            f"intstr.IntOrString{{Type:1, IntVal:0, StrVal:{fielderr.go_quote(value)}}}")
    number = int(value) if is_int(value) else 0
    return fielderr.GoLiteral(f'intstr.IntOrString{{Type:0, IntVal:{number}, StrVal:""}}')
