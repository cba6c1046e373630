"""A process reads back its own writes as the objects it packed (``shared.store.ownwrites``):
those must be what every other reader decodes from the log, field for field, type for type,
key order too. Checked on the writes made by the thousand: the reconciler's pod creates of
every reference manifest and the node agent's bindings and status updates of them, each
process's cache against a cache that decodes every entry."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from services.node_agent.agent import NodeAgent
from services.node_agent.lifecycle import AgentConfig, new_node
from services.reconciler.sync import Reconciler
from shared.eventlog import entry as entry_mod
from shared.eventlog.entry import Entry, Prior, RawEntry, Siblings
from shared.store import log as log_mod
from shared.store.backoff import RedisBackoff
from shared.store.cache import Cache
from shared.store.client import Store, connect
from shared.store.expectations import RedisExpectations
from shared.store.keys import Keys
from shared.store.workqueue import RedisWorkQueue
from tests import testdata

NODES = ["node-00001", "node-00002"]


def _same(a: Any, b: Any, path: str = "") -> list[str]:
    """Where ``a`` and ``b`` differ in value, type or key order (empty: nowhere)."""
    if type(a) is not type(b):
        return [f"{path}: {type(a).__name__} != {type(b).__name__}"]
    if isinstance(a, dict):
        if list(a) != list(b):
            return [f"{path}: keys {list(a)} != {list(b)}"]
        return [d for k in a for d in _same(a[k], b[k], f"{path}.{k}")]
    if isinstance(a, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True))
                for d in _same(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


@pytest.fixture
def store(redis_url: str, prefix: str) -> Store:
    return Store(connect(redis_url), Keys(prefix))


def _sync_every_daemonset(store: Store, reconciler: Reconciler) -> int:
    """Apply every reference manifest and sync each once; returns the pods created."""
    keys = []
    for path in testdata.manifests():
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "DaemonSet":
                doc["metadata"]["namespace"] = "default"
                doc["metadata"]["name"] = f"{path.stem}-{doc['metadata']['name']}"[:63]
                store.apply(doc)
                keys.append(f"default/{doc['metadata']['name']}")
    created = 0
    for key in keys:
        created += reconciler.sync(key, store.log_tip()).created
    return created


def test_what_a_process_reads_back_of_its_writes_is_what_others_decode(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    taken: list[str] = []
    real = log_mod.written

    def counting(raw: RawEntry, obj: dict[str, Any]) -> Entry:
        taken.append(raw.kind)
        return real(raw, obj)

    monkeypatch.setattr(log_mod, "written", counting)
    beside: list[bool] = []
    real_beside = Siblings.decode

    def counting_beside(self: Siblings, payload: bytes) -> dict[str, Any] | None:
        obj = real_beside(self, payload)
        beside.append(obj is not None)
        return obj

    monkeypatch.setattr(Siblings, "decode", counting_beside)
    over: list[bool] = []
    real_over = entry_mod._over

    def counting_over(raw: RawEntry, prior: Prior, shape: bool) -> dict[str, Any] | None:
        obj = real_over(raw, prior, shape)
        over.append(obj is not None)
        return obj

    monkeypatch.setattr(entry_mod, "_over", counting_over)
    for n in NODES:
        store.create(new_node(n))
    writer = Store(store.r, store.keys)  # the reconciler's own store
    reconciler = Reconciler(writer, RedisWorkQueue(writer.r, writer.keys),
                            RedisExpectations(writer.r, writer.keys),
                            RedisBackoff(writer.r, writer.keys), worker="a")
    reconciler.snapshot("default/none", store.log_tip())  # its cache listed before the writes
    agent = NodeAgent(Store(store.r, store.keys), AgentConfig())
    agent.cache.sync()
    created = _sync_every_daemonset(writer, reconciler)
    assert created >= 10, "the reference manifests placed too few pods to compare"
    agent.step(max_block=0)  # binds each pod and makes it Running and Ready
    over.clear()
    reconciler.snapshot("default/none", store.log_tip())  # read back: its creates
    # the agent's status writes decoded over the creates (entry.Prior), not whole
    assert over.count(True) == created, over
    agent.step(max_block=0)  # read back: its status writes
    # each pod's create and its status write read back so (and the revisions, the nodes)
    assert taken.count("Pod") == 2 * created
    # the node agent decoded creates beside the one before them (entry.Siblings): compared
    assert sum(beside) >= 5, beside
    plain = Cache(Store(store.r, store.keys), ["Pod"])
    plain.sync()
    pods = plain.objects["Pod"]
    assert sum(1 for p in pods.values() if p.get("status", {}).get("phase") == "Running") \
        == created
    for name, cache in (("reconciler", reconciler.cache), ("node agent", agent.cache)):
        assert set(cache.objects["Pod"]) == set(pods)
        for key, pod in pods.items():
            assert _same(cache.objects["Pod"][key], pod) == [], (name, key)
