"""The API's write rules (``shared.api.writes``), pure: each write marked with how far it is
trusted, the namespace defaulted once, each object validated once per write, the apply merge,
and a dry run that is the rules without the commit."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from shared.api import writes
from shared.model import errors, meta
from shared.model import validation as model_validation

Obj = dict[str, Any]
NOW = 1_700_000_000.0


def daemonset(name: str = "agent", image: str = "agent:1", **md: Any) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": name, **md},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": image}]}}}}


def stored(obj: Obj, rv: str = "5-0") -> Obj:
    out = writes.create(obj, NOW).obj
    out["metadata"]["resourceVersion"] = rv
    return out


@pytest.fixture
def validations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the objects ``validation.validate`` was called on."""
    seen: list[str] = []
    real = model_validation.validate

    def counting(obj: Any, old: Any = None) -> list[str]:
        seen.append(meta.name(obj))
        return real(obj, old)

    monkeypatch.setattr(model_validation, "validate", counting)
    return seen


@pytest.mark.parametrize(("kind", "given", "fallback", "expected"), [
    ("DaemonSet", None, "default", "default"),
    ("DaemonSet", "", "default", "default"),
    ("DaemonSet", "kube-system", "default", "kube-system"),
    ("DaemonSet", None, "team-a", "team-a"),  # the CLI's -n
    ("Pod", "x", "default", "x"),
    ("Node", "x", "default", ""),  # cluster-scoped: none
    ("Widget", None, "default", "default"),  # unknown: refused later under this key
])
def test_the_namespace_an_object_is_stored_in(kind: str, given: Any, fallback: str,
                                               expected: str) -> None:
    assert writes.namespace_for(kind, given, fallback) == expected


def test_a_create_defaults_the_namespace_and_the_key_agrees() -> None:
    ds = daemonset()
    assert writes.manifest_key(ds) == "default/agent"
    write = writes.create(ds, NOW)
    assert (write.mode, write.kind, write.key, write.trust) == \
        ("create", "DaemonSet", "default/agent", writes.Trust.USER)
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "namespace": "x"}}
    assert writes.create(node, NOW).key == "/n1" == writes.manifest_key(node)
    assert "namespace" not in ds["metadata"]  # the caller's object is not changed


def test_each_write_is_marked_with_how_far_it_is_trusted(validations: list[str]) -> None:
    current = stored(daemonset())
    validations.clear()
    pod = writes.stamp({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": "p", "namespace": "default"},
                        "spec": {"containers": [{"name": "c", "image": "x"}]}}, NOW)
    cases = [
        (writes.create(daemonset("new"), NOW), "create", writes.Trust.USER),
        (writes.update(daemonset(image="agent:2", namespace="default"), current), "update",
         writes.Trust.USER),
        (writes.controller_create(pod, ensure=True), "ensure", writes.Trust.CONTROLLER),
        (writes.metadata_update(pod, "3-0"), "update", writes.Trust.CONTROLLER),
        (writes.status_update({**current, "status": {"numberReady": 0}}, current), "update",
         writes.Trust.STATUS),
        (writes.system_status({**pod, "status": {"phase": "Running"}}, pod), "update",
         writes.Trust.STATUS),
        (writes.final_delete(pod), "delete", writes.Trust.CONTROLLER),
    ]
    assert [(w.mode, w.trust) for w, _m, _t in cases] == [(m, t) for _w, m, t in cases]
    # validated in full once per write: the two user writes and the controller's metadata
    # change; a stamped controller object, the status writes and a final delete not at all
    assert validations == ["new", "agent", "p"]


