"""The watch cache: one tail of the event log per API server process, fanned out in memory
to every watcher (never one Redis read per watcher).

A thread follows the log (``LogReader.read``, blocking reads: the entries decoded and
validated on the thread) and hands each batch to the event loop (batches that arrive while
the loop is busy are handed over together), where ``WatchCache.apply`` folds them into the
current objects and a bounded window of recent events, then fans them out. Decoding on the
loop instead (``LogReader.fetch`` on the thread, ``decode`` on the loop) put a burst's
decoding and its writes to the watchers one after the other: on the quiet machine, bursts of
50 pods to 50 watchers were delivered p50 0.7-1.4 s after their commit against 61-75 ms with
the decoding on the thread (``ops/results/watch-lag.md``). Watchers of one
kind, selection and rendering share a ``Feed``: each event is matched and encoded once per
feed, and the run of events a batch brings is joined once into the bytes every watcher of
the feed writes. The feed writes them to each watcher's connection itself (``Watcher.send``)
while that connection keeps up, so the cost per watcher and batch is one write, without a
wake-up of the watch's task; a watcher whose connection is behind buffers the runs, and its
task writes them in order, before any further run goes to the connection. Waking 50 watch
tasks per event, each to make its one write, cost the API server about 70 µs of CPU per
watcher and event against about 45 µs (one event at a time, 50 watchers, TLS;
``ops/results/watch-lag.md``). A watch from position ``rv`` is served from the window:
every event after ``rv`` then the live ones. A position older than the window (or compacted
away) cannot be served: ``ExpiredError`` (410 Gone).

A watcher's buffer is bounded: a watcher too slow to drain it is closed (the client
re-watches from its last position), never grown. The cache holds every object of the
served kinds, so a MODIFIED event knows the object before it and a filtered watch gets
ADDED / DELETED when an object enters or leaves its selection, as upstream's cacher does.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import itertools
import logging
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from shared import settings
from shared.api.namespaces import Namespaces
from shared.eventlog import fold
from shared.model import meta
from shared.store import adapters, codec, errors
from shared.store.client import Store
from shared.store.log import LogReader, redis_reader

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Match = Callable[[Obj], bool]
Encode = Callable[[str, Obj], bytes]  # (event type, object) → the event as the client gets it

WINDOW = settings.current.watch_window  # recent events kept for watches that resume
BUFFER = 10_000  # events waiting per watcher (shared bytes, not copies) before it is dropped
ENCODED = 8_192  # encoded watch events kept, shared by every feed that sends them
# a watcher writes at most about this much at once, from its buffer or as the feed fans a batch
# out (``Feed.fan_out``): asyncio's transports (3.11) move what a send left over to the front
# of their buffer, so a client slower than the server made 1 MiB writes cost the server twice
# the CPU of 256 KiB ones (measured over TLS), and batches of tens of megabytes four times
WRITE_BYTES = 256 << 10
READ_COUNT = 200  # entries per read of the log: the first of a large commit go out early
BLOCK_MS = 1_000


class ExpiredError(Exception):
    """The position asked for is older than the cache's window (or was compacted away):
    the client must list again. Retrying the same position cannot help."""

    def __init__(self, rv: str, oldest: str) -> None:
        self.rv, self.oldest = rv, oldest
        super().__init__(f"too old resource version: {rv} ({oldest})")


@dataclass(frozen=True)
class Event:
    """One change of one object, as the log recorded it, with the object before it."""

    id: str
    type: str  # ADDED | MODIFIED | DELETED
    kind: str
    key: str
    obj: Obj
    prev: Obj | None
    pos: tuple[int, int] = field(default=(0, 0), compare=False)  # ``id`` parsed once

    def __post_init__(self) -> None:
        object.__setattr__(self, "pos", codec.id_tuple(self.id))


def event_type(ev: Event, match: Match) -> str:
    """The event type a watch selecting ``match`` sees ``ev`` as ("" = none): an object
    entering the selection is ADDED, one leaving it DELETED, as upstream's cacher. Decides."""
    now = match(ev.obj)
    before = ev.prev is not None and match(ev.prev)
    if ev.type == "ADDED":
        return "ADDED" if now else ""
    if ev.type == "DELETED":
        return "DELETED" if now or before else ""
    if now:
        return "MODIFIED" if before else "ADDED"
    return "DELETED" if before else ""


