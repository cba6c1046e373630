"""kubectl's verbs, each through the real kubectl against one live stack with an API server
(shared by this module's tests; each test works on objects of its own)."""

from __future__ import annotations

import json
import re
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.model import meta
from shared.store.server import RedisServer
from tests.integration import apiserver_kit
from tests.integration.apiserver_kit import ApiServer
from tests.integration.controller_kit import daemonset
from tests.integration.stack import wait_for

NODES = ["node-00001", "node-00002", "node-00003"]


@pytest.fixture(scope="module")
def api(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[ApiServer]:
    with apiserver_kit.running(redis_server.url, "verbs",
                               tmp_path_factory.mktemp("verbs")) as server:
        yield server


def _apply(api: ApiServer, obj: dict[str, Any]) -> str:
    return api.kubectl("apply", "-f", "-", input=json.dumps(obj)).stdout.strip()


def _running(api: ApiServer, ns: str, name: str, n: int = 3) -> list[dict[str, Any]]:
    """Wait until the DaemonSet ``ns/name`` has ``n`` running pods of its current template."""
    key = f"{ns}/{name}"

    def done() -> list[dict[str, Any]]:
        ds = api.stack.store.try_get("DaemonSet", key)
        if ds is None:
            return []
        st = ds.get("status") or {}
        pods = [p for p in api.stack.pods(ns) if (meta.controller_ref(p) or {}).get("uid")
                == meta.uid(ds) and not meta.is_being_deleted(p)]
        ok = st.get("observedGeneration") == ds["metadata"]["generation"] and \
            st.get("updatedNumberScheduled") == n and st.get("numberReady") == n and \
            len(pods) == n
        return pods if ok else []

    return list(wait_for(done, timeout=90, what=f"{key} rolled out on {n} nodes"))


def test_get_wide_shows_upstreams_daemonset_columns(api: ApiServer) -> None:
    _apply(api, daemonset("wide", "v-wide"))
    _running(api, "v-wide", "wide")
    out = api.kubectl("get", "ds", "-n", "v-wide", "-o", "wide").stdout.splitlines()
    assert out[0].split() == ["NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE",
                              "AVAILABLE", "NODE", "SELECTOR", "AGE", "CONTAINERS", "IMAGES",
                              "SELECTOR"]
    assert out[1].split()[:6] == ["wide", "3", "3", "3", "3", "3"]
    pods = api.kubectl("get", "pods", "-n", "v-wide", "-o", "wide").stdout.splitlines()
    assert pods[0].split()[:7] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]
    assert len(pods) == 4


def test_get_selects_by_label_field_and_namespace_and_sorts(api: ApiServer) -> None:
    _apply(api, daemonset("sel", "v-sel", labels={"app": "sel", "tier": "x"}))
    _running(api, "v-sel", "sel")
    on_one = api.kubectl("get", "pods", "-n", "v-sel", "--field-selector",
                         "spec.nodeName=node-00002", "-o", "name").stdout.split()
    assert len(on_one) == 1
    assert api.kubectl("get", "pods", "-n", "v-sel", "-l", "tier in (x,y)", "-o",
                       "name").stdout.split().__len__() == 3
    none = api.kubectl("get", "pods", "-n", "v-sel", "-l", "tier=z")
    assert none.stdout == "" and "No resources found in v-sel namespace." in none.stderr
    everywhere = api.kubectl("get", "ds", "-A", "--no-headers").stdout
    assert any(line.split()[:2] == ["v-sel", "sel"] for line in everywhere.splitlines())
    by_node = api.kubectl("get", "pods", "-n", "v-sel", "--sort-by=.spec.nodeName", "-o",
                          "custom-columns=NODE:.spec.nodeName,IMAGE:.spec.containers[0].image"
                          ).stdout.splitlines()
    assert by_node[0].split() == ["NODE", "IMAGE"]
    assert [line.split()[0] for line in by_node[1:]] == NODES
    reverse = api.kubectl("get", "nodes", "--sort-by=.metadata.name", "-o",
                          "jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}").stdout
    assert reverse.split() == NODES
    bad = api.kubectl("get", "pods", "-n", "v-sel", "--field-selector", "spec.nope=1",
                      check=False)
    assert bad.returncode == 1 and "field label not supported" in bad.stderr


