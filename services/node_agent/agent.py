"""The node agent process: serves simulated nodes (heartbeat, Ready) and runs the pods bound
to them through their lifecycle (see ``lifecycle``). One process serves thousands of nodes:
it keeps one cache of Nodes and Pods, wakes on log entries or timers, and writes every
change of one round as a batched commit. It renews every served node's lease (outside the
log, ``shared.store.nodelease``) each quarter of the lease duration, a thousand nodes (one
pipeline) at a time, the slices spread over that interval as kubelets' renewals are: at
50,000 nodes one renewal of all of them at once held the loop for a second or more."""

from __future__ import annotations

import heapq
import logging
import math
import threading
import time
from collections.abc import Callable

from prometheus_client import Counter

from services import common
from services.node_agent import lifecycle
from services.node_agent.lifecycle import AgentConfig
from shared.eventlog.entry import CommitResult, EntryType
from shared.model import meta, podutil
from shared.model.objkey import ObjectKey
from shared.store import adapters, nodelease, noderequests
from shared.store.cache import Cache
from shared.store.client import Op, Result, Store

log = logging.getLogger("node-agent")
BATCH = 500
LEASE_RENEWALS = Counter("daemonbus_node_lease_renewals_total",
                         "Node leases renewed (one Redis SET each, outside the log)")


