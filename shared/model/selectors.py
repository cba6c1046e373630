"""Label selectors as upstream's ``labels`` package models them: requirements, parsing of
kubectl's ``-l`` strings, and conversion from a LabelSelector. Pure.

Use it through :mod:`shared.model.labels`, which re-exports the public names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.model import fielderr, syntax

# Operators, spelled as upstream's ``selection.Operator`` values.
EQUALS = "="
DOUBLE_EQUALS = "=="
NOT_EQUALS = "!="
IN = "in"
NOT_IN = "notin"
EXISTS = "exists"
DOES_NOT_EXIST = "!"
GREATER_THAN = "gt"
LESS_THAN = "lt"

_LABEL_SELECTOR_OPS = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": DOES_NOT_EXIST}


def _parse_int64(s: str) -> int | None:
    """``strconv.ParseInt(s, 10, 64)``: sign and ASCII digits, in range; else None."""
    if not re.fullmatch(r"[+-]?[0-9]+", s):
        return None
    v = int(s)
    return v if -(2**63) <= v < 2**63 else None


@dataclass(frozen=True)
class Requirement:
    """One requirement of a selector (``labels.Requirement``)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, Any]) -> bool:
        has = self.key in labels
        value = labels.get(self.key)
        if self.operator in (IN, EQUALS, DOUBLE_EQUALS):
            return has and value in self.values
        if self.operator in (NOT_IN, NOT_EQUALS):
            return not has or value not in self.values
        if self.operator == EXISTS:
            return has
        if self.operator == DOES_NOT_EXIST:
            return not has
        if self.operator in (GREATER_THAN, LESS_THAN):
            if not has or not isinstance(value, str) or len(self.values) != 1:
                return False
            have, want = _parse_int64(value), _parse_int64(self.values[0])
            if have is None or want is None:
                return False
            return have > want if self.operator == GREATER_THAN else have < want
        return False

    def __str__(self) -> str:
        """``Requirement.String``: ``a=b``, ``a in (x,y)``, ``!a``, ``a>1``."""
        if self.operator == DOES_NOT_EXIST:
            return "!" + self.key
        if self.operator == EXISTS:
            return self.key
        op = {IN: " in ", NOT_IN: " notin ", GREATER_THAN: ">", LESS_THAN: "<"}.get(
            self.operator, self.operator
        )
        vals = self.values[0] if len(self.values) == 1 else ",".join(sorted(self.values))
        if self.operator in (IN, NOT_IN):
            vals = f"({vals})"
        return f"{self.key}{op}{vals}"


@dataclass(frozen=True)
class Selector:
    """A parsed label selector. ``nothing`` is the selector of a nil LabelSelector (it
    matches no object); otherwise all requirements must hold (none: matches everything)."""

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False

    def matches(self, labels: Mapping[str, Any] | None) -> bool:
        if self.nothing:
            return False
        lb: Mapping[str, Any] = labels if isinstance(labels, Mapping) else {}
        return all(r.matches(lb) for r in self.requirements)

    def empty(self) -> bool:
        """True for the selector that matches everything."""
        return not self.nothing and not self.requirements

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


def _new_requirement(key: str, op: str, values: list[str]) -> Requirement:
    """``labels.NewRequirement``: validate and build (raises ValueError like upstream)."""
    errs: list[str] = []
    key_errs = syntax.is_qualified_name(key)
    if key_errs:
        errs.append(fielderr.invalid("key", key, "; ".join(key_errs)))
    literal = fielderr.str_list_literal(values)
    if op in (IN, NOT_IN):
        if not values:
            errs.append(
                fielderr.invalid(
                    "values", literal, "for 'in', 'notin' operators, values set can't be empty"
                )
            )
    elif op in (EQUALS, DOUBLE_EQUALS, NOT_EQUALS):
        if len(values) != 1:
            errs.append(
                fielderr.invalid(
                    "values", literal, "exact-match compatibility requires one single value"
                )
            )
    elif op in (EXISTS, DOES_NOT_EXIST):
        if values:
            errs.append(
                fielderr.invalid(
                    "values", literal, "values set must be empty for exists and does not exist"
                )
            )
    elif op in (GREATER_THAN, LESS_THAN):
        if len(values) != 1:
            errs.append(
                fielderr.invalid(
                    "values", literal, "for 'Gt', 'Lt' operators, exactly one value is required"
                )
            )
        for i, v in enumerate(values):
            if _parse_int64(v) is None:
                errs.append(
                    fielderr.invalid(
                        f"values[{i}]", v, "for 'Gt', 'Lt' operators, the value must be an integer"
                    )
                )
    else:
        errs.append(
            fielderr.not_supported(
                "operator",
                op,
                [
                    IN,
                    NOT_IN,
                    EQUALS,
                    DOUBLE_EQUALS,
                    NOT_EQUALS,
                    EXISTS,
                    DOES_NOT_EXIST,
                    GREATER_THAN,
                    LESS_THAN,
                ],
            )
        )
    for i, v in enumerate(values):
        v_errs = syntax.is_valid_label_value(v)
        if v_errs:
            errs.append(fielderr.invalid(f"values[{i}][{key}]", v, "; ".join(v_errs)))
    if len(errs) == 1:
        raise ValueError(errs[0])
    if errs:
        raise ValueError("[" + ", ".join(errs) + "]")
    return Requirement(key, op, tuple(values))


