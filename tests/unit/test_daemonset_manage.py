"""manage (§c.2-§c.4, §c.6 cap) through ``plan``: creates, deletes, events, backoff, claims."""

from __future__ import annotations

from shared.daemonset import dsutil, manage, planner
from shared.daemonset.types import BackoffEntry, EmitEvent, Plan
from tests.unit.daemonset_fixtures import (
    DS_UID,
    NOW,
    NS,
    current_hash,
    daemon_pod,
    make_ds,
    make_node,
    make_nodes,
    make_pod,
    rolling,
    snapshot,
)


def created(plan: Plan) -> list[str]:
    assert plan.sync_nodes is not None
    return sorted(c.node for c in plan.sync_nodes.creates)


def deleted(plan: Plan) -> list[str]:
    assert plan.sync_nodes is not None
    return sorted(d.name for d in plan.sync_nodes.deletes)


def test_simple_daemonset_launches_pods() -> None:
    ds = make_ds()
    plan = planner.plan(snapshot(ds, make_nodes(5)))
    assert created(plan) == [f"node-{i}" for i in range(5)]
    assert deleted(plan) == []
    assert plan.events == []
    assert plan.sync_nodes is not None
    for action in plan.sync_nodes.creates:
        pod = action.pod
        assert pod["metadata"]["namespace"] == NS
        assert pod["metadata"]["labels"][dsutil.HASH_LABEL] == plan.hash
        assert pod["metadata"]["labels"][dsutil.GENERATION_LABEL] == "1"
    names = {c.pod["metadata"]["name"] for c in plan.sync_nodes.creates}
    assert len(names) == 5


def test_no_nodes_does_nothing() -> None:
    plan = planner.plan(snapshot(make_ds(), []))
    assert created(plan) == [] and deleted(plan) == []


def test_one_node_daemon_launches_pod() -> None:
    assert created(planner.plan(snapshot(make_ds(), [make_node("node-0")]))) == ["node-0"]


def test_daemonset_respects_termination() -> None:
    ds = make_ds()
    pod = daemon_pod(ds, "node-0", deleting=True)
    plan = planner.plan(snapshot(ds, make_nodes(1), [pod]))
    assert created(plan) == [] and deleted(plan) == []


def test_terminal_deleted_pod_does_not_block_creation() -> None:
    ds = make_ds()
    pod = daemon_pod(ds, "node-0", deleting=True, phase="Succeeded")
    assert created(planner.plan(snapshot(ds, make_nodes(1), [pod]))) == ["node-0"]


def test_deals_with_existing_pods() -> None:
    ds = make_ds()
    other_labels = {"name": "simple-daemon", "type": "test"}
    pods = [daemon_pod(ds, "node-1", name="p1-0")]
    pods += [daemon_pod(ds, "node-2", name=f"p2-{i}", created=NOW - 100 + i) for i in range(2)]
    pods += [daemon_pod(ds, "node-3", name=f"p3-{i}", created=NOW - 100 + i) for i in range(5)]
    pods += [make_pod(f"p4-{i}", "node-4", ds=ds, labels=other_labels) for i in range(2)]
    plan = planner.plan(snapshot(ds, make_nodes(5), pods))
    assert created(plan) == ["node-0", "node-4"]
    assert deleted(plan) == ["p2-1", "p3-1", "p3-2", "p3-3", "p3-4"]
    # owned pods that stopped matching the selector are released
    assert sorted((c.name, c.adopt) for c in plan.claims) == [("p4-0", False), ("p4-1", False)]


def test_duplicate_pods_deleted_oldest_kept() -> None:
    ds = make_ds()
    newest = daemon_pod(ds, "node-0", name="a-newest", created=NOW - 10)
    oldest = daemon_pod(ds, "node-0", name="z-oldest", created=NOW - 100)
    same_age_b = daemon_pod(ds, "node-0", name="b-same", created=NOW - 50)
    same_age_a = daemon_pod(ds, "node-0", name="a-same", created=NOW - 50)
    plan = planner.plan(snapshot(ds, make_nodes(1), [newest, same_age_b, oldest, same_age_a]))
    assert deleted(plan) == ["a-newest", "a-same", "b-same"]
    assert created(plan) == []


