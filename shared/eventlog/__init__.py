"""The event log's own room, pure: the entry (``entry``), the one fold of entries into a view
(``fold``) and the msgpack wire format both use (``wire``). Every reader and writer of the
log goes through them; only the Lua ``COMMIT`` (``shared.store.scripts``) writes the same
layout and fold in Redis, and a contract test holds the two together."""
