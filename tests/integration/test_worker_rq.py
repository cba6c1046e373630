"""The reconciler-worker as an RQ worker on real Redis: `rq info` lists it, its jobs carry only
a key and a lease token under a URL-safe id, every byte RQ stores is msgpack (never pickle),
forged jobs are refused, and a worker SIGKILLed mid-sync loses its key to another worker
within 10 s."""

from __future__ import annotations

import base64
import logging
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Collection
from pathlib import Path
from typing import Any

import msgpack
import pytest
from rq import Queue
from rq.exceptions import DeserializationError
from rq.executions import Execution, ExecutionRegistry
from rq.job import Job, JobStatus
from rq.registry import FailedJobRegistry, FinishedJobRegistry, StartedJobRegistry

from services.reconciler import worker as rq_worker
from services.reconciler.sync import Reconciler, SyncResult
from shared.control.protocols import Lease
from shared.store.backoff import RedisBackoff
from shared.store.expectations import RedisExpectations
from shared.store.server import RedisServer
from shared.store.workqueue import RedisWorkQueue
from tests.integration import controller_kit as kit
from tests.integration.stack import Stack, wait_for

JOB_ID = re.compile(r"^sync_([A-Za-z0-9_-]+)_([0-9]+)$")


def _rq_cli() -> str:
    beside = Path(sys.executable).with_name("rq")
    return str(beside) if beside.exists() else (shutil.which("rq") or "rq")


def _job_ids(stack: Stack) -> list[str]:
    return sorted(k.decode().split(":", 2)[2] for k in stack.store.r.scan_iter("rq:job:sync_*"))


def _id_prefix(key: str) -> str:
    """How the ids of ``key``'s jobs start: ``sync_<base64url key>_``."""
    return "sync_" + base64.urlsafe_b64encode(key.encode()).decode().rstrip("=") + "_"


def _our_jobs(stack: Stack, key: str) -> list[str]:
    return [j for j in _job_ids(stack) if j.startswith(_id_prefix(key))]


