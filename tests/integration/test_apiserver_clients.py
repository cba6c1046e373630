"""The official Python `kubernetes` client and raw watch requests against a live stack with
an API server: list, read, patch and watch; a watch resumed from a resourceVersion; 410
Expired handled; bookmarks and streaming lists (sendInitialEvents); two replicas."""

from __future__ import annotations

import json
import os
import ssl
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes import watch as k8s_watch
from kubernetes.client.rest import ApiException

from shared.store.server import RedisServer
from tests.integration.apiserver_kit import ApiServer
from tests.integration.controller_kit import daemonset, free_port
from tests.integration.stack import Stack, wait_for


@pytest.fixture(scope="module")
def api(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[ApiServer]:
    tmp = tmp_path_factory.mktemp("clients")
    stack = Stack(redis_server.url, f"clients{os.getpid()}", tmp)
    stack.start_all(workers=1, nodes=3)
    try:
        wait_for(lambda: len(stack.store.list("Node")) == 3, what="3 nodes")
        server = ApiServer(stack, tmp)
        server.start()
        yield server
    finally:
        stack.stop()


@pytest.fixture(scope="module")
def apps(api: ApiServer) -> k8s.AppsV1Api:
    return k8s.AppsV1Api(k8s_config.new_client_from_config(str(api.kubeconfig())))


@pytest.fixture(scope="module")
def core(api: ApiServer) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(k8s_config.new_client_from_config(str(api.kubeconfig())))


def test_python_client_creates_lists_reads_and_patches(apps: k8s.AppsV1Api,
                                                       core: k8s.CoreV1Api) -> None:
    apps.create_namespaced_daemon_set("py", daemonset("pyds", "py"))
    listed = apps.list_namespaced_daemon_set("py")
    assert [d.metadata.name for d in listed.items] == ["pyds"]
    assert listed.metadata.resource_version
    got = apps.read_namespaced_daemon_set("pyds", "py")
    assert got.spec.template.spec.containers[0].image == "registry.k8s.io/pause:3.9"
    patched = apps.patch_namespaced_daemon_set(
        "pyds", "py", {"spec": {"template": {"spec": {"containers": [
            {"name": "main", "image": "registry.k8s.io/pause:3.10"}]}}}})
    assert patched.spec.template.spec.containers[0].image == "registry.k8s.io/pause:3.10"
    assert patched.metadata.generation == 2
    wait_for(lambda: len(core.list_namespaced_pod("py", label_selector="app=pyds").items)
             == 3, timeout=60, what="3 pods listed")
    nodes = core.list_node(field_selector="metadata.name=node-00002").items
    assert [n.metadata.name for n in nodes] == ["node-00002"]
    with pytest.raises(ApiException) as err:
        apps.read_namespaced_daemon_set("nope", "py")
    assert err.value.status == 404


def test_python_watch_resumes_from_a_resource_version(apps: k8s.AppsV1Api) -> None:
    apps.create_namespaced_daemon_set("pyw", daemonset("first", "pyw"))
    rv = apps.list_namespaced_daemon_set("pyw").metadata.resource_version
    apps.create_namespaced_daemon_set("pyw", daemonset("second", "pyw"))
    apps.delete_namespaced_daemon_set("first", "pyw")
    seen = []
    for ev in k8s_watch.Watch().stream(apps.list_namespaced_daemon_set, "pyw",
                                       resource_version=rv, timeout_seconds=10):
        seen.append((ev["type"], ev["object"].metadata.name))
        if ("DELETED", "first") in seen:
            break
    assert ("ADDED", "first") not in seen  # nothing from before rv
    assert ("ADDED", "second") in seen and ("DELETED", "first") in seen
    assert seen.index(("ADDED", "second")) < seen.index(("DELETED", "first"))


def test_python_watch_from_a_position_too_old_gets_410(apps: k8s.AppsV1Api) -> None:
    with pytest.raises(ApiException) as err:
        for _ev in k8s_watch.Watch().stream(apps.list_namespaced_daemon_set, "pyold",
                                            resource_version="1-0", timeout_seconds=5):
            pass
    assert err.value.status == 410


def _stream(api: ApiServer, path: str, port: int | None = None) -> list[dict[str, Any]]:
    req = urllib.request.Request(f"https://127.0.0.1:{port or api.port}{path}")
    req.add_header("Authorization", f"Bearer {api.tokens['viewer']}")
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
