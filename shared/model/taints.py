"""Taints and tolerations (core/v1) on plain dicts: matching. Pure (decides, no effects).

Spec §c.5 step 3. ``tolerationSeconds`` is ignored; the newer ``Lt``/``Gt`` toleration operators
(feature ``TaintTolerationComparisonOperators``) are not part of the baseline and tolerate nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

Obj = dict[str, Any]

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"


def _s(obj: Obj, key: str) -> str:
    value = obj.get(key)
    return str(value) if value is not None else ""


def tolerates(toleration: Obj, taint: Obj) -> bool:
    """Whether ``toleration`` tolerates ``taint`` (``Toleration.ToleratesTaint``).

    The effect and key must be empty (wildcard) or equal; then ``Exists`` tolerates any value
    and ``Equal`` (or an empty operator) needs equal values. Any other operator tolerates nothing.
    """
    effect = _s(toleration, "effect")
    if effect and effect != _s(taint, "effect"):
        return False
    key = _s(toleration, "key")
    if key and key != _s(taint, "key"):
        return False
    operator = _s(toleration, "operator")
    if operator == "Exists":
        return True
    if operator in ("", "Equal"):
        return _s(toleration, "value") == _s(taint, "value")
    return False


def tolerated_by_any(taint: Obj, tolerations: Iterable[Obj]) -> bool:
    return any(tolerates(t, taint) for t in tolerations)


def find_untolerated(
    taints: Iterable[Obj] | None, tolerations: Iterable[Obj] | None, effects: Collection[str]
) -> Obj | None:
    """The first taint whose effect is in ``effects`` that no toleration tolerates, else None
    (``FindMatchingUntoleratedTaint`` with an effect filter)."""
    tols = [t for t in (tolerations or []) if isinstance(t, dict)]
    for taint in taints or []:
        if not isinstance(taint, dict) or _s(taint, "effect") not in effects:
            continue
        if not tolerated_by_any(taint, tols):
            return taint
    return None


def taint_string(taint: Obj) -> str:
    """``key=value:effect`` (``key:effect`` when the value is empty), as ``Taint.ToString``."""
    value = _s(taint, "value")
    kv = f"{_s(taint, 'key')}={value}" if value else _s(taint, "key")
    return f"{kv}:{_s(taint, 'effect')}"


def node_taints(node: Obj) -> list[Obj]:
    spec = node.get("spec")
    taints = spec.get("taints") if isinstance(spec, dict) else None
    return [t for t in taints if isinstance(t, dict)] if isinstance(taints, list) else []