def _pickled(value: bytes) -> bool:
    try:
        value = zlib.decompress(value)
    except zlib.error:
        pass
    return value[:1] == b"\x80" and value[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05")


def _owner(stack: Stack, key: str) -> str:
    raw: Any = stack.store.r.hget(stack.store.keys.wq_owner, key)
    return raw.decode().split(":", 2)[2] if raw else ""


def _synced(stack: Stack, worker: str) -> int:
    """Jobs RQ counts as done by ``worker``."""
    raw: Any = stack.store.r.hget(f"rq:worker:{worker}", "successful_job_count")
    return int(raw or 0)


class _FailingReconciler(Reconciler):
    def sync(self, key: str, position: str, redelivered: bool = False,
             lease_token: str = "", nodes: Collection[str] | None = None) -> SyncResult:
        raise RuntimeError(f"injected failure syncing {key}")


def _in_process_worker(stack: Stack, reconciler: type[Reconciler] = Reconciler,
                       ) -> tuple[rq_worker.ReconcilerWorker, RedisWorkQueue]:
    """A reconciler-worker built as ``daemonbus run reconciler`` builds it, in this process."""
    r, keys = stack.store.r, stack.store.keys
    wq = RedisWorkQueue(r, keys, lease_seconds=rq_worker.LEASE_SECONDS)
    name = f"{stack.prefix}-inproc"
    rec = reconciler(stack.store, wq, RedisExpectations(r, keys), RedisBackoff(r, keys),
                     worker=name)
    queue = rq_worker.rq_queue(r, keys.rq_queue_name)
    worker = rq_worker.ReconcilerWorker([queue], connection=r, name=name, workqueue=wq,
                                        reconciler=rec)
    return worker, wq


def _work(worker: rq_worker.ReconcilerWorker, jobs: int) -> None:
    """Run ``jobs`` jobs, then return (RQ installs its SIGINT/SIGTERM handlers meanwhile)."""
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        worker.work(burst=True, max_jobs=jobs, logging_level="WARNING")
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


def _registries(stack: Stack) -> list[Any]:
    return [cls(stack.store.keys.rq_queue_name, connection=stack.store.r,
                job_class=rq_worker.AllowListedJob, serializer=rq_worker.MsgpackSerializer)
            for cls in (StartedJobRegistry, FinishedJobRegistry, FailedJobRegistry)]


def test_a_successful_sync_leaves_no_job_result_or_registry_entry(stack: Stack) -> None:
    worker, wq = _in_process_worker(stack)
    keys = [f"{stack.prefix}/ghost-1", f"{stack.prefix}/ghost-2"]  # no such DaemonSets: no-op
    wq.add(keys)
    _work(worker, jobs=2)
    r = stack.store.r
    assert _synced(stack, worker.name) == 2
    assert kit.queue_idle(stack.store)
    # RQ's keys are not under our prefix (other tests' workers share this Redis): look for
    # this test's jobs only, by the key encoded in their ids
    for kind in ("job", "results", "execution"):
        left = [k for key in keys for k in r.scan_iter(f"rq:{kind}:{_id_prefix(key)}*")]
        assert left == [], f"rq:{kind} keys kept after success: {left}"
    assert [reg.count for reg in _registries(stack)] == [0, 0, 0]


class _AddingReconciler(Reconciler):
    """Each sync of ``<prefix>/ghost-<i>`` adds ``ghost-<i+1>`` (up to ``LAST``) to the
    queue: the next key arrives while a job runs."""

    LAST = 3

    def sync(self, key: str, position: str, redelivered: bool = False,
             lease_token: str = "", nodes: Collection[str] | None = None) -> SyncResult:
        head, _, i = key.rpartition("-")
        if int(i) < self.LAST:
            self.queue.add([f"{head}-{int(i) + 1}"])
        return super().sync(key, position, redelivered, lease_token, nodes)


def test_a_job_drains_the_keys_handed_out_while_it_runs(stack: Stack) -> None:
    """One RQ job syncs the keys that reach the queue while it runs, each under its own
    lease, and each counts as a successful job; the next job starts afresh."""
    worker, wq = _in_process_worker(stack, _AddingReconciler)
    wq.add([f"{stack.prefix}/ghost-1"])
    _work(worker, jobs=1)  # one job, then the loop ends
    assert _synced(stack, worker.name) == _AddingReconciler.LAST
    assert kit.queue_idle(stack.store)
    stats = wq.stats()
    assert stats.gets_total == stats.done_total == _AddingReconciler.LAST
    assert [reg.count for reg in _registries(stack)] == [0, 0, 0]


def test_a_worker_ends_at_once_after_its_command_thread_went_round_unsubscribed(
        stack: Stack) -> None:
    """A busy machine could let the command channel's thread handle the UNSUBSCRIBE's reply
    and go round once more before the stop reached it, into a wait for a new subscription of
    RQ's sleep time (60 s), which redis-py 8's stop waited out: the worker's end took a minute
    (it failed a CI run, the worker's registration expired meanwhile). Put the thread in that
    wait, then end the worker: it ends within ``UNSUBSCRIBE_WAIT``, give or take."""
    worker, _ = _in_process_worker(stack)
    worker.subscribe()
    thread = worker.pubsub_thread
    worker.pubsub.unsubscribe()  # as RQ's order sends it; the thread reads the reply
    wait_for(lambda: not worker.pubsub.subscribed, 10, what="the reply handled")
    started = time.monotonic()
    worker.unsubscribe()
    assert time.monotonic() - started < rq_worker.UNSUBSCRIBE_WAIT + 5
    assert worker.pubsub.connection is None  # closed: its connection back in the pool
    assert thread.daemon  # the thread, still waiting, holds no process up


def test_a_job_takes_no_key_after_its_drain_window(stack: Stack,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rq_worker, "DRAIN_SECONDS", 0.0)
    worker, wq = _in_process_worker(stack, _AddingReconciler)
    wq.add([f"{stack.prefix}/ghost-1"])
    _work(worker, jobs=1)
    assert _synced(stack, worker.name) == 1
    assert wq.state().queue == (f"{stack.prefix}/ghost-2",), "left for the next job"


def test_a_job_without_its_lease_is_abandoned_on_the_third_look(stack: Stack) -> None:
    """A started job of another worker whose lease is not held is cleared on the third look
    at least ABANDONED_CHECK_EVERY after the one before, not before: a live job that drains
    is without a lease on two such looks at most."""
    worker, _ = _in_process_worker(stack)
    r, qname = stack.store.r, stack.store.keys.rq_queue_name
    job = rq_worker.job_id(Lease(f"{stack.prefix}/gone", "other", "7", 0, 0, 0))
    execution = Execution("e1", job, r)
    r.hset(execution.key, "worker_name", f"{stack.prefix}-other")
    r.zadd(ExecutionRegistry(job, r).key, {"e1": time.time() + 600})
    started = StartedJobRegistry(qname, connection=r).key
    r.zadd(started, {f"{job}:e1": time.time() + 600})
    every = rq_worker.ABANDONED_CHECK_EVERY
    assert worker.clear_abandoned(at=100.0) == 0
    assert worker.clear_abandoned(at=100.0 + every / 2) == 0  # too soon: not a look
    assert worker.clear_abandoned(at=100.0 + every) == 0
    assert r.zscore(started, f"{job}:e1") is not None
    assert worker.clear_abandoned(at=100.0 + 2 * every) == 1
    assert r.zscore(started, f"{job}:e1") is None
    assert not r.exists(execution.key)


def test_a_failed_sync_is_a_failed_job_with_its_traceback(stack: Stack) -> None:
    worker, wq = _in_process_worker(stack, _FailingReconciler)
    key = "default/broken"
    wq.add([key])
    _work(worker, jobs=1)
    r = stack.store.r
    started, finished, failed = _registries(stack)
    assert started.count == 0 and finished.count == 0
    [failed_id] = failed.get_job_ids()
    m = JOB_ID.match(failed_id)
    assert m and base64.urlsafe_b64decode(m.group(1) + "=" * (-len(m.group(1)) % 4)) == \
        key.encode()
    job = rq_worker.AllowListedJob.fetch(failed_id, connection=r,
                                         serializer=rq_worker.MsgpackSerializer)
    assert job.get_status() == JobStatus.FAILED
    assert job.args == [key, m.group(2)]
    result = job.latest_result()
    assert result is not None and result.exc_string is not None
    assert "Traceback" in result.exc_string
    assert f"RuntimeError: injected failure syncing {key}" in result.exc_string
    assert 3500 < r.ttl(job.key) <= 3600  # failure_ttl
    assert int(r.hget(worker.key, "failed_job_count") or 0) == 1
    assert wq.num_requeues(key) == 1  # and the workqueue retries it with backoff


def test_worker_heartbeats_are_throttled_but_never_shorten_the_worker_ttl(stack: Stack) -> None:
    worker, _ = _in_process_worker(stack)
    r = stack.store.r
    worker.register_birth()
    try:
        worker.heartbeat()
        sent: Any = r.hget(worker.key, "last_heartbeat")
        ttl = r.ttl(worker.key)
        assert ttl > worker.worker_ttl
        worker.heartbeat()  # the hash is alive as long as this one would keep it: skipped
        assert r.hget(worker.key, "last_heartbeat") == sent
        worker.heartbeat(ttl + 300)  # a longer TTL (a job's) is always sent
        assert r.hget(worker.key, "last_heartbeat") != sent
        assert r.ttl(worker.key) > ttl + 200
    finally:
        worker.register_death()


def test_a_live_worker_cleared_as_dead_registers_again_on_its_next_heartbeat(
        stack: Stack) -> None:
    """A worker stalled past its lease is cleared as a dead one (clear_abandoned): when it
    carries on, its next heartbeat lists it again."""
    worker, _ = _in_process_worker(stack)
    r = stack.store.r
    worker.register_birth()
    try:
        assert rq_worker.forget_worker(r, worker.name)
        assert not r.sismember("rq:workers", worker.key)
        worker._alive_until = 0.0  # a heartbeat is due
        worker.heartbeat()
        assert r.sismember("rq:workers", worker.key)
        assert not r.hexists(worker.key, "death") and r.ttl(worker.key) > worker.worker_ttl
        r.delete(worker.key)  # expired meanwhile (an outage longer than its TTL)
        worker._alive_until = 0.0
        worker.heartbeat()
        assert r.hexists(worker.key, "birth") and r.sismember("rq:workers", worker.key)
    finally:
        worker.register_death()


def test_rq_info_lists_the_reconciler_workers(stack: Stack) -> None:
    kit.start(stack, workers=2, nodes=1)
    names = [f"{stack.prefix}-r0", f"{stack.prefix}-r1"]

    def listed() -> str | None:
        out = subprocess.run([_rq_cli(), "info", "--url", stack.redis_url],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        return out.stdout if all(n in out.stdout for n in names) else None

    text = wait_for(listed, timeout=20, interval=0.3, what="both workers in `rq info`")
    assert f"daemonbus-{stack.prefix}" in text  # the queue they listen on


def test_jobs_are_named_sync_base64url_token_and_stored_as_msgpack(
        stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    key = "kube-system/node-exporter"
    # a successful sync leaves no job behind: hold this key's syncs long enough to read one
    monkeypatch.setenv(rq_worker.TEST_SYNC_DELAY_ENV, f"{key}=1.5")
    kit.start(stack, nodes=2)
    monkeypatch.delenv(rq_worker.TEST_SYNC_DELAY_ENV)
    stack.store.apply(kit.daemonset("node-exporter", "kube-system"))
    jobs = wait_for(lambda: _our_jobs(stack, key), what="an RQ job for the key")
    for job_id in jobs:
        m = JOB_ID.match(job_id)
        assert m, job_id
        padded = m.group(1) + "=" * (-len(m.group(1)) % 4)
        assert base64.urlsafe_b64decode(padded).decode() == key
    job_hash: Any = stack.store.r.hgetall(f"rq:job:{jobs[0]}")
    data = zlib.decompress(job_hash[b"data"])
    assert not data.startswith(b"\x80"), "a pickle protocol header"
    func, instance, args, kwargs = msgpack.unpackb(data, raw=False)
    assert func == rq_worker.SYNC_FUNCTION and instance is None and kwargs == {}
    assert args[0] == key and args[1] == JOB_ID.match(jobs[0]).group(2)  # type: ignore[union-attr]
    # nothing RQ keeps in Redis is a pickle (protocol 2+ starts with 0x80, version byte)
    for rq_key in stack.store.r.scan_iter("rq:*"):
        if stack.store.r.type(rq_key) == b"hash":
            for value in stack.store.r.hvals(rq_key):
                assert not _pickled(value), (rq_key, value[:20])
    # once synced, the job is gone with no result kept (see test_a_successful_sync_...)
    wait_for(lambda: not stack.store.r.exists(f"rq:job:{jobs[0]}"), what="the job deleted")
    assert not stack.store.r.exists(f"rq:results:{jobs[0]}")


def test_a_forged_job_naming_another_function_is_refused(stack: Stack) -> None:
    queue = Queue(f"daemonbus-{stack.prefix}", connection=stack.store.r,
                  serializer=rq_worker.MsgpackSerializer)
    forged = Job.create("os.system", args=["echo pwned"], connection=stack.store.r,
                        serializer=rq_worker.MsgpackSerializer, id="sync_Zm9yZ2Vk_1")
    forged.save()
    job = rq_worker.AllowListedJob.fetch(forged.id, connection=stack.store.r,
                                         serializer=rq_worker.MsgpackSerializer)
    assert job.func_name == "os.system"
    with pytest.raises(DeserializationError, match="not allowed"):
        _ = job.func
    allowed = Job.create(rq_worker.SYNC_FUNCTION, args=["default/x", "1"],
                         connection=stack.store.r, serializer=rq_worker.MsgpackSerializer)
    allowed.save()
    stack.store.r.hset(f"rq:job:{allowed.id}", "failure_callback_name", "os.system")
    job = rq_worker.AllowListedJob.fetch(allowed.id, connection=stack.store.r,
                                         serializer=rq_worker.MsgpackSerializer)
    with pytest.raises(DeserializationError, match="callback"):
        _ = job.failure_callback
    assert queue.name.startswith("daemonbus-")


def test_a_job_pushed_on_the_rq_queue_is_never_run(stack: Stack, tmp_path: Path) -> None:
    victim = tmp_path / "keep-me"
    victim.write_text("x")
    queue = Queue(f"daemonbus-{stack.prefix}", connection=stack.store.r,
                  serializer=rq_worker.MsgpackSerializer)
    pushed = queue.enqueue("os.remove", str(victim))
    nodes = kit.start(stack, nodes=1)
    key = "default/agent"
    stack.store.apply(kit.daemonset("agent"))
    wait_for(lambda: kit.one_per_node(stack.store, key, nodes), what="the worker synced")
    wait_for(lambda: _synced(stack, f"{stack.prefix}-r0") >= 2, what="a few more syncs")
    assert victim.exists()
    assert pushed.id in queue.job_ids


def test_worker_killed_mid_sync_loses_its_lease_and_key_is_handed_out_again(
        stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    key = "default/slow"
    stack.start("watcher", "watcher")
    stack.start("status-writer", "status-writer")
    stack.start("node-agent", "node-agent", "--nodes", "2")
    monkeypatch.setenv(rq_worker.TEST_SYNC_DELAY_ENV, f"{key}=60")
    stack.start("slow-worker", "reconciler", "--name", f"{stack.prefix}-slow")
    monkeypatch.delenv(rq_worker.TEST_SYNC_DELAY_ENV)
    wait_for(lambda: len(stack.store.list("Node")) == 2, what="2 nodes")
    stack.store.apply(kit.daemonset("slow"))
    wait_for(lambda: _owner(stack, key) == f"{stack.prefix}-slow", timeout=20,
             what="the slow worker holds the key")
    stack.start("worker", "reconciler", "--name", f"{stack.prefix}-ok")
    wait_for(lambda: kit.rq_worker_registered(stack, f"{stack.prefix}-ok"),
             what="the second worker up")
    assert _owner(stack, key) == f"{stack.prefix}-slow"

    [dead_job] = _our_jobs(stack, key)
    killed = time.monotonic()
    stack.kill("slow-worker", signal.SIGKILL)
    wait_for(lambda: _owner(stack, key) == f"{stack.prefix}-ok"
             or kit.one_per_node(stack.store, key, ["node-00001", "node-00002"]),
             timeout=15, interval=0.02, what="the key handed to the other worker")
    handed_out = time.monotonic() - killed
    print(f"key handed out again {handed_out:.2f}s after SIGKILL")
    assert handed_out < 10.0
    wait_for(lambda: kit.one_per_node(stack.store, key, ["node-00001", "node-00002"]),
             what="the other worker synced it")
    stats = RedisWorkQueue(stack.store.r, stack.store.keys).stats()
    assert stats.reclaimed_total >= 1
    # RQ's leftovers of the dead worker (its registration, its job in StartedJobRegistry,
    # kept by RQ for the job timeout + 60 s) cleared once its lease was reclaimed
    dead, r = f"{stack.prefix}-slow", stack.store.r
    started = StartedJobRegistry(stack.store.keys.rq_queue_name, connection=r,
                                 job_class=rq_worker.AllowListedJob,
                                 serializer=rq_worker.MsgpackSerializer)

    def rq_info() -> subprocess.CompletedProcess[str]:
        # our queue named: with none, `rq info` lists the workers of RQ-registered queues only
        return subprocess.run([_rq_cli(), "info", "--url", stack.redis_url,
                               stack.store.keys.rq_queue_name],
                              capture_output=True, text=True, timeout=30)

    def leftovers() -> list[str]:
        out = rq_info()
        assert out.returncode == 0, out.stderr
        return [what for what, there in (
            ("rq info lists it", f"{dead} " in out.stdout or f"{dead}\n" in out.stdout),
            ("registered", r.sismember("rq:workers", f"rq:worker:{dead}")),
            ("its job started", any(e.decode().startswith(f"{dead_job}:")
                                    for e in r.zrange(started.key, 0, -1))),
            ("its job hash", r.exists(f"rq:job:{dead_job}")),
        ) if there]

    wait_for(lambda: not leftovers(), timeout=20, interval=0.5, what="RQ's leftovers cleared")
    assert f"{stack.prefix}-ok" in rq_info().stdout  # the live worker is still listed


class _Lines(logging.Handler):
    """Collects the messages a logger emits (from any thread)."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def saw(self, text: str) -> bool:
        return any(text in m for m in list(self.messages))


def test_a_worker_outlives_a_redis_outage_in_which_its_heartbeat_falls_due(
        tmp_path: Path, prefix: str) -> None:
    """RQ ends its work loop on any Redis error: the worker's own Redis calls between jobs
    (heartbeat, state, suspension check) wait for Redis as its dequeue does, logging the
    outage once. Redis stops while a heartbeat is due, comes back, and the same worker
    process syncs the next key."""
    servers = [RedisServer(data_dir=str(tmp_path / "redis"), appendonly=True).start()]
    stack = Stack(servers[0].url, prefix, tmp_path)
    worker, wq = _in_process_worker(stack)
    lines = _Lines()
    worker.log.addHandler(lines)
    key = "kube-system/after-the-outage"
    ended = threading.Event()
    failures: list[BaseException] = []

    def outage() -> None:
        try:
            wait_for(lambda: stack.store.r.hget(worker.key, "state") == b"idle", timeout=30,
                     what="the worker in its idle loop")
            servers[0].stop()
            worker._alive_until = 0.0  # a heartbeat is due while Redis is away
            wait_for(lambda: lines.saw("redis unavailable") or ended.is_set(), timeout=60,
                     what="a heartbeat tried without Redis")
            if not ended.is_set():
                servers.append(RedisServer(data_dir=servers[0].data_dir, port=servers[0].port,
                                           appendonly=True).start())
                wq.add([key])
        except BaseException as err:  # reported by the test below
            failures.append(err)
            worker._stop_requested = True

    helper = threading.Thread(target=outage, daemon=True)
    helper.start()
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        worker.work(burst=False, max_jobs=1, logging_level="WARNING")
        ended.set()
        helper.join(timeout=30)
        assert not failures, failures
        assert _synced(stack, worker.name) == 1, lines.messages
        # one outage, one line as it began and one as it ended, however many retries
        assert sum("redis unavailable" in m for m in lines.messages) == 1, lines.messages
        assert sum("redis is back" in m for m in lines.messages) == 1, lines.messages
    finally:
        ended.set()
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        worker.log.removeHandler(lines)
        for server in servers:
            server.stop()


def test_sigusr1_makes_a_running_worker_print_its_threads_and_carry_on(stack: Stack) -> None:
    """For a process that is up but makes no progress: `kill -USR1` shows where each of its
    threads waits, and the process goes on working."""
    proc = stack.start("reconciler-0", "reconciler", "--name", f"{stack.prefix}-r0")
    log = stack.log_dir / "reconciler-0.log"
    wait_for(lambda: stack.store.r.hget(f"rq:worker:{stack.prefix}-r0", "state") == b"idle",
             timeout=30, what="the worker in its idle loop")
    proc.send_signal(signal.SIGUSR1)
    # the main thread's stack comes last, frame by frame: wait for the one that shows it
    # waiting for a key (the header alone may be written before its frames)
    wait_for(lambda: "dequeue_job_and_maintain_ttl" in
             log.read_text().partition("Current thread")[2],
             timeout=10, what="the main thread's stack in the log, waiting for a key")
    assert proc.poll() is None
    RedisWorkQueue(stack.store.r, stack.store.keys).add(["kube-system/after-the-dump"])
    wait_for(lambda: _synced(stack, f"{stack.prefix}-r0") == 1, timeout=30,
             what="a sync after the dump")


def test_a_worker_whose_idle_loop_hangs_prints_its_threads_and_exits(
        tmp_path: Path, prefix: str) -> None:
    """Liveness: a worker whose loop stops coming round (here, every Redis command waits
    behind CLIENT PAUSE) writes each thread's stack and exits 1 after --stall-seconds, for its
    supervisor to start a fresh one, instead of sitting there healthy-looking and idle."""
    server = RedisServer(data_dir=str(tmp_path / "redis")).start()
    stack = Stack(server.url, prefix, tmp_path)
    try:
        proc = stack.start("reconciler-0", "reconciler", "--name", f"{prefix}-r0",
                           "--stall-seconds", "5")
        wait_for(lambda: stack.store.r.hget(f"rq:worker:{prefix}-r0", "state") == b"idle",
                 timeout=30, what="the worker in its idle loop")
        stack.store.r.execute_command("CLIENT", "PAUSE", "60000", "ALL")
        assert proc.wait(timeout=60) == 1
        log = (tmp_path / "reconciler-0.log").read_text()
        assert "Timeout (0:00:05)!" in log
        assert "dequeue_job_and_maintain_ttl" in log
    finally:
        stack.stop()
        server.stop()
