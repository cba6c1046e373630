"""Raw watch requests and the official Python `kubernetes` client against a live stack with
an API server, beyond test_apiserver_pyclient's verbs: the in-stream 410 Status, streaming
lists (sendInitialEvents) and bookmarks, a second replica, the body limit, list pages and
field validation warnings."""

from __future__ import annotations

import json
import ssl
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from services.apiserver import listing, watchcache
from shared.store.server import RedisServer, free_port
from tests.integration import apiserver_kit
from tests.integration.apiserver_kit import ApiServer
from tests.integration.controller_kit import daemonset


@pytest.fixture(scope="module")
def api(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[ApiServer]:
    with apiserver_kit.running(redis_server.url, "clients",
                               tmp_path_factory.mktemp("clients")) as server:
        yield server


@pytest.fixture(scope="module")
def apps(api: ApiServer) -> k8s.AppsV1Api:
    return k8s.AppsV1Api(k8s_config.new_client_from_config(str(api.kubeconfig())))


@pytest.fixture(scope="module")
def core(api: ApiServer) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(k8s_config.new_client_from_config(str(api.kubeconfig())))


def _stream(api: ApiServer, path: str, port: int | None = None,
            accept: str | None = None) -> list[dict[str, Any]]:
    req = urllib.request.Request(f"https://127.0.0.1:{port or api.port}{path}")
    req.add_header("Authorization", f"Bearer {api.tokens['viewer']}")
    if accept:
        req.add_header("Accept", accept)
    ctx = ssl.create_default_context(cafile=str(api.cert_dir / "ca.crt"))
    with urllib.request.urlopen(req, context=ctx, timeout=60) as resp:
        return [json.loads(line) for line in resp.read().splitlines() if line.strip()]


def test_watch_too_old_is_an_in_stream_410_error_event(api: ApiServer) -> None:
    events = _stream(api, "/apis/apps/v1/daemonsets?watch=true&resourceVersion=1-0"
                          "&timeoutSeconds=5")
    assert len(events) == 1 and events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert status["kind"] == "Status" and status["code"] == 410
    assert status["reason"] == "Expired"


def test_streaming_list_sends_initial_events_then_the_end_bookmark(api: ApiServer,
                                                                   apps: k8s.AppsV1Api
                                                                   ) -> None:
    for name in ("a", "b"):
        apps.create_namespaced_daemon_set("pyinit", daemonset(name, "pyinit"))
    events = _stream(api, "/apis/apps/v1/namespaces/pyinit/daemonsets?watch=true"
                          "&sendInitialEvents=true&allowWatchBookmarks=true"
                          "&resourceVersionMatch=NotOlderThan&timeoutSeconds=3")
    assert [(e["type"], e["object"]["metadata"].get("name")) for e in events[:2]] == \
        [("ADDED", "a"), ("ADDED", "b")]
    end = events[2]
    assert end["type"] == "BOOKMARK"
    assert end["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert end["object"]["metadata"]["resourceVersion"]
    assert events[-1]["type"] == "BOOKMARK"  # at the timeout, as asked


def test_a_watch_on_a_second_replica_sees_a_write_through_the_first(api: ApiServer,
                                                                    apps: k8s.AppsV1Api
                                                                    ) -> None:
    port = free_port()
    api.start("apiserver-2", port=port)
    rv = apps.list_namespaced_daemon_set("pyrep").metadata.resource_version
    apps.create_namespaced_daemon_set("pyrep", daemonset("replicated", "pyrep"))
    events = _stream(api, f"/apis/apps/v1/namespaces/pyrep/daemonsets?watch=true"
                          f"&resourceVersion={rv}&timeoutSeconds=3", port=port)
    seen = [(e["type"], e["object"]["metadata"]["name"]) for e in events]
    assert seen[0] == ("ADDED", "replicated")  # then its status changes, if any
    assert {name for _, name in seen} == {"replicated"}


def test_a_body_over_the_limit_is_413(api: ApiServer) -> None:
    big = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "big"},
           "message": "x" * (4 * 1024 * 1024)}
    code, status = api.request("POST", "/api/v1/namespaces/default/events", big)
    assert code == 413 and status["reason"] == "RequestEntityTooLarge"


