"""Benchmark: rebuild throughput of ``daemonbus replay`` for a 1,000,000-entry log.

Usage:  python ops/bench_replay.py [--entries 1000000] [--nodes 100] [--label L] [--cache DIR]

1. Generates a realistic log into a private redis-server: a simulated cluster (nodes,
   DaemonSets in their own namespaces, their pods and revisions, events) where every decision
   is made by the real planner on the simulated state and recorded as the reconciler records
   it, the node agent's stages (bind, Running, Ready, removal) come from the real lifecycle
   code, and the bulk is the churn a real cluster writes: node heartbeats and pod status
   updates, with node label and taint changes, node churn, a rollout and an undo mixed in.
   Entries are real encoded objects, appended with pipelined XADD (explicit ids).
2. Exports it (``log export``), then times ``replay`` into an empty prefix of the same
   server and checks the rebuilt view equals the generated one, byte for byte.
3. Times ``replay --verify`` separately (every recorded decision is re-planned).

Generating a 1,000,000-entry log takes minutes: ``--cache DIR`` keeps the export, the view it
must rebuild to and the generation's counts in DIR (named by ``--entries`` and ``--nodes``) and
later runs with the same sizes reuse them instead of generating (delete the files when the
simulation or the entry encoding changes).

Each throughput is printed beside a floor measured in the same run (issue 15): for
``replay``, the faster of two ways Redis itself takes the same log and view: the rebuild's
own XADDs, encoded beforehand and sent as one pipelined stream with replies off (run before
the replay and after it, the better of the two), and one RESTORE of the log's DUMP (the
stream as Redis serialises it: the cheapest documented way to load a stream, which replay
cannot use: Redis refuses an argument over 512 MB unless its configuration is changed),
each followed by the view hashes; for ``replay --verify``, the time to read the file and
decode its msgpack once. Prints entries/s and appends one JSON line to
ops/results/bench.jsonl, with the load average before and after.
Targets on the 2-core machine: replay at least 200,000 entries/s, verify at least 100,000.
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import json
import os
import random
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import benchkit  # noqa: E402

from services.node_agent import lifecycle  # noqa: E402
from services.replay import export, logfile, rebuild, verify  # noqa: E402
from shared.daemonset import planner  # noqa: E402
from shared.daemonset import record as ds_record  # noqa: E402
from shared.daemonset import types as t  # noqa: E402
from shared.eventlog.entry import WriteMode  # noqa: E402
from shared.model import meta, podutil  # noqa: E402
from shared.store import codec, restore, snapshot  # noqa: E402
from shared.store.client import Store, connect  # noqa: E402
from shared.store.keys import Keys  # noqa: E402
from shared.store.server import RedisServer  # noqa: E402

RESULTS = benchkit.RESULTS
JSONL = benchkit.JSONL
TARGET = 200_000  # replay, entries/s
VERIFY_TARGET = 100_000  # replay --verify, entries/s
Obj = dict[str, Any]
ACTIONS = ("creates", "deletes", "claims", "history", "cleanup", "events", "backoff")


def daemonset(name: str, image: str, selector: dict[str, str] | None = None) -> Obj:
    spec: Obj = {"containers": [{"name": name, "image": image,
                                 "resources": {"limits": {"memory": "200Mi"}}}]}
    if selector:
        spec["nodeSelector"] = selector
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": f"ns-{name}", "labels": {"app": name}},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "updateStrategy": {"type": "RollingUpdate",
                                        "rollingUpdate": {"maxUnavailable": "25%"}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}}


class LogSim:
    """A cluster simulated in memory whose every change is appended to a real log."""

    def __init__(self, store: Store, seed: int = 1) -> None:
        self.store = store
        self.rng = random.Random(seed)
        self.now = time.time() - 3600.0
        self.last = (0, 0)
        self.objs: dict[str, dict[str, Obj]] = {
            k: {} for k in ("Node", "Pod", "DaemonSet", "ControllerRevision", "Event")}
        self.pipe = store.r.pipeline(transaction=False)
        self.buffered = 0
        self.entries = 0
        self.decisions = 0
        self.agent = lifecycle.AgentConfig(grace=0.0)
        self.store.clock = lambda: self.now

    # ---- the log ------------------------------------------------------------------------------

    def _id(self) -> str:
        self.now += self.rng.uniform(0.00005, 0.0004)
        ms = int(self.now * 1000)
        self.last = (ms, 0) if ms > self.last[0] else (self.last[0], self.last[1] + 1)
        return f"{self.last[0]}-{self.last[1]}"

    def _append(self, etype: str, kind: str, key: str, payload: bytes) -> str:
        eid = self._id()
        self.pipe.xadd(self.store.keys.log, {"v": codec.SCHEMA_VERSION, "t": etype, "k": kind,
                                             "n": key, "o": payload}, id=eid)
        self.buffered += 1
        self.entries += 1
        if self.buffered >= 5000:
            self.flush()
        return eid

    def flush(self) -> None:
        if self.buffered:
            self.pipe.execute()
            self.buffered = 0

    def write(self, etype: str, obj: Obj) -> Obj:
        kind, key = obj["kind"], meta.key(obj)
        eid = self._append(etype, kind, key, codec.pack_object(obj))
        if etype == "DELETED":
            self.objs[kind].pop(key, None)
        else:
            obj["metadata"]["resourceVersion"] = eid
            self.objs[kind][key] = obj
        return obj

    def create(self, obj: Obj, validate: bool = True) -> Obj:
        if validate:
            obj = self.store.prepare_create(obj, now=self.now)
        else:
            obj = self.store.stamp(obj, now=self.now)
        obj["metadata"]["uid"] = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        return self.write("ADDED", obj)

    def write_view(self) -> None:
        """The materialised view of the generated state (what the store would hold)."""
        self.flush()
        for kind, objs in self.objs.items():
            items = sorted(objs.items())
            for i in range(0, len(items), 1000):
                chunk = items[i:i + 1000]
                self.pipe.hset(self.store.keys.objects(kind),
                               mapping={k: codec.pack_object(o) for k, o in chunk})
                self.pipe.hset(self.store.keys.versions(kind),
                               mapping={k: meta.resource_version(o) for k, o in chunk})
                self.pipe.execute()

    # ---- the controller ---------------------------------------------------------------------

    def sync(self, key: str) -> bool:
        """One reconciler sync: plan on the current state, execute, record, publish status."""
        ds = self.objs["DaemonSet"].get(key)
        if ds is None:
            return False
        ns = meta.namespace(ds)
        snap = t.Snapshot(key=key, ds=ds, nodes=list(self.objs["Node"].values()),
                          pods=[p for k, p in self.objs["Pod"].items() if k.startswith(ns + "/")],
                          revisions=[r for k, r in self.objs["ControllerRevision"].items()
                                     if k.startswith(ns + "/")],
                          backoff={}, expectations_satisfied=True, now=self.now,
                          position=f"{self.last[0]}-{self.last[1]}")
        plan = planner.plan(snap)
        summary = ds_record.summarize(plan)
        for h in plan.history:
            if isinstance(h, t.CreateRevision):
                self.create(copy.deepcopy(h.revision))
            elif isinstance(h, t.UpdateRevision):
                rev = copy.deepcopy(self.objs["ControllerRevision"][f"{h.namespace}/{h.name}"])
                if h.revision is not None:
                    rev["revision"] = h.revision
                if h.labels:
                    rev["metadata"]["labels"] = {**meta.labels(rev), **h.labels}
                self.write("MODIFIED", rev)
            elif isinstance(h, t.DeleteRevision):
                self.write("DELETED", self.objs["ControllerRevision"][f"{h.namespace}/{h.name}"])
        if plan.sync_nodes is not None:
            for c in plan.sync_nodes.creates:
                self.create(copy.deepcopy(c.pod), validate=False)
            for d in plan.sync_nodes.deletes:
                pod = self.objs["Pod"].get(f"{d.namespace}/{d.name}")
                op = self.store.delete_op(pod) if pod is not None else None
                if op is not None and op.obj is not None:
                    self.write("DELETED" if op.mode == WriteMode.DELETE else "MODIFIED", op.obj)
        for c in plan.cleanup:
            self.write("DELETED", self.objs["ControllerRevision"][f"{c.namespace}/{c.name}"])
        for e in plan.events:
            self.create({"apiVersion": "v1", "kind": "Event",
                         "metadata": {"name": f"{meta.name(ds)}.{self.rng.getrandbits(64):016x}",
                                      "namespace": ns},
                         "involvedObject": {"kind": "DaemonSet", "namespace": ns,
                                            "name": meta.name(ds), "uid": meta.uid(ds)},
                         "reason": e.reason, "message": e.message, "type": e.type,
                         "count": 1, "source": {"component": "daemonset-controller"}},
                        validate=False)
        acted = any(summary[k] for k in ACTIONS)
        if acted:
            rec = ds_record.make_record(snap, plan, "bench-sim")
            self._append("DECISION", "DaemonSet", key, codec.pack(rec.to_map()))
            self.decisions += 1
        if plan.status is not None:
            new = dict(plan.status)
            old = ds.get("status") or {}
            new["observedGeneration"] = (ds["metadata"].get("generation", 1)
                                         if plan.update_observed_generation
                                         else old.get("observedGeneration", 0))
            if {**old, **new} != old:
                fresh = copy.deepcopy(self.objs["DaemonSet"][key])
                fresh["status"] = {**old, **new}
                self.write("MODIFIED", fresh)
        return acted

    def agent_round(self) -> bool:
        """The node agent: bind, run and remove pods whose stage is due."""
        did = False
        for pod in list(self.objs["Pod"].values()):
            if (pod.get("status") or {}).get("phase") == "Running" and \
                    not meta.is_being_deleted(pod):
                continue
            node = podutil.target_node(pod) or ""
            step = lifecycle.pod_step(self.agent, pod, f"/{node}" in self.objs["Node"],
                                      self.now)
            if step.delete:
                self.write("DELETED", pod)
                did = True
            elif step.update is not None:
                self.write("MODIFIED", copy.deepcopy(step.update))
                did = True
        return did

    def settle(self, keys: list[str] | None = None, rounds: int = 200) -> None:
        keys = keys if keys is not None else sorted(self.objs["DaemonSet"])
        for _ in range(rounds):
            acted = False
            for key in keys:
                acted = self.sync(key) or acted
            if not (self.agent_round() or acted):
                return

    # ---- the cluster's churn -----------------------------------------------------------------

    def add_node(self, name: str) -> None:
        node = lifecycle.node_step(self.agent, lifecycle.new_node(name), self.now)
        self.create(node or lifecycle.new_node(name))

    # The churn below changes objects in place: the simulation holds the only reference
    # (a snapshot lives for one sync), and ``write`` encodes the new state at once.

    def heartbeat(self) -> None:
        node = self.rng.choice(list(self.objs["Node"].values()))
        for c in node["status"]["conditions"]:
            if c.get("type") == "Ready":
                c["lastHeartbeatTime"] = meta.format_time(self.now)
        self.write("MODIFIED", node)

    def pod_churn(self) -> None:
        pods = self.objs["Pod"]
        if not pods:
            return
        pod = pods[self.rng.choice(list(pods))]
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            cs["lastProbeTime"] = meta.format_time(self.now)
        self.write("MODIFIED", pod)

    def toggle_label(self) -> None:
        node = self.rng.choice(list(self.objs["Node"].values()))
        labels = node["metadata"]["labels"]
        if labels.pop("role", None) is None:
            labels["role"] = "edge"
        self.write("MODIFIED", node)
        self.settle(["ns-edge/edge"])

    def toggle_taint(self) -> None:
        node = self.rng.choice(list(self.objs["Node"].values()))
        spec = node.setdefault("spec", {})
        if spec.get("taints"):
            spec.pop("taints")
        else:
            spec["taints"] = [{"key": "dedicated", "value": "db", "effect": "NoExecute"}]
        self.write("MODIFIED", node)
        self.settle()

    def node_churn(self, serial: int) -> None:
        if self.rng.random() < 0.5 and len(self.objs["Node"]) > 10:
            node = self.rng.choice(list(self.objs["Node"].values()))
            self.write("DELETED", node)
            for pod in [p for p in self.objs["Pod"].values()
                        if p["spec"].get("nodeName") == meta.name(node)]:
                self.write("DELETED", pod)  # pod GC
        else:
            self.add_node(f"extra-{serial:05d}")
        self.settle()

    def set_image(self, key: str, image: str) -> None:
        ds = copy.deepcopy(self.objs["DaemonSet"][key])
        ds["spec"]["template"]["spec"]["containers"][0]["image"] = image
        md = ds["metadata"]
        md["generation"] = int(md.get("generation", 1)) + 1
        ann = md.setdefault("annotations", {})
        ann["deprecated.daemonset.template.generation"] = str(
            int(ann.get("deprecated.daemonset.template.generation", "1")) + 1)
        self.write("MODIFIED", ds)
        self.settle([key])


def generate(store: Store, entries: int, nodes: int, seed: int = 1) -> LogSim:
    sim = LogSim(store, seed)
    for i in range(1, nodes + 1):
        sim.add_node(f"node-{i:05d}")
    for name, image, selector in (("logs", "fluentd:v1", None), ("metrics", "node-exporter:v1",
                                  None), ("net", "calico:v1", None),
                                  ("edge", "edge-agent:v1", {"role": "edge"})):
        sim.create(daemonset(name, image, selector))
    sim.settle()
    rollout, undo, serial = entries // 3, 2 * entries // 3, 0
    while sim.entries < entries:
        r = sim.rng.random()
        if sim.entries >= rollout and rollout:
            sim.set_image("ns-logs/logs", "fluentd:v2")
            rollout = 0
        elif sim.entries >= undo and undo:
            sim.set_image("ns-logs/logs", "fluentd:v1")
            undo = 0
        elif r < 0.004:
            sim.toggle_label()
        elif r < 0.005:
            sim.toggle_taint()
        elif r < 0.0052:
            serial += 1
            sim.node_churn(serial)
        elif r < 0.65:
            sim.heartbeat()
        else:
            sim.pod_churn()
    sim.write_view()
    return sim


def replay_floor(client: Any, path: Path, keys: Keys) -> tuple[float, float]:
    """Seconds Redis itself needs for the rebuild's writes into the empty prefix ``keys``:
    every entry's XADD, encoded beforehand as the rebuild encodes it, sent as one pipelined
    stream with replies off (the reply to the closing CLIENT REPLY ON comes after the last
    XADD is done), then the view hashes; and of them, the view hashes'."""
    view = _file_view(path)
    append = restore.Appender(client, keys.log)
    batches: list[bytes] = []
    pending: list[list[Any]] = []
    with logfile.Reader(path) as reader:
        for rec in reader.records():
            if rec[0] != logfile.ENTRY:
                continue
            pending.append(rec)
            if len(pending) >= rebuild.BATCH:
                batches.append(append.encode(pending))
                pending = []
    batches.append(append.encode(pending))
    started = time.monotonic()
    for data in batches:
        append.send_raw(data)
    append.close()
    logged = time.monotonic()
    restore.write_view(client, keys, view)
    done = time.monotonic()
    return done - started, done - logged


