"""The log entry: its layout, its types, its schema version. Pure.

An entry is a Redis stream entry with these fields (all bytes), written by ``COMMIT``
(``shared.store.scripts``) and by ``replay FILE`` (the entries of an export, as they were):

=====  ==============================================================================
field  meaning
=====  ==============================================================================
v      schema version (``SCHEMA_VERSION``)
t      the entry type (:class:`EntryType`), which the write's mode decides
       (:data:`ENTRY_TYPE_OF`)
k      kind (one of ``shared.model.kinds.STORED``)
n      object key "<namespace>/<name>" (empty namespace for cluster-scoped kinds)
o      msgpack of the object (without metadata.resourceVersion: the entry id is it),
       or of the decision record for DECISION entries
u      optional: the user who made the write (through the API server)
=====  ==============================================================================

:class:`RawEntry` is those fields as they are (what export, rebuild and compaction copy);
:func:`decode` turns one into an :class:`Entry`, validated. An entry of an older schema
version is brought up to this one by the :data:`UPCASTERS` (version N → N + 1) before it is
decoded; an entry of an unknown version is refused.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from shared.eventlog import wire
from shared.eventlog.wire import check_shape, unpack
from shared.model import kinds as model_kinds
from shared.model import nodeaffinity, typed, validation
from shared.model.errors import CorruptEntryError, MalformedObjectError

SCHEMA_VERSION = 1
KINDS = frozenset(model_kinds.STORED)

Obj = dict[str, Any]
Fields = Mapping[bytes, bytes]
log = logging.getLogger(__name__)


class EntryType(StrEnum):
    """What an entry did (field ``t``)."""

    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    DECISION = "DECISION"  # a decision record: no object changes


class WriteMode(StrEnum):
    """How ``COMMIT`` writes one op (the mode of ``shared.store.client.Op``)."""

    CREATE = "create"  # refused if the object exists
    ENSURE = "ensure"  # create, or nothing if it exists
    UPDATE = "update"
    DELETE = "delete"
    RECORD = "record"  # append a decision record


class CommitResult(StrEnum):
    """What ``COMMIT`` answers for each op."""

    OK = "ok"
    EXISTS = "exists"
    CONFLICT = "conflict"
    NOTFOUND = "notfound"
    FORBIDDEN = "forbidden"
    SKIPPED = "skipped"  # its batch was refused as a whole
    FENCED = "fenced"  # the workqueue lease it was fenced by is gone
    TAKEN = "taken"  # a Service's cluster IP or node port another Service holds
    # not COMMIT's: a node agent's op added to its request stream, for node-admission to
    # commit (``shared.store.noderequests``)
    QUEUED = "queued"


#: the entry type each write mode appends (as ``COMMIT`` decides it)
ENTRY_TYPE_OF: Mapping[WriteMode, EntryType] = {
    WriteMode.CREATE: EntryType.ADDED, WriteMode.ENSURE: EntryType.ADDED,
    WriteMode.UPDATE: EntryType.MODIFIED, WriteMode.DELETE: EntryType.DELETED,
    WriteMode.RECORD: EntryType.DECISION,
}
_TYPES = {t.value: t for t in EntryType}


#: Entries are values: nothing changes one once made. They are not frozen dataclasses because
#: every reader makes two for each entry of the log, and a frozen one's ``__init__`` (a call of
#: ``object.__setattr__`` per field) costs four times a plain one's (0.9 against 0.2 µs).
@dataclass(slots=True)
class RawEntry:
    """One entry's fields as they are stored, undecoded ("" for a missing field)."""

    id: str
    version: str
    type: str
    kind: str
    key: str
    payload: bytes
    user: str = ""
    # the stream entry's fields as read (``from_fields``; None when built otherwise), and
    # whether the str fields above are exactly them (none missing, each UTF-8): when not,
    # ``decode_as_stored`` checks the stored ones; a reader parks them as they were
    stored: Fields | None = field(default=None, compare=False, repr=False)
    exact: bool = field(default=True, compare=False, repr=False)

    @classmethod
    def from_fields(cls, entry_id: bytes | str, fields: Fields) -> RawEntry:
        """From a stream entry (``XRANGE``'s id and field map). Never fails: ``decode``
        checks."""
        eid = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
        try:
            user = fields.get(b"u")
            return cls(eid, fields[b"v"].decode(), fields[b"t"].decode(),
                       fields[b"k"].decode(), fields[b"n"].decode(), fields[b"o"],
                       user.decode() if user is not None else "", fields)
        except (KeyError, UnicodeDecodeError):
            pass

        def s(name: bytes) -> str:
            raw = fields.get(name)
            return raw.decode("utf-8", "replace") if raw is not None else ""

        return cls(eid, s(b"v"), s(b"t"), s(b"k"), s(b"n"), fields.get(b"o") or b"",
                   s(b"u"), fields, exact=False)

    @classmethod
    def from_flat(cls, entry_id: bytes | str, flat: list[bytes]) -> RawEntry:
        """From a stream entry as the wire gives it: its id and its field names and values
        alternating. An entry laid out as ``COMMIT`` writes it (``fields``), each text UTF-8,
        is read from its places, nothing kept beside (``stored`` None: the fields are
        exactly these); any other as ``from_fields`` reads it."""
        eid = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
        size = len(flat)
        if (size == 10 or (size == 12 and flat[10] == b"u")) and flat[0:10:2] == _LAYOUT:
            try:
                return cls(eid, flat[1].decode(), flat[3].decode(), flat[5].decode(),
                           flat[7].decode(), flat[9], flat[11].decode() if size == 12 else "")
            except UnicodeDecodeError:
                pass
        it = iter(flat)
        return cls.from_fields(eid, dict(zip(it, it, strict=False)))

    def fields(self) -> dict[str, str | bytes]:
        """The stream fields to append (``XADD``), in the order ``COMMIT`` writes them."""
        out: dict[str, str | bytes] = {"v": self.version, "t": self.type, "k": self.kind,
                                       "n": self.key, "o": self.payload}
        if self.user:
            out["u"] = self.user
        return out


