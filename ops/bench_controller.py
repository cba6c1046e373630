"""Benchmark: apply a DaemonSet on 1,000 / 5,000 simulated nodes (instant readiness).

    python ops/bench_controller.py [--nodes 1000,5000] [--workers N] [--added 200]
                                   [--label TEXT] [--profile DIR] [--keep-logs]

Per size it starts a private redis-server and the real processes (watcher, reconciler-worker
x N, status-writer, node-agent), creates the nodes (1,000 per commit), warms the processes up
with a one-node DaemonSet in another namespace, then measures from the DaemonSet's ADDED log
entry:

* apply → all pods created (the N-th pod ADDED entry);
* apply → status complete (desired = current = ready = available = N, observedGeneration 1:
  the first DaemonSet entry with that status);
* Redis commands per pod created (``INFO commandstats`` delta over both phases / N, this
  driver's own polling taken off);
* the apply's rounds (a sync's creates, closed by its decision record; upstream's burst makes
  one round per 250 pods): median and max of their creates' span, the time from the last
  create to the record and from the record to the next round's first create, on the Redis
  clock of the log entries;
* at the largest size, node added → its pod created, p50/p99 over ``--added`` nodes added one
  at a time after convergence (node entry id → pod ADDED entry id), and the Redis commands per
  added node: every process's, this driver's node creates included, its own polling and the
  node agent's lease renewals taken off (background work: one SET per served node every
  quarter lease duration, whatever happens; recorded beside it as a rate).

Results are appended to ops/results/bench.jsonl and summarised in
ops/results/bench-controller.md. Target: 5,000 pods created and counted in status in < 5 s.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import benchkit
from benchkit import NAMESPACE, Cluster, id_ms

from shared.store import codec

DS_KEY = f"{NAMESPACE}/{benchkit.DS_NAME}"
LEASE_RENEWALS = "daemonbus_node_lease_renewals_total"  # the node agent's counter
PER_NODE = 'daemonbus_reconcile_per_node_total{path="%s"}'  # hinted hand-outs, by path


def hinted_syncs(c: Cluster) -> dict[str, float]:
    """Hand-outs with node hints so far, over every reconciler-worker: per-node or full."""
    return {path: sum(c.metric(name, PER_NODE % path) for name in c.procs
                      if name.startswith("reconciler-"))
            for path in ("per-node", "full")}


def measure_apply(c: Cluster, n: int) -> dict[str, Any]:
    base_pods, _ = c.poll_counts()
    c.start_profiling(f"controller-{n}")
    before = c.command_stats()
    cpu_before, syncs_before = c.cpu_reading(), c.sync_stats()
    c.bench_commands = 0
    started = time.monotonic()
    _verb, ds = c.s.apply(benchkit.daemonset_manifest())
    ds_id = ds["metadata"]["resourceVersion"]
    state: dict[str, Any] = {"pods": 0, "ds": {}}

    def progress() -> str:
        return benchkit.fmt_status(state["pods"] - base_pods, state["ds"])

    def poll() -> None:
        state["pods"], state["ds"] = c.poll_counts()

    def all_pods() -> bool:
        poll()
        return bool(state["pods"] - base_pods >= n)

    def complete() -> bool:
        poll()
        return benchkit.status_complete(state["ds"].get("status") or {}, n, 1)

    benchkit.wait_until(all_pods, 300, progress, c)
    wall_pods = time.monotonic() - started
    benchkit.wait_until(complete, 300, progress, c)
    wall_status = time.monotonic() - started
    m = benchkit.finish(c, before, cpu_before, progress)
    cpu, syncs, total, per = m.cpu, m.syncs, m.commands, m.per_command
    pods_seen = 0
    last_pod = first_pod = status_id = ""
    decisions = status_writes = pod_updates = 0
    timeline: list[tuple[str, float]] = []  # ("create" | "record", Redis ms) in log order
    for eid, f in c.scan_log(ds_id):
        kind, etype, key = f[b"k"], f[b"t"], f[b"n"].decode()
        if kind == b"Pod" and key.startswith(NAMESPACE + "/"):
            if etype == b"ADDED":
                timeline.append(("create", id_ms(eid)))
                pods_seen += 1
                first_pod = first_pod or eid
                if pods_seen == n:
                    last_pod = eid
            elif etype == b"MODIFIED":
                pod_updates += 1
        elif kind == b"DaemonSet" and key == DS_KEY:
            if etype == b"DECISION":
                decisions += 1
                timeline.append(("record", id_ms(eid)))
            elif etype == b"MODIFIED":
                status_writes += 1
                obj = codec.unpack(f[b"o"])
                if not status_id and benchkit.status_complete(obj.get("status") or {}, n, 1):
                    status_id = eid
    t0 = id_ms(ds_id)
    shape = rounds(timeline)
    if shape:
        print("  rounds: " + ", ".join(f"{k} {v}" for k, v in shape.items()))
    return {
        "rounds": shape,
        "pods_created_s": round((id_ms(last_pod) - t0) / 1000.0, 3) if last_pod else None,
        "status_complete_s": round((id_ms(status_id) - t0) / 1000.0, 3) if status_id else None,
        "first_pod_ms": round(id_ms(first_pod) - t0, 1) if first_pod else None,
        "wall_pods_s": round(wall_pods, 3),
        "wall_status_s": round(wall_status, 3),
        "commands": total,
        "commands_per_pod": round(total / n, 2),
        "top_commands": dict(list(per.items())[:8]),
        "syncs": syncs[0] - syncs_before[0],
        "sync_ms_mean": round(1000 * (syncs[1] - syncs_before[1]) /
                              max(1, syncs[0] - syncs_before[0]), 1),
        "cpu_seconds": cpu,
        "syncs_recorded": decisions,
        "status_writes": status_writes,
        "pod_status_writes": pod_updates,
    }


def rounds(timeline: list[tuple[str, float]]) -> dict[str, Any]:
    """The shape of an apply's syncs from its log (Redis ms of each pod create and decision
    record, in log order): a round is the creates a decision record closes. Median and max
    (ms) of its creates' span (first to last), last create to its record, and its record to
    the next round's first create."""
    spans: list[float] = []
    to_record: list[float] = []
    gaps: list[float] = []
    first = last = prev_record = None
    for what, ms in timeline:
        if what == "create":
            if first is None:
                first = ms
                if prev_record is not None:
                    gaps.append(ms - prev_record)
            last = ms
        elif first is not None and last is not None:
            spans.append(last - first)
            to_record.append(ms - last)
            prev_record, first, last = ms, None, None

    def stat(values: list[float]) -> list[float]:
        return [round(benchkit.percentile(values, 50), 1), round(max(values), 1)] \
            if values else []

    return {"count": len(spans), "creates_ms": stat(spans), "to_record_ms": stat(to_record),
            "to_next_ms": stat(gaps)} if spans else {}


