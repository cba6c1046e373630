"""Reading manifests for ``apply -f``: files, directories or stdin (``-``); YAML (``---``
separated documents) or JSON (one or several concatenated values); empty documents are
skipped and ``kind: List`` (or any ``*List`` with items) is flattened. Parsing only: what
the documents mean is checked by the store.

Hostile input is bounded before it is parsed, so every refusal is quick and small: a source
larger than :data:`MAX_SOURCE_BYTES` is not read, a document larger than the API server's
request limit (:data:`MAX_DOCUMENT_BYTES`) and documents beyond :data:`MAX_DOCUMENTS` are not
parsed, and the composer of the YAML nodes (over libyaml's parser, which does not recurse)
refuses nesting deeper than :data:`MAX_DEPTH`, aliases that would expand to more than
:data:`MAX_ALIAS_NODES` nodes, and duplicate mapping keys (kubectl's YAML decoder refuses
them too) as the document is composed, before any Python object is built.

As kubectl's stream reader does, a YAML source is split into documents at lines starting
with ``---`` (only a comment may follow), and a parse error ends its source: the documents
before it are read, the error is reported (see ``Loaded``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import yaml

from services.cli.errors import CliError
from shared.model import fielderr
from shared.store import codec

Obj = dict[str, Any]
EXTENSIONS = (".yaml", ".yml", ".json")

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


@dataclass(frozen=True)
class Document:
    """One object of a manifest, and the file it came from (``STDIN`` for ``-``)."""

    source: str
    obj: Obj


@dataclass
class Loaded:
    """What ``load`` read: the documents, in order, and kubectl's message for each source
    (or part of one) that could not be read — the documents before a parse error are kept,
    as kubectl's builder keeps them."""

    documents: list[Document] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class _ParseError(Exception):
    """A problem with one source; ``str()`` is what follows ``error parsing <source>: ``."""


def _yaml_problem(err: yaml.YAMLError) -> str:
    mark = getattr(err, "problem_mark", None)
    if isinstance(err, yaml.reader.ReaderError):  # its text names a position in a string
        problem = str(err.reason)
    else:
        problem = getattr(err, "problem", None) or str(err)
    where = f"line {mark.line + 1}: " if mark is not None else ""
    return f"error converting YAML to JSON: yaml: {where}{problem}"


def _size(n: int) -> str:
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
                raise _ParseError(f"invalid Yaml document separator: {_quoted_cut(rest)}")
            if buf:
                yield "".join(buf)
                buf = []
            continue
        buf.append(line)
    if buf:
        yield "".join(buf)


def _quoted_cut(text: str) -> str:
    """User text inside a message: control characters escaped, cut when long."""
    return fielderr.cut(fielderr.go_quote(text)[1:-1], 200)


