"""What every daemonbus process shares: logging, signal handling, metrics endpoint, and
connecting to the store."""

from __future__ import annotations

import faulthandler
import gc
import logging
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType

from services import config
from shared import settings
from shared.store import client as store_client
from shared.store import errors, roles
from shared.store.keys import Keys
from shared.store.log import activity as log_activity


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
STALL_SECONDS = settings.current.stall_seconds


# What a loop rides out as "Redis is away": redis-py's connection errors (a refused or reset
# connection, a server still loading its append-only file) and timeouts, and the store's
# UnavailableError that wraps them.
REDIS_DOWN: tuple[type[Exception], ...] = (*errors.TransportDown, errors.UnavailableError)
OUTAGE_FIRST_DELAY = 0.5  # seconds before the first retry; doubling up to
OUTAGE_MAX_DELAY = 5.0  # so a Redis back after any outage is noticed within 5 s


class Outage:
    """One outage of Redis as a loop sees it: a warning when it begins, one line when it ends,
    and the backoff between attempts (``OUTAGE_FIRST_DELAY`` doubling to
    ``OUTAGE_MAX_DELAY``), so a restart of any length costs two log lines, not one per try.
    Decides only: the caller waits the delay ``failed`` returns (on its stop event, so a
    SIGTERM is not held up) and reports each success with ``ok``."""

    def __init__(self, log: logging.Logger, what: str = "redis",
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.log, self.what, self.clock = log, what, clock
        self.since: float | None = None
        self.attempts = 0
        self.delay = 0.0

    @property
    def down(self) -> bool:
        return self.since is not None

    def failed(self, err: BaseException, doing: str = "") -> float:
        """Record a failed attempt; returns how long to wait before the next one."""
        self.attempts += 1
        if self.since is None:
            self.since = self.clock()
            self.delay = OUTAGE_FIRST_DELAY
            where = f" ({doing})" if doing else ""
            self.log.warning("%s unavailable%s: %s; retrying with backoff until it is back",
                             self.what, where, err)
        else:
            self.delay = min(OUTAGE_MAX_DELAY, self.delay * 2)
            self.log.debug("%s still unavailable: %s", self.what, err)
        return self.delay

    def ok(self) -> None:
        """Record a successful call: an outage in progress is over."""
        if self.since is None:
            return
        self.log.warning("%s is back after %.1fs (%d failed attempts)", self.what,
                         self.clock() - self.since, self.attempts)
        self.since, self.attempts = None, 0


def enable_stack_dumps() -> None:
    """Acts: on SIGUSR1, write the Python stack of every thread to stderr (the process goes
    on). For a process that is up but makes no progress: what is it waiting for?"""
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)


# A process's caches keep hundreds of thousands of long-lived objects (JSON-shaped maps and
# lists, no reference cycles). With the default thresholds (700, 10, 10) the collector walks
# all of them every few thousand allocations: ~100 ms each time at 5,000 nodes, a third of a
# reconciler's CPU while pods are being created. A young collection walks every container
# allocated since the last one, and in these processes nearly all of them are alive (a
# cache's new pods) and none is in a cycle: at 50,000 nodes an apply's young collections
# took a tenth of each process's CPU and found nothing. So Python starts no collection by
# itself (a young threshold of 0); the process makes full ones itself
# (``collect_between_bursts``): once its log readers have been idle for a second, a minute
# after the last one or as soon as it holds as many new containers as it held after the
# last one, and while busy at the latest every 600 s or once the new containers are four
# times those (``full_collection_due``). The garbage in cycles a process may make between two
# collections is so bounded by the time and by the size of its cache.
GC_THRESHOLDS = (0, 1_000_000_000, 1_000_000_000)


# A process that streams each change as it comes (the API server's watches) wants short pauses
# more than rare ones: every collection stalls every stream for as long as it takes. Young
# collections stay small (the same total work, in shorter steps), and every other one is a
# middle one (a middle threshold of 0), which walks at most two young collections' survivors
# and moves them to the old generation: with the middle threshold at 5, a 5,000-node rollout's
# middle collections walked some 300,000 new objects at once every 1.5 s, stalling every
# watch 20-35 ms each time (5-8 ms now). The collector never starts a full collection by
# itself (one walks every cached object: a few hundred ms at 5,000 nodes); the process makes
# those itself, between bursts (``full_collections``).
STREAMING_GC_THRESHOLDS = (10_000, 0, 1_000_000_000)
FULL_GC_SECONDS = 60.0  # a full collection at least this long after the last one,
FULL_GC_IDLE_SECONDS = 1.0  # once nothing changed for this long,
FULL_GC_MAX_SECONDS = 600.0  # or anyway after this long
FULL_GC_MIN_OBJECTS = 2_000_000  # new containers due for themselves from this many at least


