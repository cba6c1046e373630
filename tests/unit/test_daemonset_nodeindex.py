"""``nodeindex.DaemonSetIndex`` kept change by change equals the from-scratch computation of
placement, pod facts, status and steadiness (hypothesis: random clusters, random sequences of
node and pod changes)."""

from __future__ import annotations

import sys
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from shared.daemonset import (
    claim,
    dsutil,
    inputs,
    manage,
    nodeindex,
    placement,
    planner,
    podfacts,
    record,
    status,
    unavailable,
)
from shared.daemonset.placement import Placement
from shared.daemonset.types import BackoffEntry, Plan, Reasons, group_reasons
from shared.model import meta, rolloutopts
from tests.unit import daemonset_fixtures as fx
from tests.unit.daemonset_fixtures import NOW, current_hash, daemon_pod, rolling, snapshot
from tests.unit.daemonset_strategies import blue_ds, node_of, node_ops, pod_fields, pod_of

Obj = dict[str, Any]

NODES = 6  # n0..n5; pods may target n6, never a Node
MIN_READY = [0, 5, 60]
STRATEGIES = [rolling(1, 0), rolling("30%", 0), rolling(0, 1), rolling(0, "50%"), rolling(2, 1),
              {"type": "OnDelete"}]

node_st = node_ops(NODES)
pod_st = st.tuples(st.just("pod"), st.integers(0, 9), pod_fields(
    NODES, ["ds", "ds", "ds", "orphan", "other", "elsewhere", "unmatched"],
    st.sampled_from([1, 5, 30, 60, 100])))
op_st = st.one_of(
    node_st,
    st.tuples(st.just("rmnode"), st.integers(0, NODES - 1)),
    pod_st,
    st.tuples(st.just("rmpod"), st.integers(0, 9)),
)


def scratch(ds: Obj, nodes: list[Obj], pods: list[Obj]) -> tuple[Any, Any, list[str]]:
    """What the planner computes from every object: decisions, the claimed pods' facts by
    node (orphans it would adopt left out), sorted node names."""
    placement = Placement(ds)
    decisions = {meta.name(n): placement.decide(n) for n in nodes}
    in_ns = [p for p in pods if meta.namespace(p) == meta.namespace(ds)]
    claimed, actions = claim.claim(ds, in_ns, "Pod")
    adopted = {a.uid for a in actions if a.adopt}
    owned = [p for p in claimed if meta.uid(p) not in adopted]
    check = status.labels_updated_check(current_hash(ds), dsutil.template_generation(ds))
    return decisions, podfacts.by_node(owned, check), sorted(decisions)


def steady_nodes(decisions: Any, node_pods: Any) -> dict[str, bool]:
    """Each node's steadiness, from scratch (the module's definition, written out)."""
    out = {}
    for name in set(decisions) | set(node_pods):
        pods = node_pods.get(name) or []
        decision = decisions.get(name)
        if decision is None:
            out[name] = not pods
        elif not decision.should_run:
            out[name] = not pods
        else:
            out[name] = len(pods) == 1 and pods[0].running and pods[0].updated
    return out


def check(index: nodeindex.DaemonSetIndex, ds: Obj, nodes: dict[str, Obj],
          pods: dict[str, Obj]) -> None:
    decisions, node_pods, names = scratch(ds, list(nodes.values()), list(pods.values()))
    in_ns = [p for p in pods.values() if meta.namespace(p) == meta.namespace(ds)]
    claimed, actions = claim.claim(ds, in_ns, "Pod")
    more, index_actions = claim.claim(ds, index.claim_candidates(), "Pod")
    assert sorted(map(meta.key, index.claimed_pods() + more)) == sorted(map(meta.key, claimed))
    assert sorted(index_actions, key=str) == sorted(actions, key=str)
    for now in (NOW, NOW + 30):
        for satisfied in (True, False):
            snap = snapshot(ds, list(nodes.values()), in_ns, now=now,
                            expectations_satisfied=satisfied, backoff=backoff_of(ds, now))
            same_plans(planner.plan(snap, index), planner.plan(snap))
    assert sorted(index.backoff_keys(ds)) == sorted(inputs.backoff_keys(ds, in_ns))
    assert dict(index.decisions) == decisions
    assert dict(index.node_pods) == node_pods
    assert list(index.node_names()) == names
    assert index.nodes() == [(n, nodes[n]) for n in names]
    min_ready = dsutil.min_ready_seconds(ds)
    boundaries = [NOW - age + min_ready for age in (1, 5, 30, 60, 100)]
    for now in [NOW, NOW - 200, NOW + 200, *boundaries]:
        for update in (True, False):
            assert index.status(now, update) == status.compute_status(
                ds, names, decisions, node_pods, now, update)
        assert index.unavailable(now) == unavailable.breakdown(
            min_ready, index.nodes(), decisions, node_pods, now)
    unsteady = {n for n, ok in steady_nodes(decisions, node_pods).items() if not ok}
    assert index.settled_except(set()) == (not unsteady)
    assert index.settled_except(unsteady)
    for n in unsteady:
        assert not index.settled_except(unsteady - {n})


