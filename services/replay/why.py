"""``why pod/NAME`` and ``why ds/NAME node/NODE``: answers from the log.

A pod: which DECISION created it (and, if it is gone or going, which one deleted it and
why), with what that sync read — the log position, the time it used, the expectations
flag, the revision hash, the backoff it saw. A node without a daemon pod: the reason the
DaemonSet's most recent decision about that node gave (selector, affinity, taint, failed-pod
backoff, rollout budget, …; a per-node decision is about the nodes its record names); when
no recent decision mentions the node, or the node changed since, the reason is computed now
from the current node and DaemonSet.

The functions here read the log and the store (act) and return the answer as lines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from services.replay import bounds, scan
from shared.daemonset import dsutil, placement, planner, rollout
from shared.daemonset import history as ds_history
from shared.daemonset import record as ds_record
from shared.daemonset import types as t
from shared.daemonset import unavailable as ds_unavailable
from shared.eventlog.entry import EntryType, RawEntry
from shared.eventlog.ports import EventLog
from shared.model import meta, podutil, tainteviction, taints
from shared.model.objkey import ObjectKey
from shared.store import adapters, codec, errors
from shared.store.backoff import RedisBackoff
from shared.store.client import Store
from shared.store.eventlog import RedisEventLog
from shared.store.expectations import RedisExpectations

Obj = dict[str, Any]
INDENT = "  "
Record = ds_record.DecisionRecord | tainteviction.EvictionRecord


@dataclass(frozen=True)
class Decision:
    """One DECISION entry of the log: its id, its object's key, its record."""

    id: str
    key: str
    rec: Record


def decision(hit: scan.Hit) -> Decision | None:
    """The decision a DECISION entry holds; None when its record cannot be read."""
    try:
        return Decision(hit.id, hit.key, ds_record.read(hit.obj))
    except errors.CorruptEntryError:
        return None


class WhyError(Exception):
    """The object asked about does not exist (and left no trace in the log)."""


def _log(store: Store) -> EventLog:
    return adapters.on(store, RedisEventLog)


def _when(entry_id: str) -> str:
    return f"{entry_id} ({bounds.id_time(entry_id)})"


def _position_line(store: Store, rec: Record) -> str:
    pos = rec.position
    hit = scan.entry_at(_log(store), pos) if pos != "0-0" else None
    what = f", the entry there: {hit.type} {hit.kind} {hit.key}" if hit is not None else ""
    return f"read the log through {_when(pos)}{what}"


def decision_inputs(store: Store, rec: ds_record.DecisionRecord,
                    node: str | None = None) -> list[str]:
    """The inputs of one recorded sync, as lines. Acts (reads the entry at its position)."""
    actions = rec.actions
    lines = [_position_line(store, rec),
             f"time used (now): {bounds.seconds_time(rec.now)}",
             "expectations: " + ("satisfied" if rec.expectations_satisfied
                                 else "pending (only claims and status)"),
             f"current revision hash: {actions.get('hash') or '<none>'}",
             f"decided: creates {len(actions.get('creates') or [])}, "
             f"deletes {len(actions.get('deletes') or [])}"]
    for k, (delay, last) in sorted(rec.backoff.items()):
        if node is None or k.endswith("/" + node):
            lines.append(f"failed-pod backoff {k}: delay {delay:g}s, last failure "
                         f"{bounds.seconds_time(float(last))}")
    if rec.errors:
        lines.append("errors: " + "; ".join(str(e) for e in rec.errors))
    return lines


def _by_user(hit: scan.Hit) -> str:
    return f" by user {hit.user}" if hit.user else ""


def why_changes(store: Store, kind: str, key: str, limit: int = 20) -> list[str]:
    """The most recent writes of one object in the retained log, oldest first, each with
    who made it (the API server's user, when recorded). Acts (reads the log)."""
    hits: list[scan.Hit] = []
    for hit in scan.backwards_in(_log(store), lambda e: e.kind == kind
                              and e.key == key and e.type != EntryType.DECISION):
        hits.append(hit)
        if len(hits) >= limit:
            break
    if not hits:
        raise WhyError(f"no write of {kind.lower()} {key} in the log (from "
                       f"{scan.first_id(_log(store)) or 'empty'})")
    lines = [f"{kind.lower()} {key}: its last {len(hits)} writes in the log"]
    for hit in reversed(hits):
        who = f"by user {hit.user}" if hit.user else "by a daemonbus process or the CLI"
        lines.append(f"{INDENT}{hit.type} entry {_when(hit.id)} {who} (generation "
                     f"{meta.metadata(hit.obj).get('generation', '-')})")
    return lines