#: the names of an entry's fields, in the order ``COMMIT`` writes them (``RawEntry.fields``)
_LAYOUT = [b"v", b"t", b"k", b"n", b"o"]

#: version N → a function bringing a RawEntry of version N to version N + 1
UPCASTERS: dict[int, Callable[[RawEntry], RawEntry]] = {}


def _upcastable(eid: str, version: str) -> int:
    """The version as a number, if upcasters start from it; else raises."""
    try:
        number = int(version)
    except ValueError:
        number = -1
    if not 0 < number < SCHEMA_VERSION:
        raise CorruptEntryError(f"entry {eid}: unsupported schema version {version!r}")
    return number


def upcast(raw: RawEntry) -> RawEntry:
    """``raw`` brought up to ``SCHEMA_VERSION``; raises CorruptEntryError for a version no
    chain of upcasters leads from. Decides."""
    if raw.version == str(SCHEMA_VERSION):
        return raw
    version = _upcastable(raw.id, raw.version)
    while version < SCHEMA_VERSION:
        step = UPCASTERS.get(version)
        if step is None:
            raise CorruptEntryError(f"entry {raw.id}: no upcaster from schema version "
                                    f"{version}")
        version += 1
        raw = replace(step(raw), version=str(version), stored=None)
    return raw


@dataclass(slots=True)
class Entry:
    """One decoded, validated log entry (a value, like ``RawEntry``)."""

    id: str
    type: EntryType
    kind: str
    key: str
    obj: Obj  # the object (resourceVersion set to id), or the decision record
    user: str = ""  # who wrote it, when recorded (field "u")


