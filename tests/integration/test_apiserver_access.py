"""ServiceAccounts and the RBAC group's kinds through the real kubectl and the official Python
client against a live stack: a node agent's bundle applied whole, kubectl's create verbs
(protobuf bodies), tables, describe, explain, upstream's refusals, the writers allowed, and a
namespace's deletion taking its own with it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config

from tests.integration import apiserver_kit
from tests.integration.apiserver_kit import TESTDATA, ApiServer
from tests.integration.stack import Stack, wait_for

FLUENTD = TESTDATA / "kubernetes-website-fluentd-elasticsearch.yaml"
RBAC = "rbac.authorization.k8s.io/v1"


@pytest.fixture
def api(stack: Stack, tmp_path: Path) -> ApiServer:
    return apiserver_kit.in_front(stack, tmp_path, nodes=2)


def bundle(ns: str) -> list[dict[str, object]]:
    """What a log shipper's manifest carries beside its DaemonSet."""
    ds = yaml.safe_load(FLUENTD.read_text())
    ds["metadata"]["namespace"] = ns
    ds["spec"]["template"]["spec"]["serviceAccountName"] = "fluentd"
    sa = {"kind": "ServiceAccount", "name": "fluentd", "namespace": ns}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": "fluentd", "namespace": ns}},
        {"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": "fluentd"},
         "rules": [{"apiGroups": [""], "resources": ["pods", "namespaces"],
                    "verbs": ["get", "list", "watch"]}]},
        {"apiVersion": RBAC, "kind": "ClusterRoleBinding", "metadata": {"name": "fluentd"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": "fluentd"}, "subjects": [sa]},
        {"apiVersion": RBAC, "kind": "Role", "metadata": {"name": "leader", "namespace": ns},
         "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                    "verbs": ["get", "update"]}]},
        {"apiVersion": RBAC, "kind": "RoleBinding",
         "metadata": {"name": "leader", "namespace": ns},
         "roleRef": {"kind": "Role", "name": "leader"}, "subjects": [sa]},
        ds,
    ]


def test_kubectl_lists_and_explains_the_access_kinds(api: ApiServer) -> None:
    rows = [line.split() for line in api.kubectl("api-resources", "--no-headers").stdout
            .splitlines()]
    assert ["serviceaccounts", "sa", "v1", "true", "ServiceAccount"] in rows
    for plural, namespaced, kind in (("roles", "true", "Role"),
                                     ("rolebindings", "true", "RoleBinding"),
                                     ("clusterroles", "false", "ClusterRole"),
                                     ("clusterrolebindings", "false", "ClusterRoleBinding")):
        assert [plural, RBAC, namespaced, kind] in rows
    explained = api.kubectl("explain", "clusterrolebinding.roleRef").stdout
    assert "GROUP:      rbac.authorization.k8s.io" in explained
    assert "FIELD: roleRef <RoleRef>" in explained
    assert "serviceaccounts" not in api.kubectl("api-resources", "--categories=all", "-o",
                                                "name").stdout


def test_a_bundle_applies_whole_and_its_namespace_deletion_takes_its_own(
        api: ApiServer, tmp_path: Path) -> None:
    api.kubectl("create", "namespace", "logging")
    path = tmp_path / "bundle.yaml"
    path.write_text(yaml.safe_dump_all(bundle("logging")))
    names = ["serviceaccount/fluentd", "clusterrole.rbac.authorization.k8s.io/fluentd",
             "clusterrolebinding.rbac.authorization.k8s.io/fluentd",
             "role.rbac.authorization.k8s.io/leader",
             "rolebinding.rbac.authorization.k8s.io/leader",
             "daemonset.apps/fluentd-elasticsearch"]
    assert api.kubectl("apply", "-f", str(path)).stdout == "".join(
        f"{n} created\n" for n in names)
    assert api.kubectl("apply", "-f", str(path)).stdout == "".join(
        f"{n} unchanged\n" for n in names)
    wait_for(lambda: api.json("get", "ds", "-n", "logging", "fluentd-elasticsearch")
             ["status"].get("numberReady") == 2, timeout=60, what="the daemon pods ready")
    binding = api.json("get", "rolebinding", "-n", "logging", "leader")
    assert binding["roleRef"]["apiGroup"] == "rbac.authorization.k8s.io"  # defaulted
    wide = api.kubectl("get", "clusterrolebinding", "fluentd", "-o", "wide").stdout.splitlines()
    assert wide[0].split() == ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"]
    assert wide[1].split()[:2] == ["fluentd", "ClusterRole/fluentd"]
    assert wide[1].split()[-1] == "logging/fluentd"
    sas = api.kubectl("get", "sa", "-n", "logging").stdout.splitlines()
    assert sas[0].split() == ["NAME", "SECRETS", "AGE"] and sas[1].split()[:2] == ["fluentd", "0"]
    described = api.kubectl("describe", "clusterrole", "fluentd").stdout
    assert "pods        []                 []              [get list watch]" in described
    api.kubectl("delete", "ns", "logging", "--wait=false")
    api.kubectl("wait", "--for=delete", "namespace/logging", "--timeout=60s")
    for kind in ("ServiceAccount", "Role", "RoleBinding", "DaemonSet"):
        assert api.stack.store.list(kind, "logging") == [], kind
    # the cluster-wide ones are not the namespace's
    assert api.kubectl("get", "clusterrole,clusterrolebinding", "-o", "name").stdout == (
        "clusterrole.rbac.authorization.k8s.io/fluentd\n"
        "clusterrolebinding.rbac.authorization.k8s.io/fluentd\n")


def test_kubectl_create_verbs_and_upstreams_refusals(api: ApiServer) -> None:
    # each of these posts a protobuf body
    assert api.kubectl("create", "serviceaccount", "agent").stdout == \
        "serviceaccount/agent created\n"
    assert api.kubectl("create", "role", "reader", "--verb=get,list",
                       "--resource=pods").stdout == \
        "role.rbac.authorization.k8s.io/reader created\n"
    assert api.kubectl("create", "clusterrole", "nodes", "--verb=get",
                       "--resource=nodes").stdout == \
        "clusterrole.rbac.authorization.k8s.io/nodes created\n"
    assert api.kubectl("create", "rolebinding", "reader", "--role=reader", "--user=alice",
                       "--group=ops", "--serviceaccount=default:agent").stdout == \
        "rolebinding.rbac.authorization.k8s.io/reader created\n"
    assert api.kubectl("create", "clusterrolebinding", "nodes", "--clusterrole=nodes",
                       "--serviceaccount=default:agent").stdout == \
        "clusterrolebinding.rbac.authorization.k8s.io/nodes created\n"
    rb = api.json("get", "rolebinding", "reader")
    assert rb["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"},
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "ops"},
        {"kind": "ServiceAccount", "name": "agent", "namespace": "default"}]
    described = api.kubectl("describe", "rolebinding", "reader").stdout
    assert "Role:\n  Kind:  Role\n  Name:  reader\n" in described, described
    assert "ServiceAccount  agent  default" in described, described
    changed = api.kubectl("patch", "rolebinding", "reader", "--type=merge", "-p",
                          json.dumps({"roleRef": {"name": "other"}}), check=False)
    assert changed.returncode == 1
    assert ('The RoleBinding "reader" is invalid: roleRef: Invalid value: rbac.RoleRef'
            '{APIGroup:"rbac.authorization.k8s.io", Kind:"Role", Name:"other"}: cannot change '
            "roleRef") in changed.stderr, changed.stderr
    bad = {"apiVersion": RBAC, "kind": "Role", "metadata": {"name": "bad"},
           "rules": [{"resources": ["pods"], "verbs": ["get"]}]}
    refused = api.kubectl("apply", "-f", "-", input=json.dumps(bad), check=False)
    assert refused.returncode == 1
    assert ('The Role "bad" is invalid: rules[0].apiGroups: Required value: resource rules '
            "must supply at least one api group") in refused.stderr, refused.stderr
    assert api.kubectl("get", "role", "bad", check=False).returncode == 1  # nothing written


