"""Server-side apply: who owns which field of an object (``metadata.managedFields``), the
merge of an apply configuration into the live object, and its conflicts. Pure: objects and
managed fields in, objects and managed fields out; ``now`` is given.

It follows structured-merge-diff, the library upstream's field manager runs
(k8s.io/apimachinery ``pkg/util/managedfields``, sigs.k8s.io/structured-merge-diff
``merge/update.go``, ``typed/tofieldset.go``), at the granularity it defines, with each
field's type taken from the kind's schema (:mod:`shared.api.schema`):

- A field set holds paths of FieldsV1 elements: ``f:<field>``, ``k:{"name":"x"}`` for an
  item of a list of type ``map`` (by its key fields), ``v:"x"`` for an item of a ``set``.
  Scalars, atomic lists and maps (``x-kubernetes-list-type: atomic``, a list with no
  granular type, ``x-kubernetes-map-type: atomic``) are leaves; structs and maps are
  walked field by field; list items are members themselves (``.`` in FieldsV1).
- **Apply** (``apply``): the live object merged with the configuration (the configuration's
  leaves win; maps merge; list items merge by key; sets union), minus the fields the
  applier applied before and no longer applies, which no other manager owns (a list item
  goes whole, with what lies under it). A field the merge adds or changes that another
  manager owns is a conflict (HTTP 409 with upstream's message) unless ``force``, which
  moves it to the applier. The applier's set is exactly its configuration's fields.
  Removed fields leave every manager.
- **Update** (every other write, ``update``): the writer takes the fields it added or
  changed from every other manager, without conflicts; removed fields leave every manager.
  It starts from the managed fields it carries, if valid, else the live ones; ``[{}]``
  clears them.
- An object with no managed fields met by an apply first gives its fields to
  ``before-first-apply`` (operation Update), as upstream does.

``apiVersion``, ``kind`` and the server-set metadata (name, namespace, uid,
resourceVersion, generation, creationTimestamp, managedFields, ...) are owned by no one,
and neither is ``status`` on the main resource (upstream's reset fields).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from shared.api import schema

Obj = dict[str, Any]
Path = tuple[str, ...]
"""A field path, one FieldsV1 element per step (``("f:spec", "f:template", ...)``)."""

APPLY: Final = "Apply"
UPDATE: Final = "Update"
BEFORE_FIRST_APPLY: Final = "before-first-apply"
MAX_MANAGER_LENGTH: Final = 128

_UNOWNED_META = frozenset({"name", "namespace", "creationTimestamp", "selfLink", "uid",
                           "clusterName", "generation", "managedFields", "resourceVersion",
                           "deletionTimestamp", "deletionGracePeriodSeconds"})
_UNOWNED_TOP = frozenset({"apiVersion", "kind", "status"})
_KEY_DEFAULTS: Mapping[str, Any] = {"protocol": "TCP"}
"""Defaults of list key fields (upstream's OpenAPI declares ``protocol``'s; the schemas
shipped here lack it), so ``ports`` items without a protocol have one key."""
_LEAF = object()  # marks a path of a container (struct, map, list) in a field map


class ApplyError(ValueError):
    """A configuration the apply cannot take: not an object, a list item without its key,
    two items with one key. ``str(err)`` is the message; the answer is a 400 BadRequest.
    Retrying cannot help."""


@dataclass(frozen=True)
class Conflict:
    """Another manager owns a field the apply changes."""

    manager: Manager
    path: Path


class ConflictError(Exception):
    """An apply without ``force`` would change fields other managers own. ``str(err)`` is
    upstream's message, ``causes`` its ``details.causes`` (type FieldManagerConflict)."""

    def __init__(self, conflicts: Sequence[Conflict]) -> None:
        self.conflicts = list(conflicts)
        super().__init__(_conflict_message(self.conflicts))

    @property
    def causes(self) -> list[Obj]:
        return [{"type": "FieldManagerConflict", "message": f"conflict with "
                 f"{c.manager.printed()}", "field": path_string(c.path)}
                for c in self.conflicts]


