"""The compose cluster's API server, driven by the real kubectl on the host with the
kubeconfig `docker-compose run --rm cli kubeconfig` prints (docs/compose.md)."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.cluster.cluster import Cluster, converged, daemonset
from tests.integration.stack import wait_for


def test_kubectl_applies_and_reads_through_the_compose_api_server(cluster: Cluster,
                                                                   tmp_path: Path) -> None:
    kube = cluster.kubectl(tmp_path)
    kubeconfig = kube.config
    assert yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"] == \
        kube.server
    nodes = kube("get", "nodes", "-o", "name")
    assert nodes.returncode == 0, nodes.stderr
    assert "node/node-00001" in nodes.stdout.split()
    manifest = yaml.safe_dump(daemonset("cluster-kubectl", "agent", image="agent:v1"))
    applied = kube("apply", "-f", "-", stdin=manifest)
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.strip() == "daemonset.apps/agent created"
    wait_for(lambda: converged(cluster.store(), "cluster-kubectl/agent", "agent:v1"),
             timeout=60, interval=0.2, what="agent on every node, status counted")
    status = kube("rollout", "status", "ds/agent", "-n", "cluster-kubectl", "--timeout=60s")
    assert status.returncode == 0, status.stderr
    assert "successfully rolled out" in status.stdout
    again = kube("apply", "-f", "-", stdin=manifest)
    assert again.stdout.strip() == "daemonset.apps/agent unchanged", again.stderr
    # a ServiceAccount's token, signed by the key the API server keeps in its home volume
    assert kube("create", "serviceaccount", "ci", "-n", "cluster-kubectl").returncode == 0
    token = kube("create", "token", "ci", "-n", "cluster-kubectl")
    assert token.returncode == 0, token.stderr
    whoami = kube("auth", "whoami", "--token", token.stdout.strip())
    assert "system:serviceaccount:cluster-kubectl:ci" in whoami.stdout, whoami.stderr
    denied = kube("get", "ds", "-n", "cluster-kubectl", "--token", token.stdout.strip())
    assert "cannot list resource \"daemonsets\"" in denied.stderr, denied.stderr
