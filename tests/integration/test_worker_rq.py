"""The reconciler-worker as an RQ worker on real Redis: `rq info` lists it, its jobs carry only
a key and a lease token under a URL-safe id, every byte RQ stores is msgpack (never pickle),
forged jobs are refused, and a worker SIGKILLed mid-sync loses its key to another worker
within 10 s."""

from __future__ import annotations

import base64
import re
import shutil
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import msgpack
import pytest
from rq import Queue
from rq.exceptions import DeserializationError
from rq.job import Job

from services.reconciler import worker as rq_worker
from shared.store.workqueue import RedisWorkQueue
from tests.integration import controller_kit as kit
from tests.integration.stack import Stack, wait_for

JOB_ID = re.compile(r"^sync_([A-Za-z0-9_-]+)_([0-9]+)$")


def _rq_cli() -> str:
    beside = Path(sys.executable).with_name("rq")
    return str(beside) if beside.exists() else (shutil.which("rq") or "rq")


def _job_ids(stack: Stack) -> list[str]:
    return sorted(k.decode().split(":", 2)[2] for k in stack.store.r.scan_iter("rq:job:sync_*"))


def _our_jobs(stack: Stack, key: str) -> list[str]:
    encoded = base64.urlsafe_b64encode(key.encode()).decode().rstrip("=")
    return [j for j in _job_ids(stack) if j.startswith(f"sync_{encoded}_")]


def _pickled(value: bytes) -> bool:
    try:
        value = zlib.decompress(value)
    except zlib.error:
        pass
    return value[:1] == b"\x80" and value[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05")


def _owner(stack: Stack, key: str) -> str:
    raw: Any = stack.store.r.hget(stack.store.keys.wq_owner, key)
    return raw.decode().split(":", 2)[2] if raw else ""


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


def test_jobs_are_named_sync_base64url_token_and_stored_as_msgpack(stack: Stack) -> None:
    kit.start(stack, nodes=2)
    key = "kube-system/node-exporter"
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
    # results too: every value RQ keeps for the job decodes as msgpack
    results: Any = wait_for(lambda: stack.store.r.xrange(f"rq:results:{jobs[0]}"),
                            what="the job's result")
    for _id, fields in results:
        if b"return_value" in fields:
            value = msgpack.unpackb(base64.b64decode(fields[b"return_value"]), raw=False)
            assert value["key"] == key and value["ok"] is True


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
    wait_for(lambda: len(_our_jobs(stack, key)) >= 2, what="a few more syncs")
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
