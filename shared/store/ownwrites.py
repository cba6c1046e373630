"""What this process appended to the log, for its own caches to read back unchecked.

Every reader checks the shape of each object it decodes (``shared.eventlog.wire.check_shape``):
anyone who can write Redis can write anything there. An entry whose payload is byte for byte
what this process committed, though, holds an object this process built through the write
rules (``shared.api.writes``), so its reader need not check it again: the reconciler reads
back every pod it created, the node agent every status it wrote (half of what each reads while
DaemonSets fan out). The payload is still unpacked, so the cache holds exactly what any other
reader decodes. ``Store.commit`` records them here once a cache asks for it (``enable``);
a cache's reader takes each one as it reads past it."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from shared.eventlog.entry import WriteMode

MAX_KEPT = 20_000  # entries not read back yet (oldest dropped first: read in full then)
OBJECT_WRITES = frozenset({WriteMode.CREATE, WriteMode.ENSURE, WriteMode.UPDATE})


class OwnWrites:
    """Entry id → payload of this process's object writes of the kinds its caches read,
    while they read them back."""

    def __init__(self) -> None:
        self.kinds: frozenset[str] = frozenset()  # none: nothing is remembered
        self._payloads: OrderedDict[str, bytes] = OrderedDict()

    @property
    def enabled(self) -> bool:
        return bool(self.kinds)

    def enable(self, kinds: Iterable[str]) -> None:
        """Remember writes of ``kinds`` too (a cache that reads them asks)."""
        self.kinds = self.kinds | frozenset(kinds)

    def add(self, written: Iterable[tuple[str, str, bytes]]) -> None:
        """Remember object writes: (entry id, kind, payload) in commit order; only those of
        the kinds asked for, which a cache reads past (a write of another kind would stay
        until pushed out)."""
        kept, kinds = self._payloads, self.kinds
        kept.update((eid, payload) for eid, kind, payload in written if kind in kinds)
        while len(kept) > MAX_KEPT:
            kept.popitem(last=False)

    def mine(self, entry_id: str, payload: bytes) -> bool:
        """Whether ``payload`` at ``entry_id`` is what this process wrote there (forgotten
        once asked: each entry is read back once)."""
        return self._payloads.pop(entry_id, None) == payload
