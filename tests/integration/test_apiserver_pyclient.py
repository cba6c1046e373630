"""The official Python ``kubernetes`` client, unchanged, against a live stack with an API
server (real Redis, real daemonbus processes, TLS, bearer tokens from the kubeconfig the
server's users get): list, read, create, patch (a dict is a strategic merge patch) and watch
DaemonSets and Pods, a watch resumed from a resourceVersion, a 410 for a position the
server no longer holds, a viewer's write refused with 403 and a bad manifest with 422."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from shared.store import codec
from shared.store.server import RedisServer
from tests.integration import apiserver_kit
from tests.integration.apiserver_kit import ApiServer
from tests.integration.controller_kit import daemonset, log_entries
from tests.integration.stack import wait_for

NODES = ["node-00001", "node-00002", "node-00003"]
Obj = dict[str, Any]


@pytest.fixture(scope="module")
def api(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[ApiServer]:
    with apiserver_kit.running(redis_server.url, "pyclient",
                               tmp_path_factory.mktemp("pyclient")) as server:
        yield server


def _client(api: ApiServer, user: str = "admin") -> client.ApiClient:
    """An ApiClient configured from the user's kubeconfig, as any tool would load it."""
    return config.new_client_from_config(config_file=str(api.kubeconfig(user)))


@pytest.fixture(scope="module")
def apps(api: ApiServer) -> client.AppsV1Api:
    return client.AppsV1Api(_client(api))


@pytest.fixture(scope="module")
def core(api: ApiServer) -> client.CoreV1Api:
    return client.CoreV1Api(_client(api))


def _two_containers(name: str, ns: str) -> Obj:
    ds = daemonset(name, ns)
    ds["metadata"]["labels"] = {"app": name}
    ds["spec"]["template"]["spec"]["containers"] = [
        {"name": "main", "image": "registry.k8s.io/pause:3.9",
         "env": [{"name": "MODE", "value": "a"}]},
        {"name": "side", "image": "busybox:1.36"},
    ]
    return ds


def _ds_status(apps: client.AppsV1Api, ns: str, name: str) -> client.V1DaemonSetStatus:
    ds = apps.read_namespaced_daemon_set(name, ns)
    return ds.status


def _rolled_out(apps: client.AppsV1Api, ns: str, name: str) -> Callable[[], bool]:
    def done() -> bool:
        ds = apps.read_namespaced_daemon_set(name, ns)
        st = ds.status
        return bool(st and st.observed_generation == ds.metadata.generation and
                    st.updated_number_scheduled == 3 and st.number_ready == 3)
    return done


def _log_ids(api: ApiServer, kind: str, ns: str, after: str, through: str) -> list[tuple[str, str]]:
    """(event type, log id) of every log entry of ``kind`` in ``ns`` in (after, through]."""
    lo, hi = codec.id_tuple(after), codec.id_tuple(through)
    return [(e.type, e.id) for e in log_entries(api.stack.store, kind)
            if e.type != "DECISION" and e.key.startswith(ns + "/")
            and lo < codec.id_tuple(e.id) <= hi]


# ---- DaemonSets -------------------------------------------------------------------------------


def test_the_version_and_names_no_object_can_have(api: ApiServer,
                                                 core: client.CoreV1Api) -> None:
    """The client's VersionApi reads ``/version/``, its CoreApi ``/api/``, its ApisApi
    ``/apis/``, its AppsApi ``/apis/apps/`` (their trailing slashes: 404s before), a node's
    status is its ``/status`` (not served before);
    a name no object can have is NotFound, a list in such a namespace empty."""
    info = client.VersionApi(_client(api)).get_code()
    assert (info.major, info.minor, info.git_version) == ("1", "32", "v1.32.0-daemonbus")
    groups = client.ApisApi(_client(api)).get_api_versions().groups  # GET /apis/
    assert "apps" in [g.name for g in groups]
    assert client.CoreApi(_client(api)).get_api_versions().versions == ["v1"]  # GET /api/
    assert client.AppsApi(_client(api)).get_api_group().preferred_version.group_version == \
        "apps/v1"  # GET /apis/apps/
    node = core.list_node().items[0].metadata.name
    assert core.read_node_status(node).status.node_info.kubelet_version == "v1.32.0-daemonbus"
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod("Nope", "default")
    assert err.value.status == 404
    assert json.loads(err.value.body)["message"] == 'pods "Nope" not found'
    assert core.list_namespaced_pod("Bad_NS").items == []


