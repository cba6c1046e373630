"""core/v1 Events as controllers write them (``record.EventRecorder``). Pure: builds objects.

The name is ``<involved name>.<16 hex digits>`` from the involved object's uid, the reason, the
message and ``salt`` (the writer's decision identity and time), so a retried write of one
decision's Event is create-if-absent, not a second Event.

:class:`Correlator` is client-go's EventCorrelator, which kubelet's Events pass through:
a repeat counts on the Event written first, similar Events are combined, and each object's
Events are rate-limited.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from shared.model import meta

Obj = dict[str, Any]


def event(involved: Obj, type: str, reason: str, message: str, *, now: float, salt: str,
          component: str, count: int = 1) -> Obj:
    """The Event about ``involved`` (a stored object) written by ``component`` at ``now``."""
    digest = hashlib.sha256(
        f"{meta.uid(involved)}|{reason}|{message}|{salt}".encode()).hexdigest()[:16]
    stamp = meta.format_time(now)
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{meta.name(involved)}.{digest}",
                     "namespace": meta.namespace(involved)},
        "involvedObject": {"apiVersion": str(involved.get("apiVersion") or ""),
                           "kind": str(involved.get("kind") or ""),
                           "namespace": meta.namespace(involved), "name": meta.name(involved),
                           "uid": meta.uid(involved),
                           "resourceVersion": meta.resource_version(involved)},
        "reason": reason, "message": message, "type": type, "count": count,
        "firstTimestamp": stamp, "lastTimestamp": stamp,
        # a recorder's source is its component alone, as kube-controller-manager's, whose
        # reportingInstance is the source's (empty) host; a node agent's names its node
        "source": {"component": component},
        "reportingComponent": component, "reportingInstance": "",
    }


#: client-go's defaults (tools/record): per source and object a burst of 25 Events, then one
#: per 5 minutes; more than 10 Events that differ only by message within 10 minutes are
#: combined into one; each of its caches keeps the newest 4,096 keys
SPAM_BURST = 25.0
SPAM_REFILL_SECONDS = 300.0
SIMILAR_MOST = 10
SIMILAR_SECONDS = 600.0
REMEMBERED = 4096
COMBINED = "(combined from similar events): "


def _object_key(ev: Obj) -> tuple[str, ...]:
    src, about = ev.get("source") or {}, ev.get("involvedObject") or {}
    return (str(src.get("component") or ""), str(src.get("host") or ""),
            *(str(about.get(f) or "") for f in ("kind", "namespace", "name", "uid",
                                                 "apiVersion")))


def _event_key(ev: Obj) -> tuple[str, ...]:
    """client-go's getEventKey: what makes two Events the same one, counted."""
    about = ev.get("involvedObject") or {}
    return ("event", *_object_key(ev), str(about.get("fieldPath") or ""),
            str(ev.get("type") or ""), str(ev.get("reason") or ""),
            str(ev.get("message") or ""))


def _similar_key(ev: Obj) -> tuple[str, ...]:
    """client-go's EventAggregatorByReasonFunc: Events that differ only by their message."""
    return ("similar", *_object_key(ev), str(ev.get("type") or ""),
            str(ev.get("reason") or ""), str(ev.get("reportingComponent") or ""),
            str(ev.get("reportingInstance") or ""))


class _Lru(OrderedDict[tuple[str, ...], Any]):
    def put(self, key: tuple[str, ...], value: Any) -> None:
        self[key] = value
        self.move_to_end(key)
        if len(self) > REMEMBERED:
            self.popitem(last=False)


@dataclass(frozen=True)
class Correlated:
    """What to write for an Event: ``event`` created, or with ``repeat`` the one written
    before with its ``count``, ``lastTimestamp`` and ``message`` new (an update of those
    three alone, as client-go's recorder patches them)."""

    event: Obj
    repeat: bool
    key: tuple[str, ...]


class Correlator:
    """client-go's EventCorrelator for one recorder (``correlate``), in its order: combine
    similar Events, count a repeat on the Event written first, then the spam filter (a
    filtered repeat still counts: the next one written carries it)."""

    def __init__(self) -> None:
        self._similar = _Lru()  # similar key → (the messages seen, when last)
        self._written = _Lru()  # event key → the Event as written (created or counted)
        self._spam = _Lru()  # object key → (tokens left, when counted)

    def correlate(self, ev: Obj, now: float) -> Correlated | None:
        """The write for ``ev``, an Event about to be recorded at ``now`` (its name already
        made); None when the spam filter drops it. An Event named as the one written before
        it (a controller's retried sync names its Events as the first try did) is that one
        again, to be created if absent, not a repeat."""
        ev, key = self._combine(ev, now)
        before = self._written.get(key)
        if before is not None and meta.name(before) == meta.name(ev):
            return Correlated(before, False, key)  # itself again: a retried write of it
        if before is None:
            out = Correlated(ev, False, key)
        else:
            counted = {**before, "count": int(before.get("count") or 1) + 1,
                       "lastTimestamp": ev.get("lastTimestamp"), "message": ev.get("message")}
            out = Correlated(counted, True, key)
        self._written.put(key, out.event)
        return None if self._filtered(ev, now) else out

    def stored(self, written: Correlated, event: Obj) -> None:
        """``written``'s Event is ``event`` as stored (with its uid and creation time): a
        repeat counts on that."""
        if written.key in self._written:
            self._written.put(written.key, event)

    def forget(self, written: Correlated) -> None:
        """``written``'s Event is not stored (refused, or removed since): the next one like
        it is created anew."""
        self._written.pop(written.key, None)

    def _combine(self, ev: Obj, now: float) -> tuple[Obj, tuple[str, ...]]:
        similar = _similar_key(ev)
        messages, last = self._similar.get(similar, (set(), None))
        if last is None or now - last > SIMILAR_SECONDS:
            messages = set()
        messages.add(str(ev.get("message") or ""))
        self._similar.put(similar, (messages, now))
        if len(messages) < SIMILAR_MOST:
            return ev, _event_key(ev)
        messages.pop()  # the set grows no larger
        stamp = meta.format_time(now)
        combined = {**ev, "message": COMBINED + str(ev.get("message") or ""), "count": 1,
                    "firstTimestamp": stamp, "lastTimestamp": stamp}
        return combined, similar

    def _filtered(self, ev: Obj, now: float) -> bool:
        key = _object_key(ev)
        tokens, at = self._spam.get(key, (SPAM_BURST, now))
        tokens = min(SPAM_BURST, tokens + (now - at) / SPAM_REFILL_SECONDS)
        passed = tokens >= 1
        self._spam.put(key, (tokens - 1 if passed else tokens, now))
        return not passed
