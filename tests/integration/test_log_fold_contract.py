"""The log's one fold (``shared.eventlog.fold``) against the Lua ``COMMIT``, which folds
each entry into the view hashes as it appends it: random histories are committed through the
real script on a real redis-server, then every Python reader's fold of the log must hold
exactly what Redis holds (each object's stored bytes and resourceVersion).

The readers: the raw fold of compaction, export's snapshot and rebuild (``RawView``), the
live cache (``Cache``, following the log from its start), ``replay --verify``'s view and the
API server's watch cache.
"""

from __future__ import annotations

import random
from typing import Any, cast

import pytest

from services.apiserver.watchcache import WatchCache
from services.replay import verify
from shared.eventlog import entry as log_entry
from shared.eventlog import fold, wire
from shared.store.cache import Cache
from shared.store.client import Op, Store, connect
from shared.store.keys import Keys
from shared.store.server import RedisServer
from shared.store.snapshot import RawView

Obj = dict[str, Any]
KINDS = ("Node", "Pod", "DaemonSet", "ControllerRevision", "Event")
NAMES = ("a", "b", "c", "d")
NAMESPACES = ("ns1", "ns2")


def _object(rng: random.Random, kind: str, key: str) -> Obj:
    ns, _, name = key.partition("/")
    md: Obj = {"name": name, "uid": f"uid-{name}-{rng.randrange(3)}",
               "labels": {"v": str(rng.randrange(1000))}}
    if ns:
        md["namespace"] = ns
    if kind == "Node":
        return {"apiVersion": "v1", "kind": "Node", "metadata": md, "spec": {}}
    if kind == "Pod":
        return {"apiVersion": "v1", "kind": "Pod", "metadata": md,
                "spec": {"nodeName": rng.choice(NAMES),
                         "containers": [{"name": "c", "image": f"img:{rng.randrange(9)}"}]}}
    return {"apiVersion": "v1", "kind": "Event", "metadata": md, "reason": "R",
            "message": str(rng.random()), "involvedObject": {"kind": "Pod", "name": name}}


def _random_op(rng: random.Random, store: Store) -> Op:
    kind = rng.choice(("Node", "Pod", "Pod", "Event"))
    key = f"/{rng.choice(NAMES)}" if kind == "Node" else \
        f"{rng.choice(NAMESPACES)}/{rng.choice(NAMES)}"
    current = store.try_get(kind, key)
    roll = rng.random()
    if roll < 0.1:
        return Op.record("DaemonSet", f"{rng.choice(NAMESPACES)}/ds",
                         {"type": "sync", "n": rng.randrange(100)})
    obj = _object(rng, kind, key)
    payload = wire.pack_object(obj)
    if current is None or roll < 0.2:  # a create of an existing object is refused
        return Op(rng.choice(("create", "ensure")), kind, key, payload, obj=obj)
    rv = current["metadata"]["resourceVersion"]
    expected = rv if rng.random() < 0.9 else "1-0"  # a stale precondition: a conflict
    if roll < 0.45:
        return Op("delete", kind, key, wire.pack_object(current), expected, current)
    return Op("update", kind, key, payload, expected, obj)


def _history(store: Store, seed: int, steps: int) -> None:
    rng = random.Random(seed)
    for _ in range(steps):
        ops: list[Op] = []
        seen: set[tuple[str, str]] = set()
        for _i in range(rng.choice((1, 1, 2, 3))):
            op = _random_op(rng, store)
            if (op.kind, op.key) not in seen:  # an object at most once per batch
                seen.add((op.kind, op.key))
                ops.append(op)
        store.commit(ops, atomic=rng.random() < 0.3)


def _redis_view(store: Store) -> dict[str, dict[str, tuple[str, bytes]]]:
    out: dict[str, dict[str, tuple[str, bytes]]] = {}
    for kind in KINDS:
        objs = store.r.hgetall(store.keys.objects(kind))
        rvs = store.r.hgetall(store.keys.versions(kind))
        assert set(objs) == set(rvs)
        if objs:
            out[kind] = {k.decode(): (rvs[k].decode(), v) for k, v in objs.items()}
    return out


