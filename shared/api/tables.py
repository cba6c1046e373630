"""The ``meta.k8s.io/v1`` Table of each kind, with upstream's columns (pkg/printers/
internalversion/printers.go): the one set of printers that the API serves for ``as=Table``
and that ``daemonbus get`` prints. Pure: objects and ``now`` in, cells out.

Every column is always filled, as the API server fills them (it prints with ``Wide``): a
client shows the ``priority`` 0 columns, and the others too for ``-o wide``. Column names
are upstream's (``Up-to-date``, ``Node Selector``); kubectl prints them upper case.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shared.api import metrics, schema
from shared.model import labels, meta

Obj = dict[str, Any]
Cell = str | int
NONE = "<none>"

INCLUDE_OBJECT = ("None", "Metadata", "Object")
"""``includeObject`` values; ``Metadata`` (a PartialObjectMetadata per row) is the default."""


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


# ---- columns ------------------------------------------------------------------------------

_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_CORE = "io.k8s.api.core.v1."
_APPS = "io.k8s.api.apps.v1."


@dataclass(frozen=True)
class Column:
    """One ``TableColumnDefinition``. ``doc`` is the description, or the (definition,
    property) of the schema whose description upstream uses (read when first asked)."""

    name: str
    type: str = "string"
    priority: int = 0
    format: str = ""
    doc: str | tuple[str, str] = ""

    @property
    def header(self) -> str:
        """The column's heading as kubectl prints it."""
        return self.name.upper()

    def description(self) -> str:
        if isinstance(self.doc, str):
            return self.doc
        definition, prop = self.doc
        field = schema.definitions()[definition].get("properties", {}).get(prop, {})
        return str(field.get("description", ""))

    def definition(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "format": self.format,
                "description": self.description(), "priority": self.priority}


_NAME = Column("Name", format="name", doc=(_META, "name"))
_AGE = Column("Age", doc=(_META, "creationTimestamp"))


@dataclass(frozen=True)
class Printer:
    """A kind's columns and the function giving one object's cells, one per column."""

    columns: tuple[Column, ...]
    cells: Callable[[Obj, float], list[Cell]]
    conditions: Callable[[Obj], list[dict[str, str]]] | None = None


