"""The thin path through the real processes on real Redis: apply a DaemonSet → one pod per
matching node → status counted. Also: every real-world manifest lands exactly where its
selector, affinity and tolerations allow."""

from __future__ import annotations

import yaml

from services.node_agent.lifecycle import new_node
from shared.model import meta
from shared.model.podutil import is_ready, target_node
from tests import testdata
from tests.integration.stack import Stack, wait_for

FLUENTD = """
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: fluentd-elasticsearch
  namespace: kube-system
spec:
  selector:
    matchLabels: {name: fluentd-elasticsearch}
  template:
    metadata:
      labels: {name: fluentd-elasticsearch}
    spec:
      containers:
      - name: fluentd-elasticsearch
        image: quay.io/fluentd_elasticsearch/fluentd:v2.5.2
"""


def _daemon_pods(stack: Stack, ds_key: str) -> list[dict]:
    ds = stack.store.get("DaemonSet", ds_key)
    return [p for p in stack.pods(meta.namespace(ds))
            if (meta.controller_ref(p) or {}).get("uid") == meta.uid(ds)]


def test_simple_daemonset_launches_pods_and_counts_status(stack: Stack) -> None:
    stack.start_all(workers=1, nodes=5)
    wait_for(lambda: len(stack.store.list("Node")) == 5, what="5 nodes registered")
    result, _ds = stack.store.apply(yaml.safe_load(FLUENTD))
    assert result == "created"
    key = "kube-system/fluentd-elasticsearch"

    def converged() -> bool:
        pods = _daemon_pods(stack, key)
        return len(pods) == 5 and all(is_ready(p) for p in pods)

    wait_for(converged, timeout=30, what="5 ready daemon pods")
    pods = _daemon_pods(stack, key)
    assert sorted(target_node(p) for p in pods) == [f"node-{i:05d}" for i in range(1, 6)]
    assert all(p["spec"]["nodeName"] == target_node(p) for p in pods)
    expected = {"desiredNumberScheduled": 5, "currentNumberScheduled": 5, "numberReady": 5,
                "updatedNumberScheduled": 5, "numberAvailable": 5, "numberMisscheduled": 0,
                "observedGeneration": 1}
    wait_for(lambda: all(stack.status(key).get(k) == v for k, v in expected.items()),
             timeout=30, what=f"status {expected}")
    assert stack.status(key).get("numberUnavailable", 0) == 0


NODES = {
    "n-plain": ({}, []),
    "n-cp": ({"node-role.kubernetes.io/control-plane": ""},
             [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]),
    "n-master": ({}, [{"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"}]),
    "n-gpu": ({}, [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]),
    "n-win": ({"kubernetes.io/os": "windows"}, []),
    "n-noexec": ({}, [{"key": "dedicated", "value": "infra", "effect": "NoExecute"}]),
    "n-masq": ({"node.kubernetes.io/masq-agent-ds-ready": "true"}, []),
}

EXPECTED = {
    "calico-node.yaml": {"n-plain", "n-cp", "n-master", "n-gpu", "n-noexec", "n-masq"},
    "fluentd-elasticsearch-rbac.yaml": {"n-plain", "n-cp", "n-master", "n-win", "n-masq"},
    "grafana-agent-hostnetwork.yaml": {"n-plain", "n-win", "n-masq"},
    "kube-prometheus-node-exporter.yaml": {"n-plain", "n-cp", "n-master", "n-gpu", "n-noexec",
                                           "n-masq"},
    "kubernetes-ip-masq-agent.yaml": {"n-masq"},
    "kubernetes-website-fluentd-elasticsearch.yaml": {"n-plain", "n-master", "n-win", "n-masq"},
    "node-problem-detector.yaml": {"n-plain", "n-cp", "n-master", "n-gpu", "n-noexec", "n-masq"},
    "nvidia-device-plugin.yaml": {"n-plain", "n-gpu", "n-win", "n-masq"},
}


def test_real_manifests_land_exactly_where_placement_allows(stack: Stack) -> None:
    assert sorted(EXPECTED) == sorted(p.name for p in testdata.manifests())
    for name, (labels, taints) in NODES.items():
        stack.store.create(new_node(name, labels=labels, taints=taints))
    stack.start_all(workers=2, nodes=0)
    keys = {}
    for path in testdata.manifests():
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        result, obj = stack.store.apply(docs[0])
        assert result == "created", path.name
        keys[path.name] = meta.key(obj)

    def placed(fname: str) -> set[str]:
        return {target_node(p) for p in _daemon_pods(stack, keys[fname])}

    for fname, nodes in EXPECTED.items():
        wait_for(lambda f=fname, n=nodes: placed(f) == n, timeout=30,
                 what=f"{fname} on exactly {sorted(nodes)}")
        wait_for(lambda f=fname, n=nodes: stack.status(keys[f]).get("desiredNumberScheduled")
                 == len(n) and stack.status(keys[f]).get("currentNumberScheduled") == len(n),
                 timeout=30, what=f"{fname} status counts {len(nodes)}")
    for fname in EXPECTED:
        pods = _daemon_pods(stack, keys[fname])
        assert len(pods) == len(EXPECTED[fname]), f"{fname}: one pod per node"


def test_no_execute_taint_evicts_and_untaint_restores(stack: Stack) -> None:
    stack.start_all(workers=1, nodes=3)
    wait_for(lambda: len(stack.store.list("Node")) == 3, what="3 nodes registered")
    stack.store.apply(yaml.safe_load(FLUENTD))
    key = "kube-system/fluentd-elasticsearch"
    wait_for(lambda: stack.status(key).get("numberReady") == 3, what="3 ready")

    def taint(node: dict) -> dict:
        node["spec"]["taints"] = [{"key": "evict", "value": "now", "effect": "NoExecute"}]
        return node

    stack.store.mutate("Node", "/node-00002", taint)
    wait_for(lambda: sorted(target_node(p) for p in _daemon_pods(stack, key))
             == ["node-00001", "node-00003"], what="pod on node-00002 evicted")
    wait_for(lambda: stack.status(key).get("desiredNumberScheduled") == 2
             and stack.status(key).get("numberMisscheduled") == 0, what="status after eviction")

    def untaint(node: dict) -> dict:
        node["spec"].pop("taints", None)
        return node

    stack.store.mutate("Node", "/node-00002", untaint)
    wait_for(lambda: len(_daemon_pods(stack, key)) == 3, what="pod back on node-00002")
    wait_for(lambda: stack.status(key).get("numberReady") == 3, what="3 ready again")
