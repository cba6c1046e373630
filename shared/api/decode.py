"""Decoding untrusted documents, bounded: the one home of the input limits that the CLI's
manifests (``apply -f``) and the API server's request bodies share. Decides (pure): text
in, values out, :class:`DecodeError` for what is refused.

Hostile input is bounded before it is parsed, so every refusal is quick and small: a
source larger than :data:`MAX_SOURCE_BYTES` is not read, a document larger than the API
server's request limit (:data:`MAX_DOCUMENT_BYTES`) and documents beyond
:data:`MAX_DOCUMENTS` are not parsed, JSON nested deeper than :data:`MAX_DEPTH` is refused
before Python's decoder recurses, and the composer of the YAML nodes (over libyaml's
parser, which does not recurse) refuses nesting deeper than :data:`MAX_DEPTH`, aliases that
would expand to more than :data:`MAX_ALIAS_NODES` nodes, and duplicate mapping keys
(kubectl's YAML decoder refuses them; a request body's are reported as upstream's strict
decoding does) as the document is composed, before any Python object is built.

As kubectl's stream reader does, a YAML source is split into documents at lines starting
with ``---`` (only a comment may follow).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml

from shared.model import fielderr

Obj = dict[str, Any]

MAX_SOURCE_BYTES = 64 << 20
"""The largest file (or stdin) read at all."""
MAX_DOCUMENT_BYTES = 3 << 20
"""The API server's limit on a request body (``MaxRequestBodyBytes``, 3 MiB): no larger
document could be sent as one object."""
MAX_DOCUMENTS = 10_000
"""Documents (objects, after flattening Lists) one command reads."""
MAX_DEPTH = 100
"""Nesting of mappings and sequences in a document (aliases count with the depth of what
they name). Kubernetes objects of the kinds stored nest fewer than 20 levels."""
MAX_ALIAS_NODES = 100_000
"""Nodes aliases may add to one document (a "billion laughs" expands to far more)."""

try:
    from yaml._yaml import CParser as _CParser
except ImportError:  # PyYAML built without libyaml: its pure-Python parser (slower)
    from yaml.parser import Parser as _CParser  # type: ignore[assignment]
_MERGE_KEY = "<<"


class DecodeError(ValueError):
    """A document refused or not decodable; ``str()`` is the problem (what follows
    ``error parsing <source>: `` in kubectl's messages). Retrying cannot help."""


def _yaml_problem(err: yaml.YAMLError) -> str:
    mark = getattr(err, "problem_mark", None)
    if isinstance(err, yaml.reader.ReaderError):  # its text names a position in a string
        problem = str(err.reason)
    else:
        problem = getattr(err, "problem", None) or str(err)
    where = f"line {mark.line + 1}: " if mark is not None else ""
    return f"error converting YAML to JSON: yaml: {where}{problem}"


def size(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB" if n >= 1 << 20 else f"{n} bytes"


# ---- YAML: split, bound, then load -------------------------------------------------------

_SEPARATOR = re.compile(r"^---(.*)$")


def split_yaml(text: str) -> Iterator[str]:
    """kubectl's ``YAMLReader``: documents separated by lines starting with ``---``; anything
    but a comment after the ``---`` is an error (``invalid Yaml document separator``)."""
    buf: list[str] = []
    for line in text.splitlines(keepends=True):
        m = _SEPARATOR.match(line)
        if m is not None:
            rest = m.group(1).strip()
            if rest and not rest.startswith("#"):
                raise DecodeError(f"invalid Yaml document separator: {quoted_cut(rest)}")
            if buf:
                yield "".join(buf)
                buf = []
            continue
        buf.append(line)
    if buf:
        yield "".join(buf)


def quoted_cut(text: str) -> str:
    """User text inside a message: control characters escaped, cut when long."""
    return fielderr.cut(fielderr.go_quote(text)[1:-1], 200)


class _Composer(yaml.composer.Composer):
    """PyYAML's composer with the bounds checked as each node is composed, before the next
    level is entered: depth (aliases count with the height of what they name), nodes added
    by aliases, and duplicate keys of a mapping."""

    def __init__(self) -> None:
        super().__init__()
        self.duplicates: list[str] | None = None  # a list: collect duplicate keys, else refuse
        self._start_document()

    def _start_document(self) -> None:
        self._depth = 0
        self._count = 0  # nodes of the document, aliases expanded
        self._added = 0  # of which aliases added
        self._reached: list[int] = []  # per open collection: the deepest level inside it
        self._sizes: dict[str, tuple[int, int]] = {}  # anchor -> (nodes, height)

    def compose_document(self) -> Any:
        self._start_document()
        return super().compose_document()

    def _reach(self, depth: int, event: Any) -> None:
        if depth > MAX_DEPTH:
            raise DecodeError(_at(event, f"exceeded max depth of {MAX_DEPTH}"))
        if self._reached:
            self._reached[-1] = max(self._reached[-1], depth)

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()  # type: ignore[attr-defined]
        if isinstance(event, yaml.AliasEvent):
            node = super().compose_node(parent, index)
            size, height = self._sizes.get(str(event.anchor), (1, 0))
            self._count += size
            self._added += size
            if self._added > MAX_ALIAS_NODES:
                raise DecodeError("error converting YAML to JSON: yaml: document contains "
                                  "excessive aliasing")
            self._reach(self._depth + height, event)
            return node
        start = self._count
        self._count += 1
        collection = isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent))
        height = 0
        if collection:
            self._depth += 1
            self._reach(self._depth, event)
            self._reached.append(self._depth)
        node = super().compose_node(parent, index)
        if collection:
            reached = self._reached.pop()
            self._depth -= 1
            height = reached - self._depth
            self._reach(reached, event)
        if event.anchor is not None:
            self._sizes[str(event.anchor)] = (self._count - start, height)
        return node

    def compose_mapping_node(self, anchor: Any) -> Any:
        node = super().compose_mapping_node(anchor)
        seen: set[str] = set()
        for key, _value in node.value:
            if not isinstance(key, yaml.ScalarNode):
                raise DecodeError(_at(key, "a mapping key must be a string"))
            if key.value == _MERGE_KEY:
                continue
            if key.value in seen:
                problem = (f"line {_line(key)}: key "
                           f"{fielderr.cut(fielderr.go_quote(key.value), 200)} already set in map")
                if self.duplicates is None:
                    raise DecodeError("error converting YAML to JSON: yaml: unmarshal errors:"
                                      f"\n  {problem}")
                self.duplicates.append(problem)
            seen.add(key.value)
        return node


