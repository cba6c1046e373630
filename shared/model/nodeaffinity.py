"""Required node affinity and nodeSelector (core/v1) on plain dicts: matching. Pure (decides).

Spec §c.5 step 2, after ``GetRequiredNodeAffinity(pod).Match(node)``:

* ``spec.nodeSelector``: every key/value must be present and equal in the node labels;
* ``affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution``, when set: the
  terms are ORed; inside a term all matchExpressions (labels) and matchFields (only
  ``metadata.name`` exists as a node field) are ANDed; an empty term, or an empty term list,
  matches nothing; a term that does not parse matches nothing (the others still count).

Parse rules follow ``labels.NewRequirement``: the key must be a qualified name, every value a
valid label value; In/NotIn need ≥ 1 value, Exists/DoesNotExist none, Gt/Lt exactly one
integer. matchFields accept In/NotIn with exactly one value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]

NODE_NAME_FIELD = "metadata.name"

_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN_RE = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_INT_RE = re.compile(r"^[+-]?[0-9]+$")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def is_qualified_name(value: str) -> bool:
    """``validation.IsQualifiedName``: ``[prefix/]name``, name ≤ 63, prefix a DNS subdomain."""
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN_RE.match(prefix):
            return False
    else:
        return False
    return 0 < len(name) <= 63 and bool(_NAME_RE.match(name))


def is_label_value(value: str) -> bool:
    return value == "" or (len(value) <= 63 and bool(_NAME_RE.match(value)))


def parse_int64(value: str) -> int | None:
    """``strconv.ParseInt(value, 10, 64)``; None on error."""
    if not _INT_RE.match(value):
        return None
    number = int(value)
    return number if _INT64_MIN <= number <= _INT64_MAX else None


@dataclass(frozen=True)
class _LabelRequirement:
    key: str
    operator: str
    values: frozenset[str]
    number: int = 0  # the bound of Gt/Lt

    def matches(self, labels: dict[str, str]) -> bool:
        op = self.operator
        if op == "In":
            return self.key in labels and labels[self.key] in self.values
        if op == "NotIn":
            return self.key not in labels or labels[self.key] not in self.values
        if op == "Exists":
            return self.key in labels
        if op == "DoesNotExist":
            return self.key not in labels
        # Gt / Lt
        if self.key not in labels:
            return False
        value = parse_int64(str(labels[self.key]))
        if value is None:
            return False
        return value > self.number if op == "Gt" else value < self.number


@dataclass(frozen=True)
class _FieldRequirement:
    key: str
    value: str
    equal: bool  # In → equal, NotIn → not equal

    def matches(self, fields: dict[str, str]) -> bool:
        return (fields.get(self.key, "") == self.value) == self.equal


@dataclass(frozen=True)
class _Term:
    labels: tuple[_LabelRequirement, ...] | None  # None: no matchExpressions, not checked
    fields: tuple[_FieldRequirement, ...] | None  # None: no matchFields, not checked
    valid: bool

    def matches(self, labels: dict[str, str], fields: dict[str, str]) -> bool:
        if not self.valid:
            return False
        if self.labels is not None and not all(r.matches(labels) for r in self.labels):
            return False
        # As upstream: matchFields are only checked when the node has fields (a name).
        return not (
            self.fields is not None and fields and not all(r.matches(fields) for r in self.fields)
        )


def _strings(values: Any) -> list[str] | None:
    if values is None:
        return []
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        return None
    return list(values)


def _parse_label_requirement(expr: Any) -> _LabelRequirement | None:
    if not isinstance(expr, dict):
        return None
    key = expr.get("key")
    op = expr.get("operator")
    values = _strings(expr.get("values"))
    if not isinstance(key, str) or not is_qualified_name(key) or values is None:
        return None
    if not all(is_label_value(v) for v in values):
        return None
    if op in ("In", "NotIn"):
        return _LabelRequirement(key, op, frozenset(values)) if values else None
    if op in ("Exists", "DoesNotExist"):
        return None if values else _LabelRequirement(key, op, frozenset())
    if op in ("Gt", "Lt"):
        number = parse_int64(values[0]) if len(values) == 1 else None
        return None if number is None else _LabelRequirement(key, op, frozenset(), number)
    return None


def _parse_field_requirement(expr: Any) -> _FieldRequirement | None:
    if not isinstance(expr, dict):
        return None
    op = expr.get("operator")
    values = _strings(expr.get("values"))
    if op not in ("In", "NotIn") or values is None or len(values) != 1:
        return None
    return _FieldRequirement(str(expr.get("key") or ""), values[0], op == "In")


def _parse_term(term: Obj) -> _Term:
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not isinstance(exprs, list) or not isinstance(fields, list):
        return _Term(None, None, False)
    label_reqs = [_parse_label_requirement(e) for e in exprs]
    field_reqs = [_parse_field_requirement(e) for e in fields]
    if any(r is None for r in label_reqs) or any(r is None for r in field_reqs):
        return _Term(None, None, False)
    return _Term(
        tuple(r for r in label_reqs if r is not None) if label_reqs else None,
        tuple(r for r in field_reqs if r is not None) if field_reqs else None,
        True,
    )


@dataclass(frozen=True)
class NodeSelector:
    """A parsed ``NodeSelector`` (``LazyErrorNodeSelector``): terms ORed."""

    terms: tuple[_Term, ...]

    def matches(self, node: Obj) -> bool:
        labels = node_labels(node)
        fields = node_fields(node)
        return any(t.matches(labels, fields) for t in self.terms)


def parse_node_selector(selector: Any) -> NodeSelector:
    """Parse a ``NodeSelector`` object; empty terms are dropped (they match nothing)."""
    raw = selector.get("nodeSelectorTerms") if isinstance(selector, dict) else None
    terms: list[_Term] = []
    for term in raw if isinstance(raw, list) else []:
        if not isinstance(term, dict):
            continue
        if not term.get("matchExpressions") and not term.get("matchFields"):
            continue  # nil or empty term selects no objects
        terms.append(_parse_term(term))
    return NodeSelector(tuple(terms))


def node_name_selector(node: str) -> Obj:
    """The required node selector naming exactly ``node``: one term, one field requirement
    ``metadata.name In [node]``, as upstream's DaemonSet controller sets in each daemon pod
    (``shared.daemonset.podtemplate``)."""
    return {"nodeSelectorTerms": [
        {"matchFields": [{"key": NODE_NAME_FIELD, "operator": "In", "values": [node]}]}]}


def node_labels(node: Obj) -> dict[str, str]:
    md = node.get("metadata")
    lb = md.get("labels") if isinstance(md, dict) else None
    return lb if isinstance(lb, dict) else {}


def node_fields(node: Obj) -> dict[str, str]:
    md = node.get("metadata")
    name = md.get("name") if isinstance(md, dict) else None
    return {NODE_NAME_FIELD: str(name)} if name else {}


@dataclass(frozen=True)
class RequiredNodeAffinity:
    """``GetRequiredNodeAffinity(pod)``: the pod's nodeSelector map and required node affinity."""

    node_selector: dict[str, str] | None  # None: no nodeSelector (or an empty one)
    affinity: NodeSelector | None  # None: no requiredDuringScheduling… stanza

    def matches_node_selector(self, node: Obj) -> bool:
        if not self.node_selector:
            return True
        labels = node_labels(node)
        for k, v in self.node_selector.items():
            if labels.get(k) != v:
                return False
        return True

    def matches_affinity(self, node: Obj) -> bool:
        return self.affinity is None or self.affinity.matches(node)

    def matches(self, node: Obj) -> bool:
        return self.matches_node_selector(node) and self.matches_affinity(node)


def required_node_affinity(pod_spec: Obj) -> RequiredNodeAffinity:
    """Parse once, match many nodes: the required node constraints of a pod spec."""
    raw_selector = pod_spec.get("nodeSelector")
    node_selector = (
        {str(k): str(v) for k, v in raw_selector.items()}
        if isinstance(raw_selector, dict) and raw_selector
        else None
    )
    affinity = pod_spec.get("affinity")
    node_affinity = affinity.get("nodeAffinity") if isinstance(affinity, dict) else None
    required = (
        node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
        if isinstance(node_affinity, dict)
        else None
    )
    return RequiredNodeAffinity(
        node_selector, parse_node_selector(required) if required is not None else None
    )


def matches(pod_spec: Obj, node: Obj) -> bool:
    """Whether ``node`` satisfies the pod spec's nodeSelector and required node affinity."""
    return required_node_affinity(pod_spec).matches(node)
