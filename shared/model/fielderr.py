"""Field errors rendered the way apimachinery's ``field.Error`` prints them. Pure.

``field.Error.Error()`` is ``"<path>: <type>[: <value>][: <detail>]"``. The bad value is shown
as Go's ``fmt`` would show it: strings with ``%q`` (double quotes, Go escapes), numbers and
booleans bare, ``nil`` as ``null``, anything else with ``%#v`` (``map[string]string{"a":"b"}``,
``[]string{"x", "y"}``). Callers that know the Go struct type of a value (a LabelSelector, a
Toleration) render it themselves and pass a :class:`GoLiteral`, which is shown as is.

Besides the upstream error types (Invalid, Required, Unsupported, Forbidden, Duplicate,
Not found, Too long) this module has :func:`type_error`, for a JSON value of the wrong type:
Go would fail to decode such a document, we report it in the same shape instead.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

_MAX_DEPTH = 16


class GoLiteral(str):
    """Text already rendered as Go prints a value (e.g. a struct literal); shown verbatim."""

    __slots__ = ()


# ---- paths -----------------------------------------------------------------------------


def child(path: str, *names: str) -> str:
    """``field.Path.Child``: ``spec`` + ``template`` → ``spec.template``."""
    for n in names:
        path = f"{path}.{n}" if path else n
    return path


def index(path: str, i: int) -> str:
    """``field.Path.Index``: ``containers`` + 0 → ``containers[0]``."""
    return f"{path}[{i}]"


def key(path: str, k: object) -> str:
    """``field.Path.Key``: ``labels`` + ``app`` → ``labels[app]``."""
    return f"{path}[{k}]"


# ---- value rendering ---------------------------------------------------------------------

_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    '"': '\\"',
    "\\": "\\\\",
}


def go_quote(s: str) -> str:
    """``strconv.Quote``: double-quoted, Go escapes, printable Unicode kept as is."""
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif 0xD800 <= o <= 0xDFFF:  # not a valid rune: Go shows the replacement character
            out.append("\\ufffd")
        elif ch == " " or (ch.isprintable() and not ch.isspace()):
            out.append(ch)
        elif o < 0x20 or o == 0x7F:
            out.append(f"\\x{o:02x}")
        elif o < 0x10000:
            out.append(f"\\u{o:04x}")
        else:
            out.append(f"\\U{o:08x}")
    out.append('"')
    return "".join(out)


def go_float(f: float) -> str:
    """A float64 as ``%v`` prints it (shortest digits, ``%e`` form when exp < -4 or >= 6)."""
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if f == 0:
        return "-0" if math.copysign(1.0, f) < 0 else "0"
    sign, digits_t, exp = Decimal(repr(f)).as_tuple()
    assert isinstance(exp, int)
    digits = "".join(str(d) for d in digits_t).rstrip("0") or "0"
    exp += len("".join(str(d) for d in digits_t)) - len(digits)
    dp = len(digits) + exp  # position of the decimal point relative to the digits
    x = dp - 1
    neg = "-" if sign else ""
    if x < -4 or x >= 6:
        mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{neg}{mant}e{'-' if x < 0 else '+'}{abs(x):02d}"
    if dp <= 0:
        return f"{neg}0.{'0' * -dp}{digits}"
    if dp >= len(digits):
        return f"{neg}{digits}{'0' * (dp - len(digits))}"
    return f"{neg}{digits[:dp]}.{digits[dp:]}"


def _is_str_map(value: dict[Any, Any]) -> bool:
    return all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())


def _sorted_items(value: dict[Any, Any]) -> list[tuple[Any, Any]]:
    items = list(value.items())
    if all(isinstance(k, str) for k, _ in items):
        items.sort(key=lambda kv: kv[0])
    return items


def _iface(value: Any, depth: int) -> str:
    """A value held in an ``interface{}`` as ``%#v`` shows it (JSON-decoded Go values)."""
    if depth > _MAX_DEPTH:
        return "..."
    if isinstance(value, GoLiteral):
        return str(value)
    if value is None:
        return "interface {}(nil)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, dict):
        body = ", ".join(
            f"{_iface(k, depth + 1)}:{_iface(v, depth + 1)}" for k, v in _sorted_items(value)
        )
        return "map[string]interface {}{" + body + "}"
    if isinstance(value, list | tuple):
        return "[]interface {}{" + ", ".join(_iface(v, depth + 1) for v in value) + "}"
    return go_quote(repr(value))


