"""shared.api.patch: JSON patch, JSON merge patch and strategic merge patch as the API server
applies them. The strategic cases carry the essence of upstream's strategicpatch tests on real
kinds, the patches kubectl apply, set image and rollout undo send, and upstream's own custom
cases (TestCustomStrategicMergePatch) on its MergeItem test type."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from shared.api import decode, patch, schema
from shared.api.patch import PatchError, apply_patch

SMP = patch.STRATEGIC_MERGE_PATCH


def _ds(containers: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    pod_spec: dict[str, Any] = {"containers": containers or [
        {"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]}
    pod_spec.update(spec)
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "ds", "namespace": "default", "labels": {"app": "x"},
                         "finalizers": ["f1", "f2"]},
            "spec": {"selector": {"matchLabels": {"app": "x"}},
                     "template": {"metadata": {"labels": {"app": "x"}}, "spec": pod_spec}}}


def _pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = obj["spec"]["template"]["spec"]
    return spec


def _smp(current: dict[str, Any], body: Any) -> dict[str, Any]:
    return apply_patch(current, body, SMP, "DaemonSet")


def _tpl(pod_spec: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"template": {"spec": pod_spec}}}


# ---- strategic merge: table ------------------------------------------------------------

CASES: list[tuple[str, dict[str, Any], dict[str, Any], Any]] = [
    # (name, current pod spec, patch of the pod spec, expected pod spec or a check)
    ("map fields merge and null deletes",
     {"containers": [{"name": "a", "image": "a:1"}], "nodeSelector": {"x": "1", "y": "2"},
      "hostNetwork": True},
     {"nodeSelector": {"x": None, "z": "3"}, "hostNetwork": None},
     {"containers": [{"name": "a", "image": "a:1"}], "nodeSelector": {"y": "2", "z": "3"}}),
    ("set image: a merge list merges the item with the same merge key",
     {"containers": [{"name": "a", "image": "a:1", "args": ["x"]},
                     {"name": "b", "image": "b:1"}]},
     {"containers": [{"name": "b", "image": "b:2"}]},
     {"containers": [{"name": "a", "image": "a:1", "args": ["x"]},
                     {"name": "b", "image": "b:2"}]}),
    # upstream's order rule puts a patch item the live list does not know before the live
    # items it cannot be compared with: kubectl patch adding a container prepends it
    ("a new item of a merge list comes first",
     {"containers": [{"name": "a", "image": "a:1"}]},
     {"containers": [{"name": "c", "image": "c:1"}]},
     {"containers": [{"name": "c", "image": "c:1"}, {"name": "a", "image": "a:1"}]}),
    ("a list without merge strategy is replaced",
     {"containers": [{"name": "a", "image": "a:1", "args": ["1", "2"]}],
      "tolerations": [{"key": "k1", "operator": "Exists"}]},
     {"containers": [{"name": "a", "args": ["3"]}], "tolerations": [{"key": "k2"}]},
     {"containers": [{"name": "a", "image": "a:1", "args": ["3"]}],
      "tolerations": [{"key": "k2"}]}),
    ("$patch: delete removes the item with that merge key",
     {"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]},
     {"containers": [{"name": "a", "$patch": "delete"}]},
     {"containers": [{"name": "b", "image": "b:1"}]}),
    ("$patch: replace on a list replaces it with the patch's items",
     {"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]},
     {"containers": [{"name": "c", "image": "c:1"}, {"$patch": "replace"}]},
     {"containers": [{"name": "c", "image": "c:1"}]}),
    ("$patch: replace on a map replaces the map",
     {"containers": [{"name": "a", "image": "a:1"}], "nodeSelector": {"x": "1", "y": "2"}},
     {"nodeSelector": {"$patch": "replace", "z": "3"}},
     {"containers": [{"name": "a", "image": "a:1"}], "nodeSelector": {"z": "3"}}),
    ("$patch: delete on a map empties it",
     {"containers": [{"name": "a", "image": "a:1"}], "nodeSelector": {"x": "1"}},
     {"nodeSelector": {"$patch": "delete"}},
     {"containers": [{"name": "a", "image": "a:1"}], "nodeSelector": {}}),
    ("$patch: merge on a map is the default merge",
     {"containers": [{"name": "a", "image": "a:1"}], "nodeSelector": {"x": "1"}},
     {"nodeSelector": {"$patch": "merge", "y": "2"}},
     {"containers": [{"name": "a", "image": "a:1"}], "nodeSelector": {"x": "1", "y": "2"}}),
    ("$setElementOrder orders the merged list (patch items by it, others by the live list)",
     {"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"},
                     {"name": "c", "image": "c:1"}]},
     {"$setElementOrder/containers": [{"name": "c"}, {"name": "a"}, {"name": "b"}],
      "containers": [{"name": "c", "image": "c:2"}]},
     {"containers": [{"name": "c", "image": "c:2"}, {"name": "a", "image": "a:1"},
                     {"name": "b", "image": "b:1"}]}),
    ("kubectl apply: $setElementOrder with a deletion, a change and an addition",
     {"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]},
     {"$setElementOrder/containers": [{"name": "b"}, {"name": "d"}],
      "containers": [{"name": "b", "image": "b:2"}, {"name": "d", "image": "d:1"},
                     {"$patch": "delete", "name": "a"}]},
     {"containers": [{"name": "b", "image": "b:2"}, {"name": "d", "image": "d:1"}]}),
    ("a new item lands after the live item it follows in the patch",
     {"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"},
                     {"name": "c", "image": "c:1"}]},
     {"containers": [{"name": "b", "image": "b:2"}, {"name": "d", "image": "d:1"}]},
     {"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:2"},
                     {"name": "d", "image": "d:1"}, {"name": "c", "image": "c:1"}]}),
    ("nested merge lists: env of a container by name, ports by containerPort",
     {"containers": [{"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}],
                      "ports": [{"containerPort": 80, "name": "http"}]}]},
     {"containers": [{"name": "a", "env": [{"name": "Y", "value": "2"}],
                      "ports": [{"containerPort": 80, "hostPort": 8080}]}]},
     {"containers": [{"name": "a", "image": "a:1",
                      "env": [{"name": "Y", "value": "2"}, {"name": "X", "value": "1"}],
                      "ports": [{"containerPort": 80, "name": "http", "hostPort": 8080}]}]}),
    ("$retainKeys drops the keys a volume no longer names (hostPath → emptyDir)",
     {"containers": [{"name": "a", "image": "a:1"}],
      "volumes": [{"name": "v", "hostPath": {"path": "/x"}}]},
     {"volumes": [{"name": "v", "$retainKeys": ["emptyDir", "name"], "emptyDir": {}}]},
     {"containers": [{"name": "a", "image": "a:1"}], "volumes": [{"name": "v", "emptyDir": {}}]}),
    ("a field absent from the live object takes the patch, directives and nulls dropped",
     {"containers": [{"name": "a", "image": "a:1"}]},
     {"volumes": [{"name": "v", "emptyDir": {"medium": None}}, {"name": "w", "$patch": "delete"}],
      "dnsConfig": {"$patch": "delete"}},
     {"containers": [{"name": "a", "image": "a:1"}], "volumes": [{"name": "v", "emptyDir": {}}]}),
]


@pytest.mark.parametrize(("name", "live", "body", "want"), CASES, ids=[c[0] for c in CASES])
def test_strategic_merge_patch(name: str, live: dict[str, Any], body: dict[str, Any],
                               want: dict[str, Any]) -> None:
    current = _ds(**{k: v for k, v in live.items() if k != "containers"},
                  containers=live["containers"])
    got = _smp(current, _tpl(body))
    assert _pod_spec(got) == want


def test_scalar_merge_list_merges_as_a_set_and_deletes_from_a_parallel_list() -> None:
    current = _ds()
    got = _smp(current, {"metadata": {"finalizers": ["f2", "f3"]}})
    assert got["metadata"]["finalizers"] == ["f1", "f2", "f3"]
    got = _smp(current, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["f1"]}})
    assert got["metadata"]["finalizers"] == ["f2"]
    got = _smp(current, {"metadata": {"$setElementOrder/finalizers": ["f3", "f2", "f1"],
                                      "finalizers": ["f3"]}})
    assert got["metadata"]["finalizers"] == ["f3", "f2", "f1"]


def test_rollout_undo_replaces_the_template() -> None:
    """What kubectl rollout undo sends for a DaemonSet: the revision's template with
    $patch: replace, so fields only the current template has go away."""
    current = _ds(containers=[{"name": "a", "image": "a:2", "args": ["new"]}],
                  nodeSelector={"new": "yes"})
    body = {"spec": {"template": {
        "$patch": "replace",
        "metadata": {"labels": {"app": "x"}},
        "spec": {"containers": [{"name": "a", "image": "a:1"}]}}}}
    got = _smp(current, body)
    assert got["spec"]["template"] == {"metadata": {"labels": {"app": "x"}},
                                       "spec": {"containers": [{"name": "a", "image": "a:1"}]}}
    assert got["spec"]["selector"] == current["spec"]["selector"]


def test_kubectl_apply_patch_with_last_applied_annotation() -> None:
    current = _ds()
    last = json.dumps(_ds())
    body = {"metadata": {"annotations": {
        "kubectl.kubernetes.io/last-applied-configuration": last}},
        "spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
            "containers": [{"image": "a:9", "name": "a"}]}}}}
    got = _smp(current, body)
    assert got["metadata"]["annotations"] == {
        "kubectl.kubernetes.io/last-applied-configuration": last}
    assert [c["image"] for c in _pod_spec(got)["containers"]] == ["a:9", "b:1"]


def test_node_taints_and_pod_fields_use_their_kinds_schema() -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
            "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}}
    got = apply_patch(node, {"spec": {"taints": [{"key": "b", "effect": "NoExecute"}]}}, SMP,
                      "Node")
    assert got["spec"]["taints"] == [{"key": "b", "effect": "NoExecute"}]  # atomic list
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "status": {"conditions": [{"type": "Ready", "status": "False"},
                                     {"type": "Initialized", "status": "True"}]}}
    got = apply_patch(pod, {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
                      SMP, "Pod")
    assert got["status"]["conditions"] == [{"type": "Ready", "status": "True"},
                                           {"type": "Initialized", "status": "True"}]


def test_patches_never_change_their_arguments() -> None:
    current = _ds()
    body = _tpl({"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
                 "containers": [{"name": "a", "$patch": "delete"}]})
    before, body_before = copy.deepcopy(current), copy.deepcopy(body)
    got = _smp(current, body)
    got["metadata"]["labels"]["changed"] = "yes"
    assert current == before and body == body_before
    merged = apply_patch(current, {"metadata": {"labels": {"new": "1"}}}, patch.MERGE_PATCH,
                         "DaemonSet")
    merged["spec"]["selector"]["matchLabels"]["changed"] = "yes"
    assert current == before


@pytest.mark.parametrize(("body", "reason", "message"), [
    (_tpl({"containers": [{"image": "x"}]}), "BadRequest",
     "map: map[image:x] does not contain declared merge key: name"),
    (_tpl({"containers": [{"name": "a", "$patch": "explode"}]}), "BadRequest",
     "unknown patch type: explode in map: map[$patch:explode name:a]"),
    (_tpl({"nodeSelector": {"$patch": "explode"}}), "BadRequest",
     "unknown patch type: explode in map: map[$patch:explode]"),
    (_tpl({"containers": [{"name": "a", "$patch": "merge"}]}), "BadRequest",
     "merging lists cannot yet be specified in the patch"),
    (_tpl({"volumes": [{"name": "v", "$retainKeys": ["name"], "emptyDir": {}}]}), "BadRequest",
     "invalid patch format of retainKeys"),
    (_tpl({"volumes": [{"name": "v", "$retainKeys": "name"}]}), "BadRequest",
     "invalid patch format of retainKeys"),
    (_tpl({"$setElementOrder/containers": [{"name": "b"}],
           "containers": [{"name": "a", "image": "a:2"}]}), "BadRequest",
     "the order in patch list:\n[map[image:a:2 name:a]]\n doesn't match $setElementOrder list:"
     "\n[map[name:b]]"),
    (_tpl({"$deleteFromPrimitiveList": ["x"]}), "BadRequest",
     "invalid patch format of primitive list"),
    (["not", "a", "map"], "BadRequest",
     "json: cannot unmarshal array into Go value of type map[string]interface {}"),
])
def test_strategic_merge_patch_errors(body: Any, reason: str, message: str) -> None:
    current = _ds(volumes=[{"name": "v", "hostPath": {"path": "/x"}}], nodeSelector={"x": "1"})
    with pytest.raises(PatchError) as err:
        _smp(current, body)
    assert (err.value.reason, str(err.value)) == (reason, message)
    assert err.value.code == 400


def test_lists_of_lists_are_invalid() -> None:
    current = _ds()
    current["metadata"]["finalizers"] = []
    with pytest.raises(PatchError) as err:
        _smp(current, {"metadata": {"finalizers": [["x"]]}})
    assert (err.value.reason, err.value.code, str(err.value)) == (
        "Invalid", 422, "lists of lists are not supported")


# ---- JSON patch and merge patch -------------------------------------------------------


def test_json_patch_applies_operations_in_order() -> None:
    ops = [{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "a:2"},
           {"op": "add", "path": "/metadata/labels/tier", "value": "infra"},
           {"op": "remove", "path": "/metadata/finalizers/0"},
           {"op": "test", "path": "/metadata/name", "value": "ds"}]
    got = apply_patch(_ds(), ops, patch.JSON_PATCH, "DaemonSet")
    assert _pod_spec(got)["containers"][0]["image"] == "a:2"
    assert got["metadata"]["labels"] == {"app": "x", "tier": "infra"}
    assert got["metadata"]["finalizers"] == ["f2"]


@pytest.mark.parametrize(("ops", "reason"), [
    ([{"op": "test", "path": "/metadata/name", "value": "other"}], "Invalid"),
    ([{"op": "remove", "path": "/spec/nothing"}], "Invalid"),
    ([{"op": "add", "path": "/metadata/name/x", "value": 1}], "Invalid"),
    ([{"op": "frobnicate", "path": "/a"}], "BadRequest"),
    ({"op": "add"}, "BadRequest"),
])
def test_json_patch_errors(ops: Any, reason: str) -> None:
    with pytest.raises(PatchError) as err:
        apply_patch(_ds(), ops, patch.JSON_PATCH, "DaemonSet")
    assert err.value.reason == reason
    if reason == "Invalid":
        assert str(err.value) == ("the server rejected our request due to an error in our "
                                  "request")
        assert err.value.cause


def test_json_patch_test_operations_as_upstreams() -> None:
    """Go's library: a failed test names its path (not Python's types); a test of null
    holds where the value is absent (the "assert absent" of scripts)."""
    with pytest.raises(PatchError) as err:
        apply_patch(_ds(), [{"op": "test", "path": "/metadata/name", "value": "other"}],
                    patch.JSON_PATCH, "DaemonSet")
    assert err.value.cause == "testing value /metadata/name failed: test failed"
    absent = [{"op": "test", "path": "/spec/nothere", "value": None},
              {"op": "add", "path": "/metadata/labels/tier", "value": "infra"}]
    assert apply_patch(_ds(), absent, patch.JSON_PATCH, "DaemonSet")["metadata"]["labels"][
        "tier"] == "infra"
    with pytest.raises(PatchError) as err:
        apply_patch(_ds(), [{"op": "test", "path": "/metadata/name", "value": None}],
                    patch.JSON_PATCH, "DaemonSet")
    assert err.value.cause == "testing value /metadata/name failed: test failed"


def test_json_patch_operation_limit() -> None:
    ops = [{"op": "test", "path": "/metadata/name", "value": "ds"}] * 10001
    with pytest.raises(PatchError) as err:
        apply_patch(_ds(), ops, patch.JSON_PATCH, "DaemonSet")
    assert (err.value.reason, str(err.value)) == (
        "RequestEntityTooLarge",
        "The allowed maximum operations in a JSON patch is 10000, got 10001")


@pytest.mark.parametrize(("current", "body", "want"), [
    # RFC 7386 appendix A
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
])
def test_json_merge_patch_rfc7386(current: dict[str, Any], body: Any,
                                  want: dict[str, Any]) -> None:
    assert apply_patch(current, body, patch.MERGE_PATCH, "DaemonSet") == want


def test_merge_patch_replaces_lists_whole() -> None:
    got = apply_patch(_ds(), _tpl({"containers": [{"name": "b", "image": "b:2"}]}),
                      patch.MERGE_PATCH, "DaemonSet")
    assert _pod_spec(got)["containers"] == [{"name": "b", "image": "b:2"}]


# ---- media types and bodies -----------------------------------------------------------


def test_raw_bodies_and_content_type_parameters() -> None:
    got = apply_patch(_ds(), b'{"metadata":{"labels":{"t":"1"}}}',
                      "application/strategic-merge-patch+json; charset=utf-8", "DaemonSet")
    assert got["metadata"]["labels"] == {"app": "x", "t": "1"}
    with pytest.raises(PatchError) as err:
        apply_patch(_ds(), b"{not json", patch.MERGE_PATCH, "DaemonSet")
    assert err.value.reason == "BadRequest"


def test_unsupported_media_type() -> None:
    with pytest.raises(PatchError) as err:
        apply_patch(_ds(), {}, "application/json", "DaemonSet")
    assert (err.value.reason, err.value.code, str(err.value)) == (
        "UnsupportedMediaType", 415,
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, "
        "application/strategic-merge-patch+json, application/apply-patch+yaml")


def test_apply_patch_yaml_merges_the_applied_fields() -> None:
    body = "spec:\n  template:\n    spec:\n      containers:\n      - name: b\n        image: b:7\n"
    got = apply_patch(_ds(), body, patch.APPLY_PATCH, "DaemonSet")
    assert [c["image"] for c in _pod_spec(got)["containers"]] == ["a:1", "b:7"]


# ---- upstream's custom cases on its MergeItem test type ---------------------------------


def _merge_item_field() -> schema.Field:
    """Upstream's MergeItem test type as a schema (recursive: its lists hold MergeItems)."""
    item: dict[str, Any] = {"type": "object", "properties": {
        "name": {"type": "string"}, "value": {"type": "string"}, "other": {"type": "string"},
        "mergingIntList": {"type": "array", "items": {"type": "integer"},
                           "x-kubernetes-patch-strategy": "merge"},
        "nonMergingIntList": {"type": "array", "items": {"type": "integer"}},
        "simpleMap": {"type": "object", "additionalProperties": {"type": "string"}},
    }}
    item["properties"]["mergingList"] = {"type": "array", "items": item,
                                         "x-kubernetes-patch-strategy": "merge",
                                         "x-kubernetes-patch-merge-key": "name"}
    item["properties"]["nonMergingList"] = {"type": "array", "items": item}
    return schema.Field.of(item)