def _str(value: Any) -> str:
    return "" if value is None else str(value)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _map(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _dicts(value: Any) -> list[Obj]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


# DaemonSet ---------------------------------------------------------------------------------

_DS_STATUS = _APPS + "DaemonSetStatus"


def _daemonset(ds: Obj, now: float) -> list[Cell]:
    st, spec = _map(ds.get("status")), _map(ds.get("spec"))
    containers = _dicts(_map(_map(spec.get("template")).get("spec")).get("containers"))
    node_selector = _map(_map(spec.get("template")).get("spec")).get("nodeSelector") or {}
    return [meta.name(ds), _int(st.get("desiredNumberScheduled")),
            _int(st.get("currentNumberScheduled")), _int(st.get("numberReady")),
            _int(st.get("updatedNumberScheduled")), _int(st.get("numberAvailable")),
            labels.format_labels(node_selector),
            age(meta.creation_timestamp(ds), now),
            ",".join(_str(c.get("name")) for c in containers),
            ",".join(_str(c.get("image")) for c in containers),
            labels.format_selector(spec.get("selector"))]


DAEMONSET = Printer((
    _NAME,
    Column("Desired", "integer", doc=(_DS_STATUS, "desiredNumberScheduled")),
    Column("Current", "integer", doc=(_DS_STATUS, "currentNumberScheduled")),
    Column("Ready", "integer", doc=(_DS_STATUS, "numberReady")),
    Column("Up-to-date", "integer", doc=(_DS_STATUS, "updatedNumberScheduled")),
    Column("Available", "integer", doc=(_DS_STATUS, "numberAvailable")),
    Column("Node Selector", doc=(_CORE + "PodSpec", "nodeSelector")),
    _AGE,
    Column("Containers", priority=1, doc="Names of each container in the template."),
    Column("Images", priority=1, doc="Images referenced by each container in the template."),
    Column("Selector", priority=1, doc=(_APPS + "DaemonSetSpec", "selector")),
), _daemonset)


# Pod ---------------------------------------------------------------------------------------


def _condition_true(st: Obj, kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True"
               for c in _dicts(st.get("conditions")))


def _restartable(container: Obj | None) -> bool:
    return container is not None and container.get("restartPolicy") == "Always"


def _terminated_at(cs: Obj) -> float | None:
    last = _map(_map(cs.get("lastState")).get("terminated"))
    return meta.parse_time(last.get("finishedAt")) if last else None


def _later(a: float | None, b: float | None) -> float | None:
    return b if a is None or (b is not None and b > a) else a


def _init_status(spec: Obj, st: Obj, reason: str
                 ) -> tuple[str, int, int, float | None, int, float | None, bool]:
    """printPod's pass over init containers: (reason, ready sidecars, restarts, last restart,
    sidecar restarts, last sidecar restart, still initializing)."""
    init_specs = _dicts(spec.get("initContainers"))
    inits = {_str(c.get("name")): c for c in init_specs}
    ready = restarts = sidecar_restarts = 0
    last: float | None = None
    sidecar_last: float | None = None
    for i, cs in enumerate(_dicts(st.get("initContainerStatuses"))):
        restarts += _int(cs.get("restartCount"))
        last = _later(last, _terminated_at(cs))
        sidecar = _restartable(inits.get(_str(cs.get("name"))))
        if sidecar:
            sidecar_restarts += _int(cs.get("restartCount"))
            sidecar_last = _later(sidecar_last, _terminated_at(cs))
        state = _map(cs.get("state"))
        terminated, waiting = _map(state.get("terminated")), _map(state.get("waiting"))
        if "terminated" in state and _int(terminated.get("exitCode")) == 0:
            continue
        if sidecar and cs.get("started") is True:
            ready += 1 if cs.get("ready") else 0
            continue
        if "terminated" in state:
            reason = ("Init:" + _str(terminated["reason"]) if terminated.get("reason") else
                      f"Init:Signal:{terminated['signal']}" if _int(terminated.get("signal"))
                      else f"Init:ExitCode:{_int(terminated.get('exitCode'))}")
        elif waiting.get("reason") and waiting.get("reason") != "PodInitializing":
            reason = "Init:" + _str(waiting["reason"])
        else:
            reason = f"Init:{i}/{len(init_specs)}"
        return reason, ready, restarts, last, sidecar_restarts, sidecar_last, True
    return reason, ready, restarts, last, sidecar_restarts, sidecar_last, False


def _pod_status(pod: Obj) -> tuple[str, str, int, float | None]:
    """Upstream printPod's READY, STATUS and RESTARTS (and the last restart's time)."""
    spec, st = _map(pod.get("spec")), _map(pod.get("status"))
    phase = _str(st.get("phase"))
    reason = _str(st.get("reason")) or phase or "Pending"  # the API server defaults the phase
    conditions = _dicts(st.get("conditions"))
    if any(c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated"
           for c in conditions):
        reason = "SchedulingGated"
    total = len(_dicts(spec.get("containers")))
    ready = restarts = 0
    last: float | None = None
    initializing = False
    if spec.get("initContainers"):
        total += sum(1 for c in _dicts(spec["initContainers"]) if _restartable(c))
        reason, ready, restarts, last, sidecar_restarts, sidecar_last, initializing = \
            _init_status(spec, st, reason)
        if not initializing or _condition_true(st, "Initialized"):
            restarts, last = sidecar_restarts, sidecar_last
    if not initializing or _condition_true(st, "Initialized"):
        running = False
        for cs in reversed(_dicts(st.get("containerStatuses"))):
            restarts += _int(cs.get("restartCount"))
            if cs.get("lastState"):
                last = _later(last, _terminated_at(cs))
            state = _map(cs.get("state"))
            if "running" in state and len(state) == 1:  # the common case
                if cs.get("ready"):
                    running = True
                    ready += 1
                continue
            terminated, waiting = _map(state.get("terminated")), _map(state.get("waiting"))
            if waiting.get("reason"):
                reason = _str(waiting["reason"])
            elif terminated.get("reason"):
                reason = _str(terminated["reason"])
            elif "terminated" in state:
                reason = (f"Signal:{terminated['signal']}" if _int(terminated.get("signal"))
                          else f"ExitCode:{_int(terminated.get('exitCode'))}")
            elif cs.get("ready") and "running" in state:
                running = True
                ready += 1
        if reason == "Completed" and running:
            reason = "Running" if _condition_true(st, "Ready") else "NotReady"
    if meta.is_being_deleted(pod):
        if st.get("reason") == "NodeLost":
            reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            reason = "Terminating"
    return f"{ready}/{total}", reason, restarts, last


def _pod(pod: Obj, now: float) -> list[Cell]:
    ready, reason, restarts, last = _pod_status(pod)
    restarts_text = str(restarts)
    if restarts and last is not None:
        restarts_text = f"{restarts} ({human_duration(now - last)} ago)"
    spec, st = _map(pod.get("spec")), _map(pod.get("status"))
    ips = _dicts(st.get("podIPs"))
    gates = _dicts(spec.get("readinessGates"))
    gates_text = NONE
    if gates:
        conds = {c.get("type"): c.get("status") for c in _dicts(st.get("conditions"))}
        true = sum(1 for g in gates if conds.get(g.get("conditionType")) == "True")
        gates_text = f"{true}/{len(gates)}"
    return [meta.name(pod), ready, reason, restarts_text,
            age(meta.creation_timestamp(pod), now),
            # the internal type's podIPs is defaulted from podIP, which the printer reads
            _str(ips[0].get("ip") if ips else st.get("podIP")) or NONE,
            _str(spec.get("nodeName")) or NONE,
            _str(st.get("nominatedNodeName")) or NONE, gates_text]


def _pod_conditions(pod: Obj) -> list[dict[str, str]]:
    phase = _map(pod.get("status")).get("phase")
    if phase == "Succeeded":
        return [{"type": "Completed", "status": "True", "reason": "Succeeded",
                 "message": "The pod has completed successfully."}]
    if phase == "Failed":
        return [{"type": "Completed", "status": "True", "reason": "Failed",
                 "message": "The pod failed."}]
    return []


POD = Printer((
    _NAME,
    Column("Ready", doc="The aggregate readiness state of this pod for accepting traffic."),
    Column("Status", doc="The aggregate status of the containers in this pod."),
    Column("Restarts", doc="The number of times the containers in this pod have been "
                           "restarted and when the last container in this pod has restarted."),
    _AGE,
    Column("IP", priority=1, doc=(_CORE + "PodStatus", "podIP")),
    Column("Node", priority=1, doc=(_CORE + "PodSpec", "nodeName")),
    Column("Nominated Node", priority=1, doc=(_CORE + "PodStatus", "nominatedNodeName")),
    Column("Readiness Gates", priority=1, doc=(_CORE + "PodSpec", "readinessGates")),
), _pod, _pod_conditions)


# Node --------------------------------------------------------------------------------------


def node_status(node: Obj) -> str:
    """``Ready`` / ``NotReady`` / ``Unknown``, plus ``,SchedulingDisabled`` when cordoned."""
    conds = {c.get("type"): c for c in _dicts(_map(node.get("status")).get("conditions"))}
    ready = conds.get("Ready")
    parts = ["Unknown" if ready is None else
             "Ready" if ready.get("status") == "True" else "NotReady"]
    if _map(node.get("spec")).get("unschedulable"):
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
    for a in _dicts(_map(node.get("status")).get("addresses")):
        if a.get("type") == kind:
            return _str(a.get("address"))
    return NONE


def _node(node: Obj, now: float) -> list[Cell]:
    info = _map(_map(node.get("status")).get("nodeInfo"))
    return [meta.name(node), node_status(node), node_roles(node),
            age(meta.creation_timestamp(node), now), _str(info.get("kubeletVersion")),
            node_address(node, "InternalIP"), node_address(node, "ExternalIP"),
            _str(info.get("osImage")) or "<unknown>",
            _str(info.get("kernelVersion")) or "<unknown>",
            _str(info.get("containerRuntimeVersion")) or "<unknown>"]


_NODE_INFO = _CORE + "NodeSystemInfo"
NODE = Printer((
    _NAME,
    Column("Status", doc="The status of the node"),
    Column("Roles", doc="The roles of the node"),
    _AGE,
    Column("Version", doc=(_NODE_INFO, "kubeletVersion")),
    Column("Internal-IP", priority=1, doc=(_CORE + "NodeStatus", "addresses")),
    Column("External-IP", priority=1, doc=(_CORE + "NodeStatus", "addresses")),
    Column("OS-Image", priority=1, doc=(_NODE_INFO, "osImage")),
    Column("Kernel-Version", priority=1, doc=(_NODE_INFO, "kernelVersion")),
    Column("Container-Runtime", priority=1, doc=(_NODE_INFO, "containerRuntimeVersion")),
), _node)


# Namespace, ControllerRevision --------------------------------------------------------------


def _namespace(ns: Obj, now: float) -> list[Cell]:
    return [meta.name(ns), _str(_map(ns.get("status")).get("phase")),
            age(meta.creation_timestamp(ns), now)]


NAMESPACE = Printer((_NAME, Column("Status", doc="The status of the namespace"), _AGE),
                    _namespace)


def controller_name(obj: Obj) -> str:
    """``daemonset.apps/x`` for the controller ownerReference, else ``<none>``."""
    ref = meta.controller_ref(obj)
    if ref is None:
        return NONE
    api_version = _str(ref.get("apiVersion"))
    group = api_version.split("/", 1)[0] if "/" in api_version else ""
    kind = _str(ref.get("kind")).lower()
    return f"{kind}.{group}/{ref.get('name')}" if group else f"{kind}/{ref.get('name')}"


def _revision(cr: Obj, now: float) -> list[Cell]:
    return [meta.name(cr), controller_name(cr), _int(cr.get("revision")),
            age(meta.creation_timestamp(cr), now)]


CONTROLLER_REVISION = Printer((
    _NAME, Column("Controller", doc="Controller of the object"),
    Column("Revision", doc=(_APPS + "ControllerRevision", "revision")), _AGE), _revision)


# ConfigMap ---------------------------------------------------------------------------------


def _config_map(cm: Obj, now: float) -> list[Cell]:
    return [meta.name(cm), len(_map(cm.get("data"))) + len(_map(cm.get("binaryData"))),
            age(meta.creation_timestamp(cm), now)]


CONFIG_MAP = Printer((_NAME, Column("Data", doc=(_CORE + "ConfigMap", "data")), _AGE),
                     _config_map)


def _secret(secret: Obj, now: float) -> list[Cell]:
    return [meta.name(secret), _str(secret.get("type")), len(_map(secret.get("data"))),
            age(meta.creation_timestamp(secret), now)]


SECRET = Printer((_NAME, Column("Type", doc=(_CORE + "Secret", "type")),
                  Column("Data", doc=(_CORE + "Secret", "data")), _AGE), _secret)


# Service -----------------------------------------------------------------------------------


def _external_ip(spec: Obj, status: Obj) -> str:
    """``getServiceExternalIP``: what reaches the Service from outside."""
    kind, external = _str(spec.get("type")), [_str(ip) for ip in spec.get("externalIPs") or []]
    if kind in ("ClusterIP", "NodePort"):
        return ",".join(external) if external else NONE
    if kind == "LoadBalancer":
        ingress = [_str(i.get("ip") or i.get("hostname"))
                   for i in _dicts(_map(status.get("loadBalancer")).get("ingress"))]
        found = [i for i in ingress if i] + external
        return ",".join(found) if found else "<pending>"
    if kind == "ExternalName":
        return _str(spec.get("externalName"))
    return "<unknown>"


def _service(svc: Obj, now: float) -> list[Cell]:
    spec, status = _map(svc.get("spec")), _map(svc.get("status"))
    ips = spec.get("clusterIPs") or []
    ports = ",".join(
        (f"{_int(p.get('port'))}:{_int(p.get('nodePort'))}/{_str(p.get('protocol'))}"
         if _int(p.get("nodePort")) > 0 else f"{_int(p.get('port'))}/{_str(p.get('protocol'))}")
        for p in _dicts(spec.get("ports")))
    return [meta.name(svc), _str(spec.get("type")), _str(ips[0]) if ips else NONE,
            _external_ip(spec, status), ports or NONE, age(meta.creation_timestamp(svc), now),
            labels.format_labels(spec.get("selector"))]


_SVC_SPEC = _CORE + "ServiceSpec"
SERVICE = Printer((
    _NAME, Column("Type", doc=(_SVC_SPEC, "type")),
    Column("Cluster-IP", doc=(_SVC_SPEC, "clusterIP")),
    Column("External-IP", doc=(_SVC_SPEC, "externalIPs")),
    Column("Port(s)", doc=(_SVC_SPEC, "ports")), _AGE,
    Column("Selector", priority=1, doc=(_SVC_SPEC, "selector"))), _service)


# ServiceAccount and RBAC -------------------------------------------------------------------

_RBAC = "io.k8s.api.rbac.v1."


def _service_account(sa: Obj, now: float) -> list[Cell]:
    return [meta.name(sa), len(_dicts(sa.get("secrets"))), age(meta.creation_timestamp(sa), now)]


SERVICE_ACCOUNT = Printer((_NAME, Column("Secrets", doc=(_CORE + "ServiceAccount", "secrets")),
                           _AGE), _service_account)


def _role(role: Obj, now: float) -> list[Cell]:
    created = meta.parse_time(str(meta.creation_timestamp(role) or ""))
    return [meta.name(role), meta.format_time(created) if created is not None else ""]


ROLE = Printer((_NAME, Column("Created At", "date", doc=(_META, "creationTimestamp"))), _role)


def _subjects(binding: Obj) -> list[Cell]:
    """``rbac.SubjectsStrings``: users, groups and ServiceAccounts (``namespace/name``)."""
    found: dict[str, list[str]] = {"User": [], "Group": [], "ServiceAccount": []}
    for subject in _dicts(binding.get("subjects")):
        kind, name = _str(subject.get("kind")), _str(subject.get("name"))
        if kind == "ServiceAccount":
            found[kind].append(f"{_str(subject.get('namespace'))}/{name}")
        elif kind in found:
            found[kind].append(name)
    return [", ".join(found[k]) for k in ("User", "Group", "ServiceAccount")]


def _binding(binding: Obj, now: float) -> list[Cell]:
    ref = _map(binding.get("roleRef"))
    return [meta.name(binding), f"{_str(ref.get('kind'))}/{_str(ref.get('name'))}",
            age(meta.creation_timestamp(binding), now), *_subjects(binding)]


BINDING = Printer((
    _NAME, Column("Role", doc=(_RBAC + "RoleBinding", "roleRef")), _AGE,
    Column("Users", priority=1, doc="Users in the roleBinding"),
    Column("Groups", priority=1, doc="Groups in the roleBinding"),
    Column("ServiceAccounts", priority=1, doc="ServiceAccounts in the roleBinding")), _binding)


# PriorityClass -----------------------------------------------------------------------------

_PC = "io.k8s.api.scheduling.v1.PriorityClass"


def _priority_class(pc: Obj, now: float) -> list[Cell]:
    return [meta.name(pc), pc.get("value", 0), pc.get("globalDefault") is True,
            age(meta.creation_timestamp(pc), now), _str(pc.get("preemptionPolicy"))]


PRIORITY_CLASS = Printer((
    _NAME, Column("Value", "integer", doc=(_PC, "value")),
    Column("Global-Default", "boolean", doc=(_PC, "globalDefault")), _AGE,
    Column("PreemptionPolicy", doc=(_PC, "preemptionPolicy"))), _priority_class)


# Event -------------------------------------------------------------------------------------


def event_time(ev: Obj) -> float:
    """When an Event last happened (lastTimestamp, eventTime, firstTimestamp, creation):
    the order kubectl sorts events in."""
    for f in ("lastTimestamp", "eventTime", "firstTimestamp"):
        t = meta.parse_time(ev.get(f))
        if t is not None:
            return t
    return meta.parse_time(meta.creation_timestamp(ev)) or 0.0


def event_object(ev: Obj) -> str:
    inv = _map(ev.get("involvedObject"))
    kind = _str(inv.get("kind")).lower()
    return f"{kind}/{inv['name']}" if inv.get("name") else kind


def event_source(ev: Obj) -> str:
    """``component, host`` (the reporting controller and instance of newer events)."""
    src = _map(ev.get("source"))
    component = _str(src.get("component")) or _str(ev.get("reportingComponent"))
    instance = _str(src.get("host")) or _str(ev.get("reportingInstance"))
    return f"{component}, {instance}" if instance else component


def _event(ev: Obj, now: float) -> list[Cell]:
    first = age(ev.get("firstTimestamp") or ev.get("eventTime"), now)
    last = age(ev.get("lastTimestamp"), now) if ev.get("lastTimestamp") else first
    count = _int(ev.get("count"))
    series = _map(ev.get("series"))
    if series:
        last = age(series.get("lastObservedTime"), now)
        count = _int(series.get("count"))
    elif count == 0:
        count = 1
    inv = _map(ev.get("involvedObject"))
    return [last, _str(ev.get("type")), _str(ev.get("reason")), event_object(ev),
            _str(inv.get("fieldPath")), event_source(ev), _str(ev.get("message")).strip(),
            first, count, meta.name(ev)]


_EVENT = _CORE + "Event"
EVENT = Printer((
    Column("Last Seen", doc=(_EVENT, "lastTimestamp")),
    Column("Type", doc=(_EVENT, "type")),
    Column("Reason", doc=(_EVENT, "reason")),
    Column("Object", doc=(_EVENT, "involvedObject")),
    Column("Subobject", priority=1, doc=(_CORE + "ObjectReference", "fieldPath")),
    Column("Source", priority=1, doc=(_EVENT, "source")),
    Column("Message", doc=(_EVENT, "message")),
    Column("First Seen", priority=1, doc=(_EVENT, "firstTimestamp")),
    Column("Count", priority=1, doc=(_EVENT, "count")),
    Column("Name", priority=1, format="name", doc=(_META, "name")),
), _event)


# Lease --------------------------------------------------------------------------------------


def _lease(lease: Obj, now: float) -> list[Cell]:
    return [meta.name(lease), _str(_map(lease.get("spec")).get("holderIdentity")) or NONE,
            age(meta.creation_timestamp(lease), now)]


LEASE = Printer((_NAME, Column("Holder", doc=("io.k8s.api.coordination.v1.LeaseSpec",
                                              "holderIdentity")), _AGE), _lease)


# NodeMetrics, PodMetrics (metrics-server's columns: a pod's usage is its containers' sum) ---


def _usage_cells(usage: Obj, window: Any) -> list[Cell]:
    return [_str(usage.get("cpu")), _str(usage.get("memory")), _str(window)]


def _node_metrics(m: Obj, now: float) -> list[Cell]:
    return [meta.name(m), *_usage_cells(_map(m.get("usage")), m.get("window"))]


def _pod_metrics(m: Obj, now: float) -> list[Cell]:
    total = metrics.total([_map(c.get("usage")) for c in _dicts(m.get("containers"))])
    return [meta.name(m), *_usage_cells(total, m.get("window"))]


_USAGE = (Column("Name", format="name", doc="Name of the resource"),
          Column("cpu", format="quantity", doc="CPU used, in cores, over the window"),
          Column("memory", format="quantity", doc="Memory working set at its end"),
          Column("Window", format="duration", doc="The window the usage was measured over"))
NODE_METRICS = Printer(_USAGE, _node_metrics)
POD_METRICS = Printer(_USAGE, _pod_metrics)


PRINTERS: Mapping[str, Printer] = {
    "DaemonSet": DAEMONSET, "Pod": POD, "Node": NODE, "Namespace": NAMESPACE,
    "ControllerRevision": CONTROLLER_REVISION, "Event": EVENT, "Lease": LEASE,
    "ConfigMap": CONFIG_MAP, "Secret": SECRET, "Service": SERVICE,
    "ServiceAccount": SERVICE_ACCOUNT, "Role": ROLE,
    "ClusterRole": ROLE, "RoleBinding": BINDING, "ClusterRoleBinding": BINDING,
    "PriorityClass": PRIORITY_CLASS, "NodeMetrics": NODE_METRICS, "PodMetrics": POD_METRICS,
}


# ---- the Table ----------------------------------------------------------------------------


def columns(kind: str) -> tuple[Column, ...]:
    """The columns of a kind's table (``KeyError`` for a kind without one)."""
    return PRINTERS[kind].columns


def cells(kind: str, obj: Obj, now: float) -> list[Cell]:
    """One object's cells, one per column of :func:`columns`."""
    return PRINTERS[kind].cells(obj, now)


def visible(kind: str, wide: bool) -> list[int]:
    """The indexes of the columns a client shows (priority 0, or all for ``-o wide``)."""
    return [i for i, c in enumerate(columns(kind)) if wide or c.priority == 0]


def text(cell: Any) -> str:
    """A cell as kubectl prints it."""
    if cell is None:
        return NONE
    if isinstance(cell, bool):
        return "true" if cell else "false"
    return str(cell)


def partial_object_metadata(obj: Obj) -> dict[str, Any]:
    """The object's metadata as a ``meta.k8s.io/v1`` PartialObjectMetadata."""
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": _map(obj.get("metadata"))}


def row(kind: str, obj: Obj, now: float, include_object: str = "Metadata") -> dict[str, Any]:
    """One ``TableRow``: the cells, the printer's conditions (pods that completed) and the
    object as ``include_object`` asks (``None``, ``Metadata`` or ``Object``)."""
    printer = PRINTERS[kind]
    out: dict[str, Any] = {"cells": printer.cells(obj, now)}
    conditions = printer.conditions(obj) if printer.conditions else []
    if conditions:
        out["conditions"] = conditions
    if include_object == "Object":
        out["object"] = obj
    elif include_object == "None":
        out["object"] = None
    else:
        out["object"] = partial_object_metadata(obj)
    return out


def table(kind: str, objs: Sequence[Obj], now: float, *, include_object: str = "Metadata",
          list_meta: Mapping[str, Any] | None = None, headers: bool = True) -> dict[str, Any]:
    """The ``meta.k8s.io/v1`` Table of objects of one kind; ``list_meta`` (resourceVersion,
    continue, remainingItemCount) becomes its metadata; ``headers=False`` leaves out the
    column definitions, as for a watch event after the first or ``?as=Table&noHeaders``."""
    if include_object not in INCLUDE_OBJECT:
        raise ValueError(f"includeObject: Unsupported value: {include_object!r}: supported "
                         "values: \"Metadata\", \"None\", \"Object\"")
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1",
            "metadata": dict(list_meta or {}),
            "columnDefinitions": [c.definition() for c in columns(kind)] if headers else [],
            "rows": [row(kind, o, now, include_object) for o in objs]}
