"""compose.yaml as it runs: a DaemonSet applied through the CLI from the host converges on
the simulated nodes, every service is healthy within its memory and CPU limits, and one of
the two watchers leads."""

from __future__ import annotations

import pytest

from tests.cluster.cluster import (
    SERVICES,
    Cluster,
    assert_no_duplicate_creates,
    converged,
    daemonset,
)
from tests.integration.stack import wait_for

pytestmark = pytest.mark.cluster


def test_simple_daemonset_launches_pods_in_compose_cluster(cluster: Cluster) -> None:
    cluster.apply(daemonset("cluster-basic", "fluentd", image="fluentd:v1"))
    wait_for(lambda: converged(cluster.store(), "cluster-basic/fluentd", "fluentd:v1"),
             timeout=60, interval=0.2, what="fluentd on every node, status counted")
    assert_no_duplicate_creates(cluster.store(), "cluster-basic/fluentd")
    out = cluster.cli("get", "ds", "fluentd", "-n", "cluster-basic", "--no-headers").stdout
    assert out.split()[1:6] == ["5", "5", "5", "5", "5"]  # DESIRED … AVAILABLE


def test_every_service_reports_healthy(cluster: Cluster) -> None:
    def all_healthy() -> bool:
        states = {c: cluster.health(c) for s in SERVICES for c in cluster.containers(s)}
        return bool(states) and all(v == "healthy" for v in states.values())

    wait_for(all_healthy, timeout=90, interval=1, what="every container healthy")


def test_every_service_has_memory_and_cpu_limits(cluster: Cluster) -> None:
    for service in SERVICES:
        for c in cluster.containers(service):
            memory = int(cluster.inspect(c, "{{.HostConfig.Memory}}"))
            cpus = int(cluster.inspect(c, "{{.HostConfig.NanoCpus}}"))
            assert 0 < memory <= 512 * 2**20, f"{service}: memory limit {memory}"
            assert 0 < cpus <= 10**9, f"{service}: cpu limit {cpus / 1e9}"


def test_exactly_one_watcher_leads(cluster: Cluster) -> None:
    def roles() -> list[str]:
        out = []
        for service in ("watcher", "watcher-standby"):
            for c in cluster.containers(service):
                line = cluster.docker("exec", c, "daemonbus", "health", "watcher",
                                      "--metrics-port", "9100", check=False)
                out.append(line.strip().rsplit(" ", 1)[-1].rstrip(")"))
        return sorted(out)

    wait_for(lambda: roles() == ["leader", "standby"], timeout=30, interval=0.5,
             what="one leader and one standby watcher")
