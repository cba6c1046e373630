"""Node health (upstream's node lifecycle controller, ``pkg/controller/nodelifecycle``, part of
kube-controller-manager). Pure: given the Nodes, what their node leases hold now, what the
controller saw at its last look and ``now``, decides each node's health and the Node writes.

A node is heard from when its lease's value changes or its Ready condition's
``lastHeartbeatTime`` does (``tryUpdateNodeHealth``); the time of that observation is the
controller's own ``now`` (its ``probeTimestamp``), never the agent's clock, so clock skew
between machines does not matter. When nothing was heard for the grace period
(``--node-monitor-grace-period``, 40 s; ``--node-startup-grace-period``, 60 s, for a node
whose agent never posted a heartbeat) its Ready condition (and MemoryPressure, DiskPressure,
PIDPressure where present) becomes Unknown, "NodeStatusUnknown", "Kubelet stopped posting
node status.".

Taints follow the Ready condition (``doNoScheduleTaintingPass`` and
``doNoExecuteTaintingPass``): False → ``node.kubernetes.io/not-ready``, Unknown →
``node.kubernetes.io/unreachable``, each with effects NoSchedule and NoExecute (stamped
``timeAdded``); True → neither. The taint manager (``tainteviction``) then evicts the pods
that do not tolerate the NoExecute taint; daemon pods tolerate both for ever (their default
tolerations), so they stay, and the NoSchedule taint keeps new daemon pods off the node.

Where every node of a zone (``topology.kubernetes.io/region`` and ``zone`` labels; nodes
without them form one zone) is not Ready, upstream assumes the control plane lost the nodes,
not the nodes their health (``stateFullDisruption``), and evicts nothing there: the NoExecute
taints are not added (and are removed) in such a zone; the conditions and NoSchedule taints
still are. Upstream's eviction rate limits (``--node-eviction-rate``, the partial-disruption
rates) are not modelled: a node's taint is written as soon as it is decided.

A Ready condition without ``lastHeartbeatTime`` (``status`` False, ``KubeletNotReady``) is
the one daemonbus registers before an agent runs (upstream's kubelet registers none): it
counts as never posted, waits the startup grace period and is not tainted not-ready.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shared.model import meta, podutil, taints
from shared.model.errors import CorruptEntryError

Obj = dict[str, Any]

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
CONTROLLER_TAINTS = (NOT_READY, UNREACHABLE)
MONITOR_GRACE = 40.0  # --node-monitor-grace-period
STARTUP_GRACE = 60.0  # --node-startup-grace-period
MONITOR_PERIOD = 5.0  # --node-monitor-period
UNKNOWN_REASON = "NodeStatusUnknown"
UNKNOWN_MESSAGE = "Kubelet stopped posting node status."
# the conditions upstream turns Unknown with Ready (when the node has them)
_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
_ZONE = "topology.kubernetes.io/zone"
_REGION = "topology.kubernetes.io/region"


LEASE_VERSION = 1


@dataclass(frozen=True)
class NodeLease:
    """What a node's lease holds (upstream's Lease ``spec.renewTime``): when its agent last
    renewed it, in milliseconds of the agent's clock (only ever compared with its previous
    value, never with the controller's clock). What crosses from the agents to gc.

    On the wire (``shared.store.nodelease``), version 1 is the decimal string of
    ``renew_ms``, as agents have always written it; a later version must begin with
    ``"<version>:"`` (``"2:..."``), which this code refuses rather than misreads."""

    renew_ms: int
    version: int = LEASE_VERSION

    def to_value(self) -> str:
        return str(self.renew_ms)

    @classmethod
    def from_value(cls, raw: str) -> NodeLease:
        """A lease value as stored; raises CorruptEntryError for one that is not a
        version-1 value. Decides."""
        head, sep, _rest = raw.partition(":")
        if sep:
            raise CorruptEntryError(f"node lease of unsupported version {head!r}")
        if not raw.isascii() or not raw.isdigit() or len(raw) > 19:
            raise CorruptEntryError(f"node lease value {raw[:40]!r} is not a time in ms")
        return cls(int(raw))


@dataclass(frozen=True)
class Config:
    monitor_grace: float = MONITOR_GRACE
    startup_grace: float = STARTUP_GRACE


@dataclass(frozen=True)
class Health:
    """What the controller last saw of one node: when it last heard from it (its own clock),
    the Ready heartbeat and the lease value it heard then."""

    probe_at: float
    heartbeat: str
    lease: NodeLease | None


@dataclass
class Decision:
    """One look at every node: the health to keep for the next look, the Nodes to write
    (name → new object) and the nodes whose Ready went from True to Unknown in this look
    (upstream records ``NodeNotReady`` for those only)."""

    health: dict[str, Health] = field(default_factory=dict)
    writes: dict[str, Obj] = field(default_factory=dict)
    lost: list[str] = field(default_factory=list)


def ready_status(node: Obj) -> str:
    """"True", "False" or "Unknown" (no Ready condition counts as Unknown)."""
    cond = podutil.ready_condition(node)
    value = str((cond or {}).get("status") or "Unknown")
    return value if value in ("True", "False") else "Unknown"


def _heartbeat(node: Obj) -> str:
    return str((podutil.ready_condition(node) or {}).get("lastHeartbeatTime") or "")


def observe(saved: Health | None, node: Obj, lease: NodeLease | None, now: float) -> Health:
    """The node's health after this look: heard from now if it is new to the controller, or
    its lease or Ready heartbeat changed since the last look."""
    beat = _heartbeat(node)
    if saved is None or beat != saved.heartbeat or (lease is not None and lease != saved.lease):
        return Health(now, beat, lease if lease is not None else (saved.lease if saved else None))
    return saved


def with_conditions_unknown(node: Obj, now: float) -> Obj | None:
    """A copy of ``node`` whose Ready (and pressure) conditions are Unknown, as upstream writes
    them when the kubelet went quiet; None when they already are."""
    status = node.get("status")
    conds = status.get("conditions") if isinstance(status, dict) else None
    old = [c for c in conds if isinstance(c, dict)] if isinstance(conds, list) else []
    stamp = meta.format_time(now)
    new: list[Obj] = []
    changed = False
    for c in old:
        if c.get("type") in _CONDITIONS and c.get("status") != "Unknown":
            c = {**c, "status": "Unknown", "reason": UNKNOWN_REASON, "message": UNKNOWN_MESSAGE,
                 "lastTransitionTime": stamp}
            changed = True
        new.append(c)
    if not any(c.get("type") == "Ready" for c in new):
        new.append({"type": "Ready", "status": "Unknown", "reason": "NodeStatusNeverUpdated",
                    "message": "Kubelet never posted node status.",
                    "lastHeartbeatTime": meta.creation_timestamp(node) or None,
                    "lastTransitionTime": stamp})
        changed = True
    if not changed:
        return None
    return {**node, "status": {**(status if isinstance(status, dict) else {}), "conditions": new}}


def zone(node: Obj) -> str:
    """upstream's ``GetZoneKey``: region and zone labels ("" for a node with neither)."""
    labels = meta.labels(node)
    region, z = labels.get(_REGION, ""), labels.get(_ZONE, "")
    return f"{region}:\x00:{z}" if region or z else ""


