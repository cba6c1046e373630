"""Benchmark: the work of one event at 5,000 and at 50,000 nodes, in-process on real Redis.

    python ops/bench_events.py [--nodes 5000,50000] [--events 20] [--label TEXT]
                               [--no-record]

Per size it starts a private redis-server, creates the Nodes, a DaemonSet, its current
ControllerRevision and one ready, current pod per node (as a settled DaemonSet has them;
written directly, 1,000 per commit), then runs the real watcher (``Watcher``), reconciler
(``Reconciler``) and status-writer (``StatusWriter``) objects in this process. After a full
sync (which builds the DaemonSet's index) it adds ``--events`` nodes one at a time and, for
each, measures the CPU time of this process (``time.process_time``) and the Redis commands
(``INFO commandstats`` delta, the INFO calls themselves taken off) of:

* ``watcher_node``: the watcher's handling of the Node ADDED entry (its batch: poll, the
  handlers, the workqueue/expectations/cursor script);
* ``node_sync``: the hinted sync of that node (``Reconciler.sync(nodes=[node])``: catch-up,
  the per-node plan, the pod create, the record and the status published);
* ``status_sync``: after the status-writer wrote that status (not measured), the sync of no
  node a status-only DaemonSet change asks for (``Reconciler.sync(nodes=[])``), the new
  pod not ready yet;
* ``pod_ready_sync``: the hinted sync of the node once its pod turned ready;
* ``status_sync_settled``: the sync of no node after that status write, every pod ready;
* ``full_sync``: then a full sync (no hints), which decides nothing: what a hinted sync
  costs when it goes the full way (another node not steady, as while nodes are added one
  after another), with the DaemonSet's index kept.

Medians (and maxima) over the events; ``<measure>_per_node`` counts the syncs that took the
per-node path (the rest ran full syncs). The watcher's and the status-writer's work happens
between the measures, as it would between the syncs. Appended to ops/results/bench.jsonl
(bench ``events``) with the load average.
"""

from __future__ import annotations

import argparse
import functools
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import benchkit
from benchkit import NAMESPACE

from services.reconciler.sync import PER_NODE, Reconciler
from services.status_writer.writer import StatusWriter
from services.watcher.watcher import Watcher
from shared.daemonset import dsutil, history, podtemplate
from shared.model import meta
from shared.store import adapters
from shared.store.backoff import RedisBackoff
from shared.store.client import Store, connect
from shared.store.expectations import RedisExpectations
from shared.store.keys import Keys
from shared.store.lease import RedisLeaderLease
from shared.store.server import RedisServer
from shared.store.workqueue import RedisWorkQueue

KEY = f"{NAMESPACE}/{benchkit.DS_NAME}"
Obj = dict[str, Any]


def commands(store: Store) -> int:
    """Every command Redis has run so far (INFO's own calls included)."""
    info: Any = store.r.info("commandstats")
    return sum(int(s.get("calls", 0)) for s in info.values() if isinstance(s, dict))


