"""What crosses from a reconciler to the status-writer: the status one sync computed, as a
versioned message on the status stream. Pure.

A message is a msgpack map (``to_map``) with its version under ``"v"``; a message without
one is of version 1 (as published before messages carried it). ``from_map`` checks every
field's type and refuses a newer version than this code reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shared.model.errors import CorruptEntryError

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
        if not isinstance(doc, dict):
            raise CorruptEntryError("status message is not a map")
        version = doc.get("v", 1)
        if not isinstance(version, int) or isinstance(version, bool) \
                or not 0 < version <= VERSION:
            raise CorruptEntryError(f"status message of unsupported version {version!r}")
        for name, type_, required in _FIELDS:
            value = doc.get(name)
            if value is None and not required:
                continue
            if not isinstance(value, type_) or (type_ is int and isinstance(value, bool)):
                raise CorruptEntryError(
                    f"status message field {name!r} is not of type {type_.__name__}")
        return cls(key=doc["key"], status=doc["status"], uid=doc.get("uid") or "",
                   generation=doc.get("generation") or 0, observe=bool(doc.get("observe")),
                   position=doc.get("position") or "",
                   unavailable=doc.get("unavailable") or {}, version=version)