def restore_floor(client: Any, path: Path, keys: Keys,
                  cpu: Callable[[], float]) -> tuple[float, float]:
    """Seconds Redis itself needs to take the same log as one RESTORE of its DUMP (the
    stream as Redis serialises it, uncompressed: no command parsed per entry, no entry
    encoded by Redis), then the view hashes. ``keys.log`` must hold the log (the XADD
    floor's), which is replaced by the restored one, checked to be of the same length and
    newest id. Redis has no way to append serialised entries to a stream, so the whole log
    is one argument: the private server's limit on one (512 MB by default, under the
    log's size) is raised for it, as replay could not do to a user's Redis. Also returns
    Redis' CPU seconds for it (``cpu``: the server's so far)."""
    client.config_set("rdbcompression", "no")
    payload = client.dump(keys.log)
    extent = restore.log_extent(client, keys)
    client.unlink(*client.keys(keys.tag + ":*"))
    limit = str(max(2 * len(payload), 512 << 20))
    client.config_set("proto-max-bulk-len", limit)
    client.config_set("client-query-buffer-limit", limit)
    view = _file_view(path)
    key = keys.log.encode()
    head = b"*4\r\n$7\r\nRESTORE\r\n$%d\r\n%s\r\n$1\r\n0\r\n$%d\r\n" % (
        len(key), key, len(payload))
    conn = client.connection_pool.get_connection()
    started, used = time.monotonic(), cpu()
    try:
        conn.send_packed_command([head, payload, b"\r\n"], check_health=False)
        conn.read_response()
    finally:
        client.connection_pool.release(conn)
    restore.write_view(client, keys, view)
    seconds, used = time.monotonic() - started, cpu() - used
    if restore.log_extent(client, keys) != extent:
        raise RuntimeError(f"the restored log is not the one dumped: {extent}")
    return seconds, used