def test_duplicate_pods_scheduled_one_kept_over_older_unscheduled() -> None:
    ds = make_ds()
    unscheduled = daemon_pod(ds, None, name="u", affinity_node="node-0", created=NOW - 100)
    scheduled = daemon_pod(ds, "node-0", name="s", created=NOW - 10)
    assert deleted(planner.plan(snapshot(ds, make_nodes(1), [unscheduled, scheduled]))) == ["u"]


def test_selector_daemon_launches_pods() -> None:
    ds = make_ds(pod_spec={"containers": [], "nodeSelector": {"color": "blue"}})
    nodes = make_nodes(2) + make_nodes(2, {"color": "red"}, start=2)
    assert created(planner.plan(snapshot(ds, nodes))) == ["node-0", "node-1"]


def test_selector_daemon_deletes_unselected_pods() -> None:
    ds = make_ds(pod_spec={"containers": [], "nodeSelector": {"color": "blue"}})
    nodes = [make_node("node-0"), make_node("node-1", {"color": "red"})]
    pods = [daemon_pod(ds, "node-0"), daemon_pod(ds, "node-1")]
    plan = planner.plan(snapshot(ds, nodes, pods))
    assert created(plan) == [] and deleted(plan) == ["foo-node-1"]


def test_bad_selector_daemon_does_nothing() -> None:
    ds = make_ds(pod_spec={"containers": [], "nodeSelector": {"color": "green"}})
    plan = planner.plan(snapshot(ds, make_nodes(4)))
    assert created(plan) == [] and deleted(plan) == []
    assert plan.reasons == {f"node-{i}": "node selector does not match" for i in range(4)}


def test_name_daemonset_launches_pods() -> None:
    ds = make_ds(pod_spec={"containers": [], "nodeName": "node-0"})
    assert created(planner.plan(snapshot(ds, make_nodes(3)))) == ["node-0"]


def test_bad_name_daemonset_does_nothing() -> None:
    ds = make_ds(pod_spec={"containers": [], "nodeName": "node-10"})
    assert created(planner.plan(snapshot(ds, make_nodes(3)))) == []


def test_node_affinity_daemon_launches_pods() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "color", "operator": "In", "values": ["blue"]}]}
                ]
            }
        }
    }
    ds = make_ds(pod_spec={"containers": [], "affinity": affinity})
    nodes = make_nodes(3) + make_nodes(2, {"color": "red"}, start=3)
    plan = planner.plan(snapshot(ds, nodes))
    assert created(plan) == ["node-0", "node-1", "node-2"]
    assert plan.reasons["node-3"] == "required node affinity does not match"
    # the created pods carry only the node-name affinity
    assert plan.sync_nodes is not None
    req = plan.sync_nodes.creates[0].pod["spec"]["affinity"]["nodeAffinity"]
    terms = req["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-0"]}]}
    ]


def test_taint_prevents_launch() -> None:
    tainted = make_node(
        "tainted", taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
    )
    ds = make_ds()
    plan = planner.plan(snapshot(ds, [tainted, make_node("plain")]))
    assert created(plan) == ["plain"]
    assert plan.reasons == {
        "tainted": "untolerated taint dedicated=x:NoSchedule",
        "plain": "pod creation planned",
    }


def test_tainted_node_daemon_launches_tolerate_pod() -> None:
    tainted = make_node(
        "tainted", taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
    )
    tol = [{"key": "dedicated", "operator": "Equal", "value": "x", "effect": "NoSchedule"}]
    ds = make_ds(pod_spec={"containers": [], "tolerations": tol})
    assert created(planner.plan(snapshot(ds, [tainted]))) == ["tainted"]