@dataclass(frozen=True)
class Manager:
    """A manager's identity: its name, the operation, the apiVersion (Update only, as
    upstream's identifier), the subresource."""

    name: str
    operation: str
    api_version: str = ""
    subresource: str = ""

    def printed(self) -> str:
        if self.operation == UPDATE:
            return f"{_go_quote(self.name)} using {self.api_version}"
        return _go_quote(self.name)


@dataclass(frozen=True)
class Entry:
    """One ``managedFields`` item: a manager, when it last wrote, its fields."""

    manager: Manager
    fields: frozenset[Path]
    time: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)


# ---- the type of each field, from the schema -------------------------------------------


@dataclass(frozen=True)
class _Type:
    shape: str  # scalar | struct | map | listmap | set | atomic
    keys: tuple[str, ...] = ()


_MEMO_LIMIT = 50_000
_CHILDREN: dict[tuple[int, str], tuple[Any, schema.Field]] = {}
_TYPES: dict[int, tuple[Any, _Type]] = {}


def _child(f: schema.Field, key: str) -> schema.Field:
    """``f.child(key)``, remembered per schema node (the schemas are loaded once; a walk
    of an object otherwise resolves the same references again for every field)."""
    if f.schema is None:
        return schema.UNKNOWN
    memo = (id(f.schema), key)
    hit = _CHILDREN.get(memo)
    if hit is not None and hit[0] is f.schema:
        return hit[1]
    if len(_CHILDREN) > _MEMO_LIMIT:
        _CHILDREN.clear()
    found = f.child(key) if key else f.elem()
    _CHILDREN[memo] = (f.schema, found)  # the schema is kept, so its id stays its own
    return found


def _elem(f: schema.Field) -> schema.Field:
    return _child(f, "")


def _type_of(f: schema.Field, value: Any) -> _Type:
    if f.schema is None:  # a field the schema does not know: deduced, as upstream
        return _Type("struct" if isinstance(value, dict) else
                     "atomic" if isinstance(value, list) else "scalar")
    hit = _TYPES.get(id(f.schema))
    if hit is not None and hit[0] is f.schema:
        return hit[1]
    if len(_TYPES) > _MEMO_LIMIT:
        _TYPES.clear()
    found = _schema_type(f)
    _TYPES[id(f.schema)] = (f.schema, found)
    return found


def _schema_type(f: schema.Field) -> _Type:
    own = f.schema
    assert own is not None
    s = schema.resolve(own)
    map_type = own.get("x-kubernetes-map-type") or s.get("x-kubernetes-map-type")
    list_type = own.get("x-kubernetes-list-type") or s.get("x-kubernetes-list-type")
    types = s.get("type")
    kinds = set(types if isinstance(types, list) else [types]) if types else set()
    if "array" in kinds:
        if list_type == "map":
            keys = own.get("x-kubernetes-list-map-keys") or s.get("x-kubernetes-list-map-keys")
            return _Type("listmap", tuple(keys or ()))
        if list_type == "set":
            return _Type("set")
        if list_type is None and f.meta.merges:  # no list type: the patch strategy
            return _Type("listmap", (f.meta.merge_key,)) if f.meta.merge_key \
                else _Type("set")
        return _Type("atomic")
    if "object" in kinds:
        if map_type == "atomic":
            return _Type("atomic")
        if isinstance(s.get("properties"), Mapping):
            return _Type("struct")
        if isinstance(s.get("additionalProperties"), Mapping):
            return _Type("map")
        return _Type("atomic")  # free-form (RawExtension, FieldsV1)
    return _Type("scalar")


