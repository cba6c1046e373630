"""``status.conditions`` of a DaemonSet that opts into the rollout annotations: ``Paused`` and
``Progressing``, with a Deployment's progress deadline. Pure: decides from the DaemonSet (its
cached status holds the previous conditions), the status just computed, how many nodes the
rollout gates hold and the snapshot's ``now``.

Without any ``rollout.daemonbus.io/`` annotation nothing here runs (upstream's DaemonSet has no
conditions of its own; any it carries are kept as they are), except that the two conditions
are dropped once the annotations are.

``Progressing``, as a Deployment's (``pkg/controller/deployment/progress.go``):

* ``True/NewRevisionAvailable`` — every desired node runs an updated, available pod; as a
  Deployment's complete rollout, it stays so while every scheduled pod is of the current
  revision (a pod that fails later, or a new node still without its pod, is not the
  rollout's: ``rolled_out``), until a new revision rolls out;
* ``Unknown/RolloutPaused`` — the paused annotation is set (a Deployment's DeploymentPaused);
* ``True/RolloutPartitioned`` — the rollout stopped at its gates: every node the partition
  or the node selector does not hold is updated and available;
* ``True/DaemonSetUpdated`` — in progress; its ``lastTransitionTime`` is the last progress
  (more pods updated, ready or available than the cached status says), or the start;
* ``False/ProgressDeadlineExceeded`` — in progress, and ``progress-deadline-seconds`` passed
  since that time (a Warning Event goes with the change). Progress sets it back to
  ``True/DaemonSetUpdated``.

apps/v1 ``DaemonSetCondition`` has no ``lastUpdateTime`` (a Deployment's condition has), and a
stored field the schema lacks would make strict field validation refuse every later apply of
the DaemonSet. So ``lastTransitionTime`` carries both: it changes when ``status`` does and when
progress is made (or the rollout starts), never on a resync without change, so such a resync
publishes the same conditions.

``RolloutFailed=True`` (reason ``PausedOnFailure`` or ``RolledBack``, the record's message)
while the failure record (``rollout.daemonbus.io/failure-record``, ``shared.daemonset.failure``)
speaks of the current revision: the one it paused, or the one it rolled back to.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from shared.daemonset import dsutil
from shared.daemonset.types import EmitEvent
from shared.model import meta, rolloutopts

Obj = dict[str, Any]

PROGRESSING = "Progressing"
PAUSED = "Paused"
ROLLOUT_FAILED = "RolloutFailed"

REASON_AVAILABLE = "NewRevisionAvailable"
REASON_PAUSED = "RolloutPaused"
REASON_PARTITIONED = "RolloutPartitioned"
REASON_UPDATED = "DaemonSetUpdated"
REASON_DEADLINE = "ProgressDeadlineExceeded"
REASON_FAILURE_PAUSED = "PausedOnFailure"
REASON_ROLLED_BACK = "RolledBack"

_PROGRESS_FIELDS = ("updatedNumberScheduled", "numberReady", "numberAvailable")


@dataclass
class Outcome:
    """The new condition list, the Events and the requeue the deadline needs (None: none)."""

    conditions: list[Obj]
    events: list[EmitEvent] = field(default_factory=list)
    requeue_after: float | None = None


def find(conditions: Sequence[Any], kind: str) -> Obj | None:
    """The condition of type ``kind`` in a status' ``conditions`` (malformed entries skipped)."""
    for c in conditions:
        if isinstance(c, dict) and c.get("type") == kind:
            return c
    return None


def conditions_of(status: Obj) -> list[Any]:
    got = status.get("conditions")
    return got if isinstance(got, list) else []


def _condition(old: Obj | None, kind: str, status: str, reason: str, message: str,
               now: float, touched: bool) -> Obj:
    """The condition, keeping ``old``'s time unless its status changes (a transition) or
    ``touched`` (progress made, or the rollout started)."""
    stamp = meta.format_time(now)
    kept = old is not None and old.get("status") == status and not touched
    return {
        "type": kind,
        "status": status,
        "lastTransitionTime": (old or {}).get("lastTransitionTime", stamp) if kept else stamp,
        "reason": reason,
        "message": message,
    }


def _progressed(old_status: Obj, new_status: Obj) -> bool:
    return any(int(new_status.get(f) or 0) > int(old_status.get(f) or 0)
               for f in _PROGRESS_FIELDS)