def test_no_schedule_tainted_doesnt_evict_running_intolerant_pod() -> None:
    tainted = make_node("node-0", taints=[{"key": "dedicated", "effect": "NoSchedule"}])
    ds = make_ds()
    plan = planner.plan(snapshot(ds, [tainted], [daemon_pod(ds, "node-0")]))
    assert created(plan) == [] and deleted(plan) == []
    assert plan.status is not None and plan.status["numberMisscheduled"] == 1


def test_daemon_sets_with_no_execute_taint_evicted() -> None:
    tainted = make_node("node-0", taints=[{"key": "dedicated", "effect": "NoExecute"}])
    ds = make_ds()
    plan = planner.plan(snapshot(ds, [tainted], [daemon_pod(ds, "node-0")]))
    assert deleted(plan) == ["foo-node-0"]


def test_not_ready_node_daemon_launches_pod() -> None:
    node = make_node(
        "node-0", taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]
    )
    node["status"] = {"conditions": [{"type": "Ready", "status": "False"}]}
    assert created(planner.plan(snapshot(make_ds(), [node]))) == ["node-0"]


def test_failed_pod_backoff() -> None:
    ds = make_ds()
    key = f"{DS_UID}/0/node-0"
    failed = daemon_pod(ds, "node-0", phase="Failed")
    msg = f"Found failed daemon pod {NS}/foo-node-0 on node node-0, will try to kill it"

    # first sync: kill it, start the backoff at 1 s
    plan = planner.plan(snapshot(ds, make_nodes(1), [failed]))
    assert deleted(plan) == ["foo-node-0"]
    assert plan.events == [EmitEvent("Warning", "FailedDaemonPod", msg)]
    assert [(b.key, b.entry) for b in plan.backoff] == [(key, BackoffEntry(1.0, NOW))]
    assert created(plan) == []  # the replacement comes on the next sync

    # the replacement failed at once: within the delay it is left alone, requeued after it
    backoff = {key: BackoffEntry(1.0, NOW)}
    plan = planner.plan(snapshot(ds, make_nodes(1), [failed], backoff=backoff, now=NOW + 0.5))
    assert deleted(plan) == [] and plan.events == [] and plan.backoff == []
    assert plan.requeue_after == 1.0
    assert plan.reasons["node-0"] == "failed-pod backoff until 2023-11-14T22:13:21Z"

    # after the delay: killed again, delay doubled
    plan = planner.plan(snapshot(ds, make_nodes(1), [failed], backoff=backoff, now=NOW + 1.5))
    assert deleted(plan) == ["foo-node-0"]
    assert [b.entry for b in plan.backoff] == [BackoffEntry(2.0, NOW + 1.5)]


def test_failed_pod_backoff_capped_and_expires() -> None:
    assert manage.next_backoff(BackoffEntry(600.0, NOW), NOW + 700) == BackoffEntry(
        900.0, NOW + 700
    )
    stale = BackoffEntry(900.0, NOW)
    assert not manage.in_backoff(stale, NOW + 1801)
    assert manage.next_backoff(stale, NOW + 1801) == BackoffEntry(1.0, NOW + 1801)
    assert manage.in_backoff(BackoffEntry(900.0, NOW), NOW + 899)
    assert not manage.in_backoff(BackoffEntry(900.0, NOW), NOW + 900)


def test_failed_pod_backoff_key_uses_observed_generation() -> None:
    ds = make_ds(status={"observedGeneration": 3})
    plan = planner.plan(snapshot(ds, make_nodes(1), [daemon_pod(ds, "node-0", phase="Failed")]))
    assert [b.key for b in plan.backoff] == [f"{DS_UID}/3/node-0"]


def test_two_failed_pods_on_one_node_second_waits_for_backoff() -> None:
    ds = make_ds()
    pods = [
        daemon_pod(ds, "node-0", name="f1", phase="Failed", created=NOW - 20),
        daemon_pod(ds, "node-0", name="f2", phase="Failed", created=NOW - 10),
    ]
    plan = planner.plan(snapshot(ds, make_nodes(1), pods))
    assert deleted(plan) == ["f1"]
    assert plan.requeue_after == 1.0