def _item_element(item: Any, t: _Type, where: Path) -> str:
    if t.shape == "set":
        return "v:" + _json(item)
    if not isinstance(item, dict):
        raise ApplyError(f"{path_string(where)}: an element of an associative list must be "
                         "an object")
    key: Obj = {}
    for k in t.keys:
        if k in item:
            key[k] = item[k]
        elif k in _KEY_DEFAULTS:
            key[k] = _KEY_DEFAULTS[k]
        else:
            raise ApplyError(f"{path_string(where)}: associative list with keys has an "
                             f'element that omits key field "{k}" (and doesn\'t have '
                             "default value)")
    return "k:" + _json(dict(sorted(key.items())))


# ---- field sets ------------------------------------------------------------------------


def _fields(value: Any, f: schema.Field, path: Path, out: dict[Path, Any]) -> None:
    """``out`` gets every path of ``value``'s field set: a leaf's value, or _LEAF for a
    member that is a container (a list item, a map entry holding an object)."""
    t = _type_of(f, value)
    if t.shape in ("scalar", "atomic") or value is None:
        out[path] = value
        return
    if t.shape in ("struct", "map"):
        if not isinstance(value, dict):
            out[path] = value
            return
        for key, item in value.items():
            sub = (*path, "f:" + key)
            _fields(item, _child(f, key), sub, out)
            if t.shape == "map" or _child(f, key).schema is None:
                out.setdefault(sub, _LEAF)
        return
    if not isinstance(value, list):
        out[path] = value
        return
    seen: set[str] = set()
    elem = _elem(f)
    for item in value:
        pe = _item_element(item, t, path)
        if pe in seen:
            raise ApplyError(f"{path_string(path)}: duplicate entries for key "
                             f"{path_string((pe,))[1:-1]}")
        seen.add(pe)
        sub = (*path, pe)
        if t.shape == "set":
            out[sub] = item
        else:
            _fields(item, elem, sub, out)
            out[sub] = _LEAF


def field_map(obj: Mapping[str, Any], root: schema.Field) -> dict[Path, Any]:
    """The owned paths of ``obj`` (server-set metadata, apiVersion, kind and status
    aside), each with its value (leaves) or a container mark. Raises ApplyError."""
    out: dict[Path, Any] = {}
    for key, value in obj.items():
        if key in _UNOWNED_TOP:
            continue
        if key == "metadata" and isinstance(value, dict):
            md = _child(root, "metadata")
            for k, v in value.items():
                if k not in _UNOWNED_META:
                    _fields(v, _child(md, k), ("f:metadata", "f:" + k), out)
            continue
        _fields(value, _child(root, key), ("f:" + key,), out)
    return out


def _changes(old: Mapping[Path, Any], new: Mapping[Path, Any]) -> tuple[set[Path], set[Path]]:
    """(added or modified, removed) between two field maps, as structured-merge-diff's
    comparison: a leaf whose value changed is modified, a container never is."""
    changed = {p for p, v in new.items()
               if p not in old or (v is not _LEAF and not _same(old[p], v))}
    return changed, set(old) - set(new)


# ---- merge and prune -------------------------------------------------------------------


def merge(live: Any, config: Any, f: schema.Field) -> Any:
    """``config`` merged into ``live`` by the schema's types (structured-merge-diff's
    merge): scalars and atomics are the configuration's, structs and maps merge key by key,
    associative lists and sets merge item by item, in the configuration's order with the
    live-only items kept before the item they preceded."""
    t = _type_of(f, config)
    if live is None or config is None or t.shape in ("scalar", "atomic"):
        return copy.deepcopy(config)
    if t.shape in ("struct", "map"):
        if not isinstance(live, dict) or not isinstance(config, dict):
            return copy.deepcopy(config)
        out = dict(live)
        for key, value in config.items():
            out[key] = merge(live.get(key), value, _child(f, key))
        return out
    if not isinstance(live, list) or not isinstance(config, list):
        return copy.deepcopy(config)
    elem = _elem(f)
    by_key = {_item_element(item, t, ()): item for item in live}
    wanted = [(_item_element(item, t, ()), item) for item in config]
    wanted_keys = {k for k, _ in wanted}
    out_list: list[Any] = []
    pending: list[Any] = []  # live-only items, waiting for the next shared one
    shared_after: dict[str, list[Any]] = {}
    for item in live:
        k = _item_element(item, t, ())
        if k in wanted_keys:
            shared_after[k] = pending
            pending = []
        else:
            pending.append(item)
    for k, item in wanted:
        out_list += shared_after.get(k, [])
        if t.shape == "set" or k not in by_key:
            out_list.append(copy.deepcopy(item))
        else:
            out_list.append(merge(by_key[k], item, elem))
    return out_list + pending


