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


def test_ephemeral_containers_get_a_containers_defaults() -> None:
    pod = {"kind": "Pod", "metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "c", "image": "x:1"}],
        "ephemeralContainers": [{"name": "debugger", "image": "busybox"},
                                {"name": "pinned", "image": "busybox:1.36",
                                 "env": [{"name": "N", "valueFrom": {
                                     "fieldRef": {"fieldPath": "metadata.name"}}}]}]}}
    debugger, pinned = defaults.default_pod(pod)["spec"]["ephemeralContainers"]
    assert debugger == {"name": "debugger", "image": "busybox", "imagePullPolicy": "Always",
                        "terminationMessagePath": "/dev/termination-log",
                        "terminationMessagePolicy": "File"}
    assert pinned["imagePullPolicy"] == "IfNotPresent"
    assert pinned["env"][0]["valueFrom"]["fieldRef"]["apiVersion"] == "v1"
    assert defaults.default_container(pod["spec"]["ephemeralContainers"][0]) == debugger
    assert "imagePullPolicy" not in pod["spec"]["ephemeralContainers"][0]  # a copy


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
    assert out["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    assert out["spec"]["restartPolicy"] == "Always"
    assert out["spec"]["containers"][0]["imagePullPolicy"] == "Always"
    assert defaults.default_pod(out) == out


def test_default_pod_gives_the_qos_class_of_its_defaulted_resources() -> None:
    # limits alone: requests are copied from them, so both match: Guaranteed
    limited = {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}}}]}}
    assert defaults.default_pod(limited)["status"]["qosClass"] == "Guaranteed"


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


