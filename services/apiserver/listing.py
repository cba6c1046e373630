"""Which objects a list or watch selects: its namespace, ``labelSelector`` and
``fieldSelector``. Decides (pure); the selector rules are ``shared.api.selection``'s."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from services.apiserver.requests import Target
from services.apiserver.status import bad_request
from shared.api import selection
from shared.model import meta

Obj = dict[str, Any]
Match = Callable[[Obj], bool]


def matcher(t: Target, query: Mapping[str, str]) -> Match:
    """A predicate selecting the objects of ``t``'s namespace (all when None) that the
    query's label and field selectors match. Raises ApiError BadRequest on a bad selector."""
    namespace = t.namespace if t.resource.info.namespaced else None
    try:
        chosen = selection.selection(t.kind, query.get("labelSelector"),
                                     query.get("fieldSelector"))
    except selection.SelectorError as err:
        raise bad_request(str(err)) from err
    everything = chosen.everything()

    def match(obj: Obj) -> bool:
        if namespace is not None and meta.namespace(obj) != namespace:
            return False
        return everything or chosen.matches(obj)

    return match
