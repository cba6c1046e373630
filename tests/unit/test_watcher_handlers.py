"""The DaemonSet controller's event handlers (spec §b) as pure decisions: one change in, the
keys to enqueue (now or later), expectation observations and expectation deletes out.

Observations are ``(key, creations_seen, deletions_seen)`` with positive counts; the store
subtracts them. Test names follow upstream's daemon_controller_test.go where one exists."""

from __future__ import annotations

import copy
from typing import Any

from services.watcher import handlers
from shared.model import meta, podutil
from tests.unit.daemonset_fixtures import NS, make_ds, make_node, make_pod, ts

Obj = dict[str, Any]

KEY = f"{NS}/foo"


def _dss(*daemonsets: Obj) -> handlers.DaemonSets:
    by_key = {meta.key(d): d for d in daemonsets}
    return handlers.DaemonSets(
        get=by_key.get,
        in_namespace=lambda ns: [d for d in by_key.values() if meta.namespace(d) == ns],
        all_=lambda: list(by_key.values()),
    )


def _dss_with_pods(daemonsets: list[Obj], pods: list[Obj]) -> handlers.DaemonSets:
    plain = _dss(*daemonsets)
    return handlers.DaemonSets(
        get=plain.get, in_namespace=plain.in_namespace, all_=plain.all,
        pods_on=lambda node: [p for p in pods if podutil.target_node(p) == node],
    )


def _rv(obj: Obj, version: str) -> Obj:
    out = copy.deepcopy(obj)
    out["metadata"]["resourceVersion"] = version
    return out


def _react(dss: handlers.DaemonSets, kind: str, etype: str, old: Obj | None,
           new: Obj) -> handlers.Reaction:
    r = handlers.Reaction()
    handlers.react(r, dss, kind, etype, old, new)
    return r


def _nothing(r: handlers.Reaction) -> bool:
    return r == handlers.Reaction()


def _ready(pod: Obj, ready: bool) -> Obj:
    out = copy.deepcopy(pod)
    out["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False",
                                    "lastTransitionTime": ts(1_700_000_000)}]
    return out


def _revision(name: str, labels: dict[str, str], owner: Obj | None = None,
              deleting: bool = False) -> Obj:
    md: Obj = {"name": name, "namespace": NS, "uid": f"uid-{name}", "labels": dict(labels)}
    if owner is not None:
        md["ownerReferences"] = [meta.controller_owner_ref(owner)]
    if deleting:
        md["deletionTimestamp"] = ts(1_700_000_000)
    return {"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": md,
            "data": {}, "revision": 1}


# ---- DaemonSet (§b.1) ------------------------------------------------------------------------


def test_add_daemonset_enqueues_it() -> None:
    ds = make_ds()
    r = _react(_dss(), "DaemonSet", "ADDED", None, ds)
    assert r.enqueue == {KEY}
    assert not r.delete_expectations and not r.observe


def test_update_daemonset_status_only_asks_for_a_sync_of_no_node() -> None:
    old = _rv(make_ds(), "1-0")
    cur = _rv(make_ds(), "2-0")
    cur["status"] = {"numberReady": 3}
    cur["metadata"]["managedFields"] = [{"manager": "status-writer"}]
    r = _react(_dss(cur), "DaemonSet", "MODIFIED", old, cur)
    assert r.enqueue_nodes == {KEY: set()} and r.enqueue == set()
    assert r.hints() == {KEY: []}


def test_update_daemonset_spec_change_is_a_full_sync() -> None:
    old = _rv(make_ds(), "1-0")
    cur = _rv(make_ds(min_ready_seconds=5, status={"numberReady": 3}), "2-0")
    r = _react(_dss(cur), "DaemonSet", "MODIFIED", old, cur)
    assert r.enqueue == {KEY} and r.enqueue_nodes == {}
    assert not r.delete_expectations


def test_update_daemonset_same_resource_version_is_still_enqueued() -> None:
    ds = _rv(make_ds(), "1-0")
    r = _react(_dss(ds), "DaemonSet", "MODIFIED", ds, ds)
    assert r.enqueue_nodes == {KEY: set()}  # nothing but (no) status changed


def test_replayed_daemonset_update_is_a_full_sync() -> None:
    ds = _rv(make_ds(status={"numberReady": 3}), "2-0")
    r = _react(_dss(ds), "DaemonSet", "MODIFIED", None, ds)
    assert r.enqueue == {KEY}