def _decision_header(d: Decision) -> str:
    return f"decision {_when(d.id)} of daemonset {d.key} by worker {d.rec.worker or '?'}"


# ---- pods ----------------------------------------------------------------------------------


def _mentions(rec: Record, section: str, name: str) -> str | None:
    """The node of ``name`` in the record's creates ([node, pod]) or deletes ([pod, node])."""
    for item in rec.actions.get(section) or []:
        if section == "creates" and len(item) == 2 and item[1] == name:
            return str(item[0])
        if section == "deletes" and len(item) == 2 and item[0] == name:
            return str(item[1])
    return None


def delete_reason(rec: ds_record.DecisionRecord, pod: Obj, node: str) -> str:
    """Why a decision deleted ``pod`` (its last known state) on ``node``. Decides."""
    reason = rec.reasons.get(node)
    if reason and reason not in (planner.REASON_CREATE, planner.REASON_NO_POD):
        return f"the daemon should not run on {node}: {reason}"
    if podutil.is_failed(pod):
        return "the pod failed (phase Failed): failed daemon pods are deleted and recreated"
    current = rec.actions.get("hash")
    have = meta.labels(pod).get("controller-revision-hash")
    if current and have and have != current:
        return f"rolling update: the pod runs revision {have}, the DaemonSet's is {current}"
    return f"more than one daemon pod on {node}: the extra one is deleted"


def why_pod(store: Store, namespace: str, name: str) -> list[str]:
    """The story of pod ``namespace/name``: its creating and deleting decisions. Acts (reads
    the log backwards until the pod's creation, and the store)."""
    key = f"{namespace}/{name}"
    current = store.try_get("Pod", key)
    key_b, ns, name_b = key.encode(), namespace + "/", name.encode()

    def want(e: RawEntry) -> bool:
        if e.kind == "Pod" and e.key == key:
            return True
        if e.type != EntryType.DECISION or name_b not in e.payload:
            return False
        # a DaemonSet sync of the namespace, or a taint eviction on a node naming the pod
        return e.key.startswith(ns) or (e.kind == "Node" and key_b in e.payload)

    decisions: list[Decision] = []
    changes: list[scan.Hit] = []
    added: scan.Hit | None = None
    for hit in scan.backwards_in(_log(store), want):
        if hit.type == EntryType.DECISION:
            d = decision(hit)
            if d is not None:
                decisions.append(d)
            continue
        if current is not None and meta.uid(hit.obj) != meta.uid(current):
            continue
        changes.append(hit)
        if hit.type == EntryType.ADDED:
            added = hit
            break
    if current is None and not changes:
        raise WhyError(f'Error from server (NotFound): pods "{name}" not found, and the log '
                       f"(from {scan.first_id(_log(store)) or 'empty'}) never had it")
    uid = meta.uid(current) if current is not None else meta.uid(changes[0].obj)
    changes = [c for c in changes if meta.uid(c.obj) == uid]
    last = current if current is not None else changes[0].obj
    node = podutil.target_node(last) or ""
    lines = [f"pod {key} (uid {uid}, node {node or '<none>'})"]
    if current is not None:
        state = [podutil.phase(current) or "Pending"]
        if podutil.is_ready(current):
            state.append("ready")
        if meta.is_being_deleted(current):
            # deletionTimestamp is when it should be gone, not when its deletion started
            state.append(f"terminating, to be gone by {meta.deletion_timestamp(current)}")
        lines.append(f"{INDENT}now: {', '.join(state)}, revision "
                     f"{meta.labels(current).get('controller-revision-hash', '<none>')}")
    order = codec.id_tuple
    if added is None:
        lines.append(f"{INDENT}created {meta.creation_timestamp(last)}, before the retained log "
                     f"(which starts at {scan.first_id(_log(store))}): "
                     "no decision on record")
    else:
        lines.append(f"{INDENT}created: entry {_when(added.id)}{_by_user(added)}")
        creators = sorted((d for d in decisions if order(d.id) > order(added.id)
                           and isinstance(d.rec, ds_record.DecisionRecord)
                           and order(d.rec.position) < order(added.id)
                           and _mentions(d.rec, "creates", name) is not None),
                          key=lambda d: order(d.id))
        if creators:
            d = creators[0]
            assert isinstance(d.rec, ds_record.DecisionRecord)
            lines.append(f"{INDENT*2}by {_decision_header(d)}")
            lines += [INDENT * 3 + s for s in decision_inputs(store, d.rec, node)]
        else:
            lines.append(f"{INDENT*2}not by a DaemonSet sync on record (created by a user or "
                         "another client)")
    _deletion(store, lines, changes, decisions, added, name, node, last)
    return lines