def tombstone(kind: str, obj: Obj) -> Obj:
    """What is left of a malformed object's last state in its DELETED entry: its identity
    (name, namespace, uid) and the well-formed labels and ownerReferences handlers use to
    find what its deletion concerns (the owning DaemonSet). Decides."""
    md = obj["metadata"]
    errs: list[str] = []
    out_md: Obj = {f: md[f] for f in ("name", "namespace", "uid") if isinstance(md.get(f), str)}
    labels = typed.as_str_map(md.get("labels"), "labels", errs)
    if labels:
        out_md["labels"] = labels
    refs = [r for _i, r in typed.maps(md.get("ownerReferences"), "ownerReferences", errs)
            if all(isinstance(r.get(f), str) for f in ("apiVersion", "kind", "name", "uid"))
            and isinstance(r.get("controller", False), bool)]
    if refs:
        out_md["ownerReferences"] = refs
    return {"kind": kind, "apiVersion": obj.get("apiVersion"), "metadata": out_md}


def _s(fields: Fields, name: bytes) -> str:
    raw = fields.get(name)
    if raw is None:
        raise CorruptEntryError(f"missing field {name.decode()!r}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise CorruptEntryError(f"field {name.decode()!r} is not UTF-8") from err


def decode_fields(entry_id: bytes | str, fields: Fields) -> Entry:
    """Decode and validate one stream entry; raises CorruptEntryError with a clear reason."""
    eid = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    version = _s(fields, b"v")
    if version != str(SCHEMA_VERSION):
        _upcastable(eid, version)
    etype, kind, key = _s(fields, b"t"), _s(fields, b"k"), _s(fields, b"n")
    raw = fields.get(b"o")
    if raw is None:
        raise CorruptEntryError(f"entry {eid}: missing field 'o'")
    user = _s(fields, b"u") if b"u" in fields else ""
    return decode(RawEntry(eid, version, etype, kind, key, raw, user))


def decode_as_stored(raw: RawEntry) -> Entry:
    """``decode``, of an entry read from the stream as its fields were stored (a field
    missing or not UTF-8 is refused: ``decode_fields``), as the caches' reader decodes."""
    return decode(raw) if raw.exact or raw.stored is None else decode_fields(raw.id, raw.stored)


class Prior:
    """The version of a Pod or a Node a reader decoded last (its payload as stored and its
    object, which is never modified), for ``decode`` to decode the next version over: a
    status update, as the node agent and the heartbeats write it, is the same bytes up to
    the last top-level value, the status, and a pod's binding the same but for nodeName
    added last to its spec and the status replaced or added after it
    (``wire.unpack_object_over``). Its object was shape-checked when decoded, or is what
    the reading process wrote itself."""

    __slots__ = ("at", "key", "obj", "payload", "spec_at")

    def __init__(self, payload: bytes, obj: Obj) -> None:
        self.payload, self.obj = payload, obj
        self.at = -1  # where its last top-level value starts (-1: not looked yet; 0: none)
        self.key = ""  # that value's key
        self.spec_at = 0  # where its spec starts when it comes just before the status

    def last(self) -> tuple[int, str]:
        """Where its last top-level value starts in ``payload`` and its key ((0, ""): no
        text key)."""
        if self.at < 0:
            self.at, self.key = wire.last_value_at(self.payload) or (0, "")
            if self.key == "status":
                before = wire.last_value_at(self.payload, 1)
                self.spec_at = before[0] if before is not None and before[1] == "spec" else 0
        return self.at, self.key

    def packed(self, part: str) -> bytes:
        """The bytes of its top-level value ``part``: cut from ``payload`` for its status
        (when last) and its spec (just before that), else packed again."""
        at, key = self.last()
        if key == "status" and part == "status":
            return self.payload[at:]
        if key == "status" and part == "spec" and self.spec_at:
            return self.payload[self.spec_at:at - len(_STATUS_KEY)]
        return wire.pack(self.obj.get(part))


_STATUS_KEY = wire.pack("status")


#: the kinds a reader decodes over their prior version (``Prior``)
OVER_KINDS = validation.STATUS_ALONE


def _over(raw: RawEntry, prior: Prior, shape: bool) -> Obj | None:
    """``raw``'s object decoded over ``prior`` (its status alone decoded and, with
    ``shape``, checked, and a Pod's spec when it gained pairs at its end: the rest is
    ``prior``'s, checked when it was decoded), or None: the bytes differ otherwise, or
    anything in it is wrong (a whole decode then refuses it with its own reason)."""
    at, key = prior.last()
    try:
        if key == "status":
            grown = (prior.spec_at, "spec") if prior.spec_at and raw.kind == "Pod" else None
            obj = wire.unpack_object_over(raw.payload, raw.id, prior.obj, prior.payload, at,
                                          "status", grown)
        elif key == "spec" and raw.kind == "Pod":  # binding a pod created without status
            obj = wire.unpack_object_over(raw.payload, raw.id, prior.obj, prior.payload, at,
                                          "spec", add="status")
        else:
            return None
    except CorruptEntryError:
        return None
    if obj is None:
        return None
    if shape and (validation.part_shape_errors(raw.kind, "status", obj["status"])
                  or _spec_errors(obj.get("spec"), prior.obj.get("spec"))):
        return None
    return obj


def _spec_errors(spec: Any, old: Any) -> bool:
    """Whether a pod's spec decoded over ``old`` (the same, or ``old`` with pairs added
    last) has type errors: those of its nodeName alone when it gained just that, as a
    binding does (the rest was checked in ``old``)."""
    if spec is old:
        return False
    if len(spec) == len(old) + 1 and "nodeName" in spec and "nodeName" not in old:
        return bool(validation.part_shape_errors("Pod", "spec.nodeName", spec["nodeName"]))
    return bool(validation.part_shape_errors("Pod", "spec", spec))


def _checked_over(kind: str, obj: Obj, prior: Prior) -> bool:
    """Whether ``obj``, a whole decode of the version after ``prior``'s (checked), has no
    type errors, checking only the parts that differ from the prior's
    (``validation.SHAPE_PARTS``): a part that packs to the prior's bytes (the same values of
    the same types: ``1``, ``1.0`` and ``True`` are equal in Python, not in msgpack) is the
    prior's object from then on, checked when it was decoded. A pod marked for deletion
    changes its metadata alone. False: not known (``check_shape`` says what is wrong)."""
    parts = validation.SHAPE_PARTS.get(kind)
    if parts is None:
        return False
    old = prior.obj
    for part in parts:
        value, was = obj.get(part), old.get(part)
        if value is None and was is None:
            continue
        if part != "metadata" and value == was and wire.pack(value) == prior.packed(part):
            obj[part] = was
        elif validation.part_shape_errors(kind, part, value):
            return False
    return True


class Siblings:
    """The created pod a reader decoded whole last, which the next created pods are decoded
    beside (``decode``). A DaemonSet creates its pods in bursts of its burst limit, each the
    same bytes as the one before but for four texts: its name, uid and creation time, and the
    node its affinity names, packed last in its spec, itself packed last or just before the
    status (the template's, the same for all), when the template has no affinity of its
    own. A pod so laid out is decoded as those four texts put into a copy of the kept pod
    (``wire.unpack_holes``), sharing its other values (neither may be modified). Nothing of
    it needs checking: the shape check counts wrong types alone, each of the four is text
    where the kept pod, checked, has text, and none of their fields has a rule of its type
    beyond that (a name's and a node's being DNS names are other rules)."""

    __slots__ = ("layout",)

    def __init__(self) -> None:
        self.layout: _Layout | None = None

    def keep(self, payload: bytes, obj: Obj) -> None:
        """Keep a created pod decoded and checked whole, when it is laid out so."""
        self.layout = _Layout.of(payload, obj) or self.layout

    def decode(self, payload: bytes) -> Obj | None:
        """The created pod ``payload`` when it is laid out as the kept one (a whole decode's
        object, needing no check); else None."""
        layout = self.layout
        if layout is None:
            return None
        found = wire.unpack_holes(payload, layout.runs, layout.holes, layout.tail,
                                  layout.suffix)
        if found is None or type(found[1]) is not str:
            return None
        texts, node = found
        kept = layout.pod
        md = dict(kept["metadata"])
        md.update(zip(layout.fields, texts, strict=True))
        spec = dict(kept["spec"])
        spec["affinity"] = _aimed_at(node)
        obj = dict(kept)
        obj["metadata"], obj["spec"] = md, spec
        return obj


#: the metadata texts of a pod its siblings do not share
_OWN_TEXTS = ("name", "uid", "creationTimestamp")


def _aimed_at(node: str) -> Obj:
    """The affinity of a daemon pod whose template has none (``podtemplate``)."""
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                             nodeaffinity.node_name_selector(node)}}