def measure_added(c: Cluster, n: int, count: int) -> dict[str, Any]:
    c.start_profiling(f"node-added-{n}")
    before = c.command_stats()
    cpu_before, syncs_before = c.cpu_reading(), c.sync_stats()
    renewals_before = c.metric("node-agent", LEASE_RENEWALS)
    hinted_before = hinted_syncs(c)
    c.bench_commands = 0
    latencies: list[float] = []
    started = time.monotonic()
    next_line = started + 1.0
    for i in range(1, count + 1):
        name = f"added-{i:05d}"
        (node_id,) = c.create_nodes([name])
        pod_id = c.wait_for_pod(name, node_id)
        latencies.append(id_ms(pod_id) - id_ms(node_id))
        if time.monotonic() >= next_line:
            next_line += 1.0
            print(f"  t={time.monotonic() - started:5.1f}s  nodes added={i}/{count} "
                  f"last latency={latencies[-1]:.1f} ms", flush=True)
    after = c.command_stats()
    elapsed = time.monotonic() - started
    renewals = int(c.metric("node-agent", LEASE_RENEWALS) - renewals_before)
    cpu = benchkit.cpu_delta(cpu_before, c.cpu_reading())
    syncs = c.sync_stats()
    hinted = {k: int(v - hinted_before[k]) for k, v in hinted_syncs(c).items()}
    c.stop_profiling()
    raw, per = benchkit.command_delta(before, after)
    total = max(0, raw - c.bench_commands - renewals)
    if per.get("set"):  # the renewals are SETs: leave them out of the breakdown too
        per["set"] = max(0, per["set"] - renewals)
        per = dict(sorted(per.items(), key=lambda kv: -kv[1]))
    p50, p99 = benchkit.percentile(latencies, 50), benchkit.percentile(latencies, 99)
    print(f"  node added → pod created over {count} nodes: p50 {p50:.1f} ms, p99 {p99:.1f} ms, "
          f"max {max(latencies):.1f} ms")
    print(f"  Redis commands per added node: {total / count:.1f} (all {raw}; of them this "
          f"driver's polling {c.bench_commands}, node lease renewals {renewals})")
    print(f"  syncs: {syncs[0] - syncs_before[0]}, of them handed out with node hints "
          f"{hinted['per-node']} per-node and {hinted['full']} full (the per-node plan asked)")
    return {
        "nodes_added": count,
        "node_added_p50_ms": round(p50, 1),
        "node_added_p99_ms": round(p99, 1),
        "node_added_max_ms": round(max(latencies), 1),
        "commands_per_added_node": round(total / count, 1),
        "commands_added_raw": raw,  # everything Redis counted, driver and renewals included
        "driver_commands_added": c.bench_commands,
        "node_lease_renewals_per_s": round(renewals / elapsed, 1),
        "syncs_per_added_node": round((syncs[0] - syncs_before[0]) / count, 2),
        "per_node_syncs_added": hinted["per-node"],
        "hinted_full_syncs_added": hinted["full"],
        "sync_ms_mean_added": round(1000 * (syncs[1] - syncs_before[1]) /
                                    max(1, syncs[0] - syncs_before[0]), 1),
        "cpu_ms_per_added_node": {k: round(1000 * v / count, 1) for k, v in cpu.items()},
        "top_commands_added": {k: round(v / count, 1) for k, v in list(per.items())[:12]},
    }