def same_plans(from_index: Plan, from_scratch: Plan) -> None:
    """The plans are equal, and the record groups the index plan's reasons (its nodes of
    one reason kept as a list: ``Reasons``) as it groups the same map, whatever the number
    of nodes a reason may name: the same counts, the same nodes named."""
    assert from_index == from_scratch
    whole = dict(from_scratch.reasons)
    for most in range(len(whole) + 2):
        named, counts = (from_index.reasons.grouped(most)
                         if isinstance(from_index.reasons, Reasons)
                         else group_reasons(from_index.reasons, most))
        want_named, want_counts = group_reasons(whole, most)
        assert counts == want_counts
        assert {r: sorted(n) for r, n in named.items()} == \
            {r: sorted(n) for r, n in want_named.items()}


def backoff_of(ds: Obj, now: float) -> dict[str, BackoffEntry]:
    """A failed-pod backoff entry for n1 that holds at ``now`` and one for n2 that is over:
    the plans' backoff reasons and requeues."""
    return {manage.backoff_key(ds, "n1"): BackoffEntry(delay=10.0, last_update=now - 5),
            manage.backoff_key(ds, "n2"): BackoffEntry(delay=1.0, last_update=now - 50)}


@settings(max_examples=200, deadline=None)
@given(
    min_ready=st.sampled_from(MIN_READY),
    strategy=st.sampled_from(STRATEGIES),
    initial_nodes=st.lists(node_st, max_size=NODES),
    initial_pods=st.lists(pod_st, max_size=10),
    ops=st.lists(op_st, max_size=25),
)
def test_index_follows_changes_as_a_full_computation(
    min_ready: int, strategy: Obj, initial_nodes: list[Any], initial_pods: list[Any],
    ops: list[Any],
) -> None:
    """Kept change by change, the index equals the from-scratch computation, and a full
    plan that visits only the nodes it splits off (``plan_sets``) equals the plan of every
    node, under each update strategy, with expectations pending or not and failed-pod
    backoff."""
    ds = blue_ds(min_ready, strategy)
    nodes = {f"n{i}": node_of(i, c, t) for _, i, c, t in initial_nodes}
    pods = {f"x/p{j}": pod_of(ds, j, p) for _, j, p in initial_pods}
    pods = {meta.key(p): p for p in pods.values()}
    index = nodeindex.DaemonSetIndex(ds, current_hash(ds), nodes.values(), pods.values())
    check(index, ds, nodes, pods)
    for op in ops:
        if op[0] == "node":
            node = node_of(*op[1:])
            nodes[meta.name(node)] = node
            index.set_node(node)
        elif op[0] == "rmnode":
            nodes.pop(f"n{op[1]}", None)
            index.remove_node(f"n{op[1]}")
        elif op[0] == "pod":
            pod = pod_of(ds, op[1], op[2])
            for key in [k for k in pods if k.endswith(f"/p{op[1]}")]:
                if key != meta.key(pod):  # moved namespace: the old one is gone
                    del pods[key]
                    index.remove_pod(key)
            pods[meta.key(pod)] = pod
            index.set_pod(pod)
        else:
            for key in [k for k in pods if k.endswith(f"/p{op[1]}")]:
                del pods[key]
                index.remove_pod(key)
        check(index, ds, nodes, pods)


def test_index_takes_a_status_change_but_not_a_template_change() -> None:
    ds = blue_ds(0)
    index = nodeindex.DaemonSetIndex(ds, current_hash(ds), [node_of(0, "blue", 0)])
    newer = {**ds, "status": {"numberReady": 3}, "metadata": {**ds["metadata"], "generation": 2}}
    assert index.update_ds(newer)
    assert index.status(NOW, True)["observedGeneration"] == 2
    assert index.status(NOW, True) == status.compute_status(
        newer, ["n0"], dict(index.decisions), {}, NOW, True)
    changed = blue_ds(0)
    changed["spec"]["template"]["spec"]["nodeSelector"] = {"color": "red"}
    assert not index.fits(changed)
    assert not index.update_ds(changed)
    assert index.ds is newer


