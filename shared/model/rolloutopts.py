"""The opt-in rollout annotations of a DaemonSet (``rollout.daemonbus.io/…``): their names,
their validation (as fields: a bad value is refused with a field-named message) and their
parsed form. Pure: decides.

Without any of them a DaemonSet rolls exactly as upstream's does. ``options(ds)`` reads them
leniently (a value validation would refuse is taken as absent), because validation already
keeps bad values out of the store; the planner never fails on an annotation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from shared.model import fielderr, meta, selectors

PREFIX = "rollout.daemonbus.io/"
PAUSED = PREFIX + "paused"
PARTITION = PREFIX + "partition"
NODE_SELECTOR = PREFIX + "node-selector"
PROGRESS_DEADLINE = PREFIX + "progress-deadline-seconds"
FAILURE_ACTION = PREFIX + "failure-action"
MAX_FAILURE_RATIO = PREFIX + "max-failure-ratio"
FAILURE_WINDOW = PREFIX + "failure-window-seconds"
# written by the controller when it paused or rolled back a failed rollout (a JSON object:
# shared.daemonset.failure.record); read back so a decision is taken once per revision
FAILURE_RECORD = PREFIX + "failure-record"

PAUSE = "pause"
ROLLBACK = "rollback"
FAILURE_ACTIONS = (PAUSE, ROLLBACK)
DEFAULT_MAX_FAILURE_RATIO = Fraction(0)  # as Swarm's --update-max-failure-ratio: none
DEFAULT_FAILURE_WINDOW = 300  # seconds, as Nomad's healthy_deadline (5m)

_INT32_MAX = 2**31 - 1
_COUNT_RE = re.compile(r"^[0-9]+$")
_RATIO_RE = re.compile(r"^([01](\.[0-9]{1,6})?|\.[0-9]{1,6})$")
_PERCENT_RE = re.compile(r"^[0-9]+%$")

_BOOL_DETAIL = 'must be "true" or "false"'
_PARTITION_DETAIL = "must be a non-negative integer or a percentage (e.g. '10%')"
_PERCENT_DETAIL = "must not be greater than 100%"
_DEADLINE_DETAIL = "must be a positive integer (seconds)"
_DEADLINE_MIN_READY = "must be greater than minReadySeconds"
_RATIO_DETAIL = "must be a decimal number from 0 to 1 (e.g. '0.1')"
_RECORD_DETAIL = "must be a JSON object (written by the controller)"


@dataclass(frozen=True)
class Options:
    """The rollout annotations of one DaemonSet, parsed. ``partition`` is an int (nodes) or
    a ``"P%"`` string (of the eligible nodes, rounded up); ``node_selector`` None when unset."""

    paused: bool = False
    partition: int | str = 0
    node_selector: selectors.Selector | None = None
    progress_deadline: int | None = None
    failure_action: str | None = None  # "pause" | "rollback"; None: failures are not judged
    max_failure_ratio: Fraction = DEFAULT_MAX_FAILURE_RATIO
    failure_window: int = DEFAULT_FAILURE_WINDOW
    failure_record: Mapping[str, Any] | None = None  # FAILURE_RECORD, parsed

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


def _action_errors(value: str) -> list[str]:
    return [] if value in FAILURE_ACTIONS else ["<unsupported>"]  # not_supported, below


def _ratio_errors(value: str) -> list[str]:
    return [] if _RATIO_RE.match(value) and Fraction(value) <= 1 else [_RATIO_DETAIL]


def _record(value: str) -> dict[str, Any] | None:
    try:
        parsed = json.loads(value)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _record_errors(value: str) -> list[str]:
    return [] if _record(value) is not None else [_RECORD_DETAIL]


_CHECKS = {
    PAUSED: _bool_errors,
    PARTITION: _partition_errors,
    NODE_SELECTOR: _selector_errors,
    PROGRESS_DEADLINE: _deadline_errors,
    FAILURE_ACTION: _action_errors,
    MAX_FAILURE_RATIO: _ratio_errors,
    FAILURE_WINDOW: _deadline_errors,
    FAILURE_RECORD: _record_errors,
}
# the annotations counted in seconds, which a pod cannot meet before minReadySeconds
_SECONDS = (PROGRESS_DEADLINE, FAILURE_WINDOW)


def validate(annotations: Any, path: str, errs: list[str], min_ready_seconds: Any = 0) -> None:
    """Append an error for each rollout annotation of ``annotations`` (the object's
    ``metadata.annotations``, at ``path``) with a bad value, e.g.
    ``metadata.annotations[rollout.daemonbus.io/partition]: Invalid value: "x": …``; as a
    Deployment's progressDeadlineSeconds, the deadline (and the failure window) must exceed
    ``min_ready_seconds``; the failure action is one of ``pause``, ``rollback``. Anything
    that is not a map of strings is left to ObjectMeta's validation."""
    if not isinstance(annotations, dict):
        return
    for name, check in _CHECKS.items():
        value = annotations.get(name)
        if not isinstance(value, str):
            continue
        problems = check(value)
        if (not problems and name in _SECONDS and isinstance(min_ready_seconds, int)
                and int(value) <= min_ready_seconds):
            problems = [_DEADLINE_MIN_READY]
        if problems and name == FAILURE_ACTION:
            errs.append(fielderr.not_supported(fielderr.key(path, name), value,
                                               FAILURE_ACTIONS))
            continue
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
        failure_action=ok.get(FAILURE_ACTION),
        max_failure_ratio=(Fraction(ok[MAX_FAILURE_RATIO]) if MAX_FAILURE_RATIO in ok
                           else DEFAULT_MAX_FAILURE_RATIO),
        failure_window=int(ok[FAILURE_WINDOW]) if FAILURE_WINDOW in ok else DEFAULT_FAILURE_WINDOW,
        failure_record=_record(ok[FAILURE_RECORD]) if FAILURE_RECORD in ok else None,
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
