#!/usr/bin/env python3
"""Benchmark: the fleet view (/ui) in headless Chromium during a rolling update of 5,000
simulated nodes, and its screenshot.

    python ops/bench_fleet_ui.py [--nodes 5000] [--zones 10] [--daemonsets 3]
                                 [--screenshot docs/fleet-view.png]

Starts a private redis-server, the real controller processes and ``daemonbus run apiserver``
(TLS), creates the nodes (labelled ``topology.kubernetes.io/zone``), applies the DaemonSets,
opens the page in the OS's Chromium (Playwright) and waits until it shows every pod, then
rolls the first DaemonSet to a new image. The page measures itself: for each render, the
time from the log write of the oldest event it shows for the first time to the DOM updated
(``window.daemonbusFleet``). Reported: that lag's p50/p99/max over the rollout, the part of it until each batch of
events arrived (the API server's and the connection's: ``arrival_ms``), and how long
after the rollout's last pod write the page showed every node updated. With
``--screenshot`` the page (the zone turning over opened, the rolled DaemonSet's panel open) is saved when about 40% of the nodes are
updated.

Results: a JSON line in ops/results/bench.jsonl (``bench: fleet-ui``, with the load average).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import bench_apiserver
import benchkit
from benchkit import NAMESPACE, Cluster, percentile

from shared.model import meta
from tests.integration import browser_kit

ZONE = "topology.kubernetes.io/zone"


def create_nodes(c: Cluster, n: int, zones: int) -> None:
    now = time.time()
    names = [f"node-{i:05d}" for i in range(1, n + 1)]
    for i in range(0, n, 1000):
        ops = []
        for j, name in enumerate(names[i:i + 1000], i):
            node = benchkit.ready_node(name, now)
            # zones in blocks of names, as the rollout goes (name order): one zone turns over
            node["metadata"]["labels"][ZONE] = f"zone-{chr(ord('a') + j * zones // n)}"
            ops.append(c.s.create_op(node))
        for res in c.s.commit(ops):
            if not res.ok:
                raise RuntimeError(f"creating node {res.op.key}: {res.status}")


def complete(c: Cluster, name: str, n: int, updated: bool = False) -> bool:
    ds = c.s.try_get("DaemonSet", f"{NAMESPACE}/{name}")
    return ds is not None and benchkit.status_complete(
        ds.get("status") or {}, n, int(meta.metadata(ds).get("generation") or 0), updated)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--zones", type=int, default=10)
    ap.add_argument("--daemonsets", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--max-unavailable", default="10%")
    ap.add_argument("--screenshot", type=Path)
    ap.add_argument("--no-record", action="store_true")
    args = ap.parse_args(argv)
    n = args.nodes
    names = ["node-agent", "log-shipper", "metrics"][:args.daemonsets]
    with Cluster(workers=args.workers) as c:
        create_nodes(c, n, args.zones)
        c.start_all()
        api = bench_apiserver.Api(c, use_tls=True)
        asyncio.run(api.wait_ready())
        for name in names:
            c.s.apply(benchkit.daemonset_manifest(name=name, max_unavailable=args.max_unavailable))
        benchkit.wait_until(lambda: all(complete(c, m, n) for m in names), 600,
                            lambda: "waiting for the DaemonSets", c)
        print(f"== {len(names)} DaemonSets complete on {n} nodes; opening the page")
        with browser_kit.browser() as browser:
            page = browser.new_page()
            page.goto(f"{api.base}/ui#token={api.token}")
            page.wait_for_selector('[data-live="yes"]', timeout=120_000)
            started = time.monotonic()
            page.wait_for_function(
                "([n, k]) => { const c = window.daemonbusFleet.counts && window.daemonbusFleet"
                ".counts(); return c && Object.values(c).filter(x => x.available === n).length"
                " === k; }", arg=[n, len(names)], timeout=300_000)
            print(f"  page shows {n} x {len(names)} cells, {time.monotonic() - started:.1f}s "
                  "after it went live")
            page.click(f'.colhead button:text-is("{names[0]}")')  # its panel: progress
            page.evaluate("() => { const s = window.daemonbusFleet; s.lagsMs.length = 0;"
                          " s.arrivalMs.length = 0; }")
            target = names[0]
            t0 = time.time()

            def change(ds: dict[str, Any]) -> dict[str, Any]:
                ds["spec"]["template"]["spec"]["containers"][0]["image"] = "bench/agent:2"
                return ds

            c.s.mutate("DaemonSet", f"{NAMESPACE}/{target}", change)
            shot = args.screenshot
            while not complete(c, target, n, updated=True):
                c.check_alive()
                ds = c.s.get("DaemonSet", f"{NAMESPACE}/{target}")
                st = ds.get("status") or {}
                updated = int(st.get("updatedNumberScheduled") or 0)
                if shot is not None and updated >= 0.4 * n and \
                        st.get("observedGeneration") == meta.metadata(ds).get("generation"):
                    # open the zone turning over now (the rollout goes in name order)
                    page.locator(".group-row .cell.name").nth(updated * args.zones // n).click()
                    page.wait_for_timeout(500)
                    page.screenshot(path=str(shot))
                    print(f"  screenshot at {updated}/{n} updated: {shot}")
                    shot = None
                if time.time() - t0 > 900:
                    raise RuntimeError("the rollout did not finish in 15 minutes")
                time.sleep(0.2)
            done = time.time()
            rollout_s = done - t0
            page.wait_for_function(
                "([ds, n]) => { const c = window.daemonbusFleet.counts()[ds];"
                " return c.new === n && c.available === n; }", arg=[target, n], timeout=120_000)
            shown_after = time.time() - done
            lags = page.evaluate("() => window.daemonbusFleet.lagsMs.slice()")
            arrivals = page.evaluate("() => window.daemonbusFleet.arrivalMs.slice()")
            dom_rows = page.evaluate("() => document.querySelectorAll('[role=row]').length")
        result = {"bench": "fleet-ui", "nodes": n, "daemonsets": len(names),
                  "rollout_s": round(rollout_s, 1), "renders": len(lags),
                  "lag_ms": {"p50": round(percentile(lags, 50)), "p99": round(percentile(lags, 99)),
                             "max": max(lags) if lags else None},
                  "arrival_ms": {"p50": round(percentile(arrivals, 50)),
                                 "p99": round(percentile(arrivals, 99)),
                                 "max": max(arrivals) if arrivals else None},
                  "all_shown_after_rollout_s": round(shown_after, 2), "dom_rows": dom_rows}
        print(json.dumps(result, indent=1))
        if not args.no_record:
            benchkit.record(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
