"""The export file: a versioned msgpack stream, written and read in constant memory.

Layout (each item one msgpack value, back to back)::

    header   {"format": "daemonbus-log", "version": 1, "prefix", "created", "first", "last",
              "since", "until", "complete", "snapshot", "objects", "entrySchema"}
    objects  ["O", kind, "<ns>/<name>", resourceVersion, payload]   (the snapshot, if any)
    entries  ["E", id, v, t, k, n, o]  or  ["E", id, v, t, k, n, o, u]   (log entries, in order)
    trailer  ["Z", <entries written>, <last id>]

``payload`` and ``o`` are the exact bytes of the view hash and the log entry; ``v t k n`` are
the entry's other fields and ``u``, only when the entry has it, the user who made the write
(``shared.eventlog.entry``; ``raw_entry`` reads a record as one; files written before ``u``
was exported have no ``u`` and read as entries without a user). ``complete`` says whether the file
holds the whole history (from the start of the log, or from the snapshot it includes), which
is what a rebuild or a verification needs; ``snapshot`` is the snapshot's log id ("" if
none). A file without its trailer was cut short and is refused.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import msgpack

from shared.eventlog.entry import RawEntry

FORMAT = "daemonbus-log"
VERSION = 1
OBJECT, ENTRY, TRAILER = "O", "E", "Z"
BUFFER = 1 << 20


class LogFileError(Exception):
    """The file is not a daemonbus log export, is of an unknown version, or is damaged.
    Retrying will not help."""


@dataclass(frozen=True)
class Header:
    prefix: str
    first: str  # first entry id in the file ("" if none)
    last: str  # last entry id in the file ("" if none)
    complete: bool  # the whole history: snapshot (if any) plus every entry after it
    snapshot: str = ""  # log id of the snapshot in the file ("" = none)
    objects: int = 0  # snapshot objects in the file
    since: str = ""
    until: str = ""
    created: float = 0.0
    entry_schema: int = 1

    def to_map(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["entrySchema"] = doc.pop("entry_schema")
        return {"format": FORMAT, "version": VERSION, **doc}

    @classmethod
    def from_map(cls, doc: Any) -> Header:
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise LogFileError("not a daemonbus log export (no daemonbus-log header)")
        if doc.get("version") != VERSION:
            raise LogFileError(f"unsupported export version {doc.get('version')!r} "
                               f"(this daemonbus reads version {VERSION})")
        try:
            return cls(prefix=str(doc["prefix"]), first=str(doc["first"]),
                       last=str(doc["last"]), complete=bool(doc["complete"]),
                       snapshot=str(doc.get("snapshot") or ""),
                       objects=int(doc.get("objects") or 0), since=str(doc.get("since") or ""),
                       until=str(doc.get("until") or ""),
                       created=float(doc.get("created") or 0.0),
                       entry_schema=int(doc.get("entrySchema") or 1))
        except (KeyError, TypeError, ValueError) as err:
            raise LogFileError(f"malformed export header: {err}") from err


def raw_entry(rec: list[Any]) -> RawEntry:
    """An ``E`` record as the entry it holds (its fields as written; decode checks them)."""
    return RawEntry(rec[1], rec[2], rec[3], rec[4], rec[5], rec[6], entry_user(rec))


def entry_user(rec: list[Any]) -> str:
    """The user an ``E`` record names ("" when it has none: an older file, or a write not
    made through the API server); raises LogFileError for one that is not text."""
    if len(rec) < 8:
        return ""
    user = rec[7]
    if len(rec) > 8 or not isinstance(user, str):
        raise LogFileError(f"malformed entry record {rec[1]!r}: bad user field")
    return user


def check_entry(rec: list[Any]) -> None:
    """Raise LogFileError naming the entry when ``rec`` is not an ``E`` record of text fields
    and a bytes payload (what a rebuild copies into the log)."""
    eid = rec[1] if len(rec) > 1 else "?"
    if rec[0] != ENTRY:
        raise LogFileError(f"a {rec[0]!r} record among the entries: the snapshot's objects "
                           "come before them")
    if len(rec) < 7 or not all(isinstance(f, str) for f in rec[1:6]) or \
            not isinstance(rec[6], bytes):
        raise LogFileError(f"malformed entry record {eid!r}: fields of the wrong type")
    entry_user(rec)


class Writer:
    """Writes an export to ``path`` through a temporary file renamed into place on a clean
    close, so a failed export never leaves a file that looks whole. Acts (file IO)."""

    def __init__(self, path: str | Path, header: Header) -> None:
        self.path = Path(path)
        self.tmp = self.path.with_name(self.path.name + ".part")
        self.f: IO[bytes] = open(self.tmp, "wb", buffering=BUFFER)
        self.packer = msgpack.Packer(use_bin_type=True)
        self.entries = 0
        self.last = ""
        header = Header(**{**asdict(header), "created": header.created or time.time()})
        self.f.write(self.packer.pack(header.to_map()))

    def object(self, kind: str, key: str, rv: str, payload: bytes) -> None:
        self.f.write(self.packer.pack([OBJECT, kind, key, rv, payload]))

    def entry(self, eid: str, v: str, t: str, k: str, n: str, o: bytes, u: str = "") -> None:
        rec: list[Any] = [ENTRY, eid, v, t, k, n, o]
        if u:
            rec.append(u)
        self.f.write(self.packer.pack(rec))
        self.entries += 1
        self.last = eid

    def close(self) -> None:
        self.f.write(self.packer.pack([TRAILER, self.entries, self.last]))
        self.f.close()
        os.replace(self.tmp, self.path)

    def abort(self) -> None:
        self.f.close()
        try:
            self.tmp.unlink()
        except OSError:
            pass

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, etype: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if etype is None:
            self.close()
        else:
            self.abort()


class Reader:
    """Reads an export: ``header``, then ``records()`` yields the object and entry records
    (lists as documented above) and checks the trailer at the end. Acts (file IO)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            # unbuffered: the unpacker reads BUFFER at a time into its own buffer
            self.f: IO[bytes] = open(self.path, "rb", buffering=0)
        except OSError as err:
            raise LogFileError(f"cannot read {self.path}: {err.strerror}") from err
        self.unpacker = msgpack.Unpacker(self.f, raw=False, strict_map_key=True,
                                         max_buffer_size=256 << 20, read_size=BUFFER)
        try:
            first = self.unpacker.unpack()
        except Exception as err:
            self.f.close()
            raise LogFileError(f"{self.path} is not a daemonbus log export: {err}") from err
        try:
            self.header = Header.from_map(first)
        except LogFileError:
            self.f.close()
            raise

    def records(self) -> Iterator[list[Any]]:
        entries = 0
        try:
            for rec in self.unpacker:
                if not isinstance(rec, list) or not rec:
                    raise LogFileError(f"malformed record after {entries} entries")
                tag = rec[0]
                if tag == ENTRY:
                    entries += 1
                    yield rec
                elif tag == OBJECT:
                    yield rec
                elif tag == TRAILER:
                    if rec[1] != entries:
                        raise LogFileError(f"trailer counts {rec[1]} entries, file has {entries}")
                    return
                else:
                    raise LogFileError(f"unknown record type {tag!r}")
        except (ValueError, msgpack.ExtraData, msgpack.FormatError,
                msgpack.StackError) as err:
            raise LogFileError(f"damaged export after {entries} entries: {err}") from err
        raise LogFileError(f"export cut short after {entries} entries (no trailer)")

    def entries_of(self, etype: str) -> Iterator[list[Any]]:
        """The entry records of type ``etype`` (field ``t``), in order: a quick scan, which
        reads every record but looks no further into one than its type (``records`` checks
        the file whole: a caller that needs that reads it with ``records`` too)."""
        try:
            for rec in self.unpacker:  # once per record: two look-ups
                if rec[0] == ENTRY:
                    if rec[3] == etype:
                        yield rec
                elif rec[0] == TRAILER:
                    return
        except (TypeError, KeyError, IndexError, ValueError, msgpack.ExtraData,
                msgpack.FormatError, msgpack.StackError) as err:
            raise LogFileError(f"damaged export: {err}") from err
        raise LogFileError("export cut short (no trailer)")

    def close(self) -> None:
        self.f.close()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, etype: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
