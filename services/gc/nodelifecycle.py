"""The node lifecycle controller (upstream's ``pkg/controller/nodelifecycle``), run by the gc
process beside the taint manager it feeds. Acts: every ``period`` seconds it reads the node
leases that changed (``shared.store.nodelease.LeaseWatch``, outside the log) and the cached
Nodes, lets ``shared.model.nodelifecycle.Monitor`` decide (afresh only for the nodes that
changed or whose grace ran out), and writes the Nodes whose Ready condition or
controller taints change (role gc may change only a Node's status conditions and taints),
with a ``NodeNotReady`` Event for each node that was Ready and is no longer. The NoExecute taints it writes reach the
collector's taint eviction through the log like any other.

One gc at a time runs it: it holds the leader lease ``node-lifecycle`` (a standby takes over
when the lease lapses and starts with no memory: every node counts as heard from at its
first look, so a takeover never declares a node lost early).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from prometheus_client import Counter

from shared.control.protocols import LeaderLease
from shared.model import events as model_events
from shared.model import meta, nodelifecycle, taints
from shared.store import adapters, errors
from shared.store.cache import Cache
from shared.store.client import Op, Result, Store
from shared.store.nodelease import LeaseWatch, NodeLeases
from shared.store.recorder import Recorder

log = logging.getLogger("gc")
LEASE_ROLE = "node-lifecycle"
COMPONENT = "node-controller"
BATCH = 500
LOST = Counter("daemonbus_node_lifecycle_lost_total",
               "Ready nodes whose Ready condition the node lifecycle controller set to Unknown")


@dataclass(frozen=True)
class Settings:
    period: float = nodelifecycle.MONITOR_PERIOD
    monitor_grace: float = nodelifecycle.MONITOR_GRACE
    startup_grace: float = nodelifecycle.STARTUP_GRACE


class NodeLifecycle:
    def __init__(self, store: Store, lease: LeaderLease | None, settings: Settings) -> None:
        """``lease``: the leader lease to hold while acting (None: act alone, for tests)."""
        self.store = store
        self.lease = lease
        self.settings = settings
        self.cfg = nodelifecycle.Config(settings.monitor_grace, settings.startup_grace)
        self.leases = adapters.on(store, NodeLeases)
        self.recorder = Recorder(store, prepared=True)  # (the controller's own, as upstream's)
        self._start()
        self.next_at = 0.0
        self.leading = False

    def tick(self, cache: Cache, now: float) -> None:
        """Acts: one look at every node when one is due."""
        if now < self.next_at:
            return
        self.next_at = now + self.settings.period
        if self.lease is not None:
            leading = self.lease.acquire()
            if leading != self.leading:
                log.info("node lifecycle controller %s", "active" if leading else "standing by")
                self.leading = leading
            if not leading:
                self._start()
                return
        # cluster-scoped: the cache's key is "/" and the name
        nodes = {key[1:]: node for key, node in cache.objects["Node"].items()}
        decision = self.monitor.look(nodes, self.watch.changed(list(nodes)), now)
        if decision.writes:
            self._write(cache, decision, now)

    def _start(self) -> None:
        """No memory of any node: every node counts as heard from at the next look."""
        self.monitor = nodelifecycle.Monitor(self.cfg)
        self.watch = LeaseWatch(self.leases)

    def _write(self, cache: Cache, decision: nodelifecycle.Decision, now: float) -> None:
        ops: list[Op] = []
        lost = set(decision.lost)  # (all 50,000 nodes when their agent stops)
        for name, new in sorted(decision.writes.items()):
            old = cache.get("Node", f"/{name}")
            if old is None:
                continue
            try:
                ops.append(self.store.raw_update_op(new, meta.resource_version(old)))
            except errors.InvalidError as err:
                log.error("node %s: not written: %s", name, err)
                continue
            if name in lost:
                ev = model_events.event(old, "Normal", "NodeNotReady",
                                        f"Node {name} status is now: NodeNotReady", now=now,
                                        salt=f"{meta.resource_version(old)}|{now}",
                                        component=COMPONENT)
                ev["metadata"]["namespace"] = "default"  # a cluster object's Events' namespace
                self.recorder.tell(ev, now)
        told, event_ops = self.recorder.ops(now)
        ops += event_ops
        results: list[Result] = []
        for i in range(0, len(ops), BATCH):
            results += self.store.commit(ops[i:i + BATCH])
        self.recorder.written(told, results)
        for res in results:
            if res.ok and res.op.kind == "Node":
                went = res.op.key.lstrip("/") in lost
                if went:
                    LOST.inc()
                log.info("node %s: %staints now %s", res.op.key.lstrip("/"),
                         "Ready True -> Unknown (its agent went quiet); " if went else "",
                         ", ".join(_taints(res.op.obj)) or "none")
            elif not res.ok:  # a conflict: the next look decides from the newer version
                log.info("node lifecycle: %s %s: %s", res.op.kind, res.op.key, res.status)


def _taints(node: meta.Obj | None) -> list[str]:
    """The controller's taints on ``node``, as ``key:effect``."""
    return [taints.taint_string(t) for t in taints.node_taints(node or {})
            if t.get("key") in nodelifecycle.CONTROLLER_TAINTS]
