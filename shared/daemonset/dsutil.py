"""DaemonSet accessors on plain dicts, tolerant of undefaulted manifests. Pure.

Missing optional fields read as the apps/v1 defaults (spec §a.4): no updateStrategy is
RollingUpdate with maxUnavailable 1 and maxSurge 0, no revisionHistoryLimit is 10, no
minReadySeconds is 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.model import meta, syntax

Obj = dict[str, Any]

HASH_LABEL = "controller-revision-hash"
GENERATION_LABEL = "pod-template-generation"
GENERATION_ANNOTATION = "deprecated.daemonset.template.generation"

ROLLING_UPDATE = "RollingUpdate"
ON_DELETE = "OnDelete"

DEFAULT_REVISION_HISTORY_LIMIT = 10


def spec(ds: Obj) -> Obj:
    s = ds.get("spec")
    return s if isinstance(s, dict) else {}


def status(ds: Obj) -> Obj:
    s = ds.get("status")
    return s if isinstance(s, dict) else {}


def selector(ds: Obj) -> Any:
    return spec(ds).get("selector")


def template(ds: Obj) -> Obj:
    t = spec(ds).get("template")
    return t if isinstance(t, dict) else {}


def template_spec(ds: Obj) -> Obj:
    s = template(ds).get("spec")
    return s if isinstance(s, dict) else {}


def template_labels(ds: Obj) -> dict[str, str]:
    md = template(ds).get("metadata")
    lb = md.get("labels") if isinstance(md, dict) else None
    return dict(lb) if isinstance(lb, dict) else {}


def _int(value: Any, default: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        return default
    return value


def min_ready_seconds(ds: Obj) -> int:
    return _int(spec(ds).get("minReadySeconds"), 0)


def revision_history_limit(ds: Obj) -> int:
    return _int(spec(ds).get("revisionHistoryLimit"), DEFAULT_REVISION_HISTORY_LIMIT)


def generation(ds: Obj) -> int:
    return _int(meta.metadata(ds).get("generation"), 0)


def observed_generation(ds: Obj) -> int:
    return _int(status(ds).get("observedGeneration"), 0)


def collision_count(ds: Obj) -> int | None:
    """``status.collisionCount``; None when unset (nil and 0 hash differently)."""
    value = status(ds).get("collisionCount")
    return None if value is None else _int(value, 0)


def template_generation(ds: Obj) -> int | None:
    """The ``deprecated.daemonset.template.generation`` annotation as a number; None when it
    is missing or does not parse (``GetTemplateGeneration`` errors are treated as nil)."""
    raw = meta.annotations(ds).get(GENERATION_ANNOTATION)
    if raw is None:
        return None
    try:
        return syntax.parse_int64(str(raw))
    except ValueError:
        return None


@dataclass(frozen=True)
class UpdateStrategy:
    """The update strategy with the apps/v1 defaults applied."""

    type: str
    rolling_update: bool  # a rollingUpdate stanza exists (after defaulting)
    max_unavailable: Any  # int | str | None (IntOrString)
    max_surge: Any  # int | str | None


def update_strategy(ds: Obj) -> UpdateStrategy:
    raw = spec(ds).get("updateStrategy")
    strategy = raw if isinstance(raw, dict) else {}
    kind = str(strategy.get("type") or ROLLING_UPDATE)
    ru = strategy.get("rollingUpdate")
    if kind != ROLLING_UPDATE:
        ru_dict = ru if isinstance(ru, dict) else None
        return UpdateStrategy(
            kind,
            ru_dict is not None,
            ru_dict.get("maxUnavailable") if ru_dict else None,
            ru_dict.get("maxSurge") if ru_dict else None,
        )
    ru_dict = ru if isinstance(ru, dict) else {}
    mu = ru_dict.get("maxUnavailable")
    ms = ru_dict.get("maxSurge")
    return UpdateStrategy(kind, True, 1 if mu is None else mu, 0 if ms is None else ms)
