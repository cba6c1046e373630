"""What crosses from a reconciler to the status-writer: the status one sync computed, as a
versioned message on the status stream, and the stream as a port (``StatusChannel``) with
its in-memory twin. Pure.

A message is a msgpack map (``to_map``) with its version under ``"v"``; a message without
one is of version 1 (as published before messages carried it). ``from_map`` checks every
field's type and refuses a newer version than this code reads.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from shared.model import envelope

VERSION = 1

Obj = dict[str, Any]

# field, type, required
_FIELDS = (("key", str, True), ("uid", str, False), ("position", str, False),
           ("generation", int, False), ("observe", bool, False), ("status", dict, True),
           ("unavailable", dict, False))


@dataclass(frozen=True)
class StatusMessage:
    key: str  # the DaemonSet
    status: Obj  # the status the sync computed
    uid: str = ""  # of the DaemonSet the sync read (a message for a recreated one is dropped)
    generation: int = 0  # its metadata.generation then
    observe: bool = False  # raise status.observedGeneration to ``generation``
    position: str = ""  # the log position the sync read through
    unavailable: dict[str, int] = field(default_factory=dict)  # pods by reason
    version: int = VERSION

    def to_map(self) -> Obj:
        return {"v": self.version, "key": self.key, "uid": self.uid,
                "generation": self.generation, "status": self.status,
                "observe": self.observe, "position": self.position,
                "unavailable": dict(self.unavailable)}

    @classmethod
    def from_map(cls, doc: Any) -> StatusMessage:
        """A message as published; raises CorruptEntryError naming the first field of the
        wrong type, or a version this code does not read. Decides."""
        if isinstance(doc, StatusMessage):
            return doc
        version = envelope.version(doc, "status message", VERSION)
        envelope.check(doc, "status message", _FIELDS)
        return cls(key=doc["key"], status=doc["status"], uid=doc.get("uid") or "",
                   generation=doc.get("generation") or 0, observe=bool(doc.get("observe")),
                   position=doc.get("position") or "",
                   unavailable=doc.get("unavailable") or {}, version=version)


@dataclass(frozen=True)
class Received:
    """One message handed to a consumer: ``message`` None when it could not be read
    (``error`` says why); it must be ``done`` either way."""

    id: str
    message: StatusMessage | None
    error: str = ""


class StatusChannel(Protocol):
    """The status stream as a port: reconcilers publish, status-writers consume it as a group
    (each message handed to one consumer; one not done within ``claim_idle_ms`` is handed to
    another). ``shared.store.statuschannel.RedisStatusChannel`` and
    ``InMemoryStatusChannel`` pass one contract suite
    (``tests/integration/test_status_channel_contract.py``)."""

    def ensure(self) -> None:
        """Make the channel ready to consume (its group), if that needs doing."""
        ...

    def publish(self, message: StatusMessage) -> None: ...

    def receive(self, consumer: str, count: int, block_ms: int | None,
                claim_idle_ms: int) -> list[Received]:
        """Messages another consumer left undone for ``claim_idle_ms``, then new ones (up to
        ``count``; waits up to ``block_ms`` for new ones when there is none to claim)."""
        ...

    def done(self, ids: list[str]) -> None: ...


class InMemoryStatusChannel:
    """The status stream in memory, for unit tests (acts on itself only). ``clock`` gives
    milliseconds (idle times); ``block_ms`` never waits."""

    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        self.clock = clock or (lambda: time.monotonic() * 1000)
        self._seq = 0
        self.new: list[tuple[str, StatusMessage]] = []
        # id -> (message, consumer, delivered at)
        self.pending: dict[str, tuple[StatusMessage, str, float]] = {}

    def ensure(self) -> None:
        pass

    def publish(self, message: StatusMessage) -> None:
        self._seq += 1
        self.new.append((f"{self._seq}-0", message))

    def receive(self, consumer: str, count: int, block_ms: int | None,
                claim_idle_ms: int) -> list[Received]:
        now = self.clock()
        out: list[Received] = []
        for mid, (msg, holder, at) in list(self.pending.items()):
            if len(out) < count and holder != consumer and now - at >= claim_idle_ms:
                self.pending[mid] = (msg, consumer, now)
                out.append(Received(mid, msg))
        while self.new and len(out) < count:
            mid, msg = self.new.pop(0)
            self.pending[mid] = (msg, consumer, now)
            out.append(Received(mid, msg))
        return out

    def done(self, ids: list[str]) -> None:
        for mid in ids:
            self.pending.pop(mid, None)