def _outermost(paths: frozenset[Path]) -> list[Path]:
    """The paths of ``paths`` under none of the others. Removing a member removes it whole
    (structured-merge-diff's RemoveItems drops a list item or field without looking
    inside), so what lies under it goes with it; removing it piece by piece would first
    strip a list item's key fields and leave an item no lookup can find."""
    return [p for p in paths if not any(p[:n] in paths for n in range(1, len(p)))]


def _remove(obj: Any, path: Path, f: schema.Field) -> None:
    """Remove the field or list item at ``path`` from ``obj`` (in place), if there. A map
    or list left empty goes too: structured-merge-diff leaves it null, a field the typed
    object omits (upstream shows no ``volumes: []`` once the last volume is pruned)."""
    node, fld = obj, f
    holder: Any = None  # the map holding ``node``, and its key there
    held = ""
    for n, pe in enumerate(path):
        if pe.startswith("f:") and isinstance(node, dict):
            at: Any = pe[2:]
            if at not in node:
                return
        elif isinstance(node, list):
            t = _type_of(fld, node)
            at = next((i for i, item in enumerate(node)
                       if _item_element(item, t, ()) == pe), None)
            if at is None:
                return
        else:
            return
        if n == len(path) - 1:
            del node[at]
            if not node and isinstance(holder, dict):
                del holder[held]
            return
        holder, held = (node, at) if isinstance(node, dict) else (None, "")
        node, fld = node[at], (_child(fld, at) if isinstance(at, str) else _elem(fld))


# ---- managed fields, encoded -----------------------------------------------------------


def decode(items: Any) -> list[Entry]:
    """The entries of a ``metadata.managedFields`` value; raises ApplyError when it is
    not a list of entries with FieldsV1."""
    if items is None:
        return []
    if not isinstance(items, list):
        raise ApplyError("metadata.managedFields must be a list")
    out = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("manager", ""), str):
            raise ApplyError("metadata.managedFields: an entry must be an object")
        op = item.get("operation")
        if op not in (APPLY, UPDATE):
            raise ApplyError(f'metadata.managedFields: operation "{op}" is neither Apply '
                             "nor Update")
        fields_v1 = item.get("fieldsV1") or {}
        if not isinstance(fields_v1, dict):
            raise ApplyError("metadata.managedFields: fieldsV1 must be an object")
        paths: set[Path] = set()
        _paths(fields_v1, (), paths)
        manager = Manager(str(item.get("manager", "")), op,
                          str(item.get("apiVersion") or "") if op == UPDATE else "",
                          str(item.get("subresource") or ""))
        extra = {"apiVersion": item["apiVersion"]} if item.get("apiVersion") else {}
        out.append(Entry(manager, frozenset(paths), str(item.get("time") or ""), extra))
    return out


def _paths(tree: Mapping[str, Any], prefix: Path, out: set[Path]) -> None:
    for key, sub in tree.items():
        if key == ".":
            out.add(prefix)
            continue
        path = (*prefix, key)
        if isinstance(sub, dict) and sub:
            _paths(sub, path, out)
        else:
            out.add(path)


