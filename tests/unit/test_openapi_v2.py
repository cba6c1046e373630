"""The OpenAPI v2 document kubectl reads to validate what the v3 documents do not cover
(the items of a ``kind: List``): served as the protobuf message kubectl parses, whole, with
no reference left dangling (kubectl refuses such a document)."""

from __future__ import annotations

import json

import pytest

from services.apiserver import openapi
from services.apiserver import protobuf as pb
from shared.api import openapi as api_openapi

PREFIX = "#/definitions/"


def _text(f: pb.Fields, n: int) -> str:
    return bytes(f[n][-1]).decode()


def _named(data: bytes) -> tuple[str, pb.Fields]:
    pair = pb.fields(data)
    return _text(pair, 1), pb.fields(pair[2][-1])


def _schemas(f: pb.Fields) -> list[pb.Fields]:
    """The schemas nested one level in a Schema message: properties, items, map values,
    allOf."""
    out: list[pb.Fields] = []
    for props in f.get(25, []):
        out += [_named(p)[1] for p in pb.fields(props).get(1, [])]
    for items in f.get(23, []):
        out += [pb.fields(s) for s in pb.fields(items).get(1, [])]
    for extra in f.get(21, []):
        out += [pb.fields(s) for s in pb.fields(extra).get(1, [])]
    out += [pb.fields(s) for s in f.get(24, [])]
    return out


def _extensions(f: pb.Fields) -> dict[str, object]:
    out: dict[str, object] = {}
    for ext in f.get(31, []):
        name, value = _named(ext)
        out[name] = json.loads(_text(value, 2))
    return out


def test_the_document_is_the_swagger_definitions_as_protobuf() -> None:
    doc = pb.fields(openapi.v2_protobuf())
    assert _text(doc, 1) == "2.0"
    info = pb.fields(doc[2][-1])
    assert (_text(info, 1), _text(info, 2)) == ("Kubernetes", api_openapi.swagger()["info"]
                                                ["version"])
    definitions = dict(_named(d) for d in pb.fields(doc[9][-1])[1])
    assert list(definitions) == list(api_openapi.swagger()["definitions"])
    ds = definitions["io.k8s.api.apps.v1.DaemonSet"]
    assert _extensions(ds)["x-kubernetes-group-version-kind"] == [
        {"group": "apps", "kind": "DaemonSet", "version": "v1"}]
    props = dict(_named(p) for p in pb.fields(ds[25][-1])[1])
    assert _text(props["spec"], 1) == PREFIX + "io.k8s.api.apps.v1.DaemonSetSpec"
    assert "description" in api_openapi.swagger()["definitions"][
        "io.k8s.api.apps.v1.DaemonSet"]["properties"]["spec"]  # beside the reference
    assert _text(props["spec"], 4).startswith("The desired behavior of this daemon set.")
    assert pb.fields(props["kind"][22][-1])[1] == [b"string"]


def test_every_reference_names_a_definition_of_the_document() -> None:
    doc = pb.fields(openapi.v2_protobuf())
    definitions = dict(_named(d) for d in pb.fields(doc[9][-1])[1])
    refs: set[str] = set()
    todo = list(definitions.values())
    while todo:
        f = todo.pop()
        if 1 in f:
            refs.add(_text(f, 1))
        todo += _schemas(f)
    assert len(refs) > 50
    assert all(r.startswith(PREFIX) for r in refs)
    assert {r.removeprefix(PREFIX) for r in refs} <= set(definitions)
    container = definitions["io.k8s.api.core.v1.Container"]
    assert _extensions(dict(_named(p) for p in pb.fields(container[25][-1])[1])["ports"]) \
        ["x-kubernetes-patch-merge-key"] == "containerPort"


def test_a_schema_key_with_no_protobuf_field_is_an_error() -> None:
    with pytest.raises(ValueError, match="'oneOf'"):
        openapi._schema({"oneOf": [{"type": "string"}]})


def test_kubectl_accept_header_asks_for_protobuf() -> None:
    assert openapi.wants_protobuf(
        "application/com.github.proto-openapi.spec.v2@v1.0+protobuf")
    assert not openapi.wants_protobuf("application/json")
    assert openapi.V2_PROTOBUF == "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