def event_object(ev: Event, etype: str) -> Obj:
    """The object a watcher gets with ``ev`` seen as ``etype``: one that left its selection
    is DELETED with its content before the change, at the change's resourceVersion (as
    upstream's cacher: the watcher never saw the new content)."""
    if etype == "DELETED" and ev.type != "DELETED" and ev.prev is not None:
        return {**ev.prev, "metadata": {**(ev.prev.get("metadata") or {}),
                                        "resourceVersion": ev.id}}
    return ev.obj


class Feed:
    """The watchers of one kind, selection and rendering: an event is matched and encoded
    once for all of them, and the run of events of one batch joined once into the bytes
    each of them writes."""

    def __init__(self, key: Hashable, kind: str, match: Match, encode: Encode) -> None:
        self.key, self.kind, self.match, self.encode = key, kind, match, encode
        self.watchers: set[Watcher] = set()

    def fan_out(self, evs: list[Event]) -> None:
        """Offer ``evs`` (this feed's kind, in log order) to every watcher of the feed, in
        pieces of about ``WRITE_BYTES``: a watcher is never handed one write of a whole large
        batch. After the server fell behind (a pause, a burst), a batch holds megabytes per
        watcher, and every copy on the way to the socket (the chunk's framing, encryption,
        the transport's buffer) of tens of megabytes cost four times the CPU per byte of the
        same bytes in pieces that stay in the processor's cache: the server fell further
        behind with every batch and did not catch up until the writes stopped."""
        run: list[tuple[tuple[int, int], bytes]] = []
        for ev in evs:
            etype = event_type(ev, self.match)
            if etype:
                run.append((ev.pos, self.encode(etype, event_object(ev, etype))))
        if not run:
            return
        watchers = list(self.watchers)
        start, size = 0, 0
        for i, (_pos, data) in enumerate(run, 1):
            size += len(data)
            if size >= WRITE_BYTES or i == len(run):
                self._offer(watchers, run[start:i])
                start, size = i, 0

    @staticmethod
    def _offer(watchers: list[Watcher], piece: list[tuple[tuple[int, int], bytes]]) -> None:
        first, last = piece[0][0], piece[-1][0]
        joined = b""
        for w in watchers:
            if w.after_pos < first:
                joined = joined or b"".join(data for _pos, data in piece)
                w.push(joined, len(piece))
            elif w.after_pos < last:  # a watch from a position the cache had not reached
                part = [data for pos, data in piece if pos > w.after_pos]
                w.push(b"".join(part), len(part))


