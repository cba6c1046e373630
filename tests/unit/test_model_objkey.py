"""An object's key parses into namespace and name and formats back."""

from __future__ import annotations

from shared.model.objkey import ObjectKey


def test_a_key_parses_and_formats_back() -> None:
    for key, parts in [("ns/p", ("ns", "p")), ("/node-1", ("", "node-1")),
                       ("node-1", ("", "node-1")), ("ns/a/b", ("ns", "a/b"))]:
        parsed = ObjectKey.parse(key)
        assert (parsed.namespace, parsed.name) == parts
        assert str(parsed) == (key if "/" in key else "/" + key)