def tune_gc(streaming: bool = False) -> None:
    """Acts: set this process's garbage-collector thresholds for a large cache (``streaming``:
    for one that streams changes). Neither starts a full collection by itself: a process
    makes them, ``collect_between_bursts`` or (the API server) its own loop."""
    gc.set_threshold(*(STREAMING_GC_THRESHOLDS if streaming else GC_THRESHOLDS))


def collect_between_bursts(last_change: Callable[[], float] | None = None,
                           stop: threading.Event | None = None) -> threading.Thread:
    """Acts: a thread making this process's full garbage collections when
    ``full_collection_due`` (``last_change``: the monotonic time of the last change;
    default: when its log readers last read entries), until ``stop`` is set. The containers
    allocated and not freed since the last collection are Python's young count, which no
    collection of its own resets (``GC_THRESHOLDS``)."""
    changed = last_change or (lambda: log_activity.last_entries)
    stopped = stop or threading.Event()

    def loop() -> None:
        # the containers it holds, counted as Python's young count counts them (every one
        # allocated and not freed, tracked or not): from those tracked at the start, each
        # collection's count added and what it freed taken out
        last_full, held = time.monotonic(), len(gc.get_objects())
        while not stopped.wait(FULL_GC_IDLE_SECONDS):
            new = gc.get_count()[0]
            if full_collection_due(time.monotonic(), last_full, changed(), new, held):
                started = time.monotonic()
                found = gc.collect()
                last_full, held = time.monotonic(), max(0, held + new - found)
                logging.getLogger("daemonbus.gc").debug(
                    "full collection: %.0f ms, %d objects in cycles freed, about %d held",
                    (last_full - started) * 1000, found, held)

    thread = threading.Thread(target=loop, name="full-collections", daemon=True)
    thread.start()
    return thread


def full_collection_due(now: float, last_full: float, last_change: float,
                        new: int = 0, held: int = 0) -> bool:
    """Whether a process should make its full collection now (times in seconds of one
    clock; ``new``: the containers allocated and not freed since the last one, ``held``:
    those it held then): a while after the last one or once the new ones are as many as it
    held, while nothing changes; late anyway, or once they are four times as many (an apply
    over every node of a fresh stack may triple a process's cache in one burst). Decides."""
    since = now - last_full
    grown = max(held, FULL_GC_MIN_OBJECTS)
    if since >= FULL_GC_MAX_SECONDS or new >= 4 * grown:
        return True
    return now - last_change >= FULL_GC_IDLE_SECONDS and (since >= FULL_GC_SECONDS
                                                           or new >= grown)


def hung_up(fd: int) -> bool:
    """Has the peer of the connection on ``fd`` closed it (or it failed)? Seen without
    reading it (``POLLRDHUP``), so also while what it sent before waits unread: a relay that
    reads a caller's input only as a command takes it would otherwise not notice the
    caller's going while the command reads none."""
    poll = select.poll()
    poll.register(fd, select.POLLRDHUP)
    return bool(poll.poll(0))


def stop_event() -> threading.Event:
    """An event set on SIGTERM or SIGINT, so loops can finish their batch and exit."""
    ev = threading.Event()

    def _handler(_sig: int, _frame: FrameType | None) -> None:
        ev.set()

    signal.signal(signal.SIGTERM, _handler)
    signal.signal(signal.SIGINT, _handler)
    return ev


def open_store(redis_url: str | None = None, prefix: str | None = None,
               role: str = roles.ADMIN) -> store_client.Store:
    """A store whose commits are authorised as ``role`` (the CLI's: the operator's, admin)."""
    url = config.redis_url(redis_url)
    client = store_client.connect(url)
    return store_client.Store(client, Keys(config.prefix(prefix)), role=role)


# The metrics endpoint listens on loopback unless told otherwise (--metrics-bind): what a
# process exports (its DaemonSets' names and counters) is nobody else's business by default.
METRICS_BIND = "127.0.0.1"
Metrics = tuple[int | None, str]  # (--metrics-port, --metrics-bind)


def serve_metrics(port: int | None, bind: str = METRICS_BIND) -> None:
    """Acts: serve Prometheus metrics on ``bind``:``port`` (nothing without a port)."""
    if port:
        from prometheus_client import start_http_server

        start_http_server(port, addr=bind)
