"""The ``daemonbus`` CLI against a real Redis: kubectl's verbs, messages and output formats.

Every test runs the click group in-process (CliRunner) with its own key prefix and a fake
clock shared by the CLI and the store, so ages are exact; one test runs the installed
console script as a subprocess.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from services.cli import context
from services.cli.main import cli
from shared.control.clock import FakeClock
from shared.store import client as store_client
from shared.store.keys import Keys
from tests import testdata

Obj = dict[str, Any]
TESTDATA = testdata.DAEMONSETS
MANIFESTS = testdata.manifests()
FLUENTD = TESTDATA / "kubernetes-website-fluentd-elasticsearch.yaml"

Run = Callable[..., Result]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(redis_url: str, prefix: str, clock: FakeClock) -> store_client.Store:
    return store_client.Store(store_client.connect(redis_url), Keys(prefix), clock=clock.now)


@pytest.fixture
def run(redis_url: str, prefix: str, clock: FakeClock) -> Run:
    """Invoke the CLI: ``run("get", "ds", input=...)`` → click Result."""

    def invoke(*args: str, input: str | None = None) -> Result:
        env = context.CliEnv(clock=clock.now)
        return CliRunner().invoke(cli, ["--redis-url", redis_url, "--prefix", prefix, *args],
                                  obj=env, input=input, catch_exceptions=False)

    return invoke


def log_length(store: store_client.Store) -> int:
    return int(store.r.xlen(store.keys.log))


def fluentd() -> Obj:
    return dict(yaml.safe_load(FLUENTD.read_text()))


def write(tmp_path: Path, name: str, *docs: Obj) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


# ---- apply ----------------------------------------------------------------------------------


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: p.stem)
def test_apply_creates_each_testdata_daemonset_and_reapply_is_unchanged(
        run: Run, store: store_client.Store, manifest: Path) -> None:
    doc = yaml.safe_load(manifest.read_text())
    name, ns = doc["metadata"]["name"], doc["metadata"].get("namespace", "default")

    first = run("apply", "-f", str(manifest))
    assert first.exit_code == 0, first.output
    assert first.stdout == f"daemonset.apps/{name} created\n"
    second = run("apply", "-f", str(manifest))
    assert second.stdout == f"daemonset.apps/{name} unchanged\n"
    stored = store.get("DaemonSet", f"{ns}/{name}")
    assert stored["metadata"]["generation"] == 1


def test_apply_changed_image_is_configured_and_bumps_generation(
        run: Run, store: store_client.Store, tmp_path: Path) -> None:
    assert run("apply", "-f", str(FLUENTD)).exit_code == 0
    changed = fluentd()
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "fluentd:v2"

    result = run("apply", "-f", write(tmp_path, "changed.yaml", changed))

    assert result.stdout == "daemonset.apps/fluentd-elasticsearch configured\n"
    stored = store.get("DaemonSet", "kube-system/fluentd-elasticsearch")
    assert stored["metadata"]["generation"] == 2
    assert stored["spec"]["template"]["spec"]["containers"][0]["image"] == "fluentd:v2"


def test_apply_warns_of_a_host_port_with_max_surge_and_applies_it(
        run: Run, store: store_client.Store, tmp_path: Path) -> None:
    # kubernetes#106417: the surge pod cannot bind the host port its node's old pod holds
    ds = yaml.safe_load((TESTDATA / "kube-prometheus-node-exporter.yaml").read_text())
    ds["spec"]["updateStrategy"]["rollingUpdate"] = {"maxUnavailable": 0, "maxSurge": 1}
    result = run("apply", "-f", write(tmp_path, "surge.yaml", ds))
    assert result.exit_code == 0, result.output
    assert result.stdout == "daemonset.apps/node-exporter created\n"
    assert result.stderr.startswith(
        "Warning: spec.template.spec.containers[1].ports[0].hostPort: host port 9100 with "
        "spec.updateStrategy.rollingUpdate.maxSurge 1: a surge pod cannot bind")
    assert result.stderr.count("Warning: ") == 1
    assert store.try_get("DaemonSet", "monitoring/node-exporter") is not None


def _selector_mismatch(ds: Obj) -> None:
    ds["spec"]["template"]["metadata"]["labels"] = {"name": "something-else"}


def _zero_percent_without_surge(ds: Obj) -> None:
    ds["spec"]["updateStrategy"] = {"type": "RollingUpdate",
                                    "rollingUpdate": {"maxUnavailable": "0%", "maxSurge": 0}}


def _over_hundred_percent(ds: Obj) -> None:
    ds["spec"]["updateStrategy"] = {"type": "RollingUpdate",
                                    "rollingUpdate": {"maxUnavailable": "150%"}}


@pytest.mark.parametrize(("breaks", "field"), [
    (_selector_mismatch, "spec.template.metadata.labels: Invalid value"),
    (_zero_percent_without_surge,
     "spec.updateStrategy.rollingUpdate.maxUnavailable: Required value"),
    (_over_hundred_percent,
     "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: "
     'intstr.IntOrString{Type:1, IntVal:0, StrVal:"150%"}: must not be greater than 100%'),
], ids=["selector-mismatch", "zero-percent-no-surge", "over-100-percent"])
def test_apply_applies_the_valid_documents_and_reports_the_invalid_one_as_kubectl(
        run: Run, store: store_client.Store, tmp_path: Path,
        breaks: Callable[[Obj], None], field: str) -> None:
    valid = fluentd()
    valid["metadata"]["name"] = "valid-first"
    invalid = fluentd()
    breaks(invalid)
    after = fluentd()
    after["metadata"]["name"] = "valid-after"
    path = write(tmp_path, "mixed.yaml", valid, invalid, after)
    before = log_length(store)

    result = run("apply", "-f", path)

    assert result.exit_code == 1
    assert result.stdout == ("daemonset.apps/valid-first created\n"
                             "daemonset.apps/valid-after created\n")
    assert result.stderr.startswith('The DaemonSet "fluentd-elasticsearch" is invalid: ')
    assert field in result.stderr
    assert "Traceback" not in result.output
    assert log_length(store) == before + 2
    assert store.try_get("DaemonSet", "kube-system/fluentd-elasticsearch") is None


def test_apply_lists_every_cause_of_a_manifest_with_several_problems(
        run: Run, tmp_path: Path) -> None:
    ds = fluentd()
    _selector_mismatch(ds)
    _over_hundred_percent(ds)

    result = run("apply", "-f", write(tmp_path, "bad.yaml", ds))

    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert lines[0].rstrip() == 'The DaemonSet "fluentd-elasticsearch" is invalid:'
    assert len(lines) >= 3 and all(line.startswith("* ") for line in lines[1:])


def test_apply_prints_the_api_servers_messages_in_its_order(
        run: Run, store: store_client.Store, tmp_path: Path) -> None:
    # pkg/apis/apps/validation: ValidateDaemonSetSpec checks the update strategy before
    # revisionHistoryLimit; ValidateDaemonSetUpdateStrategy passes the whole
    # *apps.DaemonSetUpdateStrategy to field.NotSupported, and IsNotMoreThan100Percent the
    # intstr.IntOrString value to field.Invalid, both printed by field.Error with %#v
    unsupported = fluentd()
    unsupported["spec"]["revisionHistoryLimit"] = -1
    unsupported["spec"]["updateStrategy"] = {"type": "Recreate"}
    over = fluentd()
    over["metadata"]["name"] = "over"
    _over_hundred_percent(over)

    result = run("apply", "-f", write(tmp_path, "bad.yaml", unsupported, over))

    assert result.exit_code == 1
    assert result.stderr == (
        'The DaemonSet "fluentd-elasticsearch" is invalid:\n'
        "* spec.updateStrategy: Unsupported value: apps.DaemonSetUpdateStrategy"
        '{Type:"Recreate", RollingUpdate:(*apps.RollingUpdateDaemonSet)(nil)}: supported '
        'values: "RollingUpdate", "OnDelete"\n'
        "* spec.revisionHistoryLimit: Invalid value: -1: must be greater than or equal to 0\n"
        'The DaemonSet "over" is invalid: spec.updateStrategy.rollingUpdate.maxUnavailable: '
        'Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:"150%"}: must not be '
        "greater than 100%\n")
    assert log_length(store) == 0


def test_apply_reports_unparsable_yaml(run: Run, store: store_client.Store,
                                       tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("apiVersion: v1\nkind: Node\nmetadata:\n  name: [a\n")

    result = run("apply", "-f", str(path))

    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: error parsing {path}: ")
    assert log_length(store) == 0


def test_apply_reads_multi_document_yaml_lists_and_json_from_stdin(
        run: Run, store: store_client.Store) -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "worker-1"}}
    listed = {"apiVersion": "v1", "kind": "List", "items": [fluentd()]}
    text = "---\n# a comment only\n---\n" + yaml.safe_dump(node) + "---\n\n---\n" + \
        yaml.safe_dump(listed)

    result = run("apply", "-f", "-", input=text)

    assert result.exit_code == 0, result.output
    assert result.stdout == ("node/worker-1 created\n"
                             "daemonset.apps/fluentd-elasticsearch created\n")
    as_json = run("apply", "-f", "-", input=json.dumps(node))
    assert as_json.stdout == "node/worker-1 unchanged\n"


def test_apply_makes_a_namespace_and_delete_deletes_it_once_empty(
        run: Run, store: store_client.Store, tmp_path: Path) -> None:
    namespace = {"apiVersion": "v1", "kind": "Namespace",
                 "metadata": {"name": "team-x", "labels": {"team": "x"}}}
    ds = fluentd()
    ds["metadata"]["namespace"] = "team-x"

    result = run("apply", "-f", write(tmp_path, "ns.yaml", namespace, ds))

    assert result.exit_code == 0, result.output
    assert result.stdout == ("namespace/team-x created\n"
                             "daemonset.apps/fluentd-elasticsearch created\n")
    got = store.get("Namespace", "/team-x")
    assert got["metadata"]["labels"] == {"team": "x", "kubernetes.io/metadata.name": "team-x"}
    listed = run("get", "ns", "--no-headers")
    assert [row.split()[:2] for row in listed.stdout.splitlines()] == [
        ["default", "Active"], ["kube-node-lease", "Active"], ["kube-public", "Active"],
        ["kube-system", "Active"], ["team-x", "Active"]]
    deleted = run("delete", "ns", "team-x")
    assert deleted.stdout == 'namespace "team-x" deleted\n'
    # no garbage collector runs here: the namespace waits, Terminating, for its content to go
    assert store.get("Namespace", "/team-x")["status"]["phase"] == "Terminating"
    other = fluentd()
    other["metadata"].update(namespace="team-x", name="late")
    late = run("apply", "-f", write(tmp_path, "late.yaml", other))
    assert late.exit_code == 1
    assert late.stderr == (f'Error from server (Forbidden): error when creating '
                           f'"{tmp_path / "late.yaml"}": daemonsets.apps "late" is forbidden: '
                           "unable to create new content in namespace team-x because it is "
                           "being terminated\n")
    kept = run("delete", "ns", "default")
    assert kept.exit_code == 1
    assert kept.stderr == ('Error from server (Forbidden): namespaces "default" is forbidden: '
                           "this namespace may not be deleted\n")


def test_apply_reports_an_unknown_kind_and_applies_the_rest(run: Run,
                                                            store: store_client.Store,
                                                            tmp_path: Path) -> None:
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}}

    result = run("apply", "-f", write(tmp_path, "d.yaml", deployment, fluentd()))

    assert result.exit_code == 1
    assert result.stdout == "daemonset.apps/fluentd-elasticsearch created\n"
    assert result.stderr == (
        'error: resource mapping not found for name: "x" namespace: "" from '
        f'"{tmp_path / "d.yaml"}": no matches for kind "Deployment" in version "apps/v1"\n'
        "ensure CRDs are installed first\n")
    assert log_length(store) == 1


def test_apply_dry_run_writes_nothing(run: Run, store: store_client.Store) -> None:
    result = run("apply", "-f", str(FLUENTD), "--dry-run=server")

    assert result.stdout == "daemonset.apps/fluentd-elasticsearch created (server dry run)\n"
    assert log_length(store) == 0


# ---- get ------------------------------------------------------------------------------------


@pytest.fixture
def cluster(run: Run, clock: FakeClock) -> None:
    """Two nodes (one a control plane) and the fluentd DaemonSet, then 3m2s pass."""
    assert run("node", "add", "node-1").exit_code == 0
    assert run("node", "add", "cp-1", "--label", "node-role.kubernetes.io/control-plane=",
               ).exit_code == 0
    assert run("apply", "-f", str(FLUENTD)).exit_code == 0
    clock.advance(182)


def test_get_daemonsets_prints_kubectls_table(run: Run, cluster: None) -> None:
    result = run("get", "ds", "-n", "kube-system")

    assert result.exit_code == 0
    assert result.stdout == (
        "NAME                    DESIRED   CURRENT   READY   UP-TO-DATE   AVAILABLE   "
        "NODE SELECTOR   AGE\n"
        "fluentd-elasticsearch   0         0         0       0            0           "
        "<none>          3m2s\n")


def test_get_wide_and_all_namespaces_add_columns(run: Run, cluster: None) -> None:
    result = run("get", "daemonsets.apps", "-A", "-o", "wide")

    header, row = result.stdout.splitlines()
    assert header.split() == ["NAMESPACE", "NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE",
                              "AVAILABLE", "NODE", "SELECTOR", "AGE", "CONTAINERS", "IMAGES",
                              "SELECTOR"]
    assert row.split() == ["kube-system", "fluentd-elasticsearch", "0", "0", "0", "0", "0",
                           "<none>", "3m2s", "fluentd-elasticsearch",
                           "k8s.gcr.io/fluentd-elasticsearch:1.20", "name=fluentd-elasticsearch"]


def test_get_nodes_shows_status_roles_and_version(run: Run, cluster: None) -> None:
    result = run("get", "nodes", "--no-headers")

    assert result.stdout.splitlines() == [
        "cp-1     NotReady   control-plane   3m2s   v1.32.0-daemonbus",
        "node-1   NotReady   <none>          3m2s   v1.32.0-daemonbus",
    ]


def test_get_json_prints_one_object_or_a_list(run: Run, cluster: None) -> None:
    one = json.loads(run("get", "ds", "fluentd-elasticsearch", "-n", "kube-system",
                         "-o", "json").stdout)
    assert one["kind"] == "DaemonSet"
    assert one["metadata"]["name"] == "fluentd-elasticsearch"

    many = run("get", "nodes", "-o", "json").stdout
    assert many.startswith('{\n    "apiVersion": "v1",\n    "items": [\n')
    parsed = json.loads(many)
    assert parsed["kind"] == "List" and parsed["metadata"] == {"resourceVersion": ""}
    assert [n["metadata"]["name"] for n in parsed["items"]] == ["cp-1", "node-1"]


def test_get_yaml_and_name_outputs(run: Run, cluster: None) -> None:
    as_yaml = yaml.safe_load(run("get", "no", "node-1", "-o", "yaml").stdout)
    assert as_yaml["kind"] == "Node" and as_yaml["metadata"]["name"] == "node-1"

    names = run("get", "ds,nodes", "-A", "-o", "name").stdout
    assert names == "daemonset.apps/fluentd-elasticsearch\nnode/cp-1\nnode/node-1\n"


def test_get_filters_by_label_selector(run: Run, cluster: None) -> None:
    result = run("get", "nodes", "-l", "node-role.kubernetes.io/control-plane", "-o", "name")
    assert result.stdout == "node/cp-1\n"
    none = run("get", "nodes", "-l", "!kubernetes.io/hostname", "-o", "name")
    assert none.stdout == "" and none.stderr == "No resources found\n"


def test_get_missing_name_is_not_found(run: Run, cluster: None) -> None:
    result = run("get", "ds", "nope", "-n", "kube-system")

    assert result.exit_code == 1
    assert result.stderr == 'Error from server (NotFound): daemonsets.apps "nope" not found\n'


def test_get_empty_namespace_says_no_resources_found(run: Run) -> None:
    result = run("get", "pods")

    assert result.exit_code == 0
    assert result.stdout == ""
    assert result.stderr == "No resources found in default namespace.\n"


def test_get_unknown_resource_type_is_an_error(run: Run) -> None:
    result = run("get", "deployments")

    assert result.exit_code == 1
    assert result.stderr == 'error: the server doesn\'t have a resource type "deployments"\n'


@pytest.fixture
def dependents(store: store_client.Store, clock: FakeClock, cluster: None) -> None:
    """A running daemon pod, a ControllerRevision and two Events of fluentd; 60s pass."""
    ds = store.get("DaemonSet", "kube-system/fluentd-elasticsearch")
    owner = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "fluentd-elasticsearch",
             "uid": ds["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
    store.create({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "fluentd-elasticsearch-abcde", "namespace": "kube-system",
                     "ownerReferences": [owner]},
        "spec": {"nodeName": "node-1", "containers": [{"name": "f", "image": "fluentd"}]},
        "status": {"phase": "Running", "podIP": "10.0.0.7", "containerStatuses": [
            {"name": "f", "ready": True, "restartCount": 0, "state": {"running": {}}}]},
    })
    store.create({
        "apiVersion": "apps/v1", "kind": "ControllerRevision",
        "metadata": {"name": "fluentd-elasticsearch-5d67f59cd6", "namespace": "kube-system",
                     "ownerReferences": [owner]},
        "data": {"spec": {"template": {}}}, "revision": 1,
    })
    for i, reason in enumerate(["Second", "First"]):
        stamp = f"2023-11-14T22:1{5 - i}:00Z"
        store.create({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"ev{i}", "namespace": "kube-system"},
            "involvedObject": {"kind": "DaemonSet", "name": "fluentd-elasticsearch",
                               "namespace": "kube-system"},
            "type": "Normal", "reason": reason, "message": reason.lower(),
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        })
    clock.advance(60)


def test_get_pods_shows_ready_status_and_wide_columns(run: Run, dependents: None) -> None:
    pods = run("get", "pods", "-n", "kube-system", "-o", "wide").stdout.splitlines()
    assert pods[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE",
                               "NOMINATED", "NODE", "READINESS", "GATES"]
    assert pods[1].split() == ["fluentd-elasticsearch-abcde", "1/1", "Running", "0", "60s",
                               "10.0.0.7", "node-1", "<none>", "<none>"]


def test_get_controllerrevisions_names_the_controller(run: Run, dependents: None) -> None:
    revisions = run("get", "controllerrevisions", "-n", "kube-system").stdout.splitlines()
    assert revisions[1].split() == ["fluentd-elasticsearch-5d67f59cd6",
                                    "daemonset.apps/fluentd-elasticsearch", "1", "60s"]


def test_get_events_sorted_by_time(run: Run, dependents: None) -> None:
    events = run("get", "ev", "-n", "kube-system").stdout.splitlines()
    assert events[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert [e.split()[2] for e in events[1:]] == ["First", "Second"]
    assert events[1].split()[3] == "daemonset/fluentd-elasticsearch"


# ---- describe -------------------------------------------------------------------------------


def test_describe_daemonset_shows_counts_template_and_its_events(
        run: Run, store: store_client.Store, cluster: None) -> None:
    ds = store.get("DaemonSet", "kube-system/fluentd-elasticsearch")
    stamp = "2023-11-14T22:13:20Z"
    store.create({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "fluentd-elasticsearch.1", "namespace": "kube-system"},
        "involvedObject": {"apiVersion": "apps/v1", "kind": "DaemonSet",
                           "namespace": "kube-system", "name": "fluentd-elasticsearch",
                           "uid": ds["metadata"]["uid"]},
        "type": "Normal", "reason": "SuccessfulCreate",
        "message": "Created pod: fluentd-elasticsearch-abcde", "count": 1,
        "firstTimestamp": stamp, "lastTimestamp": stamp,
        "source": {"component": "daemonset-controller"},
    })

    out = run("describe", "ds", "fluentd-elasticsearch", "-n", "kube-system").stdout

    assert out.startswith("Name:           fluentd-elasticsearch\n"
                          "Selector:       name=fluentd-elasticsearch\n"
                          "Node-Selector:  <none>\n"
                          "Labels:         k8s-app=fluentd-logging\n")
    assert "Desired Number of Nodes Scheduled: 0\n" in out
    assert "Number of Nodes Misscheduled: 0\n" in out
    assert "Pods Status:  0 Running / 0 Waiting / 0 Succeeded / 0 Failed\n" in out
    assert "    Image:      k8s.gcr.io/fluentd-elasticsearch:1.20\n" in out
    assert out.endswith(
        "Events:\n"
        "  Type    Reason            Age   From                  Message\n"
        "  ----    ------            ----  ----                  -------\n"
        "  Normal  SuccessfulCreate  3m2s  daemonset-controller  "
        "Created pod: fluentd-elasticsearch-abcde\n")


def test_describe_node_shows_taints_and_unschedulable(run: Run, cluster: None) -> None:
    assert run("cordon", "node-1").exit_code == 0

    out = run("describe", "node/node-1").stdout

    assert "Taints:             node.kubernetes.io/unschedulable:NoSchedule\n" in out
    assert "Unschedulable:      true\n" in out
    assert "Non-terminated Pods:" in out


# ---- nodes, labels, taints, cordon ----------------------------------------------------------


def test_node_add_registers_nodes_like_a_kubelet(run: Run, store: store_client.Store) -> None:
    result = run("node", "add", "w1", "--label", "disktype=ssd",
                 "--taint", "dedicated=gpu:NoSchedule")

    assert result.stdout == "node/w1 created\n"
    node = store.get("Node", "/w1")
    assert node["metadata"]["labels"] == {
        "kubernetes.io/hostname": "w1", "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64", "disktype": "ssd"}
    assert node["spec"]["taints"] == [{"key": "dedicated", "value": "gpu",
                                       "effect": "NoSchedule"}]
    ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
    assert ready[0]["status"] == "False"
    assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.32.0-daemonbus"


def test_node_add_count_is_one_commit_numbered_on(run: Run, store: store_client.Store,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    assert run("node", "add", "--count", "2").exit_code == 0
    before = log_length(store)
    batches: list[int] = []
    commit = store_client.Store.commit

    def counted(self: store_client.Store, ops: Any, atomic: bool = False) -> Any:
        batches.append(len(ops))
        return commit(self, ops, atomic)

    monkeypatch.setattr(store_client.Store, "commit", counted)
    result = run("node", "add", "--count", "3", "--name-prefix", "node-")

    assert result.stdout == "node/node-3 created\nnode/node-4 created\nnode/node-5 created\n"
    assert batches == [3]  # one commit (one Lua call) of three creates
    assert log_length(store) == before + 3


def test_node_add_of_a_taken_name_creates_none(run: Run, store: store_client.Store) -> None:
    assert run("node", "add", "a").exit_code == 0
    before = log_length(store)

    result = run("node", "add", "b", "a")

    assert result.exit_code == 1
    assert result.stderr == 'Error from server (AlreadyExists): nodes "a" already exists\n'
    assert log_length(store) == before


def test_node_remove_deletes_the_node(run: Run, store: store_client.Store) -> None:
    assert run("node", "add", "gone").exit_code == 0

    assert run("node", "remove", "gone").stdout == 'node "gone" deleted\n'
    assert store.try_get("Node", "/gone") is None
    missing = run("node", "remove", "gone")
    assert missing.exit_code == 1
    assert missing.stderr == 'Error from server (NotFound): nodes "gone" not found\n'


def test_label_adds_refuses_overwrite_then_overwrites_and_removes(
        run: Run, store: store_client.Store) -> None:
    assert run("node", "add", "n1").exit_code == 0

    assert run("label", "node/n1", "zone=a").stdout == "node/n1 labeled\n"
    clash = run("label", "node/n1", "zone=b")
    assert clash.exit_code == 1
    assert clash.stderr == "error: 'zone' already has a value (a), and --overwrite is false\n"
    assert run("label", "nodes", "n1", "zone=b", "--overwrite").stdout == "node/n1 labeled\n"
    assert store.get("Node", "/n1")["metadata"]["labels"]["zone"] == "b"
    assert run("label", "node/n1", "zone-").stdout == "node/n1 unlabeled\n"
    assert "zone" not in store.get("Node", "/n1")["metadata"]["labels"]
    assert run("label", "node/n1", "zone-").stdout == 'label "zone" not found.\nnode/n1 not labeled\n'


def test_label_works_on_daemonsets(run: Run, store: store_client.Store) -> None:
    assert run("apply", "-f", str(FLUENTD)).exit_code == 0

    result = run("label", "ds", "fluentd-elasticsearch", "-n", "kube-system", "team=logs")

    assert result.stdout == "daemonset.apps/fluentd-elasticsearch labeled\n"
    ds = store.get("DaemonSet", "kube-system/fluentd-elasticsearch")
    assert ds["metadata"]["labels"]["team"] == "logs"
    assert ds["metadata"]["generation"] == 1


def test_taint_add_remove_and_errors(run: Run, store: store_client.Store) -> None:
    assert run("node", "add", "n1").exit_code == 0

    assert run("taint", "node/n1", "dedicated=gpu:NoSchedule").stdout == "node/n1 tainted\n"
    again = run("taint", "node/n1", "dedicated=cpu:NoSchedule")
    assert again.exit_code == 1
    assert again.stderr == ("error: node n1 already has dedicated taint(s) with same effect(s) "
                            "and --overwrite is false\n")
    assert run("taint", "nodes", "n1", "dedicated=cpu:NoSchedule", "--overwrite").stdout == \
        "node/n1 modified\n"
    assert run("taint", "node/n1", "evict:NoExecute").stdout == "node/n1 tainted\n"
    taints = store.get("Node", "/n1")["spec"]["taints"]
    assert {(t["key"], t.get("value"), t["effect"]) for t in taints} == {
        ("dedicated", "cpu", "NoSchedule"), ("evict", None, "NoExecute")}
    assert "timeAdded" in next(t for t in taints if t["effect"] == "NoExecute")
    assert run("taint", "node/n1", "evict:NoExecute-").stdout == "node/n1 untainted\n"
    assert run("taint", "node/n1", "dedicated-").stdout == "node/n1 untainted\n"
    assert "taints" not in store.get("Node", "/n1")["spec"]
    bad = run("taint", "node/n1", "k=v:Sometimes")
    assert bad.exit_code == 1
    assert bad.stderr == "error: invalid taint effect: Sometimes, unsupported taint effect\n"
    missing = run("taint", "node/n1", "dedicated-")
    assert missing.stderr == 'error: taint "dedicated" not found\n'


def test_cordon_and_uncordon_round_trip(run: Run, store: store_client.Store) -> None:
    assert run("node", "add", "n1").exit_code == 0

    assert run("cordon", "n1").stdout == "node/n1 cordoned\n"
    assert run("cordon", "n1").stdout == "node/n1 already cordoned\n"
    node = store.get("Node", "/n1")
    assert node["spec"]["unschedulable"] is True
    assert node["spec"]["taints"] == [{"key": "node.kubernetes.io/unschedulable",
                                       "effect": "NoSchedule"}]
    assert "NotReady,SchedulingDisabled" in run("get", "node", "n1").stdout
    assert run("uncordon", "n1").stdout == "node/n1 uncordoned\n"
    assert run("uncordon", "n1").stdout == "node/n1 already uncordoned\n"
    assert store.get("Node", "/n1")["spec"] == {}


# ---- delete ---------------------------------------------------------------------------------


def test_delete_missing_object_is_not_found(run: Run) -> None:
    result = run("delete", "ds", "nope")

    assert result.exit_code == 1
    assert result.stderr == 'Error from server (NotFound): daemonsets.apps "nope" not found\n'


def test_delete_daemonset_by_type_slash_name(run: Run, store: store_client.Store) -> None:
    assert run("apply", "-f", str(FLUENTD)).exit_code == 0

    result = run("delete", "ds/fluentd-elasticsearch", "-n", "kube-system")

    assert result.stdout == 'daemonset.apps "fluentd-elasticsearch" deleted\n'
    assert store.try_get("DaemonSet", "kube-system/fluentd-elasticsearch") is None


def test_delete_cascade_false_orphans_with_kubectls_warning(
        run: Run, store: store_client.Store) -> None:
    assert run("apply", "-f", str(FLUENTD)).exit_code == 0

    result = run("delete", "ds", "fluentd-elasticsearch", "-n", "kube-system", "--cascade=false")

    assert result.stderr == ("warning: --cascade=false is deprecated (boolean value) and can be "
                             "replaced with --cascade=orphan.\n")
    assert result.stdout == 'daemonset.apps "fluentd-elasticsearch" deleted\n'
    left = store.get("DaemonSet", "kube-system/fluentd-elasticsearch")
    assert left["metadata"]["finalizers"] == ["orphan"]
    assert left["metadata"]["deletionTimestamp"]


# ---- configuration and the console script ---------------------------------------------------


def test_unreachable_redis_is_one_line_error() -> None:
    result = CliRunner().invoke(cli, ["--redis-url", "redis://127.0.0.1:1/0", "get", "nodes"],
                                obj=context.CliEnv())

    assert result.exit_code == 1
    assert result.stderr.startswith("error: cannot reach Redis at redis://127.0.0.1:1/0: ")
    assert len(result.stderr.splitlines()) == 1


def test_no_redis_configured_is_one_line_error(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DAEMONBUS_REDIS_URL", raising=False)
    monkeypatch.setenv("DAEMONBUS_HOME", str(tmp_path))

    result = CliRunner().invoke(cli, ["get", "nodes"], obj=context.CliEnv())

    assert result.exit_code == 1
    assert result.stderr.startswith("error: no Redis configured")


def _console_script() -> str:
    found = shutil.which("daemonbus", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.skip("the daemonbus console script is not installed (pip install -e .)")
    return found


def test_console_script_round_trip(redis_url: str, prefix: str, tmp_path: Path) -> None:
    base = [_console_script(), "--redis-url", redis_url, "--prefix", prefix]

    added = subprocess.run([*base, "node", "add", "s1"], capture_output=True, text=True,
                           timeout=60)
    listed = subprocess.run([*base, "get", "nodes", "-o", "name"], capture_output=True,
                            text=True, timeout=60)
    missing = subprocess.run([*base, "get", "ds", "x"], capture_output=True, text=True,
                             timeout=60)

    assert (added.returncode, added.stdout) == (0, "node/s1 created\n")
    assert listed.stdout == "node/s1\n"
    assert missing.returncode == 1
    assert missing.stderr == 'Error from server (NotFound): daemonsets.apps "x" not found\n'


def test_concurrent_label_commands_lose_no_update(redis_url: str, prefix: str,
                                                  store: store_client.Store) -> None:
    base = [_console_script(), "--redis-url", redis_url, "--prefix", prefix]
    subprocess.run([*base, "node", "add", "busy"], check=True, capture_output=True, timeout=60)

    procs = [subprocess.Popen([*base, "label", "node/busy", f"k{i}=v{i}"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for i in range(6)]
    codes = [p.wait(timeout=60) for p in procs]

    assert codes == [0] * 6
    got = store.get("Node", "/busy")["metadata"]["labels"]
    assert {f"k{i}" for i in range(6)} <= set(got)

