"""The opt-in rollout annotations of a DaemonSet (``rollout.daemonbus.io/…``): their names,
their validation (as fields: a bad value is refused with a field-named message) and their
parsed form. Pure: decides.

Without any of them a DaemonSet rolls exactly as upstream's does. ``options(ds)`` reads them
leniently (a value validation would refuse is taken as absent), because validation already
keeps bad values out of the store; the planner never fails on an annotation.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.model import fielderr, meta, selectors

PREFIX = "rollout.daemonbus.io/"
PAUSED = PREFIX + "paused"
PARTITION = PREFIX + "partition"
NODE_SELECTOR = PREFIX + "node-selector"
PROGRESS_DEADLINE = PREFIX + "progress-deadline-seconds"

_INT32_MAX = 2**31 - 1
_COUNT_RE = re.compile(r"^[0-9]+$")
_PERCENT_RE = re.compile(r"^[0-9]+%$")

_BOOL_DETAIL = 'must be "true" or "false"'
_PARTITION_DETAIL = "must be a non-negative integer or a percentage (e.g. '10%')"
_PERCENT_DETAIL = "must not be greater than 100%"
_DEADLINE_DETAIL = "must be a positive integer (seconds)"
_DEADLINE_MIN_READY = "must be greater than minReadySeconds"


@dataclass(frozen=True)
class Options:
    """The rollout annotations of one DaemonSet, parsed. ``partition`` is an int (nodes) or
    a ``"P%"`` string (of the eligible nodes, rounded up); ``node_selector`` None when unset."""

    paused: bool = False
    partition: int | str = 0
    node_selector: selectors.Selector | None = None
    progress_deadline: int | None = None

    @property
    def gated(self) -> bool:
        """Whether any annotation holds nodes back from the update."""
        return self.paused or self.partition not in (0, "0%") or self.node_selector is not None


NONE = Options()


def _partition_errors(value: str) -> list[str]:
    if _COUNT_RE.match(value):
        return [] if int(value) <= _INT32_MAX else [_PARTITION_DETAIL]
    if _PERCENT_RE.match(value):
        return [] if int(value[:-1]) <= 100 else [_PERCENT_DETAIL]
    return [_PARTITION_DETAIL]


def _selector_errors(value: str) -> list[str]:
    try:
        selectors.parse_selector(value)
    except ValueError as err:
        return [str(err)]
    return []


def _deadline_errors(value: str) -> list[str]:
    if _COUNT_RE.match(value) and 0 < int(value) <= _INT32_MAX:
        return []
    return [_DEADLINE_DETAIL]


def _bool_errors(value: str) -> list[str]:
    return [] if value in ("true", "false") else [_BOOL_DETAIL]


_CHECKS = {
    PAUSED: _bool_errors,
    PARTITION: _partition_errors,
    NODE_SELECTOR: _selector_errors,
    PROGRESS_DEADLINE: _deadline_errors,
}


def validate(annotations: Any, path: str, errs: list[str], min_ready_seconds: Any = 0) -> None:
    """Append an error for each rollout annotation of ``annotations`` (the object's
    ``metadata.annotations``, at ``path``) with a bad value, e.g.
    ``metadata.annotations[rollout.daemonbus.io/partition]: Invalid value: "x": …``; as a
    Deployment's progressDeadlineSeconds, the deadline must exceed ``min_ready_seconds``.
    Anything that is not a map of strings is left to ObjectMeta's validation."""
    if not isinstance(annotations, dict):
        return
    for name, check in _CHECKS.items():
        value = annotations.get(name)
        if not isinstance(value, str):
            continue
        problems = check(value)
        if (not problems and name == PROGRESS_DEADLINE and isinstance(min_ready_seconds, int)
                and int(value) <= min_ready_seconds):
            problems = [_DEADLINE_MIN_READY]
        errs.extend(fielderr.invalid(fielderr.key(path, name), value, detail)
                    for detail in problems)


def parse(annotations: Mapping[str, Any]) -> Options:
    """The options carried by ``annotations``; a value validation refuses counts as absent."""
    if not any(name in annotations for name in _CHECKS):
        return NONE
    values = {name: annotations.get(name) for name in _CHECKS}
    ok = {name: v for name, v in values.items()
          if isinstance(v, str) and not _CHECKS[name](v)}
    partition: int | str = 0
    if PARTITION in ok:
        text = ok[PARTITION]
        partition = text if text.endswith("%") else int(text)
    return Options(
        paused=ok.get(PAUSED) == "true",
        partition=partition,
        node_selector=(selectors.parse_selector(ok[NODE_SELECTOR]) if NODE_SELECTOR in ok
                       else None),
        progress_deadline=int(ok[PROGRESS_DEADLINE]) if PROGRESS_DEADLINE in ok else None,
    )


def options(ds: dict[str, Any]) -> Options:
    """The rollout options of DaemonSet ``ds``."""
    return parse(meta.annotations(ds))


def scaled_partition(partition: int | str, eligible: int) -> int:
    """How many of ``eligible`` nodes the partition keeps at the old revision: an int as is,
    ``"P%"`` → ceil(P·eligible/100) (rounded up as maxUnavailable is: the safer side)."""
    if isinstance(partition, int):
        return partition
    return -(-int(partition[:-1]) * eligible // 100)
