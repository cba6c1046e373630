"""How objects look on the terminal, as kubectl prints them: ages, aligned tables (``get``),
and the JSON, YAML and name outputs. Pure: objects and ``now`` in, text out.

Tables follow kubectl's table printers column for column (pkg/printers/internalversion);
alignment is Go's ``text/tabwriter`` with kubectl's settings (min width 6, padding 3).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import yaml

from services.cli import resources
from shared.model import kinds, labels, meta

Obj = dict[str, Any]
NONE = "<none>"


# ---- time ---------------------------------------------------------------------------------


def human_duration(seconds: float) -> str:
    """``duration.HumanDuration``: ``5s``, ``3m2s``, ``15m``, ``4h``, ``5h3m``, ``2d``, ``3d4h``,
    ``1y``."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        years, days = hours // 24 // 365, (hours // 24) % 365
        return f"{years}y{days}d" if days else f"{years}y"
    return f"{hours // 24 // 365}y"


def age(timestamp: Any, now: float) -> str:
    """Time since an RFC 3339 timestamp (``translateTimestampSince``); ``<unknown>`` if unset."""
    t = meta.parse_time(str(timestamp)) if timestamp else None
    return "<unknown>" if t is None else human_duration(now - t)


# ---- alignment ----------------------------------------------------------------------------


def tabwrite(lines: Sequence[str], minwidth: int, padding: int) -> str:
    """Align tab-separated cells as Go's ``text/tabwriter`` does: a column block is a run of
    consecutive lines that have a tab-terminated cell in that column; every cell of a block
    is padded to the block's widest cell plus ``padding`` (at least ``minwidth``). The last
    cell of a line is not terminated, so it is never padded."""
    rows = [line.split("\t") for line in lines]
    widths: list[list[int]] = [[0] * (len(r) - 1) for r in rows]

    def block(first: int, last: int, col: int) -> None:
        i = first
        while i < last:
            if len(rows[i]) - 1 <= col:
                i += 1
                continue
            j, width = i, minwidth
            while j < last and len(rows[j]) - 1 > col:
                width = max(width, len(rows[j][col]) + padding)
                j += 1
            for k in range(i, j):
                widths[k][col] = width
            block(i, j, col + 1)
            i = j

    block(0, len(rows), 0)
    out = []
    for row, ws in zip(rows, widths, strict=True):
        cells = [c.ljust(w) for c, w in zip(row, ws, strict=False)] + [row[-1]]
        out.append("".join(cells))
    return "\n".join(out) + ("\n" if out else "")


def table(header: Sequence[str] | None, rows: Sequence[Sequence[str]]) -> str:
    """A ``get`` table (kubectl: min width 6, padding 3)."""
    lines = ["\t".join(header)] if header else []
    lines += ["\t".join(r) for r in rows]
    return tabwrite(lines, 6, 3)


# ---- columns per kind ---------------------------------------------------------------------