def _deletion(store: Store, lines: list[str], changes: list[scan.Hit],
              decisions: list[Decision], added: scan.Hit | None, name: str, node: str,
              last: Obj) -> None:
    order = codec.id_tuple
    marked = [c for c in changes if c.type != EntryType.DELETED and meta.is_being_deleted(c.obj)]
    removed = [c for c in changes if c.type == EntryType.DELETED]
    if not marked and not removed:
        return
    first = min(marked + removed, key=lambda c: order(c.id))
    lines.append(f"{INDENT}deleted: entry {_when(first.id)}{_by_user(first)}"
                 + (f", removed from the store at {_when(removed[0].id)}" if removed else ""))
    since = order(added.id) if added is not None else (0, 0)
    deleters = sorted((d for d in decisions if order(d.id) >= order(first.id) and
                       isinstance(d.rec, ds_record.DecisionRecord) and
                       order(d.rec.position) >= since and
                       _mentions(d.rec, "deletes", name) is not None),
                      key=lambda d: order(d.id))
    if not deleters:
        evicted = _eviction(decisions, first, meta.key(last), meta.uid(last))
        if evicted is not None:
            lines += _eviction_lines(store, *evicted)
            return
        lines.append(f"{INDENT*2}not by a DaemonSet sync on record: by the garbage collector "
                     "(owner or node gone), the node agent (grace period over) or a user")
        return
    d = deleters[0]
    assert isinstance(d.rec, ds_record.DecisionRecord)
    dnode = _mentions(d.rec, "deletes", name) or node
    lines.append(f"{INDENT*2}by {_decision_header(d)}")
    lines.append(f"{INDENT*3}why: {delete_reason(d.rec, last, dnode)}")
    lines += [INDENT * 3 + s for s in decision_inputs(store, d.rec, dnode)]


def _eviction(decisions: list[Decision], first: scan.Hit, key: str, uid: str
              ) -> tuple[str, tainteviction.EvictionRecord, list[Any]] | None:
    """The taint-eviction decision (its entry id, record, and its entry for the pod) that
    deleted pod ``key`` of ``uid``, written with the deletion ``first``. Decides."""
    order = codec.id_tuple
    for d in sorted(decisions, key=lambda d: order(d.id)):
        if not isinstance(d.rec, tainteviction.EvictionRecord) \
                or order(d.id) < order(first.id):
            continue
        for item in d.rec.actions.get("evictions") or []:
            if len(item) == 5 and item[0] == key and item[1] == uid:
                return d.id, d.rec, item
    return None


def _eviction_lines(store: Store, entry_id: str, rec: tainteviction.EvictionRecord,
                    item: list[Any]) -> list[str]:
    """How a taint eviction reads in ``why pod``. Acts (reads the entry at its position)."""
    due = float(item[3])
    tolerated = (f"tolerated until {bounds.seconds_time(due)} (tolerationSeconds)" if item[4]
                 else "not tolerated")
    return [f"{INDENT*2}by the taint manager: decision {_when(entry_id)} on node "
            f"{rec.node} by {rec.worker or '?'}",
            f"{INDENT*3}why: NoExecute taint {item[2]}, {tolerated}",
            f"{INDENT*3}{_position_line(store, rec)}",
            f"{INDENT*3}time used (now): {bounds.seconds_time(rec.now)}"]


# ---- nodes ---------------------------------------------------------------------------------


def _inputs(ds: Obj, node: Obj) -> list[str]:
    """The placement inputs of a DaemonSet and a node, as lines. Decides."""
    spec = dsutil.template_spec(ds)
    ts = taints.node_taints(node)
    node_line = (f"node {meta.name(node)} (version {_when(meta.resource_version(node))}): "
                 f"labels {meta.labels(node)}; taints "
                 f"[{', '.join(taints.taint_string(x) for x in ts)}]")
    if (node.get("spec") or {}).get("unschedulable"):
        node_line += "; unschedulable"
    tol = ", ".join(f"{x.get('key', '*')}:{x.get('effect', '*')}"
                    for x in spec.get("tolerations") or [] if isinstance(x, dict))
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution")
    ds_line = (f"daemonset {meta.key(ds)} (generation {dsutil.generation(ds)}): nodeSelector "
               f"{spec.get('nodeSelector') or {}}; required node affinity "
               f"{'set' if affinity else 'none'}; tolerations [{tol}]")
    return [node_line, ds_line]


