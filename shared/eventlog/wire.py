"""msgpack, the encoding of everything that crosses a process boundary: log entries, view
payloads, snapshots, status messages, decision records. Pure.

Decoding never executes anything: no extension hooks, nothing is ever unpickled."""

from __future__ import annotations

import datetime as _dt
from typing import Any

import msgpack

from shared.model import validation as model_validation
from shared.model.errors import CorruptEntryError, MalformedObjectError

Obj = dict[str, Any]


def pack(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)  # type: ignore[no-any-return]


def unpack(data: bytes) -> Any:
    """Decode msgpack; never executes anything (no ext hooks, no pickle)."""
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=True, max_bin_len=64 << 20)
    except Exception as err:
        raise CorruptEntryError(f"undecodable msgpack payload: {err}") from err


def plain(value: Any) -> Any:
    """Normalise a parsed manifest to JSON-shaped data (YAML dates → RFC 3339 strings)."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.UTC)
        return value.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, _dt.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def pack_object(obj: Obj) -> bytes:
    """Pack an object for the view and the log, leaving out its resourceVersion."""
    md = obj.get("metadata")
    if isinstance(md, dict) and "resourceVersion" in md:
        obj = dict(obj)
        obj["metadata"] = {k: v for k, v in md.items() if k != "resourceVersion"}
    return pack(obj)


def check_shape(kind: str, key: str, obj: Obj) -> None:
    """Raise MalformedObjectError when a stored ``kind`` object has a field of the wrong type:
    the one check between what Redis holds (anything that can write Redis can write it) and
    the readers, which may then rely on every field's type. Decides."""
    problems = model_validation.shape_errors(kind, obj)
    if problems:
        raise MalformedObjectError(kind, key, problems)


def unpack_object(data: bytes, rv: str, kind: str = "", key: str = "") -> Obj:
    """Decode a stored object of ``kind`` (its shape checked when ``kind`` is given)."""
    obj = unpack(data)
    if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
        raise CorruptEntryError("stored object is not a Kubernetes object (no metadata)")
    if kind:
        check_shape(kind, key, obj)
    obj["metadata"]["resourceVersion"] = rv
    return obj


def _reader(data: bytes) -> msgpack.Unpacker:
    # a buffer of ``data``'s size: the default (1 MiB) is allocated and freed on each call
    reader = msgpack.Unpacker(raw=False, strict_map_key=True, max_bin_len=64 << 20,
                              max_buffer_size=max(len(data), 1))
    reader.feed(data)
    return reader


def _map_header(data: bytes, at: int) -> tuple[int, int]:
    """The number of pairs of the packed map whose header starts at ``data[at]``, and where
    its first key starts (what ``Unpacker.read_map_header`` reads, without building one for
    a few bytes). Raises ValueError when no map header is there."""
    head = data[at]
    if 0x80 <= head <= 0x8F:  # fixmap
        return head & 0x0F, at + 1
    size = 2 if head == 0xDE else 4 if head == 0xDF else 0  # map 16, map 32
    if not size or len(data) < at + 1 + size:
        raise ValueError("not a map header")
    return int.from_bytes(data[at + 1:at + 1 + size], "big"), at + 1 + size


def last_value_at(data: bytes, back: int = 0) -> tuple[int, str] | None:
    """Where the value of the last top-level key of the packed map ``data`` starts, and that
    key (``unpack_object_over`` takes them); ``back``: of the key that many before the last.
    None when ``data`` is not a map with such a key, or it is not text. Decides."""
    reader = _reader(data)
    try:
        pairs = reader.read_map_header()
        if pairs <= back:
            return None
        for _ in range(pairs - 1 - back):
            reader.skip()
            reader.skip()
        key = reader.unpack()
    except Exception:
        return None  # not a map, or cut short: a full decode says what is wrong
    return (reader.tell(), key) if isinstance(key, str) else None


def _text_at(data: bytes, at: int) -> tuple[str, int] | None:
    """The text packed at ``data[at]`` (up to 255 bytes of UTF-8) and where it ends; None
    when no such text is there (a full decode says what is)."""
    head = data[at] if at < len(data) else -1
    if 0xA0 <= head <= 0xBF:  # fixstr
        size, first = head & 0x1F, at + 1
    elif head == 0xD9 and at + 1 < len(data):  # str 8
        size, first = data[at + 1], at + 2
    else:
        return None
    if first + size > len(data):
        return None
    try:
        return data[first:first + size].decode(), first + size
    except UnicodeDecodeError:
        return None


def _map_grown(data: bytes, d: int, base_data: bytes, b: int, b_end: int, old: Obj,
               then: bytes) -> tuple[Obj, int] | None:
    """The map at ``data[d:]`` when it is the map ``old`` of ``base_data[b:b_end]`` with
    pairs of new text keys added at its end, followed by the bytes ``then`` (a packed key):
    it (``old`` itself when none were added), and where ``then`` ends in ``data``; None
    when it is not. Raises on what is not msgpack."""
    pairs, b_body = _map_header(base_data, b)
    new_pairs, start = _map_header(data, d)
    body = base_data[b_body:b_end]
    if new_pairs < pairs or not data.startswith(body, start):
        return None
    end, grown = start + len(body), old
    key = _text_at(data, end) if new_pairs == pairs + 1 else None
    text = _text_at(data, key[1]) if key is not None and key[0] not in old else None
    if key is not None and text is not None:  # one text pair added, as a binding adds
        end, grown = text[1], {**old, key[0]: text[0]}
    elif new_pairs > pairs:
        now = _reader(data[end:])
        added: Obj = {}
        for _ in range(new_pairs - pairs):
            name = now.unpack()
            if not isinstance(name, str) or name in old or name in added:
                return None
            added[name] = now.unpack()
        end, grown = end + now.tell(), {**old, **added}
    return (grown, end + len(then)) if data[end:end + len(then)] == then else None


