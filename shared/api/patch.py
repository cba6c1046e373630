"""PATCH bodies applied to an object, as the API server applies them: JSON patch (RFC 6902),
JSON merge patch (RFC 7386) and strategic merge patch, whose list handling comes from the
kind's schema (:mod:`shared.api.schema`). Pure: ``apply_patch`` decides the patched object
and never changes its arguments.

Strategic merge patch follows upstream's ``strategicpatch.StrategicMergeMapPatch`` (the
apply half of k8s.io/apimachinery's ``pkg/util/strategicpatch/patch.go``): maps merge key by
key and ``null`` deletes; a list whose field has the ``merge`` strategy merges its items by
the field's merge key (lists of scalars merge as sets), any other list is replaced; the
directives ``$patch: replace|delete`` (on a map or a list item; ``$patch: merge`` on a map is
the default, made explicit), ``$setElementOrder/<list>``, ``$retainKeys`` and
``$deleteFromPrimitiveList/<list>``; the order rule "``$setElementOrder`` > order in the
patch > order in the live list". Errors carry upstream's messages and HTTP reasons.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any, Final

import jsonpatch
import jsonpointer

from shared.api import decode, schema
from shared.model import kinds

JSON_PATCH: Final = "application/json-patch+json"
MERGE_PATCH: Final = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"
APPLY_PATCH: Final = "application/apply-patch+yaml"
PATCH_TYPES: Final = (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH)
"""The patch media types, in upstream's order (its 415 message lists them so)."""

MAX_JSON_PATCH_OPERATIONS: Final = 10000

_REASONS = {"BadRequest": 400, "RequestEntityTooLarge": 413, "UnsupportedMediaType": 415,
            "Invalid": 422}
_REJECTED = "the server rejected our request due to an error in our request"


class PatchError(ValueError):
    """A patch that cannot be applied. ``reason`` is the Status reason (``BadRequest``,
    ``Invalid``, ``UnsupportedMediaType``, ``RequestEntityTooLarge``), ``code`` its HTTP
    code, ``str(err)`` upstream's message, ``cause`` the detail upstream puts in
    ``details.causes[0].message`` (type ``UnexpectedServerResponse``) when the message is
    the generic one. Retrying the same patch cannot help."""

    def __init__(self, reason: str, message: str, cause: str | None = None) -> None:
        self.reason = reason
        self.code = _REASONS[reason]
        self.cause = cause
        super().__init__(message)


def media_type(content_type: str) -> str:
    """``application/merge-patch+json; charset=utf-8`` → ``application/merge-patch+json``."""
    return content_type.split(";", 1)[0].strip().lower()


def apply_patch(current: Mapping[str, Any], patch: object, content_type: str, kind: str,
                api_version: str | None = None) -> dict[str, Any]:
    """``current`` with ``patch`` applied per ``content_type`` (parameters such as charset
    ignored). ``patch`` is the decoded body, or the raw body (``str``/``bytes``: JSON, or
    YAML for ``apply-patch+yaml``). ``kind`` names the schema for strategic merge
    (``api_version`` defaults to the served kind's). A server-side apply body
    (``application/apply-patch+yaml``) is decoded and merged into ``current`` as a
    strategic merge patch without directives (the API server merges it by field ownership
    instead: :mod:`shared.api.managedfields`). Raises :class:`PatchError`. Decides only."""
    mtype = media_type(content_type)
    if mtype not in PATCH_TYPES:
        raise PatchError("UnsupportedMediaType",
                         "the body of the request was in an unknown format - accepted media "
                         "types include: " + ", ".join(PATCH_TYPES))
    body = _decode(patch, mtype)
    if mtype == JSON_PATCH:
        return _object(json_patch(current, body))
    if mtype == MERGE_PATCH:
        return _object(merge_patch(copy.deepcopy(dict(current)), body))
    if not isinstance(body, dict):
        raise PatchError("BadRequest", "json: cannot unmarshal "
                         f"{_json_kind(body)} into Go value of type map[string]interface {{}}")
    if mtype == APPLY_PATCH:
        body = _strip(body)[0]
    version = api_version or _api_version(kind)
    try:
        root = schema.kind_field(version, kind)
    except schema.UnknownKindError as err:
        raise PatchError("UnsupportedMediaType", f"strategic merge patch is not supported "
                         f"for {kind}") from err
    return strategic_merge_patch(current, body, root)


