"""The store's names for the log's encoding, which lives in ``shared.eventlog``: msgpack
(``wire``) and the entry (``entry``, which documents the layout). Nothing is defined here."""

from __future__ import annotations

from shared.eventlog.entry import SCHEMA_VERSION, Entry, id_ge, id_tuple
from shared.eventlog.entry import decode_fields as decode_entry
from shared.eventlog.wire import Obj, pack, pack_object, plain, unpack, unpack_object

__all__ = ["SCHEMA_VERSION", "Entry", "Obj", "decode_entry", "id_ge", "id_tuple", "pack",
           "pack_object", "plain", "unpack", "unpack_object"]