@pytest.mark.parametrize(("manifest", "verb", "generation"), [
    (daemonset(), "unchanged", 1),
    (daemonset(image="agent:2"), "configured", 2),
    (dict(daemonset(), metadata={"name": "agent", "labels": {"tier": "node"}}), "configured",
     1),  # labels only: the spec, and so the generation, stays
])
def test_apply_merges_the_manifest_over_the_stored_object_validating_it_once(
        validations: list[str], manifest: Obj, verb: str, generation: int) -> None:
    current = stored(writes.apply_manifest(daemonset()))  # applied before
    current["status"] = {"numberReady": 3}
    validations.clear()
    got, write = writes.apply(writes.apply_manifest(manifest), current, NOW)
    assert got == verb
    assert validations == ["agent"]
    if write is None:
        return
    assert write.expected == "5-0" and write.trust is writes.Trust.USER
    assert write.obj["metadata"]["generation"] == generation
    assert write.obj["metadata"]["uid"] == current["metadata"]["uid"]
    assert write.obj["status"] == {"numberReady": 3}  # status is not the manifest's
    assert meta.labels(write.obj) == meta.labels(manifest)
    assert meta.annotations(write.obj)[writes.TEMPLATE_GENERATION_ANNOTATION] == \
        str(generation)


def test_a_manifest_with_a_number_json_has_no_text_for_is_applied_without_the_annotation(
        ) -> None:
    """Where no rule checks it (a key the schema does not have), an infinite number leaves
    the manifest without the last-applied annotation, and with no annotations at all when
    it had none: created, not failing on them (a fuzzed manifest found it)."""
    manifest = daemonset()
    manifest["spec"]["updateStrategy"] = {"": float("inf")}
    applied = writes.apply_manifest(manifest)
    assert "annotations" not in applied["metadata"]
    verb, write = writes.apply(applied, None, NOW)
    assert verb == "created" and write is not None
    assert meta.annotations(write.obj) == {writes.TEMPLATE_GENERATION_ANNOTATION: "1"}


def test_apply_annotates_the_manifest_as_kubectl_apply_does() -> None:
    manifest = dict(daemonset(), metadata={
        "name": "agent", "annotations": {"note": "a <b> & c", writes.LAST_APPLIED_ANNOTATION: "x"}})
    got = meta.annotations(writes.apply_manifest(manifest))
    assert got["note"] == "a <b> & c"
    applied = got[writes.LAST_APPLIED_ANNOTATION]
    # Go's encoder: sorted keys, no spaces, HTML characters escaped, a newline at the end;
    # the annotation itself left out (not nested)
    assert applied.startswith('{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":'
                              '{"annotations":{"note":"a \\u003cb\\u003e \\u0026 c"},'
                              '"name":"agent"},"spec":')
    assert applied.endswith("}\n") and applied.count(writes.LAST_APPLIED_ANNOTATION) == 0
    plain = writes.apply_manifest(dict(daemonset(), metadata={"name": "agent"}))
    assert '"metadata":{"annotations":{},"name":"agent"}' in \
        meta.annotations(plain)[writes.LAST_APPLIED_ANNOTATION]
    # an object created without it (by kubectl create, or before) gets it on the next apply
    verb, write = writes.apply(writes.apply_manifest(daemonset()), stored(daemonset()), NOW)
    assert verb == "configured" and write is not None
    assert writes.LAST_APPLIED_ANNOTATION in meta.annotations(write.obj)


def test_apply_of_an_absent_object_creates_it() -> None:
    verb, write = writes.apply(writes.apply_manifest(daemonset()), None, NOW)
    assert verb == "created" and write is not None and write.mode == "create"


def test_apply_merge_drops_what_the_manifest_no_longer_names() -> None:
    current = stored(daemonset(), "5-0")
    current["metadata"]["annotations"]["note"] = "old"
    current["extra"] = {"x": 1}
    merged = writes.apply_merge(daemonset(), current)
    assert "extra" not in merged
    assert meta.annotations(merged) == {writes.TEMPLATE_GENERATION_ANNOTATION: "1"}
    assert current["extra"] == {"x": 1}  # a copy


