"""The one fold of log entries into a view. Pure.

The rule is ``COMMIT``'s (``shared.store.scripts``), which folds each entry into the view
hashes in Redis as it appends it: ADDED and MODIFIED set the object to the entry's, DELETED
removes it, DECISION changes no object. A :class:`View` is current as of ``position``; an
entry not newer than it is already folded in and changes nothing, so a reader may be given
an entry twice (an overlap after a listing, a redelivery) and apply it once.

What a view holds per object is its user's choice (``V``): the decoded object (the caches,
the API server's watch cache), or its stored bytes with its resourceVersion (compaction,
export's snapshot, rebuild, ``replay --verify``). Subclasses keep indexes by overriding
``_set`` and ``_unset``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar

from shared.eventlog.entry import EntryType, id_tuple

V = TypeVar("V")
_DECISION, _DELETED = str(EntryType.DECISION), str(EntryType.DELETED)  # plain str: fast ==


class View(Generic[V]):
    """Objects by kind and key, as of the log id ``position``. Acts on itself only."""

    def __init__(self, kinds: Iterable[str] | None = None, position: str = "0-0") -> None:
        """``kinds``: the kinds kept (entries of others are passed over); None keeps all."""
        self.only = frozenset(kinds) if kinds is not None else None
        self.objects: dict[str, dict[str, V]] = {k: {} for k in kinds} if kinds else {}
        self.position = position
        self._at = id_tuple(position)

    def reset(self, position: str) -> None:
        """Empty the view, as of ``position`` (before a listing is put in)."""
        for kind in list(self.objects):
            for key in list(self.objects[kind]):
                self._unset(kind, key)
        self.objects = {k: {} for k in self.only} if self.only is not None else {}
        self.at(position)

    def at(self, position: str) -> None:
        """Declare the view current as of ``position`` (a listing's tip)."""
        self.position, self._at = position, id_tuple(position)

    def put(self, kind: str, key: str, value: V) -> None:
        """Put one listed object in (a listing or a snapshot's row)."""
        if self.only is None or kind in self.only:
            self._set(kind, key, value)

    def apply(self, eid: str, etype: str, kind: str, key: str, value: V,
              at: tuple[int, int] | None = None) -> tuple[bool, V | None]:
        """Fold one entry in (``value``: what the view keeps of its object, unused for
        DELETED; ``at``: ``id_tuple(eid)``, when the caller has it). Returns whether it
        changed the view, and the object's previous value."""
        # the hottest loop of a replay (once per entry): id_tuple and the kind filter inline
        if at is None:
            ms, _, seq = eid.partition("-")
            try:
                at = (int(ms), int(seq or 0))
            except ValueError:
                at = id_tuple(eid)
        if at <= self._at:
            return False, None  # already folded in
        self.position, self._at = eid, at
        if etype == _DECISION or (self.only is not None and kind not in self.only):
            return False, None
        table = self.objects.get(kind)
        old = table.get(key) if table is not None else None
        if etype == _DELETED:
            if old is not None:
                self._unset(kind, key)
        else:
            self._set(kind, key, value)
        return True, old

    def get(self, kind: str, key: str) -> V | None:
        table = self.objects.get(kind)
        return table.get(key) if table is not None else None

    def count(self) -> int:
        return sum(len(v) for v in self.objects.values())

    def items(self) -> Iterator[tuple[str, str, V]]:
        """(kind, key, value) in kind then key order."""
        for kind in sorted(self.objects):
            table = self.objects[kind]
            for key in sorted(table):
                yield kind, key, table[key]

    # ---- what subclasses may extend (indexes) -------------------------------------------

    def _set(self, kind: str, key: str, value: V) -> None:
        table = self.objects.get(kind)
        if table is None:
            table = self.objects[kind] = {}
        table[key] = value

    def _unset(self, kind: str, key: str) -> None:
        self.objects[kind].pop(key, None)
