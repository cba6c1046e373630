"""The real kubectl against a live stack through `daemonbus run apiserver`: discovery, apply
of every real manifest, get in its output formats, watch, delete, and who wrote what."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from services.cli import context
from services.cli.main import cli
from services.replay import why
from shared.model import kinds, meta
from tests import testdata
from tests.integration import apiserver_kit
from tests.integration.apiserver_kit import TESTDATA, ApiServer
from tests.integration.stack import Stack, wait_for

FLUENTD = TESTDATA / "kubernetes-website-fluentd-elasticsearch.yaml"


@pytest.fixture
def api(stack: Stack, tmp_path: Path) -> ApiServer:
    return apiserver_kit.in_front(stack, tmp_path)


def _ready_pods(stack: Stack, ns: str, n: int) -> None:
    wait_for(lambda: len([p for p in stack.pods(ns) if (p.get("status") or {})
                          .get("phase") == "Running"]) >= n, timeout=60, what=f"{n} pods")


def test_kubectl_version_and_api_resources(api: ApiServer) -> None:
    out = api.kubectl("version").stdout
    assert "Server Version: v1.32" in out
    res = api.kubectl("api-resources", "--no-headers").stdout
    # (pods and nodes twice: the core group's, and the Metrics API's, which have no short name)
    rows = {(words[0], words[-3]): words for line in res.splitlines()
            if (words := line.split())}
    assert rows["daemonsets", "apps/v1"][1:] == ["ds", "apps/v1", "true", "DaemonSet"]
    assert rows["pods", "v1"][1:] == ["po", "v1", "true", "Pod"]
    assert rows["nodes", "v1"][1:] == ["no", "v1", "false", "Node"]
    assert rows["events", "v1"][1] == "ev" and rows["namespaces", "v1"][1] == "ns"
    assert rows["pods", "metrics.k8s.io/v1beta1"][1:] == [
        "metrics.k8s.io/v1beta1", "true", "PodMetrics"]
    cats = api.kubectl("api-resources", "--categories=all", "-o", "name").stdout.split()
    assert sorted(cats) == ["daemonsets.apps", "pods", "services"]
    paths = json.loads(api.kubectl("get", "--raw", "/").stdout)["paths"]
    assert paths == sorted(paths)
    assert {"/api/v1", "/apis/apps", "/apis/apps/v1", "/openapi/v2", "/openapi/v3",
            "/version", "/healthz", "/readyz/watch-cache", "/metrics"} <= set(paths)


def test_kubectl_reads_the_health_checks_and_metrics(api: ApiServer) -> None:
    assert api.kubectl("get", "--raw", "/readyz").stdout == "ok"
    verbose = api.kubectl("get", "--raw", "/readyz?verbose").stdout
    assert verbose == "[+]ping ok\n[+]log ok\n[+]watch-cache ok\nreadyz check passed\n"
    assert api.kubectl("get", "--raw", "/livez?verbose&exclude=ping").stdout == \
        "[+]ping excluded: ok\nlivez check passed\n"
    assert api.kubectl("get", "--raw", "/readyz/watch-cache").stdout == "ok"
    api.kubectl("get", "pods", "-A")
    metrics = api.kubectl("get", "--raw", "/metrics").stdout
    listed = [line for line in metrics.splitlines()
              if line.startswith("apiserver_request_total{") and 'resource="pods"' in line]
    assert listed and all(float(line.split()[-1]) >= 1 for line in listed), metrics[:2000]
    gone = api.kubectl("get", "--raw", "/readyz/etcd", check=False)
    assert gone.returncode == 1 and "(NotFound)" in gone.stderr


def test_kubectl_apply_every_testdata_manifest_creates_it(api: ApiServer) -> None:
    files = testdata.manifests()
    assert len(files) == 8
    for f in files:
        out = api.kubectl("apply", "-f", str(f)).stdout
        assert " created" in out, out
    for f in files:
        doc = yaml.safe_load(f.read_text())
        ns = doc["metadata"].get("namespace", "default")
        got = api.json("get", "ds", doc["metadata"]["name"], "-n", ns)
        assert got["spec"]["template"]["spec"]["containers"][0]["image"] == \
            doc["spec"]["template"]["spec"]["containers"][0]["image"]
        assert got["metadata"]["generation"] == 1


def test_kubectl_apply_after_daemonbus_apply_finds_each_manifest_unchanged(
        api: ApiServer) -> None:
    # daemonbus apply annotates what it applies as kubectl apply does, byte for byte: kubectl
    # neither warns of a missing annotation nor writes anything, and an edit merges three ways
    for f in testdata.manifests():
        done = CliRunner().invoke(cli, ["--redis-url", api.stack.redis_url, "--prefix",
                                        api.stack.prefix, "apply", "-f", str(f)],
                                  obj=context.CliEnv(), catch_exceptions=False)
        assert done.exit_code == 0 and " created" in done.stdout, done.output
        out = api.kubectl("apply", "-f", str(f), check=False)
        assert re.findall(r"^daemonset\.apps/\S+ unchanged$", out.stdout, re.M), out.stdout
        assert "last-applied-configuration" not in out.stderr, out.stderr
    edited = yaml.safe_load(FLUENTD.read_text())
    edited["spec"]["template"]["spec"]["containers"][0].pop("resources")
    ns, name = edited["metadata"]["namespace"], edited["metadata"]["name"]
    out = api.kubectl("apply", "-f", "-", input=yaml.safe_dump(edited)).stdout
    assert out.strip() == f"daemonset.apps/{name} configured"
    got = api.json("get", "ds", name, "-n", ns)
    assert "resources" not in got["spec"]["template"]["spec"]["containers"][0]  # removed


def test_a_namespace_held_in_terminating_is_labelled_and_finalized_by_hand(
        api: ApiServer) -> None:
    api.kubectl("create", "namespace", "stuck")
    held = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "held", "namespace": "stuck",
                         "finalizers": ["example.com/hold"]},
            "spec": {"containers": [{"name": "main", "image": "busybox"}]}}
    api.kubectl("apply", "-f", "-", input=json.dumps(held))
    api.kubectl("delete", "namespace", "stuck", "--wait=false")
    wait_for(lambda: meta.is_being_deleted(api.stack.store.get("Pod", "stuck/held")),
             what="the held pod being deleted")
    # what holds it, as upstream's namespace controller reports it
    wait_for(lambda: "NamespaceFinalizersRemaining" in api.kubectl("describe", "ns",
                                                                   "stuck").stdout,
             what="the namespace's conditions")
    described = api.kubectl("describe", "ns", "stuck").stdout
    assert re.search(r"NamespaceContentRemaining +True .* SomeResourcesRemain +Some resources "
                     r"are remaining: pods\. has 1 resource instances", described), described
    assert re.search(r"NamespaceFinalizersRemaining +True .* SomeFinalizerRemain +Some "
                     r"finalizers are remaining: example\.com/hold in 1 resource instances",
                     described), described
    # a label on a namespace being deleted is only a label
    api.kubectl("label", "namespace", "stuck", "owner=me")
    ns = api.json("get", "ns", "stuck")
    assert ns["status"]["phase"] == "Terminating" and ns["metadata"]["labels"]["owner"] == "me"
    # the remedy of a namespace stuck Terminating: its finalizers removed through /finalize
    refused = api.kubectl("get", "--raw", "/api/v1/namespaces/stuck/finalize", check=False)
    assert refused.stderr.startswith("Error from server (MethodNotAllowed)")
    ns["spec"]["finalizers"] = []
    api.kubectl("replace", "--raw", "/api/v1/namespaces/stuck/finalize", "-f", "-",
                input=json.dumps(ns))
    assert api.stack.store.try_get("Namespace", "/stuck") is None
    # what it held is still there (as upstream leaves it), so the namespace is, without an object
    assert api.json("get", "ns", "stuck")["metadata"]["uid"] == ""
    status = json.loads(api.kubectl("get", "--raw", "/api/v1/namespaces/default/status").stdout)
    assert status["status"] == {"phase": "Active"}


def test_kubectl_namespaces_are_made_labelled_and_deleted_with_everything_in_them(
        api: ApiServer, tmp_path: Path) -> None:
    assert api.kubectl("create", "namespace", "team-a").stdout == "namespace/team-a created\n"
    ns = api.json("get", "ns", "team-a")
    assert ns["metadata"]["labels"] == {"kubernetes.io/metadata.name": "team-a"}
    assert ns["spec"] == {"finalizers": ["kubernetes"]} and ns["status"] == {"phase": "Active"}
    assert "generateName" not in ns["metadata"]  # not the protobuf body's empty string
    for name in ("team-a", "kube-system"):
        again = api.kubectl("create", "namespace", name, check=False)
        assert again.stderr == (f'Error from server (AlreadyExists): namespaces "{name}" '
                                "already exists\n")
    assert api.kubectl("label", "ns", "team-a", "owner=me").stdout == \
        "namespace/team-a labeled\n"
    assert api.kubectl("get", "ns", "-l", "owner=me", "-o", "name").stdout == \
        "namespace/team-a\n"

    # a Namespace in a manifest with what goes in it
    doc = yaml.safe_load(FLUENTD.read_text())
    doc["metadata"]["namespace"] = "team-b"
    bundle = tmp_path / "team-b.yaml"
    bundle.write_text(yaml.safe_dump_all([
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": "team-b", "labels": {"team": "b"}}}, doc]))
    assert api.kubectl("apply", "-f", str(bundle)).stdout == (
        "namespace/team-b created\ndaemonset.apps/fluentd-elasticsearch created\n")
    assert api.kubectl("apply", "-f", str(bundle)).stdout == (
        "namespace/team-b unchanged\ndaemonset.apps/fluentd-elasticsearch unchanged\n")
    _ready_pods(api.stack, "team-b", 3)

    # a namespace without an object: made by what is in it, as old as the oldest thing in it
    doc["metadata"]["namespace"] = "team-c"
    api.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc))
    ds = api.json("get", "ds", "fluentd-elasticsearch", "-n", "team-c")
    ns = api.json("get", "ns", "team-c")
    assert ns["metadata"]["creationTimestamp"] == ds["metadata"]["creationTimestamp"]
    ages = [row.split()[-1] for row in api.kubectl("get", "ns", "--no-headers").stdout.splitlines()]
    assert "<unknown>" not in ages
    assert "Namespace provides a scope for Names" in api.kubectl("explain", "ns").stdout
    born = meta.parse_time(ns["metadata"]["creationTimestamp"]) or 0.0
    wait_for(lambda: time.time() > born + 2, what="a creation time that is not now")
    api.kubectl("label", "ns", "team-c", "team=c")  # gives it its object, as old as it was
    labelled = api.json("get", "ns", "team-c")
    assert labelled["metadata"]["uid"] and labelled["metadata"]["labels"]["team"] == "c"
    assert labelled["metadata"]["creationTimestamp"] == ns["metadata"]["creationTimestamp"]

    # deleting one deletes what is in it first; a finalizer holds it in Terminating, and
    # nothing new may be created in it meanwhile
    held = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "held", "namespace": "team-b",
                         "finalizers": ["example.com/hold"]},
            "spec": {"containers": [{"name": "main", "image": "busybox"}]}}
    api.kubectl("apply", "-f", "-", input=json.dumps(held))
    out = api.kubectl("delete", "ns", "team-b", "--wait=false").stdout
    assert out == 'namespace "team-b" deleted\n'
    wait_for(lambda: api.stack.store.list("DaemonSet", "team-b") == [] and
             [meta.name(p) for p in api.stack.pods("team-b")] == ["held"],
             timeout=60, what="team-b emptied but for the held pod")
    assert api.json("get", "ns", "team-b")["status"]["phase"] == "Terminating"
    refused = api.kubectl("run", "late", "-n", "team-b", "--image=busybox", check=False)
    assert refused.stderr == ('Error from server (Forbidden): pods "late" is forbidden: unable '
                              "to create new content in namespace team-b because it is being "
                              "terminated\n")
    api.kubectl("patch", "pod", "held", "-n", "team-b", "--type=json",
                "-p", '[{"op": "remove", "path": "/metadata/finalizers"}]')
    api.kubectl("wait", "--for=delete", "namespace/team-b", "--timeout=60s")
    assert api.stack.store.list("ControllerRevision", "team-b") == []
    assert api.stack.pods("team-b") == []

    # one without an object is deleted the same way; the built-in ones are not
    assert api.kubectl("delete", "ns", "team-c").stdout == 'namespace "team-c" deleted\n'
    assert api.stack.store.list("DaemonSet", "team-c") == []
    gone = api.kubectl("get", "ns", "team-c", check=False)
    assert gone.stderr == 'Error from server (NotFound): namespaces "team-c" not found\n'
    kept = api.kubectl("delete", "ns", "kube-system", check=False)
    assert kept.stderr == ('Error from server (Forbidden): namespaces "kube-system" is '
                           "forbidden: this namespace may not be deleted\n")


def test_the_built_in_namespaces_get_their_objects_from_the_api_server(api: ApiServer,
                                                                      stack: Stack) -> None:
    """As upstream's API servers do: each of the four has a uid and a resourceVersion (tools
    take kube-system's uid for the cluster's id), as old as it was without its object."""
    wait_for(lambda: all(stack.store.try_get("Namespace", f"/{name}") is not None
                         for name in kinds.BUILTIN_NAMESPACES), what="the four Namespaces")
    oldest = min(meta.creation_timestamp(n) for n in stack.store.list("Node"))
    for name in kinds.BUILTIN_NAMESPACES:
        ns = api.json("get", "ns", name)
        assert ns["metadata"]["uid"] == meta.uid(stack.store.get("Namespace", f"/{name}"))
        assert ns["metadata"]["resourceVersion"] not in ("", "0")
        assert ns["metadata"]["creationTimestamp"] == oldest
        assert ns["status"] == {"phase": "Active"}
        lines = why.why_changes(stack.store, "Namespace", f"/{name}")
        assert any("ADDED" in line and "by user system:apiserver" in line
                   for line in lines), lines


def test_names_no_object_can_have_are_looked_up_as_upstreams_are(api: ApiServer) -> None:
    """Not "the server could not find the requested resource" (as if the kind were not
    served): the object is not found, a list is empty, a create is invalid."""
    api.kubectl("apply", "-f", str(FLUENTD))
    for verb in ("get", "delete"):
        got = api.kubectl(verb, "ds", "Fluentd-Elasticsearch", "-n", "kube-system", check=False)
        assert got.stderr == ('Error from server (NotFound): daemonsets.apps '
                              '"Fluentd-Elasticsearch" not found\n')
    listed = api.kubectl("get", "pods", "-n", "Bad_NS")
    assert listed.stderr == "No resources found in Bad_NS namespace.\n"
    made = api.kubectl("run", "x", "--image=busybox", "-n", "Bad_NS", check=False)
    assert made.stderr.startswith('The Pod "x" is invalid: metadata.namespace: Invalid value: '
                                  '"Bad_NS": a lowercase RFC 1123 label must consist of')
    assert api.kubectl("get", "ns", "Bad_NS", check=False).stderr == \
        'Error from server (NotFound): namespaces "Bad_NS" not found\n'


def test_kubectl_advertises_an_extended_resource_through_the_node_status(
        api: ApiServer, stack: Stack) -> None:
    """Upstream's "advertise extended resources for a node": a patch of the node's status
    subresource, which an editor may not make."""
    patch = '[{"op": "add", "path": "/status/capacity/example.com~1dongle", "value": "4"}]'
    refused = api.kubectl("patch", "node", "node-00001", "--subresource=status", "--type=json",
                          "-p", patch, user="editor", check=False)
    assert "cannot patch resource \"nodes/status\"" in refused.stderr
    assert api.kubectl("patch", "node", "node-00001", "--subresource=status", "--type=json",
                       "-p", patch).stdout == "node/node-00001 patched\n"
    assert stack.store.get("Node", "/node-00001")["status"]["capacity"]["example.com/dongle"] \
        == "4"
    assert "example.com/dongle:  4" in api.kubectl("describe", "node", "node-00001").stdout
    got = json.loads(api.kubectl("get", "--raw", "/api/v1/nodes/node-00001/status").stdout)
    assert got["status"]["capacity"]["example.com/dongle"] == "4"


def test_kubectl_as_impersonates_a_user_for_an_admin_only(api: ApiServer, stack: Stack) -> None:
    """``kubectl --as``: an admin acts as the user named, with that user's role (none for a
    name the token file lacks); anyone else is refused; uids and extras are refused, not
    ignored (the headers were ignored: every --as ran as the admin)."""
    whoami = api.kubectl("auth", "whoami", "--as", "editor").stdout
    assert re.search(r"Username\s+editor\b", whoami) and "[edit]" in whoami
    assert api.kubectl("auth", "can-i", "patch", "nodes/status", "--as", "editor",
                       check=False).stdout == "no\n"
    assert api.kubectl("get", "pods", "--as", "someone", check=False).stderr == (
        'Error from server (Forbidden): pods is forbidden: User "someone" cannot list '
        'resource "pods" in API group "" in the namespace "default"\n')
    assert api.kubectl("get", "pods", "--as", "admin", user="editor", check=False).stderr == (
        'Error from server (Forbidden): users "admin" is forbidden: User "editor" cannot '
        'impersonate resource "users" in API group "" at the cluster scope\n')
    uid = api.kubectl("get", "pods", "--as", "admin", "--as-uid", "1", check=False)
    assert uid.returncode == 1 and "(Forbidden): impersonating uids" in uid.stderr
    api.kubectl("apply", "-f", str(FLUENTD), "--as", "editor")  # the log names whom it acted as
    lines = why.why_changes(stack.store, "DaemonSet", "kube-system/fluentd-elasticsearch")
    assert any("ADDED" in line and "by user editor" in line for line in lines), lines


def test_kubectl_get_output_formats(api: ApiServer, stack: Stack) -> None:
    api.kubectl("apply", "-f", str(FLUENTD))
    _ready_pods(stack, "kube-system", 3)
    names = api.kubectl("get", "ds", "-A", "-o", "name").stdout.split()
    assert names == ["daemonset.apps/fluentd-elasticsearch"]
    doc = api.json("get", "ds", "fluentd-elasticsearch", "-n", "kube-system")
    assert doc["kind"] == "DaemonSet" and doc["apiVersion"] == "apps/v1"
    yml = yaml.safe_load(api.kubectl("get", "ds/fluentd-elasticsearch", "-n", "kube-system",
                                     "-o", "yaml").stdout)
    assert yml["metadata"]["uid"] == doc["metadata"]["uid"]
    pods = api.json("get", "pods", "-n", "kube-system")
    assert pods["kind"] == "List" and len(pods["items"]) == 3
    # the class the registry gives a pod as it is made, kept through its node's status writes
    # (cpu and memory requested, memory alone limited)
    assert {p["status"]["phase"] for p in pods["items"]} == {"Running"}
    assert {p["status"]["qosClass"] for p in pods["items"]} == {"Burstable"}
    jp = api.kubectl("get", "nodes", "-o", "jsonpath={.items[*].metadata.name}").stdout
    assert jp.split() == ["node-00001", "node-00002", "node-00003"]
    missing = api.kubectl("get", "ds", "nope", "-n", "kube-system", check=False)
    assert missing.returncode == 1
    assert 'Error from server (NotFound): daemonsets.apps "nope" not found' in missing.stderr


def test_kubectl_apply_of_a_list_validates_its_items_with_the_v2_document(
        api: ApiServer, tmp_path: Path) -> None:
    """`kubectl get -o yaml` of a kind writes a List; kubectl validates the items of a List
    itself, with the OpenAPI v2 document, before it applies them (with none served it
    failed at once: "the server could not find the requested resource")."""
    api.kubectl("apply", "-f", str(FLUENTD))
    # settled first: the List carries its resourceVersion, and a status change after the
    # get makes the apply a 409 Conflict, as with any API server
    api.kubectl("wait", "--for=jsonpath={.status.numberAvailable}=3", "ds/fluentd-elasticsearch",
                "-n", "kube-system", "--timeout=60s")
    listed = tmp_path / "list.yaml"
    listed.write_text(api.kubectl("get", "ds", "-n", "kube-system", "-o", "yaml").stdout)
    assert yaml.safe_load(listed.read_text())["kind"] == "List"
    again = api.kubectl("apply", "-f", str(listed))
    assert again.stdout in ("daemonset.apps/fluentd-elasticsearch configured\n",
                            "daemonset.apps/fluentd-elasticsearch unchanged\n")
    before = api.json("get", "ds", "fluentd-elasticsearch", "-n", "kube-system")
    bad = tmp_path / "bad.yaml"
    bad.write_text(listed.read_text().replace("imagePullPolicy:", "imagePullPolicyy:"))
    refused = api.kubectl("apply", "-f", str(bad), check=False)
    assert refused.returncode == 1
    assert 'unknown field "imagePullPolicyy" in io.k8s.api.core.v1.Container' \
        in refused.stderr
    after = api.json("get", "ds", "fluentd-elasticsearch", "-n", "kube-system")
    # nothing written (its status may have moved meanwhile, as its pods start)
    assert (after["metadata"]["generation"], after["metadata"]["annotations"]) == \
        (before["metadata"]["generation"], before["metadata"]["annotations"])
    explained = api.kubectl("explain", "ds.spec.updateStrategy",
                            "--output=plaintext-openapiv2").stdout  # the v2 definitions
    assert "RESOURCE: updateStrategy <Object>" in explained
    assert "rollingUpdate\t<Object>" in explained
    swagger = json.loads(api.kubectl("get", "--raw", "/openapi/v2").stdout)
    assert swagger["swagger"] == "2.0"
    assert swagger["definitions"]["io.k8s.api.apps.v1.DaemonSet"][
        "x-kubernetes-group-version-kind"] == [{"group": "apps", "kind": "DaemonSet",
                                                "version": "v1"}]


def test_kubectl_debug_adds_an_ephemeral_container_that_is_only_ever_added(
        api: ApiServer, stack: Stack) -> None:
    """``kubectl debug POD``: kubectl patches the pod's ``ephemeralcontainers``
    subresource (a strategic merge patch, the answer read as protobuf); the simulated node
    reports the container running, and kubectl describes it. Through the subresource an
    ephemeral container is only added, never removed or changed, and the pod's own updates
    cannot touch them (upstream's rules and words)."""
    api.kubectl("apply", "-f", str(FLUENTD))
    _ready_pods(stack, "kube-system", 1)
    pod = api.kubectl("get", "pods", "-n", "kube-system", "-o", "name").stdout.split()[0]
    name = pod.removeprefix("pod/")
    out = api.kubectl("debug", "-n", "kube-system", pod, "--image=busybox", "-c", "dbg",
                      "--target=fluentd-elasticsearch", "--profile=general")
    assert "panic" not in out.stderr and "disabled" not in out.stderr, out.stderr
    path = f"/api/v1/namespaces/kube-system/pods/{name}"

    def reported() -> dict[str, Any] | None:
        got = stack.store.get("Pod", f"kube-system/{name}")
        told = (got.get("status") or {}).get("ephemeralContainerStatuses") or []
        return got if told and "running" in told[0]["state"] else None

    got = wait_for(reported, timeout=30, what="the ephemeral container reported running")
    (ec,) = got["spec"]["ephemeralContainers"]
    assert (ec["name"], ec["image"], ec["targetContainerName"]) == (
        "dbg", "busybox", "fluentd-elasticsearch")
    assert ec["securityContext"] == {"capabilities": {"add": ["SYS_PTRACE"]}}
    assert ec["terminationMessagePath"] == "/dev/termination-log"  # defaulted
    assert got["status"]["phase"] == "Running"
    described = api.kubectl("describe", pod, "-n", "kube-system").stdout
    assert re.search(r"^Ephemeral Containers:\n  dbg:\n", described, re.M), described
    code, body = api.request("GET", path + "/ephemeralcontainers")
    assert (code, body["kind"], body["spec"]["ephemeralContainers"][0]["name"]) == (
        200, "Pod", "dbg")

    strategic = {"Content-Type": "application/strategic-merge-patch+json"}
    merge = {"Content-Type": "application/merge-patch+json"}
    code, body = api.request("PATCH", path + "/ephemeralcontainers",
                             {"spec": {"ephemeralContainers": [
                                 {"name": "dbg2", "image": "busybox",
                                  "ports": [{"containerPort": 80}]}]}}, headers=strategic)
    assert (code, body["reason"]) == (422, "Invalid"), body
    # (the patch's element first: upstream's merge orders a list so without $setElementOrder)
    assert "spec.ephemeralContainers[0].ports: Forbidden: cannot be set for an Ephemeral " \
        "Container" in body["message"], body["message"]
    code, body = api.request("PATCH", path + "/ephemeralcontainers",
                             {"spec": {"ephemeralContainers": []}}, headers=merge)
    assert code == 422 and 'existing ephemeral containers "dbg" may not be removed' in \
        body["message"], body
    code, body = api.request("PATCH", path + "/ephemeralcontainers",
                             {"spec": {"ephemeralContainers": [
                                 {"name": "dbg", "image": "busybox:2"}]}}, headers=strategic)
    assert code == 422 and 'existing ephemeral containers "dbg" may not be changed' in \
        body["message"], body
    code, body = api.request("PATCH", path, {"spec": {"ephemeralContainers": [
        {"name": "dbg3", "image": "busybox"}]}}, headers=strategic)
    assert code == 422 and "pod updates may not change fields other than" in \
        body["message"], body
    out = api.kubectl("debug", "-n", "kube-system", pod, "--image=busybox", "-c", "dbg4",
                      "--profile=general", user="viewer", check=False)
    assert out.returncode == 1 and "forbidden" in out.stderr, out.stderr
    assert [c["name"] for c in stack.store.get("Pod", f"kube-system/{name}")["spec"][
        "ephemeralContainers"]] == ["dbg"]  # nothing of the refused written
    code, body = api.request("GET", "/api/v1/namespaces/kube-system/pods/x/nothing")
    assert (code, body["reason"], body["details"]) == (404, "NotFound", {})


def test_kubectl_get_watch_sees_a_change_and_ends_at_its_timeout(api: ApiServer) -> None:
    api.kubectl("apply", "-f", str(FLUENTD))
    proc = api.popen("get", "ds", "-n", "kube-system", "-w", "--request-timeout=20s", "-o",
                     "name", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        listed = proc.stdout.readline().strip()  # printed from the list; the watch follows
        assert listed == "daemonset.apps/fluentd-elasticsearch"
        api.kubectl("label", "ds", "fluentd-elasticsearch", "-n", "kube-system", "seen=yes")
        out, _err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode is not None  # it ended by itself, at its timeout
    assert "daemonset.apps/fluentd-elasticsearch" in out.split()  # the label change


def test_kubectl_get_namespaces_watch_sees_one_come_and_go_with_what_is_in_it(
        api: ApiServer, stack: Stack, tmp_path: Path) -> None:
    doc = yaml.safe_load(FLUENTD.read_text())
    doc["metadata"]["namespace"] = "team-w"
    manifest = tmp_path / "team-w.yaml"
    manifest.write_text(yaml.safe_dump(doc))
    proc = api.popen("get", "ns", "-w", "--output-watch-events", "--no-headers",
                     "--request-timeout=60s", stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        listed = [proc.stdout.readline().split()[:2] for _ in range(4)]  # the list, then the watch
        assert listed == [["ADDED", ns] for ns in sorted(kinds.BUILTIN_NAMESPACES)]
        api.kubectl("apply", "-f", str(manifest))
        assert proc.stdout.readline().split()[:3] == ["ADDED", "team-w", "Active"]
        # gone once nothing is in it: the DaemonSet, its pods and revisions, its events
        api.kubectl("delete", "ds", "fluentd-elasticsearch", "-n", "team-w")
        wait_for(lambda: not stack.pods("team-w"), timeout=60, what="team-w's pods gone")
        api.kubectl("delete", "events", "--all", "-n", "team-w")
        wait_for(lambda: not [r for r in stack.store.list("ControllerRevision")
                              if r["metadata"]["namespace"] == "team-w"],
                 timeout=60, what="team-w's revisions gone")
        assert proc.stdout.readline().split()[:2] == ["DELETED", "team-w"]
    finally:
        proc.kill()
        proc.communicate()
    gone = api.kubectl("get", "ns", "team-w", check=False)
    assert 'namespaces "team-w" not found' in gone.stderr


def test_writes_through_the_api_name_their_user_in_the_log(api: ApiServer,
                                                           stack: Stack) -> None:
    api.kubectl("apply", "-f", str(FLUENTD), user="editor")
    lines = why.why_changes(stack.store, "DaemonSet", "kube-system/fluentd-elasticsearch")
    assert any("ADDED" in line and "by user editor" in line for line in lines), lines


def test_no_token_is_401_and_a_viewer_cannot_write(api: ApiServer) -> None:
    code, doc = api.request("GET", "/api/v1/nodes", token=None)
    assert code == 401 and doc["kind"] == "Status" and doc["reason"] == "Unauthorized"
    code, doc = api.request("GET", "/api/v1/nodes", token="not-a-token-of-anyone-at-all")
    assert code == 401
    assert api.kubectl("get", "nodes", user="viewer").returncode == 0
    res = api.kubectl("apply", "-f", str(FLUENTD), user="viewer", check=False)
    assert res.returncode == 1
    assert 'User "viewer" cannot create resource "daemonsets" in API group "apps"' in \
        res.stderr, res.stderr
    code, doc = api.request("DELETE", "/api/v1/nodes/node-00001", token="editor")
    assert code == 403 and doc["reason"] == "Forbidden"
    assert api.json("get", "node", "node-00001")["metadata"]["name"] == "node-00001"


def test_an_invalid_daemonset_is_a_422_with_its_field_causes(api: ApiServer,
                                                             stack: Stack) -> None:
    doc = yaml.safe_load(FLUENTD.read_text())
    doc["spec"]["template"]["metadata"]["labels"] = {"other": "x"}
    code, status = api.request("POST", "/apis/apps/v1/namespaces/kube-system/daemonsets", doc)
    assert code == 422, status
    assert status["reason"] == "Invalid"
    assert status["message"].startswith('DaemonSet.apps "fluentd-elasticsearch" is invalid: ')
    fields = [c["field"] for c in status["details"]["causes"]]
    assert "spec.template.metadata.labels" in fields
    assert stack.store.try_get("DaemonSet", "kube-system/fluentd-elasticsearch") is None


def test_dry_run_writes_nothing_and_generate_name_names(api: ApiServer, stack: Stack) -> None:
    doc = yaml.safe_load(FLUENTD.read_text())
    code, out = api.request("POST", "/apis/apps/v1/namespaces/kube-system/daemonsets"
                            "?dryRun=All", doc)
    assert code == 201 and out["metadata"]["name"] == "fluentd-elasticsearch"
    assert "resourceVersion" not in out["metadata"]  # none yet, as upstream's (not "0-0")
    assert stack.store.try_get("DaemonSet", "kube-system/fluentd-elasticsearch") is None
    del doc["metadata"]["name"]
    doc["metadata"]["generateName"] = "fluentd-"
    code, out = api.request("POST", "/apis/apps/v1/namespaces/kube-system/daemonsets", doc)
    assert code == 201, out
    name = out["metadata"]["name"]
    assert name.startswith("fluentd-") and len(name) == len("fluentd-") + 5
    assert stack.store.try_get("DaemonSet", f"kube-system/{name}") is not None
    # upstream's SimpleNameGenerator cuts the base to 58 characters: 63 in all
    doc["metadata"]["generateName"] = "a" * 70 + "-"
    code, out = api.request("POST", "/apis/apps/v1/namespaces/kube-system/daemonsets"
                            "?dryRun=All", doc)
    assert code == 201 and len(out["metadata"]["name"]) == 63, out
    assert out["metadata"]["name"].startswith("a" * 58)


def test_update_with_a_stale_resource_version_is_a_409(api: ApiServer) -> None:
    api.kubectl("apply", "-f", str(FLUENTD))
    path = "/apis/apps/v1/namespaces/kube-system/daemonsets/fluentd-elasticsearch"


    def put_label() -> tuple[dict, dict] | None:
        _, current = api.request("GET", path)
        stale = json.loads(json.dumps(current))
        current["metadata"].setdefault("labels", {})["a"] = "1"
        code, updated = api.request("PUT", path, current)  # the controller may write too
        return (stale, updated) if code == 200 else None

    stale, updated = wait_for(put_label, what="an update at the current resourceVersion")
    assert updated["metadata"]["labels"]["a"] == "1"
    stale["metadata"].setdefault("labels", {})["b"] = "2"
    code, status = api.request("PUT", path, stale)
    assert code == 409 and status["reason"] == "Conflict"
    assert "the object has been modified" in status["message"]


def test_kubectl_auth_can_i_answers_per_role(api: ApiServer) -> None:
    def can(user: str, *args: str) -> str:
        return api.kubectl("auth", "can-i", *args, user=user, check=False).stdout.strip()

    assert can("viewer", "list", "pods") == "yes"
    assert can("viewer", "create", "daemonsets") == "no"
    assert can("editor", "create", "daemonsets", "-n", "kube-system") == "yes"
    assert can("editor", "patch", "nodes") == "no"
    assert can("admin", "delete", "nodes") == "yes"
    assert can("admin", "list", "pods", "--as", "nobody") == "no"  # a user without a role


def test_a_namespaced_kind_across_all_namespaces_is_read_only(api: ApiServer) -> None:
    """``/api/v1/pods`` lists and watches; a collection delete there (which deleted every
    pod in every namespace) or a create is 405, as upstream's."""
    api.kubectl("apply", "-f", str(FLUENTD))
    pod = json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "x", "namespace": "default"}, "spec": {"containers": [
            {"name": "c", "image": "busybox"}]}})
    for args in (("delete", "--raw", "/api/v1/pods"),
                 ("delete", "--raw", "/apis/apps/v1/daemonsets"),
                 ("create", "--raw", "/api/v1/pods", "-f", "-")):
        refused = api.kubectl(*args, check=False, input=pod)
        assert refused.returncode == 1
        assert refused.stderr.startswith("Error from server (MethodNotAllowed): the server "
                                         "does not allow this method on the requested "
                                         "resource"), (args, refused.stderr)
    assert api.kubectl("get", "pods", "-A", "-o", "name").stdout.strip()
    assert api.kubectl("get", "ds", "-A", "-o", "name").stdout.strip()


