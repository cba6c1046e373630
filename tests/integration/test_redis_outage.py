"""No process dies of a Redis outage: with every process started directly (no supervisor to
bring one back) and two reconciler-workers, Redis is SIGKILLed in the middle of a rolling
update and started again 5 s later on the same port and data (append-only file, fsync on
every write, so the log that comes back is the one the processes saw). Every process is
still running afterwards, each logged the outage once rather than once per retry, and the
rollout finishes."""

from __future__ import annotations

import copy
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import redis

from shared.store.server import RedisServer
from tests.integration import controller_kit as kit
from tests.integration.stack import ROOT, Stack, wait_for

Obj = dict[str, Any]
NODES = 6
OUTAGE_SECONDS = 5.0  # how long Redis stays down: the fault itself, not a wait for logic


def _redis(data_dir: Path, port: int = 0) -> RedisServer:
    server = RedisServer(data_dir=str(data_dir), port=port, appendonly=True).start()
    with redis.Redis.from_url(server.url) as r:
        r.config_set("appendfsync", "always")  # no acknowledged write is lost to the SIGKILL
    return server


def _with_image(image: str) -> Any:
    def change(ds: Obj) -> Obj:
        ds = copy.deepcopy(ds)
        ds["spec"]["template"]["spec"]["containers"][0]["image"] = image
        return ds
    return change


def _rollout(stack: Stack, key: str, image: str) -> tuple[int, bool]:
    """How many nodes run a live pod of ``image``, and whether the rollout is complete
    (one pod per node, all of ``image``, and the status says so for this generation)."""
    pods = kit.owned_pods(stack.store, key)
    updated = sum(1 for p in pods if p["spec"]["containers"][0]["image"] == image)
    ds = stack.store.try_get("DaemonSet", key) or {}
    st = ds.get("status") or {}
    done = (updated == NODES == len(pods)
            and st.get("observedGeneration") == ds["metadata"].get("generation")
            and st.get("updatedNumberScheduled") == NODES
            and st.get("numberAvailable") == NODES)
    return updated, done


def test_every_process_rides_out_redis_killed_mid_rollout(tmp_path: Path, prefix: str) -> None:
    servers = [_redis(tmp_path / "redis")]
    logs = tmp_path / "logs"
    logs.mkdir()
    stack = Stack(servers[0].url, prefix, logs)
    try:
        kit.start(stack, workers=2, nodes=NODES, agent_args=("--ready-delay", "0.5"))
        key = "default/outage"
        ds = kit.daemonset("outage")
        ds["spec"]["updateStrategy"] = {"type": "RollingUpdate",
                                        "rollingUpdate": {"maxUnavailable": 1}}
        stack.store.apply(ds)
        wait_for(lambda: _rollout(stack, key, ds["spec"]["template"]["spec"]["containers"][0]
                                  ["image"])[1], timeout=60, what="the first revision out")

        stack.store.mutate("DaemonSet", key, _with_image("registry.example/app:v2"))
        wait_for(lambda: 1 <= _rollout(stack, key, "registry.example/app:v2")[0] < NODES - 1,
                 timeout=60, interval=0.01, what="the rollout under way")
        servers[0].proc.send_signal(signal.SIGKILL)  # type: ignore[union-attr]
        servers[0].proc.wait(10)  # type: ignore[union-attr]
        killed_at = time.monotonic()
        time.sleep(OUTAGE_SECONDS)
        servers.append(_redis(tmp_path / "redis", port=servers[0].port))
        print(f"redis down for {time.monotonic() - killed_at:.1f}s")

        stack.store.r.connection_pool.disconnect()
        wait_for(lambda: _rollout(stack, key, "registry.example/app:v2")[1], timeout=120,
                 interval=0.2, what="the rollout finished after the outage")
        print(f"rollout finished {time.monotonic() - killed_at:.1f}s after the kill")
        dead = {name: p.returncode for name, p in stack.procs.items() if p.poll() is not None}
        assert not dead, f"processes exited: {dead}\n{stack.logs()}"
        for log in sorted(logs.glob("*.log")):
            text = log.read_text()
            began = text.count("redis unavailable")
            met = 1 if log.name.startswith("reconciler-") else began  # they surely met it
            assert began == met <= 1, f"{log.name} logged the outage {began} times:\n{text}"
    finally:
        stack.stop()
        for server in servers:
            server.stop()


def test_the_log_compactor_rides_out_a_redis_restart(tmp_path: Path, prefix: str) -> None:
    """`log compact --every` (a child of `daemonbus up`) waits for Redis to come back, saying
    so once, instead of exiting."""
    servers = [_redis(tmp_path / "redis")]
    out = open(tmp_path / "compactor.log", "wb")
    env = dict(os.environ, DAEMONBUS_REDIS_URL=servers[0].url, DAEMONBUS_PREFIX=prefix,
               PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "services.cli.main", "log", "compact",
                             "--keep", "10", "--every", "1s"], env=env, stdout=out,
                            stderr=subprocess.STDOUT, cwd=str(ROOT))
    try:
        log = tmp_path / "compactor.log"
        store = Stack(servers[0].url, prefix, tmp_path).store
        for i in range(15):
            store.apply(kit.daemonset(f"ds-{i}"))
        wait_for(lambda: "snapshot at" in log.read_text(), timeout=30,
                 what="the compactor's first compaction")
        servers[0].stop()
        wait_for(lambda: "redis unavailable" in log.read_text() or proc.poll() is not None,
                 timeout=30, what="the compactor meeting the outage")
        servers.append(_redis(tmp_path / "redis", port=servers[0].port))
        wait_for(lambda: "redis is back" in log.read_text() or proc.poll() is not None,
                 timeout=30, what="the compactor back on Redis")
        assert proc.poll() is None, log.read_text()
        assert log.read_text().count("redis unavailable") == 1, log.read_text()
    finally:
        proc.terminate()
        proc.wait(10)
        out.close()
        for server in servers:
            server.stop()
