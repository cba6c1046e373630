"""``/openapi/v3`` and its per-group-version documents, and ``/openapi/v2``:
``shared.api.openapi``'s, built once at first use from the schemas a maintained package
ships. Decides.

kubectl asks for the v2 document as protobuf only, the message ``openapi.v2.Document`` of
the gnostic models upstream's server encodes it with (its Accept names
``...spec.v2@v1.0+protobuf``; the answer's type is ``V2_PROTOBUF``, as upstream's: Go's
media type parser refuses the "@"), and parses it whole: every definition a reference
names must be there. ``v2_protobuf`` encodes the parts of it the document has
(definitions: a schema's types, properties, items, map values, references, required
fields, descriptions, formats and ``x-kubernetes-*`` extensions, whose values go as YAML
text, as upstream's do); a key it does not know is an error, never left out unseen.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

from services.apiserver import protobuf as pb
from shared.api import openapi as api_openapi

Obj = dict[str, Any]

V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"


def document(path: str) -> Obj | None:
    """The index (``path`` "") or one group version's document (``apis/apps/v1``), None
    when not served."""
    docs = api_openapi.documents()
    if not path:
        return api_openapi.root(docs)
    doc = docs.get(path)
    return dict(doc) if doc is not None else None


def v2_document() -> Obj:
    """The OpenAPI v2 document as JSON."""
    return dict(api_openapi.swagger())


def wants_protobuf(accept: str) -> bool:
    """Whether an Accept header asks for the v2 document as protobuf (kubectl's does)."""
    return "proto-openapi.spec.v2" in accept


@functools.cache
def v2_protobuf() -> bytes:
    """``shared.api.openapi.swagger`` as an ``openapi.v2.Document`` message."""
    doc = api_openapi.swagger()
    info = doc["info"]
    definitions = b"".join(pb.message(1, _named(name, _schema(value)))
                           for name, value in doc["definitions"].items())
    return (pb.text(1, doc["swagger"])
            + pb.message(2, pb.text(1, info["title"]) + pb.text(2, info["version"]))
            + pb.message(8, b"")  # Paths: none (see shared.api.openapi)
            + pb.message(9, definitions))


def _named(name: str, value: bytes) -> bytes:
    """A ``Named*`` pair: its name (1) and its encoded value (2)."""
    return pb.text(1, name) + pb.message(2, value)


def _any(value: Any) -> bytes:
    """An ``Any``: the value as YAML text (2); JSON is YAML."""
    return pb.text(2, json.dumps(value, separators=(",", ":"), sort_keys=True))


def _schema(s: Mapping[str, Any]) -> bytes:
    """A ``Schema`` message of a definition (or a part of one) as JSON."""
    out = bytearray()
    for key, value in s.items():
        if key.startswith("x-"):
            continue  # vendor extensions last, in their own field
        field = _SCHEMA_TEXT.get(key)
        if field is not None:
            out += pb.text(field, value)
        elif key == "type":
            out += pb.message(22, pb.texts(1, [value] if isinstance(value, str) else value))
        elif key == "required":
            out += pb.texts(19, value)
        elif key == "properties":
            out += pb.message(25, b"".join(pb.message(1, _named(name, _schema(prop)))
                                           for name, prop in value.items()))
        elif key == "items":
            items = value if isinstance(value, list) else [value]
            out += pb.message(23, b"".join(pb.message(1, _schema(i)) for i in items))
        elif key == "additionalProperties":
            out += pb.message(21, pb.boolean(2, value) if isinstance(value, bool)
                              else pb.message(1, _schema(value)))
        elif key == "allOf":
            out += b"".join(pb.message(24, _schema(part)) for part in value)
        elif key == "default":
            out += pb.message(5, _any(value))
        elif key == "enum":
            out += b"".join(pb.message(20, _any(v)) for v in value)
        elif key in _SCHEMA_NUMBERS:
            out += pb.double(_SCHEMA_NUMBERS[key], float(value))
        elif key in _SCHEMA_COUNTS:
            out += pb.integer(_SCHEMA_COUNTS[key], int(value))
        elif key in _SCHEMA_FLAGS:
            out += pb.boolean(_SCHEMA_FLAGS[key], bool(value))
        else:
            raise ValueError(f"OpenAPI v2: no protobuf field for the schema key {key!r}")
    for key, value in s.items():
        if key.startswith("x-"):
            out += pb.message(31, _named(key, _any(value)))
    return bytes(out)


# the fields of ``openapi.v2.Schema`` by the JSON key they carry
_SCHEMA_TEXT = {"$ref": 1, "format": 2, "title": 3, "description": 4, "pattern": 13,
                "discriminator": 26}
_SCHEMA_NUMBERS = {"multipleOf": 6, "maximum": 7, "minimum": 9}
_SCHEMA_COUNTS = {"maxLength": 11, "minLength": 12, "maxItems": 14, "minItems": 15,
                  "maxProperties": 17, "minProperties": 18}
_SCHEMA_FLAGS = {"exclusiveMaximum": 8, "exclusiveMinimum": 10, "uniqueItems": 16,
                 "readOnly": 27}