def test_kubectl_auth_can_i_list_shows_each_roles_rules(api: ApiServer) -> None:
    def rules(user: str) -> dict[str, str]:
        out = api.kubectl("auth", "can-i", "--list", "-n", "kube-system", user=user).stdout
        rows = [(line.split()[0], re.search(r"(\[[^]]*\])\s*$", line))
                for line in out.splitlines()[1:]]  # the last column, the verbs, has spaces
        return {name: m.group(1) for name, m in rows if m and not name.startswith("[")}

    assert rules("admin")["*.*"] == "[*]"
    view = rules("viewer")  # every resource but Secrets, as upstream's view
    assert "*.*" not in view and "secrets" not in view
    for name in ("pods", "pods/log", "daemonsets.apps", "configmaps",
                 "clusterroles.rbac.authorization.k8s.io"):
        assert view[name] == "[get list watch]", (name, view)
    edit = rules("editor")
    assert edit["*.*"] == "[get list watch]"
    assert edit["daemonsets.apps"] == "[create delete deletecollection patch update]"
    assert edit["pods/eviction"] == "[create delete deletecollection patch update]"
    assert "nodes" not in edit and "daemonsets.apps/status" not in edit
    assert edit["selfsubjectrulesreviews.authorization.k8s.io"] == "[create]"
    res = api.kubectl("api-resources", "--api-group=authorization.k8s.io", "-o", "name").stdout
    assert "selfsubjectrulesreviews.authorization.k8s.io" in res.split()
    assert view["selfsubjectreviews.authentication.k8s.io"] == "[create]"