def wanted_taints(ready: str, posted: bool, evicting: bool) -> list[tuple[str, str]]:
    """The controller's taints (key, effect) for a node whose Ready is ``ready``; ``posted``:
    an agent ever reported it; ``evicting``: its zone is not fully disrupted."""
    key = UNREACHABLE if ready == "Unknown" else NOT_READY if ready == "False" and posted else ""
    if not key:
        return []
    out = [(key, taints.NO_SCHEDULE)]
    if evicting:
        out.append((key, taints.NO_EXECUTE))
    return out


def with_taints(node: Obj, wanted: list[tuple[str, str]], now: float) -> Obj | None:
    """A copy of ``node`` carrying exactly ``wanted`` of the controller's taints (others kept
    as they are, a kept one with its timeAdded); None when it already does."""
    current = taints.node_taints(node)
    if not current and not wanted:
        return None  # (most nodes: nothing to look at)
    keep = [t for t in current if t.get("key") not in CONTROLLER_TAINTS
            or (t.get("key"), t.get("effect")) in wanted]
    have = {(t.get("key"), t.get("effect")) for t in keep}
    missing = [(k, e) for k, e in wanted if (k, e) not in have]
    if not missing and len(keep) == len(current):
        return None
    stamp = meta.format_time(now)
    add = [{"key": k, "effect": e, "timeAdded": stamp} for k, e in missing]
    spec = node.get("spec")
    new_spec = dict(spec) if isinstance(spec, dict) else {}
    if keep or add:
        new_spec["taints"] = keep + add
    else:
        new_spec.pop("taints", None)
    return {**node, "spec": new_spec}


def decide(nodes: list[Obj], leases: dict[str, NodeLease | None], saved: dict[str, Health],
           now: float, cfg: Config) -> Decision:
    """Decides: each node's health at ``now`` and the Node writes it calls for."""
    out = Decision()
    before = {meta.name(n): n for n in nodes}
    after: dict[str, tuple[Obj, str, str, bool]] = {}  # name → node, zone, Ready, posted
    disrupted: dict[str, bool] = {}
    for name, node in before.items():
        health = observe(saved.get(name), node, leases.get(name), now)
        out.health[name] = health
        posted = bool(_heartbeat(node))
        grace = cfg.monitor_grace if posted else cfg.startup_grace
        cur = node
        if now > health.probe_at + grace:
            quiet = with_conditions_unknown(node, now)
            if quiet is not None:
                if ready_status(node) == "True":
                    out.lost.append(name)
                cur = quiet
        z, ready = zone(cur), ready_status(cur)
        after[name] = (cur, z, ready, posted)
        disrupted[z] = disrupted.get(z, True) and ready != "True"
    for name, (cur, z, ready, posted) in after.items():
        cur = with_taints(cur, wanted_taints(ready, posted, not disrupted[z]), now) or cur
        if cur is not before[name]:
            out.writes[name] = cur
    return out