def test_a_plan_with_a_fitting_index_reads_no_node_and_no_pod(monkeypatch: Any) -> None:
    ds = blue_ds(0)
    nodes = [node_of(i, "blue", 0) for i in range(3)]
    pods = [daemon_pod(ds, "n0"), daemon_pod(ds, "n1")]
    expected = planner.plan(snapshot(ds, nodes, pods))
    index = nodeindex.DaemonSetIndex(ds, expected.hash, nodes, pods)

    def unexpected(*_args: Any) -> Any:
        raise AssertionError("read again")

    monkeypatch.setattr(placement.Placement, "decide", unexpected)
    monkeypatch.setattr(podfacts, "read", unexpected)
    monkeypatch.setattr(status, "node_count", unexpected)
    assert planner.plan(snapshot(ds, nodes, pods), index) == expected
    assert [c.node for c in expected.sync_nodes.creates] == ["n2"]  # type: ignore[union-attr]


def test_the_breakdown_and_the_steady_check_read_only_the_nodes_they_name(
    monkeypatch: Any,
) -> None:
    """At 1,000 nodes with three pods unavailable the breakdown looks up no node whose pod
    is missing or not ready (their causes are kept as their pods change) and finds the cause
    of the one ready inside minReadySeconds alone, and the steady check looks at the
    unsettled ones: the work of a status does not grow with the cluster."""
    ds = blue_ds(5)
    nodes = [node_of(i, "blue", 0) for i in range(1000)]
    pods = [daemon_pod(ds, f"n{i}", ready_since=NOW - 100) for i in range(2, 1000)]
    pods.append(daemon_pod(ds, "n1", ready=False))
    index = nodeindex.DaemonSetIndex(ds, current_hash(ds), nodes, pods)
    index.set_pod(daemon_pod(ds, "n7", ready_since=NOW - 1))  # ready, inside minReadySeconds
    read: list[str] = []
    cause = unavailable.cause
    monkeypatch.setattr(unavailable, "cause", lambda node, pods: read.append(meta.name(node))
                        or cause(node, pods))
    assert index.unavailable(NOW) == {"NoPod": ["n0"], "PodNotReady": ["n1"],
                                      "MinReadySeconds": ["n7"]}
    assert read == ["n7"]
    assert index.unavailable(NOW + 5) == {"NoPod": ["n0"], "PodNotReady": ["n1"]}
    assert not index.settled_except(set())  # n0 has no pod: a sync would create one
    assert index.settled_except({"n0"})  # n1 and n7 are steady, ready or not
    assert index.widened(set(), 1) == {"n0"}  # the one unsteady node joins a sync
    assert index.widened({"n5"}, 1) == {"n0", "n5"}
    assert index.widened({"n0"}, 0) == {"n0"}
    index.remove_pod(meta.key(pods[0]))  # n2 has no pod either: two unsteady nodes
    assert index.widened(set(), 1) is None
    assert index.widened({"n2"}, 1) == {"n0", "n2"}


ROLL_NODES = 12
# the rollout gates (held nodes) and a failure action (the failure judge reads every node)
GATES = [{}, {rolloutopts.PAUSED: "true"}, {rolloutopts.PARTITION: "3"},
         {rolloutopts.FAILURE_ACTION: rolloutopts.PAUSE}]
# one pod per blue node mostly: an old one (ready or not), a new one, a surge pair, none
roll_pod_st = st.tuples(st.just("pod"), st.integers(0, 2 * ROLL_NODES - 1), pod_fields(
    ROLL_NODES - 1, ["ds"], st.sampled_from([1, 5, 30, 60, 100]),
    phase=st.sampled_from(["Running", "Running", "Running", "Pending", "Failed"]),
    deleting=st.sampled_from([False, False, False, True]), bound=st.just(True)))
roll_op_st = st.one_of(node_ops(ROLL_NODES, tainted=st.sampled_from([0, 0, 0, 1, 2])),
                       roll_pod_st, st.tuples(st.just("rmpod"), st.integers(0, 2 * ROLL_NODES)))


