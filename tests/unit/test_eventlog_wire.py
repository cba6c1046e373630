"""Decoding a stored object over its older version (``wire.unpack_object_over``), as
``replay --verify`` does for status updates: the same object a whole decode gives, or None
when the bytes differ before the last top-level value."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.eventlog import wire
from shared.model.errors import CorruptEntryError

Obj = dict[str, Any]
POD: Obj = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "a"}},
            "spec": {"containers": [{"name": "c", "image": "i"}], "nodeName": "n1"},
            "status": {"phase": "Pending"}}


def _over(old: Obj, new: Obj) -> tuple[Obj | None, Obj]:
    """``new`` decoded over ``old`` (decoded whole first, as a view holds it), and decoded
    whole."""
    old_data, new_data = wire.pack_object(old), wire.pack_object(new)
    base = wire.unpack_object(old_data, "1-0")
    found = wire.last_value_at(old_data)
    assert found is not None
    at, key = found
    return (wire.unpack_object_over(new_data, "2-0", base, old_data, at, key),
            wire.unpack_object(new_data, "2-0"))


def test_a_status_update_is_decoded_over_the_older_version() -> None:
    new = copy.deepcopy(POD)
    new["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    over, whole = _over(POD, new)
    assert over == whole
    assert over is not None and over["metadata"]["resourceVersion"] == "2-0"


def test_the_unchanged_values_are_the_older_objects_own_and_its_metadata_a_copy() -> None:
    old_data = wire.pack_object(POD)
    base = wire.unpack_object(old_data, "1-0")
    at, key = wire.last_value_at(old_data) or (0, "")
    new = copy.deepcopy(POD)
    new["status"] = {"phase": "Running"}
    over = wire.unpack_object_over(wire.pack_object(new), "2-0", base, old_data, at, key)
    assert over is not None and over["spec"] is base["spec"]
    assert base["metadata"]["resourceVersion"] == "1-0"


@pytest.mark.parametrize("change", [
    lambda o: o["metadata"]["labels"].update(app="b"),
    lambda o: o["spec"].update(nodeName="n2"),
    lambda o: o.pop("apiVersion"),
])
def test_a_change_before_the_last_value_is_decoded_whole(change: Any) -> None:
    new = copy.deepcopy(POD)
    change(new)
    over, _whole = _over(POD, new)
    assert over is None


def test_bytes_after_the_last_value_are_refused_as_a_whole_decode_refuses_them() -> None:
    old_data = wire.pack_object(POD)
    base = wire.unpack_object(old_data, "1-0")
    at, key = wire.last_value_at(old_data) or (0, "")
    bad = wire.pack_object(POD) + b"\x01"
    with pytest.raises(CorruptEntryError):
        wire.unpack_object(bad, "2-0")
    with pytest.raises(CorruptEntryError):
        wire.unpack_object_over(bad, "2-0", base, old_data, at, key)


def test_no_last_value_is_found_in_what_is_not_a_map() -> None:
    assert wire.last_value_at(wire.pack([1, 2])) is None
    assert wire.last_value_at(wire.pack({})) is None
    assert wire.last_value_at(wire.pack({1: 2})) is None
    assert wire.last_value_at(b"\x85") is None  # a map of five pairs, cut short


_leaf = st.one_of(st.integers(-3, 3), st.text(max_size=3), st.booleans(), st.none())
_value = st.recursive(_leaf, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=8)
_obj = st.tuples(
    st.fixed_dictionaries({"metadata": st.dictionaries(st.text(max_size=3), _value,
                                                       max_size=3)},
                          optional={"spec": _value, "a": _value}),
    _value).map(lambda pair: {**pair[0], "status": pair[1]})  # status last, as stored


@given(_obj, _obj, st.sampled_from(["status", "spec", "metadata"]))
def test_decoding_over_an_older_version_is_a_whole_decode_or_none(old: Obj, other: Obj,
                                                                  field: str) -> None:
    new = copy.deepcopy(old)
    if field in other:
        new[field] = other[field]
    over, whole = _over(old, new)
    assert over is None or over == whole
    if field == "status" or wire.pack(new) == wire.pack(old):  # 0 == False, not their bytes
        assert over == whole


@pytest.mark.parametrize("pairs", [0, 1, 15, 16, 65535, 65536])
def test_a_map_header_is_read_as_msgpack_reads_it(pairs: int) -> None:
    data = b"\x01" + wire.pack({str(i): 0 for i in range(pairs)})
    reader = wire._reader(data[1:])
    assert wire._map_header(data, 1) == (reader.read_map_header(), 1 + reader.tell())


@pytest.mark.parametrize("data", [wire.pack([1]), wire.pack("x"), b"\xde\x00", b"\xdf\x00\x00"])
def test_what_is_not_a_whole_map_header_is_refused(data: bytes) -> None:
    with pytest.raises(ValueError):
        wire._map_header(data, 0)
