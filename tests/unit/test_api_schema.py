"""shared.api.schema and shared.api.openapi: unknown fields as upstream's strict decoder
names them, strategic-merge metadata per path, and the shape of the OpenAPI v3 documents."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from shared.api import openapi, schema, served
from shared.model import kinds
from tests import testdata


def _ds(**container: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "agent", "labels": {"app": "agent"},
                     "annotations": {"any.key/x": "y"}},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {"metadata": {"labels": {"app": "agent"}}, "spec": {
                "containers": [{"name": "agent", "image": "agent:1",
                                "resources": {"limits": {"cpu": "1"}}, **container}],
                "nodeSelector": {"kubernetes.io/os": "linux"}}}},
    }


def test_a_valid_daemonset_has_no_unknown_fields() -> None:
    assert schema.unknown_fields(_ds()) == []


def test_every_testdata_manifest_has_no_unknown_fields() -> None:
    docs = [d for f in testdata.manifests()
            for d in yaml.safe_load_all(f.read_text()) if d]
    assert sum(d["kind"] == "DaemonSet" for d in docs) >= 8
    for doc in docs:
        assert schema.unknown_fields(doc) == [], (doc["kind"], doc["metadata"]["name"])


@pytest.mark.parametrize(("edit", "paths"), [
    (lambda o: o["spec"]["template"]["spec"]["containers"][0].update(imagePullPolicyy="Always"),
     ["spec.template.spec.containers[0].imagePullPolicyy"]),
    (lambda o: o.update(extra=1), ["extra"]),
    (lambda o: o["metadata"].update(nme="x"), ["metadata.nme"]),
    (lambda o: o["spec"]["updateStrategy"]["rollingUpdate"].update(maxSurgee=1),
     ["spec.updateStrategy.rollingUpdate.maxSurgee"]),
    # a field inside an unknown one is not reported again
    (lambda o: o["spec"].update(bogus={"deeper": {"x": 1}}), ["spec.bogus"]),
    # list items carry their index; two unknown fields in document order
    (lambda o: o["spec"]["template"]["spec"]["containers"].append(
        {"name": "b", "image": "b", "portz": [], "envv": []}),
     ["spec.template.spec.containers[1].portz", "spec.template.spec.containers[1].envv"]),
    (lambda o: o["spec"]["template"]["spec"]["containers"][0].update(
        ports=[{"containerPort": 80, "hostPortt": 1}]),
     ["spec.template.spec.containers[0].ports[0].hostPortt"]),
])
def test_unknown_fields_are_named_like_upstreams_strict_decoder(edit: Any,
                                                                paths: list[str]) -> None:
    obj = _ds()
    edit(obj)
    assert schema.unknown_fields(obj) == paths


def test_map_keys_and_free_form_objects_are_never_unknown() -> None:
    revision = {"apiVersion": "apps/v1", "kind": "ControllerRevision", "revision": 1,
                "metadata": {"name": "r", "managedFields": [{"fieldsV1": {"f:spec": {}}}]},
                "data": {"spec": {"anything": {"goes": True}}}}
    assert schema.unknown_fields(revision) == []


def test_unknown_fields_of_every_served_kind_and_list() -> None:
    for info in kinds.ALL:
        for kind in (info.kind, info.kind + "List"):
            obj = {"apiVersion": info.api_version, "kind": kind, "bogus": 1}
            assert schema.unknown_fields(obj) == ["bogus"], kind


def test_unknown_fields_of_a_kind_without_schema_raises() -> None:
    with pytest.raises(schema.UnknownKindError, match='kind "Widget" in version "v1"'):
        schema.unknown_fields({"apiVersion": "v1", "kind": "Widget"})
    with pytest.raises(schema.UnknownKindError):
        schema.unknown_fields({"kind": "Pod"})


def test_upstream_wording_of_unknown_fields() -> None:
    assert schema.unknown_field_message("spec.x") == 'unknown field "spec.x"'
    assert schema.strict_decoding_message(["a", "b.c"]) == (
        'strict decoding error: unknown field "a", unknown field "b.c"')
    assert schema.strict_decoding_message(["spec.x"], "DaemonSet", "v1") == (
        'DaemonSet in version "v1" cannot be handled as a DaemonSet: strict decoding error: '
        'unknown field "spec.x"')


def test_field_validation_directive() -> None:
    assert [schema.field_validation(v) for v in (None, "", "Ignore", "Warn", "Strict")] == [
        "Warn", "Warn", "Ignore", "Warn", "Strict"]
    with pytest.raises(ValueError) as err:
        schema.field_validation("strict")
    assert str(err.value) == ('fieldValidation: Unsupported value: "strict": supported values: '
                              '"", "Ignore", "Strict", "Warn"')


@pytest.mark.parametrize(("api_version", "kind", "path", "meta"), [
    ("apps/v1", "DaemonSet", "spec.template.spec.containers",
     schema.PatchMeta(("merge",), "name", "map")),
    ("apps/v1", "DaemonSet", "spec.template.spec.containers.ports",
     schema.PatchMeta(("merge",), "containerPort", "map")),
    ("apps/v1", "DaemonSet", "spec.template.spec.containers.env",
     schema.PatchMeta(("merge",), "name", "map")),
    ("apps/v1", "DaemonSet", "spec.template.spec.volumes",
     schema.PatchMeta(("merge", "retainKeys"), "name", "map")),
    ("apps/v1", "DaemonSet", "spec.template.spec.tolerations",
     schema.PatchMeta((), None, "atomic")),
    ("apps/v1", "DaemonSet", "metadata.finalizers", schema.PatchMeta(("merge",), None, "set")),
    ("apps/v1", "DaemonSet", "metadata.ownerReferences",
     schema.PatchMeta(("merge",), "uid", "map")),
    ("apps/v1", "DaemonSet", "status.conditions", schema.PatchMeta(("merge",), "type", "map")),
    ("v1", "Node", "spec.taints", schema.PatchMeta((), None, "atomic")),
    ("v1", "Pod", "spec.containers.args", schema.PatchMeta((), None, "atomic")),
    ("v1", "Pod", "metadata.labels", schema.NO_META),
    ("v1", "Pod", "spec.nosuchfield", schema.NO_META),
])
def test_patch_meta_per_path(api_version: str, kind: str, path: str,
                             meta: schema.PatchMeta) -> None:
    assert schema.patch_meta(api_version, kind, path) == meta


def test_field_navigation_steps_into_lists_and_maps() -> None:
    root = schema.kind_field("apps/v1", "DaemonSet")
    containers = root.path(["spec", "template", "spec", "containers"])
    assert containers.is_list() and containers.meta.merge_key == "name"
    assert containers.elem().child("ports").meta.merge_key == "containerPort"
    assert not root.child("metadata").child("labels").child("app").is_list()
    assert root.child("nope").schema is None and root.child("nope").child("x").schema is None


# ---- OpenAPI v3 ---------------------------------------------------------------------


def test_root_lists_each_group_version_with_a_content_hash() -> None:
    docs = openapi.documents()
    assert set(docs) == {"api/v1", "apis/apps/v1", "apis/coordination.k8s.io/v1",
                         "apis/rbac.authorization.k8s.io/v1", "apis/scheduling.k8s.io/v1"}
    index = openapi.root(docs)
    for path, doc in docs.items():
        url = index["paths"][path]["serverRelativeURL"]
        assert url == f"/openapi/v3/{path}?hash={openapi.document_hash(doc)}"
    assert openapi.index() == index and openapi.index() is openapi.index()
    changed = copy.deepcopy(docs["api/v1"])
    changed["info"]["version"] = "other"
    assert openapi.document_hash(changed) != openapi.document_hash(docs["api/v1"])


def _walk(node: Any) -> Any:
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


def test_components_are_openapi_v3_shaped_and_self_contained() -> None:
    for path, doc in openapi.documents().items():
        components = doc["components"]["schemas"]
        for node in _walk(components):
            assert not isinstance(node.get("type"), list)
            ref = node.get("$ref")
            if ref is not None:
                assert len(node) == 1, node  # siblings go beside an allOf
                name = ref.removeprefix("#/components/schemas/")
                assert ref.startswith("#/components/schemas/") and name in components
        if path in ("api/v1", "apis/apps/v1"):  # (no int-or-string in the others)
            assert components["io.k8s.apimachinery.pkg.util.intstr.IntOrString"][
                "format"] == "int-or-string"
        assert "io.k8s.apimachinery.pkg.apis.meta.v1.Status" in components


def test_components_carry_kind_markers_and_patch_extensions() -> None:
    apps = openapi.documents()["apis/apps/v1"]["components"]["schemas"]
    ds = apps["io.k8s.api.apps.v1.DaemonSet"]
    assert ds["x-kubernetes-group-version-kind"] == [
        {"group": "apps", "kind": "DaemonSet", "version": "v1"}]
    assert ds["properties"]["kind"] == {"description": ds["properties"]["kind"]["description"],
                                        "type": "string"}
    containers = apps["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers["x-kubernetes-patch-merge-key"] == "name"
    assert containers["x-kubernetes-patch-strategy"] == "merge"
    assert containers["x-kubernetes-list-type"] == "map"
    core = openapi.documents()["api/v1"]["components"]["schemas"]
    for kind in ("Node", "Pod", "Event", "NodeList", "PodList", "EventList"):
        assert f"io.k8s.api.core.v1.{kind}" in core


def _operations(doc: dict[str, Any]) -> Any:
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if method != "parameters":
                yield path, method, op


def test_every_patch_and_write_operation_declares_field_validation() -> None:
    seen = set()
    for doc in openapi.documents().values():
        for path, method, op in _operations(doc):
            names = [p["name"] for p in op.get("parameters", [])]
            if method in ("patch", "put", "post"):
                assert "fieldValidation" in names, (path, method)
            if method == "patch":
                assert set(op["requestBody"]["content"]) == set(openapi.PATCH_TYPES)
                seen.add(op["x-kubernetes-group-version-kind"]["kind"])
    assert seen == {r.info.kind for r in served.RESOURCES if "patch" in r.verbs}
    assert "Lease" not in seen  # read only


def test_paths_follow_upstreams_layout() -> None:
    apps = openapi.documents()["apis/apps/v1"]["paths"]
    item = apps["/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}"]
    assert set(item) == {"get", "put", "patch", "delete", "parameters"}
    assert item["patch"]["operationId"] == "patchAppsV1NamespacedDaemonSet"
    assert item["patch"]["x-kubernetes-action"] == "patch"
    assert "/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}/status" in apps
    assert apps["/apis/apps/v1/daemonsets"]["get"]["operationId"] == (
        "listAppsV1DaemonSetForAllNamespaces")
    collection = apps["/apis/apps/v1/namespaces/{namespace}/daemonsets"]
    assert collection["delete"]["x-kubernetes-action"] == "deletecollection"
    core = openapi.documents()["api/v1"]["paths"]
    assert core["/api/v1/nodes/{name}"]["get"]["operationId"] == "readCoreV1Node"
    assert "/api/v1/nodes/{name}/status" in core
    assert "/api/v1/namespaces/{namespace}/events/{name}/status" not in core


def test_the_paths_have_the_operations_discovery_lists() -> None:
    """Of each served resource and subresource the operations its verbs serve, no more
    (``shared.api.served``: discovery's)."""
    core = openapi.documents()["api/v1"]["paths"]
    assert set(core["/api/v1/namespaces"]) == {"get", "post", "parameters"}  # no collection delete
    assert set(core["/api/v1/namespaces/{name}/finalize"]) == {"put", "parameters"}
    assert core["/api/v1/namespaces/{name}/finalize"]["put"]["operationId"] == \
        "replaceCoreV1NamespaceFinalize"
    assert set(core["/api/v1/namespaces/{name}/status"]) == {"get", "put", "patch",
                                                              "parameters"}
    leases = openapi.documents()["apis/coordination.k8s.io/v1"]["paths"]
    assert {path: set(ops) - {"parameters"} for path, ops in leases.items()} == {
        "/apis/coordination.k8s.io/v1/leases": {"get"},
        "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases": {"get"},
        "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}": {"get"}}
    assert [p["name"] for p in core["/api/v1/nodes/{name}"]["parameters"]] == ["name", "pretty"]


def test_namespaces_are_documented_as_upstream_documents_them() -> None:
    # kubectl reads a kind's patch operation to learn that the server validates fields, and
    # without one it falls back to OpenAPI v2 and fails before it sends anything
    core = openapi.documents()["api/v1"]
    item = core["paths"]["/api/v1/namespaces/{name}"]
    assert item["get"]["operationId"] == "readCoreV1Namespace"
    assert "fieldValidation" in [p["name"] for p in item["patch"]["parameters"]]
    assert "/api/v1/namespaces/{name}/status" in core["paths"]
    assert {"io.k8s.api.core.v1.Namespace", "io.k8s.api.core.v1.NamespaceList"} <= set(
        core["components"]["schemas"])
