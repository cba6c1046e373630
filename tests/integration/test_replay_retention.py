"""Retention: ``log compact`` keeps the log bounded with a snapshot, so export plus replay
still rebuild exactly, and readers whose position was trimmed away relist."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from services.node_agent.lifecycle import new_node
from services.replay import compact, export, logfile, rebuild, verify
from shared.model import meta, podutil
from shared.model.podutil import target_node
from shared.store import codec, snapshot
from shared.store.cache import Cache
from shared.store.client import Store, connect
from shared.store.expectations import RedisExpectations
from shared.store.keys import Keys
from tests.integration.stack import ROOT, Stack, wait_for

Obj = dict[str, Any]
KINDS = ["Node", "Pod", "DaemonSet", "ControllerRevision", "Event"]
DS = """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: default}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: agent, image: agent:v1}]
"""


@pytest.fixture
def store(redis_url: str, prefix: str) -> Store:
    return Store(connect(redis_url), Keys(prefix))


def _objects(store: Store) -> dict[str, list[Obj]]:
    return {k: sorted(store.list(k), key=meta.key) for k in KINDS}


def _atomic(store: Store) -> tuple[str, dict[str, list[Obj]]]:
    tip, objs = store.snapshot(KINDS)
    return tip, {k: sorted(v, key=meta.key) for k, v in objs.items()}


def _churn(store: Store, node: str, times: int, every: int = 0,
           sample: Any = None) -> None:
    """Change a label of ``node`` ``times`` times (trusted writes, one commit each)."""
    current = store.get("Node", "/" + node)
    for i in range(times):
        current["metadata"].setdefault("labels", {})["churn"] = str(i)
        res = store.commit([store.raw_update_op(current, meta.resource_version(current))])[0]
        if res.status == "conflict":  # the node agent wrote it meanwhile
            current = store.get("Node", "/" + node)
            continue
        current["metadata"]["resourceVersion"] = res.value
        if every and i % every == 0 and sample is not None:
            sample()


def _replay_equals(store: Store, tmp: Path, tip: str, live: dict[str, list[Obj]]) -> None:
    path = tmp / "x.dblog"
    export.export(store.r, store.keys, path, until=tip)
    target = Store(store.r, Keys(store.keys.prefix + "-copy"))
    rebuild.rebuild(path, target.r, target.keys)
    assert _objects(target) == live


def test_compaction_keeps_the_log_bounded_under_endless_churn(stack: Stack,
                                                              tmp_path: Path) -> None:
    store = stack.store
    stack.start_all(workers=1, nodes=2)
    store.apply(yaml.safe_load(DS))
    wait_for(lambda: sum(podutil.is_ready(p) for p in stack.pods("default")) == 2,
             what="2 daemon pods")
    compactor = subprocess.Popen(
        [sys.executable, "-m", "services.cli.main", "log", "compact", "--keep", "300",
         "--every", "0.1"], env=stack.env(), cwd=str(ROOT),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    lengths: list[int] = []
    try:
        _churn(store, "node-00001", 500)
        wait_for(lambda: snapshot.read_id(store.r, store.keys), what="the first compaction")
        _churn(store, "node-00001", 6000, every=100,
               sample=lambda: lengths.append(int(store.r.xlen(store.keys.log))))
        # with the compactor running, the log comes back to its 300 entries
        wait_for(lambda: int(store.r.xlen(store.keys.log)) <= 300, what="compacted to 300")
    finally:
        compactor.terminate()
        _, err = compactor.communicate(timeout=10)
    assert compactor.returncode == 0, err.decode()
    # 6,500 changes (plus the controllers' writes) went through a log that never held more
    # than a fraction of them (how far it overshoots 300 depends on the machine's speed)
    assert max(lengths) < 3000, lengths
    assert int(store.r.memory_usage(store.keys.log) or 0) < 1_000_000
    # the readers (watcher, reconciler, node agent) still follow the trimmed log
    store.create(new_node("node-00003"))
    wait_for(lambda: any(target_node(p) == "node-00003" and podutil.is_ready(p)
                         for p in stack.pods("default")), what="a pod on the new node")
    tip, live = _atomic(store)
    _replay_equals(store, tmp_path, tip, live)


def test_export_after_compaction_rebuilds_exactly(store: Store, tmp_path: Path) -> None:
    for i in range(5):
        store.create(new_node(f"n{i}"))
    _churn(store, "n1", 50)
    store.delete("Node", "/n0")
    assert compact.compact(store.r, store.keys, keep=10).length == 10
    _churn(store, "n2", 30)
    store.create(new_node("n9"))
    second = compact.compact(store.r, store.keys, keep=5)  # folds from the first snapshot
    assert (second.length, second.objects) == (5, 4)  # n9 is created after the cut
    store.delete("Node", "/n3")
    tip, live = _atomic(store)
    path = tmp_path / "x.dblog"
    stats = export.export(store.r, store.keys, path)
    assert (stats.snapshot, stats.objects, stats.entries, stats.complete) == (
        second.snapshot, 4, 6, True)
    target = Store(store.r, Keys(store.keys.prefix + "-copy"))
    rebuild.rebuild(path, target.r, target.keys)
    assert _objects(target) == live
    assert target.log_tip() == tip
    # the rebuilt prefix holds the snapshot too, so it exports and rebuilds again
    again = tmp_path / "again.dblog"
    export.export(target.r, target.keys, again)
    third = Store(store.r, Keys(store.keys.prefix + "-third"))
    rebuild.rebuild(again, third.r, third.keys)
    assert _objects(third) == live
    assert verify.verify(path).ok


def test_cache_relists_when_compaction_trimmed_past_its_position(store: Store) -> None:
    for i in range(3):
        store.create(new_node(f"n{i}"))
    cache = Cache(store, ["Node"])
    cache.sync()
    store.delete("Node", "/n0")
    store.create(new_node("n3"))
    _churn(store, "n1", 3)
    compact.compact(store.r, store.keys, keep=1)
    changes = cache.poll()
    assert sorted((c.type, c.key) for c in changes) == [
        ("ADDED", "/n3"), ("DELETED", "/n0"), ("MODIFIED", "/n1")]
    assert cache.objects["Node"] == {meta.key(o): o for o in store.list("Node")}
    assert not cache.reader.gap


def test_reader_ahead_of_the_cut_does_not_relist(store: Store) -> None:
    for i in range(3):
        store.create(new_node(f"n{i}"))
    _churn(store, "n1", 10)
    cache = Cache(store, ["Node"])
    cache.sync()
    compact.compact(store.r, store.keys, keep=3)
    store.create(new_node("n3"))
    assert [(c.type, c.key) for c in cache.poll()] == [("ADDED", "/n3")]


def test_compaction_refuses_a_log_trimmed_by_other_means(store: Store,
                                                         tmp_path: Path) -> None:
    for i in range(5):
        store.create(new_node(f"n{i}"))
    store.r.xtrim(store.keys.log, maxlen=2, approximate=False)
    with pytest.raises(compact.CompactError, match="no snapshot covers"):
        compact.compact(store.r, store.keys, keep=1)
    path = tmp_path / "x.dblog"
    assert not export.export(store.r, store.keys, path).complete
    target = Keys(store.keys.prefix + "-copy")
    with pytest.raises(rebuild.RebuildError, match="only part of the history"):
        rebuild.rebuild(path, store.r, target)
    assert store.r.keys(target.tag + ":*") == []
    with logfile.Reader(path) as r:
        assert not r.header.complete


def test_concurrent_compactions_do_not_both_trim(store: Store) -> None:
    for i in range(5):
        store.create(new_node(f"n{i}"))
    view = snapshot.RawView(position=store.log_tip())
    compact.compact(store.r, store.keys, keep=2)
    with pytest.raises(Exception, match="another compaction"):
        snapshot.store_and_trim(store.r, store.keys, "", view)


def test_watcher_restarts_from_a_cursor_older_than_the_cut(stack: Stack) -> None:
    """The watcher's stored position was compacted away while it was down: it relists and
    every DaemonSet is synced, so the node added meanwhile gets its pod."""
    store = stack.store
    stack.start_all(workers=1, nodes=1)
    store.apply(yaml.safe_load(DS))
    wait_for(lambda: any(podutil.is_ready(p) for p in stack.pods("default")), what="a pod")
    stack.kill("watcher")
    cursor = store.r.get(store.keys.cursor("watcher")).decode()
    # a creation the dead watcher never observed: its observation is in the part trimmed
    RedisExpectations(store.r, store.keys).set("default/agent", 1, 0, time.time())
    store.create(new_node("node-00002"))
    _churn(store, "node-00001", 200)
    compact.compact(store.r, store.keys, keep=1)
    cut = snapshot.read_id(store.r, store.keys)
    assert codec.id_tuple(cut) > codec.id_tuple(cursor)
    store.r.delete(store.keys.lease("watcher"))  # as if its lease expired
    stack.start("watcher", "watcher")
    wait_for(lambda: any(target_node(p) == "node-00002" and podutil.is_ready(p)
                         for p in stack.pods("default")), what="a pod on the node added")