def test_kubectl_auth_whoami_names_the_tokens_user_and_role(api: ApiServer) -> None:
    for user, role in (("admin", "admin"), ("editor", "edit"), ("viewer", "view")):
        review = json.loads(api.kubectl("auth", "whoami", "-o", "json", user=user).stdout)
        assert review["kind"] == "SelfSubjectReview"
        assert review["status"]["userInfo"] == {
            "username": user, "groups": ["system:authenticated"],
            "extra": {"daemonbus.io/role": [role]}}
    table = api.kubectl("auth", "whoami", user="viewer").stdout.splitlines()
    assert table[0].split() == ["ATTRIBUTE", "VALUE"]
    assert table[1].split() == ["Username", "viewer"]


def test_kubectl_debug_copy_to_creates_the_copy_it_posts_as_protobuf(api: ApiServer,
                                                                      stack: Stack) -> None:
    """``kubectl debug POD --copy-to``: kubectl reads the pod, adds its debugging container
    and posts the copy as Kubernetes protobuf, which is created as the JSON of it would be
    (the general profile: the pod's probes dropped, its processes shared)."""
    api.kubectl("apply", "-f", str(FLUENTD))
    _ready_pods(stack, "kube-system", 1)
    pod = api.kubectl("get", "pods", "-n", "kube-system", "-o", "name").stdout.split()[0]
    original = api.json("get", "-n", "kube-system", pod)
    api.kubectl("debug", "-n", "kube-system", pod, "--image=busybox", "--copy-to=the-copy",
                "--container=debugger", "--profile=general", "--", "sleep", "60")
    copy = api.json("get", "-n", "kube-system", "pod/the-copy")
    names = [c["name"] for c in copy["spec"]["containers"]]
    assert names == [c["name"] for c in original["spec"]["containers"]] + ["debugger"]
    assert copy["spec"]["shareProcessNamespace"] is True
    assert copy["spec"]["volumes"] == original["spec"]["volumes"]
    assert copy["spec"]["containers"][0]["resources"] == \
        original["spec"]["containers"][0]["resources"]
    assert "ownerReferences" not in copy["metadata"]