UPSTREAM_CASES: list[tuple[str, Any, Any, Any]] = [
    ("unique scalars when merging lists",
     {"mergingIntList": [1, 2]}, {"mergingIntList": [2, 3]}, {"mergingIntList": [1, 2, 3]}),
    ("delete map from nested map",
     {"simpleMap": {"key1": "1", "key2": "1"}}, {"simpleMap": {"$patch": "delete"}},
     {"simpleMap": {}}),
    ("delete all items from merging list",
     {"mergingList": [{"name": "1"}, {"name": "2"}]}, {"mergingList": [{"$patch": "replace"}]},
     {"mergingList": []}),
    ("merge empty merging lists", {"mergingList": []}, {"mergingList": []}, {"mergingList": []}),
    ("delete all keys from map", {"name": "1", "value": "1"}, {"$patch": "replace"}, {}),
    ("add key and delete all keys from map", {"name": "1", "value": "1"},
     {"other": "a", "$patch": "replace"}, {"other": "a"}),
    ("preserve the order from the patch in a merging list",
     {"mergingList": [{"name": "1"}, {"name": "2", "value": "b"}, {"name": "3"}]},
     {"mergingList": [{"name": "3", "value": "c"}, {"name": "1", "value": "a"},
                      {"name": "2", "other": "x"}]},
     {"mergingList": [{"name": "3", "value": "c"}, {"name": "1", "value": "a"},
                      {"name": "2", "value": "b", "other": "x"}]}),
    ("preserve the order from the patch in a merging list 2",
     {"mergingList": [{"name": "1"}, {"name": "2", "value": "b"}, {"name": "3"}]},
     {"mergingList": [{"name": "3", "value": "c"}, {"name": "1", "value": "a"}]},
     {"mergingList": [{"name": "2", "value": "b"}, {"name": "3", "value": "c"},
                      {"name": "1", "value": "a"}]}),
    ("preserve the order from the patch in a merging int list",
     {"mergingIntList": [1, 2, 3]}, {"mergingIntList": [3, 1, 2]},
     {"mergingIntList": [3, 1, 2]}),
    ("preserve the order from the patch in a merging int list 2",
     {"mergingIntList": [1, 2, 3]}, {"mergingIntList": [3, 1]}, {"mergingIntList": [2, 3, 1]}),
    ("$setElementOrder contains item that is not present in the list to be merged",
     {"mergingList": [{"name": "1"}, {"name": "3"}]},
     {"$setElementOrder/mergingList": [{"name": "3"}, {"name": "2"}, {"name": "1"}],
      "mergingList": [{"name": "3", "value": "3"}, {"name": "1", "value": "1"}]},
     {"mergingList": [{"name": "3", "value": "3"}, {"name": "1", "value": "1"}]}),
    ("$setElementOrder contains item that is not present in the int list to be merged",
     {"mergingIntList": [1, 3]}, {"$setElementOrder/mergingIntList": [3, 2, 1]},
     {"mergingIntList": [3, 1]}),
    ("should check if order in $setElementOrder and patch list match",
     {"mergingList": [{"name": "1"}, {"name": "3"}, {"name": "2"}]},
     {"$setElementOrder/mergingList": [{"name": "1"}, {"name": "2"}, {"name": "3"}],
      "mergingList": [{"name": "3", "value": "3"}, {"name": "1", "value": "1"}]},
     "doesn't match"),
    ("should check if order in $setElementOrder and patch int list match",
     {"mergingIntList": [1, 3, 2]},
     {"$setElementOrder/mergingIntList": [1, 2, 3], "mergingIntList": [3, 1]}, "doesn't match"),
    ("missing merge key should error out",
     {"mergingList": [{"name": "1", "value": "a"}]}, {"mergingList": [{"value": "b"}]},
     "does not contain declared merge key"),
]


