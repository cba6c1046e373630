"""ServiceAccounts and the RBAC group's kinds: upstream's validation messages, the v1
defaults of a binding, their tables' columns, their protobuf bodies, and the commit
script's list of kinds."""

from __future__ import annotations

import re
from typing import Any

import pytest

from services.apiserver import protobuf
from shared.api import tables
from shared.model import defaults, kinds, validation
from shared.store import scripts

RBAC = "rbac.authorization.k8s.io/v1"
GROUP = "rbac.authorization.k8s.io"


def binding(kind: str = "RoleBinding", **fields: Any) -> dict[str, Any]:
    md = {"name": "read", **({"namespace": "logging"} if kind == "RoleBinding" else {})}
    obj = {"apiVersion": RBAC, "kind": kind, "metadata": md,
           "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "view"},
           "subjects": [{"kind": "ServiceAccount", "name": "agent", "namespace": "logging"}]}
    return {**obj, **fields}


def role(kind: str = "Role", *rules: dict[str, Any]) -> dict[str, Any]:
    md = {"name": "r", **({"namespace": "logging"} if kind == "Role" else {})}
    return {"apiVersion": RBAC, "kind": kind, "metadata": md, "rules": list(rules)}


def test_a_service_account_is_named_as_a_dns_subdomain_and_its_fields_typed() -> None:
    sa = {"apiVersion": "v1", "kind": "ServiceAccount",
          "metadata": {"name": "fluent-bit", "namespace": "logging"},
          "secrets": [{"name": "token"}], "imagePullSecrets": [{"name": "pull"}],
          "automountServiceAccountToken": False}
    assert validation.validate(sa) == []
    bad = {**sa, "metadata": {"name": "Fluent_Bit", "namespace": "logging"},
           "secrets": [{"name": 3}], "automountServiceAccountToken": "no"}
    errs = validation.validate(bad)
    assert errs[0].startswith('metadata.name: Invalid value: "Fluent_Bit": a lowercase RFC 1123')
    assert errs[1:] == ["secrets[0].name: Invalid value: 3: must be of type string",
                        'automountServiceAccountToken: Invalid value: "no": must be of type '
                        "boolean"]
    renamed = {**sa, "metadata": {"name": "other", "namespace": "logging"}}
    assert any(e.startswith("metadata.name: Invalid value: \"other\": field is immutable")
               for e in validation.validate(renamed, sa))


def test_policy_rules_as_upstream_validates_them() -> None:
    assert validation.validate(role("Role", {"apiGroups": [""], "resources": ["pods"],
                                             "verbs": ["get"]})) == []
    assert validation.validate(role("Role", {"nonResourceURLs": ["/healthz"]},
                                    {"verbs": ["get"], "resources": ["a", "b"],
                                     "resourceNames": ["n"]})) == [
        "rules[0].verbs: Required value: verbs must contain at least one value",
        'rules[0].nonResourceURLs: Invalid value: []string{"/healthz"}: namespaced rules '
        "cannot apply to non-resource URLs",
        "rules[1].apiGroups: Required value: resource rules must supply at least one api group",
        "rules[1].resourceNames: Required value: resource names cannot apply to multiple "
        "resources",
    ]
    assert validation.validate(role("ClusterRole", {"nonResourceURLs": ["/healthz"],
                                                    "verbs": ["get"]})) == []
    assert validation.validate(role("ClusterRole", {"nonResourceURLs": ["/x"], "verbs": ["get"],
                                                    "resources": ["pods"]})) == [
        'rules[0].nonResourceURLs: Invalid value: []string{"/x"}: rules cannot apply to both '
        "regular resources and non-resource URLs"]
    assert validation.validate({**role("ClusterRole"), "aggregationRule": {}}) == [
        "aggregationRule.clusterRoleSelectors: Required value: at least one "
        "clusterRoleSelector required if aggregationRule is non-nil"]
    named = role("ClusterRole")
    named["metadata"]["name"] = "system:a/b"
    assert validation.validate(named) == [
        "metadata.name: Invalid value: \"system:a/b\": may not contain '/'"]


def test_bindings_refer_to_a_role_of_the_group_and_name_their_subjects() -> None:
    assert validation.validate(binding()) == []
    assert validation.validate(binding("ClusterRoleBinding")) == []
    assert validation.validate(binding(
        "ClusterRoleBinding", roleRef={"apiGroup": "", "kind": "Role", "name": ""},
        subjects=[{"kind": "ServiceAccount", "name": "agent"}, {"kind": "User", "name": ""},
                  {"kind": "Robot", "name": "r"}])) == [
        'roleRef.apiGroup: Unsupported value: "": supported values: '
        '"rbac.authorization.k8s.io"',
        'roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole"',
        "roleRef.name: Required value",
        "subjects[0].namespace: Required value",
        "subjects[1].name: Required value",
        'subjects[1].name: Invalid value: "": user name cannot be empty',
        'subjects[1].apiGroup: Unsupported value: "": supported values: '
        '"rbac.authorization.k8s.io"',
        'subjects[2].kind: Unsupported value: "Robot": supported values: "ServiceAccount", '
        '"User", "Group"',
    ]
    # a RoleBinding's ServiceAccount is in its own namespace when it names none
    assert validation.validate(binding(subjects=[{"kind": "ServiceAccount", "name": "a"}])) == []


