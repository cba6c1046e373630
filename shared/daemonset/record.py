"""Decision records: the canonical, comparable summary of a Plan and the inputs a replay
needs beyond the log (decides nothing, does no IO).

A record is written to the log after each sync. ``replay --verify`` rebuilds the objects up
to ``position``, builds the same Snapshot with the recorded ``now``, expectations flag and
backoff entries, re-plans, and compares ``summarize(plan)`` with the recorded ``actions``.
"""

from __future__ import annotations

from typing import Any

from shared.daemonset import types as t

RECORD_VERSION = 1


def summarize(plan: t.Plan) -> dict[str, Any]:
    """Every effect of a plan, as plain data in a stable order."""
    out: dict[str, Any] = {"hash": plan.hash}
    history: list[list[Any]] = []
    for h in plan.history:
        if isinstance(h, t.CreateRevision):
            md = h.revision.get("metadata") or {}
            history.append(["create-revision", md.get("name"), h.revision.get("revision")])
        elif isinstance(h, t.UpdateRevision):
            history.append(
                ["update-revision", h.name, h.revision, sorted((h.labels or {}).items())]
            )
        elif isinstance(h, t.DeleteRevision):
            history.append(["delete-revision", h.name])
        elif isinstance(h, t.RelabelPod):
            history.append(["relabel-pod", h.name, sorted(h.labels.items())])
        elif isinstance(h, t.PatchOwner):
            history.append(["adopt" if h.adopt else "release", h.kind, h.name])
    out["history"] = history
    out["claims"] = [["adopt" if c.adopt else "release", c.kind, c.name] for c in plan.claims]
    if plan.sync_nodes is not None:
        out["creates"] = [
            [c.node, (c.pod.get("metadata") or {}).get("name")] for c in plan.sync_nodes.creates
        ]
        out["deletes"] = [[d.name, d.node] for d in plan.sync_nodes.deletes]
    else:
        out["creates"], out["deletes"] = [], []
    out["cleanup"] = [c.name for c in plan.cleanup]
    if plan.failure is not None:  # only when taken: older records compare unchanged
        f = plan.failure
        out["failure"] = [f.action, f.resource_version, sorted(f.annotations.items()),
                          f.template]
    out["events"] = [[e.type, e.reason, e.message] for e in plan.events]
    out["backoff"] = [[b.key, b.entry.delay, b.entry.last_update] for b in plan.backoff]
    out["requeue_after"] = plan.requeue_after
    out["status"] = plan.status
    out["observed"] = plan.update_observed_generation
    return out


def make_record(snap: t.Snapshot, plan: t.Plan, worker: str = "") -> dict[str, Any]:
    return {
        "rv": RECORD_VERSION,
        "key": snap.key,
        "position": snap.position,
        "now": snap.now,
        "uid": ((snap.ds or {}).get("metadata") or {}).get("uid", ""),
        "expectationsSatisfied": snap.expectations_satisfied,
        "backoff": {k: [v.delay, v.last_update] for k, v in sorted(snap.backoff.items())},
        "actions": summarize(plan),
        "reasons": dict(sorted(plan.reasons.items())),
        "worker": worker,
    }


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """Where two summaries first differ ("creates[3]: ['n1', 'x'] != ['n2', 'x']")."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            d = first_difference(a.get(k), b.get(k), f"{path}.{k}" if path else str(k))
            if d:
                return d
        return None
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        for i in range(max(len(a), len(b))):
            if i >= len(a) or i >= len(b):
                return (
                    f"{path}[{i}]: {a[i] if i < len(a) else '<none>'!r} != "
                    f"{b[i] if i < len(b) else '<none>'!r}"
                )
            d = first_difference(a[i], b[i], f"{path}[{i}]")
            if d:
                return d
        return None
    if a != b:
        return f"{path}: {a!r} != {b!r}"
    return None
