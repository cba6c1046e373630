"""Property tests at the store: thousands of malformed manifests and log entries.

For manifests: `Store.apply` either stores the object with exactly one log entry, or refuses
with a clear error (InvalidError, naming a field) and writes nothing. For log entries: readers
never raise; every undecodable entry is parked with its reason and the reader moves on.
"""

from __future__ import annotations

import copy
import os
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.store import errors
from shared.store.cache import Cache
from shared.store.client import Store, connect
from shared.store.keys import Keys
from shared.store.log import parked_entries, redis_reader

EXAMPLES = int(os.environ.get("DAEMONBUS_FUZZ_EXAMPLES", "1500"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])

VALID = yaml.safe_load("""
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: fuzz, namespace: default, labels: {app: fuzz}}
spec:
  selector: {matchLabels: {app: fuzz}}
  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 1}}
  template:
    metadata: {labels: {app: fuzz}}
    spec:
      tolerations: [{key: k, operator: Exists, effect: NoSchedule}]
      containers: [{name: c, image: "img:1", ports: [{containerPort: 80}]}]
""")

scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                    st.floats(allow_nan=True), st.text(max_size=12))
json_like = st.recursive(scalars, lambda c: st.one_of(
    st.lists(c, max_size=3), st.dictionaries(st.text(max_size=8), c, max_size=3)),
    max_leaves=12)


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def mutated_manifests(draw: st.DrawFn) -> Any:
    obj = copy.deepcopy(VALID)
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(obj) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent: Any = obj
        for step in path[:-1]:
            parent = parent[step]
        if draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(json_like)
    return obj


@pytest.fixture(scope="module")
def fuzz_store(redis_server: Any) -> Store:
    return Store(connect(redis_server.url), Keys("fuzz-store"))


@FUZZ
@given(manifest=st.one_of(mutated_manifests(), json_like))
def test_malformed_manifests_are_refused_cleanly_or_stored_whole(fuzz_store: Store,
                                                                  manifest: Any) -> None:
    store = fuzz_store
    store.r.delete(*[k for k in store.r.scan_iter(store.keys.tag + ":*")] or ["none"])
    try:
        result, obj = store.apply(manifest)
    except errors.InvalidError as err:
        assert err.causes and all(isinstance(c, str) and c for c in err.causes)
        assert store.r.xlen(store.keys.log) == 0
        assert store.r.hlen(store.keys.objects("DaemonSet")) == 0
        return
    assert result == "created"
    assert store.r.xlen(store.keys.log) == 1
    assert store.get(obj["kind"], f"{obj['metadata'].get('namespace', '')}/"
                     f"{obj['metadata']['name']}")["metadata"]["uid"] == obj["metadata"]["uid"]


fields = st.dictionaries(st.sampled_from(["v", "t", "k", "n", "o", "x"]),
                         st.one_of(st.binary(max_size=40), st.sampled_from(
                             [b"1", b"ADDED", b"DELETED", b"DECISION", b"Pod", b"DaemonSet",
                              b"default/x", b"/n1", b"\x80", b"\x81\xa8metadata\x80"])),
                         min_size=1, max_size=6)


@FUZZ
@given(batch=st.lists(fields, min_size=1, max_size=5))
def test_malformed_log_entries_are_parked_and_readers_carry_on(fuzz_store: Store,
                                                               batch: list[dict[str, bytes]]
                                                               ) -> None:
    store = fuzz_store
    store.r.delete(*[k for k in store.r.scan_iter(store.keys.tag + ":*")] or ["none"])
    cache = Cache(store, ["DaemonSet", "Pod", "Node"])
    cache.sync()
    for f in batch:
        store.r.xadd(store.keys.log, f)  # type: ignore[arg-type]
    marker = copy.deepcopy(VALID)
    marker["metadata"]["name"] = "after-the-garbage"
    store.create(marker)
    changes = cache.poll(count=100)
    assert any(c.key == "default/after-the-garbage" for c in changes)
    reader = redis_reader(store.r, store.keys)
    entries = reader.read(count=100)
    assert entries[-1].key == "default/after-the-garbage"
    assert reader.parked + len(entries) == len(batch) + 1
    assert len(parked_entries(store.r, store.keys)) == reader.parked
