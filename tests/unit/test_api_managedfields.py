"""Server-side apply's field ownership (shared.api.managedfields): the field sets and their
FieldsV1, the merge, conflicts with upstream's wording, force, and ordinary writes taking
the fields they change."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from shared.api import managedfields as mf
from shared.api import schema

ROOT = schema.kind_field("apps/v1", "DaemonSet")
Obj = dict[str, Any]


def _ds(image: str = "nginx:1", **spec: Any) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "x", "namespace": "default", "labels": {"a": "1"}},
            "spec": {"selector": {"matchLabels": {"app": "x"}},
                     "template": {"metadata": {"labels": {"app": "x"}},
                                  "spec": {"containers": [{"name": "c", "image": image,
                                                           "ports": [{"containerPort": 80}]}],
                                           "tolerations": [{"operator": "Exists"}]}},
                     **spec}}


def _stored(result: mf.Result) -> Obj:
    obj = copy.deepcopy(result.obj)
    obj["metadata"]["managedFields"] = mf.encode(result.entries, "apps/v1")
    return obj


def test_the_field_set_of_an_apply_is_fieldsv1_as_upstream_writes_it() -> None:
    created = mf.apply(None, _ds(), "kubectl", False, ROOT, "2026-01-01T00:00:00Z")
    [entry] = mf.encode(created.entries, "apps/v1")
    assert {k: entry[k] for k in ("manager", "operation", "apiVersion", "fieldsType")} == {
        "manager": "kubectl", "operation": "Apply", "apiVersion": "apps/v1",
        "fieldsType": "FieldsV1"}
    spec = entry["fieldsV1"]["f:spec"]
    assert spec["f:selector"] == {}  # an atomic map is one leaf
    assert spec["f:template"]["f:spec"]["f:tolerations"] == {}  # an atomic list too
    item = spec["f:template"]["f:spec"]["f:containers"]['k:{"name":"c"}']
    assert list(item) == [".", "f:image", "f:name", "f:ports"]
    assert item["f:ports"] == {'k:{"containerPort":80,"protocol":"TCP"}': {
        ".": {}, "f:containerPort": {}}}
    assert entry["fieldsV1"]["f:metadata"] == {"f:labels": {"f:a": {}}}
    assert mf.decode([entry])[0].fields == created.entries[0].fields


def test_an_apply_changing_anothers_field_is_a_conflict_unless_forced() -> None:
    live = _stored(mf.apply(None, _ds(), "a", False, ROOT, "t1"))
    with pytest.raises(mf.ConflictError) as refused:
        mf.apply(live, _ds("nginx:2"), "b", False, ROOT, "t2")
    assert str(refused.value) == ('Apply failed with 1 conflict: conflict with "a": '
                                  '.spec.template.spec.containers[name="c"].image')
    assert refused.value.causes == [{"type": "FieldManagerConflict",
                                     "message": 'conflict with "a"',
                                     "field": '.spec.template.spec.containers[name="c"].image'}]
    forced = mf.apply(live, _ds("nginx:2"), "b", True, ROOT, "t2")
    assert forced.obj["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:2"
    owners = {e.manager.name: e.fields for e in forced.entries}
    image = ("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"c"}', "f:image")
    assert image in owners["b"] and image not in owners["a"]


def test_the_same_value_is_shared_and_several_conflicts_are_listed_by_manager() -> None:
    live = _stored(mf.apply(None, _ds(), "a", False, ROOT, "t1"))
    shared = mf.apply(live, _ds(), "b", False, ROOT, "t2")
    assert {e.manager.name for e in shared.entries} == {"a", "b"}
    with pytest.raises(mf.ConflictError) as refused:
        mf.apply(live, _ds("nginx:2", minReadySeconds=3, revisionHistoryLimit=4)
                 | {"metadata": {"name": "x", "labels": {"a": "2"}}}, "b", False, ROOT, "t2")
    assert str(refused.value) == (
        'Apply failed with 2 conflicts: conflicts with "a":\n- .metadata.labels.a\n'
        '- .spec.template.spec.containers[name="c"].image')


def test_an_applier_drops_what_it_no_longer_applies_unless_another_owns_it() -> None:
    live = _stored(mf.apply(None, _ds(), "a", False, ROOT, "t1"))
    without = _ds()
    del without["metadata"]["labels"]
    gone = mf.apply(live, without, "a", False, ROOT, "t2")
    assert "labels" not in gone.obj["metadata"]  # emptied, it goes: null to upstream
    both = _stored(mf.apply(live, _ds(), "b", False, ROOT, "t2"))
    kept = mf.apply(both, without, "a", False, ROOT, "t3")
    assert kept.obj["metadata"]["labels"] == {"a": "1"}


def _pod_spec(**spec: Any) -> Obj:
    """A DaemonSet whose template's pod spec is ``spec``."""
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "x", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "x"}},
                     "template": {"metadata": {"labels": {"app": "x"}}, "spec": spec}}}