def _grown(data: bytes, base_data: bytes, at: int, key: str, grown: tuple[int, str],
           base: Obj) -> tuple[Obj, int] | None:
    """``unpack_object_over``'s ``grown`` case: the map before the last value with the
    pairs it gained at its end in ``data``, and where ``data``'s last value starts; None
    when ``data`` is not laid out so."""
    g_at, g_key = grown
    old = base.get(g_key)
    if g_key == "metadata" or not isinstance(old, dict) or not data.startswith(base_data[:g_at]):
        return None
    last_key = pack(key)
    try:
        return _map_grown(data, g_at, base_data, g_at, at - len(last_key), old, last_key)
    except Exception:
        return None  # a full decode says what is wrong


def _added(data: bytes, base_data: bytes, at: int, key: str, base: Obj,
           add: str) -> tuple[Obj, int] | None:
    """``unpack_object_over``'s ``add`` case: the last value, a map, with the pairs it
    gained at its end in ``data``, and where the value ``data`` adds after it starts; None
    when ``data`` is not laid out so."""
    old = base.get(key)
    if key == "metadata" or not isinstance(old, dict) or add in base:
        return None
    try:
        pairs, hb = _map_header(base_data, 0)  # the objects' map headers
        new_pairs, hd = _map_header(data, 0)
        if new_pairs != pairs + 1 or not data.startswith(base_data[hb:at], hd):
            return None
        return _map_grown(data, hd + at - hb, base_data, at, len(base_data), old, pack(add))
    except Exception:
        return None  # a full decode says what is wrong


def map_spans(data: bytes, at: int = 0) -> dict[str, tuple[int, int]] | None:
    """Where the value of each key of the packed map at ``data[at]`` starts and ends, by key
    in their order; None when it is not a map of distinct text keys within ``data``.
    Decides."""
    try:
        pairs, start = _map_header(data, at)
        reader = _reader(data[start:])
        spans: dict[str, tuple[int, int]] = {}
        for _ in range(pairs):
            key = reader.unpack()
            if not isinstance(key, str) or key in spans:
                return None
            first = start + reader.tell()
            reader.skip()
            spans[key] = (first, start + reader.tell())
    except Exception:
        return None  # not a map, or cut short
    return spans


def unpack_holes(data: bytes, runs: tuple[tuple[int, bytes], ...],
                 holes: tuple[tuple[int, int], ...], tail: int,
                 suffix: bytes = b"") -> tuple[list[str], Any] | None:
    """The texts in ``holes`` ((start, end) of each one's UTF-8 bytes) of ``data`` and the
    value packed from ``tail`` to where ``suffix`` ends it, when ``data`` holds the bytes of
    ``runs`` ((offset, bytes), covering all of it before ``tail`` but the holes) everywhere
    else: a packed object laid out as another whose runs and suffix they are
    (``entry.Siblings``), whose text values in the holes, their headers in the runs, are of
    the same lengths. None when ``data`` is laid out otherwise, a hole is not UTF-8 (as
    msgpack decodes a str), or the tail is not one whole value. Decides."""
    stop = len(data) - len(suffix)
    if stop <= tail or not data.endswith(suffix):
        return None
    for at, run in runs:
        if not data.startswith(run, at):
            return None
    try:
        texts = [data[first:end].decode() for first, end in holes]
        return texts, unpack(data[tail:stop])
    except (UnicodeDecodeError, CorruptEntryError):
        return None


def unpack_object_over(data: bytes, rv: str, base: Obj, base_data: bytes, at: int,
                       key: str, grown: tuple[int, str] | None = None,
                       add: str = "") -> Obj | None:
    """``unpack_object(data, rv)`` (no shape check) of a newer version of the object ``base``
    (``base_data`` decoded, whose last top-level value starts at ``at`` under ``key``:
    ``last_value_at``) when ``data`` holds the same bytes up to ``at``, as a status update
    does: only the last value is decoded. msgpack values delimit themselves, so the bytes
    before ``at`` decode to ``base``'s other values, which the result shares (neither object
    may be modified); its metadata is a copy with ``rv``. ``grown``: where the value before
    the last starts and its key (``last_value_at(base_data, 1)``), a map (not the metadata)
    that may have gained pairs at its end, as a pod's spec gains ``nodeName`` when it is
    bound: those pairs are decoded too, and the map is a copy sharing its other values.
    ``add``: a key ``base`` lacks, whose value ``data`` adds last, after the last value
    (a map, which may have gained pairs at its end), as binding a pod created without a
    status does (nodeName added last to its spec, the status after it). None when the
    bytes differ otherwise. Decides."""
    changed: Obj = {}
    if add:
        found = _added(data, base_data, at, key, base, add)
        if found is None:
            return None
        changed[key], at = found
        key = add
    elif not (len(data) > at and data.startswith(base_data[:at])):
        found = _grown(data, base_data, at, key, grown, base) if grown is not None else None
        if found is None:
            return None
        assert grown is not None
        changed[grown[1]], at = found
    value = unpack(data[at:])
    obj = dict(base)
    obj.update(changed)
    obj[key] = value
    if key == "metadata":
        if not isinstance(value, dict):
            raise CorruptEntryError("stored object is not a Kubernetes object (no metadata)")
        md = value
    else:
        md = obj["metadata"] = dict(base["metadata"])
    md["resourceVersion"] = rv
    return obj