def test_apply_again_is_unchanged_and_an_edited_manifest_configured(api: ApiServer) -> None:
    ds = daemonset("reapply", "v-apply")
    assert _apply(api, ds) == "daemonset.apps/reapply created"
    assert _apply(api, ds) == "daemonset.apps/reapply unchanged"
    ds["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.k8s.io/pause:3.10"
    assert _apply(api, ds) == "daemonset.apps/reapply configured"
    got = api.json("get", "ds", "reapply", "-n", "v-apply")
    assert got["spec"]["template"]["spec"]["containers"][0]["image"].endswith("pause:3.10")
    assert got["metadata"]["generation"] == 2


def test_apply_with_an_unknown_field_is_refused_by_strict_validation(api: ApiServer) -> None:
    ds = daemonset("strict", "v-strict")
    ds["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    res = api.kubectl("apply", "-f", "-", input=json.dumps(ds), check=False)
    assert res.returncode == 1
    assert 'unknown field "spec.template.spec.containers[0].imagePullPolicyy"' in res.stderr
    assert api.stack.store.try_get("DaemonSet", "v-strict/strict") is None


def test_apply_of_a_host_port_with_max_surge_prints_the_servers_warning(api: ApiServer) -> None:
    # kubernetes#106417, as a Warning header kubectl prints; the object is applied
    ds = daemonset("surge", "v-surge", updateStrategy={
        "type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}})
    ds["spec"]["template"]["spec"]["containers"][0]["ports"] = [
        {"containerPort": 80, "hostPort": 8080}]
    res = api.kubectl("apply", "-f", "-", input=json.dumps(ds))
    assert res.stdout.strip() == "daemonset.apps/surge created"
    assert ("Warning: spec.template.spec.containers[0].ports[0].hostPort: host port 8080 with "
            "spec.updateStrategy.rollingUpdate.maxSurge 1: a surge pod cannot bind the host "
            "port its node's old pod holds") in res.stderr, res.stderr
    assert api.stack.store.try_get("DaemonSet", "v-surge/surge") is not None
    # server-side apply: the warning is the merged object's, once
    ssa = api.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(ds))
    assert ssa.stderr.count("Warning: spec.template.spec.containers[0].ports[0].hostPort") == 1
    plain = daemonset("nosurge", "v-surge")
    plain["spec"]["template"]["spec"]["containers"][0]["ports"] = [
        {"containerPort": 80, "hostPort": 8080}]
    assert "Warning" not in api.kubectl("apply", "-f", "-", input=json.dumps(plain)).stderr


def test_describe_daemonset_pod_and_node(api: ApiServer) -> None:
    _apply(api, daemonset("desc", "v-desc"))
    pods = _running(api, "v-desc", "desc")
    out = api.kubectl("describe", "ds", "desc", "-n", "v-desc").stdout
    assert re.search(r"^Name:\s+desc$", out, re.M)
    assert "Desired Number of Nodes Scheduled: 3" in out
    assert "SuccessfulCreate" in out  # its events
    pod = api.kubectl("describe", "pod", meta.name(pods[0]), "-n", "v-desc").stdout
    assert re.search(rf"^Name:\s+{meta.name(pods[0])}$", pod, re.M)
    assert re.search(r"^Controlled By:\s+DaemonSet/desc$", pod, re.M)
    node = api.kubectl("describe", "node", "node-00001").stdout
    assert re.search(r"^Name:\s+node-00001$", node, re.M)
    assert "v-desc" in node  # its non-terminated pods
    # its Lease, from the key its agent renews (kubectl said it failed to get one)
    assert re.search(r"^Lease:\n  HolderIdentity:\s+node-00001\n  AcquireTime:\s+<unset>\n"
                     r"  RenewTime:\s+\S", node, re.M), node
    # a simulated node reports capacity as a kubelet does: a pod's requests read as a share
    # of it (without, kubectl divided by zero: "0 (-9223372036854775808%)")
    assert re.search(r"^Capacity:\n  cpu:\s+4\n  ephemeral-storage:\s+100Gi\n"
                     r"  memory:\s+16Gi\n  pods:\s+110$", node, re.M), node
    row = next(line for line in node.splitlines() if "v-desc" in line)
    assert row.split()[2:10] == ["0", "(0%)"] * 4, row


def test_a_real_manifest_reads_back_with_upstreams_defaults(api: ApiServer) -> None:
    # calico-node: exec probes with some fields set, hostPath volumes without a type, a
    # secret volume, a service account, hostNetwork
    path = apiserver_kit.TESTDATA / "calico-node.yaml"
    assert "created" in api.kubectl("apply", "-f", str(path)).stdout
    pods = _running(api, "kube-system", "calico-node")
    got = api.json("get", "ds", "calico-node", "-n", "kube-system")
    tspec = got["spec"]["template"]["spec"]
    assert tspec["serviceAccount"] == tspec["serviceAccountName"] == "calico-node"
    assert {v["name"]: v["hostPath"].get("type") for v in tspec["volumes"]
            if "hostPath" in v}["lib-modules"] == ""
    assert "enableServiceLinks" not in tspec  # a pod's default, not a template's
    pod = api.kubectl("describe", "pod", meta.name(pods[0]), "-n", "kube-system").stdout
    assert re.search(r"^\s+Liveness:\s+exec \[.*\] delay=10s timeout=10s period=10s "
                     r"#success=1 #failure=6$", pod, re.M), pod
    assert re.search(r"^\s+Readiness:\s+exec \[.*\] delay=0s timeout=10s period=10s "
                     r"#success=1 #failure=3$", pod, re.M), pod
    assert pods[0]["spec"]["enableServiceLinks"] is True
    assert re.search(r"^Priority:\s+2000001000$", pod, re.M), pod  # the admission plugin's
    assert "priority" not in tspec
    assert "unchanged" in api.kubectl("apply", "-f", str(path)).stdout


def test_quantities_are_read_back_canonical_and_a_bad_one_is_refused(api: ApiServer) -> None:
    bad = daemonset("bad-q", "v-quantity")
    bad["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "lots"}}
    res = api.kubectl("apply", "-f", "-", input=json.dumps(bad), check=False)
    assert res.returncode == 1
    assert ('DaemonSet in version "v1" cannot be handled as a DaemonSet: quantities must '
            "match the regular expression") in res.stderr, res.stderr
    assert api.stack.store.try_get("DaemonSet", "v-quantity/bad-q") is None
    over = daemonset("over-q", "v-quantity")
    over["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"cpu": "1"}, "requests": {"cpu": "2"}}
    res = api.kubectl("apply", "-f", "-", input=json.dumps(over), check=False)
    assert res.returncode == 1 and ("spec.template.spec.containers[0].resources.requests: "
                                    'Invalid value: "2": must be less than or equal to cpu '
                                    "limit of 1") in res.stderr, res.stderr
    good = daemonset("good-q", "v-quantity")
    good["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"cpu": 0.5, "memory": "1024Mi"}}
    _apply(api, good)
    got = api.json("get", "ds", "good-q", "-n", "v-quantity")
    assert got["spec"]["template"]["spec"]["containers"][0]["resources"] == {
        "limits": {"cpu": "500m", "memory": "1Gi"}}
    pod = _running(api, "v-quantity", "good-q")[0]  # requests from limits, on the pods only
    assert pod["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "500m",
                                                                     "memory": "1Gi"}


def test_a_write_that_changes_nothing_writes_nothing(api: ApiServer) -> None:
    # as upstream's storage: no new resourceVersion (a log position), no watch event, when
    # the object as defaulted and decoded (quantities in their canonical text) is the same
    ds = daemonset("same", "v-noop")
    ds["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": 0.5}}
    _apply(api, ds)
    _running(api, "v-noop", "same")

    def rv() -> str:
        return str(api.json("get", "ds", "same", "-n", "v-noop")["metadata"]["resourceVersion"])

    before = rv()
    # the containers as the manifest has them: without their defaults, in another key order
    containers = [dict(reversed(list(c.items())))
                  for c in ds["spec"]["template"]["spec"]["containers"]]
    patch = {"spec": {"template": {"spec": {"containers": containers}}}}
    out = api.kubectl("patch", "ds", "same", "-n", "v-noop", "--type=merge", "-p",
                      json.dumps(patch)).stdout
    assert out.strip() == "daemonset.apps/same patched (no change)"
    assert rv() == before
    api.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(ds))
    applied = rv()
    api.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(ds))
    assert rv() == applied
    assert api.json("get", "ds", "same", "-n", "v-noop")["metadata"]["generation"] == 1


def test_node_leases_are_read_through_kubectl(api: ApiServer) -> None:
    names = api.kubectl("get", "leases", "-n", "kube-node-lease", "-o", "name").stdout.split()
    assert names == [f"lease.coordination.k8s.io/node-0000{i}" for i in (1, 2, 3)]
    lease = api.json("get", "lease", "node-00002", "-n", "kube-node-lease")
    node = api.json("get", "node", "node-00002")
    assert lease["spec"]["holderIdentity"] == "node-00002"
    assert lease["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", lease["spec"]["renewTime"])
    table = api.kubectl("get", "leases", "-A").stdout.splitlines()
    assert table[0].split() == ["NAMESPACE", "NAME", "HOLDER", "AGE"]
    assert api.kubectl("get", "leases", "-n", "default").stderr.strip() == \
        "No resources found in default namespace."
    missing = api.kubectl("get", "lease", "nope", "-n", "kube-node-lease", check=False)
    assert missing.returncode == 1 and 'leases.coordination.k8s.io "nope" not found' in \
        missing.stderr
    refused = api.kubectl("delete", "lease", "node-00001", "-n", "kube-node-lease",
                          check=False)
    assert refused.returncode == 1 and "(MethodNotAllowed)" in refused.stderr
    explained = api.kubectl("explain", "lease.spec.holderIdentity").stdout
    assert "GROUP:      coordination.k8s.io" in explained


def test_edit_with_an_editor_script_changes_the_object(api: ApiServer, tmp_path: Path) -> None:
    _apply(api, daemonset("edited", "v-edit"))
    editor = tmp_path / "editor.sh"
    editor.write_text("#!/bin/sh\nsed -i 's/pause:3.9/pause:3.10/' \"$1\"\n")
    editor.chmod(editor.stat().st_mode | stat.S_IEXEC)
    out = api.kubectl("edit", "ds/edited", "-n", "v-edit", env={"EDITOR": str(editor)}).stdout
    assert "daemonset.apps/edited edited" in out
    got = api.json("get", "ds", "edited", "-n", "v-edit")
    assert got["spec"]["template"]["spec"]["containers"][0]["image"].endswith("pause:3.10")


def test_diff_shows_the_change_and_writes_nothing(api: ApiServer) -> None:
    ds = daemonset("differ", "v-diff")
    _apply(api, ds)
    before = api.json("get", "ds", "differ", "-n", "v-diff")
    ds["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.k8s.io/pause:3.10"
    res = api.kubectl("diff", "-f", "-", input=json.dumps(ds), check=False)
    assert res.returncode == 1, res.stderr  # 1: there are differences
    assert re.search(r"^-\s+(- )?image: registry.k8s.io/pause:3.9$", res.stdout, re.M)
    assert re.search(r"^\+\s+(- )?image: registry.k8s.io/pause:3.10$", res.stdout, re.M)
    after = api.json("get", "ds", "differ", "-n", "v-diff")
    # the spec and its generation, not the resourceVersion: the status-writer may write the
    # status between the two reads
    assert after["spec"] == before["spec"]
    assert after["metadata"]["generation"] == before["metadata"]["generation"]


def test_patch_strategic_merge_and_json(api: ApiServer) -> None:
    _apply(api, daemonset("patched", "v-patch"))
    api.kubectl("patch", "ds", "patched", "-n", "v-patch", "-p",
                '{"spec":{"template":{"spec":{"containers":[{"name":"side","image":"b:1"}]}}}}')
    got = api.json("get", "ds", "patched", "-n", "v-patch")
    names = [c["name"] for c in got["spec"]["template"]["spec"]["containers"]]
    assert names == ["side", "main"]  # strategic: merged by name, the patch's first
    api.kubectl("patch", "ds", "patched", "-n", "v-patch", "--type=merge", "-p",
                '{"metadata":{"labels":{"merged":"yes"}}}')
    api.kubectl("patch", "ds", "patched", "-n", "v-patch", "--type=json", "-p",
                '[{"op":"remove","path":"/spec/template/spec/containers/0"}]')
    got = api.json("get", "ds", "patched", "-n", "v-patch")
    assert got["metadata"]["labels"]["merged"] == "yes"
    assert [c["name"] for c in got["spec"]["template"]["spec"]["containers"]] == ["main"]
    bad = api.kubectl("patch", "ds", "patched", "-n", "v-patch", "--type=json", "-p",
                      '[{"op":"remove","path":"/spec/nope"}]', check=False)
    assert bad.returncode == 1 and "nope" in bad.stderr
    # a test operation, as scripts guard a change: Go's words; null holds where absent
    image = "/spec/template/spec/containers/0/image"
    stale = api.kubectl("patch", "ds", "patched", "-n", "v-patch", "--type=json", "-p",
                        json.dumps([{"op": "test", "path": image, "value": "nope"}]),
                        check=False)
    assert stale.returncode == 1
    assert stale.stderr.endswith(f"testing value {image} failed: test failed\n"), stale.stderr
    guarded = api.kubectl("patch", "ds", "patched", "-n", "v-patch", "--type=json", "-p",
                          json.dumps([{"op": "test", "path": "/metadata/labels/gate",
                                       "value": None},
                                      {"op": "add", "path": "/metadata/labels/gate",
                                       "value": "shut"}]))
    assert "patched" in guarded.stdout


def test_label_and_annotate(api: ApiServer) -> None:
    _apply(api, daemonset("tagged", "v-label"))
    assert "labeled" in api.kubectl("label", "ds", "tagged", "-n", "v-label", "team=a").stdout
    assert "annotated" in api.kubectl("annotate", "ds/tagged", "-n", "v-label",
                                      "note=hello").stdout
    got = api.json("get", "ds", "tagged", "-n", "v-label")
    assert got["metadata"]["labels"]["team"] == "a"
    assert got["metadata"]["annotations"]["note"] == "hello"
    api.kubectl("label", "ds", "tagged", "-n", "v-label", "team-")
    assert "team" not in (api.json("get", "ds", "tagged", "-n", "v-label")["metadata"]
                          .get("labels") or {})


def test_taint_cordon_uncordon_and_drain_a_node(api: ApiServer) -> None:
    node = "extra-node"
    api.kubectl("create", "-f", "-", input=json.dumps(
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}}))
    assert "tainted" in api.kubectl("taint", "nodes", node, "dedicated=infra:NoSchedule").stdout
    taints = api.json("get", "node", node)["spec"]["taints"]
    assert {"key": "dedicated", "value": "infra", "effect": "NoSchedule"} in taints
    api.kubectl("taint", "nodes", node, "dedicated=infra:NoSchedule-")
    assert "cordoned" in api.kubectl("cordon", f"node/{node}").stdout
    assert api.json("get", "node", node)["spec"]["unschedulable"] is True
    assert "uncordoned" in api.kubectl("uncordon", node).stdout
    assert not api.json("get", "node", node)["spec"].get("unschedulable")
    out = api.kubectl("drain", node, "--ignore-daemonsets", "--timeout=60s")
    assert f"node/{node} drained" in out.stdout + out.stderr
    assert api.json("get", "node", node)["spec"]["unschedulable"] is True
    api.kubectl("delete", "node", node)


def test_drain_without_eviction_deletes_a_bare_pod(api: ApiServer) -> None:
    # --disable-eviction: kubectl's typed client deletes each pod with DeleteOptions in
    # protobuf (refused as "not accepted as protobuf" before the API server read them)
    node = NODES[2]
    api.kubectl("run", "bare", "-n", "v-drain", "--image=registry.k8s.io/pause:3.9",
                "--overrides", json.dumps({"spec": {"nodeName": node}}))
    out = api.kubectl("drain", node, "--ignore-daemonsets", "--disable-eviction", "--force",
                      "--timeout=60s")
    assert "pod/bare deleted" in out.stdout and f"node/{node} drained" in out.stdout
    assert api.stack.store.try_get("Pod", "v-drain/bare") is None
    api.kubectl("uncordon", node)


def test_an_object_being_deleted_takes_no_new_finalizer_nor_a_second_create(
        api: ApiServer) -> None:
    ds = daemonset("held", "v-fin")
    ds["metadata"]["finalizers"] = ["example.com/hold"]
    _apply(api, ds)
    api.kubectl("delete", "ds", "held", "-n", "v-fin", "--wait=false")
    added = api.kubectl("patch", "ds", "held", "-n", "v-fin", "--type=merge", "-p",
                        '{"metadata":{"finalizers":["example.com/hold","a/b"]}}', check=False)
    assert added.returncode == 1
    assert added.stderr == (
        'The DaemonSet "held" is invalid: metadata.finalizers: Forbidden: no new finalizers '
        'can be added if the object is being deleted, found new finalizers '
        '[]string{"a/b"}\n')
    again = api.kubectl("create", "-f", "-", input=json.dumps(ds), check=False)
    assert again.returncode == 1
    assert 'object is being deleted: daemonsets.apps "held" already exists' in again.stderr
    api.kubectl("patch", "ds", "held", "-n", "v-fin", "--type=merge", "-p",
                '{"metadata":{"finalizers":null}}')
    wait_for(lambda: api.stack.store.try_get("DaemonSet", "v-fin/held") is None,
             timeout=30, what="the DaemonSet gone with its last finalizer")


def _deletion(api: ApiServer, kind: str, name: str, ns: str) -> tuple[float, int, int]:
    """(deletionTimestamp, deletionGracePeriodSeconds, generation) as kubectl reads them."""
    out = api.kubectl("get", kind, name, "-n", ns, "-o", "jsonpath={.metadata.deletionTimestamp}"
                      " {.metadata.deletionGracePeriodSeconds} {.metadata.generation}").stdout
    stamp, grace, generation = out.split()
    due = meta.parse_time(stamp)
    assert due is not None
    return due, int(grace), int(generation)


def test_a_pods_deletion_timestamp_is_its_deadline_and_a_shorter_grace_moves_it_back(
        api: ApiServer) -> None:
    """As upstream's BeforeDelete: a graceful delete sets deletionTimestamp to now plus the
    grace period (when the pod should be gone) and raises the generation; a second delete
    with a longer period changes nothing, a shorter one moves the deadline back."""
    ns = "v-grace"
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "held", "namespace": ns, "finalizers": ["example.com/hold"]},
           "spec": {"nodeName": NODES[0], "terminationGracePeriodSeconds": 30,
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}}
    _apply(api, pod)
    before = time.time()
    out = api.kubectl("delete", "pod", "held", "-n", ns, "--grace-period=60", "--wait=false")
    after = time.time()
    assert out.stdout == 'pod "held" deleted\n'
    due, grace, generation = _deletion(api, "pod", "held", ns)
    assert int(before) + 60 <= due <= after + 60 and (grace, generation) == (60, 2)
    api.kubectl("delete", "pod", "held", "-n", ns, "--grace-period=90", "--wait=false")
    assert _deletion(api, "pod", "held", ns) == (due, 60, 2)
    api.kubectl("delete", "pod", "held", "-n", ns, "--grace-period=5", "--wait=false")
    assert _deletion(api, "pod", "held", ns) == (due - 55, 5, 2)
    described = api.kubectl("describe", "pod", "held", "-n", ns).stdout
    assert re.search(r"Termination Grace Period:\s+5s", described)
    # its last finalizer removed, its node agent removes it (the grace period has run out
    # by then or soon after)
    api.kubectl("patch", "pod", "held", "-n", ns, "--type=json", "-p",
                '[{"op":"remove","path":"/metadata/finalizers"}]')
    wait_for(lambda: api.stack.store.try_get("Pod", f"{ns}/held") is None, timeout=30,
             what="the pod removed by its node agent")


