"""Benchmark: a rolling update of 5,000 simulated nodes (instant readiness).

    python ops/bench_rollout.py [--nodes 5000] [--max-unavailable 10%] [--workers N]
                                [--label TEXT] [--profile DIR] [--keep-logs]
                                [--appendfsync always|everysec|no]

Starts a private redis-server and the real processes (the node agent with instant readiness
and, unless ``--grace`` says otherwise, instant termination), creates the nodes, applies a
RollingUpdate DaemonSet and waits until it is complete; then changes the pod template's image
through the store (what ``set image`` does) and measures, from that update's log entry, until
the rollout is complete: updatedNumberScheduled = numberAvailable = desired = N at the new
observedGeneration (the first DaemonSet entry with that status). Also Redis commands per node
updated (``INFO commandstats`` delta / N). Results go to ops/results/bench.jsonl and
ops/results/bench-controller.md.
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
NEW_IMAGE = "bench/agent:2"


def set_image(c: Cluster, image: str, key: str = DS_KEY) -> dict[str, Any]:
    """Change the first container's image of DaemonSet ``key`` (a template change through
    the store)."""

    def change(ds: dict[str, Any]) -> dict[str, Any]:
        ds["spec"]["template"]["spec"]["containers"][0]["image"] = image
        return ds

    out = c.s.mutate("DaemonSet", key, change)
    assert out is not None
    return out


def converge(c: Cluster, n: int, max_unavailable: int | str) -> None:
    c.s.apply(benchkit.daemonset_manifest(max_unavailable=max_unavailable))
    state: dict[str, Any] = {"pods": 0, "ds": {}}

    def complete() -> bool:
        state["pods"], state["ds"] = c.poll_counts()
        return benchkit.status_complete(state["ds"].get("status") or {}, n, 1, updated=True)

    waited = benchkit.wait_until(complete, 300, lambda: benchkit.fmt_status(state["pods"],
                                                                           state["ds"]), c)
    print(f"  DaemonSet complete on {n} nodes after {waited:.1f}s; starting the rollout")


def measure_rollout(c: Cluster, n: int) -> dict[str, Any]:
    c.start_profiling(f"rollout-{n}")
    before = c.command_stats()
    cpu_before, syncs_before = c.cpu_reading(), c.sync_stats()
    c.bench_commands = 0
    started = time.monotonic()
    ds = set_image(c, NEW_IMAGE)
    update_id = ds["metadata"]["resourceVersion"]
    generation = int(ds["metadata"]["generation"])
    state: dict[str, Any] = {"pods": 0, "ds": {}}

    def progress() -> str:
        return benchkit.fmt_status(state["pods"], state["ds"])

    def complete() -> bool:
        state["pods"], state["ds"] = c.poll_counts()
        return benchkit.status_complete(state["ds"].get("status") or {}, n, generation,
                                        updated=True)

    benchkit.wait_until(complete, 600, progress, c)
    wall = time.monotonic() - started
    m = benchkit.finish(c, before, cpu_before, progress)
    cpu, syncs, total, per = m.cpu, m.syncs, m.commands, m.per_command
    done_id = ""
    created = deleted = 0
    for eid, f in c.scan_log(update_id):
        kind, etype, key = f[b"k"], f[b"t"], f[b"n"].decode()
        if kind == b"Pod" and key.startswith(NAMESPACE + "/"):
            created += etype == b"ADDED"
            deleted += etype == b"DELETED"
        elif kind == b"DaemonSet" and key == DS_KEY and etype == b"MODIFIED" and not done_id:
            obj = codec.unpack(f[b"o"])
            if benchkit.status_complete(obj.get("status") or {}, n, generation, updated=True):
                done_id = eid
    return {
        "rollout_s": round((id_ms(done_id) - id_ms(update_id)) / 1000.0, 3) if done_id else None,
        "wall_rollout_s": round(wall, 3),
        "pods_created": created,
        "pods_deleted": deleted,
        "commands": total,
        "commands_per_node": round(total / n, 2),
        "top_commands": dict(list(per.items())[:8]),
        "syncs": syncs[0] - syncs_before[0],
        "sync_ms_mean": round(1000 * (syncs[1] - syncs_before[1]) /
                              max(1, syncs[0] - syncs_before[0]), 1),
        "cpu_seconds": cpu,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--max-unavailable", default="10%")
    ap.add_argument("--workers", type=int, default=1, help="reconciler-worker processes")
    ap.add_argument("--grace", type=float, default=0.0,
                    help="the node agent's termination grace in seconds (0: instant)")
    ap.add_argument("--label", default="", help="a note stored with the results")
    ap.add_argument("--profile", type=Path, default=None,
                    help="record py-spy profiles (raw collapsed stacks) of every process here")
    ap.add_argument("--keep-logs", action="store_true", help="keep the processes' logs")
    ap.add_argument("--appendfsync", choices=("always", "everysec", "no"), default=None,
                    help="Redis with its append-only file on, fsynced so (default: no file)")
    args = ap.parse_args(argv)
    n = args.nodes
    print(f"== rolling update of {n} nodes, maxUnavailable {args.max_unavailable}, "
          f"{args.workers} reconciler worker(s)")
    try:
        with Cluster(workers=args.workers, profile_dir=args.profile,
                     keep_logs=args.keep_logs, grace=args.grace,
                     appendfsync=args.appendfsync) as c:
            c.create_nodes([f"node-{i:05d}" for i in range(1, n + 1)])
            c.start_all()
            c.warm_up()
            converge(c, n, args.max_unavailable)
            result: dict[str, Any] = {"bench": "rollout", "nodes": n, "workers": args.workers,
                                      "max_unavailable": args.max_unavailable,
                                      "grace": args.grace,
                                      "appendfsync": args.appendfsync or "off",
                                      "label": args.label}
            result.update(measure_rollout(c, n))
    except BaseException:
        if not benchkit.interrupted():
            raise
        print("interrupted; everything started was stopped", file=sys.stderr)
        return 130
    print(f"  set image → rollout complete: {result['rollout_s']} s; Redis commands per node "
          f"updated: {result['commands_per_node']}")
    benchkit.record(result)
    print(f"results: {benchkit.JSONL.relative_to(benchkit.ROOT)}, "
          f"{benchkit.SUMMARY.relative_to(benchkit.ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
