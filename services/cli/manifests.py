"""Reading manifests for ``apply -f``: files, directories or stdin (``-``); YAML (``---``
separated documents) or JSON (one or several concatenated values); empty documents are
skipped and ``kind: List`` (or any ``*List`` with items) is flattened. Parsing only: what
the documents mean is checked by the store.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import yaml

from services.cli.errors import CliError
from shared.store import codec

Obj = dict[str, Any]
EXTENSIONS = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class Document:
    """One object of a manifest, and the file it came from (``STDIN`` for ``-``)."""

    source: str
    obj: Obj


def _yaml_error(source: str, err: yaml.YAMLError) -> CliError:
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or str(err)
    where = f"line {mark.line + 1}: " if mark is not None else ""
    return CliError(f"error: error parsing {source}: error converting YAML to JSON: "
                    f"yaml: {where}{problem}")


def _json_values(text: str) -> Iterator[Any]:
    decoder = json.JSONDecoder()
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return
        value, pos = decoder.raw_decode(text, pos)
        yield value


def parse(text: str, source: str) -> list[Any]:
    """The documents of one manifest text (``None`` for empty YAML documents is dropped)."""
    if text.lstrip().startswith(("{", "[")):
        try:
            return list(_json_values(text))
        except json.JSONDecodeError:
            pass  # not JSON after all (e.g. a YAML flow mapping): YAML reports the error
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError as err:
        raise _yaml_error(source, err) from err
    return [d for d in docs if d is not None]


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


def load(filenames: tuple[str, ...] | list[str], stdin: IO[str],
         recursive: bool = False) -> list[Document]:
    """Every object in ``filenames`` in order (``-`` reads ``stdin``; a directory reads its
    .yaml/.yml/.json files). Raises CliError for unreadable or unparsable input."""
    out: list[Document] = []
    for name in filenames:
        if name == "-":
            sources: list[tuple[str, str]] = [("STDIN", stdin.read())]
        else:
            path = Path(name)
            if not path.exists():
                raise CliError(f'error: the path "{name}" does not exist')
            sources = []
            for f in _files(path, recursive):
                try:
                    sources.append((str(f), f.read_text(encoding="utf-8")))
                except (OSError, UnicodeDecodeError) as err:
                    raise CliError(f"error: error reading {f}: {err}") from err
        for source, text in sources:
            for value in parse(text, source):
                out.extend(Document(source, obj) for obj in _flatten(value, source))
    return out
