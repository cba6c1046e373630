"""RBAC as upstream's authorizer reads it (shared.api.rbac) and the API server's decision
that puts it on top of the token file's roles (services.apiserver.auth.decide)."""

from __future__ import annotations

from typing import Any

import pytest

from services.apiserver import auth
from shared.api import rbac
from shared.api.rbac import Request

SA = "system:serviceaccount:logs:fluentd"
SA_GROUPS = rbac.groups_of(SA)
RBAC = "rbac.authorization.k8s.io"


def role(kind: str, name: str, rules: list[Any], ns: str = "", **more: Any) -> dict[str, Any]:
    return {"kind": kind, "metadata": {"name": name, "namespace": ns, **more}, "rules": rules}


def binding(kind: str, name: str, ref: tuple[str, str], subjects: list[Any],
            ns: str = "") -> dict[str, Any]:
    return {"kind": kind, "metadata": {"name": name, "namespace": ns},
            "roleRef": {"apiGroup": RBAC, "kind": ref[0], "name": ref[1]},
            "subjects": subjects}


def store(*objs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for o in objs:
        out.setdefault(o["kind"], {})[f"{o['metadata']['namespace']}/{o['metadata']['name']}"] = o
    return out


READ_PODS = {"apiGroups": [""], "resources": ["pods", "namespaces"],
             "verbs": ["get", "list", "watch"]}
SA_SUBJECT = {"kind": "ServiceAccount", "name": "fluentd", "namespace": "logs"}


def no_builtin(_name: str) -> None:
    return None


def allows(objects: Any, req: Request, user: str = SA,
           groups: tuple[str, ...] = SA_GROUPS) -> str | None:
    return rbac.allows(objects, user, groups, req, no_builtin)


@pytest.mark.parametrize(("rule", "req", "allowed"), [
    (READ_PODS, Request("list", "", "pods"), True),
    (READ_PODS, Request("delete", "", "pods", name="p"), False),
    (READ_PODS, Request("list", "apps", "pods"), False),  # another group's "pods"
    (READ_PODS, Request("get", "", "pods", "log", name="p"), False),  # a subresource is its own
    ({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, Request("escalate", "x", "y"),
     True),
    ({"apiGroups": ["apps"], "resources": ["*/status"], "verbs": ["update"]},
     Request("update", "apps", "daemonsets", "status", name="d"), True),
    ({"apiGroups": ["apps"], "resources": ["*/status"], "verbs": ["update"]},
     Request("update", "apps", "daemonsets", name="d"), False),
    ({"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["cfg"],
      "verbs": ["get", "update"]}, Request("get", "", "configmaps", name="cfg"), True),
    ({"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["cfg"],
      "verbs": ["get", "list"]}, Request("list", "", "configmaps"), False),  # names no one
    ({"nonResourceURLs": ["/metrics"], "verbs": ["get"]}, Request("get", path="/metrics"), True),
    ({"nonResourceURLs": ["/logs/*"], "verbs": ["get"]}, Request("get", path="/logs/a/b"), True),
    ({"nonResourceURLs": ["/logs/*"], "verbs": ["get"]}, Request("get", path="/log"), False),
    (READ_PODS, Request("get", path="/metrics"), False),
    ("not a rule", Request("list", "", "pods"), False),
])
def test_a_rule_allows_what_every_one_of_its_lists_matches(rule: Any, req: Request,
                                                            allowed: bool) -> None:
    assert rbac.rule_allows(rule, req) is allowed


def test_a_cluster_role_binding_grants_everywhere_a_role_binding_in_its_namespace() -> None:
    objects = store(role("ClusterRole", "reader", [READ_PODS]),
                    binding("ClusterRoleBinding", "all", ("ClusterRole", "reader"),
                            [SA_SUBJECT]))
    assert allows(objects, Request("list", "", "pods", namespace="a")) == (
        'RBAC: allowed by ClusterRoleBinding "all" of ClusterRole "reader" to ServiceAccount '
        '"fluentd/logs"')
    assert allows(objects, Request("list", "", "pods")) is not None  # every namespace
    here = store(role("ClusterRole", "reader", [READ_PODS]),
                 binding("RoleBinding", "here", ("ClusterRole", "reader"),
                         [{"kind": "ServiceAccount", "name": "fluentd"}], ns="logs"))
    assert allows(here, Request("list", "", "pods", namespace="logs")) == (
        'RBAC: allowed by RoleBinding "here/logs" of ClusterRole "reader" to ServiceAccount '
        '"fluentd/logs"')  # a subject without a namespace is one of the binding's
    assert allows(here, Request("list", "", "pods", namespace="other")) is None
    assert allows(here, Request("list", "", "pods")) is None
    assert allows(here, Request("list", "", "pods", namespace="logs"),
                  user="system:serviceaccount:other:fluentd",
                  groups=rbac.groups_of("system:serviceaccount:other:fluentd")) is None


def test_subjects_are_users_groups_or_service_accounts() -> None:
    objects = store(role("Role", "leases", [{"apiGroups": ["coordination.k8s.io"],
                                             "resources": ["leases"], "verbs": ["*"]}],
                         ns="logs"),
                    binding("RoleBinding", "b", ("Role", "leases"),
                            [{"kind": "User", "name": "alice"},
                             {"kind": "Group", "name": "system:serviceaccounts:logs"}],
                            ns="logs"))
    lease = Request("update", "coordination.k8s.io", "leases", namespace="logs", name="l")
    assert allows(objects, lease, "alice", ("system:authenticated",)) == (
        'RBAC: allowed by RoleBinding "b/logs" of Role "leases" to User "alice"')
    assert allows(objects, lease, "bob", ("system:authenticated",)) is None
    assert allows(objects, lease) == (  # every ServiceAccount of the namespace, by group
        'RBAC: allowed by RoleBinding "b/logs" of Role "leases" to Group '
        '"system:serviceaccounts:logs"')


def test_a_binding_to_a_role_that_does_not_exist_grants_nothing() -> None:
    objects = store(binding("ClusterRoleBinding", "b", ("ClusterRole", "gone"), [SA_SUBJECT]),
                    binding("RoleBinding", "r", ("Role", "gone"), [SA_SUBJECT], ns="logs"))
    assert allows(objects, Request("list", "", "pods", namespace="logs")) is None


def test_an_aggregated_cluster_role_has_the_rules_of_those_its_selectors_match() -> None:
    objects = store(
        {"kind": "ClusterRole", "metadata": {"name": "monitoring", "namespace": ""},
         "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"agg": "mon"}}]},
         "rules": []},
        role("ClusterRole", "pods", [READ_PODS], labels={"agg": "mon"}),
        role("ClusterRole", "secrets", [{"apiGroups": [""], "resources": ["secrets"],
                                         "verbs": ["get"]}], labels={"agg": "other"}),
        binding("ClusterRoleBinding", "b", ("ClusterRole", "monitoring"), [SA_SUBJECT]))
    assert allows(objects, Request("watch", "", "pods")) is not None
    assert allows(objects, Request("get", "", "secrets", namespace="a", name="s")) is None
    # one it selects that aggregates in turn brings its own; a cycle ends
    chained = {**objects, "ClusterRole": {
        **objects["ClusterRole"],
        "/middle": {"kind": "ClusterRole", "metadata": {"name": "middle", "namespace": "",
                                                        "labels": {"agg": "mon"}},
                    "aggregationRule": {"clusterRoleSelectors": [
                        {"matchLabels": {"agg": "other"}}, {"matchLabels": {"agg": "mon"}}]}}}}
    assert allows(chained, Request("get", "", "secrets", namespace="a", name="s")) is not None


def test_service_account_user_names_and_groups() -> None:
    assert rbac.service_account(SA) == ("logs", "fluentd")
    for name in ("alice", "system:serviceaccount:logs", "system:serviceaccount::x",
                 "system:serviceaccount:a:b:c"):
        assert rbac.service_account(name) is None
    assert rbac.groups_of("alice") == ("system:authenticated",)
    assert SA_GROUPS == ("system:serviceaccounts", "system:serviceaccounts:logs",
                         "system:authenticated")


def decide(objects: Any, req: Request, namespaced: bool = True) -> str | None:
    return auth.decide(auth.User(SA, auth.NO_ROLE, SA_GROUPS), req, namespaced, objects)


def test_the_built_in_cluster_roles_grant_what_the_role_table_gives() -> None:
    def bound(to: str, ns: str = "") -> Any:
        kind = "RoleBinding" if ns else "ClusterRoleBinding"
        return store(binding(kind, "b", ("ClusterRole", to), [SA_SUBJECT], ns=ns))

    list_pods = Request("list", "", "pods", namespace="a")
    create_ds = Request("create", "apps", "daemonsets", namespace="a")
    read_secret = Request("get", "", "secrets", namespace="a", name="s")
    patch_node = Request("patch", "", "nodes", name="n")
    assert decide({}, list_pods) is None  # no binding: no role, nothing
    assert decide(bound("view"), list_pods) is not None
    assert decide(bound("view"), create_ds) is None
    assert decide(bound("view"), read_secret) is None  # view reads no Secret
    assert decide(bound("edit"), create_ds) is not None
    assert decide(bound("edit"), patch_node, False) is None
    assert decide(bound("admin"), read_secret) is not None
    assert decide(bound("admin"), patch_node, False) is None  # inside namespaces only
    assert decide(bound("cluster-admin"), patch_node, False) is not None
    assert decide(bound("cluster-admin"), Request("delete", path="/x"), False) is not None
    assert decide(bound("view"), Request("get", path="/version"), False) is not None
    assert decide(bound("admin", ns="a"), read_secret) is not None
    assert decide(bound("admin", ns="b"), read_secret) is None
    # a stored ClusterRole of a built-in's name is the one that counts
    mine = {**bound("view"), "ClusterRole": {"/view": role("ClusterRole", "view", [])}}
    assert decide(mine, list_pods) is None


def test_a_users_role_comes_first_and_gives_its_reason() -> None:
    viewer = auth.User("vee", "view")
    assert auth.decide(viewer, Request("list", "", "pods"), True, {}) == \
        "user vee has role view"
    assert auth.decide(viewer, Request("delete", "", "pods", namespace="a", name="p"), True,
                       {}) is None
    assert auth.decide(viewer, Request("get", "metrics.k8s.io", "pods", namespace="a"), True,
                       {}) is not None


def test_no_binding_grants_a_write_of_the_access_objects() -> None:
    """A ServiceAccount bound to cluster-admin may do anything but write Roles, ClusterRoles
    and their bindings (it would grant itself or others more than an admin gave)."""
    objects = store(binding("ClusterRoleBinding", "b", ("ClusterRole", "cluster-admin"),
                            [SA_SUBJECT]))
    assert decide(objects, Request("delete", "", "pods", namespace="a", name="p")) is not None
    assert decide(objects, Request("list", RBAC, "clusterrolebindings"), False) is not None
    for verb in ("create", "update", "patch", "delete", "deletecollection"):
        assert decide(objects, Request(verb, RBAC, "clusterrolebindings"), False) is None
        assert decide(objects, Request(verb, RBAC, "roles", namespace="a")) is None
    admin = auth.User("root", "admin")  # the token file's admin writes them
    assert auth.decide(admin, Request("create", RBAC, "clusterroles"), False, {}) is not None