def encode(entries: Iterable[Entry], api_version: str) -> list[Obj]:
    """``metadata.managedFields`` of ``entries``, in upstream's order (Apply before Update,
    then by time, manager, apiVersion, subresource), empty sets dropped."""
    out = []
    for e in sorted(entries, key=lambda e: (e.manager.operation, e.time, e.manager.name,
                                            e.manager.api_version, e.manager.subresource)):
        if not e.fields:
            continue
        item: Obj = {"manager": e.manager.name, "operation": e.manager.operation,
                     "apiVersion": e.manager.api_version or str(e.extra.get("apiVersion")
                                                                or api_version)}
        if e.time:
            item["time"] = e.time
        item["fieldsType"] = "FieldsV1"
        item["fieldsV1"] = _tree(e.fields)
        if e.manager.subresource:
            item["subresource"] = e.manager.subresource
        out.append(item)
    return out


def _tree(paths: frozenset[Path]) -> Obj:
    """FieldsV1 of a set of paths: nested ``f:``/``k:``/``v:`` keys, ``.`` marking a path
    that has children and is itself a member."""
    root: Obj = {}
    for path in paths:
        node = root
        for pe in path:
            node = node.setdefault(pe, {})
    for path in paths:
        node = root
        for pe in path:
            node = node[pe]
        if node:
            node["."] = {}
    return _ordered(root)


def _ordered(node: Obj) -> Obj:
    return {k: _ordered(node[k]) for k in sorted(node, key=lambda k: (k != ".", k))}


# ---- the operations --------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    """What a write leaves: the object and its managed fields."""

    obj: Obj
    entries: list[Entry]


def apply(live: Mapping[str, Any] | None, config: Mapping[str, Any], manager: str,
          force: bool, root: schema.Field, now: str) -> Result:
    """A server-side apply of ``config`` by ``manager`` to ``live`` (None: a create).
    Raises ConflictError (not ``force``) or ApplyError. Decides only."""
    entries = decode((live or {}).get("metadata", {}).get("managedFields")) if live else []
    live_obj: Obj = copy.deepcopy(dict(live)) if live else {}
    live_map = field_map(live_obj, root)
    if live is not None and not entries and live_map:
        entries = [Entry(Manager(BEFORE_FIRST_APPLY, UPDATE, _api_version(live_obj)),
                         frozenset(live_map), now)]
    me = Manager(manager, APPLY)
    config_set = frozenset(field_map(config, root))
    merged = merge(live_obj, dict(config), root) if live_obj else copy.deepcopy(dict(config))
    last = next((e.fields for e in entries if e.manager == me), frozenset())
    others = frozenset().union(*(e.fields for e in entries if e.manager != me))
    for path in _outermost(last - config_set - others):
        _remove(merged, path, root)
    new_map = field_map(merged, root)
    changed, removed = _changes(live_map, new_map)
    conflicts = [Conflict(e.manager, p) for e in entries if e.manager != me
                 for p in sorted(e.fields & changed)]
    if conflicts and not force:
        raise ConflictError(conflicts)
    taken = {c.path for c in conflicts}
    kept = [replace(e, fields=e.fields - taken - removed) for e in entries if e.manager != me]
    old_me = next((e for e in entries if e.manager == me), None)
    moved = bool(changed or removed) or old_me is None or old_me.fields != config_set
    mine = Entry(me, config_set, now if moved or old_me is None else old_me.time,
                 {"apiVersion": _api_version(config)})
    return Result(merged, [e for e in [mine, *kept] if e.fields])


def update(live: Mapping[str, Any] | None, new: Mapping[str, Any], manager: str,
           root: schema.Field, now: str, subresource: str = "") -> list[Entry]:
    """The managed fields after an ordinary write (create, update, patch) of ``new`` over
    ``live`` (None: a create) by ``manager``: it takes what it added or changed, over the
    entries of :func:`_base`. Raises ApplyError when an object cannot be walked. Decides
    only."""
    entries = _base(live, new)
    old_map = field_map(live, root) if live else {}
    new_map = field_map(new, root)
    changed, removed = _changes(old_map, new_map)
    me = Manager(manager, UPDATE, _api_version(new), subresource)
    out = [replace(e, fields=e.fields - changed - removed) for e in entries
           if e.manager != me]
    old_me = next((e for e in entries if e.manager == me), None)
    mine = ((old_me.fields if old_me else frozenset()) - removed) | changed
    if mine:
        when = old_me.time if old_me is not None and not changed else now
        out.append(Entry(me, frozenset(mine), when))
    return [e for e in out if e.fields]