@pytest.mark.parametrize(("name", "original", "body", "want"), UPSTREAM_CASES,
                         ids=[c[0] for c in UPSTREAM_CASES])
def test_upstreams_custom_strategic_merge_cases(name: str, original: Any, body: Any,
                                                want: Any) -> None:
    field = _merge_item_field()
    if isinstance(want, str):
        with pytest.raises(PatchError, match=want):
            patch.strategic_merge_patch(original, body, field)
    else:
        assert patch.strategic_merge_patch(original, body, field) == want


def test_patch_bodies_are_decoded_under_the_input_bounds() -> None:
    with pytest.raises(patch.PatchError, match="exceeded max depth of 100") as deep:
        patch.decode_body(b"[" * 101 + b"]" * 101, patch.MERGE_PATCH)
    assert deep.value.code == 400
    with pytest.raises(patch.PatchError) as big:
        patch.decode_body(b" " * (decode.MAX_DOCUMENT_BYTES + 1), patch.JSON_PATCH)
    assert big.value.code == 413
    body = patch.decode_body(b"a: 1\na: 2\n", patch.APPLY_PATCH)
    assert body.value == {"a": 2} and body.duplicates == [
        'yaml: unmarshal errors:\n  line 2: key "a" already set in map']
    with pytest.raises(patch.PatchError, match="error decoding YAML: the body holds more"):
        patch.decode_body(b"a: 1\n---\nb: 2\n", patch.APPLY_PATCH)