def _unnamed(rec: ds_record.DecisionRecord) -> str:
    """The note for a node a decision record counted among many without naming it."""
    counted = ", ".join(f"{n} {reason!r}" for reason, n in sorted(rec.reason_counts.items()))
    return f"the most recent decision counted nodes without naming them ({counted}); "


def _live_reason(store: Store, ds: Obj, node: Obj, now: float) -> str:
    """Why no pod runs on ``node`` judged on the current state (placement, then the whole
    plan: backoff, expectations, burst, rollout budget); "" when it should run there. Acts
    (reads the store, backoff and expectations; the judging is the planner's)."""
    reason = placement.why_not_run(node, ds)
    if reason:
        return reason
    return _live_plan(store, ds, now, [meta.name(node)]).reasons.get(meta.name(node), "")


def _live_plan(store: Store, ds: Obj, now: float, backoff_nodes: list[str] | None = None
               ) -> t.Plan:
    """The plan of ``ds`` on the current state, with the failed-pod backoff of
    ``backoff_nodes`` (every node when None). Acts (reads the store, backoff and
    expectations; the judging is the planner's)."""
    key, ns = meta.key(ds), meta.namespace(ds)
    gen = dsutil.observed_generation(ds)
    nodes = store.list("Node")
    names = backoff_nodes if backoff_nodes is not None else [meta.name(n) for n in nodes]
    backoff = adapters.on(store, RedisBackoff).get_many(
        [f"{meta.uid(ds)}/{gen}/{name}" for name in names])
    snap = t.Snapshot(key=key, ds=ds, nodes=nodes, pods=store.list("Pod", ns),
                      revisions=store.list("ControllerRevision", ns), backoff=backoff,
                      expectations_satisfied=adapters.on(store, RedisExpectations)
                      .satisfied(key, now), now=now,
                      priority_classes=store.priority_classes())
    return planner.plan(snap)


def why_daemonset(store: Store, ds_key: str, now: float) -> list[str]:
    """Why DaemonSet ``ds_key`` has unavailable pods, by cause with the node names, which
    nodes the rollout gates hold at the old revision, and its rollout conditions, judged on
    the current state. Acts (reads the store; the judging is the planner's)."""
    ds = store.try_get("DaemonSet", ds_key)
    if ds is None:
        raise WhyError(f'Error from server (NotFound): daemonsets.apps "{ObjectKey.parse(ds_key).name}" '
                       "not found")
    plan = _live_plan(store, ds, now)
    st = plan.status or {}
    desired, available = int(st.get("desiredNumberScheduled") or 0), int(
        st.get("numberAvailable") or 0)
    lines = [f"daemonset {ds_key}: {desired} desired, {available} available, "
             f"{desired - available} unavailable, {int(st.get('updatedNumberScheduled') or 0)} "
             f"updated (computed from the current state, {meta.format_time(now)})"]
    if plan.unavailable:
        lines.append(f"{INDENT}unavailable, by cause:")
        for reason in ds_unavailable.REASONS:
            nodes = plan.unavailable.get(reason)
            if nodes:
                lines.append(f"{INDENT*2}{reason} ({len(nodes)}): {', '.join(nodes)}")
    if plan.held:
        lines.append(f"{INDENT}held at the old revision by the rollout gates:")
        by_reason: dict[str, list[str]] = {}
        for node, reason in sorted(plan.held.items()):
            by_reason.setdefault(reason, []).append(node)
        for reason, nodes in by_reason.items():
            lines.append(f"{INDENT*2}{reason} ({len(nodes)}): {', '.join(nodes)}")
    waiting = sorted(n for n, r in plan.reasons.items() if r == rollout.REASON_BUDGET)
    if waiting:
        lines.append(f"{INDENT}{rollout.REASON_BUDGET} ({len(waiting)}): {', '.join(waiting)}")
    for cond in st.get("conditions") or []:
        if isinstance(cond, dict):
            lines.append(f"{INDENT}condition {cond.get('type')}={cond.get('status')} "
                         f"{cond.get('reason') or ''}: {cond.get('message') or ''}")
    return lines