@dataclass(frozen=True, slots=True)
class _Layout:
    """Where a created pod's own texts lie in its bytes (``Siblings``): ``runs`` of the bytes
    every sibling shares, ``holes`` of the UTF-8 of its metadata's ``fields``, ``tail``,
    where its node's packed name starts (its affinity's last value, to the spec's end), and
    ``suffix``, the bytes after the spec (its status, or none)."""

    pod: Obj
    runs: tuple[tuple[int, bytes], ...]
    holes: tuple[tuple[int, int], ...]
    fields: tuple[str, ...]
    tail: int
    suffix: bytes

    @classmethod
    def of(cls, payload: bytes, pod: Obj) -> _Layout | None:
        """The layout of ``pod`` (decoded whole from ``payload``): None unless its spec is
        packed last or just before its status, and its affinity last in the spec, exactly
        the one aiming it at a node."""
        top = wire.map_spans(payload)
        md, spec = pod.get("metadata"), pod.get("spec")
        keys = list(top) if top is not None else []
        if keys[-2:] == ["spec", "status"]:
            keys.pop()
        if top is None or not keys or keys[-1] != "spec" or "metadata" not in top \
                or not isinstance(md, dict) or not isinstance(spec, dict):
            return None
        spec_end = top["spec"][1]
        inner = wire.map_spans(payload, top["spec"][0])
        meta_spans = wire.map_spans(payload, top["metadata"][0])
        if inner is None or not inner or list(inner)[-1] != "affinity" or meta_spans is None:
            return None
        try:
            terms = spec["affinity"]["nodeAffinity"][
                "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            node = terms[0]["matchFields"][0]["values"][0]
        except (KeyError, IndexError, TypeError):
            return None
        at = inner["affinity"][0]
        if not isinstance(node, str) or wire.pack(_aimed_at(node)) != payload[at:spec_end]:
            return None
        holes: list[tuple[int, int, str]] = []
        for name in _OWN_TEXTS:
            text = md.get(name)
            if name in meta_spans and isinstance(text, str):
                first, end = meta_spans[name]
                holes.append((end - len(text.encode()), end, name))
        holes.sort()
        tail = spec_end - len(wire.pack(node))
        runs, done = [], 0
        for first, end, _name in holes:
            runs.append((done, payload[done:first]))
            done = end
        runs.append((done, payload[done:tail]))
        return cls(pod, tuple(runs), tuple((f, e) for f, e, _n in holes),
                   tuple(n for _f, _e, n in holes), tail, payload[spec_end:])


def decode(raw: RawEntry, shape: bool = True, prior: Prior | None = None,
           siblings: Siblings | None = None) -> Entry:
    """Validate and decode one entry (upcast first); raises CorruptEntryError. ``shape``:
    check the object's shape (False: only for an entry whose payload is what the reading
    process wrote itself, ``shared.store.ownwrites``). ``prior``: the version of the same
    object (kind and key) decoded before, which an update of its status alone is decoded
    over (``Prior``), whose deletion carrying the same bytes is its object, and of which
    any other update has its unchanged parts left unchecked (``_checked_over``).
    ``siblings``: the reader's created pod decoded last, which a created pod is decoded
    beside (``Siblings``). The same object, accepted or refused alike, as a whole decode."""
    raw = upcast(raw)
    eid = raw.id
    etype = _TYPES.get(raw.type)
    if etype is None:
        raise CorruptEntryError(f"entry {eid}: unknown entry type {raw.type!r}")
    kind = raw.kind
    if kind not in KINDS:
        raise CorruptEntryError(f"entry {eid}: unknown kind {kind!r}")
    key = raw.key
    ns, slash, name = key.partition("/")  # as ``ObjectKey.parse``, for a key with a "/"
    if not slash or not name:
        raise CorruptEntryError(f"entry {eid}: malformed object key {key!r}")
    if prior is not None:
        if etype is EntryType.MODIFIED:
            over = _over(raw, prior, shape)
            if over is not None:
                return Entry(eid, etype, kind, key, over, raw.user)
        elif etype is EntryType.DELETED and raw.payload == prior.payload:
            # the last version as it was: its object, at this entry's resourceVersion
            obj = {**prior.obj, "metadata": {**prior.obj["metadata"], "resourceVersion": eid}}
            return Entry(eid, etype, kind, key, obj, raw.user)
    beside: Obj | None = None
    if siblings is not None and shape and etype is EntryType.ADDED and kind == "Pod":
        beside = siblings.decode(raw.payload)
    try:
        obj = beside if beside is not None else unpack(raw.payload)
    except CorruptEntryError as err:
        raise CorruptEntryError(f"entry {eid}: {err}") from err
    if not isinstance(obj, dict):
        raise CorruptEntryError(f"entry {eid}: payload is not a map")
    if etype is not EntryType.DECISION:
        md = obj.get("metadata")
        if not isinstance(md, dict):
            raise CorruptEntryError(f"entry {eid}: object has no metadata")
        if md.get("name") != name or (md.get("namespace") or "") != ns:
            raise CorruptEntryError(f"entry {eid}: object name does not match key {key!r}")
        if obj.get("kind", kind) != kind:
            raise CorruptEntryError(f"entry {eid}: object kind {obj.get('kind')!r} != {kind!r}")
        try:
            if shape and beside is None and not (prior is not None
                                                 and etype is EntryType.MODIFIED
                                                 and _checked_over(kind, obj, prior)):
                check_shape(kind, key, obj)
        except MalformedObjectError as err:
            if etype is not EntryType.DELETED:
                raise CorruptEntryError(f"entry {eid}: {err}") from err
            # a deletion happened whatever the object looked like: readers must apply it
            log.warning("entry %s: deleted %s kept as its identity only: %s", eid, kind, err)
            obj = tombstone(kind, obj)
            md = obj["metadata"]
        md["resourceVersion"] = eid
        if siblings is not None and shape and beside is None and etype is EntryType.ADDED \
                and kind == "Pod":
            siblings.keep(raw.payload, obj)
    return Entry(eid, etype, kind, key, obj, raw.user)


def written(raw: RawEntry, obj: Obj) -> Entry:
    """The entry of an object write the reading process made itself, from ``obj``, the
    object it packed into ``raw``'s payload (``shared.store.ownwrites``): what ``decode``
    would give, unchecked and not unpacked. Its metadata is a copy with this entry's
    resourceVersion; the rest is shared with the writer's object."""
    etype = _TYPES.get(raw.type)
    if etype is None or etype is EntryType.DECISION:  # not an object write: never ours
        return decode(raw, False)
    md = {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}
    md["resourceVersion"] = raw.id
    return Entry(raw.id, etype, raw.kind, raw.key, {**obj, "metadata": md}, raw.user)


def id_tuple(entry_id: str) -> tuple[int, int]:
    """Stream id → comparable tuple ("0-0" for empty)."""
    ms, _, seq = (entry_id or "0-0").partition("-")
    try:
        return int(ms), int(seq or 0)
    except ValueError:
        return 0, 0


def id_ge(a: str, b: str) -> bool:
    return id_tuple(a) >= id_tuple(b)


def previous_id(entry_id: str) -> str:
    """The greatest id below ``entry_id`` (reading after it starts at ``entry_id``)."""
    ms, seq = id_tuple(entry_id)
    if seq:
        return f"{ms}-{seq - 1}"
    return f"{ms - 1}-{(1 << 64) - 1}" if ms else "0-0"
