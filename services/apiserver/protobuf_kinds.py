"""Protobuf bodies of the stored kinds kubectl's typed clients send beyond those
``services.apiserver.protobuf`` decodes: a ConfigMap (``kubectl create configmap``).
Decides (pure).

Wire format (k8s.io.api.core.v1.ConfigMap): 1 metadata, 2 data (map<string, string>),
3 binaryData (map<string, bytes>: served as base64 strings, the JSON of a Go ``[]byte``),
4 immutable (set only when given).
"""

from __future__ import annotations

import base64

from services.apiserver import protobuf


def _config_map(f: protobuf.Fields) -> protobuf.Obj:
    out: protobuf.Obj = {"metadata": protobuf._meta(protobuf._msg(f, 1))}
    data = protobuf._string_map(f, 2)
    if data:
        out["data"] = data
    if 3 in f:
        binary: dict[str, str] = {}
        for raw in f[3]:
            entry = protobuf.fields(raw) if isinstance(raw, bytes) else {}
            value = entry.get(2, [b""])[-1]
            binary[protobuf._str(entry, 1) or ""] = base64.b64encode(
                value if isinstance(value, bytes) else b"").decode()
        out["binaryData"] = binary
    if 4 in f:
        out["immutable"] = bool(f[4][-1])
    return out


DECODERS = {"ConfigMap": _config_map}


def decode(body: bytes) -> protobuf.Obj:
    """The JSON-shaped object of a protobuf body: a kind of :data:`DECODERS`, else whatever
    ``protobuf.decode`` accepts (it raises ProtobufError for the rest)."""
    if body.startswith(protobuf.MAGIC):
        unknown = protobuf.fields(body[len(protobuf.MAGIC):])
        type_meta = protobuf._msg(unknown, 1)
        kind = protobuf._str(type_meta, 2) or ""
        decoder = DECODERS.get(kind)
        if decoder is not None:
            raw = unknown.get(2)
            obj = decoder(protobuf.fields(raw[-1]) if raw else {})
            return {"apiVersion": protobuf._str(type_meta, 1) or "", "kind": kind, **obj}
    return protobuf.decode(body)
