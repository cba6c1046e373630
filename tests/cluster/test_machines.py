"""Real daemons in the compose cluster: the two machine containers (profile "machines") each
run a real node agent, machine-1 with the process runtime and machine-2 with the docker
runtime on the host's engine. A DaemonSet of a tiny HTTP server (the image's python3, its
version in its args) runs on both, Ready by its probe, is rolled to a new version, runs a
command for kubectl exec, and outlives a machine container stopped and started again."""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any

import pytest

from shared.model import meta
from shared.model.podutil import is_ready, target_node
from tests.cluster.cluster import IMAGE, MACHINES, Cluster
from tests.integration.stack import wait_for

pytestmark = pytest.mark.cluster

# the image's python3 serving "<node> <version>" (the version is its argument, $0)
SERVER = ('mkdir -p "/tmp/hello-$0" && echo "$NODE_NAME $0" > "/tmp/hello-$0/index.html" '
          '&& exec python3 -m http.server 8080 --directory "/tmp/hello-$0"')


def hello(version: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "hello", "namespace": "cluster-machines"},
        "spec": {"selector": {"matchLabels": {"app": "hello"}},
                 "template": {"metadata": {"labels": {"app": "hello"}}, "spec": {
                     "nodeSelector": {"daemonbus.io/machine": "true"},
                     "tolerations": [{"key": "daemonbus.io/machine", "operator": "Exists"}],
                     "terminationGracePeriodSeconds": 2,
                     "containers": [{
                         "name": "hello", "image": IMAGE, "imagePullPolicy": "Never",
                         "command": ["sh", "-c", SERVER], "args": [version],
                         "env": [{"name": "NODE_NAME", "valueFrom": {
                             "fieldRef": {"fieldPath": "spec.nodeName"}}}],
                         "ports": [{"containerPort": 8080}],
                         "resources": {"limits": {"memory": "64Mi", "cpu": "250m"}},
                         "readinessProbe": {"httpGet": {"path": "/", "port": 8080},
                                            "periodSeconds": 1}}]}}}}


def pods(c: Cluster) -> dict[str, dict[str, Any]]:
    """The live pods of hello by node."""
    return {target_node(p): p for p in c.store().list("Pod", "cluster-machines")
            if not meta.is_being_deleted(p)}


def serving(c: Cluster, version: str) -> dict[str, dict[str, Any]] | None:
    """Every machine's pod Ready and answering with ``version`` (from the host, at its
    pod IP), else None."""
    found = pods(c)
    if sorted(found) != MACHINES or not all(map(is_ready, found.values())):
        return None
    for node, pod in found.items():
        try:
            with urllib.request.urlopen(f"http://{pod['status']['podIP']}:8080/",
                                        timeout=2) as r:
                if r.read().decode().strip() != f"{node} {version}":
                    return None
        except OSError:
            return None
    return found


def wait_serving(c: Cluster, version: str, what: str,
                 also: Any = lambda found: True) -> dict[str, dict[str, Any]]:
    """``serving`` within two minutes (and ``also`` of what it found); else fail with the
    pods' statuses."""
    try:
        return dict(wait_for(lambda: (found := serving(c, version)) and also(found) and found,
                             timeout=120, interval=0.5, what=what))
    except AssertionError as err:
        statuses = {n: p.get("status") for n, p in pods(c).items()}
        raise AssertionError(f"{err}; pods: {statuses}") from None


def main(pod: dict[str, Any]) -> dict[str, Any]:
    return dict(pod["status"]["containerStatuses"][0])


def test_real_daemons_on_two_machines_roll_out_and_outlive_a_machine_restart(
        cluster: Cluster, tmp_path: Path) -> None:
    cluster.apply(hello("v1"))
    v1 = wait_serving(cluster, "v1", "hello v1 Ready and serving on both machines")
    assert main(v1["machine-1"])["containerID"].startswith("process://")
    assert main(v1["machine-2"])["containerID"].startswith("docker://")

    cluster.apply(hello("v2"))
    v2 = wait_serving(cluster, "v2", "the rollout to v2 on both machines")
    assert {meta.uid(p) for p in v2.values()}.isdisjoint(meta.uid(p) for p in v1.values())

    # kubectl exec through the API server, by each machine's agent, into its daemon
    kube = cluster.kubectl(tmp_path)
    for node, pod in v2.items():
        ran = kube("exec", "-n", "cluster-machines", meta.name(pod), "--", "sh", "-c",
                   'echo "$NODE_NAME"; exit 3')
        assert (ran.returncode, ran.stdout) == (3, f"{node}\n"), ran.stderr

    # a machine stopped and started again: machine-1's daemon died with its container and
    # is started again; machine-2's daemon, a container of the host's engine, kept running
    # and is adopted
    for machine in MACHINES:
        cluster.compose("stop", "-t", "5", machine)
        cluster.compose("start", machine)
    adopted = f"adopted pod {meta.uid(v2['machine-2'])} container hello"
    wait_for(lambda: adopted in cluster.compose("logs", "--no-color", "machine-2"),
             timeout=120, interval=0.5, what="machine-2's new agent adopting its daemon")
    after = wait_serving(cluster, "v2", "machine-1's daemon restarted, both serving v2",
                         also=lambda found: main(found["machine-1"])["restartCount"] >= 1)
    assert {meta.uid(p) for p in after.values()} == {meta.uid(p) for p in v2.values()}
    assert main(after["machine-1"])["lastState"]["terminated"]["reason"] == \
        "ContainerStatusUnknown"
    assert main(after["machine-2"])["containerID"] == main(v2["machine-2"])["containerID"]
    assert main(after["machine-2"])["restartCount"] == 0

    cluster.cli("delete", "ds", "hello", "-n", "cluster-machines")
    wait_for(lambda: not cluster.store().list("Pod", "cluster-machines")
             and not cluster.docker("ps", "-aq", "--filter",
                                    "label=io.daemonbus.node=machine-2"),
             timeout=60, interval=0.5, what="hello's pods and machine-2's containers gone")
