"""``services.reconciler.indexes.Indexes``: which cache changes reach which index, and when
an index is dropped (a DaemonSet deleted or changed past what the index holds, a relist)."""

from __future__ import annotations

from typing import Any

from services.reconciler.indexes import Indexes
from shared.daemonset import planner
from shared.eventlog.entry import EntryType
from shared.model import meta
from shared.store.cache import Change
from tests.unit.daemonset_fixtures import daemon_pod, make_ds, make_node, make_pod, snapshot

Obj = dict[str, Any]
KEY = "default/foo"


def _change(type: str, obj: Obj, old: Obj | None = None) -> Change:
    return Change("1-0", EntryType(type), str(obj["kind"]), meta.key(obj), old, obj)


def _kept(nodes: list[Obj], pods: list[Obj]) -> tuple[Indexes, Obj]:
    ds = make_ds()
    indexes = Indexes()
    view = object()
    indexes.check(view)
    snap = snapshot(ds, nodes, pods)
    indexes.keep(snap, planner.plan(snap).hash)
    return indexes, ds


def test_node_and_pod_changes_reach_the_index() -> None:
    indexes, ds = _kept([make_node("n0")], [])
    index = indexes.get(KEY)
    assert index is not None
    node, pod = make_node("n1"), daemon_pod(ds, "n1")
    indexes.follow([_change("ADDED", node), _change("ADDED", pod)])
    assert list(index.node_names()) == ["n0", "n1"]
    assert [meta.name(f.pod) for f in index.node_pods["n1"]] == [meta.name(pod)]
    indexes.follow([_change("DELETED", pod, pod), _change("DELETED", node, node)])
    assert list(index.node_names()) == ["n0"] and "n1" not in index.node_pods


def test_an_orphan_reaches_the_indexes_of_its_namespace_as_a_candidate() -> None:
    indexes, _ = _kept([make_node("n0")], [])
    index = indexes.get(KEY)
    assert index is not None
    orphan = make_pod("orphan", "n0")
    indexes.follow([_change("ADDED", orphan)])
    assert [meta.name(p) for p in index.claim_candidates()] == ["orphan"]
    assert index.node_pods == {}


def test_a_status_change_keeps_the_index_a_template_change_or_a_delete_drops_it() -> None:
    indexes, ds = _kept([make_node("n0")], [])
    index = indexes.get(KEY)
    newer = {**ds, "status": {"numberReady": 1}}
    indexes.follow([_change("MODIFIED", newer, ds)])
    assert indexes.get(KEY) is index and index is not None and index.ds is newer
    changed = make_ds(pod_spec={"containers": [], "nodeSelector": {"a": "b"}})
    indexes.follow([_change("MODIFIED", changed, newer)])
    assert indexes.get(KEY) is None

    indexes, ds = _kept([make_node("n0")], [])
    indexes.follow([_change("DELETED", ds, ds)])
    assert indexes.get(KEY) is None


def test_a_relisted_cache_drops_every_index() -> None:
    indexes, _ = _kept([make_node("n0")], [])
    assert indexes.get(KEY) is not None
    indexes.check(object())  # another view: the cache listed again
    assert indexes.get(KEY) is None and len(indexes) == 0
