"""The watcher process: tail the event log, run the event handlers, feed the workqueue.

One watcher is active at a time (a Redis leader lease); others stand by and take over when
the lease lapses. The active one writes each batch's effects — expectations deleted and
lowered, keys enqueued, and its log position (the cursor) — in one atomic call fenced by the
lease (``shared.store.watcher_batch``): a batch is written entirely or not at all, and a
watcher that lost its lease (paused while a stand-by took over) writes nothing and stands by.
So a restarted or new watcher resumes exactly where the last written batch ended: entries
between the cursor and the tip are replayed through the handlers with their previous state
unknown (handlers then enqueue conservatively and never observe an expectation twice), and
every DaemonSet is enqueued once, as an informer's initial list does. After that every
DaemonSet is queued for a full sync again once each resync period (upstream's informer
resync: kube-controller-manager draws it between ``--min-resync-period``, 12 h, and twice
that; here ``min_resync_seconds``), so a sync lost for any reason is made up for within it.

When the log goes backwards below what the watcher read (``shared.store.logmark``: a
truncated append-only file, a restored or replaced Redis), the queue adds and expectation
observations of the lost part are gone with it, and the stored cursor may name a lost entry.
The watcher then starts afresh as a restarted upstream controller does: it lists again, drops
the expectations of every DaemonSet, queues every DaemonSet and stores the cursor at the tip.
"""

from __future__ import annotations

import logging
import random
import threading
import time

from prometheus_client import Counter, Gauge

from services import common
from services.watcher import handlers
from shared import settings
from shared.control.protocols import LeaderLease
from shared.eventlog.ports import Cursor
from shared.model import meta, podutil
from shared.store import adapters, codec
from shared.store.cache import Cache, Change
from shared.store.client import Store
from shared.store.eventlog import RedisCursor
from shared.store.log import redis_reader
from shared.store.watcher_batch import NotLeader, RedisWatcherBatch

log = logging.getLogger("watcher")

EVENTS = Counter("daemonbus_watcher_events_total", "Log entries handled", ["kind", "type"])
ENQUEUED = Counter("daemonbus_watcher_enqueued_total", "DaemonSet keys added to the workqueue")
POSITION_LAG = Gauge("daemonbus_watcher_lag_entries", "Entries read in the last batch")
LEADER = Gauge("daemonbus_watcher_leader", "1 while this watcher holds the lease")

KINDS = ["DaemonSet", "Node", "Pod", "ControllerRevision"]
ROLE = "watcher"  # the lease's role (as services.runner takes it) and the cursor's reader

# The leader lease: renewed every LEASE_SECONDS / 4 and checked by stand-bys every
# STANDBY_POLL seconds, so a stand-by takes over at most LEASE_SECONDS + STANDBY_POLL after
# the leader died (< 10 s), at once when it stopped cleanly (it releases the lease).
LEASE_SECONDS = settings.current.leader_lease_seconds
STANDBY_POLL = 0.5
# A batch that asks for nothing (a decision record, a change no handler cares about) writes
# nothing, not even the cursor, unless the cursor was last written this long ago: a restart
# replays those entries, which ask for nothing (or, their previous state unknown, for a full
# sync of what every restart syncs anyway). A batch that asks for syncs alone (no
# expectation deleted or lowered) writes its adds but leaves the cursor as it is, for the
# same reason: a restart replays it, adding keys that a restart queues for a full sync
# anyway. A batch that changes expectations always moves the cursor with them, so a replay
# never observes a creation or deletion twice. Once the log is idle that long, the cursor is
# written up to where the watcher read.
CURSOR_EVERY = 1.0


def _ds_by_namespace(obj: dict) -> list[str]:  # type: ignore[type-arg]
    return [meta.namespace(obj)]


def _pod_by_target_node(obj: dict) -> list[str]:  # type: ignore[type-arg]
    node = podutil.target_node(obj)
    return [node] if node else []