def test_list_pages_with_limit_and_continue(api: ApiServer, core: k8s.CoreV1Api) -> None:
    first = core.list_node(limit=2)
    assert len(first.items) == 2 and first.metadata._continue
    rest = core.list_node(limit=2, _continue=first.metadata._continue)
    names = [n.metadata.name for n in first.items + rest.items]
    assert names[:3] == ["node-00001", "node-00002", "node-00003"]
    assert len(names) == len(set(names))


def test_an_unknown_field_warns_by_default_and_is_refused_under_strict(api: ApiServer) -> None:
    body = daemonset("warned", "pywarn")
    body["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    path = "/apis/apps/v1/namespaces/pywarn/daemonsets"
    code, status = api.request("POST", path + "?fieldValidation=Strict", body)
    assert code == 400 and status["reason"] == "BadRequest"
    assert status["message"] == ('strict decoding error: unknown field '
                                 '"spec.template.spec.containers[0].imagePullPolicyy"')
    req = urllib.request.Request(f"https://127.0.0.1:{api.port}{path}",
                                 data=json.dumps(body).encode(), method="POST")
    req.add_header("Authorization", f"Bearer {api.tokens['admin']}")
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, context=api.ssl_context(), timeout=30) as resp:
        assert resp.status == 201
        assert resp.headers["Warning"] == ('299 - "unknown field \\"spec.template.spec.'
                                           'containers[0].imagePullPolicyy\\""')


def _event(name: str, message: str = "m", ns: str = "bounds") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": ns},
            "reason": "Test",
            "message": message}


def test_request_bodies_have_the_manifests_bounds(api: ApiServer) -> None:
    events = "/api/v1/namespaces/bounds/events"
    deep = b'{"apiVersion": "v1", "kind": "Event", "metadata": {"name": "deep"}, "x": ' + \
        b"[" * 200 + b"]" * 200 + b"}"
    code, status = api.request("POST", events, deep)
    assert (code, status["reason"]) == (400, "BadRequest")
    assert status["message"].endswith("json: exceeded max depth of 100")
    code, status = api.request("POST", events, b'{"kind": "Event", "x": NaN}')
    assert code == 400
    code, status = api.request("POST", events, _event("big", "x" * (2 << 20)))
    assert (code, status["reason"]) == (413, "RequestEntityTooLarge")  # over the 1.5 MiB
    assert "etcdserver: request is too large" in status["message"]  # the store keeps

    twice = json.dumps(_event("twice")).replace('"reason": "Test"',
                                                '"reason": "A", "reason": "Test"').encode()
    code, status = api.request("POST", events + "?fieldValidation=Strict", twice)
    assert (code, status["message"]) == (400, 'strict decoding error: json: duplicate field '
                                               '"reason"')
    code, created = api.request("POST", events, twice)  # Warn: the last value, a warning
    assert code == 201 and created["reason"] == "Test"

    ds = "/apis/apps/v1/namespaces/bounds/daemonsets/laughs?fieldManager=t"
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True))
    code, status = api.request("PATCH", ds, bomb.encode(),
                               headers={"Content-Type": "application/apply-patch+yaml"})
    assert (code, status["reason"]) == (400, "BadRequest")
    assert "excessive aliasing" in status["message"]
    nested = "spec:\n" + "".join("  " * (i + 1) + f"k{i}:\n" for i in range(120)) + "  " * 121 + "v"
    code, status = api.request("PATCH", ds, nested.encode(),
                               headers={"Content-Type": "application/apply-patch+yaml"})
    assert code == 400 and "exceeded max depth of 100" in status["message"]
    code, status = api.request("PATCH", "/api/v1/namespaces/bounds/events/twice", deep,
                               headers={"Content-Type": "application/merge-patch+json"})
    assert code == 400 and "exceeded max depth of 100" in status["message"]
    code, listed = api.request("GET", "/apis/apps/v1/namespaces/bounds/daemonsets")
    assert listed["items"] == []  # nothing written


