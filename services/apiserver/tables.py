"""What a get, list or watch event answers with: the object(s) as JSON, or a
``meta.k8s.io/v1`` Table when the client asked for one. Decides (pure).

Rows carry the object as ``includeObject`` says (``Metadata``, the default: a
PartialObjectMetadata; ``Object``; ``None``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.apiserver import handlers
from services.apiserver.requests import Target
from shared.model import meta

Obj = dict[str, Any]

TABLE_API_VERSION = "meta.k8s.io/v1"
# upstream's rest.NewDefaultTableConvertor, for kinds without printer columns
DEFAULT_COLUMNS = [
    {"name": "Name", "type": "string", "format": "name", "priority": 0,
     "description": "Name must be unique within a namespace."},
    {"name": "Created At", "type": "date", "format": "", "priority": 0,
     "description": "CreationTimestamp is a timestamp representing the server time when "
                    "this object was created."},
]


def _row_object(obj: Obj, include: str) -> Obj | None:
    if include == "None":
        return None
    if include == "Object":
        return obj
    return {"kind": "PartialObjectMetadata", "apiVersion": TABLE_API_VERSION,
            "metadata": obj.get("metadata") or {}}


def table(t: Target, objs: list[Obj], rv: str, query: Mapping[str, str]) -> Obj:
    include = query.get("includeObject") or "Metadata"
    rows = []
    for obj in objs:
        row: Obj = {"cells": [meta.name(obj), meta.creation_timestamp(obj)]}
        ro = _row_object(obj, include)
        if ro is not None:
            row["object"] = ro
        rows.append(row)
    return {"kind": "Table", "apiVersion": TABLE_API_VERSION,
            "metadata": {"resourceVersion": rv}, "columnDefinitions": DEFAULT_COLUMNS,
            "rows": rows}


def render_one(t: Target, obj: Obj, fmt: str, query: Mapping[str, str]) -> Obj:
    obj = handlers.with_type(obj)
    if fmt != "table":
        return obj
    return table(t, [obj], meta.resource_version(obj), query)


def render_list(t: Target, rv: str, items: list[Obj], fmt: str,
                query: Mapping[str, str]) -> Obj:
    if fmt == "table":
        return table(t, items, rv, query)
    return handlers.list_document(t.kind, rv, items)
