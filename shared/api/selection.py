"""Which objects a LIST or WATCH returns: the ``labelSelector`` (upstream's label selector
grammar, :mod:`shared.model.selectors`) and the ``fieldSelector`` (k8s.io/apimachinery's
``fields`` package: ``a=b``, ``a==b``, ``a!=b`` joined by commas, ``\\``-escaped values),
checked against the fields each kind lets a client select on, as the API server converts
field labels (``field label not supported: X``). Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.model import kinds, meta
from shared.model import labels as labelsel

Obj = dict[str, Any]

EQUALS, DOUBLE_EQUALS, NOT_EQUALS = "=", "==", "!="
_OPERATORS = (NOT_EQUALS, DOUBLE_EQUALS, EQUALS)  # upstream checks them in this order


class SelectorError(ValueError):
    """A selector the API server refuses (a 400 BadRequest); ``str(err)`` is upstream's
    message. Retrying cannot help."""


# ---- field selectors ----------------------------------------------------------------------


@dataclass(frozen=True)
class FieldRequirement:
    """One term of a field selector: ``field`` compared with ``value`` (``!=`` negates)."""

    field: str
    operator: str
    value: str

    def matches(self, fields: Mapping[str, str]) -> bool:
        """A field the object lacks reads as ``""``, as upstream's ``fields.Set`` does."""
        equal = fields.get(self.field, "") == self.value
        return not equal if self.operator == NOT_EQUALS else equal

    def __str__(self) -> str:
        op = NOT_EQUALS if self.operator == NOT_EQUALS else EQUALS
        return f"{self.field}{op}{escape_value(self.value)}"


@dataclass(frozen=True)
class FieldSelector:
    """A parsed field selector: all requirements must hold (none: everything matches)."""

    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, fields: Mapping[str, str]) -> bool:
        return all(r.matches(fields) for r in self.requirements)

    def empty(self) -> bool:
        return not self.requirements

    def names(self) -> tuple[str, ...]:
        """The fields the requirements read."""
        return tuple(dict.fromkeys(r.field for r in self.requirements))

    def exact(self, name: str) -> str | None:
        """The value ``name`` must equal, if a term requires one (``RequiresExactMatch``):
        lets a reader narrow a list, e.g. to one node's pods."""
        for r in self.requirements:
            if r.field == name and r.operator != NOT_EQUALS:
                return r.value
        return None

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


def escape_value(value: str) -> str:
    """``fields.EscapeValue``: ``\\``, ``,`` and ``=`` get a backslash."""
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def unescape_value(value: str) -> str:
    """``fields.UnescapeValue``: the literal value of an escaped one; raises
    :class:`SelectorError` for a bad escape or an unescaped ``,`` or ``=``."""
    out: list[str] = []
    in_slash = False
    for c in value:
        if in_slash:
            if c not in "\\,=":
                raise SelectorError(
                    f"invalid field selector: invalid escape sequence: \\{c}")
            out.append(c)
            in_slash = False
        elif c == "\\":
            in_slash = True
        elif c in ",=":
            # Go prints the rune with %v: its code point
            raise SelectorError(
                f"invalid field selector: unescaped character in value: {ord(c)}")
        else:
            out.append(c)
    if in_slash:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def _split_terms(selector: str) -> list[str]:
    terms, start, in_slash = [], 0, False
    for i, c in enumerate(selector):
        if in_slash:
            in_slash = False
        elif c == "\\":
            in_slash = True
        elif c == ",":
            terms.append(selector[start:i])
            start = i + 1
    terms.append(selector[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    for i in range(len(term)):
        for op in _OPERATORS:
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op):]
    return None


def parse_field_selector(selector: str) -> FieldSelector:
    """``fields.ParseSelector``: the syntax only, any field names. Raises
    :class:`SelectorError` with upstream's message."""
    if not isinstance(selector, str):
        raise SelectorError(f"invalid field selector: {selector!r}")
    reqs = []
    for part in sorted(_split_terms(selector)) if selector else []:
        if not part:
            continue
        split = _split_term(part)
        if split is None:
            raise SelectorError(f"invalid selector: '{selector}'; can't understand '{part}'")
        lhs, op, rhs = split
        reqs.append(FieldRequirement(lhs, op, unescape_value(rhs)))
    return FieldSelector(tuple(reqs))


# ---- what each kind lets a client select on -----------------------------------------------


def _get(*path: str) -> Callable[[Obj], str]:
    def read(obj: Obj) -> str:
        cur: Any = obj
        for p in path:
            cur = cur.get(p) if isinstance(cur, dict) else None
        return "" if cur is None else str(cur)
    return read


def _bool(*path: str) -> Callable[[Obj], str]:
    def read(obj: Obj) -> str:
        cur: Any = obj
        for p in path:
            cur = cur.get(p) if isinstance(cur, dict) else None
        return "true" if cur is True else "false"
    return read


def _pod_ip(pod: Obj) -> str:
    st = pod.get("status") or {}
    ips = st.get("podIPs") or []
    ip = ips[0].get("ip") if ips and isinstance(ips[0], dict) else st.get("podIP")
    return "" if ip is None else str(ip)


def _event_source(ev: Obj) -> str:
    return _get("source", "component")(ev) or _get("reportingComponent")(ev)


