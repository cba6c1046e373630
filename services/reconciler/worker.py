"""The reconciler-worker process: an RQ worker whose jobs come from the dedup workqueue.

RQ is the worker runtime: workers register with RQ (``rq info`` lists them), every sync runs in
an RQ job with RQ's registries, worker stats and failure handling. Jobs are not taken from an RQ
list, though: the worker's dequeue asks the client-go-style workqueue (dedup, one worker per
key, leases) for the next key and wraps it in a job. So:

* jobs carry only a DaemonSet key and a lease token (job id ``sync_<base64url key>_<token>``);
  a job then drains: it syncs the further keys the workqueue hands its worker within
  ``DRAIN_SECONDS`` of its start, each under its own lease, before it ends (RQ's bookkeeping
  of a job is about 16 commands, as much as the rest of a per-node sync's queue work);
* the serializer is msgpack, never pickle, and a job may only name a function on
  ``ALLOWED_FUNCTIONS`` (anything else fails before it is imported);
* nothing else a job hash can name runs either (see ``AllowListedJob``): callbacks are
  refused, webhooks never sent, dependents never enqueued, and RQ's registry maintenance,
  which reads job hashes anyone who can write Redis may have planted, is replaced by one that
  only deletes (``ReconcilerWorker.run_maintenance_tasks``);
* a job put on the RQ queue by someone else is never run: this worker does not read RQ lists.

RQ's bookkeeping is trimmed to what daemonbus uses: RQ's defaults cost 53 Redis commands in 16
round trips per job, against a handful for a no-op sync; now 16 in 3 (the job hash, its
execution record and registries in one pipeline as it starts, RQ's success bookkeeping in
one, the worker's idle state), for every key a job drains. A successful job keeps
no job hash, result or FinishedJobRegistry entry (its outcome is in the log and the metrics),
and counts each of its syncs in the worker's ``successful_job_count``; a failed one (a sync
raised) is kept by RQ as usual: FailedJobRegistry, traceback, ``failure_ttl``. The worker hash is heartbeated when its TTL needs it (about every
``HEARTBEAT_EVERY`` seconds), not 3-4 times per job, and ``rq suspend`` is looked for every
``SUSPENSION_CHECK_EVERY`` seconds, not before every job.

Leases: a worker renews the lease of the key it syncs every ``RENEW_EVERY`` seconds, for
``LEASE_SECONDS``; a worker that dies mid-sync therefore loses its key at most
``LEASE_SECONDS`` later, when an idle worker's ``get`` reclaims it and hands it out again;
what it left in RQ (its started job, its registration) is cleared a few seconds after that
(``ReconcilerWorker.clear_abandoned``), so ``rq info`` lists live workers only.

Redis outages: RQ's work loop ends at its first Redis error; ours (``ReconcilerWorker.work``)
rides out an outage of any length, logging it once as it begins and once as it ends.

Test hook (off by default): ``DAEMONBUS_TEST_SYNC_DELAY="<namespace/name>=<seconds>"`` makes
this process sleep that long before syncing that one key, so tests can kill a worker
mid-sync. Nothing reads it unless it is set.
"""

from __future__ import annotations

import base64
import faulthandler
import functools
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgpack
import redis
from rq import Queue, SimpleWorker, worker_registration
from rq.defaults import DEFAULT_LOGGING_DATE_FORMAT, DEFAULT_LOGGING_FORMAT
from rq.exceptions import DeserializationError, StopRequested
from rq.executions import Execution, ExecutionRegistry
from rq.job import Job, JobStatus
from rq.registry import FailedJobRegistry, StartedJobRegistry
from rq.utils import current_timestamp, now
from rq.worker import WorkerStatus

from services import common
from services.common import STALL_SECONDS
from services.reconciler.metrics import QUEUE_DURATION, QUEUE_NAME, WORK_DURATION
from services.reconciler.sync import Reconciler, SyncResult
from shared import settings
from shared.control.protocols import Lease, WorkQueue
from shared.store.guard import text

log = logging.getLogger("reconciler")

