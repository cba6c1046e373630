"""Benchmark: what the append-only file's fsync policy costs a rolling update.

    python ops/bench_fsync.py [--nodes 1000] [--rounds 2]

Runs ``bench_rollout.py`` (a rolling update at maxUnavailable 10 %, instant readiness) with
Redis' append-only file off, then on with ``appendfsync no``, ``everysec`` and ``always``
(the default of ``daemonbus up`` and the compose Redis: no acknowledged write is lost in a
crash), ``--rounds`` times each, interleaved; each run is recorded in ops/results/bench.jsonl
(label ``appendfsync <policy>``) and the medians are printed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from typing import Any

import bench_rollout
import benchkit

POLICIES = ("off", "no", "everysec", "always")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    before = len(benchkit._load())
    for _round in range(args.rounds):
        for policy in POLICIES:
            extra = [] if policy == "off" else ["--appendfsync", policy]
            code = bench_rollout.main(["--nodes", str(args.nodes), "--label",
                                       f"appendfsync {policy}", *extra])
            if code:
                return code
    runs = benchkit._load()[before:]
    print(f"\n== rolling update of {args.nodes} nodes by fsync policy (median of "
          f"{args.rounds})")
    print("| appendfsync | set image→complete | Redis cmds / node |")
    print("| --- | ---: | ---: |")
    for policy in POLICIES:
        mine: list[dict[str, Any]] = [r for r in runs if r.get("appendfsync") == policy]
        secs = [r["rollout_s"] for r in mine if r.get("rollout_s") is not None]
        cmds = [r["commands_per_node"] for r in mine]
        print(f"| {policy} | {statistics.median(secs):.2f} s | "
              f"{statistics.median(cmds):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
