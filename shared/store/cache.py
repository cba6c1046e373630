"""The one cache library of every service: list, then follow the log.

``Cache.sync()`` reads the log tip and the kinds it watches in one atomic step; ``poll()``
then applies the entries after that position in log order. Applying is idempotent by
resourceVersion: an entry not newer than the cached object is skipped, so at-least-once
delivery, overlaps and restarts never double-apply. ``poll`` returns the applied changes
(with the old object), which is what event handlers need.

When the log goes backwards below what this process saw (``shared.store.logmark``: every
cache of a process shares the store's mark), each cache lists again at the next ``poll``,
and the differences come out as changes like those of a compaction gap: objects the log no
longer has are DELETED, objects that went back are MODIFIED.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from shared.eventlog import fold
from shared.eventlog.entry import EntryType
from shared.model import meta
from shared.store import codec
from shared.store.client import Store
from shared.store.log import redis_reader

Obj = dict[str, Any]


@dataclass(slots=True)
class Change:
    """One applied log entry: ``old`` is None for ADDED, ``new`` is the object (for DELETED,
    its last state). DECISION entries carry the record in ``new``. A value, not frozen for
    the cost of a frozen ``__init__`` (``shared.eventlog.entry.RawEntry``)."""

    id: str
    type: EntryType
    kind: str
    key: str
    old: Obj | None
    new: Obj


IndexFn = Callable[[Obj], Iterable[str]]


class Cache:
    """Objects of some kinds, kept current from the log, with optional secondary indexes."""

    def __init__(self, store: Store, kinds: Sequence[str], name: str = "cache",
                 indexes: dict[str, tuple[str, IndexFn]] | None = None,
                 decisions: bool = True, own_writes: bool = False) -> None:
        """``decisions``: whether ``poll`` returns the DECISION entries' records (False: they
        are passed over undecoded, as entries of other kinds always are). ``own_writes``:
        the objects this process commits through ``store`` are read back without checking
        their shape again (``shared.store.ownwrites``; for a cache of the writes it makes
        by the thousand)."""
        self.store = store
        self.kinds = list(kinds)
        self.view = _IndexedView(self.kinds, indexes or {})
        self.reader = redis_reader(store.r, store.keys, "0-0", name=name, mark=store.mark,
                                   kinds=self.kinds, decisions=decisions)
        if own_writes:
            store.own.enable(self.kinds)
            self.reader.own = store.own
        self._rewinds = store.mark.rewinds  # the mark's rewinds this cache has listed after
        self.synced = False

    @property
    def objects(self) -> dict[str, dict[str, Obj]]:
        """kind → key → object, as of ``position`` (read only: the fold writes it)."""
        return self.view.objects

    @property
    def position(self) -> str:
        return self.reader.position

    # ---- building ---------------------------------------------------------------------

    def sync(self) -> str:
        """(Re)list every watched kind at one log position; returns that position."""
        tip, objs = self.store.snapshot(self.kinds)  # checks the mark: a rewind counts there
        rewinds = self.store.mark.rewinds
        self.view = _IndexedView(self.kinds, self.view.index_defs, tip)
        for kind, items in objs.items():
            for obj in items:
                self.view.put(kind, meta.key(obj), obj)
        self.reader.position = tip
        self.reader.gap = self.reader.rewound = False
        self.store.mark.saw(tip)
        self._rewinds = rewinds
        self.synced = True
        return tip

    @property
    def rewound(self) -> bool:
        """The log went backwards since this cache last listed (it lists at the next poll)."""
        return self.store.mark.rewinds != self._rewinds or self.reader.rewound

    def poll(self, count: int = 1000, block_ms: int | None = None) -> builtins.list[Change]:
        """Apply the next entries; returns the changes applied (skips other kinds). When
        compaction trimmed entries this cache had not read, or the log went backwards,
        relists instead."""
        if self.rewound:
            return self.relist()
        entries = self.reader.read(count=count, block_ms=block_ms)
        if self.reader.gap or self.rewound:
            return self.relist()
        return self.apply(entries)

    def relist(self) -> builtins.list[Change]:
        """List again at the tip (as an informer does after "too old resource version") and
        return the differences from the previous contents as changes, in log order."""
        before = self.objects
        tip = self.sync()
        out: builtins.list[Change] = []
        for kind in self.kinds:
            old, new = before.get(kind, {}), self.objects[kind]
            for key, obj in new.items():
                prev = old.get(key)
                if prev is None or meta.resource_version(prev) != meta.resource_version(obj):
                    out.append(Change(meta.resource_version(obj),
                                      EntryType.ADDED if prev is None else EntryType.MODIFIED, kind, key, prev,
                                      obj))
            out += [Change(tip, EntryType.DELETED, kind, key, prev, prev)
                    for key, prev in old.items() if key not in new]
        out.sort(key=lambda ch: codec.id_tuple(ch.id))
        return out

    def catch_up(self, position: str, on_change: Callable[[builtins.list[Change]], None] | None = None,
                 block_ms: int = 200, max_rounds: int = 10_000) -> None:
        """Read until the cache has applied everything up to ``position``, or until the log
        went backwards (``position`` may then be one the log no longer has: the relisted
        state is the newest there is). A cache already past ``position`` reads nothing but
        still checks that the log holds what it read (one round trip): ahead of a log that
        went backwards it would otherwise decide on objects the log lost; then it relists."""
        rewinds = self.store.mark.rewinds
        if codec.id_ge(self.position, position):
            if self.store.mark.check(self.store.r, self.store.keys) or self.rewound:
                changes = self.relist()
                if on_change and changes:
                    on_change(changes)
            return
        rounds = 0
        while not codec.id_ge(self.position, position) and rounds < max_rounds \
                and self.store.mark.rewinds == rewinds:
            changes = self.poll(count=5000, block_ms=block_ms)
            if on_change and changes:
                on_change(changes)
            rounds += 1

    def apply(self, entries: Iterable[codec.Entry]) -> builtins.list[Change]:
        """Fold entries in (``shared.eventlog.fold``); returns the changes, with every
        DECISION entry's record."""
        out: builtins.list[Change] = []
        view = self.view
        for e in entries:
            if e.type == EntryType.DECISION:
                view.apply(e.id, e.type, e.kind, e.key, e.obj)
                out.append(Change(e.id, e.type, e.kind, e.key, None, e.obj))
                continue
            changed, old = view.apply(e.id, e.type, e.kind, e.key, e.obj)
            if changed:
                out.append(Change(e.id, e.type, e.kind, e.key, old, e.obj))
        return out

    # ---- reads --------------------------------------------------------------------------

    def get(self, kind: str, key: str) -> Obj | None:
        return self.objects[kind].get(key)

    def list(self, kind: str, namespace: str | None = None) -> builtins.list[Obj]:
        items = self.objects[kind].values()
        if namespace is None:
            return list(items)
        return [o for o in items if meta.namespace(o) == namespace]

    def by_index(self, index: str, value: str) -> builtins.list[Obj]:
        view = self.view
        objs = view.objects[view.index_defs[index][0]]
        return [objs[k] for k in view.index[index].get(value, ()) if k in objs]