def test_a_daemonset_held_by_a_finalizer_is_marked_deleting_with_its_generation_raised(
        api: ApiServer) -> None:
    """markAsDeleting: deletionTimestamp now, deletionGracePeriodSeconds 0, generation
    raised; the controller syncs nothing of a DaemonSet being deleted, so its
    observedGeneration stays behind, as upstream's."""
    ns, name = "v-mark", "marked"
    ds = daemonset(name, ns)
    ds["metadata"]["finalizers"] = ["example.com/hold"]
    _apply(api, ds)
    _running(api, ns, name)
    before = time.time()
    api.kubectl("delete", "ds", name, "-n", ns, "--wait=false")
    due, grace, generation = _deletion(api, "ds", name, ns)
    assert int(before) <= due <= time.time() and (grace, generation) == (0, 2)
    api.kubectl("delete", "ds", name, "-n", ns, "--wait=false")
    assert _deletion(api, "ds", name, ns) == (due, 0, 2)
    assert api.json("get", "ds", name, "-n", ns)["status"]["observedGeneration"] == 1
    api.kubectl("patch", "ds", name, "-n", ns, "--type=merge", "-p",
                '{"metadata":{"finalizers":null}}')
    wait_for(lambda: not api.stack.pods(ns), timeout=60, what="its pods gone")


