"""Label selectors on plain dicts: matching LabelSelectors, parsing and printing. Pure.

Two shapes: the API's ``metav1.LabelSelector`` dict (``matchLabels``/``matchExpressions``),
matched by :func:`selector_matches`; and kubectl's string form (``-l a=b,c in (x)``), parsed
by :func:`parse_selector` into a :class:`Selector` (implemented in
:mod:`shared.model.selectors`), and both printed as kubectl's columns print them.
"""

from __future__ import annotations

from typing import Any

from shared.model import selectors
from shared.model.selectors import (
    DOES_NOT_EXIST,
    DOUBLE_EQUALS,
    EQUALS,
    EXISTS,
    GREATER_THAN,
    IN,
    LESS_THAN,
    NOT_EQUALS,
    NOT_IN,
    Requirement,
    Selector,
    parse_selector,
    selector_from_label_selector,
)

__all__ = [
    "DOES_NOT_EXIST",
    "DOUBLE_EQUALS",
    "EQUALS",
    "EXISTS",
    "GREATER_THAN",
    "IN",
    "LESS_THAN",
    "NOT_EQUALS",
    "NOT_IN",
    "Requirement",
    "Selector",
    "format_labels",
    "format_selector",
    "is_empty_selector",
    "parse_selector",
    "selector_from_label_selector",
    "selector_matches",
]


def is_empty_selector(selector: Any) -> bool:
    """A non-nil selector with no matchLabels and no matchExpressions (selects everything)."""
    return (
        isinstance(selector, dict)
        and not selector.get("matchLabels")
        and not selector.get("matchExpressions")
    )


def selector_matches(selector: Any, labels: dict[str, str]) -> bool:
    """Whether ``labels`` satisfy a LabelSelector.

    A nil (None) selector matches nothing; an empty selector ``{}`` matches everything, as
    ``metav1.LabelSelectorAsSelector`` converts them. An invalid operator matches nothing.
    """
    if selector is None or not isinstance(selector, dict):
        return False
    if not isinstance(labels, dict):
        labels = {}
    match_labels = selector.get("matchLabels") or {}
    exprs = selector.get("matchExpressions") or []
    if not isinstance(match_labels, dict) or not isinstance(exprs, list):
        return False
    for k, v in match_labels.items():
        if labels.get(k) != v:
            return False
    for req in exprs:
        if not isinstance(req, dict):
            return False
        k = req.get("key")
        op = req.get("operator")
        values = req.get("values") or []
        if not isinstance(k, str) or not isinstance(values, list):
            return False
        if op == "In":
            if k not in labels or labels[k] not in values:
                return False
        elif op == "NotIn":
            if k in labels and labels[k] in values:
                return False
        elif op == "Exists":
            if k not in labels:
                return False
        elif op == "DoesNotExist":
            if k in labels:
                return False
        else:
            return False
    return True


# ---- kubectl columns ------------------------------------------------------------------


def format_selector(selector: Any) -> str:
    """A LabelSelector as kubectl's ``SELECTOR`` column shows it (``FormatLabelSelector``):
    ``k8s-app=fluentd-logging``, ``a in (x,y),b``; ``<none>`` when it selects everything or
    is nil; ``<error>`` when it does not convert."""
    try:
        text = str(selectors.selector_from_label_selector(selector))
    except ValueError:
        return "<error>"
    return text or "<none>"


def format_labels(labels: Any) -> str:
    """A map of labels as kubectl's columns show it (``FormatLabels``: a DaemonSet's ``NODE
    SELECTOR``, a Service's ``SELECTOR``): sorted ``k=v`` pairs joined by commas, or
    ``<none>``."""
    if not isinstance(labels, dict):
        return "<none>"
    text = ",".join(sorted(f"{k}={v}" for k, v in labels.items()))
    return text or "<none>"
