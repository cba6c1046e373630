"""Faults for the integration tests: a private Redis with its append-only file that can be
killed, cut back and restarted; a test-side supervisor that restarts dead daemonbus
processes; and the invariants a rollout keeps whatever is killed."""

from __future__ import annotations

import contextlib
import glob
import os
import signal
import subprocess
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from shared.model import meta, podutil
from shared.model.podutil import target_node
from shared.store.server import RedisServer
from tests.integration.stack import Stack


class AofRedis:
    """A redis-server with its append-only file in ``data_dir`` on a fixed port, so the
    daemonbus processes find it again after ``kill`` and ``restart``."""

    def __init__(self, data_dir: Path, appendfsync: str = "everysec") -> None:
        self.server = RedisServer(data_dir=str(data_dir), appendonly=True,
                                  appendfsync=appendfsync)
        self.data_dir = data_dir

    @property
    def url(self) -> str:
        return self.server.url

    def start(self) -> AofRedis:
        self.server.start()
        return self

    def kill(self) -> None:
        """SIGKILL: no shutdown, no final flush of the append-only file."""
        proc = self.server.proc
        assert proc is not None
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        self.server.proc = None

    def restart(self) -> None:
        self.server.start(timeout=30)

    def stop(self) -> None:
        self.server.stop()

    def incr_file(self) -> Path:
        """The append-only file Redis appends to now (the newest incremental part)."""
        files = glob.glob(str(self.data_dir / "appendonlydir" / "*.incr.aof"))
        assert files, "no incremental append-only file"
        return Path(max(files, key=lambda f: int(f.rsplit(".", 3)[-3])))

    def aof_size(self) -> int:
        return os.path.getsize(self.incr_file())

    def cut_back(self, size: int) -> int:
        """With Redis down: cut the append-only file back to the last command boundary at
        or before ``size`` bytes (never inside a MULTI/EXEC block, which is how a Lua
        script's writes are logged), as a power loss under ``appendfsync everysec`` leaves
        it; then check it with ``redis-check-aof``. Returns the bytes removed."""
        path = self.incr_file()
        data = path.read_bytes()
        cut = command_boundary(data, size)
        with open(path, "r+b") as f:
            f.truncate(cut)
        manifest = self.data_dir / "appendonlydir" / "appendonly.aof.manifest"
        check = subprocess.run(["redis-check-aof", str(manifest)], capture_output=True,
                               text=True, timeout=60)
        assert check.returncode == 0, check.stdout + check.stderr
        return len(data) - cut


@contextlib.contextmanager
def aof_stack(tmp_path: Path, prefix: str, appendfsync: str) -> Iterator[tuple[AofRedis, Stack]]:
    """An ``AofRedis`` in ``tmp_path`` and a ``Stack`` of processes on it (logs beside it),
    both stopped on the way out."""
    server = AofRedis(tmp_path / "redis", appendfsync=appendfsync).start()
    stack = Stack(server.url, prefix, tmp_path)
    try:
        yield server, stack
    finally:
        stack.stop()
        server.stop()


def command_boundary(data: bytes, limit: int) -> int:
    """The offset of the last boundary between whole commands (outside MULTI/EXEC) at or
    before ``limit`` in a RESP command stream."""
    pos, depth, last = 0, 0, 0
    while pos < len(data):
        assert data[pos:pos + 1] == b"*", f"no command at offset {pos}"
        eol = data.index(b"\r\n", pos)
        argc = int(data[pos + 1:eol])
        pos = eol + 2
        first = b""
        for i in range(argc):
            eol = data.index(b"\r\n", pos)
            n = int(data[pos + 1:eol])
            arg = data[eol + 2:eol + 2 + n]
            if i == 0:
                first = arg.upper()
            pos = eol + 2 + n + 2
        if first == b"MULTI":
            depth += 1
        elif first == b"EXEC":
            depth -= 1
        if pos > limit:
            break
        if depth == 0:
            last = pos
    return last


class Supervisor:
    """Restarts the daemonbus processes of ``stack`` that exited, as compose or ``daemonbus
    up`` would: a reconciler-worker under a new RQ name (RQ refuses a name still
    registered)."""

    def __init__(self, stack: Stack, argv: dict[str, tuple[str, ...]]) -> None:
        self.stack = stack
        self.argv = dict(argv)
        self.restarts: dict[str, int] = defaultdict(int)

    def start_all(self) -> None:
        for name in self.argv:
            self.start(name)

    def start(self, name: str) -> None:
        args = self.argv[name]
        if args[0] == "reconciler":
            args = (*args, "--name", f"{self.stack.prefix}-{name}-{self.restarts[name]}")
        self.stack.start(name, *args)

    def dump_stacks(self) -> None:
        """Have every live process print its threads' stacks to its log (kill -USR1), for a
        failed test's report."""
        for proc in self.stack.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGUSR1)
        time.sleep(1.0)  # not waiting for logic: giving the processes time to write

    def revive(self) -> list[str]:
        """Start again every process that exited; returns their names."""
        dead = [n for n in self.argv
                if n not in self.stack.procs or self.stack.procs[n].poll() is not None]
        for name in dead:
            self.stack.procs.pop(name, None)
            self.restarts[name] += 1
            self.start(name)
        return dead


def live_pods_by_node(pods: list[dict[str, Any]], uid: str) -> dict[str, list[dict[str, Any]]]:
    """The DaemonSet ``uid``'s pods that are not terminating, per node."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in pods:
        if (meta.controller_ref(p) or {}).get("uid") == uid and not meta.is_being_deleted(p):
            out[target_node(p)].append(p)
    return out


def rolled_out(stack: Stack, key: str, nodes: list[str], image: str) -> bool:
    """Every node runs exactly one live pod of ``key``, of ``image``, Ready; and the status
    says so for the current generation."""
    ds = stack.store.try_get("DaemonSet", key)
    if ds is None:
        return False
    by_node = live_pods_by_node(stack.store.list("Pod", meta.namespace(ds)), meta.uid(ds))
    if sorted(by_node) != sorted(nodes):
        return False
    for pods in by_node.values():
        if len(pods) != 1 or not podutil.is_ready(pods[0]):
            return False
        if pods[0]["spec"]["containers"][0]["image"] != image:
            return False
    st = ds.get("status") or {}
    return bool(st.get("observedGeneration") == ds["metadata"]["generation"]
                and st.get("updatedNumberScheduled") == len(nodes)
                and st.get("numberAvailable") == len(nodes))
