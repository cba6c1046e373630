"""What this process appended to the log, for its own caches to read back unchecked.

Every reader checks the shape of each object it decodes (``shared.eventlog.wire.check_shape``):
anyone who can write Redis can write anything there. An entry whose payload is byte for byte
what this process committed, though, holds an object this process built through the write
rules (``shared.api.writes``), so its reader need not check it again: the reconciler reads
back every pod it created, the node agent every status it wrote (half of what each reads while
DaemonSets fan out). Nor is it unpacked: the reader takes the object that was packed into it
(``shared.eventlog.entry.written``), which is what unpacking the payload gives (a write's
object is plain data, packed at once and never changed after: ``Op.of``), and shares its
parts with the writer's, as a status update decoded over its prior version shares the
unchanged ones. ``Store.commit`` records them here once a cache asks for it (``enable``); a
cache's reader takes each one as it reads past it."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from shared.eventlog.entry import WriteMode

Obj = dict[str, Any]

MAX_KEPT = 20_000  # entries not read back yet (oldest dropped first: read in full then)
OBJECT_WRITES = frozenset({WriteMode.CREATE, WriteMode.ENSURE, WriteMode.UPDATE})


class OwnWrites:
    """Entry id → payload and object of this process's object writes of the kinds its
    caches read, while they read them back."""

    def __init__(self) -> None:
        self.kinds: frozenset[str] = frozenset()  # none: nothing is remembered
        self._payloads: OrderedDict[str, tuple[bytes, Obj]] = OrderedDict()

    @property
    def enabled(self) -> bool:
        return bool(self.kinds)

    def enable(self, kinds: Iterable[str]) -> None:
        """Remember writes of ``kinds`` too (a cache that reads them asks)."""
        self.kinds = self.kinds | frozenset(kinds)

    def add(self, written: Iterable[tuple[str, str, bytes, Obj]]) -> None:
        """Remember object writes: (entry id, kind, payload, the object packed into it) in
        commit order; only those of the kinds asked for, which a cache reads past (a write
        of another kind would stay until pushed out)."""
        kept, kinds = self._payloads, self.kinds
        kept.update((eid, (payload, obj)) for eid, kind, payload, obj in written
                    if kind in kinds)
        while len(kept) > MAX_KEPT:
            kept.popitem(last=False)

    def mine(self, entry_id: str, payload: bytes) -> Obj | None:
        """The object this process wrote at ``entry_id`` if ``payload`` is what it wrote
        there, else None (forgotten once asked: each entry is read back once)."""
        kept = self._payloads.pop(entry_id, None)
        return kept[1] if kept is not None and kept[0] == payload else None
