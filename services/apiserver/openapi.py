"""``/openapi/v3`` and its per-group-version documents, built once from ``shared.api``'s
OpenAPI builders (schemas from a maintained package at run time). Decides."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

Obj = dict[str, Any]


@functools.cache
def _documents() -> Mapping[str, Mapping[str, Any]] | None:
    try:
        from shared.api import openapi as api_openapi  # type: ignore[attr-defined]
    except ImportError:
        return None
    docs: Mapping[str, Mapping[str, Any]] = api_openapi.documents()
    return docs


def document(path: str) -> Obj | None:
    """The root index (``path`` "") or one group version's document, None when unknown."""
    docs = _documents()
    if docs is None:
        return None
    if not path:
        from shared.api import openapi as api_openapi  # type: ignore[attr-defined]

        root: Obj = api_openapi.root(docs)
        return root
    doc = docs.get(path)
    return dict(doc) if doc is not None else None
