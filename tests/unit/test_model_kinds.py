"""The kind registry: kubectl resource names, kinds, apiVersions."""

from __future__ import annotations

import pytest

from shared.model import kinds


@pytest.mark.parametrize(
    ("resource", "kind"),
    [
        ("ds", "DaemonSet"),
        ("daemonset", "DaemonSet"),
        ("daemonsets", "DaemonSet"),
        ("daemonsets.apps", "DaemonSet"),
        ("ds.apps", "DaemonSet"),
        ("daemonsets.v1.apps", "DaemonSet"),
        ("DaemonSet", "DaemonSet"),
        ("po", "Pod"),
        ("pod", "Pod"),
        ("Pods", "Pod"),
        ("no", "Node"),
        ("node", "Node"),
        ("nodes", "Node"),
        ("controllerrevision", "ControllerRevision"),
        ("controllerrevisions", "ControllerRevision"),
        ("controllerrevisions.apps", "ControllerRevision"),
        ("ev", "Event"),
        ("event", "Event"),
        ("events", "Event"),
        ("cm", "ConfigMap"),
        ("configmap", "ConfigMap"),
        ("configmaps", "ConfigMap"),
        ("secrets", "Secret"),
        ("svc", "Service"),
        ("services", "Service"),
        ("sa", "ServiceAccount"),
        ("serviceaccounts", "ServiceAccount"),
        ("clusterroles", "ClusterRole"),
        ("clusterrolebinding.rbac.authorization.k8s.io", "ClusterRoleBinding"),
        ("roles.v1.rbac.authorization.k8s.io", "Role"),
        ("RoleBindings", "RoleBinding"),
    ],
)
def test_resolve_accepts_kubectl_names(resource: str, kind: str) -> None:
    assert kinds.resolve(resource).kind == kind


def test_resolve_unknown_resource_has_kubectls_message() -> None:
    with pytest.raises(kinds.UnknownResourceError) as err:
        kinds.resolve("foo")
    assert str(err.value) == 'error: the server doesn\'t have a resource type "foo"'


def test_resolve_rejects_core_kind_qualified_by_a_group() -> None:
    with pytest.raises(kinds.UnknownResourceError):
        kinds.resolve("pods.apps")


def test_kind_info_fields() -> None:
    ds = kinds.resolve("ds")
    assert (ds.kind, ds.api_version, ds.plural, ds.group, ds.version) == (
        "DaemonSet",
        "apps/v1",
        "daemonsets",
        "apps",
        "v1",
    )
    assert ds.namespaced
    assert ds.qualified_name == "daemonset.apps"
    assert kinds.resolve("po").qualified_name == "pod"


def test_the_cluster_scoped_kinds() -> None:
    assert [k.kind for k in kinds.ALL if not k.namespaced] == [
        "Node", "Namespace", "ClusterRole", "ClusterRoleBinding", "PriorityClass"]


def test_api_versions() -> None:
    assert {k.kind: k.api_version for k in kinds.ALL} == {
        "Node": "v1",
        "Pod": "v1",
        "DaemonSet": "apps/v1",
        "ControllerRevision": "apps/v1",
        "Event": "v1",
        "Namespace": "v1",
        "ConfigMap": "v1",
        "Secret": "v1",
        "Service": "v1",
        "ServiceAccount": "v1",
        "Role": "rbac.authorization.k8s.io/v1",
        "RoleBinding": "rbac.authorization.k8s.io/v1",
        "ClusterRole": "rbac.authorization.k8s.io/v1",
        "PriorityClass": "scheduling.k8s.io/v1",
        "ClusterRoleBinding": "rbac.authorization.k8s.io/v1",
    }


def test_by_kind_is_exact_and_returns_none_when_unknown() -> None:
    assert kinds.by_kind("ControllerRevision") is kinds.CONTROLLER_REVISION
    assert kinds.by_kind("daemonset") is None
    assert kinds.by_kind("Foo") is None


def test_lookup_checks_the_api_version() -> None:
    assert kinds.lookup("apps/v1", "DaemonSet") is kinds.DAEMONSET
    with pytest.raises(kinds.NoKindMatchError) as err:
        kinds.lookup("extensions/v1beta1", "DaemonSet")
    assert str(err.value) == 'no matches for kind "DaemonSet" in version "extensions/v1beta1"'
