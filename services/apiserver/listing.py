"""Which objects a list or watch selects: its namespace, ``labelSelector`` and
``fieldSelector``. Decides (pure); the field-selector rules are ``shared.api.selection``'s."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from services.apiserver import requests
from services.apiserver.requests import Target
from services.apiserver.status import bad_request
from shared.model import meta

Obj = dict[str, Any]
Match = Callable[[Obj], bool]


def matcher(t: Target, query: Mapping[str, str]) -> Match:
    """A predicate selecting the objects of ``t``'s namespace (all when None) that the
    query's label and field selectors match. Raises ApiError BadRequest on a bad selector."""
    namespace = t.namespace if t.resource.info.namespaced else None
    selector = requests.label_selector(query)
    fields = field_matcher(t.kind, query.get("fieldSelector") or "")

    def match(obj: Obj) -> bool:
        if namespace is not None and meta.namespace(obj) != namespace:
            return False
        if selector is not None and not selector.matches(meta.labels(obj)):
            return False
        return fields(obj)

    return match


def field_matcher(kind: str, text: str) -> Match:
    if not text:
        return lambda _obj: True
    raise bad_request(f'field label not supported: "{text}"')