SYNC_FUNCTION = "services.reconciler.worker.sync_job"
ALLOWED_FUNCTIONS = frozenset({SYNC_FUNCTION})
#: every RQ method this adapter overrides, by RQ class (tests/unit/test_rq_adapter.py holds
#: them to RQ's own, signatures included, so an RQ upgrade that changes one fails loudly)
RQ_HOOKS: dict[str, tuple[str, ...]] = {
    "Job": ("func", "success_callback", "failure_callback", "stopped_callback",
            "send_webhooks", "dependent_ids"),
    "SimpleWorker": ("job_class", "work", "bootstrap", "register_birth", "teardown",
                     "unsubscribe", "_pubsub_exception_handler", "execute_job", "heartbeat",
                     "prepare_execution", "prepare_job_execution", "handle_execution_ended", "handle_job_success",
                     "_enqueue_dependents_safely", "run_maintenance_tasks",
                     "dequeue_job_and_maintain_ttl"),
}
LEASE_SECONDS = settings.current.worker_lease_seconds  # a dead worker's key: handed out again
RENEW_EVERY = settings.current.worker_renew_seconds
HEARTBEAT_EVERY = 10.0  # worker-hash heartbeats; its TTL (worker_ttl + 60 s) is minutes
SUSPENSION_CHECK_EVERY = 1.0  # seconds between looks at `rq suspend` (RQ: before every job)
ABANDONED_CHECK_EVERY = 2.0  # seconds between looks for jobs whose lease was reclaimed
# A job takes further keys (drains) only this long after it started: less than
# ABANDONED_CHECK_EVERY, so a live job is seen without a lease on two looks at most (see
# clear_abandoned)
DRAIN_SECONDS = 0.5
ABANDONED_LOOKS = 3  # looks at a job seen without its lease before it is taken as abandoned
UNSUBSCRIBE_WAIT = 1.0  # seconds a shutdown waits for the command channel's thread to end
TEST_SYNC_DELAY_ENV = "DAEMONBUS_TEST_SYNC_DELAY"


def _test_sync_delay(key: str) -> float:
    """The test hook's delay for ``key`` (0 unless ``TEST_SYNC_DELAY_ENV`` names it)."""
    raw = os.environ.get(TEST_SYNC_DELAY_ENV, "")
    name, _, seconds = raw.rpartition("=")
    try:
        return float(seconds) if name == key else 0.0
    except ValueError:
        return 0.0


class MsgpackSerializer:
    """RQ serializer for job payloads and results: msgpack only (no code execution)."""

    @staticmethod
    def dumps(obj: Any, *args: Any, **kwargs: Any) -> bytes:
        return msgpack.packb(obj, use_bin_type=True, default=str)  # type: ignore[no-any-return]

    @staticmethod
    def loads(data: bytes, *args: Any, **kwargs: Any) -> Any:
        return msgpack.unpackb(data, raw=False, strict_map_key=False)


class AllowListedJob(Job):  # type: ignore[misc]
    """A Job that runs no code a job hash names, but an allow-listed function.

    Anyone who can write Redis can write a job hash, and RQ resolves names from it in several
    places: the function (and an instance to call it on), the success, failure and stopped
    callbacks (``import_attribute``, then called with the job and its connection), webhooks
    (HTTP requests to the URLs stored there) and dependents (job ids RQ enqueues when a job
    ends, for whichever worker listens on their queue). Our jobs have none of these but the
    function, so every other one is refused when it is named, before anything is imported.

    The function runs with the context of the worker that executes the job (``context``,
    set by ``ReconcilerWorker.execute_job``), never one found in a module global."""

    context: JobContext | None = None

    @property
    def func(self) -> Any:
        name = self.func_name
        if name not in ALLOWED_FUNCTIONS:
            raise DeserializationError(f"job {self.id}: function {name!r} is not allowed")
        if self.instance is not None:
            raise DeserializationError(f"job {self.id}: a method call is not allowed")
        if self.context is None:
            raise DeserializationError(f"job {self.id}: run outside a reconciler worker")
        return functools.partial(super().func, self.context)

    def _no_callback(self, which: str, name: str | None) -> None:
        if name:
            raise DeserializationError(f"job {self.id}: {which} callback {name!r} is not allowed")

    @property
    def success_callback(self) -> None:
        self._no_callback("success", self._success_callback_name)

    @property
    def failure_callback(self) -> None:
        self._no_callback("failure", self._failure_callback_name)

    @property
    def stopped_callback(self) -> None:
        self._no_callback("stopped", self._stopped_callback_name)

    def send_webhooks(self, status: Any, *, exc_string: str | None = None) -> None:
        """Never: the URLs would come from Redis (our jobs have no webhooks)."""

    @property
    def dependent_ids(self) -> list[str]:
        return []  # our jobs have no dependents; a planted set is never enqueued


def rq_queue(connection: redis.Redis, name: str) -> Queue:
    """The RQ queue our workers listen on: its jobs are ``AllowListedJob``s in msgpack, for
    whatever RQ builds from it (registries, maintenance)."""
    return Queue(name, connection=connection, serializer=MsgpackSerializer,
                 job_class=AllowListedJob)