@settings(max_examples=200, deadline=None)
@given(
    min_ready=st.sampled_from(MIN_READY),
    strategy=st.sampled_from(STRATEGIES[:-1]),
    kinds=st.lists(st.tuples(st.sampled_from(["blue", "blue", "blue", "red"]),
                             st.sampled_from([0, 0, 0, 1])),
                   min_size=ROLL_NODES, max_size=ROLL_NODES),
    old=st.lists(st.booleans(), min_size=ROLL_NODES, max_size=ROLL_NODES),
    ops=st.lists(roll_op_st, max_size=12),
    gates=st.sampled_from(GATES),
)
def test_a_rolling_update_from_the_index_is_the_rolling_update_of_every_node(
    min_ready: int, strategy: Obj, kinds: list[tuple[str, int]], old: list[bool],
    ops: list[Any], gates: dict[str, str],
) -> None:
    """Mid-rollout (one pod per node, old or new, ready for a while; some nodes it should
    not run on, some where it may only continue to: NoSchedule; paused, partitioned or
    with a failure action), then random changes:
    a full plan from the index, which visits as many old ready pods as the budget can take
    and counts the rest, decides what the plan of every node decides."""
    ds = blue_ds(min_ready, strategy)
    ds["metadata"]["annotations"].update(gates)
    nodes = {f"n{i}": node_of(i, c, t) for i, (c, t) in enumerate(kinds)}
    pods = {}
    for i, is_old in enumerate(old):
        pod = pod_of(ds, i, {"node": i, "phase": "Running", "ready": True, "deleting": False,
                             "new": not is_old, "owned": "ds", "age": 100, "bound": True})
        pods[meta.key(pod)] = pod
    index = nodeindex.DaemonSetIndex(ds, current_hash(ds), nodes.values(), pods.values())
    for op in [None, *ops]:
        if op is not None and op[0] == "node":
            node = node_of(*op[1:])
            nodes[meta.name(node)] = node
            index.set_node(node)
        elif op is not None and op[0] == "pod":
            pod = pod_of(ds, op[1], op[2])
            pods[meta.key(pod)] = pod
            index.set_pod(pod)
        elif op is not None:
            if pods.pop(f"default/p{op[1]}", None) is not None:
                index.remove_pod(f"default/p{op[1]}")
        for now in (NOW, NOW + 30):
            snap = snapshot(ds, list(nodes.values()), list(pods.values()), now=now)
            same_plans(planner.plan(snap, index), planner.plan(snap))


@settings(max_examples=300, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(["add", "discard", "read"]),
                              st.integers(0, 300)), max_size=400))
def test_the_sorted_node_lists_are_sets_kept_in_name_order(ops: list[tuple[str, int]]) -> None:
    """The index's bare, ready-old and by-cause lists, whose removals are only marked until
    they are read or a quarter is marked: after any adds and removals (of names present or
    not, again and again) they read as the sorted set of what is in them."""
    names = nodeindex._Names()
    want: set[str] = set()
    for op, i in ops:
        name = f"n{i:03d}"
        if op == "add":
            names.add(name)
            want.add(name)
        elif op == "discard":
            names.discard(name)
            want.discard(name)
        else:
            assert names.names() == sorted(want)
        assert len(names) == len(want)
    assert names.names() == sorted(want)


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(["add", "discard"]), st.integers(0, 300)),
                    max_size=400))
def test_the_unsteady_node_sets_are_sets(ops: list[tuple[str, int]]) -> None:
    """The sets of unsteady nodes, which copy themselves into a smaller table on a discard:
    after any adds and removals they hold what a set would."""
    names = nodeindex._NodeSet()
    want: set[str] = set()
    for op, i in ops:
        getattr(names, op)(f"n{i:03d}")
        getattr(want, op)(f"n{i:03d}")
        assert names == want


def test_a_set_of_unsteady_nodes_shrinks_when_a_fan_out_settles() -> None:
    """A set that held 50,000 nodes and holds three now takes the room of three, so walking
    it (each per-node sync does) no longer visits 50,000 empty slots."""
    names = nodeindex._NodeSet(f"node-{i:05d}" for i in range(50_000))
    for i in range(3, 50_000):
        names.discard(f"node-{i:05d}")
    assert names == {"node-00000", "node-00001", "node-00002"}
    assert sys.getsizeof(names) <= sys.getsizeof({"node-00000", "node-00001", "node-00002"}) \
        + 16 * 64


def test_the_burst_limits_nodes_are_counted_past_those_a_plan_visits_one_by_one() -> None:
    """More nodes need a pod than a sync creates: the deferred ones (the burst limit) are
    the bare nodes and the visited ones (a terminating pod: with maxSurge a new one is
    created beside it) past the first 250 in name order; the record of the plan from the index counts and names what the plan of every
    node's does."""
    ds = fx.make_ds(strategy=rolling(max_unavailable=0, max_surge=1))
    nodes = fx.make_nodes(700)
    pods = [fx.daemon_pod(ds, f"node-{i}", deleting=True) for i in range(0, 700, 7)]
    snap = snapshot(ds, nodes, pods)
    index = nodeindex.DaemonSetIndex(ds, current_hash(ds), nodes, pods)
    from_index, from_scratch = planner.plan(snap, index), planner.plan(snap)
    assert isinstance(from_index.reasons, Reasons)
    deferred = {n for n, why in from_scratch.reasons.items() if why == planner.REASON_BURST}
    assert len(deferred) == 700 - manage.BURST_REPLICAS
    assert {f"node-{i}" for i in range(0, 700, 7)} & deferred  # visited and deferred
    same_plans(from_index, from_scratch)
    doc = record.DecisionRecord(key="ns/ds", reasons=from_index.reasons).to_map()
    assert doc["reasonCounts"] == {planner.REASON_BURST: 700 - manage.BURST_REPLICAS}
    assert {why: set(names) for why, names in doc["reasonsBy"].items()} == \
        {planner.REASON_CREATE: set(from_scratch.reasons) - deferred}
