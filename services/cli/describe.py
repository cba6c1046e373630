"""``describe`` output, section for section as kubectl's describers print it (DaemonSet, Pod,
Node; a generic one for the other kinds). Pure: objects, related objects and ``now`` in,
text out. The sections themselves are in ``sections``.
"""

from __future__ import annotations

from typing import Any

from services.cli import printers
from services.cli import sections as sec
from shared.api import tables
from shared.model import labels, meta, podutil

Obj = dict[str, Any]


# ---- the describers --------------------------------------------------------------------------


def _pod_counts(ds: Obj, pods: list[Obj]) -> tuple[int, int, int, int]:
    counts = {"Running": 0, "Pending": 0, "Succeeded": 0, "Failed": 0}
    for p in pods:
        ref = meta.controller_ref(p)
        if ref is None or ref.get("uid") != meta.uid(ds):
            continue
        phase = str((p.get("status") or {}).get("phase") or "Pending")
        if phase in counts:
            counts[phase] += 1
    return counts["Running"], counts["Pending"], counts["Succeeded"], counts["Failed"]


def daemonset(ds: Obj, pods: list[Obj], evs: list[Obj], now: float) -> str:
    """``describe ds``: ``pods`` are the pods of its namespace, ``evs`` its Events."""
    w = sec.Writer()
    spec, st = ds.get("spec") or {}, ds.get("status") or {}
    template = spec.get("template") or {}
    selector = labels.format_selector(spec.get("selector"))
    w.write(0, f"Name:\t{meta.name(ds)}\n")
    w.write(0, f"Selector:\t{'' if selector == '<none>' else selector}\n")
    node_selector = labels.format_labels((template.get("spec") or {}).get("nodeSelector"))
    w.write(0, f"Node-Selector:\t{node_selector}\n")
    sec.multiline(w, "Labels", sec.labels_lines(meta.labels(ds)))
    sec.multiline(w, "Annotations", sec.annotation_lines(meta.annotations(ds)))
    for label, f in (("Desired Number of Nodes Scheduled", "desiredNumberScheduled"),
                     ("Current Number of Nodes Scheduled", "currentNumberScheduled"),
                     ("Number of Nodes Scheduled with Up-to-date Pods", "updatedNumberScheduled"),
                     ("Number of Nodes Scheduled with Available Pods", "numberAvailable"),
                     ("Number of Nodes Misscheduled", "numberMisscheduled")):
        w.write(0, f"{label}: {int(st.get(f) or 0)}\n")
    running, waiting, succeeded, failed = _pod_counts(ds, pods)
    w.write(0, f"Pods Status:\t{running} Running / {waiting} Waiting / {succeeded} Succeeded / "
               f"{failed} Failed\n")
    sec.pod_template(w, template)
    conds = [c for c in st.get("conditions") or [] if isinstance(c, dict)]
    if conds:  # as a Deployment's (only the rollout annotations set them)
        w.write(0, "Conditions:\n  Type\tStatus\tReason\n  ----\t------\t------\n")
        for c in conds:
            w.write(1, f"{c.get('type')} \t{c.get('status')} \t{c.get('reason') or ''}\n")
    sec.events(w, evs, now)
    return w.text()


def pod(p: Obj, evs: list[Obj], now: float) -> str:
    w = sec.Writer()
    spec, st = p.get("spec") or {}, p.get("status") or {}
    w.write(0, f"Name:\t{meta.name(p)}\n")
    w.write(0, f"Namespace:\t{meta.namespace(p)}\n")
    if spec.get("priority") is not None:
        w.write(0, f"Priority:\t{spec['priority']}\n")
    if spec.get("priorityClassName"):
        w.write(0, f"Priority Class Name:\t{spec['priorityClassName']}\n")
    if spec.get("serviceAccountName"):
        w.write(0, f"Service Account:\t{spec['serviceAccountName']}\n")
    node = spec.get("nodeName")
    w.write(0, f"Node:\t{node + '/' + str(st.get('hostIP') or '') if node else '<none>'}\n")
    if st.get("startTime"):
        w.write(0, f"Start Time:\t{sec.rfc1123(st['startTime'])}\n")
    sec.multiline(w, "Labels", sec.labels_lines(meta.labels(p)))
    sec.multiline(w, "Annotations", sec.annotation_lines(meta.annotations(p)))
    phase = str(st.get("phase") or "")
    if meta.is_being_deleted(p) and phase not in ("Succeeded", "Failed"):
        w.write(0, f"Status:\tTerminating (lasts {tables.age(meta.deletion_timestamp(p), now)})\n")
        w.write(0, f"Termination Grace Period:\t"
                   f"{meta.metadata(p).get('deletionGracePeriodSeconds', 0)}s\n")
    else:
        w.write(0, f"Status:\t{phase}\n")
    for label, f in (("Reason", "reason"), ("Message", "message")):
        if st.get(f):
            w.write(0, f"{label}:\t{st[f]}\n")
    w.write(0, f"IP:\t{st.get('podIP') or ''}\n")
    ref = meta.controller_ref(p)
    if ref is not None:
        w.write(0, f"Controlled By:\t{ref.get('kind')}/{ref.get('name')}\n")
    if spec.get("initContainers"):
        sec.containers(w, "Init Containers", spec["initContainers"],
                   st.get("initContainerStatuses"), "")
    sec.containers(w, "Containers", spec.get("containers") or [], st.get("containerStatuses"), "")
    if spec.get("ephemeralContainers"):
        sec.containers(w, "Ephemeral Containers", spec["ephemeralContainers"],
                       st.get("ephemeralContainerStatuses"), "")
    conds = [c for c in st.get("conditions") or [] if isinstance(c, dict)]
    if conds:
        w.write(0, "Conditions:\n  Type\tStatus\n")
        for c in conds:
            w.write(1, f"{c.get('type')} \t{c.get('status')} \n")
    sec.volumes(w, spec.get("volumes") or [], "")
    w.write(0, f"QoS Class:\t{st.get('qosClass') or podutil.qos_class(spec)}\n")
    sec.multiline(w, "Node-Selectors", sec.labels_lines(spec.get("nodeSelector")))
    sec.multiline(w, "Tolerations", sec.toleration_lines(spec.get("tolerations")))
    sec.events(w, evs, now)
    return w.text()