def str_map_literal(value: dict[str, str] | None) -> GoLiteral:
    """``%#v`` of a ``map[string]string`` (keys sorted, as fmt sorts them); None is nil."""
    if value is None:
        return GoLiteral("map[string]string(nil)")
    body = ", ".join(f"{go_quote(k)}:{go_quote(v)}" for k, v in sorted(value.items()))
    return GoLiteral("map[string]string{" + body + "}")


def str_list_literal(value: Iterable[str] | None) -> GoLiteral:
    """``%#v`` of a ``[]string``; None is nil."""
    if value is None:
        return GoLiteral("[]string(nil)")
    return GoLiteral("[]string{" + ", ".join(go_quote(v) for v in value) + "}")


MAX_VALUE_CHARS = 512
"""A rendered bad value longer than this is cut (``...`` and how much was left out): a
message quotes a value, it does not carry megabytes of it."""


def cut(text: str, limit: int = MAX_VALUE_CHARS) -> str:
    """``text`` cut to about ``limit`` characters, saying how many were left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}...({len(text) - limit} more characters)"


def render(value: Any) -> str:
    """A bad value as ``field.Error.ErrorBody`` shows it (control characters escaped, as Go's
    ``%q`` does; cut to :data:`MAX_VALUE_CHARS`)."""
    return cut(_render(value))


def _render(value: Any) -> str:
    if isinstance(value, GoLiteral):
        return str(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, dict) and _is_str_map(value):
        return str(str_map_literal(value))
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return str(str_list_literal(value))
    return _iface(value, 0)


# ---- errors ------------------------------------------------------------------------------


def _with_detail(head: str, detail: str) -> str:
    return f"{head}: {detail}" if detail else head


def invalid(path: str, value: Any, detail: str) -> str:
    return _with_detail(f"{path}: Invalid value: {render(value)}", detail)


def required(path: str, detail: str = "") -> str:
    return _with_detail(f"{path}: Required value", detail)


def forbidden(path: str, detail: str) -> str:
    return _with_detail(f"{path}: Forbidden", detail)


def not_supported(path: str, value: Any, supported: Iterable[str]) -> str:
    quoted = ", ".join(go_quote(s) for s in supported)
    detail = f"supported values: {quoted}" if quoted else ""
    return _with_detail(f"{path}: Unsupported value: {render(value)}", detail)


def duplicate(path: str, value: Any, detail: str = "") -> str:
    return _with_detail(f"{path}: Duplicate value: {render(value)}", detail)


def not_found(path: str, value: Any) -> str:
    return f"{path}: Not found: {render(value)}"


def too_long(path: str, max_bytes: int) -> str:
    return f"{path}: Too long: must have at most {max_bytes} bytes"


TYPE_ERROR_DETAIL = "must be of type "


def type_error(path: str, value: Any, expected: str) -> str:
    """A JSON value of the wrong type (Go would refuse to decode the document)."""
    return invalid(path, value, TYPE_ERROR_DETAIL + expected)


def not_an_object(value: Any) -> list[str]:
    """The one error of a stored kind's object that is not an object at all."""
    text = render(value)
    if len(text) > 200:
        text = text[:200] + "..."
    return [f"object: Invalid value: {text}: must be of type object"]


def is_type_error(message: str) -> bool:
    """Whether ``message`` (one rendered error) is a :func:`type_error`."""
    return ": " + TYPE_ERROR_DETAIL in message
