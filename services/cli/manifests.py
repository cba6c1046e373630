"""Reading manifests for ``apply -f``: files, directories or stdin (``-``); YAML (``---``
separated documents) or JSON (one or several concatenated values); empty documents are
skipped and ``kind: List`` (or any ``*List`` with items) is flattened. Parsing only: what
the documents mean is checked by the store.

The input bounds (source and document size, documents, depth, aliases, duplicate keys) and
the bounded decoders are :mod:`shared.api.decode`'s, shared with the API server's request
bodies. As kubectl's builder does, a parse error ends its source: the documents before it
are read, the error is reported (see ``Loaded``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from services.cli.errors import CliError
from shared.api import decode
from shared.store import codec

Obj = dict[str, Any]
EXTENSIONS = (".yaml", ".yml", ".json")

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


def parse(text: str, source: str) -> list[Any]:
    """The documents of one manifest text (``None`` for empty YAML documents is dropped).
    Raises CliError (kubectl's ``error parsing`` message) for the first bad one."""
    out: list[Any] = []
    try:
        decode.parse_into(text, out)
    except decode.DecodeError as err:
        raise CliError(f"error: error parsing {source}: {err}") from err
    return out


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
    data = stream.read(decode.MAX_SOURCE_BYTES + 1)
    if len(data) > decode.MAX_SOURCE_BYTES:
        raise CliError(f"error: error reading {source}: larger than "
                       f"{decode.size(decode.MAX_SOURCE_BYTES)}")
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
        raise CliError(f'error: the path "{decode.quoted_cut(name)}" does not exist')
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
                decode.parse_into(text, values)
            except decode.DecodeError as err:
                out.errors.append(f"error: error parsing {source}: {err}")
            for value in values:
                try:
                    out.documents.extend(Document(source, obj)
                                         for obj in _flatten(value, source))
                except CliError as err:
                    out.errors.append(err.message)
                if len(out.documents) > decode.MAX_DOCUMENTS:
                    raise CliError(f"error: more than {decode.MAX_DOCUMENTS} objects given")
    return out