def test_only_admin_writes_them_and_every_user_reads_them(api: ApiServer) -> None:
    api.kubectl("create", "serviceaccount", "agent")
    denied = api.kubectl("create", "serviceaccount", "other", user="editor", check=False)
    assert denied.returncode == 1
    assert ('serviceaccounts is forbidden: User "editor" cannot create resource '
            '"serviceaccounts" in API group "" in the namespace "default"') in denied.stderr
    assert api.kubectl("auth", "can-i", "create", "clusterrolebindings", user="editor",
                       check=False).stdout == "no\n"
    assert api.kubectl("get", "sa", "-o", "name", user="viewer").stdout == \
        "serviceaccount/agent\n"


def test_bindings_grant_what_their_roles_allow(api: ApiServer, tmp_path: Path) -> None:
    """RBAC as upstream's: a ServiceAccount (here impersonated, ``kubectl --as``) may do
    what the bindings naming it grant, in the namespace of a RoleBinding only, and nothing
    more; a binding's deletion takes it back."""
    api.kubectl("create", "namespace", "logs")
    path = tmp_path / "bundle.yaml"
    path.write_text(yaml.safe_dump_all(bundle("logs")))
    api.kubectl("apply", "-f", str(path))
    sa = "system:serviceaccount:logs:fluentd"

    def can(*args: str) -> str:
        return api.kubectl("auth", "can-i", *args, "--as", sa, check=False).stdout

    assert can("list", "pods", "-A") == "yes\n"  # the ClusterRoleBinding's ClusterRole
    assert can("watch", "namespaces") == "yes\n"
    assert can("delete", "pods", "-n", "logs") == "no\n"
    assert can("update", "leases.coordination.k8s.io", "-n", "logs") == "yes\n"  # RoleBinding
    assert can("update", "leases.coordination.k8s.io", "-n", "default") == "no\n"
    pods = api.kubectl("get", "pods", "-A", "-o", "name", "--as", sa).stdout
    assert pods.startswith("pod/fluentd-elasticsearch-"), pods
    assert api.kubectl("get", "secrets", "-n", "logs", "--as", sa, check=False).stderr == (
        'Error from server (Forbidden): secrets is forbidden: User '
        '"system:serviceaccount:logs:fluentd" cannot list resource "secrets" in API group "" '
        'in the namespace "logs"\n')
    listed = api.kubectl("auth", "can-i", "--list", "-n", "logs", "--as", sa).stdout
    assert re.search(r"^pods\s+\[\]\s+\[\]\s+\[get list watch\]$", listed, re.M), listed
    assert re.search(r"^leases\.coordination\.k8s\.io\s+\[\]\s+\[\]\s+\[get update\]$",
                     listed, re.M), listed
    whoami = api.kubectl("auth", "whoami", "--as", sa).stdout
    assert "[system:serviceaccounts system:serviceaccounts:logs system:authenticated]" in whoami

    # a built-in ClusterRole, bound in one namespace
    assert can("list", "daemonsets", "-n", "kube-system") == "no\n"
    api.kubectl("create", "rolebinding", "see", "--clusterrole=view",
                "--serviceaccount=logs:fluentd", "-n", "kube-system")
    wait_for(lambda: can("list", "daemonsets", "-n", "kube-system") == "yes\n",
             what="the RoleBinding to view to grant")
    assert can("list", "daemonsets", "-n", "default") == "no\n"
    assert can("get", "secrets", "-n", "kube-system") == "no\n"  # view reads no Secret
    assert can("create", "daemonsets", "-n", "kube-system") == "no\n"
    api.kubectl("delete", "clusterrolebinding", "fluentd")
    wait_for(lambda: can("list", "pods", "-A") == "no\n", what="the deletion to take it back")