@dataclass(eq=False)
class Watcher:
    """One client's watch: the encoded events waiting to be written, up to ``limit``."""

    feed: Feed
    after: str  # deliver events with ids after this position
    limit: int = BUFFER
    dropped: str = ""  # why it was closed ("" while open)
    after_pos: tuple[int, int] = (0, 0)  # ``after`` parsed once
    # the window's events after ``after`` when it subscribed, sent before the buffer's: a
    # resumed watch is never dropped for its backlog (it would re-watch from the same
    # position, forever), only when it falls behind again by a whole buffer
    backlog: list[tuple[str, Obj]] = field(default_factory=list)
    pending: collections.deque[tuple[bytes, int]] = field(default_factory=collections.deque)
    count: int = 0  # events in ``pending``
    # writes a run of events to the client at once, or returns False when its connection
    # cannot take it now (see ``push``); None while the watch's task writes everything
    send: Callable[[bytes], bool] | None = None
    # set when something is pending, the watch is dropped, or ``_timer`` fired
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    # the timer ending a ``wait``, kept across waits (see there)
    _timer: asyncio.TimerHandle | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.after_pos = codec.id_tuple(self.after)

    @property
    def kind(self) -> str:
        return self.feed.kind

    def push(self, data: bytes, events: int) -> None:
        """Write ``data`` (``events`` encoded events) now, through ``send``, when nothing
        is buffered before it and the connection takes it; else buffer it for the watch's
        task to write. A watcher whose buffer would pass ``limit`` is closed instead."""
        if self.dropped:
            return
        if not self.pending and self.send is not None and self.send(data):
            return
        if self.count + events > self.limit:
            self.close("too slow: its buffer of events is full")
            return
        self.pending.append((data, events))
        self.count += events
        self.ready.set()

    def take(self, max_bytes: int = WRITE_BYTES) -> bytes:
        """What to write next: buffered bytes (at least one run, then up to ``max_bytes``)."""
        out: list[bytes] = []
        size = 0
        while self.pending and (not out or size + len(self.pending[0][0]) <= max_bytes):
            data, events = self.pending.popleft()
            out.append(data)
            size += len(data)
            self.count -= events
        if not self.pending and not self.dropped:
            self.ready.clear()
        return b"".join(out)

    async def wait(self, timeout: float) -> bool:
        """Wait until something is buffered or the watch is closed (True), or ``timeout``.
        One timer per watcher ends its waits: kept from one wait to the next and moved only
        when a wait must end sooner than it fires (one that fires early is set again for the
        wait then running). A timeout made and cancelled per wait (``asyncio.timeout``) cost
        13 µs a wake-up against 4 µs without one, and a watcher wakes once per batch."""
        loop = asyncio.get_running_loop()
        until = loop.time() + timeout
        while not (self.pending or self.dropped):
            if self._timer is None or self._timer.when() > until:
                self.stop_timer()
                self._timer = loop.call_at(until, self._time_up)
            self.ready.clear()
            await self.ready.wait()
            if not (self.pending or self.dropped) and loop.time() >= until:
                return False
        return True

    def _time_up(self) -> None:
        self._timer = None
        self.ready.set()

    def stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def close(self, why: str) -> None:
        """End this watch (the stream ends; the client re-watches)."""
        if self.dropped:
            return
        self.dropped = why
        self.pending.clear()
        self.count = 0
        self.ready.set()


