"""Which objects a list or watch selects: its namespace, ``labelSelector`` and
``fieldSelector``; and the pages of a list (``limit``/``continue``). Decides (pure); the
selector rules are ``shared.api.selection``'s.

A continue token names the last key served and the position the first page was read at.
The view holds only the present, so a later page is read from the present view, after that
key (objects are sorted by namespace and name, so none is served twice); its
resourceVersion is the position it was read at.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping
from typing import Any

from services.apiserver import requests
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


def _encode(start: tuple[str, str], rv: str) -> str:
    raw = json.dumps({"v": 1, "rv": rv, "start": list(start)}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode(token: str) -> tuple[str, str]:
    try:
        doc = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        start = doc["start"]
        if doc.get("v") != 1 or not (isinstance(start, list) and len(start) == 2
                                     and all(isinstance(x, str) for x in start)):
            raise ValueError(start)
    except (ValueError, KeyError, TypeError, binascii.Error) as err:
        raise bad_request(f"continue key is not valid: {token!r}") from err
    return start[0], start[1]


def page(items: list[Obj], query: Mapping[str, str], rv: str
         ) -> tuple[list[Obj], str, int | None]:
    """One page of ``items`` (sorted by namespace and name): the objects, the continue
    token ("" on the last page) and how many remain after it (None on the last page)."""
    limit = requests.integer(query, "limit") or 0
    token = query.get("continue") or ""
    if token:
        after = _decode(token)
        items = [o for o in items if (meta.namespace(o), meta.name(o)) > after]
    if not limit or len(items) <= limit:
        return items, "", None
    chunk = items[:limit]
    last = chunk[-1]
    return chunk, _encode((meta.namespace(last), meta.name(last)), rv), len(items) - limit
