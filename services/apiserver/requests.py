"""Reading a request: which resource a path names, the verb, what the client accepts, and
the list options. Pure: values from the path, the method, the query and headers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from services.apiserver import discovery
from services.apiserver.status import ApiError, bad_request, no_such_path, options_invalid
from shared.api import served

Obj = dict[str, Any]

# the meta.k8s.io versions of what an answer may be "as" (``AS``) that kubectl and client-go
# ask for
AS_VERSIONS = ("v1",)
JSON = "application/json"


@dataclass(frozen=True)
class Target:
    """What a resource path names: a collection (``name`` None) or one object, optionally
    one of its subresources; ``namespace`` None for cluster-scoped kinds or all namespaces."""

    resource: served.Resource
    namespace: str | None
    name: str | None
    sub: str | None

    @property
    def kind(self) -> str:
        return self.resource.info.kind

    @property
    def key(self) -> str:
        return f"{self.namespace or ''}/{self.name or ''}"

    @property
    def sub_verbs(self) -> tuple[str, ...]:
        """The verbs its subresource serves (none without one)."""
        return next((verbs for sub, _kind, verbs in self.resource.subresources
                     if sub == self.sub), ())

    @property
    def resource_name(self) -> str:
        """``daemonsets`` or ``daemonsets/status``: the name RBAC checks."""
        info = self.resource.info
        return served.rbac_name(info.group, f"{info.plural}/{self.sub}" if self.sub
                                else info.plural)


def parse_path(group_version: str, parts: list[str]) -> Target:
    """The target of ``/api(s)/<group_version>/<parts…>``; raises ApiError NotFound."""
    namespace: str | None = None
    own = discovery.resource(group_version, "namespaces")
    if len(parts) == 3 and parts[0] == "namespaces" and own is not None \
            and parts[2] in {s for s, _, _ in own.subresources}:
        pass  # a namespace's own subresource (``/namespaces/<name>/finalize``)
    elif len(parts) >= 3 and parts[0] == "namespaces":
        namespace, parts = parts[1], parts[2:]
    if not parts or len(parts) > 3:
        raise no_such_path()
    r = discovery.resource(group_version, parts[0])
    if r is None or (namespace is not None and not r.info.namespaced):
        raise no_such_path()
    name = parts[1] if len(parts) > 1 else None
    sub = parts[2] if len(parts) > 2 else None
    if sub is not None and sub not in {s for s, _, _ in r.subresources}:
        raise no_such_path()
    if r.info.namespaced and name is not None and namespace is None:
        raise no_such_path()
    for value in (namespace, name):
        if value is not None and not valid_segment(value):
            raise no_such_path()
    return Target(r, namespace, name, sub)


def valid_segment(value: str) -> bool:
    """Whether a name or namespace in a path is one upstream's router takes
    (``IsValidPathSegmentName``): not "." or "..", no "/" or "%". Any other is looked up as
    it is, so ``kubectl get pod Web`` is ``pods "Web" not found`` (no object has such a
    name: a create validates it) and a list in ``-n Bad_NS`` is empty."""
    return value not in (".", "..") and "/" not in value and "%" not in value


def verb(method: str, target: Target, query: Mapping[str, str]) -> str:
    """The Kubernetes verb of a request (``get``, ``list``, ``watch``, ``create``, …)."""
    if method == "GET":
        if target.name is not None:
            return "get"
        return "watch" if boolean(query.get("watch")) else "list"
    if method == "POST":
        return "create"
    if method == "PUT":
        return "update"
    if method == "PATCH":
        return "patch"
    if method == "DELETE":
        return "delete" if target.name is not None else "deletecollection"
    raise ApiError("MethodNotAllowed", f"the server does not allow this method on the "
                   f"requested resource: {method}")


def boolean(value: str | None) -> bool:
    return (value or "").lower() in ("true", "1")


def media_types(accept: str | None) -> list[tuple[str, dict[str, str]]]:
    """The media types of an Accept header, in order, with their parameters."""
    out = []
    for part in (accept or "").split(","):
        fields = [f.strip() for f in part.split(";")]
        if not fields[0]:
            continue
        params = {}
        for f in fields[1:]:
            k, _, v = f.partition("=")
            params[k.strip().lower()] = v.strip()
        out.append((fields[0].lower(), params))
    return out


# what a client may ask an answer to be "as" (``g=meta.k8s.io``), by the format's name:
# a Table, or an object's metadata alone (metadata-only informers: client-go's metadata
# client, controller-runtime's); a get and a watch event take PartialObjectMetadata, a
# list PartialObjectMetadataList
AS = {"Table": "table", "PartialObjectMetadata": "meta",
      "PartialObjectMetadataList": "metalist"}


def negotiate(accept: str | None) -> str:
    """``json``, one of ``AS``'s formats, or raises NotAcceptable: the first of the
    client's media types served, JSON for any Accept that lists JSON (kubectl prefers
    protobuf for some calls and accepts JSON)."""
    types = media_types(accept)
    if not types:
        return "json"
    for mt, params in types:
        if mt in (JSON, "application/*", "*/*"):
            if params.get("as") in AS and params.get("g") == "meta.k8s.io" \
                    and params.get("v") in AS_VERSIONS:
                return AS[params["as"]]
            if "as" not in params:
                return "json"
    raise ApiError("NotAcceptable", "only the following media types are accepted: "
                   "application/json, " + ", ".join(
                       f"application/json;as={name};v=v1;g=meta.k8s.io" for name in AS))


def integer(query: Mapping[str, str], name: str, minimum: int | None = 0) -> int | None:
    """The integer query parameter ``name`` (None when absent or empty); a 400 for one that
    is not an integer or is below ``minimum`` (None: any)."""
    raw = query.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise bad_request(f"{name}: Invalid value: {raw!r}: must be an integer") from None
    if minimum is not None and value < minimum:
        raise bad_request(f"{name}: Invalid value: {value}: must be at least {minimum}")
    return value


def dry_run(query: Mapping[str, str], body: Obj | None = None,
            options: str = "CreateOptions") -> bool:
    """Whether a write is a dry run (``dryRun=All`` in the query or its ``options``' body);
    a value but All is upstream's 422 (``ValidateDryRun``), naming the write's options."""
    values = [v for k, v in _items(query) if k == "dryRun"]
    if body and isinstance(body.get("dryRun"), list):
        values += [str(v) for v in body["dryRun"]]
    if any(v != "All" for v in values):
        listed = ", ".join('"' + v.replace('"', '\\"') + '"' for v in values)
        raise options_invalid(options, [f'dryRun: Unsupported value: []string{{{listed}}}: '
                                        'supported values: "All"'])
    return bool(values)


def _items(query: Mapping[str, str]) -> list[tuple[str, str]]:
    getall = getattr(query, "items", None)
    return list(getall()) if getall else []