class WatchCache:
    """Current objects of every kind, recent events, and the watchers they are fanned to.
    Every method but ``start``, ``stop`` and the tail's runs on the event loop's thread."""

    def __init__(self, store: Store, kinds: tuple[str, ...], window: int = WINDOW) -> None:
        self.store = store
        self.kinds = kinds
        self.events: collections.deque[Event] = collections.deque(maxlen=window)
        self.view: fold.View[Obj] = fold.View(kinds)  # the objects, by the log's one fold
        self.namespaces = Namespaces()  # what lives in each namespace, counted as it folds
        self.position = "0-0"  # the newest log id folded in
        self.last_change = time.monotonic()  # when the last change was fanned out
        self.oldest = "0-0"  # every event after this position is in ``events``
        self.watchers: set[Watcher] = set()
        self.feeds: dict[Hashable, Feed] = {}
        # an event is encoded once however many feeds send it (key: object version, event
        # type and how it is rendered)
        self.encoded: collections.OrderedDict[tuple[str, ...], bytes] = \
            collections.OrderedDict()
        self.ready = asyncio.Event()
        self.unavailable: str | None = None  # why the tail's last read failed, if it did
        self._progress: list[asyncio.Future[None]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # what the tail handed over and the loop has not taken yet, in log order
        self._inbox: list[tuple[str, Any, Any]] = []
        self._inbox_lock = threading.Lock()
        self._posted = False  # a ``_take_inbox`` is scheduled on the loop

    @property
    def objects(self) -> dict[str, dict[str, Obj]]:
        """kind → key → object (read only: the fold writes it)."""
        return self.view.objects

    # ---- the tail (a thread) -------------------------------------------------------------

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._follow, name="watch-cache", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _follow(self) -> None:
        """Acts: list once, then follow the log from that position; relist after a gap
        (the log compacted past our position) or when the log went backwards below what we
        read (``shared.store.logmark``: a restored or replaced Redis), which expires every
        open watch."""
        reader: LogReader | None = None
        rewinds = 0  # the process' rewinds (its mark, shared with its commits) listed after

        def stale() -> bool:
            return reader is None or reader.gap or reader.rewound \
                or self.store.mark.rewinds != rewinds

        while not self._stop.is_set():
            try:
                if stale():
                    tip, objs = self.store.snapshot(list(self.kinds))  # checks the mark too
                    rewinds = self.store.mark.rewinds
                    self._post("reset", tip, objs)
                    # only the served kinds' entries are decoded: the decision records
                    # (megabytes per sync at scale) and other kinds are passed over
                    reader = adapters.on(self.store, redis_reader, tip, name="apiserver",
                                         mark=self.store.mark, kinds=self.kinds,
                                         decisions=False)
                assert reader is not None
                batch = reader.read(count=READ_COUNT, block_ms=BLOCK_MS)
                self.unavailable = None
                if stale():
                    continue
                self._post("apply", batch, reader.position)
            except errors.UnavailableError as err:
                self.unavailable = str(err)
                log.warning("watch cache: %s; retrying", err)
                self._stop.wait(1.0)
            except RuntimeError:  # the event loop closed under us: the server is stopping
                return

    def _post(self, what: str, a: Any, b: Any) -> None:
        """Hand a reset or a batch to the loop (on the tail's thread). What arrives while
        the loop has not taken the last hand-over yet joins it: one wake-up of the loop,
        and one fan-out, for all of it."""
        assert self._loop is not None
        with self._inbox_lock:
            self._inbox.append((what, a, b))
            if self._posted:
                return
            self._posted = True
        self._loop.call_soon_threadsafe(self._take_inbox)

    # ---- on the loop -----------------------------------------------------------------------

    def _take_inbox(self) -> None:
        with self._inbox_lock:
            items, self._inbox = self._inbox, []
            self._posted = False
        batch: list[codec.Entry] = []
        position = ""
        for what, a, b in items:
            if what == "reset":
                if position:
                    self.apply(batch, position)
                batch, position = [], ""
                self._reset(a, b)
            else:
                batch.extend(a)
                position = b
        if position:
            self.apply(batch, position)

    def _reset(self, tip: str, objs: dict[str, list[Obj]]) -> None:
        for w in list(self.watchers):
            w.close("expired: the log was compacted past the cache or went backwards")
        self.watchers.clear()
        self.feeds.clear()
        self.events.clear()
        self.view = fold.View(self.kinds, tip)
        for kind in self.kinds:
            for obj in objs.get(kind, []):
                self.view.put(kind, meta.key(obj), obj)
        self.namespaces.reset(objs)
        self.position = self.oldest = tip
        self.ready.set()
        self._wake()

    def apply(self, batch: list[codec.Entry], position: str) -> None:
        """Fold a batch of log entries in and fan the changes out to every feed."""
        view = self.view
        fresh: dict[str, list[Event]] = {}
        for entry in batch:
            changed, prev = view.apply(entry.id, entry.type, entry.kind, entry.key, entry.obj)
            if not changed:
                continue
            # a Namespace's own entry is its event as served (namespaces.Namespaces.change)
            new = [] if entry.kind == "Namespace" else \
                [Event(entry.id, entry.type, entry.kind, entry.key, entry.obj, prev)]
            made = self.namespaces.change(entry.id, entry.type, entry.kind, entry.key,
                                          entry.obj, prev)
            if made is not None:  # a namespace that comes to exist, changes or ends
                new.append(Event(entry.id, made[0], "Namespace", "/" + meta.name(made[1]),
                                 made[1], made[2]))
            for ev in new:
                if len(self.events) == self.events.maxlen:
                    self.oldest = self.events[0].id
                self.events.append(ev)
                fresh.setdefault(ev.kind, []).append(ev)
        if fresh:
            self.last_change = time.monotonic()
            for feed in list(self.feeds.values()):
                evs = fresh.get(feed.kind)
                if evs:
                    feed.fan_out(evs)
                    for w in [w for w in feed.watchers if w.dropped]:
                        self.unsubscribe(w)
        if codec.id_tuple(position) > codec.id_tuple(self.position):
            self.position = position
        self._wake()

    def _wake(self) -> None:
        for fut in self._progress:
            if not fut.done():
                fut.set_result(None)
        self._progress.clear()

    async def wait_for(self, rv: str, timeout: float) -> bool:
        """Wait until the cache has folded in the log through ``rv`` (True), or ``timeout``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        await asyncio.wait_for(self.ready.wait(), timeout)
        while codec.id_tuple(self.position) < codec.id_tuple(rv):
            left = deadline - loop.time()
            if left <= 0:
                return False
            fut: asyncio.Future[None] = loop.create_future()
            self._progress.append(fut)
            try:
                await asyncio.wait_for(fut, left)
            except TimeoutError:
                return False
        return True

    def encode(self, key: tuple[str, ...], make: Callable[[], bytes]) -> bytes:
        """The encoding of ``key``, made once (by ``make``) and kept for a while."""
        data = self.encoded.get(key)
        if data is None:
            data = self.encoded[key] = make()
            if len(self.encoded) > ENCODED:
                self.encoded.popitem(last=False)
        return data

    def current(self, kind: str, match: Match) -> list[Obj]:
        """The cached objects of ``kind`` that ``match`` selects, sorted by key (Namespaces:
        those something lives in, and the four built-in ones)."""
        if kind == "Namespace":
            return [o for o in self.namespaces.objects() if match(o)]
        objs = self.objects.get(kind, {})
        return [objs[k] for k in sorted(objs) if match(objs[k])]

    def subscribe(self, kind: str, match: Match, encode: Encode, after: str,
                  feed_key: Hashable = None) -> Watcher:
        """A watcher of ``kind`` getting every event ``match`` selects after position
        ``after``, encoded by ``encode``: first those still in the window (its backlog),
        then live ones. Watchers with one ``feed_key`` (not None) share a feed, so their
        ``match`` and ``encode`` must be the same. Raises ExpiredError when events after
        ``after`` have left the window."""
        if codec.id_tuple(after) < codec.id_tuple(self.oldest):
            raise ExpiredError(after, self.oldest)
        feed = self.feeds.get(feed_key) if feed_key is not None else None
        if feed is None:
            feed = Feed(feed_key if feed_key is not None else object(), kind, match, encode)
        w = Watcher(feed, after)
        # the first event after ``after``, found by bisection (the window is in log order):
        # a scan of the whole window per resumed watch stalls every other watcher
        start = bisect.bisect_right(self.events, w.after_pos, key=lambda e: e.pos)
        for ev in itertools.islice(self.events, start, None):
            if ev.kind == kind:
                etype = event_type(ev, feed.match)
                if etype:
                    w.backlog.append((etype, event_object(ev, etype)))
        feed.watchers.add(w)
        self.feeds[feed.key] = feed
        self.watchers.add(w)
        return w

    def unsubscribe(self, w: Watcher) -> None:
        w.stop_timer()
        self.watchers.discard(w)
        feed = w.feed
        feed.watchers.discard(w)
        if not feed.watchers and self.feeds.get(feed.key) is feed:
            del self.feeds[feed.key]
