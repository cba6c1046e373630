"""ops/bench_apiserver.py end to end at a tiny size: a real redis-server, the real processes
and two API servers on the one Redis, so the API server's benchmark keeps working and every
watcher of either replica gets the rollout's every pod event, in order."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_apiserver_watches_a_rollout_through_two_api_servers(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "ops" / "bench_apiserver.py"), "--nodes", "20",
         "--watchers", "4", "--client-procs", "2", "--apiservers", "2", "--only", "watch",
         "--max-unavailable", "25%", "--no-record", "--json-out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = json.loads(out.read_text())
    watch = run["watch"]
    assert run["bench"] == "apiserver" and watch["apiservers"] == 2
    # 20 nodes rolled: each pod replaced (ADDED, then its bind and readiness, DELETED)
    assert watch["pod_events"] >= 40, watch
    assert watch["watchers_complete"] == 4, watch
    assert watch["events_out_of_order"] == 0 and watch["events_wrong_type"] == 0, watch
    assert watch["rewatches"] == 0 and watch["expired"] == 0 and not watch["errors"], watch
    # both replicas served (each one's client process), each with CPU of its own
    cpu = watch["cpu_seconds"]
    assert cpu["apiserver"] > 0 and cpu["apiserver-2"] > 0, cpu
    assert watch["lag_ms"]["n"] == 4 * watch["pod_events"], watch["lag_ms"]