def test_a_dry_run_is_the_rules_without_the_commit() -> None:
    current = stored(daemonset())
    # a create of what exists: AlreadyExists, as the commit would say
    with pytest.raises(errors.AlreadyExistsError):
        writes.dry_run(writes.create(daemonset(), NOW), current)
    created = writes.dry_run(writes.create(daemonset("new"), NOW), None)
    assert "resourceVersion" not in created["metadata"] and meta.uid(created)  # none yet
    updated = writes.dry_run(writes.update(daemonset(image="agent:2"), current), current)
    assert updated["metadata"]["resourceVersion"] == "5-0"
    assert updated["metadata"]["generation"] == 2
    # and a refused write is refused the same way
    bad = daemonset(image="")
    with pytest.raises(errors.InvalidError):
        writes.dry_run(writes.update(bad, current), current)


@pytest.mark.parametrize(("obj", "propagation", "grace", "mode", "added"), [
    ({"kind": "ControllerRevision"}, "background", None, "delete", {}),
    ({"kind": "ControllerRevision"}, "foreground", None, "update",
     {"finalizers": ["foregroundDeletion"], "deletionTimestamp": meta.format_time(NOW),
      "deletionGracePeriodSeconds": 0}),
    ({"kind": "ControllerRevision"}, "orphan", None, "update",
     {"finalizers": ["orphan"], "deletionTimestamp": meta.format_time(NOW),
      "deletionGracePeriodSeconds": 0}),
    ({"kind": "Pod", "spec": {"nodeName": "n1"}}, "background", None, "update",
     {"deletionGracePeriodSeconds": 30, "deletionTimestamp": meta.format_time(NOW + 30)}),
    ({"kind": "Pod", "spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 7}},
     "background", None, "update",
     {"deletionGracePeriodSeconds": 7, "deletionTimestamp": meta.format_time(NOW + 7)}),
    ({"kind": "Pod", "spec": {"nodeName": "n1"}}, "background", -3, "update",
     {"deletionGracePeriodSeconds": 1, "deletionTimestamp": meta.format_time(NOW + 1)}),
    ({"kind": "Pod", "spec": {"nodeName": "n1"}}, "background", 0, "delete", {}),
    ({"kind": "Pod", "spec": {}}, "background", 60, "delete", {}),  # not bound
    ({"kind": "Pod", "spec": {"nodeName": "n1"}, "status": {"phase": "Failed"}},
     "background", None, "delete", {}),
    ({"kind": "Pod", "spec": {}}, "foreground", 60, "update",  # not bound, held
     {"finalizers": ["foregroundDeletion"], "deletionTimestamp": meta.format_time(NOW),
      "deletionGracePeriodSeconds": 0}),
], ids=["background", "foreground", "orphan", "graceful-pod", "pod-own-grace",
        "negative-grace", "grace-0", "unbound-pod", "terminal-pod", "unbound-pod-held"])
def test_delete_follows_finalizers_propagation_and_grace(
        obj: Obj, propagation: str, grace: int | None, mode: str, added: Obj) -> None:
    """As upstream's BeforeDelete and markAsDeleting: a graceful delete's deletionTimestamp
    is when the pod should be gone (now plus its grace); an object held by finalizers is
    marked deleting now with no grace; either raises the generation."""
    current = copy.deepcopy(obj)
    current["metadata"] = {"name": "x", "namespace": "default", "uid": "u",
                           "resourceVersion": "7-0", "generation": 3}
    write = writes.delete(current, NOW, propagation, grace)
    assert write is not None and (write.mode, write.expected) == (mode, "7-0")
    if mode == "update":
        assert {k: v for k, v in write.obj["metadata"].items()
                if k not in current["metadata"]} == added
        assert write.obj["metadata"]["generation"] == 4
    assert current["metadata"] == {"name": "x", "namespace": "default", "uid": "u",
                                   "resourceVersion": "7-0", "generation": 3}  # as read
    if mode == "update":  # deleting it again: already terminating
        again = dict(write.obj)
        assert writes.delete(again, NOW + 5, propagation, grace) is None


def terminating_pod(grace: int, finalizers: tuple[str, ...] = ()) -> Obj:
    """A pod on a node, deleted at NOW with ``grace`` seconds (as stored then)."""
    pod = {"kind": "Pod", "metadata": {"name": "p", "namespace": "default", "uid": "u",
                                       "resourceVersion": "7-0", "generation": 1,
                                       "finalizers": list(finalizers)},
           "spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 30},
           "status": {"phase": "Running"}}
    write = writes.delete(pod, NOW, grace_seconds=grace)
    assert write is not None and write.mode.value == "update"
    return write.obj


def test_a_later_delete_only_shortens_the_grace_period_moving_the_deadline_back() -> None:
    """As BeforeDelete of a pod being deleted: a shorter period moves deletionTimestamp back
    by the difference; a longer or equal one, or none, changes nothing."""
    pod = terminating_pod(60)
    assert pod["metadata"]["deletionTimestamp"] == meta.format_time(NOW + 60)
    for longer in (None, 60, 90):
        assert writes.delete(pod, NOW + 10, grace_seconds=longer) is None
    shorter = writes.delete(pod, NOW + 10, grace_seconds=30)
    assert shorter is not None and shorter.mode.value == "update"
    md = shorter.obj["metadata"]
    assert (md["deletionTimestamp"], md["deletionGracePeriodSeconds"]) == \
        (meta.format_time(NOW + 30), 30)
    assert md["generation"] == 2  # raised when the deletion started, not again
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 60  # as read, unchanged


def test_a_shortened_grace_period_never_moves_the_deadline_into_the_past() -> None:
    """Since kubernetes#122646: a deadline that would be past is now, and a period asked
    for that is then over already is 1 s (0 still deletes)."""
    pod = terminating_pod(60)
    late = writes.delete(pod, NOW + 20, grace_seconds=5)
    assert late is not None
    md = late.obj["metadata"]
    assert (md["deletionTimestamp"], md["deletionGracePeriodSeconds"]) == \
        (meta.format_time(NOW + 20), 1)
    now = writes.delete(pod, NOW + 20, grace_seconds=0)
    assert now is not None and now.mode.value == "delete"


def test_a_pod_held_by_a_finalizer_is_shortened_to_no_grace_and_then_left_to_it() -> None:
    pod = terminating_pod(30, finalizers=("example.com/hold",))
    forced = writes.delete(pod, NOW + 3, grace_seconds=0)
    assert forced is not None and forced.mode.value == "update"
    md = forced.obj["metadata"]
    assert (md["deletionTimestamp"], md["deletionGracePeriodSeconds"]) == \
        (meta.format_time(NOW + 3), 0)
    assert writes.delete(forced.obj, NOW + 9) is None  # no grace left: its finalizer's


def test_a_daemonset_held_by_its_foreground_finalizer_keeps_its_deletion_time() -> None:
    """markAsDeleting: generation raised once, deletionTimestamp the first delete's."""
    ds = stored(daemonset())
    first = writes.delete(ds, NOW + 1, "foreground")
    assert first is not None
    md = first.obj["metadata"]
    assert (md["generation"], md["deletionTimestamp"], md["deletionGracePeriodSeconds"]) == \
        (2, meta.format_time(NOW + 1), 0)
    assert writes.delete(first.obj, NOW + 50, "foreground") is None


@pytest.mark.parametrize(("finalizers", "propagation", "after"), [
    (["foregroundDeletion"], "orphan", ["orphan"]),
    (["orphan"], "foreground", ["foregroundDeletion"]),
    (["orphan", "example.com/hold"], "foreground", ["example.com/hold", "foregroundDeletion"]),
    (["foregroundDeletion", "example.com/hold"], "background", ["example.com/hold"]),
    (["example.com/hold", "orphan"], "orphan", ["example.com/hold", "orphan"]),
    (["orphan", "example.com/hold"], None, ["orphan", "example.com/hold"]),
    ([], None, []),
    ([], "background", []),
])
def test_deletion_finalizers_follow_the_policy_asked_for_else_the_objects_own(
        finalizers: list[str], propagation: str | None, after: list[str]) -> None:
    """deletionFinalizersForGarbageCollection: the policy asked for decides both propagation
    finalizers (the other one removed, the one asked for added last); none asked, the
    object's own stays."""
    assert writes.deletion_finalizers(finalizers, propagation) == after


def test_a_second_delete_with_the_other_policy_swaps_the_propagation_finalizer() -> None:
    """An object a foreground deletion holds, deleted again with orphan, is held by orphan
    alone (and back), its deletion time the first delete's; asking for background takes
    the finalizer back and it goes."""
    ds = stored(daemonset(), rv="7-0")
    held = writes.delete(ds, NOW + 1, "foreground")
    assert held is not None
    orphaned = writes.delete(held.obj, NOW + 5, "orphan")
    assert orphaned is not None and (orphaned.mode.value, orphaned.expected) == ("update", "7-0")
    md = orphaned.obj["metadata"]
    assert (md["finalizers"], md["deletionTimestamp"], md["generation"]) == \
        (["orphan"], meta.format_time(NOW + 1), 2)
    model_validation.validate(orphaned.obj)  # never both: ValidateFinalizers refuses that
    again = writes.delete(orphaned.obj, NOW + 6, "foreground")
    assert again is not None and meta.finalizers(again.obj) == ["foregroundDeletion"]
    assert writes.delete(again.obj, NOW + 7) is None  # none asked: its own stays
    gone = writes.delete(again.obj, NOW + 8, "background")
    assert gone is not None and gone.mode.value == "delete"


def test_background_asked_takes_back_only_the_propagation_finalizer() -> None:
    ds = stored(daemonset(finalizers=["example.com/hold"]))
    held = writes.delete(ds, NOW, "orphan")
    assert held is not None and meta.finalizers(held.obj) == ["example.com/hold", "orphan"]
    left = writes.delete(held.obj, NOW + 3, "background")
    assert left is not None and left.mode.value == "update"
    assert meta.finalizers(left.obj) == ["example.com/hold"]
    assert left.obj["metadata"]["deletionTimestamp"] == meta.format_time(NOW)


def test_a_pods_pending_graceful_deletion_keeps_its_finalizers_whatever_is_asked() -> None:
    """Store.Delete: no finalizer is changed by DeleteOptions while a graceful deletion is
    pending (one not shortened)."""
    pod = terminating_pod(60, finalizers=("foregroundDeletion",))
    assert writes.delete(pod, NOW + 1, "orphan") is None
    shortened = writes.delete(pod, NOW + 1, "orphan", grace_seconds=10)
    assert shortened is not None and meta.finalizers(shortened.obj) == ["orphan"]


@pytest.mark.parametrize(("value", "text"), [
    (1.0, "1"), (0.5, "0.5"), (-2.0, "-2"), (1e20, "100000000000000000000"),
    (1e21, "1e+21"), (1.5e21, "1.5e+21"), (1e-6, "0.000001"), (1e-7, "1e-7"),
    (1.5e-10, "1.5e-10"), (0.00001, "0.00001"), (0.0, "0"),
])
def test_last_applied_writes_numbers_as_go_does(value: float, text: str) -> None:
    assert writes.go_float(value) == text
    manifest = {"kind": "X", "metadata": {"name": "x"}, "spec": {"n": value, "i": 3}}
    assert writes.last_applied(manifest) == \
        f'{{"kind":"X","metadata":{{"name":"x"}},"spec":{{"i":3,"n":{text}}}}}\n'


def test_an_update_that_changes_nothing_is_a_no_op_and_key_order_is_no_change() -> None:
    current = stored(writes.apply_manifest(daemonset()))
    reordered = copy.deepcopy(current)
    ctr = reordered["spec"]["template"]["spec"]["containers"][0]
    reordered["spec"]["template"]["spec"]["containers"][0] = dict(reversed(list(ctr.items())))
    new = writes.prepare_update(reordered, current)
    assert new["metadata"]["generation"] == current["metadata"]["generation"]
    assert writes.no_op(new, current)
    # field managers' times alone are no change either; their fields are
    managed = [{"manager": "m", "operation": "Update", "time": "2026-01-01T00:00:00Z",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {}}}]
    before = {**current, "metadata": {**current["metadata"], "managedFields": managed}}
    later = copy.deepcopy(before)
    later["metadata"]["managedFields"][0]["time"] = "2026-01-02T00:00:00Z"
    later["metadata"]["resourceVersion"] = "9-0"
    assert writes.no_op(later, before)
    later["metadata"]["managedFields"][0]["fieldsV1"] = {"f:spec": {}}
    assert not writes.no_op(later, before)
    changed = copy.deepcopy(current)
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "agent:9"
    assert not writes.no_op(writes.prepare_update(changed, current), current)


