"""What every daemonbus process shares: logging, signal handling, metrics endpoint, and
connecting to the store."""

from __future__ import annotations

import faulthandler
import gc
import logging
import os
import signal
import sys
import threading
from types import FrameType

from services import config
from shared.store import client as store_client
from shared.store.keys import Keys


def setup_logging(name: str, level: str | None = None) -> logging.Logger:
    """Log lines as ``<time> <name> <LEVEL> <message>`` on stderr; and ``kill -USR1`` of the
    process prints every thread's stack there (see ``enable_stack_dumps``)."""
    enable_stack_dumps()
    logging.basicConfig(
        level=(level or os.environ.get("DAEMONBUS_LOG_LEVEL") or "INFO").upper(),
        format=f"%(asctime)s {name} %(levelname)s %(message)s",
    )
    return logging.getLogger(name)


# A reconciler-worker's idle loop comes round about once a second; with Redis away, within
# ~50 s (each Redis call gives up within 15 s, see shared.store.client). Longer is a hang.
STALL_SECONDS = 120.0


def enable_stack_dumps() -> None:
    """Acts: on SIGUSR1, write the Python stack of every thread to stderr (the process goes
    on). For a process that is up but makes no progress: what is it waiting for?"""
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)


# A process's caches keep hundreds of thousands of long-lived objects (JSON-shaped maps and
# lists, no reference cycles). With the default thresholds (700, 10, 10) the collector walks
# all of them every few thousand allocations: ~100 ms each time at 5,000 nodes, a third of a
# reconciler's CPU while pods are being created. Young garbage is still collected, just in
# larger batches; full collections become rare.
GC_THRESHOLDS = (50_000, 20, 10)


def tune_gc() -> None:
    """Acts: set this process's garbage-collector thresholds for a large cache."""
    gc.set_threshold(*GC_THRESHOLDS)


def stop_event() -> threading.Event:
    """An event set on SIGTERM or SIGINT, so loops can finish their batch and exit."""
    ev = threading.Event()

    def _handler(_sig: int, _frame: FrameType | None) -> None:
        ev.set()

    signal.signal(signal.SIGTERM, _handler)
    signal.signal(signal.SIGINT, _handler)
    return ev


def open_store(redis_url: str | None = None, prefix: str | None = None) -> store_client.Store:
    url = config.redis_url(redis_url)
    client = store_client.connect(url)
    return store_client.Store(client, Keys(config.prefix(prefix)))


# The metrics endpoint listens on loopback unless told otherwise (--metrics-bind): what a
# process exports (its DaemonSets' names and counters) is nobody else's business by default.
METRICS_BIND = "127.0.0.1"
Metrics = tuple[int | None, str]  # (--metrics-port, --metrics-bind)


def serve_metrics(port: int | None, bind: str = METRICS_BIND) -> None:
    """Acts: serve Prometheus metrics on ``bind``:``port`` (nothing without a port)."""
    if port:
        from prometheus_client import start_http_server

        start_http_server(port, addr=bind)