def test_an_applier_drops_list_items_it_no_longer_applies_whole() -> None:
    both = [{"name": "c", "image": "nginx"}, {"name": "d", "image": "nginx"}]
    live = _stored(mf.apply(None, _pod_spec(containers=both, volumes=[
        {"name": "v", "emptyDir": {}}]), "kubectl", False, ROOT, "t1"))
    one = mf.apply(live, _pod_spec(containers=both[:1]), "kubectl", False, ROOT, "t2")
    assert one.obj["spec"]["template"]["spec"] == {"containers": both[:1]}
    [entry] = one.entries
    assert not any('k:{"name":"d"}' in p or "f:volumes" in p for p in entry.fields)

    env = [{**both[0], "env": [{"name": "A", "value": "1"}]}]
    live = _stored(mf.apply(None, _pod_spec(containers=env), "kubectl", False, ROOT, "t1"))
    for dropped in ([{**both[0], "env": []}], both[:1]):
        gone = mf.apply(live, _pod_spec(containers=dropped), "kubectl", False, ROOT, "t2")
        assert gone.obj["spec"]["template"]["spec"]["containers"] == both[:1]


def test_a_list_item_another_applier_applies_stays_when_one_drops_it() -> None:
    both = [{"name": "c", "image": "nginx"}, {"name": "d", "image": "nginx"}]
    volumes = [{"name": "v", "emptyDir": {}}, {"name": "w", "emptyDir": {}}]
    live = _stored(mf.apply(None, _pod_spec(containers=both, volumes=volumes), "a", False,
                            ROOT, "t1"))
    shared = _stored(mf.apply(live, _pod_spec(containers=both[1:]), "b", False, ROOT, "t2"))
    kept = mf.apply(shared, _pod_spec(containers=both[:1], volumes=volumes[1:]), "a", False,
                    ROOT, "t3")
    assert kept.obj["spec"]["template"]["spec"] == {"containers": both,
                                                    "volumes": volumes[1:]}
    owners = {e.manager.name: e.fields for e in kept.entries}
    assert not any('k:{"name":"d"}' in p for p in owners["a"])
    assert not any('k:{"name":"c"}' in p for p in owners["b"])


def test_one_empty_managed_fields_entry_clears_them_and_invalid_ones_keep_the_live() -> None:
    live = _stored(mf.apply(None, _ds(), "kubectl", False, ROOT, "t1"))
    reset = copy.deepcopy(live)
    reset["metadata"]["managedFields"] = [{}]
    assert mf.update(live, reset, "kubectl-patch", ROOT, "t2") == []
    reset["metadata"]["labels"] = {"a": "2"}
    [entry] = mf.update(live, reset, "kubectl-patch", ROOT, "t2")
    assert entry.manager.name == "kubectl-patch"
    assert entry.fields == {("f:metadata", "f:labels", "f:a")}

    invalid = copy.deepcopy(live)
    invalid["metadata"]["managedFields"] = [{"manager": "x", "operation": "None"}]
    assert mf.update(live, invalid, "kubectl-patch", ROOT, "t2") == mf.decode(
        live["metadata"]["managedFields"])


def test_an_ordinary_write_takes_the_fields_it_changes_from_everyone() -> None:
    live = _stored(mf.apply(None, _ds(), "kubectl", False, ROOT, "t1"))
    new = copy.deepcopy(live)
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:2"
    entries = {e.manager: e.fields for e in mf.update(live, new, "kubectl-set", ROOT, "t2")}
    image = ("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"c"}', "f:image")
    assert entries[mf.Manager("kubectl-set", "Update", "apps/v1")] == {image}
    assert image not in entries[mf.Manager("kubectl", "Apply")]


def test_an_object_without_managed_fields_is_before_first_apply() -> None:
    with pytest.raises(mf.ConflictError, match=re.escape(
            'conflict with "before-first-apply" using apps/v1: .spec.template.spec.containers')):
        mf.apply(_ds(), _ds("nginx:2"), "kubectl", False, ROOT, "t1")


def test_the_managers_name_comes_from_field_manager_or_the_user_agent() -> None:
    assert mf.manager_of("", "kubectl/v1.32.4 (linux/amd64)") == "kubectl"
    assert mf.manager_of("mine", "kubectl/v1.32.4") == "mine"
    assert mf.validate_manager(None, True) == ("fieldManager: Required value: is required "
                                               "for apply patch")
    assert mf.validate_manager("x" * 129, False) is not None
    with pytest.raises(mf.ApplyError, match='omits key field "name"'):
        mf.apply(None, _ds() | {"spec": {"template": {"spec": {"containers": [{}]}}}},
                 "a", False, ROOT, "t")