class Watcher:
    def __init__(self, store: Store, lease: LeaderLease,
                 renew_every: float = LEASE_SECONDS / 4, cursor: Cursor | None = None,
                 resync_every: float | None = None) -> None:
        """``resync_every``: seconds between the full syncs of every DaemonSet (None:
        drawn between ``min_resync_seconds`` and twice it)."""
        self.store = store
        self.resync_every = resync_every if resync_every is not None else \
            settings.current.min_resync_seconds * (1.0 + random.random())
        self._resync_at = time.monotonic() + self.resync_every
        self.lease = lease
        self.renew_every = renew_every
        self.cache = Cache(store, KINDS, name="watcher", decisions=False,
                           indexes={"ns": ("DaemonSet", _ds_by_namespace),
                                    "node": ("Pod", _pod_by_target_node)})
        self.dss = handlers.DaemonSets(
            get=lambda k: self.cache.get("DaemonSet", k),
            in_namespace=lambda ns: self.cache.by_index("ns", ns),
            all_=lambda: self.cache.objects["DaemonSet"].values(),
            pods_on=lambda node: self.cache.by_index("node", node),
        )
        # where the last batch left off (moved by each batch, below; read at start)
        self.cursor = cursor if cursor is not None else adapters.on(store, RedisCursor, ROLE)
        # the workqueue, expectations and cursor, written in one script per batch
        self.batch = adapters.on(store, RedisWatcherBatch, lease.holder, lease_role=ROLE,
                                 cursor_reader=ROLE)
        self._renewed = time.monotonic()
        self._cursor_written = 0.0  # monotonic time the cursor was last written
        self._cursor_behind = False  # a batch since then left the cursor behind
        self._rewinds = store.mark.rewinds

    # ---- the process ---------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        outage = common.Outage(log)
        standing_by = False
        while not stop.is_set():
            try:
                acquired = self.lease.acquire()
                outage.ok()
                if not acquired:
                    LEADER.set(0)
                    if not standing_by:
                        log.info("standing by: another watcher holds the lease")
                        standing_by = True
                    stop.wait(STANDBY_POLL)
                    continue
                standing_by = False
                LEADER.set(1)
                log.info("holding the watcher lease as %s", self.lease.holder)
                self.lead(stop)
            except common.REDIS_DOWN as err:
                LEADER.set(0)
                stop.wait(outage.failed(err))
            except Exception as err:  # the redis client raises its own errors too
                log.exception("watcher loop failed: %s; restarting it", err)
                stop.wait(1.0)
        LEADER.set(0)
        try:
            self.lease.release()
        except Exception:
            pass

    def lead(self, stop: threading.Event) -> None:
        """Process the log while we hold the lease."""
        self._renewed = time.monotonic()
        if not self.start():
            return
        while not stop.is_set():
            if not self._keep_lease() or not self.step(block_ms=500):
                return

    def _keep_lease(self) -> bool:
        """Renew the lease when a renewal is due; False (stand by) once it is lost."""
        if time.monotonic() - self._renewed < self.renew_every:
            return True
        if not self.lease.renew():
            self._stand_by("lost the watcher lease")
            return False
        self._renewed = time.monotonic()
        return True

    @staticmethod
    def _stand_by(why: str, *args: object) -> None:
        log.warning(why + "; standing by", *args)
        LEADER.set(0)

    def start(self) -> bool:
        """Sync the cache and catch up from the stored cursor: the entries between the cursor
        and the tip go through the handlers (previous state unknown), then every DaemonSet is
        enqueued. False when the lease was lost on the way (nothing of it written then).
        After the log went backwards, no replay: every DaemonSet starts afresh (see above)."""
        tip = self.cache.sync()  # after a rewind it is its listing that notices
        # a listing may outlast the lease (50,000 nodes on a busy machine took longer than
        # its 8 s, and every batch after it was refused: list, stand by, list again for
        # ever); it only read, so take the lease again if it lapsed, or stand by if another
        # watcher has it now
        if not self.lease.acquire():
            self._stand_by("another watcher took the lease while this one listed")
            return False
        self._renewed = time.monotonic()
        rewound = self.store.mark.rewinds != self._rewinds
        self._rewinds = self.store.mark.rewinds
        cursor = self.cursor.get()
        reaction = handlers.Reaction()
        if rewound:
            log.warning("the log went backwards: dropping the expectations of every DaemonSet "
                        "and queueing them all (cursor %s, tip %s)", cursor, tip)
            reaction.delete_expectations.update(self.cache.objects["DaemonSet"].keys())
        elif cursor is not None and not codec.id_ge(cursor, tip):
            reader = adapters.on(self.store, redis_reader, cursor, name="watcher-replay")
            while not codec.id_ge(reader.position, tip):
                before = reader.position
                entries = reader.read(count=5000)
                if reader.position == before:
                    break  # nothing left below the tip (trimmed): the relist covers it
                for e in entries:
                    if codec.id_tuple(e.id) > codec.id_tuple(tip):
                        break
                    if e.type != "DECISION":
                        handlers.react(reaction, self.dss, e.kind, e.type, None, e.obj)
                if not self._keep_lease():
                    return False
            if getattr(reader, "gap", False):
                # observations in the trimmed part are lost: start every DaemonSet with no
                # expectations, as a restarted upstream controller does (safe: syncs read
                # state at least as new as their hand-out, and creation is idempotent)
                log.warning("the log was compacted past the cursor %s: dropping the "
                            "expectations of every DaemonSet", cursor)
                reaction.delete_expectations.update(self.cache.objects["DaemonSet"].keys())
            log.info("replayed log from %s to %s", cursor, tip)
        reaction.enqueue.update(self.cache.objects["DaemonSet"].keys())
        self._resync_at = time.monotonic() + self.resync_every
        return self.apply(reaction, tip)

    def step(self, block_ms: int = 500) -> bool:
        """Handle the next batch of log changes, if any, or queue every DaemonSet when a
        resync is due; False when the lease was lost."""
        if time.monotonic() >= self._resync_at:
            return self.resync()
        changes = self.cache.poll(count=5000, block_ms=block_ms)
        if self.store.mark.rewinds != self._rewinds:
            return self.start()  # the changes of a relist after a rewind: start afresh
        if not changes:
            if self._cursor_behind and time.monotonic() - self._cursor_written >= CURSOR_EVERY:
                # idle with batches left unwritten (they asked for nothing): the cursor
                # catches up, so a restart does not replay them and readers of the cursor
                # see that they were handled
                return self.apply(handlers.Reaction(), self.cache.position)
            return True
        return self.handle(changes)

    def resync(self) -> bool:
        """Queue every DaemonSet the cache holds for a full sync (upstream's informers
        deliver each object again as an update, and the DaemonSet handler queues it); the
        cursor stays where it is. False when the lease was lost."""
        self._resync_at = time.monotonic() + self.resync_every
        reaction = handlers.Reaction()
        reaction.enqueue.update(self.cache.objects["DaemonSet"].keys())
        log.info("resync: queueing all %d DaemonSets for a full sync (every %.0f s)",
                 len(reaction.enqueue), self.resync_every)
        return reaction.empty() or self.apply(reaction, None)

    def handle(self, changes: list[Change]) -> bool:
        reaction = handlers.Reaction()
        # the events counted once a batch (prometheus' labels() for each entry: 1.7 % of CPU)
        counted: dict[tuple[str, str], int] = {}
        for ch in changes:
            if ch.type == "DECISION":
                continue
            counted[ch.kind, ch.type] = counted.get((ch.kind, ch.type), 0) + 1
            handlers.react(reaction, self.dss, ch.kind, ch.type, ch.old, ch.new)
        for (kind, etype), n in counted.items():
            EVENTS.labels(kind, etype).inc(n)
        POSITION_LAG.set(len(changes))
        if time.monotonic() - self._cursor_written < CURSOR_EVERY:
            if reaction.empty():
                self._cursor_behind = True
                return True
            if not (reaction.observe or reaction.delete_expectations):
                return self.apply(reaction, None)  # syncs alone: the cursor stays behind
        return self.apply(reaction, self.cache.position)

    def apply(self, reaction: handlers.Reaction, position: str | None) -> bool:
        """Write the batch's effects and the cursor ``position`` (None: left behind, see
        ``CURSOR_EVERY``) in one atomic call, only while we hold the lease: expectations
        deleted, then lowered, then the keys added (now or after their delay), then the
        cursor. A crash leaves the batch written entirely or not at all, so the replay from
        the cursor observes no creation or deletion twice. False, with nothing written,
        when the lease is no longer ours: the caller stands by."""
        hints = reaction.hints()
        result = self.batch.apply(
            position,
            delete_expectations=reaction.delete_expectations,
            observe=reaction.observe,
            enqueue=sorted(reaction.enqueue),
            enqueue_after=reaction.enqueue_after,
            enqueue_nodes=hints,
        )
        if position is None:
            self._cursor_behind = True
        else:
            self._cursor_written = time.monotonic()
            self._cursor_behind = False
        if isinstance(result, NotLeader):
            self._stand_by("the watcher lease is held by %s, not us: a batch up to %s was "
                           "not written", result.holder or "nobody", position)
            return False
        if not result.queue_shut_down:  # a shut-down queue ignores adds: none to count
            ENQUEUED.inc(len(reaction.enqueue) + len(hints))
        return True
