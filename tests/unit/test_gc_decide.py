"""The garbage collector's pure decisions (services.gc.decide)."""

from __future__ import annotations

from typing import Any

from services.gc import decide

Obj = dict[str, Any]
T1, T2 = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z"


def ref(uid: str, kind: str = "DaemonSet", block: bool = True) -> Obj:
    return {"apiVersion": "apps/v1", "kind": kind, "name": f"n-{uid}", "uid": uid,
            "controller": True, "blockOwnerDeletion": block}


def pod(name: str, *refs: Obj, node: str | None = "node-1", deleting: bool = False) -> Obj:
    md: Obj = {"name": name, "namespace": "default", "uid": f"pod-{name}"}
    if refs:
        md["ownerReferences"] = list(refs)
    if deleting:
        md["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    spec: Obj = {"containers": [{"name": "c", "image": "x"}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec}


def revision(name: str, *refs: Obj, deleting: bool = False) -> Obj:
    obj = pod(name, *refs, deleting=deleting)
    obj["kind"] = "ControllerRevision"
    return obj


def test_dependent_of_a_gone_owner_is_doomed() -> None:
    assert decide.doomed_by_owners(pod("a", ref("u1")), lambda r: True)
    assert not decide.doomed_by_owners(pod("a", ref("u1")), lambda r: False)


def test_orphan_and_foreign_owned_dependents_are_never_doomed() -> None:
    assert not decide.doomed_by_owners(pod("a"), lambda r: True)
    assert not decide.doomed_by_owners(pod("a", ref("u1"), ref("rs", "ReplicaSet")),
                                       lambda r: True)


def test_dependent_with_one_live_owner_of_two_is_kept() -> None:
    dep = pod("a", ref("u1"), ref("u2", block=False))
    assert not decide.doomed_by_owners(dep, lambda r: r["uid"] == "u1")


def test_owner_is_judged_by_uid_the_callback_receives_each_reference() -> None:
    seen: list[str] = []
    decide.doomed_by_owners(pod("a", ref("u1"), ref("u2")), lambda r: seen.append(r["uid"]) or True)
    assert seen == ["u1", "u2"]


def test_terminating_pod_still_counts_but_terminating_revision_is_done() -> None:
    assert decide.doomed_by_owners(pod("a", ref("u1"), deleting=True), lambda r: True)
    assert not decide.doomed_by_owners(revision("r", ref("u1"), deleting=True), lambda r: True)


def test_without_owner_drops_only_that_reference_and_leaves_the_input() -> None:
    dep = pod("a", ref("u1"), ref("u2"))
    out = decide.without_owner(dep, "u1")
    assert [r["uid"] for r in out["metadata"]["ownerReferences"]] == ["u2"]
    assert len(dep["metadata"]["ownerReferences"]) == 2
    assert "ownerReferences" not in decide.without_owner(pod("b", ref("u1")), "u1")["metadata"]


def test_foreground_deletes_live_dependents_and_waits_for_blocking_ones() -> None:
    live, terminating = pod("a", ref("u1")), pod("b", ref("u1"), deleting=True)
    to_delete, finished = decide.foreground_step([live, terminating], "u1")
    assert to_delete == [live] and not finished
    assert decide.foreground_step([], "u1") == ([], True)


def test_foreground_does_not_wait_for_non_blocking_dependents() -> None:
    loose = pod("a", ref("u1", block=False))
    assert decide.foreground_step([loose], "u1") == ([loose], True)


def test_pod_gc_takes_bound_pods_of_missing_nodes_only() -> None:
    on_gone, on_live, unbound = pod("a", node="gone"), pod("b", node="live"), pod("c", node=None)
    assert decide.on_missing_nodes([on_gone, on_live, unbound], lambda n: n == "live") == [on_gone]


def test_events_expire_by_last_timestamp_else_creation() -> None:
    old = {"kind": "Event", "metadata": {"name": "o"}, "lastTimestamp": "2024-01-01T00:00:00Z"}
    new = {"kind": "Event", "metadata": {"name": "n", "creationTimestamp": "2024-01-01T02:00:00Z"}}
    cutoff = 1704067200.0 + 3600  # 2024-01-01T01:00:00Z
    assert decide.expired_events([old, new], cutoff) == [old]


def _member(kind: str, name: str, deleting: bool = False) -> Obj:
    md: Obj = {"name": name, "namespace": "team"}
    if deleting:
        md["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"kind": kind, "metadata": md}


def test_a_namespace_being_deleted_loses_its_daemonsets_first_then_the_rest_then_itself() -> None:
    ds, pod, rev = _member("DaemonSet", "a"), _member("Pod", "a-1"), \
        _member("ControllerRevision", "a-r")
    assert decide.namespace_step([pod, ds, rev]) == ([ds], False)
    going = _member("DaemonSet", "a", deleting=True)
    assert decide.namespace_step([pod, going, rev]) == ([pod, rev], False)
    owned = dict(pod, metadata=dict(pod["metadata"], ownerReferences=[ref("u1")]))
    event = _member("Event", "a.1")
    # what a DaemonSet owns goes by its cascade
    assert decide.namespace_step([owned, going, event]) == ([event], False)
    assert decide.namespace_step([owned]) == ([], False)
    assert decide.namespace_step([_member("Pod", "a-1", deleting=True)]) == ([], False)
    assert decide.namespace_step([]) == ([], True)


def test_a_namespace_being_deleted_reports_what_is_left_as_upstreams_conditions() -> None:
    held = _member("Pod", "a-1", deleting=True)
    held["metadata"]["finalizers"] = ["example.com/hold"]
    first = decide.namespace_conditions([held, _member("Event", "e")], None, T1)
    assert first is not None
    by_type = {c["type"]: c for c in first}
    assert list(by_type) == list(decide.NAMESPACE_CONDITIONS)
    assert by_type["NamespaceContentRemaining"] == {
        "type": "NamespaceContentRemaining", "status": "True", "lastTransitionTime": T1,
        "reason": "SomeResourcesRemain",
        "message": "Some resources are remaining: events. has 1 resource instances, "
                   "pods. has 1 resource instances"}
    assert by_type["NamespaceFinalizersRemaining"]["message"] == \
        "Some finalizers are remaining: example.com/hold in 1 resource instances"
    assert by_type["NamespaceDeletionContentFailure"]["status"] == "False"
    assert decide.namespace_conditions([held, _member("Event", "e")], first, T2) is None
    # the event gone: the message changes, the time does not (the status is the same)
    second = decide.namespace_conditions([held], first, T2)
    assert second is not None
    remaining = {c["type"]: c for c in second}["NamespaceContentRemaining"]
    assert remaining["message"] == "Some resources are remaining: pods. has 1 resource instances"
    assert remaining["lastTransitionTime"] == T1
    done = {c["type"]: c for c in decide.namespace_conditions([], second, T2) or []}
    assert done["NamespaceContentRemaining"] == {
        "type": "NamespaceContentRemaining", "status": "False", "lastTransitionTime": T2,
        "reason": "ContentRemoved", "message": "All content successfully removed"}
