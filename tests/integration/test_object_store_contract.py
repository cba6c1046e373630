"""One contract for both object stores' reads: the materialised view in Redis (``Store``,
written by real commits) and the in-memory twin.

Each test gets an ``Objects``: the port, a way to store a new object (returning it as
stored) and a way to delete one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from services.node_agent.lifecycle import new_node
from shared.api.memory import InMemoryObjectStore
from shared.api.ports import ObjectStore
from shared.eventlog.entry import id_tuple
from shared.eventlog.ports import NO_POSITION
from shared.model import meta
from shared.store import errors
from shared.store.client import Store
from shared.store.keys import Keys
from tests.integration import controller_kit as kit
from tests.integration.contract import connect

Obj = dict[str, Any]


@dataclass
class Objects:
    port: ObjectStore
    write: Callable[[Obj], Obj]
    remove: Callable[[str, str], None]


@pytest.fixture(params=["memory", "redis"])
def objects(request: pytest.FixtureRequest) -> Objects:
    if request.param == "memory":
        mem = InMemoryObjectStore()
        return Objects(mem, mem.put, mem.remove)
    store = Store(connect(request.getfixturevalue("redis_url")),
                  Keys(request.getfixturevalue("prefix")))

    def remove(kind: str, key: str) -> None:
        assert store.delete(kind, key) is None  # gone at once (no finalizers)

    return Objects(store, store.create, remove)


def _fill(objects: Objects) -> list[Obj]:
    """Nodes and DaemonSets in two namespaces, written out of name order."""
    return [objects.write(obj) for obj in (
        new_node("node-b"), kit.daemonset("web", "team-b"), new_node("node-a"),
        kit.daemonset("agent"), kit.daemonset("db", "team-b"))]


def _names(items: list[Obj]) -> list[str]:
    return [meta.key(o) for o in items]


def test_an_empty_store(objects: Objects) -> None:
    with pytest.raises(errors.NotFoundError, match='nodes "node-a" not found'):
        objects.port.get("Node", "/node-a")
    assert objects.port.try_get("Node", "/node-a") is None
    assert objects.port.list("DaemonSet") == [] and objects.port.names("Node") == set()
    assert objects.port.snapshot(["Node", "DaemonSet"]) == (
        NO_POSITION, {"Node": [], "DaemonSet": []})


def test_objects_read_back_as_stored_with_their_versions(objects: Objects) -> None:
    written = _fill(objects)
    for obj in written:
        key = meta.key(obj)
        assert objects.port.get(obj["kind"], key) == obj
        assert objects.port.try_get(obj["kind"], key) == obj
    versions = [meta.resource_version(o) for o in written]
    assert sorted(versions, key=id_tuple) == versions  # each write a newer entry
    assert objects.port.names("Node") == {"/node-a", "/node-b"}
    assert objects.port.names("DaemonSet") == {"default/agent", "team-b/db", "team-b/web"}


def test_a_list_is_sorted_by_namespace_and_name_and_filtered_by_namespace(
        objects: Objects) -> None:
    _fill(objects)
    assert _names(objects.port.list("Node")) == ["/node-a", "/node-b"]
    assert _names(objects.port.list("DaemonSet")) == [
        "default/agent", "team-b/db", "team-b/web"]
    assert _names(objects.port.list("DaemonSet", "team-b")) == ["team-b/db", "team-b/web"]
    assert objects.port.list("DaemonSet", "nowhere") == []


def test_a_snapshot_is_the_tip_with_every_object_of_its_kinds(objects: Objects) -> None:
    written = _fill(objects)
    tip, got = objects.port.snapshot(["Node", "DaemonSet"])
    assert tip == meta.resource_version(written[-1])
    assert {k: sorted(_names(v)) for k, v in got.items()} == {
        "Node": ["/node-a", "/node-b"],
        "DaemonSet": ["default/agent", "team-b/db", "team-b/web"]}
    assert sorted(got["Node"], key=meta.name) == [written[2], written[0]]
    assert set(objects.port.snapshot(["Node"])[1]) == {"Node"}


def test_a_delete_is_gone_from_every_read_and_moves_the_tip(objects: Objects) -> None:
    written = _fill(objects)
    objects.remove("DaemonSet", "team-b/web")
    assert objects.port.try_get("DaemonSet", "team-b/web") is None
    with pytest.raises(errors.NotFoundError):
        objects.port.get("DaemonSet", "team-b/web")
    assert _names(objects.port.list("DaemonSet", "team-b")) == ["team-b/db"]
    assert "team-b/web" not in objects.port.names("DaemonSet")
    tip, got = objects.port.snapshot(["DaemonSet"])
    assert id_tuple(tip) > id_tuple(meta.resource_version(written[-1]))
    assert sorted(_names(got["DaemonSet"])) == ["default/agent", "team-b/db"]


def test_what_a_read_returns_is_the_reader_s_own(objects: Objects) -> None:
    node = objects.write(new_node("node-a"))
    got = objects.port.get("Node", "/node-a")
    got["metadata"]["labels"]["changed"] = "yes"
    objects.port.list("Node")[0]["spec"] = {"unschedulable": True}
    objects.port.snapshot(["Node"])[1]["Node"][0]["status"] = {}
    assert objects.port.get("Node", "/node-a") == node