def test_update_daemonset_with_new_uid_deletes_expectations_of_the_old_one() -> None:
    old = _rv(make_ds(uid="uid-old"), "1-0")
    cur = _rv(make_ds(uid="uid-new"), "2-0")
    r = _react(_dss(cur), "DaemonSet", "MODIFIED", old, cur)
    assert r.delete_expectations == {KEY}
    assert r.enqueue == {KEY}


def test_delete_daemonset_deletes_expectations_and_enqueues() -> None:
    ds = make_ds()
    r = _react(_dss(), "DaemonSet", "DELETED", ds, ds)
    assert r.delete_expectations == {KEY}
    assert r.enqueue == {KEY}


# ---- Pod add (§b.2) ------------------------------------------------------------------------------


def test_add_pod_observes_creation_and_enqueues_owner() -> None:  # upstream TestAddPod
    ds1, ds2 = make_ds("foo1", uid="u1"), make_ds("foo2", uid="u2")
    pod = make_pod("p1", "node-0", ds=ds1)
    r = _react(_dss(ds1, ds2), "Pod", "ADDED", None, pod)
    assert r.observe == [(f"{NS}/foo1", 1, 0)]
    assert r.enqueue_nodes == {f"{NS}/foo1": {"node-0"}}  # a sync of its node
    assert r.enqueue == set()


def test_add_pod_without_a_target_node_enqueues_its_owner_for_a_full_sync() -> None:
    ds = make_ds()
    r = _react(_dss(ds), "Pod", "ADDED", None, make_pod("p1", None, ds=ds))
    assert r.observe == [(KEY, 1, 0)]
    assert r.enqueue == {KEY} and r.enqueue_nodes == {}


def test_add_pod_with_deletion_timestamp_counts_as_deletion() -> None:
    ds = make_ds()
    pod = make_pod("p1", "node-0", ds=ds, deleting=True)
    r = _react(_dss(ds), "Pod", "ADDED", None, pod)
    assert r.observe == [(KEY, 0, 1)]
    assert r.enqueue_nodes == {KEY: {"node-0"}}


def test_add_pod_with_unresolvable_controller_ref_does_nothing() -> None:
    ds = make_ds(uid="u-current")
    stale_owner = make_ds(uid="u-gone")  # same name, other uid: a re-created DaemonSet
    pod = make_pod("p1", "node-0", ds=stale_owner)
    assert _nothing(_react(_dss(ds), "Pod", "ADDED", None, pod))


def test_add_pod_owned_by_another_kind_does_nothing() -> None:
    ds = make_ds()
    pod = make_pod("p1", "node-0", ds=ds)
    pod["metadata"]["ownerReferences"][0]["kind"] = "ReplicaSet"
    assert _nothing(_react(_dss(ds), "Pod", "ADDED", None, pod))


def test_add_pod_orphan_enqueues_all_matching_daemonsets() -> None:  # upstream TestAddPodOrphan
    ds1 = make_ds("foo1", uid="u1")
    ds2 = make_ds("foo2", uid="u2")
    ds3 = make_ds("foo3", uid="u3", labels={"color": "green"})
    pod = make_pod("p1", "node-0")
    r = _react(_dss(ds1, ds2, ds3), "Pod", "ADDED", None, pod)
    assert r.enqueue == {f"{NS}/foo1", f"{NS}/foo2"}
    assert r.observe == []


def test_add_pod_orphan_skips_empty_selector_and_other_namespaces() -> None:
    ds_all = make_ds("all", uid="u1", selector={})
    ds_other = make_ds("other", uid="u2")
    ds_other["metadata"]["namespace"] = "elsewhere"
    pod = make_pod("p1", "node-0")
    assert _nothing(_react(_dss(ds_all, ds_other), "Pod", "ADDED", None, pod))


def test_add_pod_orphan_without_labels_matches_nothing() -> None:
    ds = make_ds(selector={"matchExpressions": [{"key": "x", "operator": "DoesNotExist"}]})
    pod = make_pod("p1", "node-0", labels={})
    assert _nothing(_react(_dss(ds), "Pod", "ADDED", None, pod))


# ---- Pod update (§b.2) ---------------------------------------------------------------------------


def test_update_pod_same_resource_version_is_ignored() -> None:
    ds = make_ds()
    pod = _rv(make_pod("p1", "node-0", ds=ds), "5-0")
    assert _nothing(_react(_dss(ds), "Pod", "MODIFIED", pod, copy.deepcopy(pod)))


