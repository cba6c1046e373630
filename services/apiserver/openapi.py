"""``/openapi/v3`` and its per-group-version documents: ``shared.api.openapi``'s, built
once at first use from the schemas a maintained package ships. Decides."""

from __future__ import annotations

from typing import Any

from shared.api import openapi as api_openapi

Obj = dict[str, Any]


def document(path: str) -> Obj | None:
    """The index (``path`` "") or one group version's document (``apis/apps/v1``), None
    when not served."""
    docs = api_openapi.documents()
    if not path:
        return api_openapi.root(docs)
    doc = docs.get(path)
    return dict(doc) if doc is not None else None