class NodeAgent:
    def __init__(self, store: Store, cfg: AgentConfig,
                 clock: Callable[[], float] = time.time,
                 sender: noderequests.Sender | None = None) -> None:
        """``sender``: send every write as a request to node-admission (credentials that may
        not write the store) instead of committing it."""
        self.store = store
        self.sender = sender
        self.cfg = cfg
        self.clock = clock
        self.cache = Cache(store, ["Node", "Pod"], name="node-agent", decisions=False,
                           own_writes=True, indexes={
            "node": ("Pod", lambda p: [podutil.target_node(p) or ""]),
        })
        self._timers: list[tuple[float, str, str]] = []
        self.leases = adapters.on(store, nodelease.NodeLeases)
        self._renew_at = 0.0
        self._renew_queue: list[str] = []  # served nodes not yet renewed in this interval
        self._renew_gap = 0.0  # seconds between two slices of this interval
        self.writes = 0
        self.outage = common.Outage(log)

    # ---- setup ----------------------------------------------------------------------------

    def ensure_nodes(self, count: int, prefix: str = "node-") -> int:
        """Create ``count`` nodes named <prefix>00001… if they do not exist (one commit per
        thousand). Returns how many were created."""
        created = 0
        names = [f"{prefix}{i:05d}" for i in range(1, count + 1)]
        for i in range(0, len(names), 1000):
            ops = [self.store.create_op(lifecycle.new_node(n), ensure=True)
                   for n in names[i:i + 1000]]
            created += sum(1 for r in self._commit(ops) if r.ok or r.status == CommitResult.QUEUED)
        return created

    # ---- the loop ---------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self.cache.sync()
                break
            except common.REDIS_DOWN as err:
                stop.wait(self.outage.failed(err))
        self._round({("Node", k) for k in self.cache.objects["Node"]} |
                    {("Pod", k) for k in self.cache.objects["Pod"]})
        while not stop.is_set():
            self.step()

    def step(self, max_block: float = 0.5) -> None:
        now = self.clock()
        wait = max_block
        if self._timers:
            wait = max(0.0, min(wait, self._timers[0][0] - now))
        wait = max(0.0, min(wait, self._renew_at - now))
        try:
            changes = self.cache.poll(count=5000, block_ms=max(1, int(wait * 1000)))
        except common.REDIS_DOWN as err:
            time.sleep(self.outage.failed(err))
            return
        self.outage.ok()
        self._renew_leases()
        dirty: set[tuple[str, str]] = set()
        for ch in changes:
            if ch.kind == "Pod":
                dirty.add(("Pod", ch.key))
            elif ch.kind == "Node":
                dirty.add(("Node", ch.key))
                if ch.type == EntryType.ADDED:
                    name = ObjectKey.parse(ch.key).name
                    dirty.update(("Pod", meta.key(p)) for p in self.cache.by_index("node", name))
        now = self.clock()
        while self._timers and self._timers[0][0] <= now:
            _, kind, key = heapq.heappop(self._timers)
            dirty.add((kind, key))
        if dirty:
            self._round(dirty)

    def _renew_leases(self) -> None:
        """Acts: renew the slices of served nodes' leases that are due. Each renewal
        interval starts with every served node queued and renews ``nodelease.CHUNK`` of them
        per slice, the slices evenly spread over the interval: every node is renewed once
        per interval, and while the loop turns faster than the slices come no renewal holds
        it longer than one pipeline. A loop that turns slower (a big round on a busy
        machine) renews every slice that fell due meanwhile, so no lease lapses for it."""
        now = self.clock()
        if now < self._renew_at:
            return
        due = 1 + int((now - self._renew_at) / self._renew_gap) if self._renew_gap else 1
        names: list[str] = []
        for _ in range(due):
            if not self._renew_queue:
                if names:
                    break  # this interval is done; the next one starts with the next slice
                self._renew_queue = sorted(
                    (meta.name(o) for o in self.cache.objects["Node"].values()
                     if lifecycle.serves(self.cfg, meta.name(o)) and lifecycle.simulated(o)),
                    reverse=True)
                interval = nodelease.renew_interval(self.cfg.lease_duration)
                self._renew_gap = interval / max(1, math.ceil(len(self._renew_queue) /
                                                              nodelease.CHUNK))
            names += self._renew_queue[-nodelease.CHUNK:]
            del self._renew_queue[-nodelease.CHUNK:]
        try:
            self.leases.renew(names, now, self.cfg.lease_duration)
        except common.REDIS_DOWN as err:
            self._renew_queue.extend(names)  # the same slices again after the outage
            self.outage.failed(err)
            return
        LEASE_RENEWALS.inc(len(names))
        self._renew_at = now + self._renew_gap

    def _round(self, dirty: set[tuple[str, str]]) -> None:
        now = self.clock()
        ops: list[Op] = []
        for kind, key in sorted(dirty):
            obj = self.cache.get(kind, key)
            if obj is None:
                continue
            if kind == "Node":
                if not lifecycle.serves(self.cfg, meta.name(obj)) or \
                        not lifecycle.simulated(obj):
                    continue
                new = lifecycle.node_step(self.cfg, obj, now)
                if new is not None:
                    ops.append(self.store.status_op(new, obj))
                heapq.heappush(self._timers, (now + self.cfg.heartbeat, "Node", key))
                continue
            node = podutil.target_node(obj) or ""
            if not node or not lifecycle.serves(self.cfg, node):
                continue
            node_obj = self.cache.get("Node", "/" + node)
            if not lifecycle.simulated(node_obj):
                continue  # a machine's: its own agent runs its pods
            node_exists = node_obj is not None
            step = lifecycle.pod_step(self.cfg, obj, node_exists, now)
            if step.delete:
                ops.append(self.store.final_delete_op(obj))
            elif step.update is not None:
                ops.append(self.store.status_op(step.update, obj))
            if step.wake_at is not None:
                heapq.heappush(self._timers, (step.wake_at, kind, key))
        for i in range(0, len(ops), BATCH):
            try:
                results = self._commit(ops[i:i + BATCH])
            except common.REDIS_DOWN as err:
                retry_at = now + self.outage.failed(err)
                for op in ops[i:]:
                    heapq.heappush(self._timers, (retry_at, op.kind, op.key))
                return
            self.writes += sum(1 for r in results if r.ok or r.status == CommitResult.QUEUED)
            # a conflict means a newer version is already in the log: its entry wakes us

    def _commit(self, ops: list[Op]) -> list[Result]:
        """Acts: commit ``ops``, or send them to node-admission naming the nodes they are for."""
        if self.sender is None:
            return self.store.commit(ops)
        nodes = {ObjectKey.parse(op.key).name if op.kind == "Node" else
                 podutil.target_node(op.obj or {}) or "" for op in ops}
        return self.sender.commit(ops, nodes)