class _Loader(_Composer, _CParser, yaml.constructor.SafeConstructor,  # type: ignore[misc]
              yaml.resolver.Resolver):
    """libyaml's parser (no recursion), the bounded composer, the safe constructor."""

    def __init__(self, stream: str) -> None:
        _CParser.__init__(self, stream)
        _Composer.__init__(self)
        yaml.constructor.SafeConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)


def _at(event: Any, problem: str) -> str:
    return f"error converting YAML to JSON: yaml: line {_line(event)}: {problem}"


def _line(event: Any) -> int:
    """The line of an event or node (1-based)."""
    mark = getattr(event, "start_mark", None)
    return int(getattr(mark, "line", 0)) + 1


def load_yaml(text: str, out: list[Any]) -> None:
    """Append the documents of ``text`` to ``out``, up to the first bad one."""
    for n, chunk in enumerate(split_yaml(text)):
        if n >= MAX_DOCUMENTS:
            raise DecodeError(f"more than {MAX_DOCUMENTS} documents")
        if len(chunk.encode("utf-8", "surrogatepass")) > MAX_DOCUMENT_BYTES:
            raise DecodeError(f"a document of {size(len(chunk.encode()))} is larger than "
                              f"the {size(MAX_DOCUMENT_BYTES)} an API request may carry")
        out += _documents(chunk)


def _documents(chunk: str, duplicates: list[str] | None = None) -> list[Any]:
    """The non-empty documents of one YAML chunk, bounded; duplicate keys refused, or
    collected into ``duplicates`` when given. Raises DecodeError."""
    out: list[Any] = []
    try:
        loader = _Loader(chunk)
        loader.duplicates = duplicates
        try:
            while loader.check_data():  # type: ignore[no-untyped-call]
                doc = loader.get_data()  # type: ignore[no-untyped-call]
                if doc is not None:
                    out.append(doc)
        finally:
            loader.dispose()
    except DecodeError:
        raise
    except yaml.YAMLError as err:
        raise DecodeError(_yaml_problem(err)) from err
    except Exception as err:  # a constructor failing on a value (``!!timestamp x``)
        raise DecodeError("error converting YAML to JSON: yaml: cannot decode a value: "
                          + fielderr.cut(str(err) or type(err).__name__, 200)) from err
    return out