def _base(live: Mapping[str, Any] | None, new: Mapping[str, Any]) -> list[Entry]:
    """The entries an ordinary write starts from, as upstream's decodeManagedFields: none
    when ``new`` resets them (an empty list or one empty entry, the documented way to
    clear them), ``new``'s own when they decode to any (a client may set them), else
    ``live``'s, so a client that does not know the field cannot drop or break it; none
    when the live ones do not decode either."""
    given = new.get("metadata", {}).get("managedFields")
    if _is_reset(given):
        return []
    try:
        entries = decode(given)
    except ApplyError:
        entries = []
    if entries:
        return entries
    try:
        return decode((live or {}).get("metadata", {}).get("managedFields"))
    except ApplyError:
        return []


def _is_reset(items: Any) -> bool:
    """Whether ``managedFields`` asks for a reset, as upstream's isResetManagedFields."""
    return items == [] or (isinstance(items, list) and len(items) == 1 and
                           isinstance(items[0], dict) and
                           all(v in (None, "") for v in items[0].values()))


def validate_manager(manager: str | None, applying: bool) -> str | None:
    """Upstream's PatchOptions/UpdateOptions check of ``fieldManager``: the message of
    the field error, or None."""
    if not manager:
        return "fieldManager: Required value: is required for apply patch" if applying \
            else None
    if len(manager) > MAX_MANAGER_LENGTH:
        return (f"fieldManager: Too long: may not be more than {MAX_MANAGER_LENGTH} "
                "bytes")
    if not all(c.isprintable() for c in manager):
        return (f"fieldManager: Invalid value: {_go_quote(manager)}: must only contain "
                "printable characters")
    return None


def manager_of(field_manager: str | None, user_agent: str | None) -> str:
    """The manager of an ordinary write: ``fieldManager``, else the user agent up to its
    first ``/`` (printable characters, at most 128), as upstream's managerOrUserAgent."""
    if field_manager:
        return field_manager
    prefix = (user_agent or "").split("/", 1)[0]
    return "".join(c for c in prefix if c.isprintable())[:MAX_MANAGER_LENGTH]


# ---- wording -------------------------------------------------------------------------


def path_string(path: Path) -> str:
    """A path as upstream prints it: ``.spec.template.spec.containers[name="x"].image``."""
    out = []
    for pe in path:
        kind, _, rest = pe.partition(":")
        if kind == "f":
            out.append("." + rest)
        elif kind == "k":
            key = json.loads(rest)
            out.append("[" + ",".join(f"{k}={_json(v)}" for k, v in key.items()) + "]")
        elif kind == "v":
            out.append("[=" + rest + "]")
        else:
            out.append("[" + rest + "]")
    return "".join(out)


def _conflict_message(conflicts: Sequence[Conflict]) -> str:
    if len(conflicts) == 1:
        c = conflicts[0]
        return (f"Apply failed with 1 conflict: conflict with {c.manager.printed()}: "
                f"{path_string(c.path)}")
    by: dict[str, list[Path]] = {}
    printed: dict[str, str] = {}
    for c in conflicts:
        ident = json.dumps([c.manager.name, c.manager.operation, c.manager.api_version,
                            c.manager.subresource])
        by.setdefault(ident, []).append(c.path)
        printed[ident] = c.manager.printed()
    lines = []
    for ident in sorted(by, key=lambda i: printed[i]):
        lines.append(f"conflicts with {printed[ident]}:")
        lines += [f"- {path_string(p)}" for p in by[ident]]
    return f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)


def _api_version(obj: Mapping[str, Any]) -> str:
    return str(obj.get("apiVersion") or "")


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _go_quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b
