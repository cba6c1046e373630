"""The reconciler's per-DaemonSet indexes (``shared.daemonset.nodeindex``), one per
DaemonSet it has synced, fed change by change from its cache.

The cache's changes (``Cache.catch_up``'s ``on_change``) go to :meth:`Indexes.follow`: a Node
to every index, a Pod to the indexes of the DaemonSets its controller ref names before and
after the change (an orphan to every index of its namespace: any may adopt it), a
DaemonSet's newer object to its index, which it keeps only while the
index still fits it (``DaemonSetIndex.update_ds``). An index is built, from the sync's own
snapshot, before a full plan of its DaemonSet (:meth:`Indexes.keep`) when there is none yet
or the current revision's hash changed, so that plan already reads it; a cache that listed again (a new view: first sync, a
compaction gap, the log going backwards) drops them all (:meth:`Indexes.check`).

Memory: an index holds the cache's own Node and Pod objects (no copies), one ``PodFacts``
per pod and a few small entries per node. Acts on memory only.
"""

from __future__ import annotations

from typing import Any

from shared.daemonset import nodeindex
from shared.daemonset import types as t
from shared.eventlog.entry import EntryType
from shared.model import meta
from shared.store.cache import Change

Obj = dict[str, Any]


def _owner_uid(obj: Obj) -> str:
    ref = meta.controller_ref(obj)
    return str(ref.get("uid") or "") if ref else ""


class Indexes:
    """DaemonSet key → its index, kept as the module docstring says."""

    def __init__(self) -> None:
        self._by_key: dict[str, nodeindex.DaemonSetIndex] = {}
        self._key_of_uid: dict[str, str] = {}
        self._view: object | None = None  # the cache view the indexes were fed from

    def get(self, key: str) -> nodeindex.DaemonSetIndex | None:
        """The index of DaemonSet ``key``, current with the cache (None: not built)."""
        return self._by_key.get(key)

    def __len__(self) -> int:
        return len(self._by_key)

    def check(self, view: object) -> None:
        """Drop every index unless the cache's ``view`` is the one they were fed from."""
        if view is not self._view:
            self._by_key.clear()
            self._key_of_uid.clear()
            self._view = view

    def follow(self, changes: list[Change]) -> None:
        """Apply the cache's ``changes`` (in log order) to the indexes."""
        if not self._by_key:
            return
        for ch in changes:
            if ch.type == EntryType.DECISION:
                continue
            deleted = ch.type == EntryType.DELETED
            if ch.kind == "Pod":
                for index in self._pod_indexes(ch):
                    if deleted:
                        index.remove_pod(ch.key)
                    else:
                        index.set_pod(ch.new)
            elif ch.kind == "Node":
                for index in self._by_key.values():
                    if deleted:
                        index.remove_node(meta.name(ch.new))
                    else:
                        index.set_node(ch.new)
            elif ch.kind == "DaemonSet":
                kept = self._by_key.get(ch.key)
                if kept is not None and (deleted or not kept.update_ds(ch.new)):
                    self._drop(ch.key)

    def _pod_indexes(self, ch: Change) -> list[nodeindex.DaemonSetIndex]:
        """The indexes a pod change concerns: those of the controllers it names before and
        after, or, when it has none on a side (an orphan: any may adopt it), every index of
        its namespace."""
        uids = {_owner_uid(obj) for obj in ((ch.new,) if ch.old is None else (ch.old, ch.new))}
        if "" in uids:
            namespace = meta.namespace(ch.new)
            return [i for i in self._by_key.values() if i.namespace == namespace]
        return [index for uid in uids
                if (index := self._by_key.get(self._key_of_uid.get(uid, ""))) is not None]

    def keep(self, snap: t.Snapshot, hash: str) -> nodeindex.DaemonSetIndex | None:
        """The index of ``snap.key`` at the current revision ``hash`` (``planner.current_hash``
        before its full plan, the plan's after it), built from ``snap`` (the cache's state at
        the snapshot) unless the one kept fits the DaemonSet at ``hash``; dropped (None)
        when the DaemonSet is gone or is not planned (no ``hash``)."""
        ds = snap.ds
        if ds is None or not hash:
            self._drop(snap.key)
            return None
        index = self._by_key.get(snap.key)
        if index is not None and index.hash == hash and index.fits(ds):
            return index
        self._drop(snap.key)
        index = self._by_key[snap.key] = nodeindex.DaemonSetIndex(ds, hash, snap.nodes, snap.pods)
        self._key_of_uid[meta.uid(ds)] = snap.key
        return index

    def _drop(self, key: str) -> None:
        index = self._by_key.pop(key, None)
        if index is not None:
            self._key_of_uid.pop(meta.uid(index.ds), None)
