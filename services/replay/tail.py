"""``log tail``: log entries as one readable line each.

``line(entry)`` decides the text (pure); ``last``/``follow`` read the log (act).
A line is ``ID  TIME  TYPE  KIND  KEY  SUMMARY``, the time being the commit time the entry id
carries; a decision's summary counts its actions (``creates 2 deletes 1 events 3 …``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from services.replay import bounds
from shared.daemonset import record as ds_record
from shared.eventlog.entry import EntryType, decode_as_stored
from shared.eventlog.ports import EventLog
from shared.model import meta, podutil, tainteviction, taints
from shared.store import codec, errors
from shared.store.log import LogReader

Obj = dict[str, Any]


def decision_summary(doc: Obj) -> str:
    """``creates N deletes M`` and the other non-empty action counts of a decision record
    (the map ``doc``, as logged). Decides."""
    try:
        rec = ds_record.read(doc)
    except errors.CorruptEntryError as err:
        return f"unreadable record: {err}"
    actions = rec.actions
    if isinstance(rec, tainteviction.EvictionRecord):
        return (f"evicts {len(actions.get('evictions') or [])} {rec.worker} "
                f"read-through {rec.position}")
    parts = [f"creates {len(actions.get('creates') or [])}",
             f"deletes {len(actions.get('deletes') or [])}"]
    for name in ("history", "claims", "cleanup", "events", "backoff"):
        n = len(actions.get(name) or [])
        if n:
            parts.append(f"{name} {n}")
    if actions.get("hash"):
        parts.append(f"hash {actions['hash']}")
    if not rec.expectations_satisfied:
        parts.append("expectations-pending")
    if rec.errors:
        parts.append(f"errors {len(rec.errors)}")
    if rec.worker:
        parts.append(f"worker {rec.worker}")
    parts.append(f"read-through {rec.position}")
    return " ".join(parts)


def _node_summary(node: Obj) -> str:
    ready = "Unknown"
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            ready = str(c.get("status"))
    parts = [f"ready={ready}"]
    if (node.get("spec") or {}).get("unschedulable"):
        parts.append("unschedulable")
    ts = taints.node_taints(node)
    if ts:
        parts.append("taints=" + ",".join(taints.taint_string(x) for x in ts))
    parts.append(f"labels={len(meta.labels(node))}")
    return " ".join(parts)


def _pod_summary(pod: Obj) -> str:
    parts = [f"node={podutil.node_name(pod) or podutil.target_node(pod) or '<none>'}",
             f"phase={podutil.phase(pod) or 'Pending'}"]
    if podutil.is_ready(pod):
        parts.append("ready")
    rev = meta.labels(pod).get("controller-revision-hash")
    if rev:
        parts.append(f"rev={rev}")
    if meta.is_being_deleted(pod):
        parts.append("terminating")
    return " ".join(parts)


def _ds_summary(ds: Obj) -> str:
    spec = ds.get("spec") or {}
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    images = ",".join(str(c.get("image")) for c in containers if isinstance(c, dict))
    st = ds.get("status") or {}
    parts = [f"gen={(ds.get('metadata') or {}).get('generation', '?')}", f"image={images}",
             f"desired={st.get('desiredNumberScheduled', 0)}",
             f"current={st.get('currentNumberScheduled', 0)}",
             f"ready={st.get('numberReady', 0)}",
             f"updated={st.get('updatedNumberScheduled', 0)}"]
    if meta.is_being_deleted(ds):
        parts.append("deleting")
    return " ".join(parts)


def object_summary(kind: str, obj: Obj) -> str:
    """A short description of an object's state, per kind. Decides."""
    if kind == "Node":
        return _node_summary(obj)
    if kind == "Pod":
        return _pod_summary(obj)
    if kind == "DaemonSet":
        return _ds_summary(obj)
    if kind == "ControllerRevision":
        owner = (meta.controller_ref(obj) or {}).get("name", "<none>")
        return f"revision={obj.get('revision')} owner={owner}"
    if kind == "Event":
        msg = str(obj.get("message") or "")
        return f"{obj.get('type')} {obj.get('reason')}: {msg[:80]}"
    return ""


def line(e: codec.Entry) -> str:
    """One entry as a line. Decides."""
    summary = decision_summary(e.obj) if e.type == EntryType.DECISION else object_summary(e.kind, e.obj)
    return f"{e.id}  {bounds.id_time(e.id)}  {e.type:<8}  {e.kind:<18}  {e.key}  {summary}"


def last(log: EventLog, n: int) -> list[codec.Entry]:
    """The newest ``n`` decodable entries, oldest first (undecodable ones are parked by
    readers and left out here). Acts (reads the log)."""
    out = []
    for raw in reversed(log.before("", n).entries if n > 0 else []):
        try:
            out.append(decode_as_stored(raw))
        except errors.CorruptEntryError:
            continue
    return out


def follow(reader: LogReader, block_ms: int = 1000) -> Iterator[list[codec.Entry]]:
    """Batches of entries after the reader's position as they are appended (forever).
    Acts."""
    while True:
        yield reader.read(count=1000, block_ms=block_ms)
