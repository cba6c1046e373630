"""What the benchmark drivers (``ops/bench_*.py``) share: a private redis-server, the real
daemonbus processes as subprocesses, bulk node creation, timing from log entry ids, Redis
command counting (``INFO commandstats``) and the results files.

Every time a driver reports is read from the event log: a stream entry id is the Redis clock
in milliseconds at the commit, so "apply → last pod created" is the difference of two entry
ids, independent of how often the driver polls. Polling only decides *when* to look.

``Cluster`` is a context manager: leaving it (normally, on an exception, on Ctrl-C or on
SIGTERM) stops every process it started and the Redis server, and removes its temp files.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from services.node_agent import lifecycle  # noqa: E402
from shared.model import meta, podutil  # noqa: E402
from shared.model.kinds import STORED  # noqa: E402
from shared.model.objkey import ObjectKey  # noqa: E402
from shared.store import codec, errors, scripts  # noqa: E402
from shared.store.client import Store, connect  # noqa: E402
from shared.store.keys import Keys  # noqa: E402
from shared.store.server import RedisServer, free_port  # noqa: E402

RESULTS = ROOT / "ops" / "results"
JSONL = RESULTS / "bench.jsonl"
SUMMARY = RESULTS / "bench-controller.md"
PREFIX = "bench"
NAMESPACE = "bench"
DS_NAME = "bench"
WARMUP_NAMESPACE = "bench-warmup"
DRIVER_READ_TIMEOUT = 300.0  # seconds this driver waits for one Redis reply

Obj = dict[str, Any]


# ---- small helpers ---------------------------------------------------------------------------

def id_ms(entry_id: str) -> float:
    """A stream entry id as milliseconds of the Redis clock (the sequence as a fraction)."""
    ms, seq = codec.id_tuple(entry_id)
    return ms + seq / 1_000_000.0


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile (pct in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def git_revision(root: Path = ROOT) -> str:
    """The checkout's short commit id, ``+dirty`` when files other than the results differ."""
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, text=True,
                             capture_output=True, check=True).stdout.strip()
        # the results files themselves do not count: a run of several sizes appends to them
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--",
                                ".", ":!ops/results"],
                               cwd=root, text=True, capture_output=True).stdout.strip()
        return rev + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def daemonset_manifest(name: str = DS_NAME, namespace: str = NAMESPACE, image: str = "bench/agent:1",
                       max_unavailable: int | str = "10%",
                       node_selector: dict[str, str] | None = None) -> Obj:
    spec: Obj = {"containers": [{"name": "agent", "image": image}]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "updateStrategy": {"type": "RollingUpdate",
                               "rollingUpdate": {"maxUnavailable": max_unavailable}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
        },
    }


def ready_node(name: str, now: float, labels: dict[str, str] | None = None,
               heartbeat_age: float = 0.0) -> Obj:
    """A node as a kubelet registers it, already reporting Ready (instant readiness), with
    ``labels`` added to its own and its heartbeat ``heartbeat_age`` seconds old."""
    node = lifecycle.new_node(name)
    if labels:
        node["metadata"].setdefault("labels", {}).update(labels)
    stamp = meta.format_time(now - heartbeat_age)
    node["status"]["conditions"] = [{
        "type": "Ready", "status": "True", "reason": "KubeletReady",
        "message": "kubelet is posting ready status (benchmark)",
        "lastHeartbeatTime": stamp, "lastTransitionTime": stamp,
    }]
    return node


def status_complete(status: Obj, n: int, generation: int, updated: bool = False) -> bool:
    """desired = current = ready = available = n (and updated = n) at ``generation``."""
    if int(status.get("observedGeneration") or 0) != generation:
        return False
    fields = ["desiredNumberScheduled", "currentNumberScheduled", "numberReady",
              "numberAvailable"]
    if updated:
        fields.append("updatedNumberScheduled")
    return all(int(status.get(f) or 0) == n for f in fields)


# ---- the cluster -----------------------------------------------------------------------------

class Interrupted(KeyboardInterrupt):
    """SIGTERM, turned into the same unwinding as Ctrl-C."""


INTERRUPTED = {"flag": False}  # set on Ctrl-C / SIGTERM: errors after it are its echoes


def _on_signal(_sig: int, _frame: FrameType | None) -> None:
    INTERRUPTED["flag"] = True
    raise Interrupted()