def test_update_pod_with_deletion_timestamp_runs_the_delete_handler() -> None:
    ds = make_ds()
    old = _rv(make_pod("p1", "node-0", ds=ds), "5-0")
    cur = _rv(make_pod("p1", "node-0", ds=ds, deleting=True), "6-0")
    r = _react(_dss(ds), "Pod", "MODIFIED", old, cur)
    assert r.observe == [(KEY, 0, 1)]
    assert r.enqueue_nodes == {KEY: {"node-0"}}


def test_update_pod_enqueues_owner_without_observing() -> None:
    ds = make_ds()
    old = _rv(make_pod("p1", "node-0", ds=ds), "5-0")
    cur = _rv(make_pod("p1", "node-0", ds=ds, phase="Failed"), "6-0")
    r = _react(_dss(ds), "Pod", "MODIFIED", old, cur)
    assert r.enqueue_nodes == {KEY: {"node-0"}} and r.enqueue == set()
    assert r.observe == [] and r.enqueue_after == {}


def test_update_pod_with_new_labels_enqueues_its_owner_for_a_full_sync() -> None:
    ds = make_ds()
    old = _rv(make_pod("p1", "node-0", ds=ds), "5-0")
    cur = _rv(make_pod("p1", "node-0", ds=ds, labels={"other": "x"}), "6-0")
    r = _react(_dss(ds), "Pod", "MODIFIED", old, cur)
    assert r.enqueue == {KEY}  # its claim may change: released, or adopted elsewhere


def test_update_pod_change_controller_ref_enqueues_old_and_new_owner() -> None:
    # upstream TestUpdatePodChangeControllerRef
    ds1, ds2 = make_ds("foo1", uid="u1"), make_ds("foo2", uid="u2")
    old = _rv(make_pod("p1", "node-0", ds=ds1), "5-0")
    cur = _rv(make_pod("p1", "node-0", ds=ds2), "6-0")
    r = _react(_dss(ds1, ds2), "Pod", "MODIFIED", old, cur)
    assert r.enqueue == {f"{NS}/foo1", f"{NS}/foo2"}


def test_update_pod_controller_ref_removed_enqueues_old_owner_and_matching() -> None:
    # upstream TestUpdatePodControllerRefRemoved (the orphan is matched by both)
    ds1 = make_ds("foo1", uid="u1")
    ds2 = make_ds("foo2", uid="u2", labels={"color": "green"})
    old = _rv(make_pod("p1", "node-0", ds=ds1), "5-0")
    cur = _rv(make_pod("p1", "node-0", labels={"color": "green"}), "6-0")
    r = _react(_dss(ds1, ds2), "Pod", "MODIFIED", old, cur)
    assert r.enqueue == {f"{NS}/foo1", f"{NS}/foo2"}


def test_update_pod_controller_ref_changed_to_unresolvable_enqueues_only_old_owner() -> None:
    ds1 = make_ds("foo1", uid="u1")
    gone = make_ds("gone", uid="u-gone")
    old = _rv(make_pod("p1", "node-0", ds=ds1), "5-0")
    cur = _rv(make_pod("p1", "node-0", ds=gone), "6-0")
    r = _react(_dss(ds1), "Pod", "MODIFIED", old, cur)
    assert r.enqueue == {f"{NS}/foo1"}


def test_update_pod_turning_ready_with_min_ready_seconds_enqueues_after_min_ready_plus_one() -> None:
    ds = make_ds(min_ready_seconds=7)
    old = _rv(_ready(make_pod("p1", "node-0", ds=ds), False), "5-0")
    cur = _rv(_ready(make_pod("p1", "node-0", ds=ds), True), "6-0")
    r = _react(_dss(ds), "Pod", "MODIFIED", old, cur)
    assert r.enqueue_nodes == {KEY: {"node-0"}}
    assert r.enqueue_after == {KEY: 8}


def test_update_pod_turning_ready_without_min_ready_seconds_is_not_delayed() -> None:
    ds = make_ds()
    old = _rv(_ready(make_pod("p1", "node-0", ds=ds), False), "5-0")
    cur = _rv(_ready(make_pod("p1", "node-0", ds=ds), True), "6-0")
    r = _react(_dss(ds), "Pod", "MODIFIED", old, cur)
    assert r.enqueue_nodes == {KEY: {"node-0"}} and r.enqueue_after == {}