def test_a_negative_grace_period_deletes_a_pod_with_one_second(api: ApiServer) -> None:
    """As upstream's BeforeDelete: a negative gracePeriodSeconds is taken as 1 s, not
    refused. kubectl never sends one (its --grace-period=-1 is its default: it sends none,
    and the pod's own period is used), so the request is kubectl's --raw."""
    ns = "v-negative"
    for name in ("raw", "own"):
        _apply(api, {"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": name, "namespace": ns,
                                  "finalizers": ["example.com/hold"]},
                     "spec": {"nodeName": NODES[0], "terminationGracePeriodSeconds": 30,
                              "containers": [{"name": "c",
                                              "image": "registry.k8s.io/pause:3.9"}]}})
    before = time.time()
    out = api.kubectl("delete", "--raw",
                      f"/api/v1/namespaces/{ns}/pods/raw?gracePeriodSeconds=-5")
    after = time.time()
    assert json.loads(out.stdout)["metadata"]["deletionGracePeriodSeconds"] == 1
    due, grace, generation = _deletion(api, "pod", "raw", ns)
    assert int(before) + 1 <= due <= after + 1 and (grace, generation) == (1, 2)
    api.kubectl("delete", "pod", "own", "-n", ns, "--grace-period=-1", "--wait=false")
    assert _deletion(api, "pod", "own", ns)[1:] == (30, 2)
    for name in ("raw", "own"):
        api.kubectl("patch", "pod", name, "-n", ns, "--type=json", "-p",
                    '[{"op":"remove","path":"/metadata/finalizers"}]')
    wait_for(lambda: not api.stack.pods(ns), timeout=60, what="the pods removed")