def rolled_out(ds: Obj, new_status: Obj) -> bool:
    """Whether the rollout of the current revision is complete: every desired node runs an
    updated, available pod, or it did (the cached Progressing is NewRevisionAvailable) and
    every node that runs a pod still runs one of the current revision. Decides."""
    desired = int(new_status.get("desiredNumberScheduled") or 0)
    updated = int(new_status.get("updatedNumberScheduled") or 0)
    if updated >= desired and int(new_status.get("numberAvailable") or 0) >= desired:
        return True
    previous = find(conditions_of(dsutil.status(ds)), PROGRESSING)
    return ((previous or {}).get("reason") == REASON_AVAILABLE
            and updated >= int(new_status.get("currentNumberScheduled") or 0))


def rollout_conditions(ds: Obj, new_status: Obj, held: int, now: float,
                       hash: str = "") -> Outcome | None:
    """The conditions ``new_status`` should carry; None when ``ds`` has no rollout annotation
    (its conditions are left as they are). ``held`` counts the nodes the gates held in this
    pass (``gates.held_nodes``); ``hash`` is the current revision's."""
    old_status = dsutil.status(ds)
    old = conditions_of(old_status)
    kept = [c for c in old if not (isinstance(c, dict)
                                   and c.get("type") in (PROGRESSING, PAUSED, ROLLOUT_FAILED))]
    annotations = meta.annotations(ds)
    if not any(k.startswith(rolloutopts.PREFIX) for k in annotations):
        # the annotations are gone: so are their conditions
        return Outcome(conditions=kept) if len(kept) < len(old) else None
    opts = rolloutopts.parse(annotations)
    name = meta.name(ds)
    out = Outcome(conditions=kept)
    if opts.paused:
        out.conditions.append(_condition(find(old, PAUSED), PAUSED, "True", REASON_PAUSED,
                                         f"rollout paused by {rolloutopts.PAUSED}", now, False))
    record = opts.failure_record
    if record is not None and hash and hash in (record.get("hash"), record.get("toHash")):
        reason = (REASON_ROLLED_BACK if record.get("toHash") == hash
                  else REASON_FAILURE_PAUSED)
        out.conditions.append(_condition(find(old, ROLLOUT_FAILED), ROLLOUT_FAILED, "True",
                                         reason, str(record.get("message") or ""), now, False))
    previous = find(old, PROGRESSING)
    previous_reason = (previous or {}).get("reason")
    desired = int(new_status.get("desiredNumberScheduled") or 0)
    updated = int(new_status.get("updatedNumberScheduled") or 0)
    available = int(new_status.get("numberAvailable") or 0)

    def progressing(status: str, reason: str, message: str, touched: bool = False) -> None:
        out.conditions.append(_condition(previous, PROGRESSING, status, reason, message, now,
                                         touched))

    if rolled_out(ds, new_status):
        progressing("True", REASON_AVAILABLE, f'daemon set "{name}" has successfully progressed.')
    elif opts.paused:
        progressing("Unknown", REASON_PAUSED, "daemon set is paused")
    elif held and updated + held >= desired and available >= desired:
        progressing("True", REASON_PARTITIONED,
                    f"{held} of {desired} nodes held at the old revision by "
                    f"{rolloutopts.PARTITION} or {rolloutopts.NODE_SELECTOR}")
    else:
        _in_progress(out, previous, previous_reason, opts, old_status, new_status, name, now)
    return out


def _in_progress(out: Outcome, previous: Obj | None, previous_reason: Any,
                 opts: rolloutopts.Options, old_status: Obj, new_status: Obj, name: str,
                 now: float) -> None:
    started = previous_reason not in (REASON_UPDATED, REASON_DEADLINE)
    progressed = _progressed(old_status, new_status)
    if started or progressed:
        last = now
    else:
        last = meta.parse_time(str((previous or {}).get("lastTransitionTime") or "")) or now
    deadline = opts.progress_deadline
    exceeded = previous_reason == REASON_DEADLINE and not progressed
    if deadline is not None and (exceeded or last + deadline <= now):
        out.conditions.append(_condition(previous, PROGRESSING, "False", REASON_DEADLINE,
                                         f'daemon set "{name}" has timed out progressing.',
                                         now, False))
        if previous_reason != REASON_DEADLINE:
            out.events.append(EmitEvent("Warning", REASON_DEADLINE,
                                        f'daemon set "{name}" has timed out progressing.'))
        return
    out.conditions.append(_condition(previous, PROGRESSING, "True", REASON_UPDATED,
                                     f'daemon set "{name}" is progressing.', now,
                                     touched=last == now))
    if deadline is not None:
        out.requeue_after = max(0.0, last + deadline - now)
