"""A ConfigMap's content as bytes: ``data`` (UTF-8 text) and ``binaryData``; a Secret's:
its ``data`` (base64, as its JSON has it). Pure.

The store keeps a ConfigMap as its JSON has it, ``binaryData`` values in base64 (Go encodes
a ``[]byte`` so): the object served, exported and replayed is the one written, and every
reader that needs the bytes (validation's size, the node agent's files) decodes here.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

#: upstream's limit on the total size of a ConfigMap's values (``core.MaxSecretSize``)
MAX_SIZE = 1024 * 1024

_STD = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")


def decode_binary(value: str) -> bytes:
    """One ``binaryData`` value as Go's ``base64.StdEncoding`` decodes it (newlines ignored).
    Raises ValueError with Go's message (``illegal base64 data at input byte N``)."""
    raw = value.encode("utf-8", "surrogatepass").replace(b"\r", b"").replace(b"\n", b"")
    for i, b in enumerate(raw):
        if b not in _STD:
            raise ValueError(f"illegal base64 data at input byte {i}")
    if len(raw) % 4:
        raise ValueError(f"illegal base64 data at input byte {len(raw) - len(raw) % 4}")
    try:
        return base64.b64decode(raw, validate=True)
    except binascii.Error as err:
        raise ValueError("illegal base64 data at input byte 0") from err


def contents(cm: Any) -> dict[str, bytes]:
    """Every key of ``cm`` with its bytes (``data`` as UTF-8, ``binaryData`` decoded); a value
    that is not what validation admits is left out."""
    out: dict[str, bytes] = {}
    if not isinstance(cm, dict):
        return out
    data, binary = cm.get("data"), cm.get("binaryData")
    for k, v in (data.items() if isinstance(data, dict) else ()):
        if isinstance(k, str) and isinstance(v, str):
            out[k] = v.encode("utf-8", "surrogatepass")
    out.update(_decoded(binary))
    return out


def _decoded(values: Any) -> dict[str, bytes]:
    """A map of base64 values decoded; a value that is not what validation admits is left
    out."""
    out: dict[str, bytes] = {}
    for k, v in (values.items() if isinstance(values, dict) else ()):
        if isinstance(k, str) and isinstance(v, str):
            try:
                out[k] = decode_binary(v)
            except ValueError:
                continue
    return out


def secret_contents(secret: Any) -> dict[str, bytes]:
    """Every key of a Secret's ``data`` with its bytes; a value that is not what validation
    admits is left out."""
    return _decoded(secret.get("data") if isinstance(secret, dict) else None)