def test_a_second_delete_with_the_other_cascade_swaps_the_propagation_finalizer(
        api: ApiServer) -> None:
    """As upstream's store (deletionFinalizersForGarbageCollection): a DaemonSet its
    foreground deletion holds (here by a pod a finalizer keeps), deleted again with
    --cascade=orphan, is held by orphan instead; the garbage collector then takes the
    DaemonSet's reference off the pod left, and the DaemonSet goes."""
    ns, name = "v-swap", "swapped"
    _apply(api, daemonset(name, ns))
    kept = meta.name(_running(api, ns, name)[0])
    api.kubectl("patch", "pod", kept, "-n", ns, "--type=merge", "-p",
                '{"metadata":{"finalizers":["example.com/hold"]}}')
    api.kubectl("delete", "ds", name, "-n", ns, "--cascade=foreground", "--wait=false")
    wait_for(lambda: [meta.name(p) for p in api.stack.pods(ns)] == [kept], timeout=60,
             what="its other pods gone, the held one left")
    assert meta.finalizers(api.json("get", "ds", name, "-n", ns)) == ["foregroundDeletion"]
    out = api.kubectl("delete", "ds", name, "-n", ns, "--cascade=orphan", "--wait=false")
    assert out.stdout == f'daemonset.apps "{name}" deleted\n'
    left = api.stack.store.try_get("DaemonSet", f"{ns}/{name}")
    assert left is None or meta.finalizers(left) == ["orphan"]
    wait_for(lambda: api.stack.store.try_get("DaemonSet", f"{ns}/{name}") is None,
             timeout=30, what="the DaemonSet gone once its pod is orphaned")
    pod = api.stack.store.get("Pod", f"{ns}/{kept}")
    assert not meta.owner_references(pod) and meta.finalizers(pod) == ["example.com/hold"]
    api.kubectl("patch", "pod", kept, "-n", ns, "--type=json", "-p",
                '[{"op":"remove","path":"/metadata/finalizers"}]')
    wait_for(lambda: not api.stack.pods(ns), timeout=60, what="the held pod removed")