def _file_view(path: Path) -> snapshot.RawView:
    """The view the file's entries fold into (what every floor writes after the log)."""
    view = snapshot.RawView()
    with logfile.Reader(path) as reader:
        for rec in reader.records():
            if rec[0] == logfile.ENTRY:
                view.apply(rec[1], rec[3], rec[4], rec[5], rec[6])
    return view


def _redis_cpu(server: RedisServer) -> float:
    """CPU seconds the Redis server used so far (0 where it cannot be read)."""
    pid = server.proc.pid if server.proc is not None else 0
    return (benchkit.process_cpu(pid) or 0.0) if pid else 0.0


def _cpu() -> float:
    """CPU seconds of this process and of its children that ended (verify's workers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def read_floor(path: Path) -> float:
    """Seconds to read the export and decode its msgpack once, doing nothing else."""
    started = time.monotonic()
    with logfile.Reader(path) as reader:
        for _rec in reader.records():
            pass
    return time.monotonic() - started


def _view(client: Any, keys: Keys) -> dict[str, Any]:
    """The view hashes as {kind: [[key, payload, resourceVersion], ...]} in key order."""
    out = {}
    for kind in ("Node", "Pod", "DaemonSet", "ControllerRevision", "Event"):
        objs, rvs = client.hgetall(keys.objects(kind)), client.hgetall(keys.versions(kind))
        out[kind] = [[k, objs[k], rvs.get(k)] for k in sorted(objs)] + \
            [[k, None, rvs[k]] for k in sorted(set(rvs) - set(objs))]
    return out


def _cached(cache: Path | None, entries: int, nodes: int) -> tuple[Path, Path, Path] | None:
    """The cache's files for a log of this size (export, view, counts), or None."""
    if cache is None:
        return None
    stem = cache / f"replay-{entries}-{nodes}"
    return (stem.with_suffix(".dblog"), stem.with_suffix(".view"), stem.with_suffix(".json"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--label", default="")
    ap.add_argument("--no-record", action="store_true", help="Do not append to bench.jsonl.")
    ap.add_argument("--cache", type=Path, default=None,
                    help="Keep the generated export in this folder and reuse it on later runs "
                         "of the same --entries and --nodes (generating 1,000,000 takes minutes)")
    args = ap.parse_args()
    server = RedisServer().start()
    tmp = Path(tempfile.mkdtemp(prefix="bench-replay-"))
    try:
        client = connect(server.url)
        src, dst = Keys("bench-src"), Keys("bench-dst")
        cached = _cached(args.cache, args.entries, args.nodes)
        reused = cached is not None and all(f.exists() for f in cached)
        if cached is not None and reused:
            path, view_file, counts_file = cached
            expected = codec.unpack(view_file.read_bytes())
            counts = json.loads(counts_file.read_text())
            print(f"reusing {path.name} ({counts['entries']:,} entries, "
                  f"{counts['decisions']:,} decisions)", flush=True)
        else:
            started = time.monotonic()
            sim = generate(Store(client, src), args.entries, args.nodes)
            gen_s = time.monotonic() - started
            print(f"generated {sim.entries:,} entries ({sim.decisions:,} decisions, "
                  f"{sum(len(v) for v in sim.objs.values()):,} objects) in {gen_s:.1f}s",
                  flush=True)
            path = tmp / "bench.dblog" if cached is None else cached[0]
            ex = export.export(client, src, path)
            print(f"export: {ex.entries:,} entries, {path.stat().st_size / 1e6:.0f} MB in "
                  f"{ex.seconds:.1f}s ({ex.entries / ex.seconds:,.0f} entries/s)", flush=True)
            expected = _view(client, src)
            counts = {"entries": sim.entries, "decisions": sim.decisions,
                      "generate_s": round(gen_s, 2), "export_s": round(ex.seconds, 2),
                      "export_entries_per_s": round(ex.entries / ex.seconds)}
            client.flushdb()
            if cached is not None:
                args.cache.mkdir(parents=True, exist_ok=True)
                cached[1].write_bytes(codec.pack(expected))
                cached[2].write_text(json.dumps(counts))
        size_mb = path.stat().st_size / 1e6
        load_before = os.getloadavg()[0]
        floor_keys = Keys("bench-floor")

        def xadd_floor() -> tuple[float, float, float]:
            """The XADD floor's seconds, of them the view's, and Redis' CPU seconds."""
            redis_cpu = _redis_cpu(server)
            floor_s, view_s = replay_floor(client, path, floor_keys)
            return floor_s, view_s, _redis_cpu(server) - redis_cpu

        # the XADD floor before the replay and after it (the best of the two: a floor), then
        # RESTORE's, from the log the second one wrote
        xadd_runs = [xadd_floor()]
        client.unlink(*client.keys(floor_keys.tag + ":*"))
        cpu, redis_cpu = time.process_time(), _redis_cpu(server)
        rb = rebuild.rebuild(path, client, dst)
        rb_cpu, rb_redis = time.process_time() - cpu, _redis_cpu(server) - redis_cpu
        same = _view(client, dst) == expected
        client.unlink(*client.keys(dst.tag + ":*"))
        xadd_runs.append(xadd_floor())
        xadd_s, view_s, xadd_redis = min(xadd_runs)
        restore_s, restore_redis = restore_floor(client, path, floor_keys,
                                                 lambda: _redis_cpu(server))
        client.unlink(*client.keys(floor_keys.tag + ":*"))
        floor_s = min(xadd_s, restore_s)
        floor_way = "RESTORE" if restore_s < xadd_s else "XADD"
        floor_rate = counts["entries"] / floor_s
        print(f"replay: {rb.entries:,} entries, {rb.objects:,} objects in {rb.seconds:.1f}s "
              f"= {rb.rate:,.0f} entries/s (target {TARGET:,}); view identical: {same}",
              flush=True)
        print(f"  floor, Redis alone for the same log and view: pipelined XADDs "
              f"{xadd_s:.2f}s = {counts['entries'] / xadd_s:,.0f} entries/s (best of "
              f"{', '.join(f'{r[0]:.2f}s' for r in xadd_runs)}, the view's hashes "
              f"{view_s * 1000:.0f} ms); one RESTORE of the log's DUMP {restore_s:.2f}s = "
              f"{counts['entries'] / restore_s:,.0f} entries/s; replay takes "
              f"{rb.seconds / floor_s:.2f}x the faster ({floor_way})", flush=True)
        print(f"  CPU per entry: replay's process {rb_cpu / rb.entries * 1e6:.1f} us, Redis "
              f"{rb_redis / rb.entries * 1e6:.1f} us (in the XADD floor: "
              f"{xadd_redis / rb.entries * 1e6:.1f} us, so Redis alone on a core of its own "
              f"takes {rb.entries / xadd_redis if xadd_redis else 0:,.0f} entries/s; in "
              f"RESTORE's {restore_redis / rb.entries * 1e6:.1f} us)", flush=True)
        read_s = read_floor(path)
        cpu = _cpu()
        vr = verify.verify(path, workers=verify.default_workers())
        v_cpu = _cpu() - cpu
        v_rate = vr.entries / vr.seconds if vr.seconds else 0.0
        print(f"verify: {vr.verified:,} decisions over {vr.entries:,} entries in "
              f"{vr.seconds:.1f}s = {v_rate:,.0f} entries/s (target {VERIFY_TARGET:,}), "
              f"{vr.verified / vr.seconds:,.0f} decisions/s; floor, reading and decoding the "
              f"file once: {read_s:.1f}s = {vr.entries / read_s:,.0f} entries/s (verify takes "
              f"{vr.seconds / read_s:.2f}x); divergences: {len(vr.divergences)}", flush=True)
        for d in vr.divergences[:3]:
            print("  " + d.describe())
        load_after = os.getloadavg()[0]
        print(f"CPU time of this process: replay {rb_cpu:.1f}s (Redis' own not counted), "
              f"verify {v_cpu:.1f}s over {verify.default_workers()} processes = "
              f"{vr.entries / v_cpu:,.0f} entries per CPU second",
              flush=True)
        print(f"load average (1 min): {load_before:.2f} before, {load_after:.2f} after "
              f"({os.cpu_count()} cores)", flush=True)
        result = {
            "at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "revision": benchkit.git_revision(), "bench": "replay", "label": args.label,
            "entries": rb.entries, "decisions": counts["decisions"], "nodes": args.nodes,
            "objects": rb.objects, "file_mb": round(size_mb, 1),
            "generate_s": counts["generate_s"], "export_s": counts["export_s"],
            "export_entries_per_s": counts["export_entries_per_s"], "reused_file": reused,
            "replay_s": round(rb.seconds, 2), "replay_entries_per_s": round(rb.rate),
            "replay_floor_s": round(floor_s, 2), "replay_floor_way": floor_way,
            "replay_floor_entries_per_s": round(floor_rate),
            "replay_floor_xadd_s": round(xadd_s, 2),
            "replay_floor_xadd_runs_s": [round(r[0], 2) for r in xadd_runs],
            "replay_floor_view_s": round(view_s, 3),
            "replay_floor_restore_s": round(restore_s, 2),
            "replay_floor_restore_redis_cpu_s": round(restore_redis, 2),
            "replay_view_identical": same, "replay_cpu_s": round(rb_cpu, 2),
            "replay_redis_cpu_s": round(rb_redis, 2),
            "replay_floor_redis_cpu_s": round(xadd_redis, 2),
            "verify_s": round(vr.seconds, 2), "verify_entries_per_s": round(v_rate),
            "verify_floor_s": round(read_s, 2), "verify_cpu_s": round(v_cpu, 2),
            "verify_floor_entries_per_s": round(vr.entries / read_s),
            "verify_decisions": vr.verified, "verify_workers": verify.default_workers(),
            "verify_divergences": len(vr.divergences),
            "target_entries_per_s": TARGET, "verify_target_entries_per_s": VERIFY_TARGET,
            "meets_target": rb.rate >= TARGET and v_rate >= VERIFY_TARGET,
            "loadavg_1m": round(load_after, 2), "loadavg_1m_before": round(load_before, 2),
        }
        if not args.no_record:
            RESULTS.mkdir(parents=True, exist_ok=True)
            with JSONL.open("a") as f:
                f.write(json.dumps(result, sort_keys=True) + "\n")
            benchkit.write_summary()
        ok = same and vr.ok and rb.rate >= TARGET and v_rate >= VERIFY_TARGET
        return 0 if ok else 1
    finally:
        for f in tmp.glob("*"):
            f.unlink()
        tmp.rmdir()
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
