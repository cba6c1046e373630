"""A failed rollout pauses or rolls itself back (``rollout.daemonbus.io/failure-action``).
Pure: decides from the snapshot and its ``now``.

**Which pods are judged.** During the rollout of the current revision, on each node that
should run the daemon and is Ready, the live pods of the current revision. A pod is

* *failed* when its phase is Failed, a container waits in CrashLoopBackOff, or it is not
  available ``failure-window-seconds`` after its creation;
* *healthy* when it is available (ready for ``minReadySeconds``);
* *pending* otherwise (inside its window): the sync is requeued for the end of the window.

A pod on a node that is not Ready (or unreachable) is not judged: the node failed, not the
revision.

**The ratio.** ``failed / attempted`` against ``max-failure-ratio`` (exceeded when strictly
greater, as Swarm's ``--update-max-failure-ratio``), where *attempted* counts the nodes whose
pod of the current revision is judged (failed, healthy or pending): the pods the rollout has
tried so far, not the desired number. A rollout holds unavailable new pods against its
``maxUnavailable``/``maxSurge`` budget, so no more than about that many can fail at once; a
share of the desired number would never be reached on a large DaemonSet with a small budget
(it would stall instead, for the progress deadline to catch).

**When.** Only while the revision rolls out (``conditions.rolled_out`` is false: once every
node ran an updated, available pod, a pod that fails later is not the rollout's), when a
previous revision exists (the first rollout of a DaemonSet has nothing to go back or hold
to), not while paused, and with a RollingUpdate strategy.

**Once per revision.** The action writes the failure record (``FAILURE_RECORD``) with the
revision judged, the revision rolled back to, the counts and the nodes. With it:

* the revision rolled back to is not judged at all while it is current (a rollback never
  turns into a rollback of the rollback);
* the revision judged, when current again (resumed after a pause, or re-applied), is judged
  on the pods created after the record only: a resume is taken as acknowledging the failures
  counted, so the rollout goes on rather than pausing again at once.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from shared.daemonset import conditions, dsutil, history, podfacts, status, unavailable
from shared.daemonset.placement import Decision
from shared.daemonset.podfacts import PodFacts
from shared.daemonset.types import FailRollout
from shared.model import meta, podutil, rolloutopts

Obj = dict[str, Any]

NOT_AVAILABLE = "NotAvailableInWindow"
EVENT_REASON = "FailureRatioExceeded"
MAX_RECORDED_NODES = 10  # failed nodes named in the record (all are counted)


@dataclass
class Verdict:
    """What the judge found: the failed nodes (node → cause), how many were attempted, the
    action when the ratio is exceeded (its Warning Event, reason ``EVENT_REASON`` with the
    action's message, is written by the executor once the action is), and when a pending
    pod's window ends."""

    failed: dict[str, str] = field(default_factory=dict)
    attempted: int = 0
    action: FailRollout | None = None
    requeue_after: float | None = None


def _cause(facts: PodFacts, available: bool, created: float, window: int,
           now: float) -> str | None:
    """The failure of one judged pod, "" when healthy, None when pending."""
    if podutil.is_failed(facts.pod):
        return unavailable.FAILED
    if unavailable.crash_looping(facts.pod):
        return unavailable.CRASH_LOOPING
    if available:
        return ""
    return NOT_AVAILABLE if now >= created + window else None


def judge(
    ds: Obj,
    opts: rolloutopts.Options,
    nodes: Sequence[tuple[str, Obj]],
    decisions: Mapping[str, Decision],
    node_pods: Mapping[str, list[PodFacts]],
    hist: history.History,
    now: float,
) -> Verdict:
    """Judge the current revision's pods (see the module docstring). ``nodes`` are (name,
    Node) pairs in name order; ``hist`` the outcome of constructHistory."""
    verdict = Verdict()
    record = opts.failure_record
    previous = max(hist.old, key=history.revision_number, default=None)
    if (opts.failure_action is None or opts.paused or previous is None
            or (record is not None and record.get("toHash") == hist.hash)
            or dsutil.update_strategy(ds).type != dsutil.ROLLING_UPDATE):
        return verdict
    # complete or not, as this pass counts it (only DaemonSets with a failure action pay
    # for this second count of the status)
    counted = status.compute_status(ds, [name for name, _ in nodes], decisions, node_pods,
                                    now, True)
    if conditions.rolled_out(ds, counted):
        return verdict
    since = float("-inf")
    if record is not None and record.get("hash") == hist.hash:
        since = meta.parse_time(str(record.get("time") or "")) or since
    available = podfacts.availability(dsutil.min_ready_seconds(ds), now)
    window = opts.failure_window
    for name, node in nodes:
        if not decisions[name].should_run or unavailable.node_cause(node):
            continue
        judged = [p for p in node_pods.get(name, ()) if p.updated and not p.deleting
                  and podutil.creation_time(p.pod) > since]
        if not judged:
            continue
        verdict.attempted += 1
        causes = []
        for facts in judged:
            created = podutil.creation_time(facts.pod)
            cause = _cause(facts, available(facts), created, window, now)
            if cause is None:
                wait = max(0.0, created + window - now)
                verdict.requeue_after = (wait if verdict.requeue_after is None
                                         else min(verdict.requeue_after, wait))
            causes.append(cause)
        failed = next((c for c in causes if c), None)
        if failed:
            verdict.failed[name] = failed
    count = len(verdict.failed)
    if count and Fraction(count, verdict.attempted) > opts.max_failure_ratio:
        _act(verdict, ds, opts, hist, previous, now)
    return verdict


def _act(verdict: Verdict, ds: Obj, opts: rolloutopts.Options, hist: history.History,
         previous: Obj, now: float) -> None:
    """The pause or the rollback, with its record and its Event."""
    action = opts.failure_action or rolloutopts.PAUSE
    number = history.revision_number(hist.current)
    to_number = history.revision_number(previous)
    template = history.revision_template(previous) if action == rolloutopts.ROLLBACK else None
    if action == rolloutopts.ROLLBACK and not template:
        action = rolloutopts.PAUSE  # the previous revision holds no template to go back to
        template = None
    count, attempted = len(verdict.failed), verdict.attempted
    named = sorted(verdict.failed.items())
    shown = ", ".join(f"{node} {cause}" for node, cause in named[:MAX_RECORDED_NODES])
    if count > MAX_RECORDED_NODES:
        shown += f", and {count - MAX_RECORDED_NODES} more"
    done = ("paused" if action == rolloutopts.PAUSE
            else f"rolled back to revision {to_number}")
    ratio = _ratio_text(opts.max_failure_ratio)
    message = (f'daemon set "{meta.name(ds)}" rollout of revision {number} {done}: {count} of '
               f"{attempted} new pods failed (more than {rolloutopts.MAX_FAILURE_RATIO} "
               f"{ratio}): {shown}")
    record: Obj = {
        "action": action,
        "revision": number,
        "hash": hist.hash,
        "failed": count,
        "attempted": attempted,
        "maxFailureRatio": ratio,
        "failureWindowSeconds": opts.failure_window,
        "nodes": dict(named[:MAX_RECORDED_NODES]),
        "time": meta.format_time(now),
        "message": message,
    }
    annotations = {}
    if action == rolloutopts.ROLLBACK:
        record["toRevision"] = to_number
        record["toHash"] = history.revision_hash(previous)
    else:
        annotations[rolloutopts.PAUSED] = "true"
    annotations[rolloutopts.FAILURE_RECORD] = json.dumps(record, sort_keys=True,
                                                         separators=(",", ":"))
    verdict.action = FailRollout(
        action=action,
        namespace=meta.namespace(ds),
        name=meta.name(ds),
        uid=meta.uid(ds),
        resource_version=meta.resource_version(ds),
        annotations=annotations,
        template=template,
        message=message,
    )


def applied(ds: Obj, action: FailRollout) -> Obj:
    """The DaemonSet ``action`` writes: a copy of ``ds`` (as the plan saw it, its
    resourceVersion the precondition) with the annotations set and, for a rollback, the
    template replaced."""
    new = copy.deepcopy(ds)
    md = new.setdefault("metadata", {})
    md["resourceVersion"] = action.resource_version
    md["annotations"] = {**meta.annotations(new), **action.annotations}
    if action.template is not None:
        new.setdefault("spec", {})["template"] = copy.deepcopy(action.template)
    return new


def _ratio_text(ratio: Fraction) -> str:
    """The ratio as the annotation writes it (at most six decimals, validation's limit)."""
    text = f"{float(ratio):.6f}".rstrip("0").rstrip(".")
    return text or "0"
