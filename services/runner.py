"""Entry points of the long-running processes (``daemonbus run <process>``)."""

from __future__ import annotations

import logging
import os
import socket
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from services import common
from shared.store import adapters, roles
from shared.store.backoff import RedisBackoff
from shared.store.client import Store
from shared.store.eventlog import RedisCursor
from shared.store.expectations import RedisExpectations
from shared.store.lease import RedisLeaderLease
from shared.store.statuschannel import RedisStatusChannel
from shared.store.workqueue import RedisWorkQueue

if TYPE_CHECKING:
    from services.node_agent.runtime import Runtime


def instance_id(role: str) -> str:
    return f"{role}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


@dataclass
class Parts:
    store: Store
    queue: RedisWorkQueue
    expectations: RedisExpectations
    backoff: RedisBackoff


def parts(redis_url: str | None, prefix: str | None, role: str) -> Parts:
    store = common.open_store(redis_url, prefix, role)
    return Parts(store, adapters.on(store, RedisWorkQueue), adapters.on(store, RedisExpectations),
                 adapters.on(store, RedisBackoff))


def _start_cached_process(name: str, metrics: common.Metrics) -> logging.Logger:
    """Acts: the start of a process that keeps a large cache of the log: its logging, its
    garbage collector (full collections between bursts of log entries), its metrics."""
    log = common.setup_logging(name)
    common.tune_gc()
    common.collect_between_bursts()
    common.serve_metrics(*metrics)
    return log


def run_watcher(redis_url: str | None, prefix: str | None, metrics: common.Metrics) -> None:
    from services.watcher.watcher import LEASE_SECONDS, ROLE, Watcher

    _start_cached_process("watcher", metrics)
    p = parts(redis_url, prefix, roles.WATCHER)
    lease = adapters.on(p.store, RedisLeaderLease, "watcher", instance_id("watcher"),
                        ttl_seconds=LEASE_SECONDS)
    cursor = adapters.on(p.store, RedisCursor, ROLE)
    Watcher(p.store, lease, cursor=cursor).run(common.stop_event())


def run_reconciler(redis_url: str | None, prefix: str | None, metrics: common.Metrics,
                   name: str | None = None, burst: bool = False,
                   stall_seconds: float = common.STALL_SECONDS) -> None:
    from services.reconciler.metrics import start_queue_metrics
    from services.reconciler.sync import STATUS_STREAM_MAXLEN, Reconciler
    from services.reconciler.worker import LEASE_SECONDS, ReconcilerWorker, rq_queue

    log = _start_cached_process("reconciler", metrics)
    p = parts(redis_url, prefix, roles.RECONCILER)
    p.queue = adapters.on(p.store, RedisWorkQueue, lease_seconds=LEASE_SECONDS)
    worker_name = name or instance_id("reconciler")
    status = adapters.on(p.store, RedisStatusChannel, maxlen=STATUS_STREAM_MAXLEN)
    reconciler = Reconciler(p.store, p.queue, p.expectations, p.backoff, worker=worker_name,
                            status=status)
    queue = rq_queue(adapters.connection(p.store), p.store.keys.rq_queue_name)
    if metrics[0]:
        start_queue_metrics(p.queue)
    worker = ReconcilerWorker([queue], connection=adapters.connection(p.store), name=worker_name,
                              workqueue=p.queue, reconciler=reconciler,
                              stall_seconds=stall_seconds)
    log.info("reconciler-worker %s ready", worker_name)
    worker.work(burst=burst, logging_level=os.environ.get("DAEMONBUS_LOG_LEVEL", "WARNING"))


def run_status_writer(redis_url: str | None, prefix: str | None,
                      metrics: common.Metrics) -> None:
    from services.status_writer.writer import StatusWriter

    _start_cached_process("status-writer", metrics)
    store = common.open_store(redis_url, prefix, roles.STATUS_WRITER)
    channel = adapters.on(store, RedisStatusChannel)
    StatusWriter(store, instance_id("status-writer"), channel=channel).run(common.stop_event())


def run_gc(redis_url: str | None, prefix: str | None, metrics: common.Metrics,
           batch: int = 500, max_deletes_per_second: float = 0.0,
           node_lifecycle: object = None) -> None:
    """``node_lifecycle``: the node lifecycle controller's ``Settings`` (None: not run)."""
    from services.gc import nodelifecycle
    from services.gc.collector import Collector

    _start_cached_process("gc", metrics)
    store = common.open_store(redis_url, prefix, roles.GC)
    lifecycle = None
    if node_lifecycle is not None:
        assert isinstance(node_lifecycle, nodelifecycle.Settings)
        lease = adapters.on(store, RedisLeaderLease, nodelifecycle.LEASE_ROLE,
                            instance_id("gc"), ttl_seconds=max(10.0, 3 * node_lifecycle.period))
        lifecycle = nodelifecycle.NodeLifecycle(store, lease, node_lifecycle)
    Collector(store, batch=batch, max_deletes_per_second=max_deletes_per_second,
              node_lifecycle=lifecycle).run(common.stop_event())


def run_node_agent(redis_url: str | None, prefix: str | None, metrics: common.Metrics,
                   nodes: int, name_prefix: str, cfg: object,
                   via_admission: bool = False) -> None:
    from services.node_agent.agent import NodeAgent
    from services.node_agent.lifecycle import AgentConfig
    from shared.store.noderequests import Sender

    log = _start_cached_process("node-agent", metrics)
    assert isinstance(cfg, AgentConfig)
    store = common.open_store(redis_url, prefix, roles.NODE_AGENT)
    sender = adapters.on(store, Sender) if via_admission else None
    if sender is not None:
        log.info("writing through node-admission (requests on %s)", sender.stream)
    agent = NodeAgent(store, cfg, sender=sender)
    if nodes:
        created = agent.ensure_nodes(nodes, name_prefix)
        log.info("registered %d new nodes (%d requested)", created, nodes)
    agent.run(common.stop_event())


def run_process_agent(redis_url: str | None, prefix: str | None, metrics: common.Metrics,
                      cfg: object, runtime: Runtime, via_admission: bool = False) -> None:
    from services.node_agent.processagent import ProcessAgent, ProcessConfig
    from shared.store.noderequests import Sender

    log = common.setup_logging("node-agent")
    common.serve_metrics(*metrics)
    assert isinstance(cfg, ProcessConfig)
    log.info("node agent for %s (%s runtime %s, state in %s)", cfg.node_name, runtime.kind,
             runtime.version(), cfg.state_dir)
    store = common.open_store(redis_url, prefix, roles.NODE_AGENT)
    sender = adapters.on(store, Sender) if via_admission else None
    if sender is not None:
        log.info("writing through node-admission (requests on %s)", sender.stream)
    ProcessAgent(store, cfg, runtime, sender=sender).run(common.stop_event())


def run_node_admission(redis_url: str | None, prefix: str | None, metrics: common.Metrics,
                       users: list[str]) -> None:
    from services.node_admission.admission import Admission

    log = common.setup_logging("node-admission")
    common.serve_metrics(*metrics)
    store = common.open_store(redis_url, prefix, roles.NODE_AGENT)
    log.info("committing the requests of the node agents %s", ", ".join(users))
    Admission(store, users, instance_id("node-admission")).run(common.stop_event())