Getters = Mapping[str, Callable[[Obj], str]]
_NAME: Getters = {"metadata.name": meta.name}
_NAMESPACED: Getters = {**_NAME, "metadata.namespace": meta.namespace}


@dataclass(frozen=True)
class _Fields:
    """A kind's selectable fields: how to read each from an object (upstream's
    ToSelectableFields), the labels it accepts beyond them and its renames (its field label
    conversion function)."""

    getters: Getters
    extra: frozenset[str] = frozenset()
    renames: Mapping[str, str] = field(default_factory=dict)
    specific: bool = True  # False: upstream's DefaultMetaV1FieldSelectorConversion

    def convert(self, label: str) -> str:
        if label in self.renames:
            return self.renames[label]
        if label in self.getters or label in self.extra:
            return label
        if not self.specific:
            raise SelectorError(f'"{label}" is not a known field selector: only '
                                '"metadata.name", "metadata.namespace"')
        raise SelectorError(f"field label not supported: {label}")

    def read(self, obj: Obj, names: Iterable[str] | None = None) -> dict[str, str]:
        wanted = self.getters if names is None else names
        return {n: self.getters[n](obj) for n in wanted if n in self.getters}


_META_ONLY = _Fields(_NAMESPACED, specific=False)
FIELDS: Mapping[str, _Fields] = {
    "Pod": _Fields({
        **_NAMESPACED,
        "spec.nodeName": _get("spec", "nodeName"),
        "spec.restartPolicy": _get("spec", "restartPolicy"),
        "spec.schedulerName": _get("spec", "schedulerName"),
        "spec.serviceAccountName": _get("spec", "serviceAccountName"),
        "spec.hostNetwork": _bool("spec", "hostNetwork"),
        "status.phase": _get("status", "phase"),
        "status.podIP": _pod_ip,
        "status.nominatedNodeName": _get("status", "nominatedNodeName"),
    }, frozenset({"status.podIPs"}),  # accepted, never set: it matches only ""
        {"spec.host": "spec.nodeName"}),  # old v1 clients' name
    "Node": _Fields({**_NAME, "spec.unschedulable": _bool("spec", "unschedulable")}),
    "Namespace": _Fields({**_NAME, "status.phase": _get("status", "phase")}),
    "Event": _Fields({
        **_NAMESPACED,
        **{f"involvedObject.{f}": _get("involvedObject", f)
           for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion",
                     "fieldPath")},
        "reason": _get("reason"),
        "reportingComponent": _get("reportingComponent"),
        "source": _event_source,
        "type": _get("type"),
    }),
    "DaemonSet": _META_ONLY,
    "ControllerRevision": _META_ONLY,
    **{info.kind: _META_ONLY for info in kinds.USER_KINDS},
    "Secret": _Fields({**_NAMESPACED, "type": _get("type")}),
    "Service": _Fields({**_NAMESPACED, "spec.clusterIP": _get("spec", "clusterIP"),
                        "spec.type": _get("spec", "type")}),
    "Lease": _META_ONLY,
}
"""The selectable fields of each kind, as upstream's field label conversion functions
(pkg/apis/core/v1/conversion.go) and ToSelectableFields define them."""


def field_selector(kind: str, selector: str) -> FieldSelector:
    """Parse a ``fieldSelector`` for a kind, converting its labels as the API server does.
    Raises :class:`SelectorError` (``field label not supported: spec.foo``)."""
    parsed = parse_field_selector(selector)
    fields = FIELDS.get(kind, _META_ONLY)
    return FieldSelector(tuple(FieldRequirement(fields.convert(r.field), r.operator, r.value)
                               for r in parsed.requirements))


def selectable_fields(kind: str, obj: Obj, names: Iterable[str] | None = None
                      ) -> dict[str, str]:
    """The field set a field selector of ``kind`` is matched against (only ``names``, when
    given)."""
    return FIELDS.get(kind, _META_ONLY).read(obj, names)


# ---- both ---------------------------------------------------------------------------------


def label_selector(selector: str) -> labelsel.Selector:
    """Parse a ``labelSelector`` (``=``, ``==``, ``!=``, ``in``, ``notin``, ``key``, ``!key``,
    ``>``, ``<``). Raises :class:`SelectorError` with upstream's message."""
    try:
        return labelsel.parse_selector(selector)
    except ValueError as err:
        raise SelectorError(str(err)) from err


@dataclass(frozen=True)
class Selection:
    """The objects of one kind a list or watch selects: by labels and by fields."""

    kind: str
    labels: labelsel.Selector = field(default_factory=labelsel.Selector)
    fields: FieldSelector = field(default_factory=FieldSelector)

    def matches(self, obj: Obj) -> bool:
        if not self.labels.matches(meta.labels(obj)):
            return False
        if self.fields.empty():
            return True
        return self.fields.matches(selectable_fields(self.kind, obj, self.fields.names()))

    def everything(self) -> bool:
        return self.labels.empty() and self.fields.empty()


def selection(kind: str, label_selector_text: str | None = None,
              field_selector_text: str | None = None) -> Selection:
    """The :class:`Selection` of a list's ``labelSelector`` and ``fieldSelector`` query
    parameters (absent or empty: everything). Raises :class:`SelectorError`."""
    return Selection(kind,
                     label_selector(label_selector_text) if label_selector_text
                     else labelsel.Selector(),
                     field_selector(kind, field_selector_text) if field_selector_text
                     else FieldSelector())
