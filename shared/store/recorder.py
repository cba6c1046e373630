"""client-go's event recorder over the store: every Event a process records passes its
correlator (``shared.model.events.Correlator``) before it is written. A repeat counts on the
Event written first (``x5 over 2m``), ten that differ only by message are combined, and each
object has a burst of 25 Events, then one per 5 minutes: a DaemonSet whose pods cannot be
created, or a crash-looping container, would otherwise write one for every retry for as
long as it lasts, and a DaemonSet fanning out to 50,000 nodes one per batch of creates.

The Events of one write (a node agent's round, a controller's sync) are gathered
(``tell``) and written with it (``ops``); what was not stored is then forgotten
(``written``), so the next one like it is created anew. Each controller keeps its own
correlator, as each of upstream's does (the node agent's kubelet, the reconciler's
DaemonSet controller, the gc's node lifecycle and taint eviction controllers): a DaemonSet
synced by two reconciler-workers in turn counts its repeats on one Event per worker."""

from __future__ import annotations

from typing import Any

from shared.eventlog.entry import CommitResult
from shared.model import events, meta
from shared.store.client import Op, Result, Store

Obj = dict[str, Any]
STORED = frozenset({CommitResult.OK, CommitResult.EXISTS, CommitResult.QUEUED})


class Recorder:
    """One process's recorder. ``prepared``: its Events are a controller's, stamped here
    and written without validation (the reconciler's); otherwise each is validated and
    stamped by the write rules (the node agent's, which may go through node-admission)."""

    def __init__(self, store: Store, prepared: bool = False) -> None:
        self.store = store
        self.prepared = prepared
        self.correlator = events.Correlator()
        # the Events to write with the next ``ops``, each once by its correlator's key (a
        # repeat of one not written yet is counted on it)
        self._pending: dict[tuple[str, ...], events.Correlated] = {}

    def tell(self, ev: Obj, now: float) -> None:
        """Record ``ev`` (named already) at ``now``: through the correlator, into the next
        ``ops`` (or dropped by its spam filter)."""
        told = self.correlator.correlate(ev, now)
        if told is None:
            return
        first = self._pending.get(told.key)
        if first is not None and not first.repeat:  # its create is not written yet
            told = events.Correlated(told.event, False, told.key)
        self._pending[told.key] = told

    def ops(self, now: float) -> tuple[list[events.Correlated], list[Op]]:
        """The Events told since the last call and their ops (a create if absent, or a
        repeat's count on the one written before), to commit; ``now``: the time a prepared
        Event is stamped with."""
        told, self._pending = list(self._pending.values()), {}
        return told, [self._op(t, now) for t in told]

    def _op(self, told: events.Correlated, now: float) -> Op:
        if told.repeat:
            return self.store.recount_op(told.event)
        if self.prepared:
            op = self.store.create_op(self.store.stamp(told.event, now), ensure=True,
                                      prepared=True)
        else:
            op = self.store.create_op(told.event, ensure=True)
        self.correlator.stored(told, op.obj or told.event)
        return op

    def unwritten(self, told: list[events.Correlated]) -> None:
        """``told``'s ops were not committed at all: the correlator forgets the Events it
        would have created (told again, they are created anew); a repeat stays counted, as
        one its spam filter drops does, and the spam filter's tokens stay spent."""
        for t in told:
            if not t.repeat:
                self.correlator.forget(t)

    def written(self, told: list[events.Correlated], results: list[Result]) -> None:
        """``told``'s ops were committed with ``results`` (among others'): an Event not
        stored (refused, or a repeat of one removed since) is forgotten by the correlator,
        and the next one like it is created anew."""
        lost = {res.op.key for res in results if res.op.kind == "Event"
                and res.status not in STORED}
        for t in told:
            if meta.key(t.event) in lost:
                self.correlator.forget(t)
