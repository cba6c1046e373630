"""Benchmark: the pure planner on a steady DaemonSet (one ready, current pod per node).

    python ops/bench_plan.py [--nodes 5000,50000] [--repeat 3] [--label TEXT] [--no-record]

Per size it builds the Nodes, the pods and the current ControllerRevision with the unit
tests' builders (no Redis, no processes), then times, best of ``--repeat``:

* ``plan``: ``planner.plan(snapshot)`` from every Node and Pod (what ``replay --verify`` does);
* ``plan_with_index``: the same plan given the reconciler's ``nodeindex.DaemonSetIndex``;
* ``index_build``: building that index from scratch (once per DaemonSet and revision), and
  the memory it holds beyond the objects (``index_mb``, tracemalloc);
* ``node_event``: one Node added to the index, its status read and the settled query.

Results are appended to ops/results/bench.jsonl (bench ``plan``) with the load average.
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import benchkit  # noqa: E402

from shared.daemonset import history, nodeindex, planner  # noqa: E402
from tests.unit import daemonset_fixtures as fx  # noqa: E402


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """The fastest of ``repeat`` runs of ``fn`` (seconds) and its last result."""
    times, out = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - started)
    return min(times), out


def measure(n: int, repeat: int) -> dict[str, Any]:
    ds = fx.make_ds()
    hash = fx.current_hash(ds)
    revision = history.new_revision(ds, hash, 1)
    nodes = fx.make_nodes(n)
    pods = [fx.daemon_pod(ds, f"node-{i}") for i in range(n)]
    snap = fx.snapshot(ds, nodes, pods, revisions=[revision])
    plan_s, plan = best(lambda: planner.plan(snap), repeat)
    build_s, index = best(lambda: nodeindex.DaemonSetIndex(ds, plan.hash, nodes, pods), repeat)
    tracemalloc.start()
    held = nodeindex.DaemonSetIndex(ds, plan.hash, nodes, pods)
    index_mb = tracemalloc.get_traced_memory()[0] / 2**20
    tracemalloc.stop()
    del held
    with_s, with_index = best(lambda: planner.plan(snap, index), repeat)
    assert with_index == plan, "the plan with the index differs"
    extra = fx.make_node(f"node-{n}")

    def node_event() -> bool:
        index.set_node(extra)
        index.status(fx.NOW, True)
        settled = index.settled_except({f"node-{n}"})
        index.remove_node(f"node-{n}")
        return settled

    event_s, settled = best(node_event, max(repeat, 100))
    assert settled
    return {"nodes": n, "plan_s": round(plan_s, 4), "plan_with_index_s": round(with_s, 4),
            "index_build_s": round(build_s, 4), "index_mb": round(index_mb, 1),
            "node_event_us": round(event_s * 1e6, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="5000,50000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--label", default="")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    for n in [int(x) for x in args.nodes.split(",")]:
        result = measure(n, args.repeat)
        print(f"{n} nodes: plan {result['plan_s']:.3f} s, with index "
              f"{result['plan_with_index_s']:.3f} s, index build {result['index_build_s']:.3f} s,"
              f" ({result['index_mb']:.1f} MiB), node event {result['node_event_us']:.1f} µs")
        if not args.no_record:
            benchkit.record({"bench": "plan", "label": args.label, **result})


if __name__ == "__main__":
    main()
