"""Resource quantities (``resource.Quantity`` of apimachinery): parsed, compared, written
in their canonical form. Pure.

A quantity is a number with a suffix: binary (``Ki`` ... ``Ei``), decimal SI (``n``, ``u``,
``m``, none, ``k``, ``M``, ``G``, ``T``, ``P``, ``E``) or a decimal exponent (``1e3``). It
keeps the kind of suffix it was written with; its canonical text is what the API server
writes back: the value rounded up to nano units, then the largest suffix of that kind that
leaves an integer (``1000m`` → ``1``, ``0.5`` → ``500m``, ``1.5Gi`` → ``1536Mi``; a binary
quantity under 1024 or not a whole number is written with a decimal suffix). A JSON number
in a manifest is read as the text of that number (``cpu: 0.5`` is ``500m``).
"""

from __future__ import annotations

import decimal
import re
from dataclasses import dataclass
from typing import Any

SYNTAX_ERROR = ("quantities must match the regular expression "
                "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")

_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15,
            "E": 18}
_BINARY_SUFFIX = {e: s for s, e in _BINARY.items()} | {0: ""}
_DECIMAL_SUFFIX = {e: s for s, e in _DECIMAL.items()}
_NUMBER = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?")
_EXPONENT = re.compile(r"[eE][+-]?[0-9]+")
_NANO = decimal.Decimal("1e-9")
_MILLI = decimal.Decimal("1e-3")
_MAX = decimal.Decimal(2**63 - 1)
_CONTEXT = decimal.Context(prec=100, rounding=decimal.ROUND_UP)

BINARY, DECIMAL_SI, DECIMAL_EXPONENT = "BinarySI", "DecimalSI", "DecimalExponent"


@dataclass(frozen=True)
class Quantity:
    """A parsed quantity: its exact value, the kind of suffix it was written with, and
    the text it was written as when upstream writes that text back unchanged (None: its
    canonical text is computed)."""

    value: decimal.Decimal
    format: str
    text: str | None = None
    scale: int = 0  # the power of ten of its last written digit (upstream's int64 scale)

    def canonical(self) -> str:
        """The text the API server writes for it (``CanonicalizeBytes``, or the text as
        given where ``ParseQuantity`` keeps it)."""
        if self.text is not None:
            return self.text
        v = self.value
        if v == 0:
            return "0"
        fmt = self.format
        if fmt == BINARY and (abs(v) < 1024 or v != v.to_integral_value()):
            fmt = DECIMAL_SI
        if fmt == BINARY:
            amount, exponent = int(v), 0
            while amount % 1024 == 0 and exponent < 60:
                amount //= 1024
                exponent += 10
            return f"{amount}{_BINARY_SUFFIX[exponent]}"
        sign, digits, exp = v.normalize(_CONTEXT).as_tuple()
        assert isinstance(exp, int)
        amount = int("".join(map(str, digits)))
        while exp % 3:
            amount *= 10
            exp -= 1
        text = f"{'-' if sign else ''}{amount}"
        if fmt == DECIMAL_EXPONENT:
            return text if exp == 0 else f"{text}e{exp}"
        return text + _DECIMAL_SUFFIX.get(exp, f"e{exp}")

    def round_up_milli(self) -> Quantity:
        """``RoundUp(Milli)``: the value rounded away from zero to thousandths; the text kept
        when nothing finer was written."""
        if self.scale >= -3:
            return self
        rounded = self.value.quantize(_MILLI, rounding=decimal.ROUND_UP, context=_CONTEXT)
        return Quantity(rounded, self.format, scale=-3)


def parse(value: Any) -> Quantity:
    """``ParseQuantity`` of a manifest's value (a text, or a JSON number read as its text):
    raises ValueError with upstream's message for anything else. The value is rounded up to
    nano units and bounded by the largest int64, as upstream bounds it."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(SYNTAX_ERROR)
    text = value if isinstance(value, str) else _number_text(value)
    m = _NUMBER.match(text)
    if m is None or (not m.group(2) and not m.group(3)):
        raise ValueError(SYNTAX_ERROR)
    whole, fraction = m.group(2) or "", m.group(3) or ""
    suffix = text[m.end():]
    if suffix in _BINARY:
        fmt, base, exponent = BINARY, 2, _BINARY[suffix]
    elif suffix in _DECIMAL:
        fmt, base, exponent = DECIMAL_SI, 10, _DECIMAL[suffix]
    elif _EXPONENT.fullmatch(suffix):
        fmt, base, exponent = DECIMAL_EXPONENT, 10, int(suffix[1:])
    else:
        raise ValueError(SYNTAX_ERROR)
    digits = f"{m.group(1)}{whole or '0'}.{fraction or '0'}"
    amount = _CONTEXT.multiply(decimal.Decimal(digits), decimal.Decimal(base) ** exponent)
    exact = amount.quantize(_NANO, rounding=decimal.ROUND_UP, context=_CONTEXT)
    if exact != amount:  # finer than nano: rounded up, as upstream rounds
        amount = exact
    scale = -len(fraction) + (0 if fmt == BINARY else exponent)
    if abs(amount) > _MAX:
        return Quantity(_MAX.copy_sign(amount), fmt, scale=0)
    kept = text if _kept(fmt, exponent, whole, fraction) else None
    return Quantity(amount, fmt, kept, scale)


def _kept(fmt: str, exponent: int, whole: str, fraction: str) -> bool:
    """Whether ``ParseQuantity`` keeps the text as written (its fast path, for a text
    already in canonical form): a decimal number whose digits fit an int64, whose scale is
    a multiple of three, not ending in 000 nor starting with 0; a whole binary amount not
    a multiple of 8."""
    shifted = whole + fraction
    if len(shifted) > 18:
        return False
    if fmt == BINARY:
        return not fraction and int(whole or "0") & 7 != 0
    scale = exponent - len(fraction)
    return scale >= -9 and scale % 3 == 0 and not shifted.endswith("000") \
        and not shifted.startswith("0")


def _number_text(value: int | float) -> str:
    if isinstance(value, int):
        return str(value)
    return format(decimal.Decimal(repr(value)), "f")


def canonical(value: Any) -> str:
    """The canonical text of a quantity as given; ValueError as :func:`parse`."""
    return parse(value).canonical()


def canonical_milli(value: Any) -> str:
    """The canonical text of a quantity of a resource list (``SetDefaults_ResourceList``
    rounds those up to milli units first); ValueError as :func:`parse`."""
    return parse(value).round_up_milli().canonical()