def job_id(lease: Lease) -> str:
    encoded = base64.urlsafe_b64encode(lease.key.encode()).decode().rstrip("=")
    return f"sync_{encoded}_{lease.token}".replace("=", "")


def lease_of(job: str) -> tuple[str, str] | None:
    """The (key, token) a ``job_id`` names; None for an id that is not one of ours."""
    head, _, token = job.rpartition("_")
    if not head.startswith("sync_") or not token.isdigit():
        return None
    encoded = head[len("sync_"):]
    try:
        return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode(), token
    except (ValueError, UnicodeDecodeError):
        return None


@dataclass
class JobContext:
    """What a job of one worker runs with: its reconciler, its workqueue, the leases it
    was handed (by token), how it drains (``draining``: whether a job that started then,
    monotonic, takes another key now, and then for which worker; ``more``: wait for that
    key, given ``done_then_get``'s wait) and how many syncs the running job has done
    (``synced``). The worker attaches it to each job it executes (``job.context``), so
    nothing is module-global."""

    reconciler: Reconciler
    queue: WorkQueue
    leases: dict[str, Lease] = field(default_factory=dict)
    draining: Callable[[float], str | None] | None = None
    more: Callable[[float, float], Lease | None] | None = None
    synced: int = 0


def sync_job(context: JobContext, key: str, token: str) -> dict[str, Any]:
    """RQ job: sync one key under its lease, then hand the result to the queue (``settle``),
    then drain: sync the further keys the workqueue hands out while the job is younger than
    ``DRAIN_SECONDS``, each under its own lease and settled the same way (the done of one and
    the get of the next in one call, ``done_then_get``). RQ calls it with the job's arguments
    (key, token) after the worker's ``context``. A sync that raises ends the job (RQ records
    it failed, with the traceback naming the key)."""
    started = time.monotonic()
    context.synced = 0
    lease: Lease | None = context.leases.pop(token)
    first: dict[str, Any] = {}
    while lease is not None:
        worker = context.draining(started) if context.draining is not None else None
        out, lease, wait = _sync_one(context, lease, worker)
        first = first or out
        context.synced += 1
        if lease is None and worker is not None and context.more is not None:
            lease = context.more(started, wait)
    return {**first, "drained": context.synced - 1}


def _sync_one(context: JobContext, lease: Lease,
              then: str | None) -> tuple[dict[str, Any], Lease | None, float]:
    """Sync ``lease``'s key under it, renewing it meanwhile, then ``settle`` (and, for worker
    ``then`` after a sync that returned, get the next key: see ``settle``)."""
    reconciler = context.reconciler
    queue = context.queue
    key = lease.key
    stop = threading.Event()
    holder = {"lease": lease}

    def keep_alive() -> None:
        while not stop.wait(RENEW_EVERY):
            try:
                renewed = queue.renew(holder["lease"])
            except common.REDIS_DOWN as err:  # tried again; the work loop logs the outage
                log.debug("lease of %s not renewed: %s", key, err)
                continue
            if renewed is None:
                log.warning("lost the lease of %s while syncing", key)
                return
            holder["lease"] = renewed

    renewer = threading.Thread(target=keep_alive, daemon=True)
    renewer.start()
    QUEUE_DURATION.labels(QUEUE_NAME).observe(lease.queue_seconds)
    started = time.monotonic()
    result: SyncResult | None = None
    try:
        delay = _test_sync_delay(key)
        if delay:
            time.sleep(delay)  # the documented test hook: a slow sync of one key
        result = reconciler.sync(key, lease.position, lease.redelivered, lease.token,
                                 nodes=None if lease.full else lease.nodes)
    except Exception as err:
        log.exception("sync of %s raised: %s", key, err)
        raise
    finally:
        stop.set()
        WORK_DURATION.labels(QUEUE_NAME).observe(time.monotonic() - started)
        nxt, wait = settle(queue, holder["lease"], result, then)
    return ({"key": key, "ok": result.ok, "error": result.error, "created": result.created,
             "deleted": result.deleted, "seconds": round(result.seconds, 4)}, nxt, wait)