def test_update_pod_staying_ready_with_min_ready_seconds_is_not_delayed() -> None:
    ds = make_ds(min_ready_seconds=7)
    old = _rv(_ready(make_pod("p1", "node-0", ds=ds), True), "5-0")
    cur = _rv(_ready(make_pod("p1", "node-0", ds=ds, phase="Running"), True), "6-0")
    cur["metadata"]["annotations"] = {"touched": "yes"}
    r = _react(_dss(ds), "Pod", "MODIFIED", old, cur)
    assert r.enqueue_nodes == {KEY: {"node-0"}} and r.enqueue_after == {}


def test_update_pod_orphan_same_labels_does_nothing() -> None:  # upstream TestUpdatePodOrphanSameLabels
    ds1, ds2 = make_ds("foo1", uid="u1"), make_ds("foo2", uid="u2")
    old = _rv(make_pod("p1", "node-0"), "5-0")
    cur = _rv(make_pod("p1", "node-0", phase="Pending"), "6-0")
    assert _nothing(_react(_dss(ds1, ds2), "Pod", "MODIFIED", old, cur))


def test_update_pod_orphan_with_new_labels_enqueues_matching() -> None:
    # upstream TestUpdatePodOrphanWithNewLabels
    ds1 = make_ds("foo1", uid="u1")
    ds2 = make_ds("foo2", uid="u2", labels={"color": "green"})
    old = _rv(make_pod("p1", "node-0", labels={"color": "red"}), "5-0")
    cur = _rv(make_pod("p1", "node-0", labels={"color": "green"}), "6-0")
    r = _react(_dss(ds1, ds2), "Pod", "MODIFIED", old, cur)
    assert r.enqueue == {f"{NS}/foo2"}
    assert r.observe == []


# ---- Pod delete (§b.2) ---------------------------------------------------------------------------


def test_delete_pod_observes_deletion_and_enqueues_owner() -> None:  # upstream TestDeletePod
    ds1, ds2 = make_ds("foo1", uid="u1"), make_ds("foo2", uid="u2")
    pod = make_pod("p1", "node-0", ds=ds1)
    r = _react(_dss(ds1, ds2), "Pod", "DELETED", pod, pod)
    assert r.observe == [(f"{NS}/foo1", 0, 1)]
    assert r.enqueue_nodes == {f"{NS}/foo1": {"node-0"}} and r.enqueue == set()


def test_delete_pod_orphan_is_ignored() -> None:  # upstream TestDeletePodOrphan
    ds = make_ds()
    pod = make_pod("p1", "node-0")
    assert _nothing(_react(_dss(ds), "Pod", "DELETED", pod, pod))


def test_delete_pod_with_unresolvable_owner_is_ignored() -> None:
    ds = make_ds(uid="u-current")
    pod = make_pod("p1", "node-0", ds=make_ds(uid="u-gone"))
    assert _nothing(_react(_dss(ds), "Pod", "DELETED", pod, pod))


def test_graceful_pod_delete_is_observed_twice() -> None:
    ds = make_ds()
    live = _rv(make_pod("p1", "node-0", ds=ds), "5-0")
    terminating = _rv(make_pod("p1", "node-0", ds=ds, deleting=True), "6-0")
    r = handlers.Reaction()
    handlers.react(r, _dss(ds), "Pod", "MODIFIED", live, terminating)
    handlers.react(r, _dss(ds), "Pod", "DELETED", terminating, terminating)
    assert r.observe == [(KEY, 0, 1), (KEY, 0, 1)]


# ---- Node (§b.3) ---------------------------------------------------------------------------------


def test_add_node_enqueues_daemonsets_that_should_run() -> None:
    runs = make_ds("runs", uid="u1")
    selective = make_ds("selective", uid="u2",
                        pod_spec={"nodeSelector": {"disk": "ssd"},
                                  "containers": [{"name": "c", "image": "i"}]})
    r = _react(_dss(runs, selective), "Node", "ADDED", None, make_node("n1"))
    assert r.enqueue_nodes == {f"{NS}/runs": {"n1"}} and r.enqueue == set()


def test_add_node_enqueues_daemonsets_with_a_pod_for_it() -> None:
    ds = make_ds(pod_spec={"nodeSelector": {"disk": "ssd"},
                           "containers": [{"name": "c", "image": "i"}]})
    pod = make_pod("p1", "n1", ds=ds)  # left from a node of the same name
    r = _react(_dss_with_pods([ds], [pod]), "Node", "ADDED", None, make_node("n1"))
    assert r.enqueue_nodes == {KEY: {"n1"}}