def run_size(n: int, workers: int, added: int, label: str, profile: Path | None,
             keep_logs: bool) -> dict[str, Any]:
    print(f"== {n} nodes, {workers} reconciler worker(s)")
    with Cluster(workers=workers, profile_dir=profile, keep_logs=keep_logs) as c:
        t = time.monotonic()
        c.create_nodes([f"node-{i:05d}" for i in range(1, n + 1)])
        print(f"  created {n} nodes in {time.monotonic() - t:.1f}s; starting processes")
        c.start_all()
        c.warm_up()
        result: dict[str, Any] = {"bench": "controller", "nodes": n, "workers": workers,
                                  "label": label}
        result.update(measure_apply(c, n))
        print(f"  apply → all pods created: {result['pods_created_s']} s; → status complete: "
              f"{result['status_complete_s']} s; Redis commands per pod: "
              f"{result['commands_per_pod']}")
        if added:
            result.update(measure_added(c, n, added))
    benchkit.record(result)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", default="1000,5000", help="comma-separated cluster sizes")
    ap.add_argument("--workers", type=int, default=1, help="reconciler-worker processes")
    ap.add_argument("--added", type=int, default=200,
                    help="nodes added one at a time at the largest size (0: skip)")
    ap.add_argument("--label", default="", help="a note stored with the results")
    ap.add_argument("--profile", type=Path, default=None,
                    help="record py-spy profiles (raw collapsed stacks) of every process here")
    ap.add_argument("--keep-logs", action="store_true", help="keep the processes' logs")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.nodes.split(",") if s.strip()]
    try:
        for n in sizes:
            run_size(n, args.workers, args.added if n == max(sizes) else 0, args.label,
                     args.profile, args.keep_logs)
    except BaseException:
        if not benchkit.interrupted():
            raise
        print("interrupted; everything started was stopped", file=sys.stderr)
        return 130
    print(f"results: {benchkit.JSONL.relative_to(benchkit.ROOT)}, "
          f"{benchkit.SUMMARY.relative_to(benchkit.ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
