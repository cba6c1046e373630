"""The OpenAPI documents kubectl downloads: ``/openapi/v3`` (the index) and one document
per group-version (``api/v1``, ``apis/apps/v1``), and ``/openapi/v2``. Pure: built from
:mod:`shared.api.schema`.

kubectl reads them for ``explain`` (the components, found by ``x-kubernetes-group-version-kind``)
and for ``apply`` / ``create`` / ``edit``: it sends ``fieldValidation=Strict`` and leaves
validation to the server once the PATCH operation of the kind lists that parameter (it looks
at the first PATCH operation it meets, so every one of them lists it). The components are
upstream's definitions converted the way upstream publishes them: one ``type`` (no
``null``), ``$ref`` into ``#/components/schemas/``, a reference with siblings (a field's
description) wrapped in ``allOf``, int-or-string as ``type: string, format: int-or-string``.

kubectl reads the v2 document (:func:`swagger`) only where the v3 ones do not answer: to
validate, before it sends them, objects whose kind's PATCH operation it cannot find, above
all the items of a ``kind: List`` (what ``kubectl get -o yaml`` writes of several objects).
Without it such an apply failed at once ("the server could not find the requested
resource"). It carries the same definitions, referred to as ``#/definitions/``, a
reference beside its siblings, as upstream's v2 document has them; no paths (the
operations are the v3 documents'; kubectl reads none from v2).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from shared.api import schema, served
from shared.model import kinds

_COMPONENT_PREFIX = "#/components/schemas/"
_DEFINITION_PREFIX = "#/definitions/"
_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
# Types every group-version document carries (errors, deletes, patches, watch events).
_COMMON = tuple(_META + n for n in ("Status", "DeleteOptions", "Patch", "WatchEvent",
                                    "APIResourceList"))
# Upstream publishes these two as plain strings; the JSON Schema has a oneOf.
_SCALARS: Mapping[str, Mapping[str, Any]] = {
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {
        "description": "IntOrString is a type that can hold an int32 or a string.",
        "type": "string", "format": "int-or-string", "x-kubernetes-int-or-string": True},
    "io.k8s.apimachinery.pkg.api.resource.Quantity": {
        "description": "Quantity is a fixed-point representation of a number.",
        "type": "string"},
}
JSON_TYPES = ("application/json", "application/yaml")
PATCH_TYPES = ("application/apply-patch+yaml", "application/json-patch+json",
               "application/merge-patch+json", "application/strategic-merge-patch+json")


def group_version_path(api_version: str) -> str:
    """The document's key in the index: ``api/v1``, ``apis/apps/v1``."""
    group, version = schema.split_api_version(api_version)
    return f"apis/{group}/{version}" if group else f"api/{version}"


def group_versions(served: Iterable[kinds.KindInfo] = kinds.SERVED) -> list[str]:
    """The apiVersions of the served kinds, each once, in order."""
    return list(dict.fromkeys(k.api_version for k in served))


def document_hash(document: Mapping[str, Any]) -> str:
    """Upstream's content hash of a document (hex SHA-512 of its JSON, upper case): the
    index's URLs carry it so clients cache each version of a document once."""
    body = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha512(body).hexdigest().upper()


