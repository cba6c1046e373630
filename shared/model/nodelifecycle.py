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
As upstream's ``TaintNodesByCondition``, a MemoryPressure, DiskPressure or PIDPressure (or
NetworkUnavailable) condition True taints its node ``node.kubernetes.io/memory-pressure``
(...) NoSchedule, and a cordoned node (``spec.unschedulable``) is tainted
``node.kubernetes.io/unschedulable`` NoSchedule; daemon pods tolerate these too.

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

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from shared.model import meta, podutil, taints
from shared.model.errors import CorruptEntryError

Obj = dict[str, Any]

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
#: upstream's nodeConditionToTaintKeyStatusMap but for Ready: a condition with that status
#: taints its node NoSchedule (TaintNodesByCondition)
CONDITION_TAINTS = {"MemoryPressure": ("True", "node.kubernetes.io/memory-pressure"),
                    "DiskPressure": ("True", "node.kubernetes.io/disk-pressure"),
                    "PIDPressure": ("True", "node.kubernetes.io/pid-pressure"),
                    "NetworkUnavailable": ("True", "node.kubernetes.io/network-unavailable")}
CONTROLLER_TAINTS = (NOT_READY, UNREACHABLE, UNSCHEDULABLE,
                     *(key for _status, key in CONDITION_TAINTS.values()))
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


class Health(NamedTuple):
    """What the controller last saw of one node: when it last heard from it (its own clock),
    the Ready heartbeat and the lease value it heard then. (A tuple: made for every lease
    heard, 5,000 a second at 50,000 nodes.)"""

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


def wanted_taints(ready: str, posted: bool, evicting: bool, node: Obj) -> list[tuple[str, str]]:
    """The controller's taints (key, effect) for ``node`` (as its conditions are now), whose
    Ready is ``ready``; ``posted``: an agent ever reported it; ``evicting``: its zone is not
    fully disrupted. Besides Ready's, upstream's NoSchedule taints of its other conditions
    and of its being cordoned (``doNoScheduleTaintingPass``)."""
    key = UNREACHABLE if ready == "Unknown" else NOT_READY if ready == "False" and posted else ""
    out = [(key, taints.NO_SCHEDULE)] if key else []
    if key and evicting:
        out.append((key, taints.NO_EXECUTE))
    for c in (node.get("status") or {}).get("conditions") or []:
        status, tainted = CONDITION_TAINTS.get(c.get("type"), ("", ""))
        if tainted and c.get("status") == status:
            out.append((tainted, taints.NO_SCHEDULE))
    if (node.get("spec") or {}).get("unschedulable"):
        out.append((UNSCHEDULABLE, taints.NO_SCHEDULE))
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
    """Decides: each node's health at ``now`` and the Node writes it calls for, from what the
    controller saw at its last look (``saved``) alone: a :class:`Monitor` that looks at every
    node."""
    return Monitor(cfg, saved).look({meta.name(n): n for n in nodes}, leases, now)