def settle(queue: WorkQueue, lease: Lease, result: SyncResult | None,
           then: str | None = None) -> tuple[Lease | None, float]:
    """Acts: the one place a sync's result becomes queue calls (controller-runtime's
    ``reconcileHandler``), then always Done (with ``then``, a worker, and a sync that
    returned: Done and that worker's next Get in one call, ``done_then_get``; returns the
    lease it handed out, or None and its wait, as ``get`` takes it):

    * an error (``result`` None: the sync raised) → AddRateLimited;
    * ``requeue_after`` → Forget and AddAfter;
    * success → Forget.

    Unlike controller-runtime, an error keeps the sync's ``requeue_after`` too: upstream's
    DaemonSet controller enqueues after (``enqueueDaemonSetAfter``) during the sync, whatever
    it returns, and the queue keeps the earlier of the two times."""
    key = lease.key
    nxt: Lease | None = None
    wait, settled = -1.0, False
    try:
        if result is None or not result.ok:
            delay = queue.add_rate_limited(key)
            if result is not None:
                log.warning("sync of %s failed (retry in %.3fs): %s", key, delay, result.error)
        else:
            queue.forget(key)
        if result is not None and result.requeue_after is not None:
            queue.add_after(key, result.requeue_after)
        settled = True
    finally:
        if then is not None and result is not None and settled:
            _done, nxt, wait = queue.done_then_get(lease, then)
        else:
            queue.done(lease)
    return nxt, wait