def json_patch(current: Any, operations: Any) -> Any:
    """RFC 6902: ``operations`` applied in order to a copy of ``current``."""
    if not isinstance(operations, list) or not all(isinstance(o, dict) for o in operations):
        raise PatchError("BadRequest", "json: cannot unmarshal "
                         f"{_json_kind(operations)} into Go value of type jsonpatch.Patch")
    if len(operations) > MAX_JSON_PATCH_OPERATIONS:
        raise PatchError("RequestEntityTooLarge", "The allowed maximum operations in a JSON "
                         f"patch is {MAX_JSON_PATCH_OPERATIONS}, got {len(operations)}")
    doc = copy.deepcopy(current)
    for op in operations:
        path = str(op.get("path", ""))
        if op.get("op") == "test" and op.get("value") is None:
            # Go's library (upstream's): a test of null holds where the value is absent
            if _absent(doc, path):
                continue
            raise PatchError("Invalid", _REJECTED, cause=_test_failed(path))
        try:
            doc = jsonpatch.JsonPatch([op]).apply(doc, in_place=True)
        except jsonpatch.InvalidJsonPatch as err:
            raise PatchError("BadRequest", str(err)) from err
        except jsonpatch.JsonPatchTestFailed as err:  # its words name Python's types
            raise PatchError("Invalid", _REJECTED, cause=_test_failed(path)) from err
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as err:
            raise PatchError("Invalid", _REJECTED, cause=str(err)) from err
    return doc


def _test_failed(path: str) -> str:
    """Upstream's words for a failed ``test`` operation (evanphx/json-patch)."""
    return f"testing value {path} failed: test failed"


def _absent(doc: Any, path: str) -> bool:
    """Whether ``path`` names nothing in ``doc`` (or null)."""
    try:
        return jsonpointer.resolve_pointer(doc, path, None) is None
    except jsonpointer.JsonPointerException:
        return True