def _join_labels(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or NONE


def _int(value: Any) -> str:
    return str(value if isinstance(value, int) else 0)


def _containers(obj: Obj) -> list[Obj]:
    spec = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    return [c for c in spec.get("containers") or [] if isinstance(c, dict)]


def daemonset_row(ds: Obj, now: float, wide: bool) -> list[str]:
    st = ds.get("status") or {}
    spec = ds.get("spec") or {}
    node_selector = ((spec.get("template") or {}).get("spec") or {}).get("nodeSelector") or {}
    row = [
        _int(st.get("desiredNumberScheduled")), _int(st.get("currentNumberScheduled")),
        _int(st.get("numberReady")), _int(st.get("updatedNumberScheduled")),
        _int(st.get("numberAvailable")), labels.format_node_selector(node_selector),
        age(meta.creation_timestamp(ds), now),
    ]
    if wide:
        cs = _containers(ds)
        row += [",".join(str(c.get("name", "")) for c in cs),
                ",".join(str(c.get("image", "")) for c in cs),
                labels.format_selector(spec.get("selector"))]
    return row


def _pod_ready_and_reason(pod: Obj) -> tuple[str, str, int]:
    spec, st = pod.get("spec") or {}, pod.get("status") or {}
    total = len(spec.get("containers") or [])
    phase = str(st.get("phase") or "")
    reason = str(st.get("reason") or phase or "Pending")
    ready = restarts = 0
    statuses = [c for c in st.get("containerStatuses") or [] if isinstance(c, dict)]
    for cs in reversed(statuses):
        restarts += int(cs.get("restartCount") or 0)
        state = cs.get("state") or {}
        waiting, terminated = state.get("waiting"), state.get("terminated")
        if isinstance(waiting, dict) and waiting.get("reason"):
            reason = str(waiting["reason"])
        elif isinstance(terminated, dict):
            reason = str(terminated.get("reason") or
                         (f"Signal:{terminated['signal']}" if terminated.get("signal")
                          else f"ExitCode:{terminated.get('exitCode', 0)}"))
        elif cs.get("ready") and "running" in state:
            ready += 1
    if not statuses:
        cond = next((c for c in st.get("conditions") or []
                     if isinstance(c, dict) and c.get("type") == "Ready"), None)
        if cond is not None and cond.get("status") == "True":
            ready = total
    if meta.is_being_deleted(pod):
        if st.get("reason") == "NodeLost":
            reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            reason = "Terminating"
    return f"{ready}/{total}", reason, restarts


def pod_row(pod: Obj, now: float, wide: bool) -> list[str]:
    ready, reason, restarts = _pod_ready_and_reason(pod)
    row = [ready, reason, str(restarts), age(meta.creation_timestamp(pod), now)]
    if wide:
        spec, st = pod.get("spec") or {}, pod.get("status") or {}
        ips = st.get("podIPs") or []
        ip = (ips[0].get("ip") if ips and isinstance(ips[0], dict) else None) or st.get("podIP")
        gates = spec.get("readinessGates") or []
        gates_text = NONE
        if gates:
            conds = {c.get("type"): c.get("status") for c in st.get("conditions") or []}
            true = sum(1 for g in gates if conds.get(g.get("conditionType")) == "True")
            gates_text = f"{true}/{len(gates)}"
        row += [str(ip or NONE), str(spec.get("nodeName") or NONE),
                str(st.get("nominatedNodeName") or NONE), gates_text]
    return row


def node_status(node: Obj) -> str:
    """``Ready`` / ``NotReady`` / ``Unknown``, plus ``,SchedulingDisabled`` when cordoned."""
    conds = {c.get("type"): c for c in (node.get("status") or {}).get("conditions") or []
             if isinstance(c, dict)}
    ready = conds.get("Ready")
    parts = ["Unknown" if ready is None else
             "Ready" if ready.get("status") == "True" else "NotReady"]
    if (node.get("spec") or {}).get("unschedulable"):
        parts.append("SchedulingDisabled")
    return ",".join(parts)


def node_roles(node: Obj) -> str:
    """Roles from ``node-role.kubernetes.io/<role>`` and ``kubernetes.io/role`` labels."""
    roles = set()
    for k, v in meta.labels(node).items():
        if k.startswith("node-role.kubernetes.io/") and k.split("/", 1)[1]:
            roles.add(k.split("/", 1)[1])
        elif k == "kubernetes.io/role" and v:
            roles.add(v)
    return ",".join(sorted(roles)) or NONE


def node_address(node: Obj, kind: str) -> str:
    for a in (node.get("status") or {}).get("addresses") or []:
        if isinstance(a, dict) and a.get("type") == kind:
            return str(a.get("address"))
    return NONE


def node_row(node: Obj, now: float, wide: bool) -> list[str]:
    info = (node.get("status") or {}).get("nodeInfo") or {}
    row = [node_status(node), node_roles(node), age(meta.creation_timestamp(node), now),
           str(info.get("kubeletVersion") or "")]
    if wide:
        row += [node_address(node, "InternalIP"), node_address(node, "ExternalIP"),
                str(info.get("osImage") or "<unknown>"),
                str(info.get("kernelVersion") or "<unknown>"),
                str(info.get("containerRuntimeVersion") or "<unknown>")]
    return row


def controller_name(obj: Obj) -> str:
    """``daemonset.apps/x`` for the controller ownerReference, else ``<none>``."""
    ref = meta.controller_ref(obj)
    if ref is None:
        return NONE
    api_version = str(ref.get("apiVersion") or "")
    group = api_version.split("/", 1)[0] if "/" in api_version else ""
    kind = str(ref.get("kind") or "").lower()
    return f"{kind}.{group}/{ref.get('name')}" if group else f"{kind}/{ref.get('name')}"


def revision_row(cr: Obj, now: float, wide: bool) -> list[str]:
    return [controller_name(cr), str(cr.get("revision", 0)),
            age(meta.creation_timestamp(cr), now)]


def event_time(ev: Obj) -> float:
    """When an Event last happened (lastTimestamp, eventTime, firstTimestamp, creation)."""
    for f in ("lastTimestamp", "eventTime", "firstTimestamp"):
        t = meta.parse_time(ev.get(f))
        if t is not None:
            return t
    return meta.parse_time(meta.creation_timestamp(ev)) or 0.0


def event_object(ev: Obj) -> str:
    inv = ev.get("involvedObject") or {}
    kind = str(inv.get("kind") or "").lower()
    return f"{kind}/{inv['name']}" if inv.get("name") else kind


def event_source(ev: Obj) -> str:
    src = ev.get("source") or {}
    if src.get("component"):
        return str(src["component"]) + (f", {src['host']}" if src.get("host") else "")
    return str(ev.get("reportingComponent") or ev.get("reportingController") or "")


def event_row(ev: Obj, now: float, wide: bool) -> list[str]:
    last = age(ev.get("lastTimestamp") or ev.get("eventTime"), now)
    message = str(ev.get("message") or "").strip()
    inv = ev.get("involvedObject") or {}
    if not wide:
        return [last, str(ev.get("type") or ""), str(ev.get("reason") or ""),
                event_object(ev), message]
    return [last, str(ev.get("type") or ""), str(ev.get("reason") or ""), event_object(ev),
            str(inv.get("fieldPath") or ""), event_source(ev), message,
            age(ev.get("firstTimestamp") or ev.get("eventTime"), now),
            str(ev.get("count") or 1), meta.name(ev)]


RowFn = Callable[[Obj, float, bool], list[str]]

#: kind -> (columns, extra wide columns, row function). NAME (first) and the optional
#: NAMESPACE / LABELS / -L columns are added by ``get_table``; events have no NAME column.
COLUMNS: dict[str, tuple[list[str], list[str], RowFn]] = {
    "DaemonSet": (["DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "NODE SELECTOR",
                   "AGE"], ["CONTAINERS", "IMAGES", "SELECTOR"], daemonset_row),
    "Pod": (["READY", "STATUS", "RESTARTS", "AGE"],
            ["IP", "NODE", "NOMINATED NODE", "READINESS GATES"], pod_row),
    "Node": (["STATUS", "ROLES", "AGE", "VERSION"],
             ["INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME"],
             node_row),
    "ControllerRevision": (["CONTROLLER", "REVISION", "AGE"], [], revision_row),
    "Event": (["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
              ["LAST SEEN", "TYPE", "REASON", "OBJECT", "SUBOBJECT", "SOURCE", "MESSAGE",
               "FIRST SEEN", "COUNT", "NAME"], event_row),
}


def sort_objects(kind: str, objs: list[Obj]) -> list[Obj]:
    """kubectl's order: by namespace and name; Events by time."""
    if kind == "Event":
        return sorted(objs, key=lambda e: (event_time(e), meta.name(e)))
    return sorted(objs, key=lambda o: (meta.namespace(o), meta.name(o)))


def get_table(rt: kinds.KindInfo, objs: list[Obj], now: float, *, wide: bool = False,
              all_namespaces: bool = False, show_kind: bool = False, headers: bool = True,
              show_labels: bool = False, label_columns: Sequence[str] = ()) -> str:
    """The ``get`` table of objects of one type."""
    cols, wide_cols, row_fn = COLUMNS[rt.kind]
    is_event = rt.kind == "Event"
    header = [] if is_event else ["NAME"]
    header += wide_cols if (wide and is_event) else cols + (wide_cols if wide else [])
    header += [k.rsplit("/", 1)[-1].upper() for k in label_columns]
    if show_labels:
        header.append("LABELS")
    if all_namespaces and rt.namespaced:
        header.insert(0, "NAMESPACE")
    rows = []
    for obj in objs:
        name = resources.ref(rt, meta.name(obj)) if show_kind else meta.name(obj)
        row = row_fn(obj, now, wide)
        row = row if is_event else [name, *row]
        row += [meta.labels(obj).get(k, "") for k in label_columns]
        if show_labels:
            row.append(_join_labels(meta.labels(obj)))
        if all_namespaces and rt.namespaced:
            row.insert(0, meta.namespace(obj))
        rows.append(row)
    return table(header if headers else None, rows)


# ---- structured output --------------------------------------------------------------------


def as_list(items: list[Obj]) -> Obj:
    """kubectl's List wrapper for several objects."""
    return {"apiVersion": "v1", "items": items, "kind": "List",
            "metadata": {"resourceVersion": ""}}


def to_json(obj: Any) -> str:
    """Indented as kubectl prints it (4 spaces, keys sorted as Go marshals a map)."""
    return json.dumps(obj, indent=4, sort_keys=True, ensure_ascii=False) + "\n"


class _KubectlDumper(yaml.SafeDumper):
    """go-yaml's choices: double quotes where quoting is needed, ``|`` for multi-line text."""

    def choose_scalar_style(self) -> Any:
        style = super().choose_scalar_style()
        return '"' if style == "'" else style


def _str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", data,
                                   style="|" if "\n" in data else None)


_KubectlDumper.add_representer(str, _str)


def to_yaml(obj: Any) -> str:
    """Block-style YAML with sorted keys and unindented lists, as kubectl prints it."""
    return str(yaml.dump(obj, Dumper=_KubectlDumper, default_flow_style=False, sort_keys=True,
                         allow_unicode=True, width=1 << 30))