def test_set_image_and_rollout_status_history_undo_restart(api: ApiServer) -> None:
    ns, name = "v-roll", "rolled"
    _apply(api, daemonset(name, ns))
    _running(api, ns, name)
    out = api.kubectl("set", "image", f"ds/{name}", "-n", ns, "main=registry.k8s.io/pause:3.10")
    assert "image updated" in out.stdout
    status = api.kubectl("rollout", "status", f"ds/{name}", "-n", ns, "--timeout=90s").stdout
    assert f'daemon set "{name}" successfully rolled out' in status
    history = api.kubectl("rollout", "history", f"ds/{name}", "-n", ns).stdout
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"]
    rev1 = api.kubectl("rollout", "history", f"ds/{name}", "-n", ns, "--revision=1").stdout
    assert "pause:3.9" in rev1
    assert "rolled back" in api.kubectl("rollout", "undo", f"ds/{name}", "-n", ns).stdout
    _running(api, ns, name)
    image = api.json("get", "ds", name, "-n", ns)["spec"]["template"]["spec"]["containers"][0]
    assert image["image"].endswith("pause:3.9")
    api.kubectl("rollout", "undo", f"ds/{name}", "-n", ns, "--to-revision=2")
    _running(api, ns, name)
    image = api.json("get", "ds", name, "-n", ns)["spec"]["template"]["spec"]["containers"][0]
    assert image["image"].endswith("pause:3.10")
    assert "restarted" in api.kubectl("rollout", "restart", f"ds/{name}", "-n", ns).stdout
    got = api.json("get", "ds", name, "-n", ns)
    assert "kubectl.kubernetes.io/restartedAt" in got["spec"]["template"]["metadata"][
        "annotations"]
    api.kubectl("rollout", "status", f"ds/{name}", "-n", ns, "--timeout=90s")


@pytest.mark.parametrize("cascade", ["background", "foreground", "orphan"])
def test_delete_with_each_cascade(api: ApiServer, cascade: str) -> None:
    ns, name = f"v-del-{cascade}", "doomed"
    _apply(api, daemonset(name, ns))
    _running(api, ns, name)
    out = api.kubectl("delete", "ds", name, "-n", ns, f"--cascade={cascade}",
                      "--timeout=90s").stdout
    assert f'daemonset.apps "{name}" deleted' in out
    assert api.stack.store.try_get("DaemonSet", f"{ns}/{name}") is None  # kubectl waited
    if cascade == "orphan":
        assert len(api.stack.pods(ns)) == 3
        assert all(meta.controller_ref(p) is None for p in api.stack.pods(ns))
    else:
        wait_for(lambda: not api.stack.pods(ns), timeout=60, what="the pods gone")


def test_wait_for_jsonpath(api: ApiServer) -> None:
    _apply(api, daemonset("waited", "v-wait"))
    out = api.kubectl("wait", "ds/waited", "-n", "v-wait",
                      "--for=jsonpath={.status.numberReady}=3", "--timeout=90s").stdout
    assert "daemonset.apps/waited condition met" in out


def test_explain_daemonset_update_strategy(api: ApiServer) -> None:
    out = api.kubectl("explain", "daemonset.spec.updateStrategy").stdout
    assert "KIND:       DaemonSet" in out
    assert "rollingUpdate" in out and "type" in out


