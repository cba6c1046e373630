"""The namespaces the API server serves, counted from what lives in them: the first object in
a namespace is its ADDED event, the last one gone its DELETED; the four built-in ones are
always there, as old as the cluster; one with an object is served as stored, its own changes
its events; a watch of namespaces gets those events."""

from __future__ import annotations

from typing import Any, cast

import orjson

from services.apiserver.watchcache import WatchCache
from shared.api.namespaces import Namespaces, namespace_object
from shared.model import kinds
from shared.store import codec
from shared.store.client import Store

Obj = dict[str, Any]


def _obj(kind: str, ns: str, name: str, created: str | None = None) -> Obj:
    md: Obj = {"name": name, "namespace": ns}
    if created:
        md["creationTimestamp"] = created
    return {"kind": kind, "metadata": md}


T1, T2, T3 = "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"


def test_the_first_object_in_a_namespace_adds_it_and_the_last_one_gone_deletes_it() -> None:
    ns = Namespaces()
    ns.reset({"Node": [{"kind": "Node", "metadata": {"name": "n1", "creationTimestamp": T1}}]})
    pod = _obj("Pod", "team", "p1", T2)
    assert ns.change("5-0", "ADDED", "Pod", "team/p1", pod, None) == (
        "ADDED", namespace_object("team", T2, "5-0"), None)
    ds = _obj("DaemonSet", "team", "ds", T3)
    assert ns.change("6-0", "ADDED", "DaemonSet", "team/ds", ds, None) is None
    assert ns.change("7-0", "MODIFIED", "Pod", "team/p1", pod, pod) is None
    assert ns.current()["team"] == T2  # as old as what made it exist
    assert ns.change("8-0", "DELETED", "Pod", "team/p1", pod, pod) is None
    assert ns.change("9-0", "DELETED", "DaemonSet", "team/ds", ds, ds) == (
        "DELETED", namespace_object("team", T2, "9-0"), None)
    assert "team" not in ns.current()
    # built-in ones make no events and are as old as the cluster's oldest object
    assert ns.change("10-0", "ADDED", "Pod", "kube-system/p", _obj("Pod", "kube-system", "p", T3),
                     None) is None
    assert ns.current() == dict.fromkeys(kinds.BUILTIN_NAMESPACES, T1)
    assert ns.change("11-0", "ADDED", "Node", "/n2", {"metadata": {"name": "n2"}}, None) is None


def test_a_relisted_namespace_is_as_old_as_the_oldest_object_in_it() -> None:
    ns = Namespaces()
    ns.reset({"Pod": [_obj("Pod", "team", "p1", T3), _obj("Pod", "team", "p2", T2),
                      _obj("Pod", "late", "p3")],
              "Node": [{"metadata": {"name": "n1", "creationTimestamp": T1}}]})
    assert ns.current() == {"team": T2, "late": None, **dict.fromkeys(kinds.BUILTIN_NAMESPACES, T1)}
    assert [o["metadata"]["name"] for o in ns.objects()] == sorted(ns.current())
    assert "creationTimestamp" not in namespace_object("late")["metadata"]
    assert Namespaces().current() == dict.fromkeys(kinds.BUILTIN_NAMESPACES)


def test_a_watch_of_namespaces_gets_one_as_something_first_lives_in_it() -> None:
    cache = WatchCache(cast(Store, None), ("Pod",), window=50)
    cache._reset("100-0", {"Pod": [_obj("Pod", "kube-system", "old", T1)]})
    assert [o["metadata"]["name"] for o in cache.current("Namespace", lambda _o: True)] == \
        sorted(kinds.BUILTIN_NAMESPACES)

    def encode(etype: str, obj: Obj) -> bytes:
        return orjson.dumps({"type": etype, "object": obj}) + b"\n"

    w = cache.subscribe("Namespace", lambda _o: True, encode, "100-0")
    pods = [codec.Entry("101-0", "ADDED", "Pod", "team/p1", _obj("Pod", "team", "p1", T2)),
            codec.Entry("102-0", "ADDED", "Pod", "team/p2", _obj("Pod", "team", "p2", T3)),
            codec.Entry("103-0", "DELETED", "Pod", "team/p1", _obj("Pod", "team", "p1", T2)),
            codec.Entry("104-0", "DELETED", "Pod", "team/p2", _obj("Pod", "team", "p2", T3))]
    cache.apply(pods, "104-0")
    got = [orjson.loads(line) for line in w.take().splitlines()]
    assert [(e["type"], e["object"]["metadata"]["name"], e["object"]["metadata"]["resourceVersion"])
            for e in got] == [("ADDED", "team", "101-0"), ("DELETED", "team", "104-0")]
    assert got[0]["object"]["metadata"]["creationTimestamp"] == T2
    resumed = cache.subscribe("Namespace", lambda _o: True, encode, "101-0")
    assert [(etype, obj["metadata"]["name"]) for etype, obj in resumed.backlog] == [
        ("DELETED", "team")]


