"""The log going backwards mid-rollout: a power loss under ``appendfsync everysec``.

A real redis-server with its append-only file (fsync every second) is SIGKILLed mid-rollout
and its file is cut back to an earlier command boundary, as a crash that loses the last
second or so leaves it; Redis restarts on the same file. The processes' positions, caches
and the writes they made are then ahead of the log that came back: each notices, drops its
state and lists again, and the controller re-derives its expectations. The rollout converges:
every node runs one Ready pod of the new template, and the workqueue drains.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.model import meta
from shared.store.client import Store, connect
from shared.store.keys import Keys
from tests.integration import controller_kit as kit
from tests.integration import faultkit
from tests.integration.stack import Stack, wait_for

NODES = 40
KEY = "default/rewind"
OLD, NEW = "registry.k8s.io/pause:3.9", "registry.k8s.io/pause:3.10"


@pytest.fixture
def cluster(tmp_path: Path, prefix: str) -> Iterator[tuple[faultkit.AofRedis, Stack]]:
    with faultkit.aof_stack(tmp_path, prefix, appendfsync="everysec") as both:
        yield both


@pytest.fixture
def stack(cluster: tuple[faultkit.AofRedis, Stack]) -> Stack:
    return cluster[1]  # named so: a failed test prints the processes' logs


def _updated(stack: Stack) -> int:
    ds = stack.store.try_get("DaemonSet", KEY)
    if ds is None:
        return 0
    pods = faultkit.live_pods_by_node(stack.store.list("Pod", "default"), meta.uid(ds))
    return sum(1 for ps in pods.values() for p in ps
               if p["spec"]["containers"][0]["image"] == NEW)


def test_log_cut_back_mid_rollout_every_process_resyncs_and_the_rollout_converges(
        stack: Stack, cluster: tuple[faultkit.AofRedis, Stack]) -> None:
    aof = cluster[0]
    sup = faultkit.Supervisor(stack, {
        "watcher": ("watcher",), "reconciler-a": ("reconciler",),
        "reconciler-b": ("reconciler",), "status-writer": ("status-writer",), "gc": ("gc",),
        "node-agent": ("node-agent", "--nodes", str(NODES), "--ready-delay", "0.3"),
    })
    sup.start_all()
    nodes = [f"node-{i:05d}" for i in range(1, NODES + 1)]
    wait_for(lambda: len(stack.store.list("Node")) == NODES, what="nodes registered")
    ds = kit.daemonset("rewind", image=OLD, updateStrategy={
        "type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 4}})
    stack.store.apply(ds)
    wait_for(lambda: faultkit.rolled_out(stack, KEY, nodes, OLD), timeout=60,
             what="the first revision rolled out")

    ds["spec"]["template"]["spec"]["containers"][0]["image"] = NEW
    stack.store.apply(ds)
    wait_for(lambda: _updated(stack) >= 8, timeout=60, interval=0.01,
             what="a fifth of the nodes updated")
    tip_at_cut = stack.store.log_tip()  # then the file's size once it holds this entry:
    # under everysec a busy Redis may put off writing its buffer for up to two seconds
    wait_for(lambda: tip_at_cut.encode() in aof.incr_file().read_bytes(), timeout=10,
             interval=0.01, what="the append-only file to hold the tip")
    cut_at = aof.aof_size()
    wait_for(lambda: _updated(stack) >= 24, timeout=60, interval=0.01,
             what="more than half of the nodes updated")
    seen_tip = stack.store.log_tip()
    aof.kill()
    lost = aof.cut_back(cut_at)
    aof.restart()
    stack.store = Store(connect(aof.url), Keys(stack.prefix))
    tip = stack.store.log_tip()
    assert lost > 0 and tip < seen_tip and tip >= tip_at_cut, (lost, tip, seen_tip)

    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        sup.revive()  # as compose or `daemonbus up` would (another issue: none should die)
        if faultkit.rolled_out(stack, KEY, nodes, NEW) and kit.queue_idle(stack.store):
            break
        time.sleep(0.2)
    else:
        sup.dump_stacks()
        pods = faultkit.live_pods_by_node(stack.store.list("Pod", "default"),
                                          meta.uid(stack.store.get("DaemonSet", KEY)))
        raise AssertionError(f"no convergence: {len(pods)} nodes with a live pod, "
                             f"{_updated(stack)} updated, status {stack.status(KEY)}, "
                             f"queue idle {kit.queue_idle(stack.store)}")
    logs = {f.stem: f.read_text() for f in stack.log_dir.glob("*.log")}
    noticed = sorted(n for n, text in logs.items() if "the log went backwards" in text)
    print(f"\nrewind: cut {lost} bytes of the append-only file (log tip {seen_tip} → {tip}); "
          f"noticed by {noticed}; restarted {dict(sup.restarts)}")
    assert "watcher" in noticed