def root(documents: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The ``/openapi/v3`` index for documents keyed by :func:`group_version_path`."""
    return {"paths": {path: {"serverRelativeURL": f"/openapi/v3/{path}?hash="
                             f"{document_hash(doc)}"}
                      for path, doc in documents.items()}}


@functools.cache
def documents(served: tuple[kinds.KindInfo, ...] = kinds.SERVED
              ) -> Mapping[str, Mapping[str, Any]]:
    """Every group-version document for the served kinds, keyed by
    :func:`group_version_path`. Built once per set of kinds; shared: read only."""
    return {group_version_path(gv): document(gv, [k for k in served if k.api_version == gv])
            for gv in group_versions(served)}


@functools.cache
def index(served: tuple[kinds.KindInfo, ...] = kinds.SERVED) -> Mapping[str, Any]:
    """:func:`root` of :func:`documents`, built once per set of kinds (hashing the documents
    takes tens of milliseconds); shared: read only."""
    return root(documents(served))


def document(api_version: str, served: Sequence[kinds.KindInfo]) -> dict[str, Any]:
    """The OpenAPI v3 document of one group-version: paths for each served kind's REST
    operations and the components for the kinds, their lists and what they refer to."""
    components = {name: _component(name, schema.definitions()[name])
                  for name in _referenced(served)}
    paths: dict[str, Any] = {}
    for info in served:
        paths.update(_paths(info, schema.definition_name(info.api_version, info.kind)))
    return {"openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": schema.KUBERNETES_VERSION},
            "paths": paths,
            "components": {"schemas": components}}


@functools.cache
def swagger(served: tuple[kinds.KindInfo, ...] = kinds.SERVED) -> Mapping[str, Any]:
    """The OpenAPI v2 document (``/openapi/v2``): the definitions of the served kinds, their
    lists and what they refer to (see above). Built once per set of kinds; shared: read
    only."""
    return {"swagger": "2.0",
            "info": {"title": "Kubernetes", "version": schema.KUBERNETES_VERSION},
            "paths": {},
            "definitions": {name: _component(name, schema.definitions()[name],
                                             _DEFINITION_PREFIX)
                            for name in _referenced(served)}}


# ---- components -----------------------------------------------------------------------


def _referenced(served: Iterable[kinds.KindInfo]) -> list[str]:
    """The definitions of ``served``, their lists, the common types and every definition
    they refer to, sorted."""
    roots = [schema.definition_name(k.api_version, n) for k in served
             for n in (k.kind, k.kind + "List")]
    return sorted(schema.referenced([*roots, *_COMMON]))


def _component(name: str, definition: Mapping[str, Any], prefix: str = _COMPONENT_PREFIX
               ) -> Any:
    """``definition`` as a document publishes it, referring to others as ``prefix``: a
    v3 document's components (``#/components/schemas/``, a reference with siblings in
    ``allOf``) or a v2 document's definitions (``#/definitions/``, beside them)."""
    if name in _SCALARS:
        return dict(_SCALARS[name])
    out = _convert(definition, prefix)
    if "x-kubernetes-group-version-kind" in definition:
        for field in ("apiVersion", "kind"):  # kubernetes-validate adds enums upstream lacks
            out.get("properties", {}).get(field, {}).pop("enum", None)
    return out


def _convert(node: Any, prefix: str) -> Any:
    if isinstance(node, list):
        return [_convert(v, prefix) for v in node]
    if not isinstance(node, Mapping):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "type" and isinstance(value, list):
            value = next((t for t in value if t != "null"), "object")
        elif key == "$ref" and isinstance(value, str):
            value = prefix + value.rpartition("/")[2]
        elif key == "additionalProperties" and value is False:
            continue
        elif key in ("properties", "patternProperties"):
            value = {k: _convert(v, prefix) for k, v in value.items()}
        else:
            value = _convert(value, prefix)
        out[key] = value
    if prefix == _COMPONENT_PREFIX and "$ref" in out and len(out) > 1:
        out = {"allOf": [{"$ref": out.pop("$ref")}], **out}
    return out


# ---- paths ----------------------------------------------------------------------------


def _param(name: str, description: str, type_: str = "string", where: str = "query",
           required: bool = False) -> dict[str, Any]:
    p: dict[str, Any] = {"description": description, "in": where, "name": name,
                         "schema": {"type": type_, "uniqueItems": True}}
    if required:
        p["required"] = True
    return p


_PRETTY = _param("pretty", "If 'true', then the output is pretty printed.")
_NAMESPACE = _param("namespace", "object name and auth scope, such as for teams and projects",
                    where="path", required=True)