class Meter:
    """CPU seconds of this process and Redis commands of one call (INFO taken off)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.cpu: dict[str, list[float]] = {}
        self.cmds: dict[str, list[int]] = {}

    def __call__(self, name: str, fn: Callable[[], Any]) -> Any:
        before = commands(self.store)
        cpu = time.process_time()
        out = fn()
        cpu = time.process_time() - cpu
        used = commands(self.store) - before - 1  # the second INFO
        self.cpu.setdefault(name, []).append(cpu)
        self.cmds.setdefault(name, []).append(used)
        return out

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, cpus in self.cpu.items():
            out[f"{name}_cpu_ms"] = round(statistics.median(cpus) * 1000, 2)
            out[f"{name}_cpu_ms_max"] = round(max(cpus) * 1000, 2)
            out[f"{name}_commands"] = statistics.median(self.cmds[name])
        return out


def ready(pod: Obj, now: float) -> Obj:
    stamp = meta.format_time(now)
    return {**pod, "status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": stamp}]}}


def populate(store: Store, n: int) -> None:
    """N ready nodes, the DaemonSet, its revision and a ready current pod per node."""
    now = time.time()
    for i in range(0, n, 1000):
        store.commit([store.create_op(benchkit.ready_node(f"node-{j}", now))
                      for j in range(i, min(n, i + 1000))])
    store.apply(benchkit.daemonset_manifest())
    ds = store.get("DaemonSet", KEY)
    hash = history.compute_hash(dsutil.template(ds), dsutil.collision_count(ds))
    store.create(history.new_revision(ds, hash, 1))
    template = podtemplate.create_pod_template(ds, hash)
    taken: set[str] = set()
    for i in range(0, n, 1000):
        ops = []
        for j in range(i, min(n, i + 1000)):
            salt = 0  # names are short hashes: the next salt for a name taken, as a sync does
            while (pod := podtemplate.new_pod(ds, template, f"node-{j}", hash, salt)
                   )["metadata"]["name"] in taken:
                salt += 1
            taken.add(meta.name(pod))
            ops.append(store.create_op(ready(pod, now)))
        assert all(res.ok for res in store.commit(ops))


def tip(store: Store) -> str:
    last: Any = store.r.xrevrange(store.keys.log, count=1)
    return str(last[0][0].decode())


def per_node_count() -> float:
    return PER_NODE.labels("per-node")._value.get()  # type: ignore[no-any-return]


def measure(n: int, events: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="daemonbus-bench-events-") as tmp:
        server = RedisServer(data_dir=str(Path(tmp) / "redis"), appendonly=False)
        server.start()
        try:
            return _measure(Store(connect(server.url, socket_timeout=300), Keys("bench")),
                            n, events)
        finally:
            server.stop()


def _measure(store: Store, n: int, events: int) -> dict[str, Any]:
    started = time.monotonic()
    populate(store, n)
    queue = RedisWorkQueue(store.r, store.keys)
    exp = RedisExpectations(store.r, store.keys)
    rec = Reconciler(store, queue, exp, RedisBackoff(store.r, store.keys), worker="bench")
    # held for the whole run: this process drives the watcher between syncs, and a full sync
    # of 50,000 nodes on a busy machine outlasts the watcher's lease (it would stand by)
    lease = adapters.on(store, RedisLeaderLease, "watcher", "bench", ttl_seconds=3600)
    assert lease.acquire()
    watcher = Watcher(store, lease)
    assert watcher.start()
    writer = StatusWriter(store, "bench")
    writer.ensure_group()
    full = rec.sync(KEY, tip(store))  # the full sync that builds the index
    assert full.ok and full.created == 0, full
    index = rec.indexes.get(KEY)
    assert index is not None and len(index.node_names()) == n
    setup_s = time.monotonic() - started
    meter = Meter(store)
    per_node: dict[str, int] = {}

    def sync(measure: str, nodes: list[str]) -> None:
        """One hinted sync of the key, measured; counts it when it took the per-node path."""
        before = per_node_count()
        result = meter(measure, functools.partial(rec.sync, KEY, tip(store), nodes=nodes))
        assert result.ok, result
        per_node[measure] = per_node.get(measure, 0) + int(per_node_count() - before)

    for k in range(events):
        name = f"node-new-{k}"
        store.create(benchkit.ready_node(name, time.time()))
        meter("watcher_node", functools.partial(watcher.step, block_ms=1))
        sync("node_sync", [name])
        watcher.step(block_ms=1)  # observes the create
        writer.step(block_ms=1)  # the status that sync computed: its pod not ready yet
        watcher.step(block_ms=1)
        sync("status_sync", [])
        pod = pod_on(watcher, name)
        store.update_status(ready(pod, time.time()))
        watcher.step(block_ms=1)
        sync("pod_ready_sync", [name])
        writer.step(block_ms=1)  # every pod ready
        watcher.step(block_ms=1)
        sync("status_sync_settled", [])
        writer.step(block_ms=1)
        watcher.step(block_ms=1)
        result = meter("full_sync", functools.partial(rec.sync, KEY, tip(store)))
        assert result.ok and not (result.created or result.deleted), result
        queue_drain(queue)
    out = {"nodes": n, "events": events, "setup_s": round(setup_s, 1), **meter.summary()}
    out.update({f"{k}_per_node": v for k, v in per_node.items()})
    return out


def pod_on(watcher: Watcher, node: str) -> Obj:
    """The pod created for ``node``, as the watcher sees it (it reads until it does)."""
    deadline = time.monotonic() + 60
    while not (pods := watcher.cache.by_index("node", node)):
        assert time.monotonic() < deadline, f"no pod for {node}"
        watcher.step(block_ms=100)
    [pod] = pods
    return pod


def queue_drain(queue: RedisWorkQueue) -> None:
    """Hand out and finish whatever the watcher queued (this driver syncs by itself)."""
    while (lease := queue.get("bench", block_seconds=0)) is not None:
        queue.done(lease)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="5000,50000")
    parser.add_argument("--events", type=int, default=20)
    parser.add_argument("--label", default="")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # the Redis server stops with it
    for n in (int(x) for x in args.nodes.split(",")):
        result = measure(n, args.events)
        print(" ".join(f"{k}={v}" for k, v in result.items()), flush=True)
        if not args.no_record:
            benchkit.record({"bench": "events", "label": args.label, **result})


if __name__ == "__main__":
    main()
