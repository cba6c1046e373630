"""ops/bench_scale.py end to end at a tiny size: a real redis-server and the real processes,
every phase and the scaling run, so the 50,000-node benchmark keeps working."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_scale_runs_every_phase_and_processes_nothing_twice(tmp_path: Path) -> None:
    out = tmp_path / "runs.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "ops" / "bench_scale.py"), "--nodes", "50", "--added", "5",
         "--removed", "10", "--idle", "0.5", "--scaling", "2x25", "--scaling-workers", "2",
         "--timeout", "120", "--no-record", "--json-out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    scale, scaling = json.loads(out.read_text())
    assert scale["bench"] == "scale" and scaling["bench"] == "scale-workers"
    for phase in ("registration", "apply", "rollout", "removed"):
        assert scale[f"{phase}_floor_failed"] == 0, phase  # the floor replayed every write
        assert scale[f"{phase}_floor_entries"] > 0, phase
    assert scale["apply_pods_s"] is not None and scale["apply_status_s"] is not None
    assert scale["rollout_s"] is not None and scale["removed_status_s"] is not None
    assert scale["nodes_added"] == 5 and scale["node_added_p99_ms"] > 0
    assert scale["commands_per_added_node"] > 0
    assert scale["reconciler_rss_within_2gib"] is True
    assert "redis used_memory" in scale["memory_mib"]["removed"]
    assert scaling["workers"] == 2 and scaling["rollout_s"] is not None
    # each worker's CPU following the log, a part of its CPU in the rollout
    following = scaling["rollout_catch_up_cpu_seconds"]
    assert sorted(following) == ["reconciler-0", "reconciler-1"], following
    assert all(0 <= following[w] <= scaling["rollout_cpu_seconds"][w] + 0.05
               for w in following) and sum(following.values()) > 0, following
    # every node got a pod of each revision (50 + 50 at least, in both runs), none twice
    for run in (scale, scaling):
        twice = run["processed_twice"]
        assert twice["pods"] == 0 and twice["decisions"] == 0, twice
        assert twice["pod_adds"] >= 100 and twice["decision_records"] > 0, twice