_DRY_RUN = _param("dryRun", "When present (All), modifications are not persisted.")
_FIELD_MANAGER = _param("fieldManager", "A name associated with the actor making these changes.")
_FIELD_VALIDATION = _param(
    "fieldValidation",
    "How the server treats unknown or duplicate fields in the request body: Ignore, Warn "
    "(the default: a Warning header per field) or Strict (a BadRequest error).")
_FORCE = _param("force", "Force is going to \"force\" Apply requests.", "boolean")
_LIST = [
    _param("allowWatchBookmarks", "Requests watch events with type BOOKMARK.", "boolean"),
    _param("continue", "The continue token of a previous chunked list."),
    _param("fieldSelector", "A selector to restrict the list of returned objects by their "
                            "fields."),
    _param("labelSelector", "A selector to restrict the list of returned objects by their "
                            "labels."),
    _param("limit", "The maximum number of responses to return for a list call.", "integer"),
    _param("resourceVersion", "The resourceVersion the list or watch starts from."),
    _param("resourceVersionMatch", "How resourceVersion is applied to list calls."),
    _param("sendInitialEvents", "A watch stream begins with synthetic events for the state "
                                "of the objects.", "boolean"),
    _param("timeoutSeconds", "Timeout for the list/watch call.", "integer"),
    _param("watch", "Watch for changes to the described resources.", "boolean"),
]
_DELETE = [
    _DRY_RUN,
    _param("gracePeriodSeconds", "The duration in seconds before the object should be "
                                 "deleted.", "integer"),
    _param("orphanDependents", "Deprecated: use propagationPolicy.", "boolean"),
    _param("propagationPolicy", "Whether and how garbage collection is performed: Orphan, "
                                "Background or Foreground."),
]


def _content(definition: str, types: Sequence[str] = JSON_TYPES) -> dict[str, Any]:
    return {t: {"schema": {"$ref": _COMPONENT_PREFIX + definition}} for t in types}


def _responses(definition: str, *codes: str) -> dict[str, Any]:
    text = {"200": "OK", "201": "Created", "202": "Accepted"}
    out: dict[str, Any] = {c: {"content": _content(definition), "description": text[c]}
                           for c in codes}
    out["401"] = {"description": "Unauthorized"}
    return out


def _operation(action: str, verb: str, info: kinds.KindInfo, op_name: str, described: str,
               response: str, codes: Sequence[str], params: Sequence[Mapping[str, Any]],
               body: Mapping[str, Any] | None = None) -> dict[str, Any]:
    group, version = schema.split_api_version(info.api_version)
    tag = f"{group or 'core'}_{version}"
    prefix = (group or "core").capitalize() + version.capitalize()
    op: dict[str, Any] = {
        "description": described,
        "operationId": f"{verb}{prefix}{op_name}",
        "parameters": list(params),
        "responses": _responses(response, *codes),
        "tags": [tag],
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": group, "kind": info.kind,
                                            "version": version},
    }
    if body is not None:
        op["requestBody"] = body
    if not op["parameters"]:
        del op["parameters"]
    return op


# the operations of a path (its HTTP methods) by the verb each serves
_ITEM_VERBS = {"get": "get", "put": "update", "patch": "patch", "delete": "delete"}
_COLLECTION_VERBS = {"get": "list", "post": "create", "delete": "deletecollection"}


def _only_served(path: Mapping[str, Any], by_method: Mapping[str, str],
                 verbs: Sequence[str]) -> dict[str, Any]:
    """``path`` with the operations of the verbs not served left out."""
    return {k: v for k, v in path.items() if k not in by_method or by_method[k] in verbs}