class ReconcilerWorker(SimpleWorker):  # type: ignore[misc]
    """An RQ SimpleWorker that dequeues keys from the dedup workqueue."""

    job_class = AllowListedJob

    def __init__(self, *args: Any, workqueue: WorkQueue, reconciler: Reconciler,
                 block_seconds: float = 1.0, stall_seconds: float = STALL_SECONDS,
                 **kwargs: Any) -> None:
        kwargs.setdefault("serializer", MsgpackSerializer)
        kwargs.setdefault("job_class", AllowListedJob)
        super().__init__(*args, **kwargs)
        self.workqueue = workqueue
        self.reconciler = reconciler
        self.block_seconds = block_seconds
        self.context = JobContext(reconciler, workqueue, draining=self.drain_to,
                                  more=self.drain_next)
        self._alive_until = 0.0  # monotonic time the worker hash's last heartbeat keeps it to
        self._registered = False
        self.stall_seconds = stall_seconds
        self.outage = common.Outage(self.log)
        self._abandoned_check_at = 0.0
        self._suspension_check_at = 0.0
        # started entry → (when last seen without its lease, on how many looks)
        self._suspects: dict[str, tuple[float, int]] = {}
        self._preparing: Any = None  # the pipeline of a job's bookkeeping, until it is sent

    # ---- the work loop: RQ's, riding out Redis outages -------------------------------------

    def work(self, burst: bool = False, logging_level: str | None = None,
             date_format: str = DEFAULT_LOGGING_DATE_FORMAT,
             log_format: str = DEFAULT_LOGGING_FORMAT, max_jobs: int | None = None,
             max_idle_time: int | None = None, with_scheduler: bool = False,
             dequeue_strategy: Any = None) -> bool:
        """RQ's work loop (``BaseWorker.work``), made to ride out Redis going away.

        RQ's ends at the first Redis error anywhere in it (registering, the suspension check,
        a heartbeat or state write, a job's bookkeeping), so a Redis restart ended every
        worker. Here a Redis error is part of one outage (``services.common.Outage``: logged
        when it begins and when it ends, retried with backoff) wherever it happens, down to
        the bookkeeping of a job that was running when Redis went away (RQ logs the failure
        it could not record; the key's lease runs out and the workqueue hands it out again).
        Any other error ends the loop as RQ's does, for the supervisor to start a fresh
        process. RQ's scheduler and dequeue strategies are not used (no RQ lists are read).
        Returns whether any job ran."""
        self.bootstrap(logging_level, date_format, log_format)
        self._install_signal_handlers()  # type: ignore[no-untyped-call]
        completed = 0
        try:
            while not self._stop_requested:
                try:
                    if time.monotonic() >= self._suspension_check_at:
                        # `rq suspend` is seen within SUSPENSION_CHECK_EVERY (RQ looks
                        # before every job: three commands per sync)
                        self.check_for_suspension(burst)
                        self._suspension_check_at = time.monotonic() + SUSPENSION_CHECK_EVERY
                    if self.should_run_maintenance_tasks:
                        self.run_maintenance_tasks()
                    if self._stop_requested:
                        break
                    result = self.dequeue_job_and_maintain_ttl(
                        None if burst else self.dequeue_timeout, max_idle_time)
                    if result is None:
                        break
                    self.execute_job(*result)
                    self.heartbeat()
                    self.outage.ok()
                    completed += 1
                    if max_jobs is not None and completed >= max_jobs:
                        break
                except StopRequested:
                    break
                except common.REDIS_DOWN as err:
                    self._wait(self.outage.failed(err, "work loop"))
                except Exception:
                    self.log.exception("worker %s: unhandled exception, quitting", self.name)
                    break
        finally:
            self.teardown()
        return bool(completed)

    def _wait(self, seconds: float) -> None:
        """Sleep ``seconds``, less if a stop is requested meanwhile (RQ's SIGTERM handler
        raises StopRequested while no job runs: the loop then ends)."""
        deadline = time.monotonic() + seconds
        try:
            while not self._stop_requested and (left := deadline - time.monotonic()) > 0:
                time.sleep(min(left, 0.2))
        except StopRequested:
            self._stop_requested = True

    def bootstrap(self, logging_level: str | None = "INFO",
                  date_format: str = DEFAULT_LOGGING_DATE_FORMAT,
                  log_format: str = DEFAULT_LOGGING_FORMAT) -> None:
        """RQ's start (register the worker, subscribe to its command channel, state
        "started"), tried again until Redis answers."""
        while True:
            try:
                super().bootstrap(logging_level, date_format, log_format)
                self.outage.ok()
                return
            except common.REDIS_DOWN as err:
                self._wait(self.outage.failed(err, "registering the worker"))
                if self._stop_requested:
                    raise StopRequested() from err

    def register_birth(self) -> None:
        """RQ's registration, once per process (a retried bootstrap must not find its own
        registration and refuse it as another live worker's)."""
        if not self._registered:
            super().register_birth()  # type: ignore[no-untyped-call]
            self._registered = True

    def teardown(self) -> None:
        """RQ's unregistering on the way out; with Redis away, the registration is left to
        expire (``rq info`` stops listing it when its TTL runs out)."""
        try:
            super().teardown()  # type: ignore[no-untyped-call]
        except common.REDIS_DOWN as err:
            self.log.warning("worker %s not unregistered (redis unavailable: %s)", self.name, err)

    def unsubscribe(self) -> None:
        """RQ's, in an order that cannot hold the shutdown up. RQ sends the UNSUBSCRIBE, then
        stops the command channel's thread, and redis-py 8's ``stop`` waits for the thread to
        end. A thread that handled the UNSUBSCRIBE's reply before the stop reached it (a busy
        machine) went round once more and waited for a new subscription for RQ's sleep time,
        60 s, all that time keeping the worker from ending. Here the thread is told to stop
        first, so the reply ends its loop, and waited for ``UNSUBSCRIBE_WAIT`` at most."""
        thread = self.pubsub_thread
        if not thread:
            return
        self.log.info("Worker %s: unsubscribing from channel %s", self.name,
                      self.pubsub_channel_name)
        try:
            thread.stop(timeout=0)  # redis-py 8: clear the thread's flag, do not wait
        except TypeError:
            thread.stop()  # earlier redis-py: it never waited
        self.pubsub.unsubscribe()
        thread.join(timeout=UNSUBSCRIBE_WAIT)
        self.pubsub.close()

    def _pubsub_exception_handler(self, exc: Exception, pubsub: Any, thread: Any) -> None:
        """The command channel's thread (``rq`` shutdown, stop-job) reconnects after any Redis
        outage; RQ's ends the thread on a timeout. The work loop logs the outage."""
        if not isinstance(exc, common.REDIS_DOWN):
            super()._pubsub_exception_handler(exc, pubsub, thread)
            return
        self.log.debug("worker %s: command channel: redis unavailable: %s", self.name, exc)
        time.sleep(2.0)

    def execute_job(self, job: Job, queue: Queue) -> None:
        if isinstance(job, AllowListedJob):
            job.context = self.context
        try:
            super().execute_job(job, queue)
        finally:  # the job's lease, should RQ fail before the job ran (Redis away)
            self.context.leases.pop(job.args[1], None)

    def heartbeat(self, timeout: int | None = None, pipeline: Any = None) -> None:
        """Heartbeat the worker hash only when its TTL needs it.

        RQ heartbeats (HSET + 2 EXPIREs) on every dequeue loop, in the suspension check, before
        and after every job: 12 commands per sync. All a heartbeat must do is keep the hash
        (what `rq info` lists) from expiring, so one is skipped while the last one sent keeps
        the hash alive at least as long as this one would, give or take ``HEARTBEAT_EVERY``.
        A longer TTL (RQ asks for job timeout + 60 s before a job) is always sent."""
        ttl = timeout or self.worker_ttl + 60
        at = time.monotonic()
        if self._alive_until - at >= ttl - HEARTBEAT_EVERY:
            return
        super().heartbeat(timeout, pipeline)
        self._alive_until = at + ttl
        if pipeline is None and self._registered and not self._still_registered():
            # our registration was cleared as a dead worker's (our lease ran out while we
            # stalled, see clear_abandoned), or expired during a long outage: alive after
            # all, so listed again
            self.log.warning("worker %s: registration gone; registering again", self.name)
            self.connection.delete(self.key)  # what is left of it (a heartbeat, a death)
            super().register_birth()  # type: ignore[no-untyped-call]
            self.set_state(self.get_state())

    def _still_registered(self) -> bool:
        """Listed among RQ's workers, with the hash a registration writes."""
        with self.connection.pipeline(transaction=False) as pipe:
            pipe.sismember(self.redis_workers_keys, self.key)
            pipe.hexists(self.key, "birth")
            listed, born = pipe.execute()
        return bool(listed and born)

    def drain_to(self, started: float) -> str | None:
        """This worker's name while the running job, which started at ``started``
        (monotonic), takes another key: within ``DRAIN_SECONDS`` of its start and no stop
        requested (a warm shutdown finishes the key it holds and takes no other)."""
        if self._stop_requested or time.monotonic() >= started + DRAIN_SECONDS:
            return None
        return str(self.name)

    def drain_next(self, started: float, wait: float) -> Lease | None:
        """The next key for the running job, waiting for one until ``DRAIN_SECONDS`` after
        its start (``wait``: ``done_then_get``'s, the queue was just found empty); None once
        that is past, a stop was requested or Redis is away (the work loop rides out the
        outage)."""
        remaining = started + DRAIN_SECONDS - time.monotonic()
        if self._stop_requested or remaining <= 0:
            return None
        try:
            return self.workqueue.get(self.name, block_seconds=remaining, wait_first=wait)
        except common.REDIS_DOWN as err:
            log.debug("no further key for the job: %s", err)
            return None

    def clear_abandoned(self, at: float | None = None) -> int:
        """Acts: clear the RQ leftovers of workers that died mid-sync; returns how many.

        A worker killed while syncing leaves its job in StartedJobRegistry (for its heartbeat
        TTL, job timeout + 60 s) and its registration in ``rq info`` (as long), while the
        workqueue reclaims its key's lease within ``LEASE_SECONDS`` and hands it out again.
        A started job of ours whose lease is no longer held under its token, seen so on two
        looks at least ``ABANDONED_CHECK_EVERY`` apart (a job just done is out of the
        registry by then), was abandoned: it is deleted, and its worker's registration and
        other jobs cleared (``forget_worker``). A worker that was only stalled and carries on
        registers again on its next heartbeat.

        A job that drains holds no lease while it waits for its next key and between two of
        them, but only within ``DRAIN_SECONDS`` of its start, and then again in the moment
        between its last ``done`` and its end: two looks ``ABANDONED_CHECK_EVERY`` apart (more
        than ``DRAIN_SECONDS``) can each fall in one of those, never three. So a job is taken
        as abandoned once ``ABANDONED_LOOKS`` (3) looks that far apart saw it without its
        lease."""
        queue = self.queues[0].name
        started: list[Any] = self.connection.zrange(  # type: ignore[assignment]
            StartedJobRegistry(queue, connection=self.connection).key, 0, -1)
        leases = {text(e): lease_of(text(e).split(":", 1)[0]) for e in started}
        held = self.workqueue.current_tokens(sorted({kt[0] for kt in leases.values() if kt}))
        at = time.monotonic() if at is None else at  # now (tests pass the time of a look)
        suspects: dict[str, tuple[float, int]] = {}
        cleared = 0
        for entry, kt in leases.items():
            if kt is None or held.get(kt[0]) == kt[1]:
                continue
            last, looks = self._suspects.get(entry, (at, 0))
            if looks and at - last < ABANDONED_CHECK_EVERY:
                suspects[entry] = (last, looks)  # too soon after the last look: not one
                continue
            suspects[entry] = (at, looks + 1)
            if looks + 1 < ABANDONED_LOOKS:
                continue
            job, _, execution = entry.partition(":")
            raw: Any = self.connection.hget(Execution(execution, job, self.connection).key,
                                            "worker_name")
            holder = text(raw) if raw else ""
            if holder == self.name:
                continue  # our own, stalled past its lease: we are still running it
            drop_job(self.connection, queue, job)
            if holder:
                forget_worker(self.connection, holder)
            suspects.pop(entry)
            cleared += 1
            self.log.warning("cleared RQ job %s and worker %s: the lease of %s was reclaimed",
                             job, holder or "?", kt[0])
        self._suspects = suspects
        return cleared

    def prepare_execution(self, job: Job) -> Execution:
        """RQ's (``rq.executions.prepare_execution``: the execution record, its registries,
        the worker busy), queued with the job hash on one pipeline that
        ``prepare_job_execution`` sends: RQ sends three, two of them transactions (MULTI and
        EXEC around each), for keys no one else writes while the job starts. The hash is
        saved with what ``Job.prepare_for_execution`` writes after it (started, by this
        worker, now), in one HSET instead of two."""
        pipe = self.connection.pipeline(transaction=False)
        # what ``Job.prepare_for_execution`` writes in an HSET of its own, saved with the hash
        job.worker_name = self.name
        job.last_heartbeat = job.started_at = now()
        job._status = JobStatus.STARTED
        job.save(pipeline=pipe)
        execution = Execution.create(job, self.get_heartbeat_ttl(job), pipeline=pipe,
                                     worker_name=self.name)
        self.executions[execution.id] = execution
        self.set_state(WorkerStatus.BUSY, pipeline=pipe)
        self._preparing = pipe
        return execution

    def prepare_job_execution(self, job: Job, remove_from_intermediate_queue: bool = False) -> None:
        """RQ's, sending ``prepare_execution``'s pipeline with it. Left out of RQ's: the job
        hash's separate heartbeat field (``prepare_for_execution`` writes it too), its
        PERSIST (the hash was written just now, without a TTL) and the LREM from RQ's
        intermediate queue (our jobs never pass through RQ's queues)."""
        pipe, self._preparing = self._preparing, None
        prepared = pipe is not None  # the job hash saved there holds what it would write
        if pipe is None:
            pipe = self.connection.pipeline(transaction=False)
            job.save(pipeline=pipe)
        with pipe:
            self.heartbeat(self.get_heartbeat_ttl(job), pipeline=pipe)
            if not prepared:
                job.prepare_for_execution(self.name, pipeline=pipe)
            pipe.execute()
        self.procline(  # type: ignore[no-untyped-call]
            f"Processing {job.func_name} from {job.origin} since {time.time()}")

    def handle_execution_ended(self, job: Job, queue: Queue, heartbeat_ttl: int) -> None:
        # RQ also heartbeats the job hash here, to keep it alive through success/failure
        # callbacks; our jobs have none, and the hash is deleted or saved whole right after.
        job.ended_at = now()

    def handle_job_success(self, job: Job, queue: Queue, started_job_registry: Any,
                           execution: Execution) -> None:
        """A successful sync leaves nothing behind in RQ but the worker's counters.

        RQ's own handling watches the job's dependents, saves the job, its result stream and
        a FinishedJobRegistry entry and sets their TTLs (or, with ``result_ttl=0``, reads
        them back to delete them: dearer still): ~20 commands in 3 round trips. Our jobs have
        no dependents, repeats, rate limits or callbacks (we create them), and the sync's
        outcome is in the log and the metrics, so: the worker stats, the job hash and the
        execution record deleted (one DEL), the record dropped from StartedJobRegistry, in one
        round trip."""
        with self.connection.pipeline(transaction=False) as pipe:
            # each of the job's syncs counts as one (RQ's own adds 1 per job)
            pipe.hincrby(self.key, "successful_job_count", max(1, self.context.synced))
            if job.started_at and job.ended_at:
                self.increment_total_working_time(job.ended_at - job.started_at, pipe)
            # RQ's cleanup_execution (Execution.delete) but for one DEL of the job hash and
            # the execution record together
            pipe.delete(job.key, execution.key)
            job.started_job_registry.remove_execution(execution=execution, pipeline=pipe)
            ExecutionRegistry(job_id=job.id, connection=self.connection).remove(
                execution=execution, pipeline=pipe)
            if execution.worker_name:
                pipe.srem(execution.worker_executions_key, execution.composite_key)
            self.executions.pop(execution.id, None)
            pipe.execute()

    def _enqueue_dependents_safely(self, queue: Queue, job: Job) -> None:
        """Never: our jobs have no dependents (RQ would enqueue the ids a planted set names)."""

    def run_maintenance_tasks(self) -> None:
        """RQ's periodic registry maintenance, cut to what our jobs leave behind, and deleting
        only.

        RQ's own cleans every registry of the queue, the group and the rate-limit registries;
        for an abandoned job (its worker died) it loads the job hash, runs the failure
        callback it names, retries or fails the job, enqueues its dependents and sends its
        webhooks: all of it from data anyone who can write Redis may have planted. Here, under
        RQ's maintenance lock: workers whose hash expired leave the worker sets (``rq info``),
        a started job whose heartbeat ran out (its worker died; the workqueue hands its key
        out again) is deleted, and failed jobs past their ``failure_ttl`` leave the failed
        registry. No job hash is read."""
        queue = self.queues[0]
        if queue.acquire_maintenance_lock():
            try:
                worker_registration.clean_worker_registry(queue)
                started = StartedJobRegistry(queue.name, connection=self.connection)
                expired: list[Any] = self.connection.zrangebyscore(  # type: ignore[assignment]
                    started.key, 0, current_timestamp())
                for entry in expired:
                    drop_job(self.connection, queue.name, text(entry).split(":", 1)[0])
                FailedJobRegistry(queue.name, connection=self.connection).cleanup()
            finally:
                queue.release_maintenance_lock()  # type: ignore[no-untyped-call]
        self.last_cleaned_at = now()  # type: ignore[assignment]

    def dequeue_job_and_maintain_ttl(self, timeout: int | None,
                                     max_idle_time: int | None = None) -> tuple[Job, Queue] | None:
        self.procline("Waiting for DaemonSet keys")  # type: ignore[no-untyped-call]
        idle_since = time.monotonic()
        idle_written = self.get_state() == WorkerStatus.IDLE  # execute_job has set busy
        try:
            while True:
                # Liveness: should this loop not come round again within stall_seconds, the
                # process writes every thread's stack to stderr and exits (status 1), and its
                # supervisor (compose, `daemonbus up`) starts a fresh one. A sync is bounded
                # by RQ's job timeout instead.
                faulthandler.dump_traceback_later(self.stall_seconds, exit=True)
                if self._stop_requested:
                    return None
                try:
                    self.heartbeat()
                    if not idle_written:
                        self.set_state(WorkerStatus.IDLE)
                        idle_written = True
                    if self.should_run_maintenance_tasks:
                        self.run_maintenance_tasks()
                    if time.monotonic() >= self._abandoned_check_at:
                        self._abandoned_check_at = time.monotonic() + ABANDONED_CHECK_EVERY
                        self.clear_abandoned()
                    lease = self.workqueue.get(self.name, block_seconds=self.block_seconds)
                    self.outage.ok()
                except StopRequested:
                    raise  # raised by RQ's signal handler while we wait: a warm shutdown
                except common.REDIS_DOWN as err:
                    self._wait(self.outage.failed(err, "workqueue"))
                    continue
                except Exception as err:
                    self.log.exception("workqueue get failed: %r; retrying", err)
                    self._wait(1.0)
                    continue
                if lease is not None:
                    break
                if timeout is None:  # burst mode: the queue is empty, stop
                    return None
                if max_idle_time is not None and time.monotonic() - idle_since > max_idle_time:
                    return None
        finally:
            faulthandler.cancel_dump_traceback_later()
        self.context.leases[lease.token] = lease
        queue = self.queues[0]
        # result_ttl=0: no result is kept (see handle_job_success); failed jobs stay an hour
        job = self.job_class.create(
            SYNC_FUNCTION, args=[lease.key, lease.token], connection=self.connection,
            id=job_id(lease), origin=queue.name, serializer=self.serializer,
            description=f"sync daemonset {lease.key}", result_ttl=0, failure_ttl=3600,
            timeout=600,
        )
        return job, queue  # saved with its execution record (prepare_execution)


