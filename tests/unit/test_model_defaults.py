"""API defaults (spec §a.4 and the Pod defaults that matter)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from shared.model import defaults


def minimal_ds(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "fluentd", "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": {"app": "x"}},
            "template": {
                "metadata": {"labels": {"app": "x"}},
                "spec": {"containers": [{"name": "c", "image": "fluentd:v1"}]},
            },
            **spec,
        },
    }


def test_missing_update_strategy_defaults_to_rolling_update_1_0() -> None:
    out = defaults.default_daemonset(minimal_ds())
    assert out["spec"]["updateStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0},
    }


def test_rolling_update_fills_only_nil_budget_fields() -> None:
    ds = minimal_ds(updateStrategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "10%"}})
    out = defaults.default_daemonset(ds)
    assert out["spec"]["updateStrategy"]["rollingUpdate"] == {
        "maxSurge": "10%",
        "maxUnavailable": 1,
    }


def test_explicit_zero_budget_is_kept() -> None:
    ds = minimal_ds(updateStrategy={"rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}})
    out = defaults.default_daemonset(ds)
    assert out["spec"]["updateStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
    }


def test_on_delete_defaults_nothing_inside_rolling_update() -> None:
    out = defaults.default_daemonset(minimal_ds(updateStrategy={"type": "OnDelete"}))
    assert out["spec"]["updateStrategy"] == {"type": "OnDelete"}
    ds = minimal_ds(updateStrategy={"type": "OnDelete", "rollingUpdate": {}})
    assert defaults.default_daemonset(ds)["spec"]["updateStrategy"]["rollingUpdate"] == {}


def test_revision_history_limit_defaults_to_10_and_keeps_0() -> None:
    assert defaults.default_daemonset(minimal_ds())["spec"]["revisionHistoryLimit"] == 10
    out = defaults.default_daemonset(minimal_ds(revisionHistoryLimit=0))
    assert out["spec"]["revisionHistoryLimit"] == 0


def test_min_ready_seconds_and_selector_are_not_defaulted() -> None:
    ds = minimal_ds()
    del ds["spec"]["selector"]
    out = defaults.default_daemonset(ds)
    assert "minReadySeconds" not in out["spec"]
    assert "selector" not in out["spec"]


def test_pod_template_defaults() -> None:
    spec = defaults.default_daemonset(minimal_ds())["spec"]["template"]["spec"]
    assert spec["restartPolicy"] == "Always"
    assert spec["dnsPolicy"] == "ClusterFirst"
    assert spec["schedulerName"] == "default-scheduler"
    assert spec["terminationGracePeriodSeconds"] == 30
    assert spec["securityContext"] == {}
    assert spec["containers"][0]["terminationMessagePath"] == "/dev/termination-log"
    assert spec["containers"][0]["terminationMessagePolicy"] == "File"
    assert spec["containers"][0]["imagePullPolicy"] == "IfNotPresent"


def test_explicit_pod_fields_are_kept() -> None:
    ds = minimal_ds()
    tspec = ds["spec"]["template"]["spec"]
    tspec.update(terminationGracePeriodSeconds=0, dnsPolicy="ClusterFirstWithHostNet")
    tspec["containers"][0]["imagePullPolicy"] = "Never"
    out = defaults.default_daemonset(ds)["spec"]["template"]["spec"]
    assert out["terminationGracePeriodSeconds"] == 0
    assert out["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert out["containers"][0]["imagePullPolicy"] == "Never"


@pytest.mark.parametrize(
    ("image", "policy"),
    [
        ("busybox", "Always"),
        ("busybox:latest", "Always"),
        ("localhost:5000/busybox", "Always"),
        ("busybox:1.36", "IfNotPresent"),
        ("quay.io/calico/node:master", "IfNotPresent"),
        ("busybox@sha256:" + "a" * 64, "IfNotPresent"),
        ("busybox:latest@sha256:" + "a" * 64, "Always"),
        ("", "IfNotPresent"),
        ("Not/Valid", "IfNotPresent"),
    ],
)
def test_image_pull_policy_depends_on_the_tag(image: str, policy: str) -> None:
    ds = minimal_ds()
    ds["spec"]["template"]["spec"]["containers"][0]["image"] = image
    ctr = defaults.default_daemonset(ds)["spec"]["template"]["spec"]["containers"][0]
    assert ctr["imagePullPolicy"] == policy


def test_init_containers_and_ports_are_defaulted() -> None:
    ds = minimal_ds()
    tspec = ds["spec"]["template"]["spec"]
    tspec["initContainers"] = [{"name": "init", "image": "busybox"}]
    tspec["containers"][0]["ports"] = [{"containerPort": 80}]
    out = defaults.default_daemonset(ds)["spec"]["template"]["spec"]
    assert out["initContainers"][0]["imagePullPolicy"] == "Always"
    assert out["containers"][0]["ports"] == [{"containerPort": 80, "protocol": "TCP"}]


def test_toleration_operators_are_left_as_given() -> None:
    ds = minimal_ds()
    tols = [
        {"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"},
        {"operator": "Exists"},
    ]
    ds["spec"]["template"]["spec"]["tolerations"] = copy.deepcopy(tols)
    assert defaults.default_daemonset(ds)["spec"]["template"]["spec"]["tolerations"] == tols


def test_missing_namespace_becomes_default() -> None:
    ds = minimal_ds()
    del ds["metadata"]["namespace"]
    assert defaults.default_daemonset(ds)["metadata"]["namespace"] == "default"


def test_defaulting_is_idempotent_and_does_not_touch_its_argument() -> None:
    ds = minimal_ds()
    before = copy.deepcopy(ds)
    once = defaults.default_daemonset(ds)
    assert ds == before
    assert defaults.default_daemonset(once) == once
    assert defaults.default(once) == once


def test_default_pod_sets_pending_phase_and_pod_spec_defaults() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "d"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
    }
    out = defaults.default_pod(pod)
    assert out["status"] == {"phase": "Pending"}
    assert out["spec"]["restartPolicy"] == "Always"
    assert out["spec"]["containers"][0]["imagePullPolicy"] == "Always"
    assert defaults.default_pod(out) == out


def test_default_pod_keeps_an_existing_phase() -> None:
    pod = {"kind": "Pod", "metadata": {"name": "p"}, "spec": {}, "status": {"phase": "Running"}}
    assert defaults.default_pod(pod)["status"]["phase"] == "Running"


def test_default_pod_copies_limits_into_missing_requests() -> None:
    pod = {
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "x:1",
                    "resources": {
                        "limits": {"cpu": "1", "memory": "1Gi"},
                        "requests": {"cpu": "500m"},
                    },
                }
            ]
        },
    }
    res = defaults.default_pod(pod)["spec"]["containers"][0]["resources"]
    assert res["requests"] == {"cpu": "500m", "memory": "1Gi"}


def test_default_pod_sets_host_ports_with_host_network() -> None:
    pod = {
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {
            "hostNetwork": True,
            "containers": [{"name": "c", "image": "x:1", "ports": [{"containerPort": 9100}]}],
        },
    }
    port = defaults.default_pod(pod)["spec"]["containers"][0]["ports"][0]
    assert port == {"containerPort": 9100, "hostPort": 9100, "protocol": "TCP"}


def test_default_node_copies_capacity_into_allocatable() -> None:
    node = {"kind": "Node", "metadata": {"name": "n"}, "status": {"capacity": {"pods": "110"}}}
    assert defaults.default_node(node)["status"]["allocatable"] == {"pods": "110"}


def test_default_dispatches_on_kind_and_copies_other_objects() -> None:
    assert defaults.default(minimal_ds()) == defaults.default_daemonset(minimal_ds())
    cr = {"kind": "ControllerRevision", "metadata": {"name": "r"}, "revision": 1, "data": {}}
    assert defaults.default(cr)["metadata"]["namespace"] == "default"
    other = {"kind": "Foo", "spec": {}}
    out = defaults.default(other)
    assert out == other and out is not other


@pytest.mark.parametrize("value", [None, 1, "x", [1, 2], {"spec": "x"}, {"spec": {"template": 3}}])
def test_defaulters_accept_malformed_input(value: Any) -> None:
    for fn in (
        defaults.default_daemonset,
        defaults.default_pod,
        defaults.default_node,
        defaults.default,
    ):
        out = fn(value)
        assert fn(out) == out