def _paths(info: kinds.KindInfo, definition: str) -> dict[str, Any]:
    """The paths of a served kind and of its subresources, with an operation for each verb
    it serves (``shared.api.served``, as discovery lists them); a subresource other than
    ``status`` and ``finalize`` has none (the eviction and log of pods)."""
    resource = served.by_kind(info.kind)
    verbs = resource.verbs if resource else ()
    group, version = schema.split_api_version(info.api_version)
    base = f"/apis/{group}/{version}" if group else f"/api/{version}"
    list_def = schema.definition_name(info.api_version, info.kind + "List")
    status = _META + "Status"
    scoped = "Namespaced" if info.namespaced else ""
    kind = info.kind
    write_body = {"content": {"*/*": {"schema": {"$ref": _COMPONENT_PREFIX + definition}}},
                  "required": True}
    patch_body = {"content": {t: {"schema": {"$ref": _COMPONENT_PREFIX + _META + "Patch"}}
                              for t in PATCH_TYPES}, "required": True}
    delete_body = {"content": {"*/*": {"schema": {
        "$ref": _COMPONENT_PREFIX + _META + "DeleteOptions"}}}}
    writes = [_DRY_RUN, _FIELD_MANAGER, _FIELD_VALIDATION]
    collection = f"{base}/namespaces/{{namespace}}/{info.plural}" if info.namespaced \
        else f"{base}/{info.plural}"
    scope = [_NAMESPACE] if info.namespaced else []
    name = _param("name", f"name of the {kind}", where="path", required=True)

    def one(suffix: str, what: str) -> dict[str, Any]:
        return {
            "get": _operation("get", "read", info, f"{scoped}{kind}{suffix}",
                              f"read {what} of the specified {kind}", definition, ["200"], []),
            "put": _operation("put", "replace", info, f"{scoped}{kind}{suffix}",
                              f"replace {what} of the specified {kind}", definition,
                              ["200", "201"], writes, write_body),
            "patch": _operation("patch", "patch", info, f"{scoped}{kind}{suffix}",
                                f"partially update {what} of the specified {kind}", definition,
                                ["200", "201"], [*writes, _FORCE], patch_body),
            "parameters": [name, *scope, _PRETTY],
        }

    paths: dict[str, Any] = {
        collection: _only_served({
            "get": _operation("list", "list", info, f"{scoped}{kind}",
                              f"list or watch objects of kind {kind}", list_def, ["200"], _LIST),
            "post": _operation("post", "create", info, f"{scoped}{kind}", f"create a {kind}",
                               definition, ["200", "201", "202"], writes, write_body),
            "delete": _operation("deletecollection", "delete", info,
                                 f"Collection{scoped}{kind}", f"delete collection of {kind}",
                                 status, ["200"], [*_DELETE, *_LIST], delete_body),
            "parameters": [*scope, _PRETTY],
        }, _COLLECTION_VERBS, verbs),
        f"{collection}/{{name}}": _only_served({
            **one("", "the"),
            "delete": _operation("delete", "delete", info, f"{scoped}{kind}", f"delete a {kind}",
                                 status, ["200", "202"], _DELETE, delete_body),
        }, _ITEM_VERBS, verbs),
    }
    for sub, _kind, sub_verbs in resource.subresources if resource else ():
        if sub == "status":
            paths[f"{collection}/{{name}}/status"] = _only_served(one("Status", "status"),
                                                                  _ITEM_VERBS, sub_verbs)
        elif sub == "finalize":
            paths[f"{collection}/{{name}}/finalize"] = {
                "put": _operation("put", "replace", info, f"{scoped}{kind}Finalize",
                                  f"replace finalize of the specified {kind}", definition,
                                  ["200", "201"], writes, write_body),
                "parameters": [name, *scope, _PRETTY],
            }
    if info.namespaced and "list" in verbs:
        paths[f"{base}/{info.plural}"] = {
            "get": _operation("list", "list", info, f"{kind}ForAllNamespaces",
                              f"list or watch objects of kind {kind}", list_def, ["200"], _LIST),
            "parameters": [_PRETTY],
        }
    return paths