def test_a_continued_list_is_served_at_the_first_pages_position(api: ApiServer) -> None:
    events = "/api/v1/namespaces/pages/events"
    for name in ("e1", "e2", "e3"):
        assert api.request("POST", events, _event(name, ns="pages"))[0] == 201
    code, first = api.request("GET", events + "?limit=1")
    assert code == 200 and [i["metadata"]["name"] for i in first["items"]] == ["e1"]
    rv, token = first["metadata"]["resourceVersion"], first["metadata"]["continue"]
    assert api.request("POST", events, _event("e2b", ns="pages"))[0] == 201  # after the first page
    assert api.request("DELETE", events + "/e3")[0] == 200
    assert api.request("PATCH", events + "/e2", {"message": "changed"},
                       headers={"Content-Type": "application/merge-patch+json"})[0] == 200
    code, rest = api.request("GET", events + f"?limit=5&continue={token}")
    assert code == 200 and rest["metadata"]["resourceVersion"] == rv
    assert [(i["metadata"]["name"], i["message"]) for i in rest["items"]] == [
        ("e2", "m"), ("e3", "m")]  # as they were at rv: no e2b, e3 not yet deleted
    assert "continue" not in rest["metadata"]

    old = listing.token(("pages", "e1"), "1-0")  # a position the cache no longer holds
    code, status = api.request("GET", events + f"?limit=5&continue={old}")
    assert (code, status["reason"]) == (410, "Expired")
    assert status["message"].startswith("The provided continue parameter is too old")
    code, now = api.request("GET", events + f"?continue={status['metadata']['continue']}")
    assert [(i["metadata"]["name"], i["message"]) for i in now["items"]] == [
        ("e2", "changed"), ("e2b", "m")]  # the present view, after e1
    code, status = api.request("GET", events + f"?continue={token}&resourceVersion={rv}")
    assert code == 400


def test_a_watch_asking_for_bookmarks_gets_one_at_its_timeout(api: ApiServer) -> None:
    events = _stream(api, "/apis/apps/v1/namespaces/quiet/controllerrevisions?watch=true"
                     "&allowWatchBookmarks=true&timeoutSeconds=2&resourceVersion=0")
    assert [e["type"] for e in events] == ["BOOKMARK"]
    mark = events[0]["object"]
    assert mark["kind"] == "ControllerRevision" and mark["apiVersion"] == "apps/v1"
    assert mark["metadata"]["resourceVersion"] != "0"
    silent = _stream(api, "/apis/apps/v1/namespaces/quiet/controllerrevisions?watch=true"
                     "&timeoutSeconds=1&resourceVersion=0")
    assert silent == []  # none unless asked


def test_dry_run_all_writes_nothing_on_every_verb(api: ApiServer) -> None:
    ns = "dry"
    path = f"/api/v1/namespaces/{ns}/events"  # Events: no process writes them after
    assert api.request("POST", path, _event("kept", ns=ns))[0] == 201
    code, kept = api.request("GET", f"{path}/kept")
    before = kept["metadata"]["resourceVersion"]
    merge = {"Content-Type": "application/merge-patch+json"}
    changed = json.loads(json.dumps(kept))
    changed["message"] = "dry"
    applied = {k: v for k, v in changed.items() if k != "metadata"} | {
        "metadata": {"name": "kept"}}
    writes = [
        ("POST", path, _event("new", ns=ns), None),
        ("POST", f"/apis/apps/v1/namespaces/{ns}/daemonsets", daemonset("new", ns), None),
        ("PUT", f"{path}/kept", changed, None),
        ("PATCH", f"{path}/kept", {"message": "dry"}, merge),
        ("PATCH", f"{path}/kept?fieldManager=m&force=true",
         json.dumps(applied).encode(), {"Content-Type": "application/apply-patch+yaml"}),
        ("DELETE", f"{path}/kept", None, None),
        ("DELETE", path, None, None),
    ]
    for method, url, body, headers in writes:
        sep = "&" if "?" in url else "?"
        code, doc = api.request(method, f"{url}{sep}dryRun=All", body, headers=headers)
        assert code in (200, 201), (method, url, code, doc)
    code, now = api.request("GET", f"{path}/kept")
    assert code == 200 and now["metadata"]["resourceVersion"] == before
    assert now["message"] == "m"
    code, listed = api.request("GET", path)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["kept"]
    code, listed = api.request("GET", f"/apis/apps/v1/namespaces/{ns}/daemonsets")
    assert listed["items"] == []


