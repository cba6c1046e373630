"""What a get, list or watch event answers with: the object(s) as JSON, a
``meta.k8s.io/v1`` Table (``shared.api.tables``: upstream's columns, ``priority`` 1 for
``-o wide``) or their metadata alone (PartialObjectMetadata, a list's
PartialObjectMetadataList) when the client asked for one. Decides (pure but for reading
the clock)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from services.apiserver import handlers, listing
from services.apiserver.requests import Target
from services.apiserver.status import ApiError, bad_request
from shared.api import tables
from shared.model import meta

Obj = dict[str, Any]


def _table(t: Target, objs: list[Obj], list_meta: Obj, query: Mapping[str, str],
           headers: bool = True) -> Obj:
    try:
        return tables.table(t.kind, objs, time.time(),
                            include_object=query.get("includeObject") or "Metadata",
                            list_meta=list_meta, headers=headers)
    except ValueError as err:
        raise bad_request(str(err)) from err


def _not_acceptable(asked: str, what: str) -> ApiError:
    return ApiError("NotAcceptable", f"you requested {asked}, but the requested object "
                    f"is {what}")


def render_one(t: Target, obj: Obj, fmt: str, query: Mapping[str, str]) -> Obj:
    """One object (a get's, a watch event's) in the format ``fmt`` negotiated."""
    obj = handlers.with_type(obj)
    if fmt == "meta":
        return tables.partial_object_metadata(obj)
    if fmt == "metalist":
        raise _not_acceptable("PartialObjectMetadataList", "not a list")
    if fmt != "table":
        return obj
    return _table(t, [obj], {"resourceVersion": meta.resource_version(obj)}, query)


def watch_mark(fmt: str) -> Callable[[Obj], Obj]:
    """How a watch in the format ``fmt`` renders a bookmark's object; raises NotAcceptable
    for a format no watch event has (a list's)."""
    if fmt == "metalist":
        raise _not_acceptable("PartialObjectMetadataList", "not a list")
    return tables.partial_object_metadata if fmt == "meta" else _as_it_is


def _as_it_is(obj: Obj) -> Obj:
    return obj


def render_list(t: Target, rv: str, items: list[Obj], fmt: str,
                query: Mapping[str, str]) -> Obj:
    """One page of a list in the format ``fmt`` negotiated."""
    if fmt == "meta":
        raise _not_acceptable("PartialObjectMetadata", "a list")
    items, cont, remaining = listing.page(items, query, rv)
    list_meta: Obj = {"resourceVersion": rv}
    if cont:
        list_meta.update({"continue": cont, "remainingItemCount": remaining})
    if fmt == "table":
        return _table(t, items, list_meta, query)
    if fmt == "metalist":
        return {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                "metadata": list_meta,
                "items": [tables.partial_object_metadata(o) for o in items]}
    return handlers.list_document(t.kind, rv, items, cont, remaining)