class _IndexedView(fold.View[Obj]):
    """The fold, with secondary indexes: index name → (kind, fn); ``index``: index name →
    index value → keys."""

    def __init__(self, kinds: Sequence[str], index_defs: dict[str, tuple[str, IndexFn]],
                 position: str = "0-0") -> None:
        super().__init__(kinds, position)
        self.index_defs = index_defs
        self.index: dict[str, dict[str, set[str]]] = {n: {} for n in index_defs}
        # (kind, key) → the (index name, index value) pairs the object is filed under
        self._index_of: dict[tuple[str, str], builtins.list[tuple[str, str]]] = {}

    def _set(self, kind: str, key: str, value: Obj) -> None:
        self.objects[kind][key] = value
        filed = [(iname, ivalue) for iname, (ikind, fn) in self.index_defs.items()
                 if ikind == kind for ivalue in fn(value)]
        if filed == self._index_of.get((kind, key), []):
            return  # indexed as it was (a status update)
        self._unindex(kind, key)
        for iname, ivalue in filed:
            self.index[iname].setdefault(ivalue, set()).add(key)
        if filed:
            self._index_of[(kind, key)] = filed

    def _unset(self, kind: str, key: str) -> None:
        self._unindex(kind, key)
        self.objects[kind].pop(key, None)

    def _unindex(self, kind: str, key: str) -> None:
        for iname, value in self._index_of.pop((kind, key), []):
            bucket = self.index[iname].get(value)
            if bucket is not None:
                bucket.discard(key)
                if not bucket:
                    del self.index[iname][value]