def _namespace(name: str, created: str, **md: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "uid": "u-" + name, "creationTimestamp": created, **md},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}


def test_a_namespace_with_an_object_is_served_as_stored_and_outlives_its_content() -> None:
    ns = Namespaces()
    ns.reset({"Namespace": [_namespace("team", T1)]})
    assert ns.served("team") == _namespace("team", T1)
    assert ns.current()["team"] == T1
    pod = _obj("Pod", "team", "p1", T2)
    assert ns.change("5-0", "ADDED", "Pod", "team/p1", pod, None) is None  # no new namespace
    assert ns.change("6-0", "DELETED", "Pod", "team/p1", pod, pod) is None
    assert ns.served("team") == _namespace("team", T1)  # still there: it has its object
    labelled = _namespace("team", T1, labels={"a": "b"})
    assert ns.change("7-0", "MODIFIED", "Namespace", "/team", labelled,
                     _namespace("team", T1)) == ("MODIFIED", labelled, _namespace("team", T1))
    assert ns.change("8-0", "DELETED", "Namespace", "/team", labelled, labelled) == (
        "DELETED", labelled, labelled)
    assert ns.served("team") is None


def test_an_object_made_for_a_namespace_without_one_modifies_it() -> None:
    ns = Namespaces()
    pod = _obj("Pod", "team", "p1", T2)
    ns.reset({"Pod": [pod]})
    before = ns.served("team", "5-0")
    assert before == namespace_object("team", T2, "5-0")
    made = _namespace("team", T3)
    assert ns.change("5-0", "ADDED", "Namespace", "/team", made, None) == (
        "MODIFIED", made, before)
    # its object deleted while something still lives in it: served without one again
    assert ns.change("6-0", "DELETED", "Namespace", "/team", made, made) == (
        "MODIFIED", namespace_object("team", T2, "6-0"), made)
    assert ns.change("7-0", "ADDED", "Namespace", "/kube-system", _namespace("kube-system", T3),
                     None)[0] == "MODIFIED"  # a built-in one always exists


def test_a_watch_of_namespaces_gets_one_event_per_change_of_a_namespace_object() -> None:
    cache = WatchCache(cast(Store, None), ("Pod", "Namespace"), window=50)
    cache._reset("100-0", {})

    def encode(etype: str, obj: Obj) -> bytes:
        return orjson.dumps({"type": etype, "object": obj}) + b"\n"

    w = cache.subscribe("Namespace", lambda o: o["metadata"].get("labels", {}).get("team") == "a",
                        encode, "100-0")
    made = _namespace("team", T1, labels={"team": "a"})
    relabelled = _namespace("team", T1, labels={"team": "b"})
    cache.apply([codec.Entry("101-0", "ADDED", "Namespace", "/team", made),
                 codec.Entry("102-0", "ADDED", "Pod", "team/p1", _obj("Pod", "team", "p1", T2)),
                 codec.Entry("103-0", "MODIFIED", "Namespace", "/team", relabelled)], "103-0")
    got = [orjson.loads(line) for line in w.take().splitlines()]
    # its object's events alone (the pod in it makes none); leaving the selection: DELETED,
    # with what the watcher saw last, at the change's position (as upstream's cacher)
    assert [(e["type"], e["object"]["metadata"]["labels"]["team"],
             e["object"]["metadata"].get("resourceVersion")) for e in got] == [
        ("ADDED", "a", None), ("DELETED", "a", "103-0")]
