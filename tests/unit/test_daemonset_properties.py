"""Invariants of ``plan`` over generated clusters (hypothesis, seeded by the library)."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from shared.daemonset import dsutil, nodeindex, placement, planner
from shared.daemonset import status as ds_status
from shared.model import meta, podutil
from tests.unit.daemonset_fixtures import rolling, snapshot
from tests.unit.daemonset_strategies import COLORS, TAINTED, blue_ds, node_of, pod_fields, pod_of

Obj = dict[str, Any]

STRATEGIES = [
    rolling(1, 0),
    rolling("30%", 0),
    rolling(0, 1),
    rolling(0, "50%"),
    {"type": "OnDelete"},
]

node_st = st.tuples(COLORS, TAINTED)
pod_st = pod_fields(7, ["ds", "ds", "orphan", "other"], st.integers(1, 100))  # n7 may be missing


def build(
    nodes_spec: list[tuple[str, int]], pods_spec: list[Obj], strategy: int
) -> tuple[Obj, list[Obj], list[Obj]]:
    ds = blue_ds(5, STRATEGIES[strategy])
    nodes = [node_of(i, c, t) for i, (c, t) in enumerate(nodes_spec)]
    return ds, nodes, [pod_of(ds, i, p) for i, p in enumerate(pods_spec)]


@settings(max_examples=150, deadline=None)
@given(
    nodes_spec=st.lists(node_st, min_size=0, max_size=7),
    pods_spec=st.lists(pod_st, max_size=14),
    strategy=st.integers(0, len(STRATEGIES) - 1),
    seed=st.integers(0, 2**16),
)
def test_plan_invariants(
    nodes_spec: list[tuple[str, int]], pods_spec: list[Obj], strategy: int, seed: int
) -> None:
    ds, nodes, pods = build(nodes_spec, pods_spec, strategy)
    plan = planner.plan(snapshot(ds, nodes, pods))
    assert planner.current_hash(snapshot(ds, nodes, pods)) == plan.hash  # known before

    # the same snapshot in another order gives the same plan
    rng = random.Random(seed)
    shuffled_nodes, shuffled_pods = list(nodes), list(pods)
    rng.shuffle(shuffled_nodes)
    rng.shuffle(shuffled_pods)
    assert planner.plan(snapshot(ds, shuffled_nodes, shuffled_pods)) == plan

    # the same plan when it reads the nodes' state from an index of the same objects
    index = nodeindex.DaemonSetIndex(ds, plan.hash, shuffled_nodes, shuffled_pods)
    assert planner.plan(snapshot(ds, nodes, pods), index) == plan

    assert plan.sync_nodes is not None and plan.status is not None
    by_name = {meta.name(n): n for n in nodes}
    created = [c.node for c in plan.sync_nodes.creates]
    assert len(created) == len(set(created))
    for node in created:
        assert placement.node_should_run(by_name[node], ds)[0]
    names = [c.pod["metadata"]["name"] for c in plan.sync_nodes.creates]
    assert len(set(names)) == len(names)
    assert not set(names) & {meta.name(p) for p in pods}
    for c in plan.sync_nodes.creates:
        assert c.pod["metadata"]["labels"][dsutil.HASH_LABEL] == plan.hash

    # only this DaemonSet's pods (owned, or orphans it adopts) are deleted, never twice
    foreign = {
        meta.name(p) for p in pods if (meta.controller_ref(p) or {}).get("uid") == "other-uid"
    }
    deleted = [d.name for d in plan.sync_nodes.deletes]
    assert len(deleted) == len(set(deleted))
    assert not set(deleted) & foreign

    # without surge a pod is created only on a node with no claimed pod at all
    if not dsutil.update_strategy(ds).max_surge:
        claimed_nodes = {
            podutil.target_node(p)
            for p in pods
            if meta.name(p) not in foreign
            and not (meta.controller_ref(p) is None and meta.is_being_deleted(p))
            and not (meta.is_being_deleted(p) and podutil.is_terminal(p))
        }
        assert not set(created) & claimed_nodes

    # the four omitempty counters are left out when zero (status.json_shape)
    status = {**dict.fromkeys(ds_status.COUNTERS, 0), **plan.status}
    desired = sum(placement.node_should_run(n, ds)[0] for n in nodes)
    assert status["desiredNumberScheduled"] == desired
    assert status["numberUnavailable"] == desired - status["numberAvailable"]
    assert (
        status["numberAvailable"]
        <= status["numberReady"]
        <= status["currentNumberScheduled"]
        <= desired
    )
    assert status["updatedNumberScheduled"] <= status["currentNumberScheduled"]
