"""``daemonbus up``: the whole stack on one machine, as child processes of one command.

Starts a private Redis (append-only file on, fsynced before each reply: ``appendfsync
always``, so a crash loses no acknowledged write; in a data directory only its owner may
read, on loopback, with a generated password) unless a URL is given, records its URL (mode
600) so commands in other shells find it, then runs the watcher, N
reconciler-workers, the status-writer, the garbage collector, the log compactor (snapshot
plus trim, so the log stays bounded) and a node agent. A child that
dies is restarted (with a growing delay). Ctrl-C or SIGTERM stops every child, then Redis.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from services import common, config
from shared.store.server import RedisServer


class StartError(RuntimeError):
    """The stack could not start (its Redis did not): said to the user, no traceback."""


@dataclass
class Child:
    name: str
    argv: list[str]
    proc: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    next_start: float = 0.0
    log_path: Path | None = None
    started_at: float = field(default_factory=time.time)
    # a reconciler-worker's RQ name, ``<rq_name>`` on its first start and ``<rq_name>-r<n>``
    # on its n-th restart: RQ refuses a name whose registration is still there
    rq_name: str = ""

    @property
    def worker_name(self) -> str:
        return self.rq_name if not self.restarts else f"{self.rq_name}-r{self.restarts}"

    def command(self) -> list[str]:
        return [*self.argv, "--name", self.worker_name] if self.rq_name else self.argv


@dataclass
class StackOptions:
    redis_url: str | None = None
    prefix: str | None = None
    nodes: int = 3
    workers: int = 2
    data_dir: Path | None = None
    ready_delay: float = 0.0
    grace: float = 1.0
    fail_images: tuple[str, ...] = ()
    never_ready: tuple[str, ...] = ()
    metrics_base_port: int | None = None
    metrics_bind: str = common.METRICS_BIND
    log_dir: Path | None = None
    log_keep: int = 200_000  # entries the compactor keeps (0: no compaction)
    apiserver_port: int = 0  # 0: no API server


APISERVER = "apiserver"
"""The API server's child's name (``up`` waits for it to serve before its ready lines)."""


def _cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "services.cli.main", *args]


def children(opts: StackOptions) -> list[Child]:
    port = opts.metrics_base_port

    def metrics(i: int) -> list[str]:
        return ["--metrics-port", str(port + i)] if port else []

    out = [Child("watcher", _cmd("run", "watcher", *metrics(0)))]
    for i in range(opts.workers):
        out.append(Child(f"reconciler-{i + 1}", _cmd("run", "reconciler", *metrics(1 + i)),
                         rq_name=f"reconciler-{i + 1}-{os.getpid()}"))
    out.append(Child("status-writer", _cmd("run", "status-writer",
                                            *metrics(1 + opts.workers))))
    out.append(Child("gc", _cmd("run", "gc")))
    if opts.log_keep:
        out.append(Child("compactor", _cmd("log", "compact", "--keep", str(opts.log_keep),
                                           "--every", "1m")))
    agent = ["run", "node-agent", "--nodes", str(opts.nodes), "--ready-delay",
             str(opts.ready_delay), "--grace", str(opts.grace)]
    for g in opts.fail_images:
        agent += ["--fail-image", g]
    for g in opts.never_ready:
        agent += ["--never-ready", g]
    out.append(Child("node-agent", _cmd(*agent, *metrics(2 + opts.workers))))
    if opts.apiserver_port:
        out.append(Child(APISERVER, _cmd("run", "apiserver", "--port",
                                         str(opts.apiserver_port))))
    return out


class Stack:
    def __init__(self, opts: StackOptions, echo: Callable[[str], None] = print) -> None:
        self.opts = opts
        self.echo = echo
        self.redis: RedisServer | None = None
        self.url = ""
        self.children = children(opts)
        self.stopping = threading.Event()

    def start_redis(self) -> str:
        if self.opts.redis_url:
            self.url = self.opts.redis_url
            return self.url
        data = self.opts.data_dir or config.home() / "data"
        try:
            self.redis = RedisServer(data_dir=str(data), appendonly=True,
                                     password=config.redis_password()).start()
        except RuntimeError as err:
            raise StartError(f"Redis did not start: {err}") from err
        for binary, said in self.redis.passed_over:
            self.echo(f"redis      {binary} cannot read {data} ({said.split('; ')[0]}): "
                      f"using {self.redis.binary}")
        self.url = self.redis.url
        config.record_url(self.url)
        return self.url

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["DAEMONBUS_REDIS_URL"] = self.url
        env["DAEMONBUS_METRICS_BIND"] = self.opts.metrics_bind
        if self.opts.prefix:
            env["DAEMONBUS_PREFIX"] = self.opts.prefix
        env.setdefault("PYTHONUNBUFFERED", "1")
        return env

    def spawn(self, child: Child) -> None:
        out = None
        if self.opts.log_dir:
            self.opts.log_dir.mkdir(parents=True, exist_ok=True)
            child.log_path = self.opts.log_dir / f"{child.name}.log"
            out = open(child.log_path, "ab")
        child.proc = subprocess.Popen(child.command(), env=self._env(), stdout=out or None,
                                      stderr=subprocess.STDOUT if out else None,
                                      start_new_session=True)
        child.started_at = time.time()

    def start(self) -> None:
        url = self.start_redis()
        shown = config.redacted(url)
        self.echo(f"redis      {shown}" + (
            f"  (embedded, loopback only, append-only file on; URL with its password in "
            f"{config.recorded_url_file()})" if self.redis else ""))
        for child in self.children:
            self.spawn(child)
        self.echo(self.table())

    def table(self) -> str:
        lines = [f"{'PROCESS':<16} {'PID':>8}  STATUS"]
        for c in self.children:
            alive = c.proc is not None and c.proc.poll() is None
            status = "running" if alive else f"exited ({c.proc.returncode if c.proc else '-'})"
            if c.restarts:
                status += f", restarted {c.restarts}x"
            lines.append(f"{c.name:<16} {c.proc.pid if c.proc else '-':>8}  {status}")
        return "\n".join(lines)

    def watch(self) -> None:
        """Restart children that exit, until asked to stop."""
        while not self.stopping.wait(0.5):
            self._keep_redis()
            now = time.time()
            for c in self.children:
                if c.proc is None or c.proc.poll() is None:
                    continue
                if c.next_start == 0.0:
                    delay = min(30.0, 0.5 * 2 ** min(c.restarts, 6))
                    self.echo(f"{c.name} exited with {c.proc.returncode}; restarting in {delay:.1f}s")
                    c.next_start = now + delay
                    if c.rq_name:
                        self._forget_worker(c.worker_name)
                elif now >= c.next_start:
                    c.restarts += 1
                    c.next_start = 0.0
                    self.spawn(c)

    def _forget_worker(self, name: str) -> None:
        """Clear the RQ registration a dead reconciler-worker left (it could not unregister),
        so ``rq info`` lists live workers only. Best effort: with Redis away, it expires."""
        from services.reconciler import worker
        from shared.store.client import connect

        client = connect(self.url)
        try:
            worker.forget_worker(client, name)
        except common.REDIS_DOWN as err:
            self.echo(f"could not clear the RQ registration of {name}: {err}")
        finally:
            client.close()

    def _keep_redis(self) -> None:
        """Restart the embedded Redis should it exit: same port, same data directory (its
        append-only file), so every child, riding out the outage, reconnects to it."""
        server = self.redis
        if server is None or server.proc is None or server.proc.poll() is None:
            return
        self.echo(f"redis exited with {server.proc.returncode}; restarting it")
        try:
            server.start()
        except RuntimeError as err:
            self.echo(f"redis did not start again: {err}; retrying")

    def stop(self) -> None:
        self.stopping.set()
        for c in self.children:
            if c.proc is not None and c.proc.poll() is None:
                c.proc.send_signal(signal.SIGTERM)
        deadline = time.time() + 10
        for c in self.children:
            if c.proc is None:
                continue
            try:
                c.proc.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                c.proc.kill()
                c.proc.wait()
        if self.redis is not None:
            self.redis.stop()
            config.forget_url(self.url)
        self.echo("stopped")


def run(opts: StackOptions, echo: Callable[[str], None] = print,
        ready: Callable[[Stack], None] | None = None) -> None:
    stack = Stack(opts, echo)
    done = threading.Event()

    def _stop(_sig: int, _frame: object) -> None:
        done.set()
        stack.stopping.set()

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    stack.start()
    try:
        if ready is not None:
            ready(stack)
        echo("Ctrl-C stops everything.")
        stack.watch()
    finally:
        stack.stop()