def test_create_list_read_and_strategic_patch_of_a_daemonset(apps: client.AppsV1Api,
                                                             core: client.CoreV1Api) -> None:
    ns = "py-ds"
    created = apps.create_namespaced_daemon_set(ns, _two_containers("agent", ns))
    assert isinstance(created, client.V1DaemonSet)
    assert created.metadata.uid and created.metadata.resource_version
    assert created.metadata.generation == 1
    wait_for(_rolled_out(apps, ns, "agent"), timeout=90, what="agent on 3 nodes")

    listed = apps.list_namespaced_daemon_set(ns)
    assert [d.metadata.name for d in listed.items] == ["agent"]
    assert listed.metadata.resource_version
    everywhere = apps.list_daemon_set_for_all_namespaces(label_selector="app=agent")
    assert [(d.metadata.namespace, d.metadata.name) for d in everywhere.items] == [(ns, "agent")]
    read = apps.read_namespaced_daemon_set("agent", ns)
    assert read.metadata.uid == created.metadata.uid
    assert read.status.desired_number_scheduled == 3

    pods = core.list_namespaced_pod(ns, label_selector="app=agent")
    assert sorted(p.spec.node_name for p in pods.items) == NODES
    one = core.read_namespaced_pod(pods.items[0].metadata.name, ns)
    assert one.metadata.owner_references[0].uid == created.metadata.uid

    # a dict body is sent as a strategic merge patch: containers merge by name, so "side"
    # and main's env stay (a JSON merge patch would have replaced the whole list)
    patched = apps.patch_namespaced_daemon_set("agent", ns, {"spec": {"template": {"spec": {
        "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}}}})
    containers = patched.spec.template.spec.containers
    assert [(c.name, c.image) for c in containers] == [
        ("main", "registry.k8s.io/pause:3.10"), ("side", "busybox:1.36")]
    assert [(e.name, e.value) for e in containers[0].env] == [("MODE", "a")]
    assert patched.metadata.generation == 2
    wait_for(_rolled_out(apps, ns, "agent"), timeout=90, what="the patched template rolled out")
    images = {p.spec.containers[0].image
              for p in core.list_namespaced_pod(ns, label_selector="app=agent").items
              if p.metadata.deletion_timestamp is None}
    assert images == {"registry.k8s.io/pause:3.10"}


def test_watch_of_daemonsets_sees_the_controller_bring_it_up(apps: client.AppsV1Api) -> None:
    ns = "py-dsw"
    start = apps.list_namespaced_daemon_set(ns).metadata.resource_version
    apps.create_namespaced_daemon_set(ns, daemonset("watched", ns))
    seen: list[tuple[str, int]] = []
    w = watch.Watch()
    for ev in w.stream(apps.list_namespaced_daemon_set, ns, resource_version=start,
                       timeout_seconds=90):
        ds = ev["object"]
        assert isinstance(ds, client.V1DaemonSet)
        seen.append((ev["type"], (ds.status.number_ready or 0) if ds.status else 0))
        if ds.status and ds.status.number_ready == 3:
            w.stop()
    assert seen[0] == ("ADDED", 0)
    assert seen[-1] == ("MODIFIED", 3)
    assert {t for t, _ in seen[1:]} == {"MODIFIED"}


# ---- Pods ------------------------------------------------------------------------------------------


def _bare_pod(name: str, ns: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": {"app": "bare"}},
            "spec": {"nodeName": NODES[0], "containers": [
                {"name": "main", "image": "registry.k8s.io/pause:3.9"},
                {"name": "side", "image": "busybox:1.36"}]}}


def test_create_read_patch_and_watch_of_pods(core: client.CoreV1Api) -> None:
    ns = "py-pod"
    start = core.list_namespaced_pod(ns).metadata.resource_version
    created = core.create_namespaced_pod(ns, _bare_pod("bare", ns))
    assert isinstance(created, client.V1Pod)
    assert created.metadata.uid and created.status.phase == "Pending"
    patched = core.patch_namespaced_pod("bare", ns, {
        "metadata": {"labels": {"patched": "yes"}},
        "spec": {"containers": [{"name": "side", "image": "busybox:1.37"}]}})
    assert patched.metadata.labels == {"app": "bare", "patched": "yes"}
    assert [(c.name, c.image) for c in patched.spec.containers] == [
        ("main", "registry.k8s.io/pause:3.9"), ("side", "busybox:1.37")]
    assert core.read_namespaced_pod("bare", ns).metadata.resource_version == \
        patched.metadata.resource_version

    # from before the create: the ADDED, then our patch and the node agent running it (in
    # whichever order they came), each a MODIFIED
    events: list[tuple[str, str | None, bool]] = []
    w = watch.Watch()
    for ev in w.stream(core.list_namespaced_pod, ns, resource_version=start,
                       field_selector="metadata.name=bare", timeout_seconds=60):
        pod = ev["object"]
        assert isinstance(pod, client.V1Pod)
        ready = any(c.type == "Ready" and c.status == "True"
                    for c in (pod.status.conditions or []))
        events.append((ev["type"], (pod.metadata.labels or {}).get("patched"), ready))
        if ready and events[-1][1] == "yes":
            w.stop()
    assert events[0] == ("ADDED", None, False)
    assert {t for t, _, _ in events[1:]} == {"MODIFIED"}
    assert ("MODIFIED", "yes") in [(t, label) for t, label, _ in events]
    assert events[-1] == ("MODIFIED", "yes", True)
    listed = core.list_pod_for_all_namespaces(label_selector="app=bare,patched=yes")
    assert [(p.metadata.namespace, p.metadata.name, p.status.phase) for p in listed.items] == \
        [(ns, "bare", "Running")]

    # a collection delete answers with what it deleted, at the position it listed them
    # (the client reads the answer as a V1Status, which has no items: read it raw)
    gone = json.loads(core.delete_collection_namespaced_pod(
        ns, label_selector="app=bare", _preload_content=False).data)
    assert gone["kind"] == "PodList"
    assert [(p["metadata"]["name"], "deletionTimestamp" in p["metadata"])
            for p in gone["items"]] == [("bare", True)]
    assert codec.id_tuple(gone["metadata"]["resourceVersion"]) >= \
        codec.id_tuple(listed.metadata.resource_version)


def test_an_ephemeral_container_through_the_python_client(core: client.CoreV1Api) -> None:
    """The client's ephemeralcontainers calls: a patch adds one (defaulted), a read gives the
    pod, a replace that drops it is refused, a pod cannot be created with one; the node
    reports it running."""
    ns = "py-debug"
    core.create_namespaced_pod(ns, _bare_pod("debugged", ns))
    added = core.patch_namespaced_pod_ephemeralcontainers("debugged", ns, {"spec": {
        "ephemeralContainers": [{"name": "dbg", "image": "busybox:1.37",
                                 "targetContainerName": "main", "stdin": True}]}})
    assert isinstance(added, client.V1Pod)
    (ec,) = added.spec.ephemeral_containers
    assert (ec.name, ec.target_container_name, ec.stdin, ec.termination_message_policy) == (
        "dbg", "main", True, "File")
    read = core.read_namespaced_pod_ephemeralcontainers("debugged", ns)
    assert read.spec.ephemeral_containers == added.spec.ephemeral_containers
    read.spec.ephemeral_containers = []
    read.metadata.resource_version = None  # (no precondition: the node writes its status)
    with pytest.raises(ApiException) as err:
        core.replace_namespaced_pod_ephemeralcontainers("debugged", ns, read)
    assert err.value.status == 422
    assert 'existing ephemeral containers "dbg" may not be removed' in \
        json.loads(err.value.body)["message"]
    born = _bare_pod("born-debugged", ns)
    born["spec"]["ephemeralContainers"] = [{"name": "dbg", "image": "busybox:1.37"}]
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(ns, born)
    assert (err.value.status, json.loads(err.value.body)["details"]["causes"]) == (422, [
        {"reason": "FieldValueForbidden", "message": "Forbidden: cannot be set on create",
         "field": "spec.ephemeralContainers"}])

    def running() -> client.V1ContainerStatus | None:
        told = core.read_namespaced_pod("debugged", ns).status.ephemeral_container_statuses
        return told[0] if told and told[0].state.running else None

    assert wait_for(running, timeout=30, what="the ephemeral container running").name == "dbg"


def test_an_eviction_names_the_pod_it_evicts(core: client.CoreV1Api) -> None:
    ns = "py-evict"
    core.create_namespaced_pod(ns, _bare_pod("evicted", ns))

    def eviction(name: str) -> client.V1Eviction:
        return client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=ns))

    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod_eviction("evicted", ns, eviction("other"))
    assert (err.value.status, json.loads(err.value.body)["message"]) == \
        (400, "name in URL does not match name in Eviction object")
    assert core.read_namespaced_pod("evicted", ns).metadata.deletion_timestamp is None
    core.create_namespaced_pod_eviction("evicted", ns, eviction("evicted"))
    try:  # terminating, or already gone (its node agent was quick)
        assert core.read_namespaced_pod("evicted", ns).metadata.deletion_timestamp is not None
    except ApiException as gone:
        assert gone.status == 404


# ---- resourceVersion and 410 -----------------------------------------------------------------------


def test_a_watch_resumed_from_a_resource_version_sees_exactly_the_events_after_it(
        api: ApiServer, apps: client.AppsV1Api) -> None:
    ns = "py-resume"
    apps.create_namespaced_daemon_set(ns, daemonset("resume", ns))
    marks = [apps.patch_namespaced_daemon_set(
        "resume", ns, {"metadata": {"labels": {"step": str(i)}}}).metadata.resource_version
        for i in range(4)]
    resume_at, last = marks[1], marks[-1]

    got: list[tuple[str, str]] = []
    steps: list[str | None] = []
    w = watch.Watch()
    for ev in w.stream(apps.list_namespaced_daemon_set, ns, resource_version=resume_at,
                       timeout_seconds=60):
        md = ev["object"].metadata
        got.append((ev["type"], md.resource_version))
        steps.append((md.labels or {}).get("step"))
        if codec.id_tuple(md.resource_version) >= codec.id_tuple(last):
            w.stop()
    # exactly the log's entries after the position: none at or before it, none missed,
    # none twice, in log order (the controller's status writes interleave with ours)
    assert got == _log_ids(api, "DaemonSet", ns, resume_at, last)
    assert got[-1] == ("MODIFIED", last)
    ids = [rv for _t, rv in got]
    assert marks[2] in ids and marks[0] not in ids and resume_at not in ids
    assert steps[0] in ("1", "2") and steps[-1] == "3"
    assert w.resource_version == last  # where the client would resume next


def test_a_list_at_exactly_a_resource_version_and_its_options_checked(
        core: client.CoreV1Api) -> None:
    """``resourceVersionMatch``: Exact lists the objects as they were at that position;
    NotOlderThan a position the server has not reached waits for it, then 504; the
    options upstream forbids are a 422 naming ListOptions (the match was ignored)."""
    ns = "py-exact"
    core.create_namespaced_pod(ns, _bare_pod("first", ns))
    at = core.list_namespaced_pod(ns).metadata.resource_version
    core.create_namespaced_pod(ns, _bare_pod("second", ns))
    core.patch_namespaced_pod("first", ns, {"metadata": {"labels": {"later": "yes"}}})
    then = core.list_namespaced_pod(ns, resource_version=at, resource_version_match="Exact")
    assert then.metadata.resource_version == at
    assert [(p.metadata.name, p.metadata.labels) for p in then.items] == \
        [("first", {"app": "bare"})]
    now = core.list_namespaced_pod(ns, resource_version=at,
                                   resource_version_match="NotOlderThan")
    assert [p.metadata.name for p in now.items] == ["first", "second"]

    def refused(**kw: Any) -> ApiException:
        with pytest.raises(ApiException) as err:
            core.list_namespaced_pod(ns, **kw)
        return err.value

    for kw, message in (
            ({"resource_version_match": "NotOlderThan"}, "resourceVersionMatch: Forbidden: "
             "resourceVersionMatch is forbidden unless resourceVersion is provided"),
            ({"resource_version": at, "resource_version_match": "Bogus"},
             'resourceVersionMatch: Unsupported value: "Bogus": supported values: "Exact", '
             '"NotOlderThan", ""'),
            ({"resource_version": "0", "resource_version_match": "Exact"},
             'resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for '
             'resourceVersion "0"'),
            ({"send_initial_events": True}, "sendInitialEvents: Forbidden: sendInitialEvents "
             "is forbidden for list")):
        err = refused(**kw)
        status = json.loads(err.body)
        assert (err.status, status["reason"], status["details"]["kind"]) == \
            (422, "Invalid", "ListOptions"), kw
        assert status["message"] == f'ListOptions.meta.k8s.io "" is invalid: {message}', kw
    old = refused(resource_version="1-0", resource_version_match="Exact")
    assert (old.status, json.loads(old.body)["reason"]) == (410, "Expired")
    ahead = f"{codec.id_tuple(at)[0] + 3_600_000}-0"
    late = refused(resource_version=ahead, resource_version_match="NotOlderThan")
    assert (late.status, json.loads(late.body)["message"].split(":")[0]) == \
        (504, "Too large resource version")


def _counted(fn: Callable[..., Any], calls: list[Obj]) -> Callable[..., Any]:
    """``fn`` recording each call's keyword arguments (the watch reads its docstring)."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kw: Any) -> Any:
        calls.append(dict(kw))
        return fn(*args, **kw)
    return wrapper


def test_a_position_the_server_no_longer_holds_is_410_expired(
        api: ApiServer, core: client.CoreV1Api) -> None:
    # the log's first entry is older than anything this server's watch cache holds (it
    # started later, at the log's tip): what a compacted position is to a client
    oldest = log_entries(api.stack.store)[0].id
    newest = core.list_namespaced_pod("default").metadata.resource_version
    assert codec.id_tuple(oldest) < codec.id_tuple(newest)

    status, body = api.request("GET", f"/api/v1/pods?watch=1&resourceVersion={oldest}")
    assert status == 200  # upstream's watch cache answers in the stream, not with the status
    assert isinstance(body, dict) and body["type"] == "ERROR"
    assert body["object"]["code"] == 410 and body["object"]["reason"] == "Expired"
    assert "too old resource version" in body["object"]["message"]

    # with timeoutSeconds the client does not retry: the ERROR event is an ApiException 410
    calls: list[Obj] = []
    with pytest.raises(ApiException) as err:
        for _ in watch.Watch().stream(_counted(core.list_pod_for_all_namespaces, calls),
                                      resource_version=oldest, timeout_seconds=10):
            pytest.fail("no event may come from an expired position")
    assert err.value.status == 410 and "Expired" in str(err.value.reason)
    assert len(calls) == 1

    # without it the client retries once from the same position, then gives up the same way
    calls.clear()
    with pytest.raises(ApiException) as err:
        for _ in watch.Watch().stream(_counted(core.list_pod_for_all_namespaces, calls),
                                      resource_version=oldest):
            pytest.fail("no event may come from an expired position")
    assert err.value.status == 410
    assert [c["resource_version"] for c in calls] == [oldest, oldest]

    # what the client is told to do then: list again, and watch from the list's position
    fresh = core.list_pod_for_all_namespaces(limit=1).metadata.resource_version
    core.create_namespaced_pod("py-410", _bare_pod("after-410", "py-410"))
    w = watch.Watch()
    first = next(iter(w.stream(core.list_namespaced_pod, "py-410", resource_version=fresh,
                               timeout_seconds=30)))
    w.stop()
    assert (first["type"], first["object"].metadata.name) == ("ADDED", "after-410")


# ---- refusals ----------------------------------------------------------------------------------------


def test_a_viewer_reads_but_a_write_is_403_forbidden(api: ApiServer,
                                                     apps: client.AppsV1Api) -> None:
    viewer = client.AppsV1Api(_client(api, "viewer"))
    assert viewer.list_daemon_set_for_all_namespaces().kind == "DaemonSetList"
    with pytest.raises(ApiException) as err:
        viewer.create_namespaced_daemon_set("py-view", daemonset("nope", "py-view"))
    assert err.value.status == 403
    body = json.loads(err.value.body)
    assert body["kind"] == "Status" and body["reason"] == "Forbidden"
    assert body["message"] == ('daemonsets.apps is forbidden: User "viewer" cannot create '
                               'resource "daemonsets" in API group "apps" in the namespace '
                               '"py-view"')
    with pytest.raises(ApiException) as gone:
        apps.read_namespaced_daemon_set("nope", "py-view")
    assert gone.value.status == 404  # nothing was written


def test_a_bad_manifest_is_422_invalid_with_the_field_as_cause(api: ApiServer,
                                                              apps: client.AppsV1Api) -> None:
    bad = daemonset("bad", "py-bad", labels={"app": "bad"})
    bad["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
    with pytest.raises(ApiException) as err:
        apps.create_namespaced_daemon_set("py-bad", bad)
    assert err.value.status == 422
    body = json.loads(err.value.body)
    assert body["reason"] == "Invalid" and body["code"] == 422
    assert body["details"]["name"] == "bad" and body["details"]["kind"] == "DaemonSet"
    causes = body["details"]["causes"]
    assert [c["field"] for c in causes] == ["spec.template.metadata.labels"]
    assert causes[0]["reason"] == "FieldValueInvalid"
    assert "`selector` does not match template `labels`" in causes[0]["message"]
    assert body["message"].startswith('DaemonSet.apps "bad" is invalid: '
                                      'spec.template.metadata.labels: Invalid value: ')
    assert api.stack.store.try_get("DaemonSet", "py-bad/bad") is None


def test_server_side_apply_through_the_python_client(apps: client.AppsV1Api) -> None:
    ns, name = "py-ssa", "ssa"
    ds = daemonset(name, ns)
    ds["spec"]["minReadySeconds"] = 5

    def apply(manager: str, body: Obj, force: bool | None = None) -> Any:
        return apps.patch_namespaced_daemon_set(
            name, ns, body, field_manager=manager, force=force,
            _content_type="application/apply-patch+yaml")

    created = apply("tool-a", ds)
    assert [(m.manager, m.operation) for m in created.metadata.managed_fields] == [
        ("tool-a", "Apply")]
    other = json.loads(json.dumps(ds))
    other["spec"]["minReadySeconds"] = 7
    with pytest.raises(ApiException) as refused:
        apply("tool-b", other)
    assert refused.value.status == 409
    status = json.loads(refused.value.body)
    assert status["reason"] == "Conflict"
    assert status["details"]["causes"] == [{"type": "FieldManagerConflict", "message":
                                            'conflict with "tool-a"',
                                            "field": ".spec.minReadySeconds"}]
    assert apps.read_namespaced_daemon_set(name, ns).spec.min_ready_seconds == 5
    same = apply("tool-b", ds)  # the same value: shared, no conflict
    assert {m.manager for m in same.metadata.managed_fields} == {"tool-a", "tool-b"}
    forced = apply("tool-b", other, force=True)
    assert forced.spec.min_ready_seconds == 7


def test_every_write_through_the_api_names_its_user_in_the_log(api: ApiServer) -> None:
    ns = "py-who"
    path = f"/apis/apps/v1/namespaces/{ns}/daemonsets"
    merge = {"Content-Type": "application/merge-patch+json"}
    wrote: dict[str, tuple[str, str]] = {}  # verb -> (user, the entry id it wrote)

    def write(verb: str, user: str, method: str, url: str, body: Any = None,
              headers: dict[str, str] | None = None) -> Obj:
        code, doc = api.request(method, url, body, token=user, headers=headers)
        assert code in (200, 201), (verb, code, doc)
        return dict(doc)

    created = write("create", "editor", "POST", path, daemonset("who", ns))
    wrote["create"] = ("editor", created["metadata"]["resourceVersion"])
    # an update carries the resourceVersion it read; the status writer may write the new
    # DaemonSet's status in between (a 409, as on any API server): read again and retry, as
    # client-go's RetryOnConflict does
    for _ in range(20):
        code, current = api.request("GET", f"{path}/who", token="admin")
        assert code == 200, current
        body = {**current, "metadata": {**current["metadata"], "labels": {"by": "put"}}}
        code, doc = api.request("PUT", f"{path}/who", body, token="admin")
        if code != 409:
            break
    assert code == 200, ("update", code, doc)
    updated = dict(doc)
    wrote["update"] = ("admin", updated["metadata"]["resourceVersion"])
    patched = write("patch", "editor", "PATCH", f"{path}/who",
                    {"metadata": {"labels": {"by": "patch"}}}, merge)
    wrote["patch"] = ("editor", patched["metadata"]["resourceVersion"])
    applied = write("apply", "admin", "PATCH", f"{path}/who?fieldManager=m&force=true",
                    json.dumps(daemonset("who", ns)).encode(),
                    {"Content-Type": "application/apply-patch+yaml"})
    wrote["apply"] = ("admin", applied["metadata"]["resourceVersion"])
    status = write("status", "admin", "PATCH", f"{path}/who/status",
                   {"status": {"numberMisscheduled": 3}}, merge)  # 0: maybe no change
    wrote["status"] = ("admin", status["metadata"]["resourceVersion"])
    write("delete", "editor", "DELETE", f"{path}/who")
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"},
             "involvedObject": {"kind": "Pod", "name": "p", "namespace": ns}}
    write("create event", "editor", "POST", f"/api/v1/namespaces/{ns}/events", event)
    write("deletecollection", "admin", "DELETE", f"/api/v1/namespaces/{ns}/events")

    by_id = {e.id: e for e in log_entries(api.stack.store) if e.key.startswith(ns + "/")}
    for verb, (user, rv) in wrote.items():
        assert by_id[rv].user == user, verb
    deletes = [(e.kind, e.user) for e in by_id.values() if e.type == "DELETED"]
    assert ("DaemonSet", "editor") in deletes and ("Event", "admin") in deletes


def test_namespaces_through_the_python_client(apps: client.AppsV1Api,
                                              core: client.CoreV1Api) -> None:
    made = core.create_namespace(client.V1Namespace(
        metadata=client.V1ObjectMeta(name="py-ns", labels={"team": "py"})))
    assert made.status.phase == "Active" and made.spec.finalizers == ["kubernetes"]
    names = [n.metadata.name for n in core.list_namespace(label_selector="team=py").items]
    assert names == ["py-ns"]
    apps.create_namespaced_daemon_set("py-ns", daemonset("py", "py-ns"))
    w = watch.Watch()
    seen = []
    core.delete_namespace("py-ns")
    for ev in w.stream(core.list_namespace, field_selector="metadata.name=py-ns",
                       timeout_seconds=60):
        seen.append((ev["type"], ev["object"].status.phase))
        if ev["type"] == "DELETED":
            w.stop()
    assert seen[0] == ("ADDED", "Terminating") and seen[-1][0] == "DELETED"
    assert apps.list_namespaced_daemon_set("py-ns").items == []
    with pytest.raises(ApiException) as err:
        core.read_namespace("py-ns")
    assert err.value.status == 404
    with pytest.raises(ApiException) as err:
        core.delete_namespace("kube-public")
    assert err.value.status == 403
    assert json.loads(err.value.body)["message"] == (
        'namespaces "kube-public" is forbidden: this namespace may not be deleted')


def test_an_object_leaving_a_watchs_selection_is_deleted_as_the_watcher_last_saw_it(
        apps: client.AppsV1Api) -> None:
    ds = daemonset("leaver", "py-sel")
    ds["metadata"]["labels"] = {"tier": "a"}
    apps.create_namespaced_daemon_set("py-sel", ds)
    w = watch.Watch()
    seen: list[tuple[str, str, str]] = []
    relabelled = ""
    for ev in w.stream(apps.list_namespaced_daemon_set, "py-sel", label_selector="tier=a",
                       timeout_seconds=60):
        md = ev["object"].metadata
        seen.append((ev["type"], md.labels.get("tier"), md.resource_version))
        if ev["type"] == "ADDED":
            relabelled = apps.patch_namespaced_daemon_set(
                "leaver", "py-sel", {"metadata": {"labels": {"tier": "b"}}}
            ).metadata.resource_version
        if ev["type"] == "DELETED":
            w.stop()
    # as upstream's cacher: the content the watcher saw, at the change's resourceVersion
    assert seen[-1] == ("DELETED", "a", relabelled)