def _failed_reason(store: Store, ds: Obj, node: str) -> str:
    """The failed-pod backoff of ``node``, as a reason. Acts (reads the backoff)."""
    key = f"{meta.uid(ds)}/{dsutil.observed_generation(ds)}/{node}"
    entry = adapters.on(store, RedisBackoff).get_many([key]).get(key)
    if entry is None:
        return "its pod failed: the next sync deletes it and creates a new one"
    return (f"its pod failed: failed-pod backoff of {entry.delay:g}s since "
            f"{bounds.seconds_time(entry.last_update)}; the pod is replaced after "
            f"{bounds.seconds_time(entry.last_update + entry.delay)}")


def _changed_since(rec: ds_record.DecisionRecord, ds: Obj, node: Obj, pods: list[Obj]
                   ) -> bool:
    """Whether what placement on ``node`` depends on changed after the sync ``rec`` read:
    the node, the DaemonSet's pods there, or its template (its revision hash). Decides."""
    read = codec.id_tuple(rec.position)
    if any(codec.id_tuple(meta.resource_version(o)) > read for o in [node, *pods]):
        return True
    current = ds_history.compute_hash(dsutil.template(ds), dsutil.collision_count(ds))
    return current != rec.actions.get("hash")


def why_node(store: Store, ds_key: str, node_name: str, now: float) -> list[str]:
    """Why DaemonSet ``ds_key`` has (or has no) pod on ``node_name``. Acts (reads the store
    and the log back to the DaemonSet's most recent decision)."""
    ds = store.try_get("DaemonSet", ds_key)
    if ds is None:
        raise WhyError(f'Error from server (NotFound): daemonsets.apps "{ObjectKey.parse(ds_key).name}" '
                       "not found")
    node = store.try_get("Node", "/" + node_name)
    if node is None:
        raise WhyError(f'Error from server (NotFound): nodes "{node_name}" not found')
    pods = [p for p in store.list("Pod", meta.namespace(ds))
            if (meta.controller_ref(p) or {}).get("uid") == meta.uid(ds)
            and podutil.target_node(p) == node_name]
    lines = [f"daemonset {ds_key} on node {node_name}:"]
    live = [p for p in pods if not meta.is_being_deleted(p)]
    for p in pods:
        lines.append(f"{INDENT}pod {meta.name(p)} is there ({podutil.phase(p) or 'Pending'}"
                     f"{', terminating' if meta.is_being_deleted(p) else ''}); "
                     f"see `daemonbus why pod/{meta.name(p)} -n {meta.namespace(p)}`")
    latest: Decision | None = None
    rec: ds_record.DecisionRecord | None = None
    for hit in scan.backwards_in(_log(store), lambda e: e.type == EntryType.DECISION
                              and e.key == ds_key):
        d = decision(hit)
        if d is not None and isinstance(d.rec, ds_record.DecisionRecord) \
                and d.rec.nodes is not None and node_name not in d.rec.nodes:
            continue  # a per-node decision about other nodes: it says nothing of this one
        if d is not None and isinstance(d.rec, ds_record.DecisionRecord) \
                and d.rec.uid == meta.uid(ds):
            latest, rec = d, d.rec
        break
    recorded = rec.reasons.get(node_name) if rec is not None else None
    stale = rec is not None and _changed_since(rec, ds, node, pods)
    if latest is not None and rec is not None and recorded:
        when = "at the time of" if stale else "from"
        if recorded == planner.REASON_CREATE:
            lines.append(f"{INDENT}the most recent decision created a pod here")
        else:
            lines.append(f"{INDENT}reason {when} the most recent decision: {recorded}")
        lines.append(f"{INDENT*2}{_decision_header(latest)}")
        lines += [INDENT * 3 + s for s in decision_inputs(store, rec, node_name)]
    if latest is None or not recorded or stale:
        why = _live_reason(store, ds, node, now)
        note = ("the node, the DaemonSet or its pod there changed since that decision; "
                if stale and recorded else
                _unnamed(rec) if latest is not None and rec is not None and rec.reason_counts
                else "the most recent decision does not mention this node; " if latest is not None
                else "no decision of this DaemonSet on record; ")
        failed = [p for p in live if podutil.is_failed(p)]
        if failed and not why:
            why = _failed_reason(store, ds, node_name)
        if why:
            lines.append(f"{INDENT}reason now ({note}computed from the current state): {why}")
        elif not live:
            lines.append(f"{INDENT}reason now ({note}computed from the current state): the "
                         "daemon should run here and has no pod yet: the next sync creates it")
        else:
            lines.append(f"{INDENT}the daemon should run here and does ({note}computed from "
                         "the current state)")
    lines.append(f"{INDENT}inputs (now, {meta.format_time(now)}):")
    lines += [INDENT * 2 + s for s in _inputs(ds, node)]
    return lines