def test_probes_hooks_field_selectors_and_volumes_get_core_v1_defaults() -> None:
    ds = minimal_ds()
    tspec = ds["spec"]["template"]["spec"]
    tspec["containers"][0].update({
        "livenessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 5},
        "readinessProbe": {"httpGet": {"port": 8080}, "failureThreshold": 0},
        "startupProbe": {"tcpSocket": {"port": 1}, "timeoutSeconds": 7},
        "lifecycle": {"preStop": {"httpGet": {"port": 80, "path": "/quit"}}},
        "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                {"name": "PLAIN", "value": "x"}],
    })
    tspec["volumes"] = [
        {"name": "scratch"},
        {"name": "root", "hostPath": {"path": "/"}},
        {"name": "sock", "hostPath": {"path": "/run/x.sock", "type": "Socket"}},
        {"name": "conf", "configMap": {"name": "c"}},
        {"name": "certs", "secret": {"secretName": "s", "defaultMode": 0o400}},
        {"name": "info", "downwardAPI": {"items": [
            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
        {"name": "token", "projected": {"sources": [
            {"serviceAccountToken": {"path": "t"}},
            {"downwardAPI": {"items": [
                {"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]}}]}},
    ]
    out = defaults.default_daemonset(ds)
    ctr = out["spec"]["template"]["spec"]["containers"][0]
    assert ctr["livenessProbe"] == {"exec": {"command": ["true"]}, "periodSeconds": 5,
                                    "timeoutSeconds": 1, "successThreshold": 1,
                                    "failureThreshold": 3}
    assert ctr["readinessProbe"] == {"httpGet": {"port": 8080, "path": "/", "scheme": "HTTP"},
                                     "timeoutSeconds": 1, "periodSeconds": 10,
                                     "successThreshold": 1, "failureThreshold": 3}
    assert ctr["startupProbe"]["timeoutSeconds"] == 7
    assert ctr["lifecycle"]["preStop"]["httpGet"] == {"port": 80, "path": "/quit",
                                                      "scheme": "HTTP"}
    assert ctr["env"][0]["valueFrom"]["fieldRef"] == {"fieldPath": "spec.nodeName",
                                                      "apiVersion": "v1"}
    assert ctr["env"][1] == {"name": "PLAIN", "value": "x"}
    vols = {v["name"]: v for v in out["spec"]["template"]["spec"]["volumes"]}
    assert vols["scratch"] == {"name": "scratch", "emptyDir": {}}
    assert vols["root"]["hostPath"] == {"path": "/", "type": ""}
    assert vols["sock"]["hostPath"]["type"] == "Socket"
    assert vols["conf"]["configMap"]["defaultMode"] == 420
    assert vols["certs"]["secret"]["defaultMode"] == 0o400
    assert vols["info"]["downwardAPI"]["defaultMode"] == 420
    assert vols["info"]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"] == "v1"
    projected = vols["token"]["projected"]
    assert projected["defaultMode"] == 420
    assert projected["sources"][0]["serviceAccountToken"]["expirationSeconds"] == 3600
    assert projected["sources"][1]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"] == "v1"
    assert defaults.default_daemonset(out) == out
    # a template is not a pod: no enableServiceLinks, no requests from limits
    assert "enableServiceLinks" not in out["spec"]["template"]["spec"]


def test_pod_only_defaults_reach_the_daemon_pods_not_the_template() -> None:
    from shared.daemonset import podtemplate

    ds = defaults.default_daemonset(minimal_ds())
    ds["spec"]["template"]["spec"]["hostNetwork"] = True
    ds["spec"]["template"]["spec"]["containers"][0].update({
        "ports": [{"containerPort": 9100, "protocol": "TCP"}],
        "resources": {"limits": {"memory": "200Mi"}}})
    before = copy.deepcopy(ds)
    spec = podtemplate.create_pod_template(ds, "h")["spec"]
    assert ds == before
    assert spec["enableServiceLinks"] is True
    assert spec["containers"][0]["ports"][0]["hostPort"] == 9100
    assert spec["containers"][0]["resources"]["requests"] == {"memory": "200Mi"}
    pod = {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"enableServiceLinks": False}}
    assert defaults.default_pod(pod)["spec"]["enableServiceLinks"] is False


@pytest.mark.parametrize(("given", "name"), [
    ({"serviceAccountName": "agent"}, "agent"),
    ({"serviceAccount": "old"}, "old"),  # the deprecated alias alone
    ({"serviceAccountName": "new", "serviceAccount": "old"}, "new"),  # the name wins
])
def test_service_account_reads_back_under_both_names(given: dict[str, str], name: str) -> None:
    ds = minimal_ds()
    ds["spec"]["template"]["spec"].update(given)
    spec = defaults.default_daemonset(ds)["spec"]["template"]["spec"]
    assert (spec["serviceAccountName"], spec["serviceAccount"]) == (name, name)


def test_no_service_account_stays_unset() -> None:
    spec = defaults.default_daemonset(minimal_ds())["spec"]["template"]["spec"]
    assert "serviceAccountName" not in spec and "serviceAccount" not in spec


def test_priority_is_admissions_not_a_default() -> None:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x:1"}],
                            "priorityClassName": "system-node-critical"}
    out = defaults.default_pod({"kind": "Pod", "metadata": {"name": "p"}, "spec": spec})["spec"]
    assert "priority" not in out and "preemptionPolicy" not in out  # (shared.model.priority)
    ds = minimal_ds()
    ds["spec"]["template"]["spec"].update(spec)
    assert "priority" not in defaults.default_daemonset(ds)["spec"]["template"]["spec"]


@pytest.mark.parametrize("bad", [["a"], {"a": 1}, 5, True])
def test_pod_defaults_leave_ill_typed_fields_to_the_validation(bad: Any) -> None:
    def b() -> Any:
        return copy.deepcopy(bad)
    spec = {"priorityClassName": b(), "serviceAccountName": b(), "volumes": [b(), {"name": "v"}],
            "containers": [{"name": "c", "livenessProbe": b(), "env": [b()],
                            "lifecycle": {"preStop": b()}, "resources": {"limits": b()}}]}
    out = defaults.default_pod({"kind": "Pod", "metadata": {"name": "p"}, "spec": spec})
    assert out["spec"]["priorityClassName"] == bad and "priority" not in out["spec"]
    assert out["spec"]["volumes"] == [bad, {"name": "v", "emptyDir": {}}]
