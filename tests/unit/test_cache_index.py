"""A cache's secondary indexes (``shared.store.cache``) follow every change of its objects."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from shared.store.cache import _IndexedView

KEYS = ["ns/a", "ns/b", "ns/c"]
VALUES = ["x", "y", "z\x00w"]


def _by_value(obj: dict[str, object]) -> list[str]:
    return list(obj.get("on") or [])  # type: ignore[call-overload]


def _expected(view: _IndexedView) -> dict[str, dict[str, set[str]]]:
    out: dict[str, dict[str, set[str]]] = {"on": {}}
    for key, obj in view.objects["Pod"].items():
        for value in _by_value(obj):
            out["on"].setdefault(value, set()).add(key)
    return out


@given(st.lists(st.tuples(st.sampled_from(KEYS), st.booleans(),
                          st.lists(st.sampled_from(VALUES), max_size=3, unique=True)),
                max_size=25))
@example([("ns/a", False, ["x"]), ("ns/a", False, ["x"]), ("ns/a", False, ["y"]),
          ("ns/b", False, ["y", "x"]), ("ns/a", True, []), ("ns/b", False, [])])
def test_the_index_is_the_one_built_afresh_after_any_changes(
        changes: list[tuple[str, bool, list[str]]]) -> None:
    """Sets (a status update indexed as it was, a relabel, a new object) and deletions in
    any order leave the index as if built from the objects now held."""
    view = _IndexedView(["Pod"], {"on": ("Pod", _by_value)})
    for i, (key, delete, values) in enumerate(changes, start=1):
        view.apply(f"{i}-0", "DELETED" if delete else "MODIFIED", "Pod", key,
                   {"on": values, "seq": i})
        assert view.index == _expected(view)
        assert view.objects["Pod"].get(key, {}).get("seq") == (None if delete else i)
