"""Reading the protobuf wire format, and decoding a message by a table of its fields into the
JSON shape of the same object. Decides (pure).

A schema maps a message name to its fields: field number → ``"jsonName"`` or
``"jsonName:type"``, or ``"^Message"`` for a Go struct embedded inline (its fields land in
the parent's JSON object, as ``LocalObjectReference`` does in ``ConfigMapKeySelector``).
Types: ``str`` (the default), ``int``, ``bool``; a ``!`` after one keeps the value as sent,
zero too (Go's pointer fields and the fields whose JSON has no ``omitempty``); without it a
zero is unset, as Go writes every plain field, set or not, and its JSON leaves them out.
``[T]`` is a repeated field, ``{str}`` a ``map<string, string>``, ``{qty}`` one of
``Quantity``; ``qty`` is a Quantity (a string), ``intstr`` an IntOrString, ``time`` a
``meta.v1.Time`` (RFC 3339, or null when zero, as Go's JSON writes it), ``rawjson`` a
``FieldsV1`` (its bytes are JSON). Any other type names a message of the schema.

A field number the table does not know fails the decode (``ProtobufError``): the caller
is told to send JSON rather than have part of its object dropped.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

Obj = dict[str, Any]
Schema = Mapping[str, Mapping[int, str]]

VARINT, LENGTH = 0, 2


class ProtobufError(ValueError):
    """The body is not a well-formed Kubernetes protobuf message we read."""


def varint(data: bytes, i: int) -> tuple[int, int]:
    """The varint at ``data[i]`` and the offset after it."""
    shift = value = 0
    while True:
        if i >= len(data) or shift > 63:
            raise ProtobufError("truncated varint")
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def scan(data: bytes) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) in wire order: ints for varints, bytes for the rest."""
    i = 0
    while i < len(data):
        tag, i = varint(data, i)
        number, wire = tag >> 3, tag & 7
        value: Any
        if wire == VARINT:
            value, i = varint(data, i)
        elif wire == LENGTH:
            length, i = varint(data, i)
            if i + length > len(data):
                raise ProtobufError("truncated field")
            value, i = data[i:i + length], i + length
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            if i + size > len(data):
                raise ProtobufError("truncated field")
            value, i = data[i:i + size], i + size
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
        yield number, wire, value


def _signed(value: int) -> int:
    """An int32/int64 as Go writes it: negatives as their 64-bit two's complement."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _expect(message: str, number: int, wire: int, want: int) -> None:
    if wire != want:
        raise ProtobufError(f"field {number} of {message} has wire type {wire}, not {want}")


def _text(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ProtobufError(f"{where}: a string that is not UTF-8") from err


_QUANTITY = {1: "string!"}
_INT_OR_STRING = {1: "type:int", 2: "intVal:int!", 3: "strVal"}
_TIME = {1: "seconds:int!", 2: "nanos:int"}
_ENTRY = {1: "key!", 2: "value!"}
_QTY_ENTRY = {1: "key!", 2: "value:qty"}
_FIELDS_V1 = {1: "raw!"}
_BUILTIN: Schema = {"Quantity": _QUANTITY, "IntOrString": _INT_OR_STRING, "Time": _TIME,
                    "StringEntry": _ENTRY, "QuantityEntry": _QTY_ENTRY,
                    "FieldsV1": _FIELDS_V1}


def decode(schema: Schema, name: str, data: bytes) -> Obj:
    """The JSON object of message ``name`` of ``schema`` (see the module's docstring)."""
    table = schema.get(name) or _BUILTIN.get(name)
    if table is None:
        raise ProtobufError(f"no table for the message {name}")
    out: Obj = {}
    for number, wire, value in scan(data):
        spec = table.get(number)
        if spec is None:
            raise ProtobufError(f"field {number} of {name} is not one this server reads; "
                                f"send JSON")
        if spec.startswith("^"):
            _expect(name, number, wire, LENGTH)
            out.update(decode(schema, spec[1:], value))
            continue
        key, _, kind = spec.partition(":")
        kept = key.endswith("!") or kind.endswith("!")
        key, kind = key.rstrip("!"), kind.rstrip("!") or "str"
        where = f"field {number} ({key}) of {name}"
        if kind.startswith("[") and kind.endswith("]"):
            out.setdefault(key, []).extend(_repeated(schema, kind[1:-1], wire, value, where))
            continue
        if kind.startswith("{"):
            _expect(name, number, wire, LENGTH)
            entry = decode(schema, "QuantityEntry" if kind == "{qty}" else "StringEntry",
                           value)
            out.setdefault(key, {})[entry.get("key", "")] = entry.get("value", "")
            continue
        one = _single(schema, kind, wire, value, where)
        if kept or one or isinstance(one, dict) or (kind == "time" and one is None):
            out[key] = one
        else:
            out.pop(key, None)  # a plain field's zero: unset
    return out


def _repeated(schema: Schema, kind: str, wire: int, value: Any, where: str) -> list[Any]:
    if kind == "int" and wire == LENGTH:  # packed
        values, i = [], 0
        while i < len(value):
            one, i = varint(value, i)
            values.append(_signed(one))
        return values
    return [_single(schema, kind, wire, value, where)]


def _single(schema: Schema, kind: str, wire: int, value: Any, where: str) -> Any:
    if kind in ("int", "bool"):
        if wire != VARINT:
            raise ProtobufError(f"{where} has wire type {wire}, not {VARINT}")
        return _signed(value) if kind == "int" else bool(value)
    if wire != LENGTH:
        raise ProtobufError(f"{where} has wire type {wire}, not {LENGTH}")
    if kind == "str":
        return _text(value, where)
    if kind == "qty":
        return str(decode(schema, "Quantity", value).get("string", ""))
    if kind == "intstr":
        ios = decode(schema, "IntOrString", value)
        return ios.get("strVal", "") if ios.get("type") == 1 else ios.get("intVal", 0)
    if kind == "time":
        t = decode(schema, "Time", value)
        if not t:
            return None
        try:
            when = datetime.fromtimestamp(t.get("seconds", 0), UTC)
        except (OverflowError, OSError, ValueError) as err:
            raise ProtobufError(f"{where}: a time out of range") from err
        return when.strftime("%Y-%m-%dT%H:%M:%SZ")
    if kind == "rawjson":
        raw = str(decode(schema, "FieldsV1", value).get("raw", ""))
        try:
            return json.loads(raw) if raw else {}
        except json.JSONDecodeError as err:
            raise ProtobufError(f"{where}: not JSON") from err
    return decode(schema, kind, value)
