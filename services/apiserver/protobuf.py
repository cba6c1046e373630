"""The protobuf wire format: decoding the few request bodies kubectl sends as Kubernetes
protobuf (its typed clients do: ``auth can-i`` posts a SelfSubjectAccessReview, ``auth
can-i --list`` a SelfSubjectRulesReview, ``auth whoami`` a SelfSubjectReview, ``create
token`` a TokenRequest, ``drain`` an Eviction, or with ``--disable-eviction`` a pod's
delete with DeleteOptions, ``create namespace`` a Namespace, ``create configmap`` a
ConfigMap, ``create secret`` a Secret, ``create service``, ``create serviceaccount``,
``create role`` and the RBAC group's other kinds (``protokinds``), ``debug node/...``,
``debug --copy-to`` and ``run`` a Pod) into the JSON shape of the same object, which then
takes the path a JSON body takes.
Decides (pure). Answers go out as JSON, which those clients accept (but for the OpenAPI v2
document, below).

The wire format: the magic ``k8s\\0``, then a ``runtime.Unknown`` message (1: typeMeta
{1: apiVersion, 2: kind}, 2: raw, the object's own message). A Pod is decoded whole by the
tables of ``protopod`` (``protowire`` reads them), and a field they do not know is refused
(the caller is told to send JSON) rather than dropped; of the other kinds, only the fields
the API server reads are decoded and unknown ones are skipped. The writers at the
end (``varint``, ``message``, ...) encode the one document served as protobuf, the OpenAPI
v2 document (``services.apiserver.openapi``).
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable, Iterable
from typing import Any

from services.apiserver import protokinds, protopod, protowire

MAGIC = b"k8s\x00"
MEDIA_TYPE = "application/vnd.kubernetes.protobuf"

Obj = dict[str, Any]
Fields = dict[int, list[Any]]

ProtobufError = protowire.ProtobufError


def fields(data: bytes) -> Fields:
    """Field number → values (ints for varints, bytes for length-delimited)."""
    out: Fields = {}
    for number, _wire, value in protowire.scan(data):
        out.setdefault(number, []).append(value)
    return out


def _str(f: Fields, n: int) -> str | None:
    v = f.get(n)
    return v[-1].decode("utf-8", "replace") if v and isinstance(v[-1], bytes) else None


def _msg(f: Fields, n: int) -> Fields:
    v = f.get(n)
    return fields(v[-1]) if v and isinstance(v[-1], bytes) else {}


def _strings(f: Fields, names: dict[int, str]) -> Obj:
    return {name: s for n, name in names.items() if (s := _str(f, n)) is not None}


def _string_map(f: Fields, n: int) -> Obj | None:
    """A ``map<string, string>`` field: repeated entries {1: key, 2: value}."""
    if n not in f:
        return None
    out: Obj = {}
    for raw in f[n]:
        entry = fields(raw) if isinstance(raw, bytes) else {}
        out[_str(entry, 1) or ""] = _str(entry, 2) or ""
    return out


def _meta(f: Fields) -> Obj:
    # every string field is on the wire, the empty ones too: those are unset
    out = {k: v for k, v in _strings(f, {1: "name", 2: "generateName", 3: "namespace",
                                         5: "uid"}).items() if v}
    for n, name in ((11, "labels"), (12, "annotations")):
        if (found := _string_map(f, n)) is not None:
            out[name] = found
    return out


def _access_review(f: Fields) -> Obj:
    spec = _msg(f, 2)
    out: Obj = {"metadata": _meta(_msg(f, 1)), "spec": {}}
    if 1 in spec:
        out["spec"]["resourceAttributes"] = _strings(_msg(spec, 1), {
            1: "namespace", 2: "verb", 3: "group", 4: "version", 5: "resource",
            6: "subresource", 7: "name"})
    if 2 in spec:
        out["spec"]["nonResourceAttributes"] = _strings(_msg(spec, 2), {1: "path", 2: "verb"})
    return out


def _rules_review(f: Fields) -> Obj:
    return {"metadata": _meta(_msg(f, 1)), "spec": _strings(_msg(f, 2), {1: "namespace"})}


def _self_review(f: Fields) -> Obj:
    return {"metadata": _meta(_msg(f, 1))}  # its status is the answer: not read


def _delete_options(d: Fields) -> Obj:
    opts: Obj = {}
    if 1 in d:
        grace = d[1][-1]
        opts["gracePeriodSeconds"] = grace - (1 << 64) if grace >= 1 << 63 else grace
    if 2 in d:
        opts["preconditions"] = _strings(_msg(d, 2), {1: "uid", 2: "resourceVersion"})
    if 3 in d:
        opts["orphanDependents"] = bool(d[3][-1])
    if (policy := _str(d, 4)) is not None:
        opts["propagationPolicy"] = policy
    if 5 in d:
        opts["dryRun"] = [v.decode() for v in d[5]]
    return opts


def _eviction(f: Fields) -> Obj:
    out: Obj = {"metadata": _meta(_msg(f, 1))}
    if 2 in f:
        out["deleteOptions"] = _delete_options(_msg(f, 2))
    return out


def _token_request(f: Fields) -> Obj:
    """1 metadata, 2 spec: 1 audiences (repeated), 3 boundObjectRef {1 kind, 2 apiVersion,
    3 name, 4 uid}, 4 expirationSeconds (``kubectl create token``)."""
    raw = _msg(f, 2)
    spec: Obj = {"audiences": [v.decode("utf-8", "replace") for v in raw.get(1, [])
                               if isinstance(v, bytes)]}
    if 4 in raw:
        seconds = raw[4][-1]
        spec["expirationSeconds"] = seconds - (1 << 64) if seconds >= 1 << 63 else seconds
    if 3 in raw:
        spec["boundObjectRef"] = {k: v for k, v in _strings(_msg(raw, 3), {
            1: "kind", 2: "apiVersion", 3: "name", 4: "uid"}).items() if v}
    return {"metadata": _meta(_msg(f, 1)), "spec": spec}


def _namespace(f: Fields) -> Obj:
    out: Obj = {"metadata": _meta(_msg(f, 1))}
    finalizers = _msg(f, 2).get(1)
    if finalizers:
        out["spec"] = {"finalizers": [v.decode("utf-8", "replace") for v in finalizers]}
    return out  # its status is the server's: not read


def _bytes_map(f: Fields, n: int) -> dict[str, str]:
    """A ``map<string, bytes>`` field, its values as base64 strings (the JSON of a Go
    ``[]byte``)."""
    out: dict[str, str] = {}
    for raw in f[n]:
        entry = fields(raw) if isinstance(raw, bytes) else {}
        value = entry.get(2, [b""])[-1]
        out[_str(entry, 1) or ""] = base64.b64encode(
            value if isinstance(value, bytes) else b"").decode()
    return out


def _config_map(f: Fields) -> Obj:
    """1 metadata, 2 data (map<string, string>), 3 binaryData (map<string, bytes>),
    4 immutable (set only when given)."""
    out: Obj = {"metadata": _meta(_msg(f, 1))}
    data = _string_map(f, 2)
    if data:
        out["data"] = data
    if 3 in f:
        out["binaryData"] = _bytes_map(f, 3)
    if 4 in f:
        out["immutable"] = bool(f[4][-1])
    return out


def _secret(f: Fields) -> Obj:
    """1 metadata, 2 data (map<string, bytes>), 3 type, 4 stringData (map<string,
    string>), 5 immutable (``kubectl create secret generic|tls|docker-registry``)."""
    out: Obj = {"metadata": _meta(_msg(f, 1))}
    if 2 in f:
        out["data"] = _bytes_map(f, 2)
    if (kind := _str(f, 3)):
        out["type"] = kind
    if (strings := _string_map(f, 4)):
        out["stringData"] = strings
    if 5 in f:
        out["immutable"] = bool(f[5][-1])
    return out


DECODERS: dict[str, Callable[[Fields], Obj]] = {
    "Namespace": _namespace,
    "ConfigMap": _config_map,
    "Secret": _secret,
    "SelfSubjectAccessReview": _access_review,
    "SelfSubjectRulesReview": _rules_review,
    "SelfSubjectReview": _self_review,
    "Eviction": _eviction,
    "DeleteOptions": _delete_options,
    "TokenRequest": _token_request,
}


def decode(body: bytes) -> Obj:
    """The JSON-shaped object of a protobuf body; raises ProtobufError for anything but
    a Pod (``protopod``, every field read) and the kinds in DECODERS (the fields the API
    server reads)."""
    if not body.startswith(MAGIC):
        raise ProtobufError("missing the k8s protobuf magic")
    unknown = fields(body[len(MAGIC):])
    type_meta = _msg(unknown, 1)
    api_version, kind = _str(type_meta, 1) or "", _str(type_meta, 2) or ""
    raw = unknown.get(2)
    data = raw[-1] if raw and isinstance(raw[-1], bytes) else b""
    if kind == protopod.KIND:  # strict: a field its tables do not know fails the decode
        return {"apiVersion": api_version, "kind": kind, **protopod.decode(data)}
    if kind in protokinds.KINDS:  # strict too
        return {"apiVersion": api_version, "kind": kind, **protokinds.decode(kind, data)}
    decoder = DECODERS.get(kind)
    if decoder is None:
        raise ProtobufError(f"kind {kind!r} is not accepted as protobuf; send JSON")
    return {"apiVersion": api_version, "kind": kind, **decoder(fields(data))}


# ---- writing ----------------------------------------------------------------------------------


def varint(value: int) -> bytes:
    """``value`` (0 or more) as a protobuf varint."""
    if value < 0:
        raise ValueError("negative varint")
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def message(number: int, data: bytes) -> bytes:
    """Field ``number`` holding ``data`` (an encoded message, or bytes) length-delimited."""
    return varint(number << 3 | 2) + varint(len(data)) + data


def text(number: int, value: str) -> bytes:
    return message(number, value.encode("utf-8"))


def texts(number: int, values: Iterable[str]) -> bytes:
    """A repeated string field."""
    return b"".join(text(number, v) for v in values)


def boolean(number: int, value: bool) -> bytes:
    return varint(number << 3) + b"\x01" if value else b""


def integer(number: int, value: int) -> bytes:
    """An int64 field (0 or more)."""
    return varint(number << 3) + varint(value)


def double(number: int, value: float) -> bytes:
    return varint(number << 3 | 1) + struct.pack("<d", value)
