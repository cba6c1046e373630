"""Nothing from Redis names code a reconciler-worker runs: job hashes planted in RQ's keys
(anyone who can write Redis can write them) naming callbacks, dependents and webhooks are met
by a real RQ worker's job runs and registry maintenance, and none of it runs."""

from __future__ import annotations

import json
import os
import signal
import socket
from pathlib import Path

import pytest
from rq.job import Job, JobStatus
from rq.registry import FailedJobRegistry, StartedJobRegistry

from services.reconciler import worker as rq_worker
from services.reconciler.sync import Reconciler
from shared.control.protocols import Lease
from shared.store.backoff import RedisBackoff
from shared.store.expectations import RedisExpectations
from shared.store.workqueue import RedisWorkQueue
from tests.integration.stack import Stack

MARKER_ENV = "DAEMONBUS_TEST_MARKER"
MARKER = f"{__name__}.write_marker"


def write_marker(*args: object) -> None:
    """The callable every planted name points at: it leaves a line in the marker file."""
    with open(os.environ[MARKER_ENV], "a") as f:
        f.write(f"called with {len(args)} arguments\n")


def _plant(stack: Stack, job_id: str, webhook_url: str, **fields: str) -> None:
    """A job hash naming our own (allow-listed) function, and every callable RQ resolves."""
    job = Job.create(rq_worker.SYNC_FUNCTION, args=["default/planted", "1"], id=job_id,
                     connection=stack.store.r, serializer=rq_worker.MsgpackSerializer,
                     origin=stack.store.keys.rq_queue_name)
    job.save()
    stack.store.r.hset(job.key, mapping={
        "success_callback_name": MARKER, "failure_callback_name": MARKER,
        "stopped_callback_name": MARKER, "status": JobStatus.STARTED.value,
        "webhooks": json.dumps([{"url": webhook_url, "job_status": status}
                                for status in ("finished", "failed")]),
        **fields,
    })


def test_callbacks_dependents_and_webhooks_a_job_hash_names_are_never_run(
        stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "marker"
    monkeypatch.setenv(MARKER_ENV, str(marker))
    write_marker()  # the planted name does write the file when called
    assert marker.exists()
    marker.unlink()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    webhook = f"http://127.0.0.1:{listener.getsockname()[1]}/hook"

    r, keys = stack.store.r, stack.store.keys
    qname = keys.rq_queue_name
    wq = RedisWorkQueue(r, keys, lease_seconds=rq_worker.LEASE_SECONDS)
    # 1. an abandoned job, as a dead worker leaves it, for maintenance to find: RQ's would
    #    run its failure callback, enqueue its dependent and send its webhooks
    _plant(stack, "sync_YWJhbmRvbmVk_1", webhook)
    r.zadd(StartedJobRegistry(qname, connection=r).key, {"sync_YWJhbmRvbmVk_1:e1": 1})
    # 2. its dependent, itself naming the marker as its function
    dependent = Job.create(MARKER, connection=r, serializer=rq_worker.MsgpackSerializer,
                           id="planted-dependent", origin=qname)
    dependent.save()
    r.hset(dependent.key, "status", JobStatus.DEFERRED.value)
    r.sadd(Job.dependents_key_for("sync_YWJhbmRvbmVk_1"), dependent.id)
    # 3. an expired failed job
    _plant(stack, "sync_ZmFpbGVk_2", webhook, status=JobStatus.FAILED.value)
    r.zadd(FailedJobRegistry(qname, connection=r).key, {"sync_ZmFpbGVk_2": 1})
    # 4. the hashes of the next jobs this worker will run (their ids are predictable: the
    #    workqueue's token is a counter), with dependents of their own
    name = f"{stack.prefix}-planted"
    key = "default/ghost"  # no such DaemonSet: a successful no-op sync
    next_token = wq.stats().gets_total + 1
    for token in range(next_token, next_token + 3):
        jid = rq_worker.job_id(Lease(key, name, str(token), 0, 0, 0))
        _plant(stack, jid, webhook)
        r.sadd(Job.dependents_key_for(jid), dependent.id)

    rec = Reconciler(stack.store, wq, RedisExpectations(r, keys), RedisBackoff(r, keys),
                     worker=name)
    worker = rq_worker.ReconcilerWorker([rq_worker.rq_queue(r, qname)], connection=r,
                                        name=name, workqueue=wq, reconciler=rec)
    wq.add([key])
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        worker.work(burst=True, max_jobs=1, logging_level="WARNING")  # maintenance runs first
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)

    assert not marker.exists(), marker.read_text()
    assert int(r.hget(worker.key, "successful_job_count") or 0) == 1
    with pytest.raises(BlockingIOError):
        listener.accept()  # no webhook request (RQ sends them before work() returns)
    listener.close()
    # the dependent was enqueued nowhere, and maintenance only deleted
    assert not r.exists(f"rq:queue:{qname}")
    assert r.hget(dependent.key, "status") == JobStatus.DEFERRED.value.encode()
    assert not r.exists("rq:job:sync_YWJhbmRvbmVk_1")
    assert r.zcard(StartedJobRegistry(qname, connection=r).key) == 0
    assert r.zcard(FailedJobRegistry(qname, connection=r).key) == 0