# Lexer tokens of upstream's selector parser.
_T_END, _T_ID, _T_IN, _T_NOTIN, _T_OPEN, _T_CLOSE, _T_COMMA = (
    "end",
    "id",
    "in",
    "notin",
    "(",
    ")",
    ",",
)
_T_EQ, _T_DEQ, _T_NEQ, _T_NOT, _T_GT, _T_LT = "=", "==", "!=", "!", ">", "<"
_SPECIAL = "=!(),><"
_WHITESPACE = " \t\r\n"
_SYMBOLS = {
    ")": _T_CLOSE,
    ",": _T_COMMA,
    "!": _T_NOT,
    "==": _T_DEQ,
    "=": _T_EQ,
    ">": _T_GT,
    "<": _T_LT,
    "!=": _T_NEQ,
    "(": _T_OPEN,
}
_BINARY_OPERATORS = "in, notin, =, ==, !=, gt, lt"


def _lex(s: str) -> list[tuple[str, str]]:
    """Upstream's ``Lexer``: identifiers are runs of anything but whitespace and the special
    symbols ``=!(),><``; symbols are matched greedily; a NUL ends the input."""
    tokens: list[tuple[str, str]] = []
    i, n = 0, len(s)
    while True:
        while i < n and s[i] in _WHITESPACE:
            i += 1
        if i >= n or s[i] == "\0":
            tokens.append((_T_END, ""))
            return tokens
        if s[i] in _SPECIAL:
            buf, last = "", ("", "")
            while i < n and s[i] in _SPECIAL:
                if buf + s[i] in _SYMBOLS:
                    buf += s[i]
                    last = (_SYMBOLS[buf], buf)
                    i += 1
                else:
                    break
            tokens.append(last)
            continue
        j = i
        while j < n and s[j] not in _WHITESPACE and s[j] not in _SPECIAL and s[j] != "\0":
            j += 1
        word = s[i:j]
        tokens.append(({"in": _T_IN, "notin": _T_NOTIN}.get(word, _T_ID), word))
        i = j