def test_no_binding_lets_a_user_grant_itself_more(api: ApiServer) -> None:
    """Even bound to cluster-admin, a ServiceAccount may not write the access objects: it
    would grant more than an admin gave (upstream's escalation check guards that; here only
    the token file's admins write them)."""
    sa = "system:serviceaccount:default:ops"
    api.kubectl("create", "clusterrolebinding", "ops", "--clusterrole=cluster-admin",
                "--serviceaccount=default:ops")
    wait_for(lambda: api.kubectl("auth", "can-i", "delete", "nodes", "--as", sa,
                                 check=False).stdout == "yes\n", what="the binding to grant")
    assert api.kubectl("auth", "can-i", "create", "clusterrolebindings", "--as", sa,
                       check=False).stdout == "no\n"
    refused = api.kubectl("create", "clusterrolebinding", "more", "--clusterrole=view",
                          "--user=mallory", "--as", sa, check=False)
    assert refused.stderr == (
        'error: failed to create clusterrolebinding: clusterrolebindings.rbac.authorization.'
        f'k8s.io is forbidden: User "{sa}" cannot create resource "clusterrolebindings" in '
        'API group "rbac.authorization.k8s.io" at the cluster scope\n'), refused.stderr
    assert api.kubectl("get", "clusterrolebinding", "more", check=False).returncode == 1


def test_a_group_impersonated_gets_its_bindings(api: ApiServer) -> None:
    api.kubectl("create", "clusterrolebinding", "ops", "--clusterrole=edit", "--group=ops")
    assert api.kubectl("auth", "can-i", "create", "daemonsets", "--as", "someone",
                       check=False).stdout == "no\n"
    assert wait_for(lambda: api.kubectl("auth", "can-i", "create", "daemonsets", "--as",
                                        "someone", "--as-group", "ops",
                                        check=False).stdout == "yes\n")
    assert api.kubectl("auth", "can-i", "create", "daemonsets", "--as", "someone",
                       "--as-group", "dev", check=False).stdout == "no\n"


def test_the_python_client_reads_and_writes_them(api: ApiServer) -> None:
    cfg = config.new_client_from_config(config_file=str(api.kubeconfig()))
    rbac, core = client.RbacAuthorizationV1Api(cfg), client.CoreV1Api(cfg)
    core.create_namespaced_service_account("default", client.V1ServiceAccount(
        metadata=client.V1ObjectMeta(name="agent")))
    rbac.create_cluster_role(client.V1ClusterRole(
        metadata=client.V1ObjectMeta(name="reader"),
        rules=[client.V1PolicyRule(api_groups=[""], resources=["pods"], verbs=["list"])]))
    rbac.create_cluster_role_binding(client.V1ClusterRoleBinding(
        metadata=client.V1ObjectMeta(name="reader"),
        role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="ClusterRole",
                                  name="reader"),
        subjects=[client.RbacV1Subject(kind="ServiceAccount", name="agent",
                                       namespace="default")]))
    got = rbac.read_cluster_role_binding("reader")
    assert got.role_ref.name == "reader" and got.subjects[0].namespace == "default"
    assert [r.metadata.name for r in rbac.list_cluster_role().items] == ["reader"]
    assert core.read_namespaced_service_account("agent", "default").metadata.uid
    rbac.delete_cluster_role_binding("reader")
    assert rbac.list_cluster_role_binding().items == []