class Monitor:
    """The controller between its looks: what it saw of each node, and each look's decision
    (:meth:`look`), the one ``decide`` makes of every node. Decides; holds memory only.

    Most nodes need no decision at a look: a node whose Node object and lease are those of
    the last look, whose grace has not run out since and whose zone's full disruption did
    not turn keeps its health, Ready and taints. A node whose lease alone changed is heard
    from (its health and deadline move) and keeps the rest. So a look compares each node's
    Node (by identity: caches replace objects, they never modify them) and lease with the
    last ones, and decides afresh only the nodes that changed, are new, whose grace ran out
    since (deadlines kept by the second; a deadline only makes a node decided again, so
    one that comes early costs a decision and changes nothing), that the last look asked to
    write and whose Node has not changed since (the write may have failed), and every node
    of a zone whose full disruption turned. A node whose grace ran out at an earlier look
    and that nothing changed since is decided as then: Unknown, tainted, nothing to write.
    At 50,000 nodes a look is 50,000 Nodes compared and half as many leases heard (renewed
    every 10 s, a look every 5 s; the leases compared by
    ``shared.store.nodelease.LeaseWatch``): about 0.1 s of CPU, where deciding every node
    took 1.1 s."""

    def __init__(self, cfg: Config, health: dict[str, Health] | None = None) -> None:
        """``health``: what an earlier look saw (a copy is kept); every node is decided
        afresh at the first look."""
        self.cfg = cfg
        self.health: dict[str, Health] = dict(health or {})
        self._node: dict[str, Obj] = {}  # the Node object decided at the last look
        self._at: dict[str, tuple[str, str, bool]] = {}  # zone, Ready after the look, posted
        self._zone_nodes: dict[str, set[str]] = {}
        self._zone_ready: dict[str, int] = {}  # nodes Ready True (after the look) per zone
        self._deadline: dict[str, float] = {}  # each node's deadline, while it is ahead
        self._due: dict[int, set[str]] = {}  # second of a deadline → its nodes (and stale)
        self._unposted: set[str] = set()  # nodes whose agent never posted a heartbeat
        self._written: set[str] = set()  # nodes the last look asked to write

    def look(self, nodes: Mapping[str, Obj], leases: Mapping[str, NodeLease | None],
             now: float) -> Decision:
        """Decides: ``decide(nodes, every lease, saved, now)`` where ``saved`` is this
        monitor's health. ``nodes``: name → Node, every node; ``leases``: the lease (None:
        none) of each node whose lease changed since the last look and of each node new to
        this monitor, others keep the last look's (every lease may be given). The returned
        health is the monitor's own (read only)."""
        out = Decision(health=self.health)
        before: dict[str, bool] = {}  # each zone touched: fully disrupted before this look
        for name in self.health.keys() - nodes.keys():
            self._forget(name, before)
        seen = self._node
        todo = {name for name, obj in nodes.items() if seen.get(name) is not obj}
        todo.update(self._passed(now))
        todo.update(name for name in self._written if seen.get(name) is nodes.get(name))
        self._written = set()
        self._heard(leases, todo, now)
        looked: dict[str, Obj] = {}  # node → its Node after the conditions, as decided now
        for name in todo:
            node = nodes.get(name)
            if node is None:
                continue
            lease = leases.get(name)  # one not given is the last look's: heard then
            health = observe(self.health.get(name), node, lease, now)
            self.health[name] = health
            posted = bool(_heartbeat(node))
            deadline = health.probe_at + (self.cfg.monitor_grace if posted
                                          else self.cfg.startup_grace)
            cur = node
            if now > deadline:
                quiet = with_conditions_unknown(node, now)
                if quiet is not None:
                    if ready_status(node) == "True":
                        out.lost.append(name)
                    cur = quiet
            else:
                self._set_deadline(name, deadline)
            self._node[name] = node
            self._place(name, zone(cur), ready_status(cur), posted, before)
            looked[name] = cur
        taint = set(looked)
        for z, was in before.items():
            if self._disrupted(z) != was:  # its NoExecute taints come or go
                taint |= self._zone_nodes.get(z, set())
        for name in taint:
            node = nodes[name]
            cur = looked.get(name, node)
            z, ready, posted = self._at[name]
            cur = with_taints(cur, wanted_taints(ready, posted, not self._disrupted(z), cur),
                              now) or cur
            if cur is not node:
                out.writes[name] = cur
        self._written = set(out.writes)
        out.lost.sort()
        return out

    def _heard(self, leases: Mapping[str, NodeLease | None], todo: set[str],
               now: float) -> None:
        """The nodes of ``leases`` not in ``todo`` that this monitor has seen: their lease
        was read (changed, or given again) and nothing else changed (their grace has not
        run out since the last look): ``observe`` with the heartbeat unchanged, in bulk (at
        50,000 nodes a look hears 25,000)."""
        health, seen = self.health, self._node
        heard: list[str] = []
        for name, lease in leases.items():
            if lease is None or name in todo or name not in seen:
                continue
            saved = health[name]
            if lease != saved.lease:
                health[name] = Health(now, saved.heartbeat, lease)
                heard.append(name)
        if not heard:
            return
        unposted = self._unposted.intersection(heard)
        posted = set(heard) - unposted if unposted else heard
        self._set_deadlines(posted, now + self.cfg.monitor_grace)
        self._set_deadlines(unposted, now + self.cfg.startup_grace)

    def _set_deadline(self, name: str, deadline: float) -> None:
        if self._deadline.get(name) != deadline:
            self._set_deadlines((name,), deadline)

    def _set_deadlines(self, names: Collection[str], deadline: float) -> None:
        """``names`` are due once ``deadline`` passes. A node's entry under the second of
        an earlier deadline stays (taken out when that second is looked at)."""
        if names:
            self._deadline.update(dict.fromkeys(names, deadline))
            self._due.setdefault(int(deadline), set()).update(names)

    def _passed(self, now: float) -> list[str]:
        """The nodes whose deadline passed (``< now``), their deadlines dropped (entries of
        a deadline that moved later are passed over)."""
        out: list[str] = []
        deadline = self._deadline
        for second in [s for s in self._due if s <= now]:
            bucket = self._due.pop(second)
            left = set()
            for name in bucket:
                at = deadline.get(name)
                if at is None or int(at) != second:
                    continue  # it moved (or is gone): its entry is elsewhere
                if at < now:
                    out.append(name)
                    del deadline[name]
                else:
                    left.add(name)  # later in this second
            if left:
                self._due[second] = left
        return out

    def _disrupted(self, z: str) -> bool:
        return not self._zone_ready.get(z)

    def _place(self, name: str, z: str, ready: str, posted: bool,
               before: dict[str, bool]) -> None:
        """Note ``name`` in zone ``z`` with Ready ``ready`` after this look (``before``:
        each zone's disruption before its first change in this look)."""
        old = self._at.get(name)
        if old is not None:
            self._unplace(name, old, before)
        before.setdefault(z, self._disrupted(z))
        self._at[name] = (z, ready, posted)
        if posted:
            self._unposted.discard(name)
        else:
            self._unposted.add(name)
        self._zone_nodes.setdefault(z, set()).add(name)
        if ready == "True":
            self._zone_ready[z] = self._zone_ready.get(z, 0) + 1

    def _unplace(self, name: str, old: tuple[str, str, bool],
                 before: dict[str, bool]) -> None:
        z, ready, _posted = old
        before.setdefault(z, self._disrupted(z))
        members = self._zone_nodes[z]
        members.discard(name)
        if not members:
            del self._zone_nodes[z]
        if ready == "True":
            self._zone_ready[z] -= 1
            if not self._zone_ready[z]:
                del self._zone_ready[z]

    def _forget(self, name: str, before: dict[str, bool]) -> None:
        """A node that is gone."""
        old = self._at.pop(name, None)
        if old is not None:
            self._unplace(name, old, before)
        self._deadline.pop(name, None)  # its entry under that second is passed over
        self._unposted.discard(name)
        self.health.pop(name, None)
        self._node.pop(name, None)
        self._written.discard(name)