def test_succeeded_pod_deleted_with_event() -> None:
    ds = make_ds()
    plan = planner.plan(snapshot(ds, make_nodes(1), [daemon_pod(ds, "node-0", phase="Succeeded")]))
    assert deleted(plan) == ["foo-node-0"]
    msg = f"Found succeeded daemon pod {NS}/foo-node-0 on node node-0, will try to delete it"
    assert plan.events == [EmitEvent("Normal", "SucceededDaemonPod", msg)]
    assert plan.backoff == []


def test_failed_pod_on_node_that_should_not_run_is_deleted_without_event() -> None:
    ds = make_ds(pod_spec={"containers": [], "nodeSelector": {"color": "red"}})
    plan = planner.plan(snapshot(ds, make_nodes(1), [daemon_pod(ds, "node-0", phase="Failed")]))
    assert deleted(plan) == ["foo-node-0"]
    assert plan.events == [] and plan.backoff == []


def test_unscheduled_pods_on_missing_nodes_deleted() -> None:
    ds = make_ds()
    unscheduled = daemon_pod(ds, None, name="gone-unbound", affinity_node="gone")
    bound = daemon_pod(ds, "gone", name="gone-bound")
    plan = planner.plan(snapshot(ds, make_nodes(1), [unscheduled, bound, daemon_pod(ds, "node-0")]))
    assert deleted(plan) == ["gone-unbound"]
    assert plan.status is not None and plan.status["currentNumberScheduled"] == 1


def test_burst_replicas_cap_250() -> None:
    ds = make_ds()
    plan = planner.plan(snapshot(ds, make_nodes(300)))
    assert len(created(plan)) == 250
    assert sum(1 for r in plan.reasons.values() if r.startswith("burst limit")) == 50
    # deletes are capped too
    other = make_ds(pod_spec={"containers": [], "nodeSelector": {"color": "red"}})
    pods = [daemon_pod(other, f"node-{i}") for i in range(300)]
    plan = planner.plan(snapshot(other, make_nodes(300), pods))
    assert len(deleted(plan)) == 250


def test_orphan_pods_adopted_and_count_as_daemon_pods() -> None:
    ds = make_ds()
    orphan = make_pod("orphan", "node-0", hash=current_hash(ds))
    plan = planner.plan(snapshot(ds, make_nodes(2), [orphan]))
    assert created(plan) == ["node-1"]
    assert len(plan.claims) == 1
    claim = plan.claims[0]
    assert (claim.kind, claim.name, claim.uid, claim.adopt) == ("Pod", "orphan", "uid-orphan", True)
    assert claim.owner_ref["uid"] == DS_UID and claim.owner_ref["controller"] is True


def test_terminating_or_non_matching_orphans_are_not_adopted() -> None:
    ds = make_ds()
    terminating = make_pod("t", "node-0", deleting=True)
    other = make_pod("o", "node-1", labels={"app": "other"})
    plan = planner.plan(snapshot(ds, make_nodes(2), [terminating, other]))
    assert plan.claims == []
    assert created(plan) == ["node-0", "node-1"]


def test_pods_owned_by_another_controller_are_ignored() -> None:
    ds = make_ds()
    foreign = make_pod("f", "node-0", ds=make_ds("bar", uid="other-uid"))
    plan = planner.plan(snapshot(ds, make_nodes(1), [foreign]))
    assert plan.claims == [] and created(plan) == ["node-0"] and deleted(plan) == []


def test_surge_deals_with_existing_pods() -> None:
    ds = make_ds(strategy=rolling(0, 1))
    pods = [daemon_pod(ds, "node-1", name="p1")]
    pods += [daemon_pod(ds, "node-2", name=f"p2-{i}", created=NOW - 100 + i) for i in range(2)]
    pods += [daemon_pod(ds, "node-3", name=f"p3-{i}", created=NOW - 100 + i) for i in range(5)]
    plan = planner.plan(snapshot(ds, make_nodes(5), pods))
    assert created(plan) == ["node-0", "node-4"]
    assert deleted(plan) == ["p2-1", "p3-1", "p3-2", "p3-3", "p3-4"]


