"""The status-writer process: consume computed DaemonSet status, write `.status` on change.

Reconcilers publish one message per sync on the status stream; writers read it through a
consumer group (any number of replicas; a dead consumer's pending messages are claimed by the
others). Per batch only the newest message of each DaemonSet counts. A write happens only when
the counters differ or observedGeneration is behind (spec §f, storeDaemonSetStatus), and on a
Conflict it reads the DaemonSet again and tries once more.

After a round that wrote, the writer pauses ``status_write_gap_seconds`` (0.1 s) before it
receives again, so the statuses of a busy DaemonSet (a sync for every node added, every pod
made ready) gather into one write for several syncs: each write is a log entry that every
follower decodes and that asks for a sync of the DaemonSet again. A status is written at once
after a quiet spell and at most that much later while syncs come faster.

The writer keeps no position of its own beyond the per-DaemonSet positions of the statuses
it wrote (``Keys.status_positions``), which never pass the log's tip (a message computed
beyond it is refused), so after the log went backwards (``shared.store.logmark``) none holds
back a status of the log that came back. Each round also checks the process's log mark
(what it wrote), so a rewind is logged and the gauges are seeded again from the stored
statuses.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from prometheus_client import Counter, Gauge

from services import common
from shared import settings
from shared.daemonset import conditions as ds_conditions
from shared.daemonset import status as ds_status
from shared.daemonset import unavailable as ds_unavailable
from shared.daemonset.messages import Received, StatusChannel, StatusMessage
from shared.model import meta
from shared.store import adapters, codec, errors
from shared.store.client import Store
from shared.store.statuschannel import RedisStatusChannel, RedisStatusPositions

log = logging.getLogger("status-writer")

GAUGE_REFRESH_SECONDS = 30.0
WRITES = Counter("daemonbus_status_writes_total", "DaemonSet status updates", ["result"])
UNAVAILABLE = Gauge(
    "daemonbus_daemonset_unavailable_pods",
    "Nodes that should run the daemon pod and have none available, by first cause "
    "(shared.daemonset.unavailable: NodeNotReady, NodeUnreachable, NoPod, Terminating, "
    "PodNotBound, PodFailed, CrashLoopBackOff, PodPending, PodNotReady, MinReadySeconds).",
    ["namespace", "daemonset", "reason"])
DEADLINE_EXCEEDED = Gauge(
    "daemonbus_daemonset_progress_deadline_exceeded",
    "1 while the DaemonSet's rollout is past its rollout.daemonbus.io/progress-deadline-seconds "
    "(condition Progressing=False, reason ProgressDeadlineExceeded), else 0.",
    ["namespace", "daemonset"])
GAUGES = {
    name: Gauge(f"kube_daemonset_status_{metric}", help_, ["namespace", "daemonset"])
    for name, metric, help_ in [
        ("currentNumberScheduled", "current_number_scheduled",
         "The number of nodes running at least one daemon pod and are supposed to."),
        ("desiredNumberScheduled", "desired_number_scheduled",
         "The number of nodes that should be running the daemon pod."),
        ("numberAvailable", "number_available",
         "The number of nodes that should be running the daemon pod and have one or more "
         "of the daemon pod running and available"),
        ("numberMisscheduled", "number_misscheduled",
         "The number of nodes running a daemon pod but are not supposed to."),
        ("numberReady", "number_ready",
         "The number of nodes that should be running the daemon pod and have one or more "
         "of the daemon pod running and ready."),
        ("numberUnavailable", "number_unavailable",
         "The number of nodes that should be running the daemon pod and have none of the "
         "daemon pod running and available"),
        ("updatedNumberScheduled", "updated_number_scheduled",
         "The total number of nodes that are running updated daemon pod"),
        ("observedGeneration", "observed_generation",
         "The most recent generation observed by the daemon set controller."),
    ]
}


class StatusWriter:
    def __init__(self, store: Store, consumer: str, claim_idle_ms: int = 10_000,
                 channel: StatusChannel | None = None, write_gap: float | None = None) -> None:
        self.store = store
        self.write_gap = settings.current.status_write_gap_seconds if write_gap is None \
            else write_gap
        self.consumer = consumer
        self.claim_idle_ms = claim_idle_ms
        self.channel = channel if channel is not None else \
            adapters.on(store, RedisStatusChannel)
        self.written = 0
        self.positions = adapters.on(store, RedisStatusPositions)

    def ensure_group(self) -> None:
        self.channel.ensure()

    def run(self, stop: threading.Event) -> None:
        outage = common.Outage(log)
        while not stop.is_set():
            try:
                self.ensure_group()
                outage.ok()
                self.seed_gauges()
                refreshed = time.monotonic()
                while not stop.is_set():
                    written = self.written
                    self.step(block_ms=1000)
                    if self.written != written and self.write_gap > 0:
                        # let the next statuses gather: one write for several syncs
                        stop.wait(self.write_gap)
                    if time.monotonic() - refreshed > GAUGE_REFRESH_SECONDS:
                        self.seed_gauges()
                        refreshed = time.monotonic()
            except common.REDIS_DOWN as err:
                stop.wait(outage.failed(err))
            except (errors.TransportError, errors.StoreError) as err:
                log.warning("redis error: %s; retrying", err)
                stop.wait(1.0)

    def step(self, block_ms: int = 1000, count: int = 1000) -> int:
        """One round: receive, write the newest status of each DaemonSet, mark them done.
        The process's log mark is checked in the commit of each status written, or, in a
        round that writes none, on its own; after a rewind the gauges are seeded again."""
        rewinds = self.store.mark.rewinds
        got = self.channel.receive(self.consumer, count, block_ms, self.claim_idle_ms)
        if not self._write_newest(got):
            adapters.on(self.store, self.store.mark.check)
        if self.store.mark.rewinds != rewinds:
            self.seed_gauges()
        return len(got)

    def _write_newest(self, got: list[Received]) -> int:
        """Acts: write the newest message of each DaemonSet in ``got`` and mark every one
        done; returns how many statuses were written."""
        if not got:
            return 0
        latest: dict[str, StatusMessage] = {}
        for rec in got:
            msg = rec.message
            if msg is None:
                log.error("dropping unreadable status message %s: %s", rec.id, rec.error)
                continue
            # per DaemonSet, the status computed at the newest log position wins — not the
            # last one published: two workers may publish out of position order
            have = latest.get(msg.key)
            if have is None or codec.id_ge(msg.position or "0-0", have.position or "0-0"):
                latest[msg.key] = msg
        written = sum(1 for key, msg in latest.items() if self.write(key, msg))
        self.channel.done([rec.id for rec in got])
        return written

    def claim(self, key: str, position: str) -> bool:
        """Acts: record that the status of ``key`` computed at ``position`` is being written,
        unless a newer one was, or the log has not reached ``position`` (forged: refused and
        logged, nothing recorded)."""
        got = self.positions.claim(key, position)
        if got == -1:
            log.error("status of %s refused: computed at %r, a position the log has not "
                      "reached (forged or corrupt)", key, position)
            WRITES.labels("refused").inc()
        return bool(got == 1)

    def write(self, key: str, msg: StatusMessage | dict[str, Any]) -> bool:
        """storeDaemonSetStatus: skip when nothing changed; at most two updates. The message
        is checked against the stored DaemonSet (uid) and the log (its position) before its
        position is recorded, so a message that is refused leaves no trace."""
        msg = StatusMessage.from_map(msg)
        for attempt in range(2):
            try:
                ds = self.store.try_get("DaemonSet", key)
            except errors.CorruptEntryError as err:
                log.error("status of %s not written: %s", key, err)
                WRITES.labels("unreadable").inc()
                return False
            if ds is None or meta.uid(ds) != msg.uid:
                return False
            if attempt == 0 and not self.claim(key, msg.position):
                return False
            if attempt == 0:
                self._unavailable(ds, msg.unavailable)
            old = ds.get("status") or {}
            new = ds_status.merged_status(old, msg.status, msg.generation, msg.observe)
            if new is None:
                self._gauges(ds, old)
                return False
            try:
                self.store.update_status({**ds, "status": new}, current=ds)
                WRITES.labels("ok").inc()
                self.written += 1
                self._gauges(ds, new)
                return True
            except errors.ConflictError:
                WRITES.labels("conflict").inc()
                continue
            except errors.NotFoundError:
                return False  # deleted since it was read: there is no status to keep
            except errors.InvalidError as err:
                log.error("status of %s refused: %s", key, err)
                WRITES.labels("invalid").inc()
                return False
        return False

    def seed_gauges(self) -> None:
        """Acts: set the gauges of every stored DaemonSet from its stored status, so a
        (re)started writer exports them before the next sync of each one, and drop the
        gauges of DaemonSets that no longer exist (a deleted one publishes no status)."""
        live = set()
        for ds in self.store.list("DaemonSet"):
            self._gauges(ds, ds.get("status") or {})
            live.add((meta.namespace(ds), meta.name(ds)))
        for gauge in (*GAUGES.values(), DEADLINE_EXCEEDED):
            for labels in _label_sets(gauge) - live:
                gauge.remove(*labels)
        for metric in UNAVAILABLE.collect():
            for sample in metric.samples:
                ns, name = sample.labels["namespace"], sample.labels["daemonset"]
                if (ns, name) not in live:
                    UNAVAILABLE.remove(ns, name, sample.labels["reason"])

    def _unavailable(self, ds: dict[str, Any], counts: dict[str, Any]) -> None:
        """The unavailable-pods gauge of ``ds``, one sample per reason (0 when none)."""
        ns, name = meta.namespace(ds), meta.name(ds)
        for reason in ds_unavailable.REASONS:
            count = counts.get(reason)
            UNAVAILABLE.labels(ns, name, reason).set(
                count if isinstance(count, int) and not isinstance(count, bool) else 0)

    def _gauges(self, ds: dict[str, Any], status: dict[str, Any]) -> None:
        ns, name = meta.namespace(ds), meta.name(ds)
        for field_name, gauge in GAUGES.items():
            gauge.labels(ns, name).set(int(status.get(field_name) or 0))
        progressing = ds_conditions.find(ds_conditions.conditions_of(status),
                                         ds_conditions.PROGRESSING)
        DEADLINE_EXCEEDED.labels(ns, name).set(
            int((progressing or {}).get("reason") == ds_conditions.REASON_DEADLINE))


def _label_sets(gauge: Gauge) -> set[tuple[str, str]]:
    """The (namespace, daemonset) label values a gauge currently exports."""
    return {(s.labels["namespace"], s.labels["daemonset"])
            for metric in gauge.collect() for s in metric.samples}
