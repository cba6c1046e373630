"""Reading the log backwards, cheaply: entries are filtered as they are stored
(``shared.eventlog.entry.RawEntry``: their small fields and a byte search of the payload)
before anything is unpacked. Acts (reads Redis)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import redis

from shared import settings
from shared.eventlog.entry import RawEntry, decode
from shared.store import codec, errors
from shared.store.guard import redis_errors, text
from shared.store.keys import Keys

PAGE = settings.current.scan_page


@dataclass(frozen=True)
class Hit:
    id: str
    type: str
    kind: str
    key: str
    obj: dict[str, Any]  # the object (resourceVersion = id) or the decision record
    user: str = ""  # who wrote it, when the log records it (writes through the API server)


def backwards(client: redis.Redis, keys: Keys, want: Callable[[RawEntry], bool],
              page: int = PAGE) -> Iterator[Hit]:
    """Decoded entries for which ``want(raw)`` is true, newest first."""
    upper = "+"
    while True:
        raw: Any
        with redis_errors("read the log"):
            raw = client.xrevrange(keys.log, max=upper, count=page)
        if not raw:
            return
        for rid, fields in raw:
            stored = RawEntry.from_fields(rid, fields)
            if want(stored):
                try:
                    e = decode(stored)
                except errors.CorruptEntryError:
                    continue
                yield Hit(e.id, e.type, e.kind, e.key, e.obj, e.user)
        upper = "(" + text(raw[-1][0])


def entry_at(client: redis.Redis, keys: Keys, entry_id: str) -> Hit | None:
    """The entry with id ``entry_id``, if the log still holds it."""
    raw: Any
    with redis_errors("read the log"):
        raw = client.xrange(keys.log, min=entry_id, max=entry_id, count=1)
    if not raw:
        return None
    try:
        e = codec.decode_entry(raw[0][0], raw[0][1])
    except errors.CorruptEntryError:
        return None
    return Hit(e.id, e.type, e.kind, e.key, e.obj, e.user)


def first_id(client: redis.Redis, keys: Keys) -> str:
    """The oldest id the log still holds ("" if empty)."""
    raw: Any
    with redis_errors("read the log"):
        raw = client.xrange(keys.log, count=1)
    return text(raw[0][0]) if raw else ""
