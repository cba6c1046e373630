"""The watch cache: one tail of the event log per API server process, fanned out in memory
to every watcher (never one Redis read per watcher).

A thread follows the log (``LogReader``, blocking reads) and hands each batch to the event
loop, where ``WatchCache.apply`` folds it into the current objects and a bounded window of
recent events, then offers each event to every subscribed watcher. A watch from position
``rv`` is served from the window: every event after ``rv`` then the live ones. A position
older than the window (or compacted away) cannot be served: ``ExpiredError`` (410 Gone).

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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from shared import settings
from shared.eventlog import fold
from shared.model import meta
from shared.store import codec, errors
from shared.store.client import Store
from shared.store.log import LogReader

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Match = Callable[[Obj], bool]

WINDOW = settings.current.watch_window  # recent events kept for watches that resume
BUFFER = 10_000  # events buffered per watcher (references, not copies) before it is dropped
ENCODED = 8_192  # encoded watch events kept, shared by every watcher that sends them
READ_COUNT = 1_000
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


@dataclass(eq=False)
class Watcher:
    """One client's watch: the events it selects, buffered up to ``BUFFER``."""

    kind: str
    match: Match
    after: str  # deliver events with ids after this position
    queue: asyncio.Queue[tuple[str, Obj] | None] = field(
        default_factory=lambda: asyncio.Queue(BUFFER))
    dropped: str = ""  # why it was closed ("" while open)
    after_pos: tuple[int, int] = (0, 0)  # ``after`` parsed once
    # the window's events after ``after`` when it subscribed, sent before the queue's: a
    # resumed watch is never dropped for its backlog (it would re-watch from the same
    # position, forever), only when it falls behind again by a whole buffer
    backlog: list[tuple[str, Obj]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.after_pos = codec.id_tuple(self.after)

    def offer(self, ev: Event) -> None:
        """Decides which event type (if any) this watcher sees for ``ev``, and queues it."""
        etype = self.event_type(ev)
        if etype:
            self.put((etype, ev.obj))

    def event_type(self, ev: Event) -> str:
        """The event type this watcher sees ``ev`` as ("" = none)."""
        if ev.kind != self.kind or ev.pos <= self.after_pos:
            return ""
        now = self.match(ev.obj)
        before = ev.prev is not None and self.match(ev.prev)
        if ev.type == "ADDED":
            etype = "ADDED" if now else ""
        elif ev.type == "DELETED":
            etype = "DELETED" if now or before else ""
        elif now:
            etype = "MODIFIED" if before else "ADDED"
        else:
            etype = "DELETED" if before else ""
        return etype

    def put(self, item: tuple[str, Obj]) -> None:
        if self.dropped:
            return
        try:
            self.queue.put_nowait(item)
        except asyncio.QueueFull:
            self.close("too slow: its buffer of events is full")

    def close(self, why: str) -> None:
        """End this watch (the stream ends; the client re-watches)."""
        if self.dropped:
            return
        self.dropped = why
        while not self.queue.empty():
            self.queue.get_nowait()
        self.queue.put_nowait(None)


class WatchCache:
    """Current objects of every kind, recent events, and the watchers they are fanned to.
    Every method but ``start`` and ``stop`` runs on the event loop's thread."""

    def __init__(self, store: Store, kinds: tuple[str, ...], window: int = WINDOW) -> None:
        self.store = store
        self.kinds = kinds
        self.events: collections.deque[Event] = collections.deque(maxlen=window)
        self.view: fold.View[Obj] = fold.View(kinds)  # the objects, by the log's one fold
        self.position = "0-0"  # the newest log id folded in
        self.oldest = "0-0"  # every event after this position is in ``events``
        self.watchers: set[Watcher] = set()
        # an event is encoded once however many watchers send it (key: object version,
        # event type and how it is rendered)
        self.encoded: collections.OrderedDict[tuple[str, ...], bytes] = \
            collections.OrderedDict()
        self.ready = asyncio.Event()
        self._progress: list[asyncio.Future[None]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

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
        assert self._loop is not None
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
                    self._loop.call_soon_threadsafe(self._reset, tip, objs)
                    reader = LogReader(self.store.r, self.store.keys, tip, name="apiserver",
                                       mark=self.store.mark)
                assert reader is not None
                batch = reader.read(count=READ_COUNT, block_ms=BLOCK_MS)
                if stale():
                    continue
                position = reader.position
                self._loop.call_soon_threadsafe(self.apply, batch, position)
            except errors.UnavailableError as err:
                log.warning("watch cache: %s; retrying", err)
                self._stop.wait(1.0)
            except RuntimeError:  # the event loop closed under us: the server is stopping
                return

    # ---- on the loop -----------------------------------------------------------------------

    def _reset(self, tip: str, objs: dict[str, list[Obj]]) -> None:
        for w in list(self.watchers):
            w.close("expired: the log was compacted past the cache or went backwards")
        self.watchers.clear()
        self.events.clear()
        self.view = fold.View(self.kinds, tip)
        for kind in self.kinds:
            for obj in objs.get(kind, []):
                self.view.put(kind, meta.key(obj), obj)
        self.position = self.oldest = tip
        self.ready.set()
        self._wake()

    def apply(self, batch: list[codec.Entry], position: str) -> None:
        """Fold a batch of log entries in and offer each change to every watcher."""
        view = self.view
        for entry in batch:
            changed, prev = view.apply(entry.id, entry.type, entry.kind, entry.key, entry.obj)
            if not changed:
                continue
            if len(self.events) == self.events.maxlen:
                self.oldest = self.events[0].id
            ev = Event(entry.id, entry.type, entry.kind, entry.key, entry.obj, prev)
            self.events.append(ev)
            for w in list(self.watchers):
                w.offer(ev)
                if w.dropped:
                    self.watchers.discard(w)
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
        """The cached objects of ``kind`` that ``match`` selects, sorted by key."""
        objs = self.objects.get(kind, {})
        return [objs[k] for k in sorted(objs) if match(objs[k])]

    def subscribe(self, kind: str, match: Match, after: str) -> Watcher:
        """A watcher of ``kind`` getting every selected event after position ``after``:
        first those still in the window, then live ones. Raises ExpiredError when events
        after ``after`` have left the window."""
        if codec.id_tuple(after) < codec.id_tuple(self.oldest):
            raise ExpiredError(after, self.oldest)
        w = Watcher(kind, match, after)
        # the first event after ``after``, found by bisection (the window is in log order):
        # a scan of the whole window per resumed watch stalls every other watcher
        start = bisect.bisect_right(self.events, w.after_pos, key=lambda e: e.pos)
        for ev in itertools.islice(self.events, start, None):
            etype = w.event_type(ev)
            if etype:
                w.backlog.append((etype, ev.obj))
        self.watchers.add(w)
        return w

    def unsubscribe(self, w: Watcher) -> None:
        self.watchers.discard(w)