# ---- JSON --------------------------------------------------------------------------------

_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_JSON_BRACKET = re.compile(r"[\[\]{}]")


def _json_depth(text: str) -> int:
    """The deepest nesting of brackets outside strings (before parsing: Python's decoder
    recurses)."""
    depth = deepest = 0
    for b in _JSON_BRACKET.findall(_JSON_STRING.sub("", text)):
        depth += 1 if b in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def _json_pairs(pairs: list[tuple[str, Any]]) -> Obj:
    out: Obj = {}
    for k, v in pairs:
        if k in out:
            raise DecodeError(f"json: duplicate field {fielderr.cut(fielderr.go_quote(k), 200)}")
        out[k] = v
    return out


def json_values(text: str) -> Iterator[Any]:
    if _json_depth(text) > MAX_DEPTH:
        raise DecodeError(f"json: exceeded max depth of {MAX_DEPTH}")
    decoder = json.JSONDecoder(object_pairs_hook=_json_pairs)
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return
        start = pos
        value, pos = decoder.raw_decode(text, pos)
        if pos - start > MAX_DOCUMENT_BYTES:
            raise DecodeError(f"a document of {size(pos - start)} is larger than the "
                              f"{size(MAX_DOCUMENT_BYTES)} an API request may carry")
        yield value


def parse_into(text: str, out: list[Any]) -> None:
    """Append the documents of ``text`` (JSON values, or YAML documents) to ``out`` until
    the first bad one (DecodeError)."""
    if text.lstrip().startswith(("{", "[")):
        try:
            out += list(json_values(text))
            return
        except json.JSONDecodeError:
            out.clear()  # not JSON after all (e.g. a YAML flow mapping): YAML reports it
    load_yaml(text, out)


# ---- request bodies ----------------------------------------------------------------------


@dataclass
class Body:
    """One decoded request body and the duplicate keys it held (the last value of each
    kept; upstream's strict decoding reports them: an error under ``fieldValidation=Strict``,
    a warning under Warn)."""

    value: Any
    duplicates: list[str] = field(default_factory=list)


def _text(raw: bytes, what: str) -> str:
    if len(raw) > MAX_DOCUMENT_BYTES:
        raise TooLargeError(len(raw))
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DecodeError(f"{what}: invalid UTF-8: {err}") from err


class TooLargeError(DecodeError):
    """A body larger than :data:`MAX_DOCUMENT_BYTES` (HTTP 413 RequestEntityTooLarge)."""

    def __init__(self, n: int) -> None:
        self.size = n
        super().__init__(f"Request entity too large: limit is {MAX_DOCUMENT_BYTES}")


def json_body(raw: bytes) -> Body:
    """One JSON value of a request body, bounded (size, depth), duplicate keys collected.
    Raises DecodeError (TooLargeError for the size)."""
    text = _text(raw, "json")
    if _json_depth(text) > MAX_DEPTH:
        raise DecodeError(f"json: exceeded max depth of {MAX_DEPTH}")
    dups: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> Obj:
        out: Obj = {}
        for k, v in items:
            if k in out:
                dups.append(f"json: duplicate field {fielderr.cut(fielderr.go_quote(k), 200)}")
            out[k] = v
        return out

    try:
        value = json.loads(text, object_pairs_hook=pairs, parse_constant=_no_constant)
    except ValueError as err:
        raise DecodeError(str(err)) from err
    return Body(value, dups)


def _no_constant(name: str) -> Any:
    raise ValueError(f"invalid character '{name[0]}' looking for beginning of value")


def yaml_body(raw: bytes) -> Body:
    """The one YAML (or JSON) document of a request body (``application/apply-patch+yaml``),
    bounded as a manifest (size, depth, aliases), duplicate keys collected. Raises
    DecodeError (TooLargeError for the size)."""
    text = _text(raw, "yaml")
    docs = [d for d in split_yaml(text) if d.strip()]
    if len(docs) > 1:
        raise DecodeError("the body holds more than one YAML document")
    if not docs:
        return Body(None)
    dups: list[str] = []
    values = _documents(docs[0], dups)
    if len(values) > 1:
        raise DecodeError("the body holds more than one YAML document")
    return Body(values[0] if values else None,
                [f"yaml: unmarshal errors:\n  {d}" for d in dups])