class _Parser:
    """Upstream's recursive-descent selector ``Parser`` (same error wording)."""

    def __init__(self, s: str) -> None:
        self.tokens = _lex(s)
        self.pos = 0

    def _peek(self, values: bool) -> tuple[str, str]:
        tok, lit = self.tokens[min(self.pos, len(self.tokens) - 1)]
        if values and tok in (_T_IN, _T_NOTIN):
            tok = _T_ID  # in a value context, keywords are plain identifiers
        return tok, lit

    def _next(self, values: bool) -> tuple[str, str]:
        tok = self._peek(values)
        self.pos += 1
        return tok

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            tok, lit = self._peek(True)
            if tok in (_T_ID, _T_NOT):
                try:
                    reqs.append(self._requirement())
                except ValueError as err:
                    raise ValueError(f"unable to parse requirement: {err}") from None
                tok, lit = self._next(True)
                if tok == _T_END:
                    return reqs
                if tok == _T_COMMA:
                    tok2, lit2 = self._peek(True)
                    if tok2 not in (_T_ID, _T_NOT):
                        raise ValueError(f"found '{lit2}', expected: identifier after ','")
                    continue
                raise ValueError(f"found '{lit}', expected: ',' or 'end of string'")
            if tok == _T_END:
                return reqs
            raise ValueError(f"found '{lit}', expected: !, identifier, or 'end of string'")

    def _requirement(self) -> Requirement:
        op = ""
        tok, lit = self._next(True)
        if tok == _T_NOT:
            op = DOES_NOT_EXIST
            tok, lit = self._next(True)
        if tok != _T_ID:
            raise ValueError(f"found '{lit}', expected: identifier")
        key_errs = syntax.is_qualified_name(lit)
        if key_errs:
            raise ValueError(fielderr.invalid("<nil>", lit, "; ".join(key_errs)))
        key = lit
        if self._peek(True)[0] in (_T_END, _T_COMMA):
            return _new_requirement(key, op or EXISTS, [])
        if op == DOES_NOT_EXIST:
            return _new_requirement(key, op, [])
        tok, lit = self._next(False)
        ops = {
            _T_IN: IN,
            _T_EQ: EQUALS,
            _T_DEQ: DOUBLE_EQUALS,
            _T_GT: GREATER_THAN,
            _T_LT: LESS_THAN,
            _T_NOTIN: NOT_IN,
            _T_NEQ: NOT_EQUALS,
        }
        if tok not in ops:
            raise ValueError(f"found '{lit}', expected: {_BINARY_OPERATORS}")
        op = ops[tok]
        values = self._values() if op in (IN, NOT_IN) else self._exact_value()
        return _new_requirement(key, op, sorted(values))

    def _values(self) -> set[str]:
        tok, lit = self._next(True)
        if tok != _T_OPEN:
            raise ValueError(f"found '{lit}' expected: '('")
        tok, lit = self._peek(True)
        if tok in (_T_ID, _T_COMMA):
            out = self._identifiers()
            if self._next(True)[0] != _T_CLOSE:
                raise ValueError(f"found '{lit}', expected: ')'")
            return out
        if tok == _T_CLOSE:
            self._next(True)
            return {""}
        raise ValueError(f"found '{lit}', expected: ',', ')' or identifier")

    def _identifiers(self) -> set[str]:
        out: set[str] = set()
        while True:
            tok, lit = self._next(True)
            if tok == _T_ID:
                out.add(lit)
                tok2, lit2 = self._peek(True)
                if tok2 == _T_COMMA:
                    continue
                if tok2 == _T_CLOSE:
                    return out
                raise ValueError(f"found '{lit2}', expected: ',' or ')'")
            if tok == _T_COMMA:
                if not out:
                    out.add("")  # "(,"
                tok2, _ = self._peek(True)
                if tok2 == _T_CLOSE:
                    out.add("")  # ",)"
                    return out
                if tok2 == _T_COMMA:
                    self._next(True)
                    out.add("")  # ",,"
                continue
            raise ValueError(f"found '{lit}', expected: ',', or identifier")

    def _exact_value(self) -> set[str]:
        tok, _ = self._peek(True)
        if tok in (_T_END, _T_COMMA):
            return {""}
        tok, lit = self._next(True)
        if tok == _T_ID:
            return {lit}
        raise ValueError(f"found '{lit}', expected: identifier")


def parse_selector(s: str) -> Selector:
    """Parse a kubectl ``-l`` selector (``labels.Parse``). Decides; no effects.

    Accepts ``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``, ``a notin (x)``, ``a``, ``!a``,
    ``a>1``, ``a<1``, joined by commas; ``""`` selects everything. Requirements are sorted by
    key, as upstream does. Raises ValueError with upstream's message on bad syntax, e.g.
    ``unable to parse requirement: found '', expected: in, notin, =, ==, !=, gt, lt``.
    """
    if not isinstance(s, str):
        raise ValueError(f"selector must be a string, got {type(s).__name__}")
    reqs = _Parser(s).parse()
    return Selector(tuple(sorted(reqs, key=lambda r: r.key)))


def selector_from_label_selector(selector: Any) -> Selector:
    """``metav1.LabelSelectorAsSelector``: None → matches nothing; ``{}`` → everything.
    Raises ValueError for an invalid operator, key or value, or a malformed selector."""
    if selector is None:
        return Selector(nothing=True)
    if not isinstance(selector, dict):
        raise ValueError("a label selector must be an object")
    match_labels = selector.get("matchLabels") or {}
    exprs = selector.get("matchExpressions") or []
    if not isinstance(match_labels, dict) or not isinstance(exprs, list):
        raise ValueError("matchLabels must be an object and matchExpressions an array")
    reqs: list[Requirement] = []
    for k, v in match_labels.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise ValueError("matchLabels keys and values must be strings")
        reqs.append(_new_requirement(k, EQUALS, [v]))
    for expr in exprs:
        if not isinstance(expr, dict):
            raise ValueError("each matchExpressions item must be an object")
        op = expr.get("operator")
        if not isinstance(op, str) or op not in _LABEL_SELECTOR_OPS:
            raise ValueError(f"{fielderr.render(op)} is not a valid label selector operator")
        key, values = expr.get("key"), expr.get("values") or []
        if not isinstance(key, str) or not isinstance(values, list):
            raise ValueError("a requirement needs a string key and an array of values")
        if not all(isinstance(v, str) for v in values):
            raise ValueError("requirement values must be strings")
        op_name = _LABEL_SELECTOR_OPS[op]
        reqs.append(_new_requirement(key, op_name, list(values)))
    return Selector(tuple(sorted(reqs, key=lambda r: r.key)))