def test_surge_creates_when_only_terminating_pods() -> None:
    ds = make_ds(strategy=rolling(0, 1))
    plan = planner.plan(snapshot(ds, make_nodes(1), [daemon_pod(ds, "node-0", deleting=True)]))
    assert created(plan) == ["node-0"]


def test_surge_preserves_ready_old_pods() -> None:
    ds = make_ds(strategy=rolling(0, 1))
    old = make_pod("old", "node-0", ds=ds, hash="old-hash", created=NOW - 100)
    new = daemon_pod(ds, "node-0", name="new", ready=False, created=NOW - 10)
    plan = planner.plan(snapshot(ds, make_nodes(1), [old, new]))
    assert deleted(plan) == [] and created(plan) == []


def test_surge_deletes_unready_old_pod() -> None:
    ds = make_ds(strategy=rolling(0, 1))
    old = make_pod("old", "node-0", ds=ds, hash="old-hash", created=NOW - 100, ready=False)
    new = daemon_pod(ds, "node-0", name="new", ready=False, created=NOW - 10)
    assert deleted(planner.plan(snapshot(ds, make_nodes(1), [old, new]))) == ["old"]


def test_surge_deletes_old_ready_when_new_available_and_extra_pods() -> None:
    ds = make_ds(strategy=rolling(0, 1), min_ready_seconds=10)
    old = make_pod("old", "node-0", ds=ds, hash="old-hash", created=NOW - 100)
    old2 = make_pod("old2", "node-0", ds=ds, hash="old-hash", created=NOW - 90)
    new = daemon_pod(ds, "node-0", name="new", created=NOW - 50, ready_since=NOW - 11)
    new2 = daemon_pod(ds, "node-0", name="new2", created=NOW - 40)
    plan = planner.plan(snapshot(ds, make_nodes(1), [old, old2, new, new2]))
    assert deleted(plan) == ["new2", "old", "old2"]


def test_surge_preserves_old_ready_with_unsatisfied_min_ready() -> None:
    ds = make_ds(strategy=rolling(0, 1), min_ready_seconds=10)
    old = make_pod("old", "node-0", ds=ds, hash="old-hash", created=NOW - 100)
    new = daemon_pod(ds, "node-0", name="new", created=NOW - 50, ready_since=NOW - 10)
    assert deleted(planner.plan(snapshot(ds, make_nodes(1), [old, new]))) == []


def test_on_delete_creates_missing_pods_with_current_template_only() -> None:
    ds = make_ds(strategy={"type": "OnDelete"})
    old = make_pod("old", "node-0", ds=ds, hash="old-hash")
    plan = planner.plan(snapshot(ds, make_nodes(2), [old]))
    assert created(plan) == ["node-1"] and deleted(plan) == []
    assert plan.sync_nodes is not None
    assert plan.sync_nodes.creates[0].pod["metadata"]["labels"][dsutil.HASH_LABEL] == plan.hash


def test_pod_names_avoid_names_in_use() -> None:
    from shared.daemonset import podtemplate

    ds = make_ds()
    position = snapshot(ds).position  # the names of one decision
    squatter_name = podtemplate.pod_name(ds, "node-0", current_hash(ds), 0, position)
    squatter = make_pod(squatter_name, "elsewhere", labels={"app": "other"})
    plan = planner.plan(snapshot(ds, make_nodes(1), [squatter]))
    assert plan.sync_nodes is not None
    assert plan.sync_nodes.creates[0].pod["metadata"]["name"] == podtemplate.pod_name(
        ds, "node-0", current_hash(ds), 1, position
    )
    assert plan.sync_nodes.creates[0].salt == 1