def test_apply_of_what_json_cannot_write_or_annotations_not_a_map_is_refused_by_validation() -> None:
    with pytest.raises(errors.BadRequestError, match=r"json: unsupported value: \+Inf"):
        writes.last_applied({"n": float("inf")})
    manifest = dict(daemonset(), spec={**daemonset()["spec"], "minReadySeconds": float("inf")})
    with pytest.raises(errors.InvalidError, match=r"spec\.minReadySeconds"):
        writes.apply(writes.apply_manifest(manifest), None, NOW)
    listed = writes.apply_manifest(dict(daemonset(), metadata={"name": "agent",
                                                               "annotations": ["a"]}))
    assert listed["metadata"]["annotations"] == ["a"]  # left for the validation to refuse
    with pytest.raises(errors.InvalidError, match=r"metadata\.annotations"):
        writes.apply(listed, None, NOW)


def test_a_namespace_is_created_active_with_its_finalizer_and_name_label() -> None:
    made = writes.prepare_create({"apiVersion": "v1", "kind": "Namespace",
                                  "metadata": {"name": "team", "namespace": "x",
                                               "labels": {"kubernetes.io/metadata.name": "y"}},
                                  "spec": {"finalizers": ["example.com/x"]},
                                  "status": {"phase": "Terminating"}}, NOW)
    assert "namespace" not in made["metadata"]
    assert made["metadata"]["labels"] == {"kubernetes.io/metadata.name": "team"}
    assert made["spec"] == {"finalizers": ["example.com/x", "kubernetes"]}
    assert made["status"] == {"phase": "Active"}
    # an update keeps its finalizers and phase (those are the server's) and its label
    changed = copy.deepcopy(made)
    changed["metadata"]["labels"] = {"team": "a"}
    changed["spec"], changed["status"] = {"finalizers": []}, {"phase": "Terminating"}
    updated = writes.prepare_update(changed, made)
    assert updated["spec"] == made["spec"] and updated["status"] == {"phase": "Active"}
    assert updated["metadata"]["labels"] == {"team": "a", "kubernetes.io/metadata.name": "team"}
    # deleting it marks it Terminating; its content goes first
    write = writes.delete(dict(made, metadata=dict(made["metadata"], resourceVersion="5-0")),
                          NOW)
    assert write is not None and write.mode.value == "update"
    assert write.obj["status"] == {"phase": "Terminating"}
    assert write.obj["metadata"]["deletionTimestamp"]
    assert writes.delete(write.obj, NOW) is None  # already terminating