def merge_patch(current: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(current) if isinstance(current, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def strategic_merge_patch(current: Mapping[str, Any], patch: Mapping[str, Any],
                          field: schema.Field) -> dict[str, Any]:
    """Upstream's strategic merge of ``patch`` into a copy of ``current``, the lists' merge
    keys and strategies read from ``field`` (the object's schema)."""
    return _merge_map(copy.deepcopy(dict(current)), copy.deepcopy(dict(patch)), field)


# ---- strategic merge ------------------------------------------------------------------

_DIRECTIVE = "$patch"
_RETAIN_KEYS = "$retainKeys"
_ORDER = "$setElementOrder"
_DELETE_FROM = "$deleteFromPrimitiveList"
_DROP = object()  # a value whose key or list item is to go


def _bad(message: str) -> PatchError:
    return PatchError("BadRequest", message)


_BAD_RETAIN_KEYS = "invalid patch format of retainKeys"
_BAD_ORDER = "invalid patch format of setElementOrder list"
_BAD_PRIMITIVE_LIST = "invalid patch format of primitive list"


def _merge_map(original: dict[str, Any], patch: dict[str, Any],
               field: schema.Field) -> dict[str, Any]:
    directive = patch.get(_DIRECTIVE, _DROP)
    if directive == "replace":
        del patch[_DIRECTIVE]
        replaced: dict[str, Any] = _strip(patch)[0]
        return replaced
    if directive == "delete":
        return {}
    if directive == "merge":
        del patch[_DIRECTIVE]
    elif directive is not _DROP:
        raise _bad(f"unknown patch type: {_go(directive)} in map: {_go(patch)}")
    _retain_keys(original, patch)
    _set_element_order(original, patch, field)
    for key, value in patch.items():
        delete_list = False
        if key.startswith(_DELETE_FROM + "/") or key == _DELETE_FROM:
            key = _suffix(key, _DELETE_FROM, _BAD_PRIMITIVE_LIST)
            delete_list = True
        if value is None:
            original.pop(key, None)
            continue
        if key not in original or _category(original[key]) != _category(value):
            if not delete_list:
                kept, keep = _strip(value)
                if keep:
                    original[key] = kept
                else:
                    original.pop(key, None)
            continue
        sub = field.child(key)
        if isinstance(value, dict):
            original[key] = (_strip(value)[0] if sub.meta.replaces
                             else _merge_map(original[key], value, sub))
        elif isinstance(value, list):
            original[key] = _merge_list_field(original[key], value, sub, delete_list)
        else:
            original[key] = value
    return original


def _retain_keys(original: dict[str, Any], patch: dict[str, Any]) -> None:
    if _RETAIN_KEYS not in patch:
        return
    keys = patch.pop(_RETAIN_KEYS)
    if not isinstance(keys, list):
        raise _bad(_BAD_RETAIN_KEYS)
    keep = {_key(k) for k in keys}
    for k, v in patch.items():
        if v is None or k.startswith((_DELETE_FROM, _ORDER)):
            continue
        if _key(k) not in keep:
            raise _bad(_BAD_RETAIN_KEYS)
    for k in [k for k in original if _key(k) not in keep]:
        del original[k]


def _set_element_order(original: dict[str, Any], patch: dict[str, Any],
                       field: schema.Field) -> None:
    for key in [k for k in patch if k.startswith(_ORDER)]:
        order = patch.pop(key)
        if not isinstance(order, list):
            raise _bad(f"expected a []interface {{}}, but received a {_go_type(order)}")
        name = _suffix(key, _ORDER, _BAD_ORDER)
        sub = field.child(name)
        merge_key = sub.meta.merge_key or ""
        found_original, found_patch = name in original, name in patch
        live = original.get(name) if found_original else []
        patched = patch.get(name) if found_patch else []
        if not isinstance(live, list) or not isinstance(patched, list):
            raise _bad(f"expected a []interface {{}}, but received a "
                       f"{_go_type(patched if isinstance(live, list) else live)}")
        _check_order(patched, order, merge_key)
        if found_original and found_patch:
            merged = _merge_list_field(live, patched, sub, False)
        elif found_patch:
            merged = _strip(patched)[0]
        elif found_original:
            merged = live
        else:
            continue
        in_order, server_only = _partition(merged, order, merge_key)
        original[name] = _normalize(in_order, server_only, order, live, merge_key)
        patch.pop(name, None)


def _check_order(patched: list[Any], order: list[Any], merge_key: str) -> None:
    """Upstream's validatePatchWithSetOrderList: the patch's items (deletions aside) appear
    in ``order``, in its order."""
    if not order or not patched:
        return
    items = [p for p in patched if not _is_delete(p)] if merge_key else patched
    i = j = 0
    while i < len(items) and j < len(order):
        if isinstance(items[i], dict) and _DIRECTIVE in items[i]:
            i += 1
            continue
        if _same_item(items[i], order[j], merge_key):
            i += 1
        j += 1
    if i < len(items) and j >= len(order):
        raise _bad(f"the order in patch list:\n{_go(patched)}\n doesn't match {_ORDER} list:"
                   f"\n{_go(order)}")


def _merge_list_field(original: list[Any], patch: list[Any], field: schema.Field,
                      delete_list: bool) -> list[Any]:
    if field.meta.merges or delete_list:
        return _merge_list(original, patch, field.meta.merge_key or "", field.elem(),
                           delete_list)
    replaced: list[Any] = _strip(patch)[0]
    return replaced


def _merge_list(original: list[Any], patch: list[Any], merge_key: str, elem: schema.Field,
                delete_list: bool) -> list[Any]:
    if not original and not patch:
        return original
    element = _element_category(original, patch)
    if element != "map":
        if delete_list:
            gone = {_key(v) for v in patch}
            return [v for v in original if _key(v) not in gone]
        merged = _dedupe([*original, *patch])
    else:
        if not merge_key:
            raise PatchError("Invalid", "cannot merge lists without merge key")
        original, patch = _special_elements(original, patch, merge_key)
        merged = list(original)
        for item in patch:
            value = _merge_value(item, merge_key)
            at = _find(merged, merge_key, value)
            if at is None:
                kept, keep = _strip(item)
                if keep:
                    merged.append(kept)
            else:
                merged[at] = _merge_map(merged[at], item, elem)
    in_patch, server_only = _partition(merged, patch, merge_key)
    return _normalize(in_patch, server_only, patch, original, merge_key)


def _special_elements(original: list[Any], patch: list[Any],
                      merge_key: str) -> tuple[list[Any], list[Any]]:
    plain: list[Any] = []
    replace = False
    for item in patch:
        directive = item.get(_DIRECTIVE, _DROP)
        if directive is _DROP:
            plain.append(item)
        elif directive == "delete":
            value = _merge_value(item, merge_key)
            original = [o for o in original if not _has_key_value(o, merge_key, value)]
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise _bad("merging lists cannot yet be specified in the patch")
        else:
            raise _bad(f"unknown patch type: {_go(directive)} in map: {_go(item)}")
    if replace:
        return [_strip(p)[0] for p in plain], []
    return original, plain


def _partition(merged: list[Any], by: list[Any], merge_key: str
               ) -> tuple[list[Any], list[Any]]:
    """Items of ``merged`` present in ``by`` (by merge key, or by value), and the rest."""
    inside: list[Any] = []
    outside: list[Any] = []
    if merge_key:
        for item in merged:
            value = _merge_value(item, merge_key)
            (inside if _find(by, merge_key, value) is not None else outside).append(item)
    else:
        keys = {_key(v) for v in by}
        for item in merged:
            (inside if _key(item) in keys else outside).append(item)
    return inside, outside


def _normalize(in_patch: list[Any], server_only: list[Any], patch_order: list[Any],
               server_order: list[Any], merge_key: str) -> list[Any]:
    """Upstream's normalizeElementOrder: patch items in the patch's order (deletions last),
    server-only items in the live order, the two interleaved by the live order."""
    in_patch = _sort_by(in_patch, patch_order, merge_key)
    server_only = _sort_by(server_only, server_order, merge_key)

    def index(item: Any) -> int:
        return _index(server_order, item, merge_key)

    out: list[Any] = []
    i = j = 0
    while i < len(server_only) or j < len(in_patch):
        if j >= len(in_patch):
            out.append(server_only[i])
            i += 1
        elif i >= len(server_only):
            out.append(in_patch[j])
            j += 1
        else:
            li, ri = index(server_only[i]), index(in_patch[j])
            if li >= 0 and ri >= 0 and li < ri:
                out.append(server_only[i])
                i += 1
            else:
                out.append(in_patch[j])
                j += 1
    return out


def _sort_by(items: list[Any], order: list[Any], merge_key: str) -> list[Any]:
    deletes: list[Any] = []
    if merge_key:
        for item in [*items, *order]:
            if not isinstance(item, dict):
                raise _bad(f"expected a map[string]interface {{}}, but received a "
                           f"{_go_type(item)}")
            _merge_value(item, merge_key)
        deletes = [i for i in items if _is_delete(i)]
        items = [i for i in items if not _is_delete(i)]
    placed = sorted((_index(order, item, merge_key), n, item) for n, item in enumerate(items)
                    if _index(order, item, merge_key) >= 0)
    # upstream's comparator keeps items missing from the order where a stable sort puts
    # them: all items sorted here are present, except after a failed merge-key lookup
    missing = [item for item in items if _index(order, item, merge_key) < 0]
    return [item for _, _, item in placed] + missing + deletes


def _index(items: list[Any], item: Any, merge_key: str) -> int:
    if merge_key:
        value = item.get(merge_key, _DROP) if isinstance(item, dict) else None
        for n, v in enumerate(items):
            if isinstance(v, dict) and _eq(v.get(merge_key, _DROP), value):
                return n
        return -1
    key = _key(item)
    for n, v in enumerate(items):
        if _key(v) == key:
            return n
    return -1


def _strip(value: Any) -> tuple[Any, bool]:
    """A patch value taken as it is (its key was absent from the original): directives
    and nulls dropped; ``False`` when the value itself is a ``$patch`` map."""
    if isinstance(value, dict):
        if _DIRECTIVE in value:
            return None, False
        out = {}
        for k, v in value.items():
            if v is None or k == _RETAIN_KEYS or k.startswith((_ORDER, _DELETE_FROM)):
                continue
            kept, keep = _strip(v)
            if keep:
                out[k] = kept
        return out, True
    if isinstance(value, list):
        return [k for k, keep in map(_strip, value) if keep], True
    return value, True


# ---- helpers --------------------------------------------------------------------------


def decode_body(raw: bytes | bytearray | str, content_type: str) -> decode.Body:
    """A patch body decoded by its media type (YAML for ``apply-patch+yaml``, else JSON),
    under the input bounds of :mod:`shared.api.decode`, its duplicate keys collected.
    Raises :class:`PatchError`: 413 for the size, 400 with upstream's ``error decoding
    patch``/``error decoding YAML`` for anything that does not decode."""
    data = raw.encode() if isinstance(raw, str) else bytes(raw)
    mtype = media_type(content_type)
    try:
        return decode.yaml_body(data) if mtype == APPLY_PATCH else decode.json_body(data)
    except decode.TooLargeError as err:
        raise PatchError("RequestEntityTooLarge", str(err)) from err
    except decode.DecodeError as err:
        what = "YAML" if mtype == APPLY_PATCH else "patch"
        raise PatchError("BadRequest", f"error decoding {what}: {err}") from err


def _decode(patch: object, mtype: str) -> Any:
    if not isinstance(patch, (str, bytes, bytearray)):
        return patch
    return decode_body(patch, mtype).value


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise PatchError("BadRequest", "json: cannot unmarshal "
                         f"{_json_kind(value)} into Go value of type map[string]interface {{}}")
    return value


def _api_version(kind: str) -> str:
    info = kinds.by_kind(kind)
    return info.api_version if info is not None else "v1"


def _suffix(key: str, prefix: str, message: str) -> str:
    head, sep, rest = key.partition("/")
    if head != prefix or not sep:
        raise _bad(message)
    return rest


def _category(value: Any) -> str:
    if isinstance(value, dict):
        return "map"
    if isinstance(value, list):
        return "list"
    return type(value).__name__


def _element_category(*lists: list[Any]) -> str:
    seen: str | None = None
    for items in lists:
        for item in items:
            c = _category(item)
            if seen is None:
                if c == "list":
                    raise PatchError("Invalid", "lists of lists are not supported")
                seen = c
            elif c != seen:
                raise _bad(f"list element types are not identical: {_go(list(lists))}")
    return seen or "none"


def _merge_value(item: Any, merge_key: str) -> Any:
    if not isinstance(item, dict):
        raise _bad(f"expected a map[string]interface {{}}, but received a {_go_type(item)}")
    if merge_key not in item:
        raise _bad(f"map: {_go(item)} does not contain declared merge key: {merge_key}")
    return item[merge_key]


def _find(items: list[Any], merge_key: str, value: Any) -> int | None:
    for n, item in enumerate(items):
        if not isinstance(item, dict):
            raise _bad(f"value for key {n} is not a map.")
        if _has_key_value(item, merge_key, value):
            return n
    return None


def _has_key_value(item: Any, merge_key: str, value: Any) -> bool:
    return isinstance(item, dict) and merge_key in item and _eq(item[merge_key], value)


def _same_item(a: Any, b: Any, merge_key: str) -> bool:
    if not merge_key:
        return _eq(a, b)
    return _eq(_merge_value(a, merge_key), _merge_value(b, merge_key))


def _is_delete(item: Any) -> bool:
    return isinstance(item, dict) and item.get(_DIRECTIVE) == "delete"


def _eq(a: Any, b: Any) -> bool:
    """Go's interface equality on decoded JSON: same type and value (``1 != True``)."""
    return type(a) is type(b) and a == b


def _key(value: Any) -> Any:
    """A hashable identity for a scalar list item that keeps ``1``, ``1.0`` and ``True``
    apart, as Go does."""
    if isinstance(value, (dict, list)):
        return (type(value).__name__, json.dumps(value, sort_keys=True))
    return (type(value).__name__, value)


def _dedupe(items: list[Any]) -> list[Any]:
    seen: set[Any] = set()
    out = []
    for item in items:
        k = _key(item)
        if k not in seen:
            seen.add(k)
            out.append(item)
    return out


def _json_kind(value: Any) -> str:
    names: dict[type, str] = {list: "array", dict: "object", str: "string", bool: "bool",
                              int: "number", float: "number"}
    return names.get(type(value), "null" if value is None else "value")


_GO_TYPES: Mapping[type, str] = {dict: "map[string]interface {}", list: "[]interface {}",
                                 str: "string", bool: "bool", int: "int64", float: "float64"}


def _go_type(value: Any) -> str:
    return _GO_TYPES.get(type(value), "<nil>")


def _go(value: Any) -> str:
    """``value`` as Go's ``%v`` prints decoded JSON (upstream's error messages embed it)."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_go(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(_go(v) for v in value) + "]"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