def node(n: Obj, pods: list[Obj], evs: list[Obj], now: float) -> str:
    """``describe node``: ``pods`` are all pods; those bound here and not terminal are listed."""
    w = sec.Writer()
    spec, st = n.get("spec") or {}, n.get("status") or {}
    w.write(0, f"Name:\t{meta.name(n)}\n")
    w.write(0, f"Roles:\t{tables.node_roles(n)}\n")
    sec.multiline(w, "Labels", sec.labels_lines(meta.labels(n)))
    sec.multiline(w, "Annotations", sec.annotation_lines(meta.annotations(n)))
    w.write(0, f"CreationTimestamp:\t{sec.rfc1123(meta.creation_timestamp(n))}\n")
    sec.multiline(w, "Taints", sec.taint_lines(spec.get("taints")))
    w.write(0, f"Unschedulable:\t{'true' if spec.get('unschedulable') else 'false'}\n")
    conds = [c for c in st.get("conditions") or [] if isinstance(c, dict)]
    if conds:
        w.write(0, "Conditions:\n  Type\tStatus\tLastHeartbeatTime\tLastTransitionTime\t"
                   "Reason\tMessage\n")
        w.write(1, "----\t------\t-----------------\t------------------\t------\t-------\n")
        for c in conds:
            w.write(1, f"{c.get('type')} \t{c.get('status')} \t"
                       f"{sec.rfc1123(c.get('lastHeartbeatTime'))} \t"
                       f"{sec.rfc1123(c.get('lastTransitionTime'))} \t{c.get('reason', '')} \t"
                       f"{c.get('message', '')}\n")
    w.write(0, "Addresses:\n")
    for a in st.get("addresses") or []:
        w.write(1, f"{a.get('type')}:\t{a.get('address')}\n")
    for title, f in (("Capacity", "capacity"), ("Allocatable", "allocatable")):
        if st.get(f):
            w.write(0, f"{title}:\n")
            for k, v in sorted(st[f].items()):
                w.write(0, f"  {k}:\t{v}\n")
    info = st.get("nodeInfo") or {}
    w.write(0, "System Info:\n")
    for label, f in (("Machine ID", "machineID"), ("System UUID", "systemUUID"),
                     ("Boot ID", "bootID"), ("Kernel Version", "kernelVersion"),
                     ("OS Image", "osImage"), ("Operating System", "operatingSystem"),
                     ("Architecture", "architecture"),
                     ("Container Runtime Version", "containerRuntimeVersion"),
                     ("Kubelet Version", "kubeletVersion"),
                     ("Kube-Proxy Version", "kubeProxyVersion")):
        w.write(0, f"  {label}:\t{info.get(f, '')}\n")
    here = [p for p in pods if (p.get("spec") or {}).get("nodeName") == meta.name(n)
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
    w.write(0, f"Non-terminated Pods:\t({len(here)} in total)\n")
    w.write(1, "Namespace\tName\tAge\n")
    w.write(1, "---------\t----\t---\n")
    for p in sorted(here, key=lambda p: (meta.namespace(p), meta.name(p))):
        w.write(1, f"{meta.namespace(p)}\t{meta.name(p)}\t"
                   f"{tables.age(meta.creation_timestamp(p), now)}\n")
    sec.events(w, evs, now)
    return w.text()


def generic(obj: Obj, evs: list[Obj], now: float) -> str:
    """Any other kind: identity, labels, annotations, then the remaining fields."""
    w = sec.Writer()
    w.write(0, f"Name:\t{meta.name(obj)}\n")
    if meta.namespace(obj):
        w.write(0, f"Namespace:\t{meta.namespace(obj)}\n")
    sec.multiline(w, "Labels", sec.labels_lines(meta.labels(obj)))
    sec.multiline(w, "Annotations", sec.annotation_lines(meta.annotations(obj)))
    w.write(0, f"API Version:\t{obj.get('apiVersion', '')}\n")
    w.write(0, f"Kind:\t{obj.get('kind', '')}\n")
    rest = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
    for line in printers.to_yaml(rest).splitlines() if rest else []:
        w.write(0, line + "\n")
    sec.events(w, evs, now)
    return w.text()


def describe(obj: Obj, pods: list[Obj], all_events: list[Obj], now: float) -> str:
    """The ``describe`` text of any object; ``pods`` and ``all_events`` are every Pod and
    Event (each describer picks the related ones)."""
    evs = sec.events_for(obj, all_events)
    kind = obj.get("kind")
    if kind == "DaemonSet":
        return daemonset(obj, [p for p in pods if meta.namespace(p) == meta.namespace(obj)],
                         evs, now)
    if kind == "Pod":
        return pod(obj, evs, now)
    if kind == "Node":
        return node(obj, pods, evs, now)
    return generic(obj, evs, now)