def test_add_node_with_no_schedule_taint_enqueues_nothing() -> None:
    ds = make_ds()
    node = make_node("n1", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}])
    assert _nothing(_react(_dss(ds), "Node", "ADDED", None, node))


def test_update_node_nothing_changed_does_not_enqueue() -> None:  # upstream TestUpdateNode
    ds = make_ds()
    old = _rv(make_node("n1"), "1-0")
    cur = _rv(make_node("n1"), "2-0")
    assert _nothing(_react(_dss(ds), "Node", "MODIFIED", old, cur))


def test_update_node_conditions_unschedulable_and_allocatable_are_ignored() -> None:
    ds = make_ds(pod_spec={"nodeSelector": {"disk": "ssd"},
                           "containers": [{"name": "c", "image": "i"}]})
    old = _rv(make_node("n1"), "1-0")
    cur = _rv(make_node("n1"), "2-0")
    cur["spec"]["unschedulable"] = True
    cur["status"] = {"conditions": [{"type": "Ready", "status": "False"}],
                     "allocatable": {"cpu": "1"}}
    cur["metadata"]["annotations"] = {"a": "b"}
    assert _nothing(_react(_dss(ds), "Node", "MODIFIED", old, cur))


def test_update_node_labels_changed_enqueues_daemonsets_whose_placement_changed() -> None:
    ssd = make_ds("ssd", uid="u1", pod_spec={"nodeSelector": {"disk": "ssd"},
                                             "containers": [{"name": "c", "image": "i"}]})
    everywhere = make_ds("everywhere", uid="u2")
    old = _rv(make_node("n1", labels={"color": "blue"}), "1-0")
    cur = _rv(make_node("n1", labels={"color": "blue", "disk": "ssd"}), "2-0")
    r = _react(_dss(ssd, everywhere), "Node", "MODIFIED", old, cur)
    assert r.enqueue_nodes == {f"{NS}/ssd": {"n1"}} and r.enqueue == set()


def test_update_node_taint_changes_should_continue_running_only() -> None:
    # NoSchedule → NoExecute: shouldRun stays false, shouldContinueRunning flips
    ds = make_ds()
    old = _rv(make_node("n1", taints=[{"key": "k", "effect": "NoSchedule"}]), "1-0")
    cur = _rv(make_node("n1", taints=[{"key": "k", "effect": "NoExecute"}]), "2-0")
    r = _react(_dss(ds), "Node", "MODIFIED", old, cur)
    assert r.enqueue_nodes == {KEY: {"n1"}}


def test_update_node_taint_change_with_the_same_decisions_does_not_enqueue() -> None:
    ds = make_ds()
    old = _rv(make_node("n1", taints=[{"key": "a", "effect": "NoSchedule"}]), "1-0")
    cur = _rv(make_node("n1", taints=[{"key": "b", "effect": "NoSchedule"}]), "2-0")
    assert _nothing(_react(_dss(ds), "Node", "MODIFIED", old, cur))


def test_update_node_tolerated_taint_does_not_enqueue() -> None:
    ds = make_ds(pod_spec={"tolerations": [{"operator": "Exists"}],
                           "containers": [{"name": "c", "image": "i"}]})
    old = _rv(make_node("n1"), "1-0")
    cur = _rv(make_node("n1", taints=[{"key": "k", "effect": "NoExecute"}]), "2-0")
    assert _nothing(_react(_dss(ds), "Node", "MODIFIED", old, cur))


def test_update_node_ready_or_unschedulable_enqueues_daemonsets_with_a_pod_there() -> None:
    ds, other = make_ds(), make_ds("other", uid="u-other")
    pods = [make_pod("p1", "n1", ds=ds), make_pod("p2", "n2", ds=other)]
    old = _rv(make_node("n1"), "1-0")
    not_ready = _rv(make_node("n1"), "2-0")
    not_ready["status"] = {"conditions": [{"type": "Ready", "status": "False"}]}
    r = _react(_dss_with_pods([ds, other], pods), "Node", "MODIFIED", old, not_ready)
    assert r.enqueue_nodes == {KEY: {"n1"}} and r.enqueue == set()
    cordoned = _rv(make_node("n1"), "3-0")
    cordoned["spec"]["unschedulable"] = True
    r = _react(_dss_with_pods([ds, other], pods), "Node", "MODIFIED", old, cordoned)
    assert r.enqueue_nodes == {KEY: {"n1"}}
    heartbeat = _rv(not_ready, "4-0")
    heartbeat["status"]["conditions"][0]["lastHeartbeatTime"] = ts(1_700_000_100)
    assert _nothing(_react(_dss_with_pods([ds, other], pods), "Node", "MODIFIED",
                           not_ready, heartbeat))


