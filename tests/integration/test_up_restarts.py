"""`daemonbus up` brings back what dies, through real processes: a reconciler-worker killed
with SIGKILL is back and syncing within 10 s under a fresh RQ name (RQ refuses a name whose
registration is still there), with the dead one's registration cleared, so `rq info` lists
live workers only; the embedded Redis killed with SIGKILL is started again on its port and
data, and every child rides the outage out."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import redis

from services.cli.main import cli
from shared.store.client import Store, connect
from shared.store.keys import Keys
from tests.integration import controller_kit as kit
from tests.integration.stack import wait_for
from tests.integration.up import start_with_demo

DEMO = "kube-system/fluentd-elasticsearch"


def _rq_cli() -> str:
    beside = Path(sys.executable).with_name("rq")
    return str(beside) if beside.exists() else (shutil.which("rq") or "rq")


def _children(pid: int, pattern: str) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid), "-f", pattern], capture_output=True,
                         text=True).stdout.split()
    return [int(p) for p in out]


def _rq_info(url: str) -> str:
    out = subprocess.run([_rq_cli(), "info", "--url", url], capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _pod_on(store: Store, node: str) -> bool:
    """The demo DaemonSet has a live pod for ``node``."""
    return node in kit.nodes_of(kit.owned_pods(store, DEMO))


def test_up_restarts_a_sigkilled_worker_and_redis(tmp_path: Path) -> None:
    up = start_with_demo(tmp_path, nodes=2, workers=1)
    url, runner, log_path = up.url, up.runner, up.log_path
    try:
        r = redis.Redis.from_url(url)
        store = Store(connect(url), Keys())
        old = f"reconciler-1-{up.proc.pid}"
        assert old in _rq_info(url)

        # 1. the only reconciler-worker, SIGKILLed: no sync happens but by its successor
        [worker_pid] = _children(up.proc.pid, "run reconciler")
        os.kill(worker_pid, signal.SIGKILL)
        killed = time.monotonic()
        assert runner.invoke(cli, ["node", "add", "late-1"]).exit_code == 0
        wait_for(lambda: _pod_on(store, "late-1"), timeout=30, interval=0.1,
                 what="the new node's pod, synced by the restarted worker")
        back = time.monotonic() - killed
        print(f"restarted worker synced {back:.1f}s after the SIGKILL")
        assert back < 10.0, log_path.read_text()
        info = _rq_info(url)
        assert f"{old}-r1" in info  # the successor, under a fresh name
        assert f"{old} " not in info and f"{old}\n" not in info, info  # the dead one's gone
        assert not r.sismember("rq:workers", f"rq:worker:{old}")

        # 2. the embedded Redis, SIGKILLed: up starts it again, every child carries on
        [redis_pid] = _children(up.proc.pid, "redis-server")
        os.kill(redis_pid, signal.SIGKILL)
        wait_for(lambda: "redis exited with" in log_path.read_text(), timeout=10,
                 what="up noticing Redis gone")

        def pinged() -> bool:
            try:
                return bool(redis.Redis.from_url(url).ping())
            except redis.RedisError:
                return False

        wait_for(pinged, timeout=30, what="Redis back on its port")
        assert runner.invoke(cli, ["node", "add", "late-2"]).exit_code == 0
        wait_for(lambda: _pod_on(store, "late-2"), timeout=60, interval=0.2,
                 what="a pod for a node added after the Redis restart")
        text = log_path.read_text()
        exits = [line for line in text.splitlines() if " exited with " in line
                 and not line.startswith(("reconciler-1 exited with -9", "redis exited"))]
        assert not exits, text  # no child died of the outage
    finally:
        up.proc.send_signal(signal.SIGTERM)
        up.proc.wait(30)
        up.close()
    assert up.proc.returncode == 0
