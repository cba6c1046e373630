"""A real daemonbus stack for tests: the processes as subprocesses on the test's Redis."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from shared.store.client import Store, connect
from shared.store.keys import Keys

ROOT = Path(__file__).resolve().parents[2]


def wait_for(predicate: Callable[[], Any], timeout: float = 30.0, interval: float = 0.05,
             what: str = "condition") -> Any:
    """Poll ``predicate`` until it returns a truthy value or the deadline passes."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


class Stack:
    """Starts daemonbus processes (`python -m services.cli.main run …`) for one prefix."""

    def __init__(self, redis_url: str, prefix: str, log_dir: Path,
                 role_urls: dict[str, str] | None = None) -> None:
        """``role_urls``: the Redis URL of each process (by its ``run`` name) when they have
        credentials of their own (an ACL); else all use ``redis_url``."""
        self.redis_url = redis_url
        self.role_urls = role_urls or {}
        self.prefix = prefix
        self.log_dir = log_dir
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.store = Store(connect(redis_url), Keys(prefix))

    def env(self, process: str = "") -> dict[str, str]:
        env = dict(os.environ)
        env.update(DAEMONBUS_REDIS_URL=self.role_urls.get(process, self.redis_url),
                   DAEMONBUS_PREFIX=self.prefix,
                   PYTHONUNBUFFERED="1", DAEMONBUS_LOG_LEVEL="INFO")
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        return env

    def start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = open(self.log_dir / f"{name}.log", "ab")
        proc = subprocess.Popen([sys.executable, "-m", "services.cli.main", "run", *args],
                                env=self.env(args[0] if args else ""), stdout=log, stderr=subprocess.STDOUT,
                                cwd=str(ROOT))
        self.procs[name] = proc
        return proc

    def start_all(self, workers: int = 1, nodes: int = 0, agent_args: tuple[str, ...] = (),
                  gc: bool = True, node_agent: bool = True) -> None:
        self.start("watcher", "watcher")
        for i in range(workers):
            self.start(f"reconciler-{i}", "reconciler", "--name", f"{self.prefix}-r{i}")
        self.start("status-writer", "status-writer")
        if gc:
            self.start("gc", "gc")
        if node_agent:
            self.start("node-agent", "node-agent", "--nodes", str(nodes), *agent_args)

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs.pop(name)
        proc.send_signal(sig)
        proc.wait(10)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs.clear()

    def logs(self) -> str:
        out = []
        for f in sorted(self.log_dir.glob("*.log")):
            out.append(f"==== {f.name}\n" + f.read_text()[-3000:])
        return "\n".join(out)

    # ---- reads ---------------------------------------------------------------------------

    def pods(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return self.store.list("Pod", namespace)

    def status(self, key: str) -> dict[str, Any]:
        ds = self.store.try_get("DaemonSet", key)
        return (ds or {}).get("status") or {}