def test_delete_node_enqueues_daemonsets_that_ran_or_have_a_pod_there() -> None:
    # upstream has no handler (noticed on the next sync); here each DaemonSet that counted
    # the node syncs that node: its status no longer counts it
    runs = make_ds("runs", uid="u1")
    continues = make_ds("continues", uid="u2")  # NoSchedule only: shouldContinueRunning
    selective = make_ds("selective", uid="u3",
                        pod_spec={"nodeSelector": {"disk": "ssd"},
                                  "containers": [{"name": "c", "image": "i"}]})
    node = make_node("n1", taints=[{"key": "k", "effect": "NoSchedule"}])
    dss = _dss_with_pods([runs, continues, selective],
                         [make_pod("p1", "n1", ds=selective)])
    r = _react(dss, "Node", "DELETED", node, node)
    # NoSchedule: should not run, may continue, for the two without a selector
    assert r.enqueue_nodes == {f"{NS}/runs": {"n1"}, f"{NS}/continues": {"n1"},
                               f"{NS}/selective": {"n1"}}
    assert r.enqueue == set()


def test_delete_node_nobody_cared_about_does_nothing() -> None:
    ds = make_ds(pod_spec={"nodeSelector": {"disk": "ssd"},
                           "containers": [{"name": "c", "image": "i"}]})
    node = make_node("n1")
    assert _nothing(_react(_dss(ds), "Node", "DELETED", node, node))


def test_hints_leave_out_keys_enqueued_for_a_full_sync() -> None:
    r = handlers.Reaction()
    r.hint(KEY, "n2")
    r.hint(KEY, "n1")
    r.hint(f"{NS}/full", "n1")
    r.enqueue.add(f"{NS}/full")
    assert r.hints() == {KEY: ["n1", "n2"]}


# ---- ControllerRevision (§b.4) ------------------------------------------------------------------


def test_add_revision_owned_resolves_but_does_not_enqueue() -> None:
    ds = make_ds()
    cr = _revision("foo-abc", {"name": "simple-daemon"}, owner=ds)
    assert _nothing(_react(_dss(ds), "ControllerRevision", "ADDED", None, cr))


def test_add_revision_being_deleted_enqueues_owner() -> None:
    ds = make_ds()
    cr = _revision("foo-abc", {"name": "simple-daemon"}, owner=ds, deleting=True)
    r = _react(_dss(ds), "ControllerRevision", "ADDED", None, cr)
    assert r.enqueue == {KEY} and r.observe == []


def test_add_revision_orphan_enqueues_matching() -> None:
    ds1 = make_ds("foo1", uid="u1")
    ds2 = make_ds("foo2", uid="u2", labels={"color": "green"})
    cr = _revision("x-abc", dict(make_ds()["spec"]["template"]["metadata"]["labels"]))
    r = _react(_dss(ds1, ds2), "ControllerRevision", "ADDED", None, cr)
    assert r.enqueue == {f"{NS}/foo1"}


def test_add_revision_orphan_without_labels_matches_nothing() -> None:
    ds = make_ds(selector={"matchExpressions": [{"key": "x", "operator": "DoesNotExist"}]})
    cr = _revision("x-abc", {})
    assert _nothing(_react(_dss(ds), "ControllerRevision", "ADDED", None, cr))


def test_update_revision_same_resource_version_is_ignored() -> None:
    ds = make_ds()
    cr = _rv(_revision("foo-abc", {"name": "simple-daemon"}, owner=ds), "3-0")
    assert _nothing(_react(_dss(ds), "ControllerRevision", "MODIFIED", cr, copy.deepcopy(cr)))


def test_update_revision_owned_enqueues_owner() -> None:
    ds = make_ds()
    old = _rv(_revision("foo-abc", {"name": "simple-daemon"}, owner=ds), "3-0")
    cur = _rv(old, "4-0")
    cur["revision"] = 2
    r = _react(_dss(ds), "ControllerRevision", "MODIFIED", old, cur)
    assert r.enqueue == {KEY}