@pytest.mark.parametrize("name", ["default", "kube-system", "kube-public", "kube-node-lease"])
def test_the_namespaces_every_cluster_has_cannot_be_deleted(name: str) -> None:
    with pytest.raises(errors.UndeletableError) as err:
        writes.check_deletable("Namespace", "/" + name)
    assert str(err.value) == f'namespaces "{name}" is forbidden: this namespace may not be deleted'
    writes.check_deletable("Namespace", "/team")
    writes.check_deletable("Pod", "default/kube-system")


def test_a_namespace_name_is_a_dns_label_and_its_finalizers_qualified() -> None:
    bad = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a.b"},
           "spec": {"finalizers": ["custom"]}, "status": {"phase": "Gone"}}
    problems = model_validation.validate(bad)
    assert problems == [
        'metadata.name: Invalid value: "a.b": must not contain dots',  # a label, as upstream
        'spec.finalizers: Invalid value: "custom": name is neither a standard finalizer name '
        "nor is it fully qualified",
        'status.phase: Unsupported value: "Gone": supported values: "Active", "Terminating"']


def test_a_namespace_being_deleted_goes_when_finalize_leaves_it_no_finalizer() -> None:
    made = writes.prepare_create({"apiVersion": "v1", "kind": "Namespace",
                                  "metadata": {"name": "team"}}, NOW)
    made["metadata"]["resourceVersion"] = "5-0"
    marked = writes.delete(made, NOW)
    assert marked is not None
    going = dict(marked.obj, metadata=dict(marked.obj["metadata"], resourceVersion="6-0"))
    labelled = copy.deepcopy(going)
    labelled["metadata"]["labels"]["a"] = "b"
    assert writes.update(labelled, going).mode.value == "update"  # still waits for its content
    kept = writes.finalize_update({**going, "spec": {"finalizers": ["example.com/x"]}}, going)
    assert kept.mode.value == "update" and kept.obj["spec"] == {"finalizers": ["example.com/x"]}
    assert kept.obj["status"] == {"phase": "Terminating"}
    assert writes.finalize_update({**going, "spec": {"finalizers": []}}, going).mode.value \
        == "delete"
    with pytest.raises(errors.ConflictError):
        writes.finalize_update(dict(going, metadata=dict(going["metadata"],
                                                         resourceVersion="1-0")), going)