def process_cpu(pid: int) -> float | None:
    """CPU time (user + system) the process ``pid`` used so far; None if it cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def interrupted() -> bool:
    """Whether Ctrl-C or SIGTERM arrived (the Redis server, in the terminal's process group,
    gets Ctrl-C too, so the driver may see a connection error rather than the interrupt)."""
    return INTERRUPTED["flag"]


class Cluster:
    """A private Redis plus the daemonbus processes, for one benchmark run."""

    def __init__(self, workers: int = 1, profile_dir: Path | None = None,
                 keep_logs: bool = False, grace: float = 0.0,
                 appendfsync: str | None = None, load_nice: int = 0,
                 ready_delay: float = 0.0, profile_rate: int = 200) -> None:
        """``profile_rate``: py-spy's samples a second of each process when profiling (at
        200 and 50,000 nodes the samplers took as much CPU as the processes they watched)."""
        self.workers = workers
        self.profile_rate = profile_rate
        # the CPU niceness of the controllers and the node agent (``start_all``): above 0, the
        # workload yields the cores to what a benchmark measures, as if on machines of its own
        self.load_nice = load_nice
        self.grace = grace  # the node agent's termination grace (0: pods go at once)
        self.ready_delay = ready_delay  # a pod's time from Running to Ready (0: at once)
        self.profile_dir = profile_dir
        self.keep_logs = keep_logs
        self.tmp = Path(tempfile.mkdtemp(prefix="daemonbus-bench-"))
        # appendfsync None: no append-only file; else on, with that fsync policy
        self.redis = RedisServer(data_dir=str(self.tmp / "redis"),
                                 appendonly=appendfsync is not None,
                                 appendfsync=appendfsync or "always")
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.metrics_ports: dict[str, int] = {}
        self.spies: list[subprocess.Popen[bytes]] = []
        self.store: Store | None = None
        self.bench_commands = 0  # commands this driver sent while counting (subtracted)

    # ---- lifecycle --------------------------------------------------------------------------

    def __enter__(self) -> Cluster:
        signal.signal(signal.SIGTERM, _on_signal)
        signal.signal(signal.SIGINT, _on_signal)
        try:
            self.redis.start()
            # a reply may take long while every process lists 50,000 objects at once on a
            # busy machine: this driver waits for it rather than failing the run
            self.store = Store(connect(self.redis.url, socket_timeout=DRIVER_READ_TIMEOUT),
                               Keys(PREFIX))
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def s(self) -> Store:
        assert self.store is not None
        return self.store

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(DAEMONBUS_REDIS_URL=self.redis.url, DAEMONBUS_PREFIX=PREFIX,
                   PYTHONUNBUFFERED="1", DAEMONBUS_LOG_LEVEL="WARNING")
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        return env

    def start(self, name: str, *args: str, metrics: bool = True, nice: int = 0,
              root: Path | None = None) -> None:
        """Start ``daemonbus run ARGS`` as ``name``, serving metrics unless ``metrics`` is
        False (for a process without a metrics endpoint, such as the API server), at CPU
        niceness ``nice`` (set in the child before it starts, so all its threads have it),
        from the checkout ``root`` (default: this one; another for side-by-side runs)."""
        log = open(self.tmp / f"{name}.log", "ab")  # the child keeps it open
        extra: list[str] = []
        if metrics:
            port = self.metrics_ports[name] = free_port()
            extra = ["--metrics-port", str(port)]
        env = self.env()
        if root is not None:
            env["PYTHONPATH"] = str(root)
        self.procs[name] = subprocess.Popen(
            [sys.executable, "-m", "services.cli.main", "run", *args, *extra],
            env=env,
            stdout=log, stderr=subprocess.STDOUT, cwd=str(root or ROOT), start_new_session=True,
            preexec_fn=functools.partial(os.nice, nice) if nice else None)
        log.close()

    def start_all(self, gc: bool = False) -> None:
        """The watcher, the reconciler-workers, the status-writer and the node agent; with
        ``gc`` the garbage collector too (pods of removed nodes are its to delete); all at
        niceness ``load_nice``."""
        nice = self.load_nice
        self.start("watcher", "watcher", nice=nice)
        for i in range(self.workers):
            self.start(f"reconciler-{i}", "reconciler", "--name", f"bench-r{i}", nice=nice)
        self.start("status-writer", "status-writer", nice=nice)
        self.start("node-agent", "node-agent", "--ready-delay", str(self.ready_delay),
                   "--grace", str(self.grace),
                   nice=nice)
        if gc:
            self.start("gc", "gc", nice=nice)

    def check_alive(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}:\n{self.log_tail(name)}")

    def log_tail(self, name: str, chars: int = 3000) -> str:
        try:
            return (self.tmp / f"{name}.log").read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self) -> None:
        """Stop everything started, uninterruptibly (a second Ctrl-C must not leave a half-
        stopped cluster behind)."""
        previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT,
                                                                        signal.SIGTERM)}
        try:
            self._stop()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _stop(self) -> None:
        self.stop_profiling()
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
        with contextlib.suppress(Exception):
            self.redis.stop()
        if self.keep_logs:
            print(f"logs kept in {self.tmp}")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # ---- profiling (py-spy, optional) ----------------------------------------------------------

    def start_profiling(self, tag: str) -> None:
        if self.profile_dir is None:
            return
        spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        self.profile_dir.mkdir(parents=True, exist_ok=True)
        for name, proc in self.procs.items():
            out = self.profile_dir / f"{tag}-{name}.txt"
            self.spies.append(subprocess.Popen(
                [spy, "record", "--pid", str(proc.pid), "--format", "raw", "--rate",
                 str(self.profile_rate),
                 "--nonblocking", "--output", str(out)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
        time.sleep(0.5)  # let py-spy attach before the measured phase starts

    def profile_summary(self, tag: str, top: int = 4) -> dict[str, list[tuple[str, float]]]:
        """Per process, the project's functions (``services/``, ``shared/``) that held the
        most of its busy samples in the profiles of ``tag`` (``profile_top``); empty when not
        profiling."""
        if self.profile_dir is None:
            return {}
        out = {}
        for path in sorted(self.profile_dir.glob(f"{tag}-*.txt")):
            out[path.stem.removeprefix(tag + "-")] = profile_top(path, top)
        return out

    def stop_profiling(self) -> None:
        for spy in self.spies:
            if spy.poll() is None:
                spy.send_signal(signal.SIGINT)
        for spy in self.spies:
            try:
                spy.wait(20)
            except subprocess.TimeoutExpired:
                spy.kill()
                spy.wait()
        self.spies.clear()

    # ---- setup --------------------------------------------------------------------------------

    def create_nodes(self, names: list[str], labels: dict[str, str] | None = None,
                     timings: list[float] | None = None,
                     spread_heartbeats: float = 0.0) -> list[str]:
        """Create Ready nodes (with ``labels``), 1,000 per commit; returns their entry ids.
        Each commit is one command, counted in ``bench_commands``; ``timings`` gets the
        seconds each commit took, its ops' preparation left out. ``spread_heartbeats``
        (the agent's heartbeat period): the nodes' heartbeats are stamped evenly over the
        last such period, so the agent's heartbeats come spread over it as a fleet's do,
        not all nodes at once (at 50,000 nodes one burst of Node writes every 5 minutes
        held the agent's loop, and its lease renewals, past the 40 s lease)."""
        ids: list[str] = []
        now = time.time()
        for i in range(0, len(names), 1000):
            ops = [self.s.create_op(ready_node(
                n, now, labels, spread_heartbeats * ((i + j) % 997) / 997))
                for j, n in enumerate(names[i:i + 1000])]
            started = time.perf_counter()
            results = self.s.commit(ops)
            if timings is not None:
                timings.append(time.perf_counter() - started)
            self.bench_commands += 1
            for res in results:
                if not res.ok:
                    raise RuntimeError(f"creating node {res.op.key}: {res.status}")
                ids.append(res.value)
        return ids

    def delete_nodes(self, names: list[str]) -> list[str]:
        """Delete nodes (as ``kubectl delete node``), 1,000 per commit; returns the entry ids.
        Each commit is one command, counted in ``bench_commands``."""
        ids: list[str] = []
        for i in range(0, len(names), 1000):
            ops = []
            for name in names[i:i + 1000]:
                op = self.s.delete_op(self.s.get("Node", "/" + name))
                self.bench_commands += 1  # the read
                if op is not None:
                    ops.append(op)
            self.bench_commands += 1
            for res in self.s.commit(ops):
                if not res.ok:
                    raise RuntimeError(f"deleting node {res.op.key}: {res.status}")
                ids.append(res.value)
        return ids

    def warm_up(self, timeout: float = 120.0) -> None:
        """Apply a one-node DaemonSet in its own namespace and wait until its pod is Ready and
        counted: every process is then running with a synced cache, as in a live cluster."""
        names: Any = self.s.r.hkeys(self.s.keys.objects("Node"))
        first = ObjectKey.parse(sorted(names)[0].decode()).name
        self.s.apply(daemonset_manifest(name="warmup", namespace=WARMUP_NAMESPACE,
                                        node_selector={"kubernetes.io/hostname": first}))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check_alive()
            ds = self.s.try_get("DaemonSet", f"{WARMUP_NAMESPACE}/warmup")
            if ds and status_complete(ds.get("status") or {}, 1, 1):
                return
            time.sleep(0.1)
        raise RuntimeError("warm-up DaemonSet did not become ready:\n" +
                           "\n".join(self.log_tail(n, 1500) for n in self.procs))

    # ---- measuring -----------------------------------------------------------------------------

    def command_stats(self) -> dict[str, int]:
        info: Any = self.s.r.info("commandstats")
        out: dict[str, int] = {}
        for name, stats in info.items():
            cmd = name.removeprefix("cmdstat_")
            calls = stats.get("calls", 0) if isinstance(stats, dict) else 0
            out[cmd] = int(calls)
        return out

    def cpu_seconds(self) -> dict[str, float]:
        """CPU time (user + system) used so far by each process, Redis included."""
        pids = {name: p.pid for name, p in self.procs.items()}
        if self.redis.proc is not None:
            pids["redis-server"] = self.redis.proc.pid
        out: dict[str, float] = {}
        for name, pid in pids.items():
            used = process_cpu(pid)
            if used is not None:
                out[name] = used
        return out

    def machine_busy(self) -> float:
        """CPU seconds the whole machine has been busy (all processes, every core)."""
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
        values = [int(v) for v in fields]
        idle = values[3] + (values[4] if len(values) > 4 else 0)
        return (sum(values[:8]) - idle) / os.sysconf("SC_CLK_TCK")

    def cpu_reading(self) -> tuple[dict[str, float], float, float]:
        """(per-process CPU, machine busy, this driver's CPU) now."""
        own = os.times()
        return self.cpu_seconds(), self.machine_busy(), own.user + own.system

    def metric(self, name: str, metric: str) -> float:
        """Sum of one Prometheus sample family of a process (0 when unavailable)."""
        port = self.metrics_ports.get(name)
        if not port:
            return 0.0
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
                text = resp.read().decode()
        except OSError:
            return 0.0
        total = 0.0
        for line in text.splitlines():
            if line.startswith(metric + " ") or line.startswith(metric + "{"):
                with contextlib.suppress(ValueError):
                    total += float(line.rsplit(" ", 1)[1])
        return total

    def sync_stats(self) -> tuple[int, float]:
        """(syncs so far, seconds spent in them) over every reconciler-worker."""
        count, seconds = 0.0, 0.0
        for name in self.procs:
            if name.startswith("reconciler-"):
                count += self.metric(name, "daemonbus_reconcile_duration_seconds_count")
                seconds += self.metric(name, "daemonbus_reconcile_duration_seconds_sum")
        return int(count), seconds

    def catch_up_cpu(self) -> dict[str, float]:
        """Each reconciler-worker's CPU seconds so far bringing its cache up to the keys'
        hand-out positions (following the log), by process name."""
        return {name: self.metric(name, "daemonbus_reconcile_catch_up_cpu_seconds_total")
                for name in self.procs if name.startswith("reconciler-")}

    def poll_counts(self, ds_key: str = f"{NAMESPACE}/{DS_NAME}") -> tuple[int, Obj]:
        """(pods in the store, the DaemonSet's status): two commands, counted."""
        pipe = self.s.r.pipeline(transaction=False)
        pipe.hlen(self.s.keys.objects("Pod"))
        pipe.hget(self.s.keys.objects("DaemonSet"), ds_key)
        pods, raw = pipe.execute()
        self.bench_commands += 2
        ds = codec.unpack(raw) if raw else {}
        return int(pods), ds

    def wait_for_pod(self, node: str, after: str, timeout: float = 15.0) -> str:
        """The entry id of the first Pod ADDED for ``node`` after ``after``; every read is
        counted in ``bench_commands``."""
        pos = after
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            resp: Any = self.s.r.xread({self.s.keys.log: pos}, count=500, block=200)
            self.bench_commands += 1
            for eid_b, fields in (resp[0][1] if resp else []):
                pos = str(eid_b.decode())
                if fields.get(b"k") != b"Pod" or fields.get(b"t") != b"ADDED":
                    continue
                try:
                    entry = codec.decode_entry(pos, fields)
                except errors.CorruptEntryError:
                    continue
                if podutil.target_node(entry.obj) == node:
                    return pos
            self.check_alive()
        raise RuntimeError(f"no pod was created for node {node} within {timeout}s")

    def memory(self) -> dict[str, float]:
        """Resident memory (MiB) of each process started and of redis-server, and Redis'
        own ``used_memory`` (MiB, key ``redis used_memory``)."""
        import psutil  # a dependency of the process runtime; only the memory report needs it

        pids = {name: p.pid for name, p in self.procs.items()}
        if self.redis.proc is not None:
            pids["redis-server"] = self.redis.proc.pid
        out: dict[str, float] = {}
        for name, pid in pids.items():
            with contextlib.suppress(psutil.Error):
                out[name] = round(psutil.Process(pid).memory_info().rss / 2**20, 1)
        info: Any = self.s.r.info("memory")
        self.bench_commands += 1
        out["redis used_memory"] = round(int(info.get("used_memory", 0)) / 2**20, 1)
        return out

    def scan_log(self, after: str, count: int = 5000) -> Iterator[tuple[str, dict[bytes, bytes]]]:
        """Raw log entries after ``after`` (exclusive), oldest first; uncounted (run it after
        the command counters were read)."""
        pos = after
        while True:
            batch: Any = self.s.r.xrange(self.s.keys.log, min="(" + pos, count=count)
            if not batch:
                return
            for eid, fields in batch:
                pos = eid.decode()
                yield pos, fields
            if len(batch) < count:
                return


# ---- the floor: Redis alone, the same commits ------------------------------------------------

FLOOR_BEFORE = "floor-before"  # the view copied at a phase's start
FLOOR_RUN = "floor-run"  # where a phase's commits are replayed
FLOOR_BATCH = 1000  # at most this many ops per replayed commit (the drivers' own size)
FLOOR_PIPELINE = 200  # commits per pipeline round trip
FLOOR_GAP_MS = 10  # entries further apart on the Redis clock are of different commits
_MODES = {b"ADDED": ("create", ""), b"MODIFIED": ("update", "*"), b"DELETED": ("delete", "*"),
          b"DECISION": ("record", "")}


@dataclass
class FloorReading:
    """What Redis needs for a phase's commits, replayed in one pipelined script."""

    seconds: float  # the pipelines' wall time (this driver's sending included)
    redis_seconds: float  # Redis' own time in the commit script (INFO commandstats usec)
    commits: int
    entries: int
    failed: int  # ops that did not commit "ok" (0 when the replay is faithful)

    def as_dict(self, name: str) -> Obj:
        return {f"{name}_floor_s": round(self.seconds, 3),
                f"{name}_floor_redis_s": round(self.redis_seconds, 3),
                f"{name}_floor_commits": self.commits, f"{name}_floor_entries": self.entries,
                f"{name}_floor_failed": self.failed}


class Floor:
    """The floor of a phase, measured on the cluster's own Redis: ``start()`` copies the view
    (every kind's objects and versions) as the phase begins and notes the log tip; ``measure
    (until)`` puts that copy under a scratch prefix and replays the phase's log entries up to
    ``until`` through the same ``COMMIT`` script, in one pipeline, and times it.

    The log does not say where one commit ended and the next began, so a replayed commit is
    a run of entries of one kind and type with at most ``FLOOR_GAP_MS`` of the Redis clock
    between neighbours (a busy machine pauses Redis within one commit), at most
    ``FLOOR_BATCH`` and no object twice: the drivers' 1,000-node commits, a sync's batch of
    pod creates or a node agent's round of status writes each come out as one (two such
    commits of one kind close together as one: the floor errs low). The
    writes are the entries' own (mode by entry type, the stored payload, precondition "*")
    committed as role admin (the per-role checks left out: a lower bound). The processes go
    on running meanwhile (their lease renewals share the server)."""

    def __init__(self, cluster: Cluster) -> None:
        self.c = cluster
        self.after = "0-0"
        self._script = cluster.s.r.register_script(scripts.COMMIT)

    def _hash_keys(self, prefix: str) -> list[str]:
        keys = Keys(prefix)
        return [k for kind in STORED for k in (keys.objects(kind), keys.versions(kind))]

    def start(self) -> str:
        """Copy the view and note the tip (one transaction); returns the tip."""
        r = self.c.s.r
        r.unlink(*self._hash_keys(FLOOR_BEFORE))
        pipe = r.pipeline(transaction=True)
        for src, dst in zip(self._hash_keys(PREFIX), self._hash_keys(FLOOR_BEFORE), strict=True):
            pipe.copy(src, dst, replace=True)
        pipe.xrevrange(self.c.s.keys.log, count=1)
        *_, last = pipe.execute()
        self.after = last[0][0].decode() if last else "0-0"
        self.c.bench_commands += len(self._hash_keys(PREFIX)) + 4
        return self.after

    def _commits(self, until: str, ends: set[str] | None = None
                 ) -> tuple[list[tuple[list[str], list[Any]]], int]:
        keys = Keys(FLOOR_RUN)
        commits: list[tuple[list[str], list[Any]]] = []
        ops: list[tuple[str, str, str, str, bytes]] = []
        names: set[tuple[bytes, bytes]] = set()
        run: tuple[bytes, bytes] = (b"", b"")  # the kind and type of the open commit
        last_ms = -FLOOR_GAP_MS - 1
        entries = 0
        end = codec.id_tuple(until)

        def close() -> None:
            if not ops:
                return
            pairs: dict[str, int] = {}
            ckeys = [keys.log]
            args: list[Any] = [len(ops), "0", codec.SCHEMA_VERSION, 0, "", "", "0-0", "",
                               "admin", "", "0"]
            for mode, kind, key, expected, payload in ops:
                if kind not in pairs:
                    pairs[kind] = len(pairs) + 1
                    ckeys += [keys.objects(kind), keys.versions(kind)]
                args += [mode, pairs[kind], kind, key, expected, payload]
            ckeys += [keys.meta, keys.log_snapshot_id]
            commits.append((ckeys, args))
            ops.clear()
            names.clear()

        for eid, f in self.c.scan_log(self.after):
            if codec.id_tuple(eid) > end:
                break
            entries += 1
            name, this = (f[b"k"], f[b"n"]), (f[b"k"], f[b"t"])
            ms = codec.id_tuple(eid)[0]
            guessed = ends is None and (this != run or ms - last_ms > FLOOR_GAP_MS)
            if guessed or name in names or len(ops) >= FLOOR_BATCH:
                close()
                run = this
            last_ms = ms
            names.add(name)
            mode, expected = _MODES[f[b"t"]]
            ops.append((mode, f[b"k"].decode(), f[b"n"].decode(), expected, f[b"o"]))
            if ends is not None and eid in ends:
                close()
        close()
        return commits, entries

    def measure(self, until: str, ends: set[str] | None = None) -> FloorReading:
        """Replay the entries after ``start``'s tip through ``until`` (inclusive), timed; the
        scratch keys are removed after. ``ends``: the last entry id of each commit, when the
        caller knows them (its own commits), instead of the runs guessed from the log."""
        r = self.c.s.r
        commits, entries = self._commits(until, ends)
        run = Keys(FLOOR_RUN)
        scratch = [*self._hash_keys(FLOOR_RUN), run.log, run.meta, run.log_snapshot_id]
        r.unlink(*scratch)
        pipe = r.pipeline(transaction=False)
        for src, dst in zip(self._hash_keys(FLOOR_BEFORE), self._hash_keys(FLOOR_RUN),
                            strict=True):
            pipe.copy(src, dst, replace=True)
        pipe.execute()
        usec_before = self._usec()
        seconds, failed = 0.0, 0
        for i in range(0, len(commits), FLOOR_PIPELINE):
            pipe = r.pipeline(transaction=False)
            for ckeys, args in commits[i:i + FLOOR_PIPELINE]:
                self._script(keys=ckeys, args=args, client=pipe)
            started = time.perf_counter()
            replies = pipe.execute()
            seconds += time.perf_counter() - started
            failed += sum(1 for reply in replies for st, _v in reply[:-1] if st != b"ok")
        redis_seconds = (self._usec() - usec_before) / 1e6
        r.unlink(*scratch, *self._hash_keys(FLOOR_BEFORE))
        return FloorReading(seconds, redis_seconds, len(commits), entries, failed)

    def _usec(self) -> int:
        info: Any = self.c.s.r.info("commandstats")
        return sum(int(v.get("usec", 0)) for k, v in info.items()
                   if k in ("cmdstat_evalsha", "cmdstat_eval") and isinstance(v, dict))


_WAITING = ("read_from_socket", "select", "poll (selectors")


def profile_top(path: Path, top: int = 4) -> list[tuple[str, float]]:
    """From one py-spy raw profile (collapsed stacks), the project's functions (the command
    line's frames left out) with the largest share (percent) of the busy samples, each
    counted once per stack (inclusive).
    Samples waiting in a socket read under a blocking log read, a status receive or the
    workqueue's dequeue, or in ``select``, are idle and left out."""
    shares: dict[str, int] = {}
    busy = 0
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return []
    for line in lines:
        stack, _, count_s = line.rpartition(" ")
        if not stack or not count_s.isdigit():
            continue
        frames = stack.split(";")
        if any(w in frames[-1] for w in _WAITING[:2]) and (
                "select" in frames[-1] or
                any(x in f for f in frames for x in ("LogReader.read", "receive", "dequeue"))):
            continue
        count = int(count_s)
        busy += count
        seen = set()
        for frame in frames:
            fn, _, where = frame.partition(" (")
            where = where.split(":", 1)[0]
            if not where.startswith(("services/", "shared/")) or fn in seen or \
                    where.startswith(("services/cli/", "services/runner.py")):
                continue
            seen.add(fn)
            key = f"{where}:{fn}"
            shares[key] = shares.get(key, 0) + count
    ranked = sorted(shares.items(), key=lambda kv: -kv[1])
    # the outermost frames (run, step) hold everything: report those below 95%
    return [(k, round(100.0 * v / busy, 1)) for k, v in ranked if v < 0.95 * busy][:top]


@dataclass
class Measured:
    """What a benchmark run measured between its start readings and its end."""

    cpu: dict[str, float]
    syncs: tuple[int, float]
    commands: int
    per_command: dict[str, int]


def finish(cluster: Cluster, commands_before: dict[str, int],
           cpu_before: tuple[dict[str, float], float, float],
           progress: Callable[[], str]) -> Measured:
    """End a measured run: read the counters, stop profiling and print the last progress
    line and the CPU use."""
    after = cluster.command_stats()
    cpu = cpu_delta(cpu_before, cluster.cpu_reading())
    syncs = cluster.sync_stats()
    cluster.stop_profiling()
    print(f"  done     {progress()}")
    print(f"  cpu seconds: {cpu}")
    total, per = command_delta(commands_before, after, cluster.bench_commands)
    return Measured(cpu, syncs, total, per)


def cpu_delta(before: tuple[dict[str, float], float, float],
              after: tuple[dict[str, float], float, float]) -> dict[str, float]:
    """CPU seconds per process between two ``Cluster.cpu_reading``s; reconciler-workers
    also summed; ``driver`` is this script, ``other`` everything else on the machine (other
    users' work competing for the cores: a noisy run shows here)."""
    procs_b, busy_b, own_b = before
    procs_a, busy_a, own_a = after
    out = {k: round(procs_a[k] - procs_b.get(k, 0.0), 2) for k in procs_a}
    workers = [v for k, v in out.items() if k.startswith("reconciler-")]
    ours = sum(out.values())
    if len(workers) > 1:
        out["reconcilers"] = round(sum(workers), 2)
    out["driver"] = round(own_a - own_b, 2)
    out["other"] = round(max(0.0, (busy_a - busy_b) - ours - out["driver"]), 2)
    return out


def command_delta(before: dict[str, int], after: dict[str, int],
                  subtract: int = 0) -> tuple[int, dict[str, int]]:
    """Total calls between two ``INFO commandstats`` readings (INFO itself left out, the
    driver's own ``subtract`` commands taken off) and the per-command deltas."""
    per = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    per = {k: v for k, v in per.items() if v > 0 and k != "info"}
    return max(0, sum(per.values()) - subtract), dict(sorted(per.items(), key=lambda kv: -kv[1]))


def wait_until(check: Callable[[], bool], timeout: float, progress: Callable[[], str],
               cluster: Cluster, interval: float = 0.05) -> float:
    """Poll ``check`` every ``interval`` s, print ``progress()`` once a second; returns the
    seconds waited. Raises on timeout or a dead process."""
    started = time.monotonic()
    next_line = started + 1.0
    while True:
        if check():
            return time.monotonic() - started
        now = time.monotonic()
        if now >= next_line:
            cluster.check_alive()
            print(f"  t={now - started:5.1f}s  {progress()}", flush=True)
            next_line += 1.0
        if now - started > timeout:
            raise RuntimeError(f"timed out after {timeout}s: {progress()}")
        time.sleep(interval)


def fmt_status(pods: int, ds: Obj) -> str:
    st = ds.get("status") or {}
    return (f"pods={pods} desired={st.get('desiredNumberScheduled', 0)} "
            f"current={st.get('currentNumberScheduled', 0)} ready={st.get('numberReady', 0)} "
            f"available={st.get('numberAvailable', 0)} "
            f"updated={st.get('updatedNumberScheduled', 0)} "
            f"observedGeneration={st.get('observedGeneration', 0)}")


# ---- results ----------------------------------------------------------------------------------

def record(result: Obj) -> None:
    """Append one result line to bench.jsonl and re-render the summary."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    result = {"at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "revision": git_revision(), "loadavg_1m": round(os.getloadavg()[0], 2),
              **result}
    with JSONL.open("a") as f:
        f.write(json.dumps(result, sort_keys=True) + "\n")
    write_summary()


def _load() -> list[Obj]:
    out = []
    if JSONL.exists():
        for line in JSONL.read_text().splitlines():
            with contextlib.suppress(ValueError):
                out.append(json.loads(line))
    return out


def _s(v: Any, unit: str = "", digits: int = 2) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}{unit}"
    return f"{v}{unit}"


def _reconciler_cpu(r: Obj) -> float | None:
    cpu = r.get("cpu_seconds") or {}
    if not cpu:
        return None
    return float(sum(v for k, v in cpu.items() if k.startswith("reconciler-")))


def write_summary() -> None:
    """bench-controller.md: the latest result of each benchmark and size, then history."""
    rows = _load()
    lines = [
        "# daemonbus benchmarks",
        "",
        "Written by `ops/bench_controller.py` and `ops/bench_rollout.py` from "
        "`bench.jsonl` (one JSON line per run). Times are read from log entry ids (the Redis "
        "clock at each commit). Simulated nodes with instant readiness, all processes on one "
        "2-core machine.",
        "",
        "## Latest run of each label: apply → pods created → status complete",
        "",
        "| nodes | workers | apply→all pods | apply→status complete | Redis cmds / pod | "
        "node-added→pod p50 | p99 | Redis cmds / added node | other CPU | revision | label |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    # the newest run of each label, per benchmark and size (labels name what was measured)
    latest: dict[tuple[str, int, int, str], Obj] = {}
    for r in rows:
        latest[(r.get("bench", ""), int(r.get("nodes", 0)), int(r.get("workers", 1)),
                str(r.get("label", "")))] = r
    ordered = sorted(latest.items(), key=lambda kv: (kv[0][:3], str(kv[1].get("at", ""))))
    for (bench, nodes, workers, _label), r in ordered:
        if bench != "controller":
            continue
        lines.append(
            f"| {nodes} | {workers} | {_s(r.get('pods_created_s'), ' s')} | "
            f"{_s(r.get('status_complete_s'), ' s')} | {_s(r.get('commands_per_pod'), '', 1)} | "
            f"{_s(r.get('node_added_p50_ms'), ' ms', 1)} | {_s(r.get('node_added_p99_ms'), ' ms', 1)} | "
            f"{_s(r.get('commands_per_added_node'), '', 1)} | "
            f"{_s((r.get('cpu_seconds') or {}).get('other'), ' s')} | "
            f"{r.get('revision', '')} | {r.get('label', '')} |")
    lines += [
        "",
        "## Latest run of each label: rolling update (set image → rollout complete)",
        "",
        "| nodes | maxUnavailable | workers | set image→complete | Redis cmds / node | other CPU | "
        "revision | label |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for (bench, nodes, workers, _label), r in ordered:
        if bench != "rollout":
            continue
        lines.append(
            f"| {nodes} | {r.get('max_unavailable', '')} | {workers} | "
            f"{_s(r.get('rollout_s'), ' s')} | {_s(r.get('commands_per_node'), '', 1)} | "
            f"{_s((r.get('cpu_seconds') or {}).get('other'), ' s')} | "
            f"{r.get('revision', '')} | {r.get('label', '')} |")
    lines += [
        "",
        "## History (newest last, at most 40 runs)",
        "",
        "`other CPU` is what the rest of the machine used meanwhile (CPU seconds): a run with a "
        "large value shared the two cores with other work and its times are inflated.",
        "",
        "| at | bench | nodes | pods / rollout | status complete | cmds per pod/node | p50 | p99 | "
        "reconciler CPU | other CPU | revision | label |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    ours = [r for r in rows if r.get("bench") in ("controller", "rollout")]  # others share it
    for r in ours[-40:]:
        if r.get("bench") == "rollout":
            main, st, cmds = r.get("rollout_s"), None, r.get("commands_per_node")
        else:
            main, st, cmds = r.get("pods_created_s"), r.get("status_complete_s"), \
                r.get("commands_per_pod")
        lines.append(
            f"| {r.get('at', '')} | {r.get('bench', '')} | {r.get('nodes', '')} | "
            f"{_s(main, ' s')} | {_s(st, ' s')} | {_s(cmds, '', 1)} | "
            f"{_s(r.get('node_added_p50_ms'), ' ms', 1)} | {_s(r.get('node_added_p99_ms'), ' ms', 1)} | "
            f"{_s(_reconciler_cpu(r), ' s')} | {_s((r.get('cpu_seconds') or {}).get('other'), ' s')} | "
            f"{r.get('revision', '')} | {r.get('label', '')} |")
    lines += _replay_lines(rows)
    SUMMARY.write_text("\n".join(lines) + "\n")


def _replay_lines(rows: list[Obj]) -> list[str]:
    """The replay benchmark's runs (``ops/bench_replay.py``), newest last, at most 20."""
    lines = [
        "",
        "## Replay of a log (`ops/bench_replay.py`), newest last, at most 20 runs",
        "",
        "Each rate beside its floor measured in the same run: for `replay`, Redis alone taking "
        "the same log and view (pre-encoded XADDs in one pipelined stream, then the view; in "
        "the later runs, the faster of that, best of two runs, and one RESTORE of the "
        "log's DUMP, marked R); for `replay --verify`, reading the file and decoding its "
        "msgpack once. Redis CPU is the server's own, from the kernel's count (the XADD "
        "floor's).",
        "",
        "| at | entries | replay | floor | Redis CPU replay / floor | replay CPU | verify | "
        "verify floor | verify CPU (workers) | load before / after | revision | label |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for r in [r for r in rows if r.get("bench") == "replay"][-20:]:
        lines.append(
            f"| {r.get('at', '')} | {r.get('entries', '')} | "
            f"{_s(r.get('replay_entries_per_s'), '/s')} | "
            f"{_s(r.get('replay_floor_entries_per_s'), '/s')}"
            f"{' R' if r.get('replay_floor_way') == 'RESTORE' else ''} | "
            f"{_s(r.get('replay_redis_cpu_s'), ' s')} / {_s(r.get('replay_floor_redis_cpu_s'), ' s')} | "
            f"{_s(r.get('replay_cpu_s'), ' s')} | {_s(r.get('verify_entries_per_s'), '/s')} | "
            f"{_s(r.get('verify_floor_entries_per_s'), '/s')} | "
            f"{_s(r.get('verify_cpu_s'), ' s')} ({r.get('verify_workers', '-')}) | "
            f"{_s(r.get('loadavg_1m_before'))} / {_s(r.get('loadavg_1m'))} | "
            f"{r.get('revision', '')} | {r.get('label', '')} |")
    return lines