def test_update_revision_controller_ref_changed_enqueues_old_and_new_owner() -> None:
    ds1, ds2 = make_ds("foo1", uid="u1"), make_ds("foo2", uid="u2")
    old = _rv(_revision("r", {"name": "simple-daemon"}, owner=ds1), "3-0")
    cur = _rv(_revision("r", {"name": "simple-daemon"}, owner=ds2), "4-0")
    r = _react(_dss(ds1, ds2), "ControllerRevision", "MODIFIED", old, cur)
    assert r.enqueue == {f"{NS}/foo1", f"{NS}/foo2"}


def test_update_revision_released_enqueues_old_owner_and_matching() -> None:
    ds1 = make_ds("foo1", uid="u1")
    ds2 = make_ds("foo2", uid="u2", labels={"color": "green"})
    old = _rv(_revision("r", {"name": "simple-daemon"}, owner=ds1), "3-0")
    cur = _rv(_revision("r", {"color": "green"}), "4-0")
    r = _react(_dss(ds1, ds2), "ControllerRevision", "MODIFIED", old, cur)
    assert r.enqueue == {f"{NS}/foo1", f"{NS}/foo2"}


def test_update_revision_orphan_same_labels_does_nothing() -> None:
    ds = make_ds()
    old = _rv(_revision("r", {"name": "simple-daemon", "type": "production"}), "3-0")
    cur = _rv(old, "4-0")
    cur["revision"] = 5
    assert _nothing(_react(_dss(ds), "ControllerRevision", "MODIFIED", old, cur))


def test_update_revision_orphan_new_labels_enqueues_matching() -> None:
    ds = make_ds()
    old = _rv(_revision("r", {"color": "red"}), "3-0")
    cur = _rv(_revision("r", {"name": "simple-daemon", "type": "production"}), "4-0")
    r = _react(_dss(ds), "ControllerRevision", "MODIFIED", old, cur)
    assert r.enqueue == {KEY}


def test_delete_revision_enqueues_resolvable_owner() -> None:
    ds = make_ds()
    cr = _revision("foo-abc", {"name": "simple-daemon"}, owner=ds)
    r = _react(_dss(ds), "ControllerRevision", "DELETED", cr, cr)
    assert r.enqueue == {KEY} and r.observe == []


def test_delete_revision_orphan_is_ignored() -> None:
    ds = make_ds()
    cr = _revision("foo-abc", {"name": "simple-daemon", "type": "production"})
    assert _nothing(_react(_dss(ds), "ControllerRevision", "DELETED", cr, cr))


# ---- replayed entries (previous state unknown) -----------------------------------------------------


def test_replayed_pod_update_enqueues_owner_but_observes_nothing() -> None:
    ds = make_ds()
    pod = _rv(make_pod("p1", "node-0", ds=ds), "6-0")
    r = _react(_dss(ds), "Pod", "MODIFIED", None, pod)
    assert r.enqueue == {KEY} and r.observe == []


def test_replayed_node_update_enqueues_every_daemonset() -> None:
    ds = make_ds()
    node = _rv(make_node("n1", taints=[{"key": "k", "effect": "NoExecute"}]), "6-0")
    r = _react(_dss(ds), "Node", "MODIFIED", None, node)
    assert r.enqueue == {KEY}


def test_reaction_after_keeps_the_earliest_delay() -> None:
    r = handlers.Reaction()
    r.after(KEY, 8)
    r.after(KEY, 3)
    r.after(KEY, 5)
    assert r.enqueue_after == {KEY: 3}


def test_a_reaction_is_empty_only_when_it_asks_for_nothing() -> None:
    # the watcher writes no batch for an empty reaction: every kind of request must count
    assert handlers.Reaction().empty()
    asks = [
        lambda r: r.enqueue.add("ns/a"),
        lambda r: r.after("ns/a", 1.0),
        lambda r: r.hint("ns/a", "node-1"),
        lambda r: r.observe.append(("ns/a", 1, 0)),
        lambda r: r.delete_expectations.add("ns/a"),
    ]
    for ask in asks:
        reaction = handlers.Reaction()
        ask(reaction)
        assert not reaction.empty()
    assert len(asks) == len(handlers.Reaction.__dataclass_fields__)  # a new field: add it here