def test_get_events_lists_the_controllers_events(api: ApiServer) -> None:
    _apply(api, daemonset("evented", "v-ev"))
    _running(api, "v-ev", "evented")
    out = api.kubectl("get", "events", "-n", "v-ev").stdout.splitlines()
    assert out[0].split()[:4] == ["LAST", "SEEN", "TYPE", "REASON"]
    assert any("SuccessfulCreate" in line and "daemonset/evented" in line for line in out)
    ev = yaml.safe_load(api.kubectl("get", "ev", "-n", "v-ev", "-o", "yaml").stdout)
    assert ev["items"] and all(i["kind"] == "Event" for i in ev["items"])
    # the controller's, as kube-controller-manager's: its component, no host or instance
    wide = api.kubectl("get", "events", "-n", "v-ev", "-o", "wide",
                       "--field-selector", "reason=SuccessfulCreate").stdout.splitlines()
    source = wide[0].index("SOURCE")
    assert {line[source:].split()[0] for line in wide[1:]} == {"daemonset-controller"}


def _managers(api: ApiServer, ns: str, name: str) -> dict[str, str]:
    ds = api.json("get", "ds", name, "-n", ns, "--show-managed-fields")
    return {e["manager"]: e["operation"] for e in ds["metadata"].get("managedFields") or []}


def test_server_side_apply_records_owners_refuses_a_conflict_and_forces(api: ApiServer) -> None:
    ns, name = "ssa", "ssa-ds"
    ds = daemonset(name, ns)
    ds["metadata"]["labels"] = {"team": "a"}
    manifest = json.dumps(ds)
    out = api.kubectl("apply", "--server-side", "-f", "-", input=manifest).stdout
    assert f"daemonset.apps/{name} serverside-applied" in out
    assert _managers(api, ns, name) == {"kubectl": "Apply"}
    fields = api.json("get", "ds", name, "-n", ns, "--show-managed-fields"
                      )["metadata"]["managedFields"][0]["fieldsV1"]
    container = ds["spec"]["template"]["spec"]["containers"][0]["name"]
    item = fields["f:spec"]["f:template"]["f:spec"]["f:containers"][f'k:{{"name":"{container}"}}']
    assert item["."] == {} and "f:image" in item and fields["f:metadata"]["f:labels"] == {
        "f:team": {}}

    api.kubectl("set", "image", f"ds/{name}", "-n", ns, f"{container}=busybox:1.37")
    assert _managers(api, ns, name) == {"kubectl": "Apply", "kubectl-set": "Update"}
    ds["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:1.38"
    proc = api.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(ds), check=False)
    assert proc.returncode == 1
    assert ('Apply failed with 1 conflict: conflict with "kubectl-set" using apps/v1: '
            f'.spec.template.spec.containers[name="{container}"].image') in proc.stderr
    image = "{.spec.template.spec.containers[0].image}"
    assert api.kubectl("get", "ds", name, "-n", ns, "-o", f"jsonpath={image}"
                       ).stdout == "busybox:1.37"  # nothing written

    api.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=json.dumps(ds))
    assert api.kubectl("get", "ds", name, "-n", ns, "-o", f"jsonpath={image}"
                       ).stdout == "busybox:1.38"
    assert _managers(api, ns, name) == {"kubectl": "Apply"}  # kubectl-set owned only that

    del ds["metadata"]["labels"]  # a field the applier no longer applies goes
    api.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(ds))
    assert "team" not in (api.json("get", "ds", name, "-n", ns)["metadata"].get("labels")
                          or {})


def test_server_side_apply_removes_the_list_items_it_no_longer_applies(api: ApiServer) -> None:
    ns, name = "ssa-drop", "drop"
    ds = daemonset(name, ns)
    pod_spec = ds["spec"]["template"]["spec"]
    main = pod_spec["containers"][0]
    pod_spec["containers"].append({"name": "side", "image": main["image"],
                                   "env": [{"name": "A", "value": "1"}]})
    pod_spec["volumes"] = [{"name": "v", "emptyDir": {}}]
    api.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(ds))
    pod_spec["containers"] = [main]
    del pod_spec["volumes"]
    out = api.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(ds)).stdout
    assert f"daemonset.apps/{name} serverside-applied" in out
    live = api.json("get", "ds", name, "-n", ns)["spec"]["template"]["spec"]
    assert [c["name"] for c in live["containers"]] == ["main"] and "volumes" not in live


def test_one_empty_managed_fields_entry_clears_them(api: ApiServer) -> None:
    ns, name = "mf-reset", "reset"
    api.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(daemonset(name, ns)))
    assert _managers(api, ns, name) == {"kubectl": "Apply"}
    # the documented reset; the patch changes nothing else, so it owns nothing
    api.kubectl("patch", "ds", name, "-n", ns, "--type=merge",
                "-p", '{"metadata":{"managedFields":[{}]}}')
    assert _managers(api, ns, name) == {}
    api.kubectl("label", "ds", name, "-n", ns, "team=a")
    assert _managers(api, ns, name) == {"kubectl-label": "Update"}


def test_server_side_apply_needs_a_field_manager_and_not_on_a_subresource(
        api: ApiServer) -> None:
    ns, name = "ssa-opts", "opts"
    body = json.dumps(daemonset(name, ns)).encode()
    path = f"/apis/apps/v1/namespaces/{ns}/daemonsets/{name}"
    ssa = {"Content-Type": "application/apply-patch+yaml"}
    code, status = api.request("PATCH", path, body, headers=ssa)
    assert code == 422 and status["reason"] == "Invalid"
    assert status["message"] == ('PatchOptions.meta.k8s.io "" is invalid: fieldManager: '
                                 "Required value: is required for apply patch")
    code, status = api.request("PATCH", path + "?fieldManager=me&force=true", b"{}",
                               headers={"Content-Type": "application/merge-patch+json"})
    assert code == 422 and "force: Forbidden" in status["message"]
    code, status = api.request("PATCH", path + "/status?fieldManager=me", body, headers=ssa)
    assert code == 415 and status["reason"] == "UnsupportedMediaType"
    withmf = json.loads(body)
    withmf["metadata"]["managedFields"] = []
    code, status = api.request("PATCH", path + "?fieldManager=me",
                               json.dumps(withmf).encode(), headers=ssa)
    assert code == 400 and status["message"] == "metadata.managedFields must be nil"
    assert api.kubectl("get", "ds", "-n", ns, "-o", "name").stdout == ""  # none created


