"""Real DaemonSet manifests (undefaulted) land exactly where selector, affinity and
tolerations allow."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from shared.daemonset import placement, planner
from tests import testdata
from tests.unit.daemonset_fixtures import make_node, snapshot

Obj = dict[str, Any]

MANIFESTS = testdata.DAEMONSETS

LINUX = {"kubernetes.io/os": "linux"}


def nodes() -> list[Obj]:
    return [
        make_node("linux", LINUX),
        make_node(
            "linux-cp",
            LINUX,
            taints=[{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}],
        ),
        make_node(
            "linux-master",
            LINUX,
            taints=[{"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"}],
        ),
        make_node(
            "gpu",
            LINUX,
            taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        ),
        make_node(
            "linux-noexec",
            LINUX,
            taints=[{"key": "dedicated", "value": "db", "effect": "NoExecute"}],
        ),
        make_node("masq-ready", {**LINUX, "node.kubernetes.io/masq-agent-ds-ready": "true"}),
        make_node("windows", {"kubernetes.io/os": "windows"}),
    ]


ALL_LINUX = {"linux", "linux-cp", "linux-master", "gpu", "linux-noexec", "masq-ready"}
UNTAINTED = {"linux", "masq-ready", "windows"}

EXPECTED: dict[str, set[str]] = {
    # nodeSelector linux; tolerates every NoSchedule and NoExecute taint
    "calico-node.yaml": ALL_LINUX,
    # no selector; control-plane and master tolerations (key, no operator: Equal "")
    "fluentd-elasticsearch-rbac.yaml": UNTAINTED | {"linux-cp", "linux-master"},
    # no selector, no tolerations (hostNetwork only adds network-unavailable)
    "grafana-agent-hostnetwork.yaml": UNTAINTED,
    # nodeSelector linux; `operator: Exists` tolerates everything
    "kube-prometheus-node-exporter.yaml": ALL_LINUX,
    # nodeSelector linux + masq-agent-ds-ready "true"
    "kubernetes-ip-masq-agent.yaml": {"masq-ready"},
    # the docs example: master toleration only
    "kubernetes-website-fluentd-elasticsearch.yaml": UNTAINTED | {"linux-master"},
    # required node affinity kubernetes.io/os In [linux]; keyless NoSchedule/NoExecute tolerations
    "node-problem-detector.yaml": ALL_LINUX,
    # nvidia.com/gpu Exists NoSchedule
    "nvidia-device-plugin.yaml": UNTAINTED | {"gpu"},
}


def load(name: str) -> Obj:
    ds: Obj = yaml.safe_load((MANIFESTS / name).read_text())
    ds["metadata"].setdefault("namespace", "kube-system")
    ds["metadata"]["uid"] = f"uid-{name}"
    return ds


def test_every_manifest_has_an_expectation() -> None:
    assert {p.name for p in testdata.manifests()} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_manifest_placement(name: str) -> None:
    ds = load(name)
    plan = planner.plan(snapshot(ds, nodes()))
    assert plan.error == ""
    assert plan.sync_nodes is not None
    assert {c.node for c in plan.sync_nodes.creates} == EXPECTED[name]
    assert (
        set(plan.reasons) - EXPECTED[name]
        == {n["metadata"]["name"] for n in nodes()} - EXPECTED[name]
    )
    for create in plan.sync_nodes.creates:
        pod = create.pod
        assert pod["metadata"]["namespace"] == ds["metadata"]["namespace"]
        node = next(n for n in nodes() if n["metadata"]["name"] == create.node)
        # the created pod itself is placeable on its node, and only there
        assert placement.node_should_run(node, {"spec": {"template": {"spec": pod["spec"]}}})[0]
        other = next(n for n in nodes() if n["metadata"]["name"] != create.node)
        assert not placement.node_should_run(other, {"spec": {"template": {"spec": pod["spec"]}}})[
            0
        ]
