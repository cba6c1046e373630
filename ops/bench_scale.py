"""Benchmark: 50,000 simulated nodes on one Redis (issue 15), each phase beside its floor.

    python ops/bench_scale.py                       # 50,000 nodes, then 10 DaemonSets x 5,000
                                                    # nodes with 1, 2 and 4 workers
    python ops/bench_scale.py --nodes 5000,50000    # the side-by-side of per-event costs
    python ops/bench_scale.py --nodes 5000 --scaling none
    python ops/bench_scale.py --nodes 0 --scaling 10x5000 --scaling-workers 1,2,4
        [--added 1000] [--removed N/10] [--idle 10] [--workers 1] [--timeout 1800]
        [--skip rollout,added,removed]
        [--label TEXT] [--profile DIR] [--profile-rate 200] [--keep-logs] [--no-record] [--json-out FILE]

**Scale run**, per size N (``--nodes``): a private redis-server and the real processes
(watcher, reconciler-worker x ``--workers``, status-writer, gc, node agent with instant
readiness and termination), then, each phase timed from log entry ids (the Redis clock):

* registration: N Ready nodes, 1,000 per commit (each commit's time as this driver saw it);
* apply: one DaemonSet over every node → all N pods created, → counted in status;
* rollout: set image at maxUnavailable 10% → rollout complete;
* idle: windows of ``--idle`` seconds of nothing until two in a row agree, the background
  rate of commands and CPU (node lease renewals, heartbeats, periodic passes), taken off
  the next phase's per-node costs;
* added: ``--added`` nodes one at a time, node ADDED → its pod ADDED p50/p99; per added node
  the Redis commands (``INFO commandstats`` delta, as bench_controller counts it — and net
  of this driver's own commands and of the idle rate), CPU per process, log entries by kind;
* removed: ``--removed`` nodes (a tenth by default) deleted (1,000 per commit) → status
  counts them out, → their pods deleted.

Every phase is printed beside its floor (``benchkit.Floor``): the same commits replayed
through one pipeline into a scratch prefix of the same server, wall time and Redis' own
script time, and the ratio. Resident memory of each process and Redis' ``used_memory`` are
read after each phase; a reconciler-worker's must stay within 2 GiB (reported, not
asserted).

**Scaling run** (``--scaling DxM``, ``none`` to skip): D DaemonSets, each over its own M
labelled nodes, converged, then all D rolled at once (maxUnavailable 10%), once per worker
count of ``--scaling-workers``: pods updated per second, and "processed twice" counted from
the whole log: a second pod ADDED for one DaemonSet, revision and node, and a second decision
record of one DaemonSet at one position (a key handed out twice at once).

Results: one JSON line per run appended to ops/results/bench.jsonl (bench ``scale`` and
``scale-workers``, with the 1-minute load average), the table in ops/results/bench-scale.md.
``--profile DIR`` records py-spy profiles of every process for every phase.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bench_rollout
import benchkit
from benchkit import NAMESPACE, Cluster, Floor, FloorReading, id_ms

from shared.model import podutil
from shared.store import codec

DS_KEY = f"{NAMESPACE}/{benchkit.DS_NAME}"
SUMMARY = benchkit.RESULTS / "bench-scale.md"
GROUP_LABEL = "bench.daemonbus.io/group"
RSS_LIMIT_MIB = 2048.0
HEARTBEAT = 300.0  # the node agent's --heartbeat default: registered heartbeats spread over it
Obj = dict[str, Any]


# ---- one phase: readings before, after, the floor ---------------------------------------------

class Phase:
    """Readings around one measured phase (commands, CPU, syncs), its floor and profile."""

    def __init__(self, c: Cluster, name: str, n: int) -> None:
        self.c, self.name = c, name
        self.tag = f"scale-{n}-{name}"
        self.floor = Floor(c)
        self.floor.start()
        c.start_profiling(self.tag)
        c.bench_commands = 0
        self.commands = c.command_stats()
        self.cpu = c.cpu_reading()
        self.syncs = c.sync_stats()
        self.catch_up = c.catch_up_cpu()
        self.started = time.monotonic()

    def end(self, progress: Callable[[], str]) -> benchkit.Measured:
        self.seconds = time.monotonic() - self.started
        m = benchkit.finish(self.c, self.commands, self.cpu, progress)
        self.catch_up = {k: round(v - self.catch_up.get(k, 0.0), 2)
                         for k, v in self.c.catch_up_cpu().items()}
        print(f"  CPU seconds following the log (catch-up) per worker: {self.catch_up}")
        self.profile = self.c.profile_summary(self.tag)
        for proc, top in self.profile.items():
            print(f"  profile {self.name} {proc}: " +
                  "; ".join(f"{fn} {share}%" for fn, share in top))
        return m

    def floor_of(self, until: str) -> FloorReading:
        return self.floor.measure(until)


def with_floor(out: Obj, name: str, measured_s: float | None, floor: FloorReading) -> None:
    """Put the floor beside the measured time, printed and in ``out``."""
    out.update(floor.as_dict(name))
    ratio = round(measured_s / floor.seconds, 1) if measured_s and floor.seconds else None
    out[f"{name}_floor_ratio"] = ratio
    print(f"  {name}: measured {measured_s} s; floor {floor.seconds:.3f} s "
          f"(Redis {floor.redis_seconds:.3f} s, {floor.commits} commits of {floor.entries} "
          f"entries, {floor.failed} failed); ratio {ratio}")


def waiter(c: Cluster, key: str = DS_KEY) -> tuple[dict[str, Any], Callable[[], str]]:
    state: dict[str, Any] = {"pods": 0, "ds": {}}

    def progress() -> str:
        return benchkit.fmt_status(state["pods"], state["ds"])

    return state, progress


def poll(c: Cluster, state: dict[str, Any], key: str = DS_KEY) -> Obj:
    state["pods"], state["ds"] = c.poll_counts(key)
    return dict(state["ds"].get("status") or {})


def first_status(c: Cluster, after: str, key: str, n: int, generation: int,
                 updated: bool) -> str:
    """The first DaemonSet ``key`` entry after ``after`` whose status is complete at n."""
    for eid, f in c.scan_log(after):
        if f[b"k"] == b"DaemonSet" and f[b"t"] == b"MODIFIED" and f[b"n"].decode() == key:
            obj = codec.unpack(f[b"o"])
            if benchkit.status_complete(obj.get("status") or {}, n, generation, updated):
                return eid
    return ""


def secs(a: str, b: str) -> float | None:
    return round((id_ms(b) - id_ms(a)) / 1000.0, 3) if a and b else None


# ---- the scale run ----------------------------------------------------------------------------

def registration(c: Cluster, n: int) -> Obj:
    floor = Floor(c)
    floor.start()
    timings: list[float] = []
    ids = c.create_nodes([f"node-{i:05d}" for i in range(1, n + 1)], timings=timings,
                         spread_heartbeats=HEARTBEAT)
    out: Obj = {"registration_s": round(sum(timings), 3),
                "registration_log_s": secs(ids[0], ids[-1]),
                "registration_commit_p50_ms": round(1000 * benchkit.percentile(timings, 50), 1),
                "registration_commit_max_ms": round(1000 * max(timings), 1)}
    print(f"  registered {n} nodes in {len(timings)} commits: {out['registration_s']} s "
          f"(commit p50 {out['registration_commit_p50_ms']} ms, max "
          f"{out['registration_commit_max_ms']} ms)")
    ends = {ids[i] for i in range(999, len(ids), 1000)} | {ids[-1]}  # the 1,000-node commits
    with_floor(out, "registration", out["registration_s"], floor.measure(ids[-1], ends))
    return out


def apply_phase(c: Cluster, n: int, timeout: float) -> Obj:
    base_pods, _ = c.poll_counts()
    ph = Phase(c, "apply", n)
    _verb, ds = c.s.apply(benchkit.daemonset_manifest(max_unavailable="10%"))
    ds_id = ds["metadata"]["resourceVersion"]
    state, progress = waiter(c)

    def all_pods() -> bool:
        poll(c, state)
        return bool(state["pods"] - base_pods >= n)

    benchkit.wait_until(all_pods, timeout, progress, c)
    benchkit.wait_until(lambda: benchkit.status_complete(poll(c, state), n, 1), timeout,
                        progress, c)
    m = ph.end(progress)
    last_pod, pods = "", 0
    for eid, f in c.scan_log(ds_id):
        if f[b"k"] == b"Pod" and f[b"t"] == b"ADDED" and f[b"n"].startswith(b"bench/"):
            pods += 1
            if pods == n:
                last_pod = eid
                break
    status_id = first_status(c, ds_id, DS_KEY, n, 1, False)
    out: Obj = {"apply_pods_s": secs(ds_id, last_pod), "apply_status_s": secs(ds_id, status_id),
                "apply_commands": m.commands, "apply_commands_per_pod": round(m.commands / n, 2),
                "apply_cpu_seconds": m.cpu, "apply_syncs": m.syncs[0] - ph.syncs[0],
                "apply_profile": ph.profile}
    print(f"  apply → {n} pods created {out['apply_pods_s']} s, → counted in status "
          f"{out['apply_status_s']} s")
    with_floor(out, "apply", out["apply_status_s"], ph.floor_of(status_id))
    return out


def rollout_phase(c: Cluster, n: int, timeout: float) -> Obj:
    ph = Phase(c, "rollout", n)
    ds = bench_rollout.set_image(c, bench_rollout.NEW_IMAGE)
    update_id = ds["metadata"]["resourceVersion"]
    generation = int(ds["metadata"]["generation"])
    state, progress = waiter(c)
    benchkit.wait_until(lambda: benchkit.status_complete(poll(c, state), n, generation, True),
                        timeout, progress, c)
    m = ph.end(progress)
    done_id = first_status(c, update_id, DS_KEY, n, generation, True)
    out: Obj = {"rollout_s": secs(update_id, done_id), "rollout_commands": m.commands,
                "rollout_commands_per_node": round(m.commands / n, 2),
                "rollout_cpu_seconds": m.cpu, "rollout_syncs": m.syncs[0] - ph.syncs[0],
                "rollout_catch_up_cpu_seconds": ph.catch_up, "rollout_profile": ph.profile}
    print(f"  set image → rollout complete (maxUnavailable 10%): {out['rollout_s']} s")
    with_floor(out, "rollout", out["rollout_s"], ph.floor_of(done_id))
    return out


@dataclass
class Idle:
    """The background rates while nothing happens: Redis commands per second (in all and
    per command) and CPU seconds per second of each process; ``windows``: how many were
    measured, ``steady``: whether the last two agreed."""

    commands: float
    per_command: dict[str, float]
    cpu: dict[str, float]
    windows: int = 1
    steady: bool = True


IDLE_WINDOWS = 12  # at most, before the added phase starts anyway
IDLE_COMMANDS_DRIFT = 0.1  # two windows agree: commands/s within 10 %,
IDLE_CPU_DRIFT = (0.05, 0.2)  # and each process's CPU/s within 0.05 or 20 %


def idle_window(c: Cluster, seconds: float) -> Idle:
    """The commands and CPU rates over one window of ``seconds``."""
    c.bench_commands = 0
    before, cpu_before = c.command_stats(), c.cpu_reading()
    started = time.monotonic()
    time.sleep(seconds)  # measuring the background over a fixed window, not waiting for logic
    elapsed = time.monotonic() - started
    total, per = benchkit.command_delta(before, c.command_stats(), c.bench_commands)
    cpu = benchkit.cpu_delta(cpu_before, c.cpu_reading())
    return Idle(total / elapsed, {k: v / elapsed for k, v in per.items()},
                {k: v / elapsed for k, v in cpu.items()})


def agree(a: Idle, b: Idle) -> bool:
    """Whether two windows show the same background (``IDLE_*_DRIFT``); ``other`` (the
    rest of the machine) and this driver do not count."""
    if abs(a.commands - b.commands) > IDLE_COMMANDS_DRIFT * max(a.commands, b.commands):
        return False
    least, share = IDLE_CPU_DRIFT
    return all(abs(v - b.cpu.get(k, 0.0)) <= max(least, share * max(v, b.cpu.get(k, 0.0)))
               for k, v in a.cpu.items() if k not in ("other", "driver"))


def idle_phase(c: Cluster, seconds: float) -> Idle:
    """The background (lease renewals, heartbeats, periodic passes), over windows of
    ``seconds`` (the default 10 s is one lease renewal interval, every node's renewal in it
    once) until the last two agree (``agree``), at most ``IDLE_WINDOWS``: right after a
    rollout at 50,000 nodes the processes that follow the log are still catching up, and
    a window then is no background. The rates are the mean of the last two windows."""
    windows = [idle_window(c, seconds), idle_window(c, seconds)]
    while not agree(windows[-2], windows[-1]) and len(windows) < IDLE_WINDOWS:
        print(f"  idle window {len(windows) - 1}: {windows[-2].commands:.0f} Redis "
              f"commands/s, CPU/s { {k: round(v, 3) for k, v in windows[-2].cpu.items()} }",
              flush=True)
        windows.append(idle_window(c, seconds))
    a, b = windows[-2:]

    def mean(x: dict[str, float], y: dict[str, float]) -> dict[str, float]:
        return {k: (x.get(k, 0.0) + y.get(k, 0.0)) / 2 for k in x.keys() | y.keys()}

    idle = Idle((a.commands + b.commands) / 2, mean(a.per_command, b.per_command),
                mean(a.cpu, b.cpu), len(windows), agree(a, b))
    print(f"  idle ({idle.windows} windows of {seconds:.0f} s, "
          f"{'steady' if idle.steady else 'NOT steady'}): {idle.commands:.0f} Redis "
          f"commands/s, CPU/s { {k: round(v, 3) for k, v in sorted(idle.cpu.items())} }")
    return idle


def added_phase(c: Cluster, n: int, count: int, idle: Idle, timeout: float,
                generation: int = 2) -> Obj:
    ph = Phase(c, "added", n)
    latencies: list[float] = []
    at: list[float] = []  # seconds into the phase of each node's pod
    next_line = time.monotonic() + 1.0
    last_pod = ""
    for i in range(1, count + 1):
        (node_id,) = c.create_nodes([f"added-{i:05d}"])
        last_pod = c.wait_for_pod(f"added-{i:05d}", node_id)
        latencies.append(id_ms(last_pod) - id_ms(node_id))
        at.append(round(time.monotonic() - ph.started, 1))
        if time.monotonic() >= next_line:
            next_line += 1.0
            print(f"  t={time.monotonic() - ph.started:5.1f}s  nodes added={i}/{count} "
                  f"last latency={latencies[-1]:.1f} ms", flush=True)
    driver = c.bench_commands
    state, progress = waiter(c)
    total_n = n + count
    benchkit.wait_until(lambda: benchkit.status_complete(poll(c, state), total_n, generation,
                                                         True),
                        timeout, progress, c)
    m = ph.end(progress)  # commands net of the driver's own
    elapsed = ph.seconds
    raw = m.commands + driver  # as bench_controller counts: the driver's node creates included
    net = max(0.0, m.commands - idle.commands * elapsed)
    per_net = {k: max(0.0, v - idle.per_command.get(k, 0.0) * elapsed) / count
               for k, v in m.per_command.items()}
    entries: Counter[str] = Counter()
    status_writes = pod_events = 0
    after = ph.floor.after
    for _eid, f in c.scan_log(after):
        kind, etype = f[b"k"].decode(), f[b"t"].decode()
        entries[f"{kind} {etype}"] += 1
        status_writes += kind == "DaemonSet" and etype == "MODIFIED"
        pod_events += kind == "Pod"
    status_id = first_status(c, after, DS_KEY, total_n, generation, True)
    cpu_net = {k: max(0.0, v - idle.cpu.get(k, 0.0) * elapsed) for k, v in m.cpu.items()}
    p50, p99 = benchkit.percentile(latencies, 50), benchkit.percentile(latencies, 99)
    out: Obj = {
        "nodes_added": count,
        "node_added_p50_ms": round(p50, 1), "node_added_p99_ms": round(p99, 1),
        "node_added_max_ms": round(max(latencies), 1),
        # the slowest ten, (ms, seconds into the phase): what the p99 is made of
        "node_added_worst": sorted(zip(latencies, at, strict=True))[-10:],
        "commands_per_added_node_raw": round(raw / count, 1),
        "commands_per_added_node_minus_driver": round(m.commands / count, 1),
        "commands_per_added_node": round(net / count, 1),
        "idle_commands_per_s": round(idle.commands, 1),
        "idle_windows": idle.windows, "idle_steady": idle.steady,
        "top_commands_added": {k: round(v, 1) for k, v in
                               sorted(per_net.items(), key=lambda kv: -kv[1])[:12] if v >= 0.05},
        "cpu_ms_per_added_node": {k: round(1000 * v / count, 2) for k, v in cpu_net.items()},
        "entries_per_added_node": {k: round(v / count, 2) for k, v in sorted(entries.items())},
        "status_writer_cpu_ms_per_status_write":
            round(1000 * cpu_net.get("status-writer", 0.0) / max(1, status_writes), 2),
        "node_agent_cpu_ms_per_pod_event":
            round(1000 * cpu_net.get("node-agent", 0.0) / max(1, pod_events), 2),
        "added_syncs_per_node": round((m.syncs[0] - ph.syncs[0]) / count, 2),
        "added_profile": ph.profile,
    }
    print(f"  node added → pod created over {count} nodes: p50 {p50:.1f} ms, p99 {p99:.1f} ms; "
          f"Redis commands per added node {out['commands_per_added_node']} (raw "
          f"{out['commands_per_added_node_raw']}); CPU ms per added node "
          f"{out['cpu_ms_per_added_node']}")
    print("  slowest (ms at s into the phase): " +
          ", ".join(f"{ms:.0f} at {t}" for ms, t in reversed(out["node_added_worst"])))
    floor = ph.floor_of(status_id or c.s.log_tip())
    out.update(floor.as_dict("added"))
    out["added_floor_ms_per_node"] = round(1000 * floor.seconds / count, 2)
    print(f"  added: floor per node {out['added_floor_ms_per_node']} ms (Redis "
          f"{1000 * floor.redis_seconds / count:.2f} ms) beside p50 {p50:.1f} ms")
    return out


def removed_phase(c: Cluster, n: int, total: int, count: int, timeout: float,
                  generation: int = 2) -> Obj:
    names = [f"node-{i:05d}" for i in range(n - count + 1, n + 1)]
    base_pods, _ = c.poll_counts()
    ph = Phase(c, "removed", n)
    ids = c.delete_nodes(names)
    left = total - count
    state, progress = waiter(c)
    benchkit.wait_until(lambda: benchkit.status_complete(poll(c, state), left, generation,
                                                         True) and
                        base_pods - state["pods"] >= count, timeout, progress, c)
    ph.end(progress)
    status_id = first_status(c, ids[0], DS_KEY, left, generation, True)
    gone, last_gone = 0, ""
    for eid, f in c.scan_log(ids[0]):
        if f[b"k"] == b"Pod" and f[b"t"] == b"DELETED" and f[b"n"].startswith(b"bench/"):
            gone += 1
            if gone == count:
                last_gone = eid
                break
    out: Obj = {"nodes_removed": count, "removed_status_s": secs(ids[0], status_id),
                "removed_pods_s": secs(ids[0], last_gone)}
    print(f"  {count} nodes removed → counted out of status {out['removed_status_s']} s, "
          f"→ their pods deleted {out['removed_pods_s']} s")
    until = max([status_id, last_gone], key=lambda e: codec.id_tuple(e) if e else (0, 0))
    with_floor(out, "removed", out["removed_status_s"], ph.floor_of(until))
    return out


def memory_note(c: Cluster, phase: str, memory: dict[str, dict[str, float]]) -> None:
    memory[phase] = c.memory()
    print(f"  memory after {phase} (MiB): {memory[phase]}")


def run_scale(n: int, args: argparse.Namespace) -> Obj:
    print(f"== scale: {n} nodes, {args.workers} reconciler worker(s)")
    result: Obj = {"bench": "scale", "nodes": n, "workers": args.workers, "label": args.label,
                   "skipped": sorted(args.skip - {""}),
                   "loadavg_start": [round(v, 2) for v in os.getloadavg()]}
    memory: dict[str, dict[str, float]] = {}
    with Cluster(workers=args.workers, profile_dir=args.profile, keep_logs=args.keep_logs,
                 profile_rate=args.profile_rate) as c:
        result.update(registration(c, n))
        c.start_all(gc=True)
        c.warm_up(max(args.timeout, 300.0))
        memory_note(c, "warm-up", memory)
        removed = n // 10 if args.removed is None else min(args.removed, n - 1)
        rolled = "rollout" not in args.skip
        generation = 2 if rolled else 1
        phases: list[tuple[str, Callable[[], Obj]]] = [
            ("apply", lambda: apply_phase(c, n, args.timeout)),
            ("rollout", lambda: rollout_phase(c, n, args.timeout)),
            ("added", lambda: added_phase(c, n, args.added, idle_phase(c, args.idle),
                                          args.timeout, generation) if args.added else {}),
            ("removed", lambda: removed_phase(c, n, n + args.added, removed, args.timeout,
                                              generation) if removed else {}),
        ]
        for name, phase in phases:
            if name in args.skip:
                continue
            try:
                result.update(phase())
            except RuntimeError as err:  # a phase timed out: keep what was measured
                print(f"  {name} failed: {err}")
                result["failed"] = f"{name}: {err}"[:500]
                break
            memory_note(c, name, memory)
        result["processed_twice"] = processed_twice(c)
    result["memory_mib"] = memory
    peak = max((v for m in memory.values() for k, v in m.items() if k.startswith("reconciler-")),
               default=0.0)
    result["reconciler_rss_peak_mib"] = peak
    result["reconciler_rss_within_2gib"] = peak <= RSS_LIMIT_MIB
    print(f"  reconciler-worker RSS peak {peak} MiB ({'within' if peak <= RSS_LIMIT_MIB else 'OVER'}"
          f" 2 GiB); processed twice: {result['processed_twice']}")
    return result


# ---- nothing processed twice ------------------------------------------------------------------

def processed_twice(c: Cluster) -> Obj:
    """Counted over the whole log: pods ADDED beyond the first for one DaemonSet (owner uid),
    revision (controller-revision-hash) and node; decision records beyond the first of one
    DaemonSet at one position (the position a sync read through: a second record there is
    one hand-out processed twice)."""
    pods: Counter[tuple[str, str, str]] = Counter()
    decisions: Counter[tuple[str, str]] = Counter()
    for _eid, f in c.scan_log("0-0"):
        if f[b"k"] == b"Pod" and f[b"t"] == b"ADDED":
            pod = codec.unpack(f[b"o"])
            md = pod.get("metadata") or {}
            owner = next((r.get("uid", "") for r in md.get("ownerReferences") or []
                          if r.get("controller")), "")
            labels = md.get("labels") or {}
            revision = str(labels.get("controller-revision-hash") or
                           labels.get("pod-template-generation") or "")
            pods[(owner, revision, podutil.target_node(pod))] += 1
        elif f[b"k"] == b"DaemonSet" and f[b"t"] == b"DECISION":
            rec = codec.unpack(f[b"o"])
            decisions[(str(rec.get("key", "")), str(rec.get("position", "")))] += 1
    extra_pods = sum(v - 1 for v in pods.values() if v > 1)
    extra_decisions = sum(v - 1 for v in decisions.values() if v > 1)
    return {"pods": extra_pods, "decisions": extra_decisions,
            "pod_adds": sum(pods.values()), "decision_records": sum(decisions.values())}


# ---- the scaling run --------------------------------------------------------------------------

def run_scaling(daemonsets: int, per: int, workers: int, args: argparse.Namespace) -> Obj:
    n = daemonsets * per
    print(f"== scaling: {daemonsets} DaemonSets x {per} nodes, {workers} reconciler worker(s)")
    result: Obj = {"bench": "scale-workers", "nodes": n, "daemonsets": daemonsets,
                   "nodes_per_daemonset": per, "workers": workers, "label": args.label}
    keys = [f"{NAMESPACE}/bench-{d}" for d in range(daemonsets)]
    with Cluster(workers=workers, profile_dir=args.profile, keep_logs=args.keep_logs,
                 profile_rate=args.profile_rate) as c:
        for d in range(daemonsets):
            c.create_nodes([f"node-{d:02d}-{i:05d}" for i in range(1, per + 1)],
                           labels={GROUP_LABEL: f"g{d}"}, spread_heartbeats=HEARTBEAT)
        c.start_all()
        c.warm_up(max(args.timeout, 300.0))
        for d in range(daemonsets):
            c.s.apply(benchkit.daemonset_manifest(name=f"bench-{d}", max_unavailable="10%",
                                                  node_selector={GROUP_LABEL: f"g{d}"}))
        converged = complete_all(c, keys, per, 1, args.timeout)
        print(f"  {daemonsets} DaemonSets complete after {converged:.1f} s; rolling all")
        ph = Phase(c, "rollout", n)
        updates = [bench_rollout.set_image(c, bench_rollout.NEW_IMAGE, key) for key in keys]
        first_id = updates[0]["metadata"]["resourceVersion"]
        complete_all(c, keys, per, 2, args.timeout)
        m = ph.end(lambda: f"{daemonsets} DaemonSets complete")
        done = [first_status(c, first_id, key, per, 2, True) for key in keys]
        last = max(done, key=lambda e: codec.id_tuple(e) if e else (0, 0))
        rollout_s = secs(first_id, last)
        result.update({
            "rollout_s": rollout_s,
            "pods_per_s": round(n / rollout_s, 1) if rollout_s else None,
            "rollout_commands_per_node": round(m.commands / n, 2),
            "rollout_cpu_seconds": m.cpu, "rollout_syncs": m.syncs[0] - ph.syncs[0],
            "rollout_catch_up_cpu_seconds": ph.catch_up, "rollout_profile": ph.profile,
        })
        print(f"  set image on {daemonsets} → all complete: {rollout_s} s, "
              f"{result['pods_per_s']} pods/s")
        with_floor(result, "rollout", rollout_s, ph.floor_of(last))
        result["memory_mib"] = c.memory()
        result["processed_twice"] = processed_twice(c)
    print(f"  processed twice: {result['processed_twice']}")
    return result


def complete_all(c: Cluster, keys: list[str], per: int, generation: int,
                 timeout: float) -> float:
    """Wait until every DaemonSet in ``keys`` is complete on ``per`` nodes at ``generation``."""
    left = set(keys)
    state: dict[str, Any] = {"pods": 0, "ds": {}}

    def check() -> bool:
        for key in sorted(left):
            if benchkit.status_complete(poll(c, state, key), per, generation, True):
                left.discard(key)
            else:
                return False
        return True

    return benchkit.wait_until(check, timeout, lambda: f"{len(keys) - len(left)}/{len(keys)} "
                               f"complete; {benchkit.fmt_status(state['pods'], state['ds'])}", c)


# ---- results ----------------------------------------------------------------------------------

def idle_note(r: Obj) -> str:
    """How the idle rate of a run was measured, when it is worth a note."""
    if r.get("idle_steady") is False:
        return " (not steady)"
    return f" ({r['idle_windows']} windows)" if r.get("idle_windows") else ""


NOTES = "## Where the time went"  # bench-scale.md from this heading on is written by hand


def write_summary() -> None:
    """bench-scale.md: the newest runs of both benchmarks, then their history; the notes
    from the ``NOTES`` heading on are kept."""
    rows = [r for r in benchkit._load() if r.get("bench") in ("scale", "scale-workers")]
    s = benchkit._s
    lines = [
        "# daemonbus at 50,000 nodes",
        "",
        "Written by `ops/bench_scale.py` from `bench.jsonl`. Times from log entry ids (the "
        "Redis clock); simulated nodes with instant readiness; all processes and Redis on one "
        "2-core, 24 GiB machine. Each phase is beside its floor: the same commits replayed "
        "through one pipeline into a scratch prefix of the same Redis (x = measured / floor). "
        "`load` is the 1-minute load average when the run ended: other work on the machine "
        "inflates a run's times.",
        "",
        "## Scale runs (newest last)",
        "",
        "| at | nodes | load | registration (floor) | apply→pods | apply→status (floor, x) | "
        "rollout 10% (floor, x) | added→pod p50 / p99 | cmds / added node | "
        "removed→status | reconciler RSS peak | Redis used | twice | revision | label |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
        "---: | --- | --- |",
    ]
    for r in [r for r in rows if r["bench"] == "scale"][-20:]:
        mem = r.get("memory_mib") or {}
        redis_used = max((m.get("redis used_memory", 0.0) for m in mem.values()), default=None)
        twice = r.get("processed_twice") or {}
        lines.append(
            f"| {r.get('at', '')} | {r.get('nodes')} | {r.get('loadavg_1m')} | "
            f"{s(r.get('registration_s'), ' s')} ({s(r.get('registration_floor_s'), ' s')}) | "
            f"{s(r.get('apply_pods_s'), ' s')} | {s(r.get('apply_status_s'), ' s')} "
            f"({s(r.get('apply_floor_s'), ' s')}, {s(r.get('apply_floor_ratio'), '', 1)}) | "
            f"{s(r.get('rollout_s'), ' s')} ({s(r.get('rollout_floor_s'), ' s')}, "
            f"{s(r.get('rollout_floor_ratio'), '', 1)}) | "
            f"{s(r.get('node_added_p50_ms'), ' ms', 1)} / {s(r.get('node_added_p99_ms'), ' ms', 1)} | "
            f"{s(r.get('commands_per_added_node'), '', 1)} | "
            f"{s(r.get('removed_status_s'), ' s')} | "
            f"{s(r.get('reconciler_rss_peak_mib'), ' MiB', 0)} | {s(redis_used, ' MiB', 0)} | "
            f"{twice.get('pods', '-')}/{twice.get('decisions', '-')} | {r.get('revision', '')} | "
            f"{r.get('label', '')}{failed(r)} |")
    lines += [
        "",
        "Targets (issue 15): node added → pod created p99 ≤ 20 ms at 5,000 and 50,000 nodes; "
        "apply → 50,000 pods created and counted ≤ 15 s (5,000 ≤ 1.5 s); a 50,000-node rollout "
        "at 10% ≤ 90 s. `cmds / added node` is net of the driver's own commands and of the "
        "idle background rate (lease renewals); `twice` is pods / decision records processed "
        "twice, counted from the log.",
        "",
        "## Per added node, CPU ms by process (net of the idle rate)",
        "",
        "The idle rate is measured over windows of 10 s until two in a row agree (the runs "
        "before this rule: one window right after the rollout; `not steady`: none agreed).",
        "",
        "| at | nodes | load | watcher | reconcilers | status-writer | gc | node-agent | "
        "redis-server | cmds raw / net | idle cmds/s | label |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in [r for r in rows if r["bench"] == "scale" and r.get("cpu_ms_per_added_node")][-20:]:
        cpu = r["cpu_ms_per_added_node"]
        recon = sum(v for k, v in cpu.items() if k.startswith("reconciler-"))
        lines.append(
            f"| {r.get('at', '')} | {r.get('nodes')} | {r.get('loadavg_1m')} | "
            f"{s(cpu.get('watcher'))} | {recon:.2f} | {s(cpu.get('status-writer'))} | "
            f"{s(cpu.get('gc'))} | {s(cpu.get('node-agent'))} | {s(cpu.get('redis-server'))} | "
            f"{s(r.get('commands_per_added_node_raw'), '', 1)} / "
            f"{s(r.get('commands_per_added_node'), '', 1)} | "
            f"{s(r.get('idle_commands_per_s'), '', 0)}{idle_note(r)} | {r.get('label', '')} |")
    lines += [
        "",
        "## The rollout at 10%: CPU seconds by process",
        "",
        "| at | nodes | load | rollout | watcher | reconcilers | status-writer | gc | node-agent "
        "| redis-server | other | syncs | label |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in [r for r in rows if r["bench"] == "scale" and r.get("rollout_cpu_seconds")][-20:]:
        cpu = r["rollout_cpu_seconds"]
        recon = sum(v for k, v in cpu.items() if k.startswith("reconciler-"))
        lines.append(
            f"| {r.get('at', '')} | {r.get('nodes')} | {r.get('loadavg_1m')} | "
            f"{s(r.get('rollout_s'), ' s')} | {s(cpu.get('watcher'))} | {recon:.1f} | "
            f"{s(cpu.get('status-writer'))} | {s(cpu.get('gc'))} | {s(cpu.get('node-agent'))} | "
            f"{s(cpu.get('redis-server'))} | {s(cpu.get('other'))} | "
            f"{s(r.get('rollout_syncs'), '', 0)} | {r.get('label', '')} |")
    lines += [
        "",
        "## Horizontal scaling: several DaemonSets rolled at once (newest last)",
        "",
        "| at | DaemonSets x nodes | workers | load | rollout | pods/s | floor (x) | "
        "reconciler CPU | of it following the log | twice | revision | label |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for r in [r for r in rows if r["bench"] == "scale-workers"][-30:]:
        cpu = r.get("rollout_cpu_seconds") or {}
        recon = sum(v for k, v in cpu.items() if k.startswith("reconciler-"))
        following = r.get("rollout_catch_up_cpu_seconds")  # recorded since 2026-12-03
        twice = r.get("processed_twice") or {}
        lines.append(
            f"| {r.get('at', '')} | {r.get('daemonsets')} x {r.get('nodes_per_daemonset')} | "
            f"{r.get('workers')} | {r.get('loadavg_1m')} | {s(r.get('rollout_s'), ' s')} | "
            f"{s(r.get('pods_per_s'), '', 0)} | {s(r.get('rollout_floor_s'), ' s')} "
            f"({s(r.get('rollout_floor_ratio'), '', 1)}) | {recon:.1f} s | "
            f"{s(sum(following.values()) if following else None, ' s', 1)} | "
            f"{twice.get('pods', '-')}/{twice.get('decisions', '-')} | {r.get('revision', '')} | "
            f"{r.get('label', '')} |")
    notes = ""  # the hand-written part, kept as it is
    if SUMMARY.exists() and NOTES in (text := SUMMARY.read_text()):
        notes = "\n" + text[text.index(NOTES):]
    SUMMARY.write_text("\n".join(lines) + "\n" + notes)


def failed(r: Obj) -> str:
    """The phase a run failed in (timed out), for the label cell."""
    return f" (failed in {str(r['failed']).split(':', 1)[0]})" if r.get("failed") else ""


def finish(result: Obj, args: argparse.Namespace, runs: list[Obj]) -> None:
    if not args.no_record:
        benchkit.record(result)
        write_summary()
    runs.append(result)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", default="50000", help="comma-separated sizes of the scale run "
                    "(0: none)")
    ap.add_argument("--workers", type=int, default=1, help="reconciler-workers of the scale run")
    ap.add_argument("--added", type=int, default=1000, help="nodes added one at a time")
    ap.add_argument("--removed", type=int, default=None,
                    help="nodes removed (default: a tenth of the nodes, 5,000 of 50,000)")
    ap.add_argument("--skip", default="", type=lambda v: {p.strip() for p in v.split(",")},
                    help="phases of the scale run to leave out (rollout, added, removed: "
                    "for a shorter run while iterating; the apply always runs)")
    ap.add_argument("--idle", type=float, default=10.0,
                    help="seconds of idle background measured before the added phase")
    ap.add_argument("--scaling", default="10x5000",
                    help="DaemonSets x nodes each for the scaling run ('none': skip)")
    ap.add_argument("--scaling-workers", default="1,2,4", help="worker counts to scale over")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per wait")
    ap.add_argument("--label", default="", help="a note stored with the results")
    ap.add_argument("--profile", type=Path, default=None,
                    help="record py-spy profiles (raw collapsed stacks) of every process here")
    ap.add_argument("--profile-rate", type=int, default=200,
                    help="py-spy's samples a second of each process (with --profile)")
    ap.add_argument("--keep-logs", action="store_true", help="keep the processes' logs")
    ap.add_argument("--no-record", action="store_true",
                    help="do not append to ops/results (tests)")
    ap.add_argument("--json-out", type=Path, default=None,
                    help="write every run's result here as a JSON list")
    args = ap.parse_args(argv)
    sizes = [int(v) for v in args.nodes.split(",") if v.strip() and int(v) > 0]
    runs: list[Obj] = []
    try:
        for n in sizes:
            finish(run_scale(n, args), args, runs)
        if args.scaling != "none":
            daemonsets, per = (int(v) for v in args.scaling.lower().split("x"))
            for workers in [int(v) for v in args.scaling_workers.split(",") if v.strip()]:
                finish(run_scaling(daemonsets, per, workers, args), args, runs)
    except BaseException:
        if not benchkit.interrupted():
            raise
        print("interrupted; everything started was stopped", file=sys.stderr)
        return 130
    finally:
        if args.json_out is not None:
            args.json_out.write_text(json.dumps(runs, indent=1, sort_keys=True))
    if not args.no_record:
        print(f"results: {benchkit.JSONL.relative_to(benchkit.ROOT)}, "
              f"{SUMMARY.relative_to(benchkit.ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
