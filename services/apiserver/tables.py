"""What a get, list or watch event answers with: the object(s) as JSON, or a
``meta.k8s.io/v1`` Table (``shared.api.tables``: upstream's columns, ``priority`` 1 for
``-o wide``) when the client asked for one. Decides (pure but for reading the clock)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from services.apiserver import handlers, listing
from services.apiserver.requests import Target
from services.apiserver.status import bad_request
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


def render_one(t: Target, obj: Obj, fmt: str, query: Mapping[str, str]) -> Obj:
    obj = handlers.with_type(obj)
    if fmt != "table":
        return obj
    return _table(t, [obj], {"resourceVersion": meta.resource_version(obj)}, query)


def render_list(t: Target, rv: str, items: list[Obj], fmt: str,
                query: Mapping[str, str]) -> Obj:
    items, cont, remaining = listing.page(items, query, rv)
    if fmt == "table":
        list_meta: Obj = {"resourceVersion": rv}
        if cont:
            list_meta.update({"continue": cont, "remainingItemCount": remaining})
        return _table(t, items, list_meta, query)
    return handlers.list_document(t.kind, rv, items, cont, remaining)