def drop_job(connection: redis.Redis, queue_name: str, job_id: str) -> None:
    """Acts: delete a job of ours that no worker will finish: its hash, its execution records
    and their StartedJobRegistry entries. Reads nothing from the job hash."""
    started = StartedJobRegistry(queue_name, connection=connection)
    executions = ExecutionRegistry(job_id, connection).key
    ids: list[Any] = connection.zrange(executions, 0, -1)  # type: ignore[assignment]
    entries: list[Any] = connection.zrange(started.key, 0, -1)  # type: ignore[assignment]
    with connection.pipeline(transaction=False) as pipe:
        for execution_id in ids:
            pipe.delete(Execution(text(execution_id), job_id, connection).key)
        mine = [text(e) for e in entries if text(e).split(":", 1)[0] == job_id]
        if mine:
            pipe.zrem(started.key, *mine)
        pipe.delete(executions, Job.key_for(job_id))
        pipe.execute()


def forget_worker(connection: redis.Redis, name: str) -> bool:
    """Acts: clear what a worker known to be dead (its process exited, or its key's lease ran
    out) left in RQ: the jobs it was running and its registration, so ``rq info`` lists live
    workers only and the name may be used again. False if it had no registration left."""
    worker = SimpleWorker.find_by_key(SimpleWorker.redis_worker_namespace_prefix + name,
                                      connection=connection, job_class=AllowListedJob,
                                      serializer=MsgpackSerializer)
    if worker is None:
        return False
    running: set[Any] = connection.smembers(worker.executions_key)  # type: ignore[assignment]
    for entry in running:
        for queue_name in worker.queue_names():
            drop_job(connection, queue_name, text(entry).split(":", 1)[0])
    worker.register_death()  # type: ignore[no-untyped-call]
    return True