POD_SPEC_FORBIDDEN = (
    "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
    "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be "
    "set to 1 if it was previously negative)")


def test_a_pod_cannot_be_moved_to_another_node_by_a_patch(api: ApiServer) -> None:
    # pkg/apis/core/validation ValidatePodUpdate: a pod's spec is fixed but for images,
    # activeDeadlineSeconds, tolerations (added) and a negative grace period set to 1
    _apply(api, daemonset("pinned", "v-pinned"))
    pods = _running(api, "v-pinned", "pinned")
    pod = next(p for p in pods if p["spec"]["nodeName"] == NODES[0])
    name = meta.name(pod)
    moved = api.kubectl("patch", "pod", name, "-n", "v-pinned", "--type=merge", "-p",
                        json.dumps({"spec": {"nodeName": NODES[1]}}), check=False)
    assert moved.returncode == 1
    assert f'The Pod "{name}" is invalid: {POD_SPEC_FORBIDDEN}\n' in moved.stderr
    assert '"nodeName": "node-00001"' in moved.stderr  # the diff names what differs
    assert api.json("get", "pod", name, "-n", "v-pinned")["spec"]["nodeName"] == NODES[0]
    # what a pod's update may change, it still does, and the DaemonSet keeps its three pods
    labelled = api.kubectl("label", "pod", name, "-n", "v-pinned", "extra=1")
    assert labelled.stdout == f"pod/{name} labeled\n"
    assert sorted(p["spec"]["nodeName"] for p in _running(api, "v-pinned", "pinned")) == NODES


def test_a_patch_of_a_node_or_pod_leaves_its_status_to_the_status_subresource(
        api: ApiServer) -> None:
    # PrepareForUpdate of pkg/registry/core/{node,pod}/strategy.go keeps the old status on an
    # update of the object itself: status changes go through /status
    capacity = api.json("get", "node", NODES[2])["status"]["capacity"]
    node = api.kubectl("patch", "node", NODES[2], "--type=merge", "-p",
                       json.dumps({"status": {"capacity": {"cpu": "977"}}}))
    assert node.stdout == f"node/{NODES[2]} patched (no change)\n"
    assert api.json("get", "node", NODES[2])["status"]["capacity"] == capacity
    _apply(api, daemonset("statusless", "v-statusless"))
    pod = _running(api, "v-statusless", "statusless")[0]
    name, ip = meta.name(pod), pod["status"].get("podIP")
    patched = api.kubectl("patch", "pod", name, "-n", "v-statusless", "--type=merge", "-p",
                          json.dumps({"status": {"podIP": "10.254.254.254"}}))
    assert patched.stdout == f"pod/{name} patched (no change)\n"
    assert api.json("get", "pod", name, "-n", "v-statusless")["status"].get("podIP") == ip
    # through /status it is written
    via_status = api.kubectl("patch", "pod", name, "-n", "v-statusless", "--subresource=status",
                             "--type=merge", "-p", json.dumps({"status": {"message": "hi"}}))
    assert via_status.stdout == f"pod/{name} patched\n"
    assert api.json("get", "pod", name, "-n", "v-statusless")["status"]["message"] == "hi"


def test_replace_of_a_stale_manifest_does_not_overwrite_an_object_recreated_by_its_name(
        api: ApiServer) -> None:
    # rest.DefaultUpdatedObjectInfo: a PUT's metadata.uid is a precondition the storage checks
    # (storage.Preconditions.Check), answered as a Conflict (InterpretUpdateError)
    ds = daemonset("recreated", "v-uid", node_selector={"nowhere": "true"})
    _apply(api, ds)
    old = api.json("get", "ds", "recreated", "-n", "v-uid")
    old_uid = old["metadata"]["uid"]
    api.kubectl("delete", "ds", "recreated", "-n", "v-uid")
    wait_for(lambda: api.stack.store.try_get("DaemonSet", "v-uid/recreated") is None,
             what="the DaemonSet gone")
    _apply(api, ds)
    new_uid = meta.uid(api.stack.store.get("DaemonSet", "v-uid/recreated"))
    assert new_uid != old_uid
    del old["metadata"]["resourceVersion"]
    old["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.k8s.io/pause:3.10"
    replaced = api.kubectl("replace", "-f", "-", input=json.dumps(old), check=False)
    assert replaced.returncode == 1
    assert ('Error from server (Conflict): error when replacing "STDIN": Operation cannot be '
            'fulfilled on daemonsets.apps "recreated": StorageError: invalid object, Code: 4, '
            "Key: /registry/daemonsets/v-uid/recreated, ResourceVersion: 0, AdditionalErrorMsg: "
            f"Precondition failed: UID in precondition: {old_uid}, UID in object meta: {new_uid}"
            ) in replaced.stderr, replaced.stderr
    got = api.stack.store.get("DaemonSet", "v-uid/recreated")
    assert got["spec"]["template"]["spec"]["containers"][0]["image"] == \
        ds["spec"]["template"]["spec"]["containers"][0]["image"]
