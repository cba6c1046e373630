"""Which objects a list or watch selects: its namespace, ``labelSelector`` and
``fieldSelector``; and the pages of a list (``limit``/``continue``). Decides (pure); the
selector rules are ``shared.api.selection``'s.

A continue token names the last key served and the log position the first page was read
at. Every later page is served at that same position, as upstream serves a continuation
from etcd's revision: the watch cache's objects with the events after it undone
(``view_at``; each event carries the object before it), so every page is one consistent
list and its resourceVersion is the first page's. A position older than the cache's window
of events cannot be rebuilt: 410 Expired with upstream's message and a fresh token
(position ``-1``) that continues, inconsistently, from the present view.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from services.apiserver import requests
from services.apiserver.requests import Target
from services.apiserver.status import bad_request
from services.apiserver.watchcache import Event
from shared.api import selection
from shared.model import fielderr, meta
from shared.store import codec

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


INCONSISTENT_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You "
    "can start a new list without the continue parameter, or use the continue token in "
    "this response to retrieve the remainder of the results. Continuing with the provided "
    "token results in an inconsistent list - objects that were created, modified, or "
    "deleted between the time the first chunk was returned and now may show up in the "
    "list.")
"""Upstream's message for a continuation whose position was compacted away (410)."""
LATEST = "-1"
_POSITION = re.compile(r"[0-9]{1,20}-[0-9]{1,20}")  # a log entry id
"""A continue token's position for "from the present view" (upstream's -1)."""


def token(start: tuple[str, str], rv: str) -> str:
    """A continue token after ``start`` (namespace, name) at position ``rv``."""
    return _encode(start, rv)


def decode_token(token: str) -> tuple[tuple[str, str], str]:
    """The (namespace, name) after which a continue token goes on, and its position.
    Raises ApiError BadRequest for a token that is not ours."""
    try:
        doc = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        start, rv = doc["start"], doc["rv"]
        if doc.get("v") != 1 or not (isinstance(start, list) and len(start) == 2
                                     and all(isinstance(x, str) for x in start)):
            raise ValueError(start)
        if not isinstance(rv, str) or not (rv == LATEST or is_position(rv)):
            raise ValueError(rv)
    except (ValueError, KeyError, TypeError, binascii.Error) as err:
        raise bad_request(f"continue key is not valid: {token!r}") from err
    return (start[0], start[1]), rv


def is_position(rv: str) -> bool:
    """Whether ``rv`` is a log position (``<ms>-<seq>``), as resourceVersions are."""
    return _POSITION.fullmatch(rv) is not None


EXACT, NOT_OLDER_THAN = "Exact", "NotOlderThan"


def option_problems(query: Mapping[str, str]) -> list[str]:
    """What is wrong with a list's (not a watch's) options, as upstream's
    ``ValidateListOptions`` words it (apimachinery's internalversion validation)."""
    problems = []
    match, rv = query.get("resourceVersionMatch", ""), query.get("resourceVersion", "")
    if match:
        if not rv:
            problems.append(fielderr.forbidden("resourceVersionMatch", "resourceVersionMatch "
                                               "is forbidden unless resourceVersion is "
                                               "provided"))
        if query.get("continue"):
            problems.append(fielderr.forbidden("resourceVersionMatch", "resourceVersionMatch "
                                               "is forbidden when continue is provided"))
        if match not in (EXACT, NOT_OLDER_THAN):
            problems.append(fielderr.not_supported("resourceVersionMatch", match,
                                                   (EXACT, NOT_OLDER_THAN, "")))
        if match == EXACT and rv == "0":
            problems.append(fielderr.forbidden("resourceVersionMatch", 'resourceVersionMatch '
                                               '"exact" is forbidden for resourceVersion "0"'))
    if "sendInitialEvents" in query:
        problems.append(fielderr.forbidden("sendInitialEvents",
                                           "sendInitialEvents is forbidden for list"))
    return problems


def view_at(current: Mapping[str, Obj], events: Sequence[Event], kind: str,
            rv: str) -> dict[str, Obj]:
    """The objects of ``kind`` at log position ``rv``: ``current`` (the cache's, at its
    position) with every event of ``kind`` after ``rv`` undone, newest first (an event's
    object before it back, or none). ``events`` must hold every event after ``rv``."""
    objs = dict(current)
    pos = codec.id_tuple(rv)
    for ev in reversed(events):
        if ev.pos <= pos:
            break
        if ev.kind != kind:
            continue
        if ev.prev is None:
            objs.pop(ev.key, None)
        else:
            objs[ev.key] = ev.prev
    return objs


def page(items: list[Obj], query: Mapping[str, str], rv: str
         ) -> tuple[list[Obj], str, int | None]:
    """One page of ``items`` (sorted by namespace and name): the objects, the continue
    token ("" on the last page) and how many remain after it (None on the last page)."""
    limit = requests.integer(query, "limit") or 0
    token = query.get("continue") or ""
    if token:
        after, _rv = decode_token(token)
        items = [o for o in items if (meta.namespace(o), meta.name(o)) > after]
    if not limit or len(items) <= limit:
        return items, "", None
    chunk = items[:limit]
    last = chunk[-1]
    return chunk, _encode((meta.namespace(last), meta.name(last)), rv), len(items) - limit