def _decoded(view: dict[str, dict[str, tuple[str, bytes]]]) -> dict[str, dict[str, Obj]]:
    return {kind: {k: wire.unpack_object(p, rv) for k, (rv, p) in table.items()}
            for kind, table in view.items() if table}


@pytest.mark.parametrize("seed", range(6))
def test_every_python_fold_of_a_random_history_equals_what_commit_folded(
        redis_server: RedisServer, prefix: str, seed: int) -> None:
    store = Store(connect(redis_server.url), Keys(prefix))
    _history(store, seed, steps=120)
    held = _redis_view(store)
    log = store.r.xrange(store.keys.log)
    types = {f[b"t"] for _id, f in log}
    assert types == {b"ADDED", b"MODIFIED", b"DELETED", b"DECISION"}  # the history covers them

    # the raw fold (compaction, export's snapshot, rebuild)
    raw = RawView()
    for rid, fields in log:
        e = log_entry.RawEntry.from_fields(rid, fields)
        raw.apply(e.id, e.type, e.kind, e.key, e.payload)
    assert {k: v for k, v in raw.objects.items() if v} == held
    assert raw.position == log[-1][0].decode()

    # the live cache, following the log from its start (its fold of decoded entries)
    cache = Cache(store, KINDS, name="fold-contract")
    while cache.position != raw.position:
        cache.poll()
    expected = _decoded(held)
    assert {k: v for k, v in cache.objects.items() if v} == expected

    # replay --verify's view (the kinds a sync reads)
    view = verify.View()
    for rid, fields in log:
        e = log_entry.RawEntry.from_fields(rid, fields)
        view.apply(e.id, e.type, e.kind, e.key, verify._Slot(e.id, e.payload))
    assert {k: {key: s.get() for key, s in t.items()} for k, t in view.objects.items() if t} \
        == {k: v for k, v in expected.items() if k in verify.SYNC_KINDS}
    for ns in NAMESPACES:
        assert sorted(p["metadata"]["name"] for p in view.pods(ns)) == sorted(
            v["metadata"]["name"] for k, v in expected.get("Pod", {}).items()
            if k.startswith(ns + "/"))

    # the API server's watch cache
    watch = WatchCache(cast(Store, None), KINDS, window=10)
    watch.apply([log_entry.decode_fields(rid, f) for rid, f in log], raw.position)
    assert {k: v for k, v in watch.objects.items() if v} == expected


def test_an_entry_folded_twice_changes_the_view_once() -> None:
    view: fold.View[str] = fold.View()
    assert view.apply("1-0", "ADDED", "Node", "/a", "a1") == (True, None)
    assert view.apply("2-0", "MODIFIED", "Node", "/a", "a2") == (True, "a1")
    assert view.apply("2-0", "MODIFIED", "Node", "/a", "stale") == (False, None)
    assert view.apply("1-5", "DELETED", "Node", "/a", "") == (False, None)
    assert view.apply("3-0", "DECISION", "DaemonSet", "ns/x", "rec") == (False, None)
    assert view.objects == {"Node": {"/a": "a2"}} and view.position == "3-0"
    assert view.apply("4-0", "DELETED", "Node", "/a", "") == (True, "a2")
    assert view.objects == {"Node": {}}


def test_commit_appends_the_entry_type_each_write_mode_is_given(
        redis_server: RedisServer, prefix: str) -> None:
    store = Store(connect(redis_server.url), Keys(prefix))
    rng = random.Random(0)
    node = _object(rng, "Node", "/a")
    for mode in log_entry.WriteMode:
        current = store.try_get("Node", "/a")
        rv = current["metadata"]["resourceVersion"] if current else ""
        op = Op.record("DaemonSet", "ns/ds", {"n": 1}) if mode == log_entry.WriteMode.RECORD \
            else Op(mode, "Node", "/a", wire.pack_object(node), rv, node)
        if mode == log_entry.WriteMode.ENSURE:
            store.commit([Op("delete", "Node", "/a", wire.pack_object(node), rv, node)])
        [result] = store.commit([op])
        assert result.status == log_entry.CommitResult.OK, mode
        [(_id, fields)] = store.r.xrevrange(store.keys.log, count=1)
        assert fields[b"t"].decode() == log_entry.ENTRY_TYPE_OF[mode], mode