def test_a_bindings_role_ref_never_changes() -> None:
    old = binding()
    new = binding(roleRef={"apiGroup": GROUP, "kind": "ClusterRole", "name": "edit"})
    assert validation.validate(new, old) == [
        'roleRef: Invalid value: rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", '
        'Kind:"ClusterRole", Name:"edit"}: cannot change roleRef']
    assert validation.validate(binding(subjects=[]), old) == []  # its subjects may


def test_v1_defaults_of_a_binding() -> None:
    got = defaults.default({"apiVersion": RBAC, "kind": "RoleBinding",
                            "metadata": {"name": "b"},
                            "roleRef": {"kind": "Role", "name": "r"},
                            "subjects": [{"kind": "User", "name": "u"},
                                         {"kind": "Group", "name": "g"},
                                         {"kind": "ServiceAccount", "name": "s"}]})
    assert got["metadata"]["namespace"] == "default"
    assert got["roleRef"]["apiGroup"] == GROUP
    assert [s.get("apiGroup") for s in got["subjects"]] == [GROUP, GROUP, None]
    assert validation.validate(got) == []
    cluster = defaults.default(role("ClusterRole"))
    assert "namespace" not in cluster["metadata"]


def test_tables_have_upstreams_columns() -> None:
    now = 1_000_000.0
    created = "1970-01-12T13:46:00Z"  # 40 s before now
    sa = {"metadata": {"name": "agent", "creationTimestamp": created},
          "secrets": [{"name": "a"}, {"name": "b"}]}
    assert [c.header for c in tables.columns("ServiceAccount")] == ["NAME", "SECRETS", "AGE"]
    assert tables.cells("ServiceAccount", sa, now) == ["agent", 2, "40s"]
    assert [c.header for c in tables.columns("ClusterRole")] == ["NAME", "CREATED AT"]
    assert tables.cells("ClusterRole", {"metadata": {"name": "view",
                                                      "creationTimestamp": created}},
                        now) == ["view", created]
    assert [(c.header, c.priority) for c in tables.columns("RoleBinding")] == [
        ("NAME", 0), ("ROLE", 0), ("AGE", 0), ("USERS", 1), ("GROUPS", 1),
        ("SERVICEACCOUNTS", 1)]
    crb = binding("ClusterRoleBinding", subjects=[
        {"kind": "User", "name": "alice"}, {"kind": "User", "name": "bob"},
        {"kind": "Group", "name": "ops"},
        {"kind": "ServiceAccount", "name": "agent", "namespace": "logging"}])
    crb["metadata"]["creationTimestamp"] = created
    assert tables.cells("ClusterRoleBinding", crb, now) == [
        "read", "ClusterRole/view", "40s", "alice, bob", "ops", "logging/agent"]


def _proto(api_version: str, kind: str, body: bytes) -> bytes:
    type_meta = protobuf.text(1, api_version) + protobuf.text(2, kind)
    return protobuf.MAGIC + protobuf.message(1, type_meta) + protobuf.message(2, body)


def test_kubectl_creates_protobuf_bodies_decode_whole() -> None:
    meta = protobuf.message(1, protobuf.text(1, "read") + protobuf.text(3, "logging"))
    rb = (meta + protobuf.message(2, protobuf.text(1, "ServiceAccount") + protobuf.text(3, "a")
                                  + protobuf.text(4, "logging"))
          + protobuf.message(3, protobuf.text(1, GROUP) + protobuf.text(2, "Role")
                             + protobuf.text(3, "r")))
    assert protobuf.decode(_proto(RBAC, "RoleBinding", rb)) == {
        "apiVersion": RBAC, "kind": "RoleBinding",
        "metadata": {"name": "read", "namespace": "logging"},
        "subjects": [{"kind": "ServiceAccount", "name": "a", "namespace": "logging"}],
        "roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "r"}}
    rule = protobuf.texts(1, ["get", "list"]) + protobuf.text(2, "") + protobuf.text(3, "pods")
    selector = protobuf.message(1, protobuf.text(1, "a") + protobuf.text(2, "b"))
    cr = (protobuf.message(1, protobuf.text(1, "c")) + protobuf.message(2, rule)
          + protobuf.message(3, protobuf.message(1, selector)))
    assert protobuf.decode(_proto(RBAC, "ClusterRole", cr)) == {
        "apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": "c"},
        "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}],
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]}}
    sa = protobuf.message(1, protobuf.text(1, "agent")) + protobuf.boolean(4, False)
    assert protobuf.decode(_proto("v1", "ServiceAccount", sa + protobuf.varint(4 << 3)
                                  + b"\x00")) == {
        "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "agent"},
        "automountServiceAccountToken": False}
    with pytest.raises(protobuf.ProtobufError, match="field 9 of ServiceAccount"):
        protobuf.decode(_proto("v1", "ServiceAccount", protobuf.text(9, "x")))


def _lua_table(name: str) -> set[str]:
    found = re.search(r"local " + name + r" = \{(.*?)\}", scripts.COMMIT, re.S)
    assert found is not None
    return set(re.findall(r"(\w+) = true", found.group(1)))


def test_the_commit_script_knows_every_stored_kind() -> None:
    assert _lua_table("KINDS") == set(kinds.STORED)
    assert _lua_table("USERS_OWN") == {k.kind for k in kinds.USER_KINDS if k.namespaced}