class _Composer(yaml.composer.Composer):
    """PyYAML's composer with the bounds checked as each node is composed, before the next
    level is entered: depth (aliases count with the height of what they name), nodes added
    by aliases, and duplicate keys of a mapping."""

    def __init__(self) -> None:
        super().__init__()
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
            raise _ParseError(_at(event, f"exceeded max depth of {MAX_DEPTH}"))
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
                raise _ParseError("error converting YAML to JSON: yaml: document contains "
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
                raise _ParseError(_at(key, "a mapping key must be a string"))
            if key.value == _MERGE_KEY:
                continue
            if key.value in seen:
                raise _ParseError(
                    "error converting YAML to JSON: yaml: unmarshal errors:\n"
                    f"  line {_line(key)}: key "
                    f"{fielderr.cut(fielderr.go_quote(key.value), 200)} already set in map")
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


def _load_yaml(text: str, out: list[Any]) -> None:
    """Append the documents of ``text`` to ``out``, up to the first bad one."""
    for n, chunk in enumerate(split_yaml(text)):
        if n >= MAX_DOCUMENTS:
            raise _ParseError(f"more than {MAX_DOCUMENTS} documents")
        if len(chunk.encode("utf-8", "surrogatepass")) > MAX_DOCUMENT_BYTES:
            raise _ParseError(f"a document of {_size(len(chunk.encode()))} is larger than "
                              f"the {_size(MAX_DOCUMENT_BYTES)} an API request may carry")
        try:
            loader = _Loader(chunk)
            try:
                while loader.check_data():  # type: ignore[no-untyped-call]
                    doc = loader.get_data()  # type: ignore[no-untyped-call]
                    if doc is not None:
                        out.append(doc)
            finally:
                loader.dispose()
        except _ParseError:
            raise
        except yaml.YAMLError as err:
            raise _ParseError(_yaml_problem(err)) from err
        except Exception as err:  # a constructor failing on a value (``!!timestamp x``)
            raise _ParseError("error converting YAML to JSON: yaml: cannot decode a value: "
                              + fielderr.cut(str(err) or type(err).__name__, 200)) from err


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
            raise _ParseError(f"json: duplicate field {fielderr.cut(fielderr.go_quote(k), 200)}")
        out[k] = v
    return out


def _json_values(text: str) -> Iterator[Any]:
    if _json_depth(text) > MAX_DEPTH:
        raise _ParseError(f"json: exceeded max depth of {MAX_DEPTH}")
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
            raise _ParseError(f"a document of {_size(pos - start)} is larger than the "
                              f"{_size(MAX_DOCUMENT_BYTES)} an API request may carry")
        yield value


def parse(text: str, source: str) -> list[Any]:
    """The documents of one manifest text (``None`` for empty YAML documents is dropped).
    Raises CliError (kubectl's ``error parsing`` message) for the first bad one."""
    out: list[Any] = []
    try:
        _parse_into(text, out)
    except _ParseError as err:
        raise CliError(f"error: error parsing {source}: {err}") from err
    return out


def _parse_into(text: str, out: list[Any]) -> None:
    """Append the documents of ``text`` to ``out`` until the first bad one (_ParseError)."""
    if text.lstrip().startswith(("{", "[")):
        try:
            out += list(_json_values(text))
            return
        except json.JSONDecodeError:
            out.clear()  # not JSON after all (e.g. a YAML flow mapping): YAML reports it
    _load_yaml(text, out)


def _flatten(value: Any, source: str) -> Iterator[Obj]:
    if not isinstance(value, dict):
        raise CliError(f"error: error parsing {source}: a manifest document must be a "
                       f"mapping, got {type(value).__name__}")
    kind = value.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(value.get("items"), list):
        for item in value["items"]:
            yield from _flatten(item, source)
        return
    yield codec.plain(value)


def _files(path: Path, recursive: bool) -> list[Path]:
    if not path.is_dir():
        return [path]
    pattern = "**/*" if recursive else "*"
    return sorted(p for p in path.glob(pattern) if p.is_file() and p.suffix in EXTENSIONS)


def _read(stream: IO[bytes], source: str) -> str:
    data = stream.read(MAX_SOURCE_BYTES + 1)
    if len(data) > MAX_SOURCE_BYTES:
        raise CliError(f"error: error reading {source}: larger than "
                       f"{_size(MAX_SOURCE_BYTES)}")
    try:
        return data.decode("utf-8") if isinstance(data, bytes) else str(data)
    except UnicodeDecodeError as err:
        raise CliError(f"error: error reading {source}: {err}") from err


def _sources(name: str, stdin: IO[Any], recursive: bool) -> Iterator[tuple[str, str]]:
    if name == "-":
        yield "STDIN", _read(getattr(stdin, "buffer", stdin), "STDIN")
        return
    path = Path(name)
    if not path.exists():
        raise CliError(f'error: the path "{_quoted_cut(name)}" does not exist')
    for f in _files(path, recursive):
        try:
            with f.open("rb") as fh:
                text = _read(fh, str(f))
        except OSError as err:
            raise CliError(f"error: error reading {f}: {err}") from err
        yield str(f), text


def load(filenames: tuple[str, ...] | list[str], stdin: IO[Any],
         recursive: bool = False) -> Loaded:
    """Every object in ``filenames`` in order (``-`` reads ``stdin``; a directory reads its
    .yaml/.yml/.json files). A missing path or an unreadable file raises CliError (nothing
    is applied, as with kubectl); a source that does not parse adds its message to
    ``errors`` after the documents before the bad one."""
    out = Loaded()
    for name in filenames:
        for source, text in _sources(name, stdin, recursive):
            values: list[Any] = []
            try:
                _parse_into(text, values)
            except _ParseError as err:
                out.errors.append(f"error: error parsing {source}: {err}")
            for value in values:
                try:
                    out.documents.extend(Document(source, obj)
                                         for obj in _flatten(value, source))
                except CliError as err:
                    out.errors.append(err.message)
                if len(out.documents) > MAX_DOCUMENTS:
                    raise CliError(f"error: more than {MAX_DOCUMENTS} objects given")
    return out