@pytest.mark.parametrize(("obj", "status", "given"), [
    ({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}},
     {"capacity": {"cpu": "4"}}, {"capacity": {"cpu": "8"}}),
    ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
      "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]}},
     {"phase": "Running", "podIP": "10.0.0.1"}, {"phase": "Running", "podIP": "10.0.0.9"}),
], ids=["node", "pod"])
def test_an_update_of_a_pod_or_node_keeps_its_status_which_status_writes_change(
        obj: Obj, status: Obj, given: Obj) -> None:
    # PrepareForUpdate of pkg/registry/core/{pod,node}/strategy.go: newX.Status = oldX.Status
    current = stored(obj)
    current["status"] = status
    new = writes.prepare_update({**copy.deepcopy(current), "status": given}, current)
    assert new["status"] == status and writes.no_op(new, current)
    labelled = copy.deepcopy(current)
    labelled["metadata"]["labels"] = {"a": "b"}
    labelled["status"] = given
    assert writes.update(labelled, current).obj["status"] == status  # the rest still changes
    # the /status subresource and the node agent's own writes still write it
    assert writes.status_update({**current, "status": given}, current).obj["status"] == given
    assert writes.system_status({"status": given}, current).obj["status"] == given


def test_a_replace_naming_a_stale_uid_is_a_conflict_and_a_patched_uid_immutable() -> None:
    # rest.DefaultUpdatedObjectInfo makes a PUT's uid a precondition; storage.Preconditions
    # fails it as an invalid object and InterpretUpdateError answers Conflict
    current = stored(daemonset(namespace="default"))
    stale = copy.deepcopy(current)
    stale["metadata"]["uid"] = "old-uid"
    del stale["metadata"]["resourceVersion"]
    with pytest.raises(errors.ConflictError) as err:
        writes.update(stale, current)
    assert str(err.value) == (
        'Operation cannot be fulfilled on daemonsets "agent": StorageError: invalid object, '
        "Code: 4, Key: /registry/daemonsets/default/agent, ResourceVersion: 0, "
        "AdditionalErrorMsg: Precondition failed: UID in precondition: old-uid, "
        f"UID in object meta: {meta.uid(current)}")
    # a patched object names no precondition: its other uid is refused as immutable
    with pytest.raises(errors.InvalidError) as invalid:
        writes.update(stale, current, replace=False)
    assert invalid.value.causes == ['metadata.uid: Invalid value: "old-uid": field is immutable']
    # no uid, or the stored one: the update goes on
    del stale["metadata"]["uid"]
    assert meta.uid(writes.update(stale, current).obj) == meta.uid(current)
    assert writes.storage_key("Node", "/node-1") == "/registry/minions/node-1"