def test_a_list_larger_than_one_write_arrives_whole_with_its_length(
        api: ApiServer, core: k8s.CoreV1Api) -> None:
    size = watchcache.WRITE_BYTES // 2
    for i in range(3):  # 1.5 pieces of the body's writes, and then some
        code, _ = api.request("POST", "/api/v1/namespaces/biglist/events",
                              _event(f"big-{i}", str(i) * size, "biglist"))
        assert code == 201
    listed = core.list_namespaced_event("biglist")
    assert sorted(e.message for e in listed.items) == [str(i) * size for i in range(3)]
    req = urllib.request.Request(f"https://127.0.0.1:{api.port}/api/v1/namespaces/biglist/events")
    req.add_header("Authorization", f"Bearer {api.tokens['admin']}")
    with urllib.request.urlopen(req, context=api.ssl_context(), timeout=30) as resp:
        body = resp.read()
        assert int(resp.headers["Content-Length"]) == len(body) > watchcache.WRITE_BYTES
        assert len(json.loads(body)["items"]) == 3


def _as(what: str) -> str:
    """client-go's metadata client's Accept (its protobuf first, then JSON)."""
    return (f"application/vnd.kubernetes.protobuf;as={what};g=meta.k8s.io;v=v1,"
            f"application/json;as={what};g=meta.k8s.io;v=v1,application/json")


def test_metadata_only_gets_lists_and_watches(api: ApiServer, apps: k8s.AppsV1Api) -> None:
    """What metadata-only informers ask for (client-go's metadata client, controller-runtime's
    metadata watches, the garbage collector): each object's metadata alone (was 406)."""
    ns, path = "pymeta", "/apis/apps/v1/namespaces/pymeta/daemonsets"
    made = apps.create_namespaced_daemon_set(ns, daemonset("meta", ns))
    code, got = api.request("GET", f"{path}/meta", headers={"Accept": _as(
        "PartialObjectMetadata")})
    assert code == 200 and set(got) == {"kind", "apiVersion", "metadata"}
    assert (got["kind"], got["apiVersion"]) == ("PartialObjectMetadata", "meta.k8s.io/v1")
    assert got["metadata"]["uid"] == made.metadata.uid
    code, listed = api.request("GET", path, headers={"Accept": _as(
        "PartialObjectMetadataList")})
    assert code == 200 and listed["kind"] == "PartialObjectMetadataList"
    assert listed["metadata"]["resourceVersion"]
    assert [(i["kind"], i["metadata"]["name"], "spec" in i) for i in listed["items"]] == \
        [("PartialObjectMetadata", "meta", False)]
    events = _stream(api, f"{path}?watch=true&allowWatchBookmarks=true&resourceVersion="
                          f"{listed['metadata']['resourceVersion']}&timeoutSeconds=2",
                     accept=_as("PartialObjectMetadata"))
    apps.patch_namespaced_daemon_set("meta", ns, {"metadata": {"labels": {"seen": "yes"}}})
    events += _stream(api, f"{path}?watch=true&timeoutSeconds=1",
                      accept=_as("PartialObjectMetadata"))
    assert {e["object"]["kind"] for e in events} == {"PartialObjectMetadata"}
    assert events[-1]["type"] == "ADDED" and "spec" not in events[-1]["object"]
    assert events[-1]["object"]["metadata"]["labels"]["seen"] == "yes"
    assert any(e["type"] == "BOOKMARK" for e in events)
    # a list's shape for one object, an object's for a list: 406, as upstream
    for where, what in ((f"{path}/meta", "PartialObjectMetadataList"),
                        (path, "PartialObjectMetadata")):
        code, status = api.request("GET", where, headers={"Accept": f"application/json;"
                                                          f"as={what};g=meta.k8s.io;v=v1"})
        assert code == 406 and status["reason"] == "NotAcceptable", (where, status)
