"""Finalizers on nodes and pod GC (spec §c.2 step 3, ARCHITECTURE "pods bound to a node that
no longer exists are removed by the garbage collector"). Each test removes nodes, so each
gets a stack of its own.
"""

from __future__ import annotations

from typing import Any

import pytest

from shared.model import meta
from tests.integration.gcstack import NODES, NS, apply, gone, hold, owned, ready_pods, release, run
from tests.integration.stack import Stack, wait_for

Obj = dict[str, Any]


@pytest.fixture
def cluster(stack: Stack) -> Stack:
    stack.start_all(workers=1, nodes=NODES)
    wait_for(lambda: len(stack.store.list("Node")) == NODES, what=f"{NODES} nodes")
    return stack


def test_removing_a_node_removes_its_daemon_pods(cluster: Stack) -> None:
    ds = apply(cluster, "pgc")
    pods = ready_pods(cluster, meta.uid(ds))
    node = sorted(p["spec"]["nodeName"] for p in pods)[0]
    on_node = [p for p in pods if p["spec"]["nodeName"] == node]

    result = run(cluster, "delete", "node", node)
    assert result.exit_code == 0, result.output

    wait_for(lambda: all(gone(cluster, p) for p in on_node),
             what=f"pods of {node} collected")
    wait_for(lambda: cluster.status(f"{NS}/pgc").get("desiredNumberScheduled") == NODES - 1,
             what="status counts the remaining nodes")
    assert len(owned(cluster, "Pod", meta.uid(ds))) == NODES - 1


def test_node_with_finalizer_stays_until_removed_and_keeps_its_pods(cluster: Stack) -> None:
    ds = apply(cluster, "nfin")
    by_node = {p["spec"]["nodeName"]: p for p in ready_pods(cluster, meta.uid(ds))}
    held, plain = sorted(by_node)[:2]
    cluster.store.mutate("Node", f"/{held}", hold)

    result = run(cluster, "delete", "node", held, plain)
    assert result.exit_code == 0, result.output

    # the collector handles the log in order: once the plain node's pod is collected, it
    # has seen the held node's deletion too
    wait_for(lambda: gone(cluster, by_node[plain]),
             what=f"the pod of {plain} collected")
    assert meta.is_being_deleted(cluster.store.get("Node", f"/{held}"))
    pod = cluster.store.get("Pod", meta.key(by_node[held]))
    assert not meta.is_being_deleted(pod)
    cluster.store.mutate("Node", f"/{held}", release)
    wait_for(lambda: cluster.store.try_get("Node", f"/{held}") is None, what="node removed")
    wait_for(lambda: gone(cluster, pod),
             what=f"the pod of {held} collected")
