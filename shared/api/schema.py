"""The Kubernetes object schemas, read at run time from the ``kubernetes-validate`` package's
data files, and the two rules the API takes from them: which fields of a request body are
unknown (server-side field validation) and how strategic merge patch treats each field
(patch strategy, merge key, list type). Pure: the schemas are package data, loaded once.

The schemas are those of Kubernetes :data:`KUBERNETES_VERSION`, the version of the kubectl
the project is tested with; kubernetes-validate ships them as JSON Schema (draft 2020-12, with
``"type": [T, "null"]`` and ``$ref: #/$defs/NAME``) keeping upstream's ``x-kubernetes-*``
extensions. Definitions are named as upstream names them (``io.k8s.api.apps.v1.DaemonSet``).
"""

from __future__ import annotations

import functools
import importlib.util
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.model import fielderr

KUBERNETES_VERSION = "v1.32.0"
"""The Kubernetes release whose schemas are served (kubectl 1.32's)."""

_PACKAGE = "kubernetes_validate"
_DEFINITIONS = ("kubernetes-json-schema", f"{KUBERNETES_VERSION}-local", "_definitions.json")
_REF_PREFIX = "#/$defs/"

Schema = Mapping[str, Any]


class UnknownKindError(LookupError):
    """No schema for this apiVersion/kind. Retrying cannot help."""

    def __init__(self, api_version: str, kind: str) -> None:
        self.api_version = api_version
        self.kind = kind
        super().__init__(f'no schema for kind "{kind}" in version "{api_version}"')


@functools.cache
def definitions() -> Mapping[str, Schema]:
    """Every schema definition by upstream name, loaded once from the package's data file.
    The mapping and its values are shared: read only."""
    # the package's directory, found without importing it (its import pulls in jsonschema)
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"the {_PACKAGE} package is not installed")
    path = Path(next(iter(spec.submodule_search_locations))).joinpath(*_DEFINITIONS)
    doc = json.loads(path.read_text(encoding="utf-8"))
    defs: dict[str, Schema] = doc["$defs"]
    return defs


def split_api_version(api_version: str) -> tuple[str, str]:
    """``"apps/v1"`` → ``("apps", "v1")``; ``"v1"`` → ``("", "v1")``."""
    group, _, version = api_version.rpartition("/")
    return group, version


@functools.cache
def _by_gvk() -> Mapping[tuple[str, str, str], str]:
    out: dict[tuple[str, str, str], str] = {}
    for name, schema in definitions().items():
        for gvk in schema.get("x-kubernetes-group-version-kind", ()):
            out.setdefault((gvk["group"], gvk["version"], gvk["kind"]), name)
    return out


def definition_name(api_version: str, kind: str) -> str:
    """The upstream definition name of a kind (``io.k8s.api.core.v1.Pod``).
    Raises :class:`UnknownKindError`."""
    group, version = split_api_version(api_version)
    name = _by_gvk().get((group, version, kind))
    if name is None:
        raise UnknownKindError(api_version, kind)
    return name


def ref_name(schema: Schema) -> str | None:
    """The definition a schema refers to (``$ref``, or upstream's ``allOf: [{$ref}]``)."""
    ref = schema.get("$ref")
    if ref is None and len(schema.get("allOf", ())) == 1:
        ref = schema["allOf"][0].get("$ref")
    if isinstance(ref, str) and ref.startswith(_REF_PREFIX):
        return ref[len(_REF_PREFIX):]
    return None


def resolve(schema: Schema) -> Schema:
    """The schema with its reference followed (a field's own ``description`` and extensions
    stay on the unresolved one)."""
    seen = 0
    while (name := ref_name(schema)) is not None and seen < 64:
        schema = definitions()[name]
        seen += 1
    return schema


# ---- unknown fields (strict decoding) ---------------------------------------------------


def unknown_fields(obj: Mapping[str, Any]) -> list[str]:
    """The paths of fields in ``obj`` that its kind's schema does not declare, in document
    order, as upstream's strict decoder names them: object keys joined by ``.``, list items
    as ``[i]`` (``spec.template.spec.containers[0].imagePullPolicyy``). A field inside an
    unknown one is not reported again; free-form objects (``RawExtension``, ``FieldsV1``)
    accept anything. The kind comes from ``obj``'s ``apiVersion`` and ``kind``; raises
    :class:`UnknownKindError` when no schema has them. Decides only."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        raise UnknownKindError(str(api_version), str(kind))
    return unknown_fields_of(obj, definition_name(api_version, kind))


def unknown_fields_of(value: Any, definition: str) -> list[str]:
    """:func:`unknown_fields` against a named definition (a kind whose body carries no
    ``apiVersion``/``kind``, or a part of an object such as a ``PodSpec``)."""
    out: dict[str, None] = {}  # ordered set: upstream reports each message once
    _walk(value, definitions()[definition], "", out)
    return list(out)


def unknown_field_message(path: str) -> str:
    """Upstream's wording for one unknown field (the ``Warning`` header's text under
    ``fieldValidation=Warn``)."""
    return f'unknown field "{path}"'


def strict_decoding_message(paths: Sequence[str], kind: str | None = None,
                            version: str | None = None) -> str:
    """Upstream's wording for a body refused under ``fieldValidation=Strict``; with ``kind``
    and ``version``, as a create or update reports it (``DaemonSet in version "v1" cannot
    be handled as a DaemonSet: strict decoding error: unknown field "spec.x"``)."""
    text = "strict decoding error: " + ", ".join(unknown_field_message(p) for p in paths)
    if kind:
        return undecodable_message(kind, str(version), text)
    return text


def undecodable_message(kind: str, version: str, detail: str) -> str:
    """Upstream's wording for a body its decoder refuses (``DaemonSet in version "v1"
    cannot be handled as a DaemonSet: <detail>``); ``version`` without its group."""
    return f'{kind} in version "{version}" cannot be handled as a {kind}: {detail}'


FIELD_VALIDATIONS = ("Ignore", "Warn", "Strict")


def field_validation(directive: str | None) -> str:
    """The ``fieldValidation`` query parameter: ``Ignore``, ``Warn`` (the default, also for
    absent or empty) or ``Strict``. Raises ``ValueError`` with upstream's message for any
    other value (the API server answers it as an Invalid ``CreateOptions``, ``UpdateOptions``
    or ``PatchOptions``)."""
    if not directive:
        return "Warn"
    if directive not in FIELD_VALIDATIONS:
        raise ValueError(fielderr.not_supported("fieldValidation", directive,
                                                ["", "Ignore", "Strict", "Warn"]))
    return directive


def _walk(value: Any, schema: Schema, path: str, out: dict[str, None]) -> None:
    schema = resolve(schema)
    if isinstance(value, Mapping):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            sub = f"{path}.{key}" if path else str(key)
            if props is not None:
                field = props.get(key)
                if field is None:
                    out[sub] = None
                else:
                    _walk(item, field, sub, out)
            elif isinstance(extra, Mapping):
                _walk(item, extra, sub, out)
            # else: a free-form object; anything goes
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, item in enumerate(value):
                _walk(item, items, f"{path}[{i}]", out)


# ---- quantities ------------------------------------------------------------------------

QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"


def rewrite_quantities(value: Any, definition: str,
                       rewrite: Callable[[Any, bool], Any]) -> None:
    """Replace each ``resource.Quantity`` in ``value`` (an object of the named definition)
    with ``rewrite(quantity, in_list)``, in place; ``in_list``: a value of a resource list
    (a map of quantities such as ``limits``) rather than a single field (``sizeLimit``).
    Only the fields whose schema can hold a quantity are walked. A value of the wrong type
    is left for validation. What ``rewrite`` raises comes through."""
    _rewrite(value, definitions()[definition], rewrite)


def _rewrite(value: Any, schema: Schema, rewrite: Callable[[Any, bool], Any]) -> None:
    schema = resolve(schema)
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            field = props.get(key) if props is not None else extra
            if not isinstance(field, Mapping) or item is None or not _holds_quantity(field):
                continue
            if ref_name(field) == QUANTITY:
                value[key] = rewrite(item, props is None)
            else:
                _rewrite(item, field, rewrite)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping) and _holds_quantity(items):
            for item in value:
                _rewrite(item, items, rewrite)


_HOLDS: dict[int, bool] = {}


def _holds_quantity(schema: Schema, seen: frozenset[int] = frozenset()) -> bool:
    """Whether a value of ``schema`` can contain a quantity (memoized per schema node: the
    definitions are loaded once and never change)."""
    key = id(schema)
    if key in _HOLDS:
        return _HOLDS[key]
    if key in seen:  # a recursive definition: whatever else it holds decides
        return False
    if ref_name(schema) == QUANTITY:
        _HOLDS[key] = True
        return True
    inner = seen | {key}
    target = resolve(schema)
    parts = [*(target.get("properties") or {}).values(), target.get("additionalProperties"),
             target.get("items")]
    found = any(isinstance(p, Mapping) and _holds_quantity(p, inner) for p in parts)
    _HOLDS[key] = found
    return found


# ---- strategic merge patch metadata ---------------------------------------------------


@dataclass(frozen=True)
class PatchMeta:
    """How strategic merge patch treats one field, from its schema's extensions.

    ``strategies``: ``x-kubernetes-patch-strategy`` split on ``,`` (``("merge",)``,
    ``("merge", "retainKeys")``, ``("replace",)``, or empty for the default: maps merge,
    lists are replaced); ``merge_key``: the key that identifies a list item
    (``x-kubernetes-patch-merge-key``); ``list_type``: ``atomic``, ``set`` or ``map``
    (``x-kubernetes-list-type``), or None."""

    strategies: tuple[str, ...] = ()
    merge_key: str | None = None
    list_type: str | None = None

    @property
    def merges(self) -> bool:
        return "merge" in self.strategies

    @property
    def retains_keys(self) -> bool:
        return "retainKeys" in self.strategies

    @property
    def replaces(self) -> bool:
        return "replace" in self.strategies


NO_META = PatchMeta()


@dataclass(frozen=True)
class Field:
    """One field's schema, navigable for a patch: ``meta`` from the field's own extensions,
    ``child``/``elem`` into the resolved type. ``schema`` is None for a field the schema
    does not know (it then patches with the defaults, as upstream does for unstructured
    data)."""

    schema: Schema | None
    meta: PatchMeta = NO_META

    @classmethod
    def of(cls, schema: Schema | None) -> Field:
        if schema is None:
            return UNKNOWN
        strategy = schema.get("x-kubernetes-patch-strategy")
        strategies = tuple(s for s in strategy.split(",") if s) if isinstance(strategy, str) else ()
        key = schema.get("x-kubernetes-patch-merge-key")
        list_type = schema.get("x-kubernetes-list-type")
        return cls(schema, PatchMeta(strategies, key if isinstance(key, str) else None,
                                     list_type if isinstance(list_type, str) else None))

    def child(self, name: str) -> Field:
        """The field ``name`` of this object (a struct's property, a map's value)."""
        if self.schema is None:
            return UNKNOWN
        s = resolve(self.schema)
        props = s.get("properties")
        if isinstance(props, Mapping):
            return Field.of(props.get(name))
        extra = s.get("additionalProperties")
        return Field.of(extra) if isinstance(extra, Mapping) else UNKNOWN

    def elem(self) -> Field:
        """The item of this list."""
        if self.schema is None:
            return UNKNOWN
        items = resolve(self.schema).get("items")
        return Field.of(items) if isinstance(items, Mapping) else UNKNOWN

    def path(self, names: Sequence[str]) -> Field:
        """The field at a path of names; a name may step over a list into its items."""
        field: Field = self
        for name in names:
            if field.is_list():
                field = field.elem()
            field = field.child(name)
        return field

    def is_list(self) -> bool:
        return self.schema is not None and _has_type(resolve(self.schema), "array")


UNKNOWN = Field(None)


def _has_type(schema: Schema, name: str) -> bool:
    t = schema.get("type")
    return t == name or (isinstance(t, list) and name in t)


def kind_field(api_version: str, kind: str) -> Field:
    """The root :class:`Field` of a kind. Raises :class:`UnknownKindError`."""
    return Field.of({"$ref": _REF_PREFIX + definition_name(api_version, kind)})


def patch_meta(api_version: str, kind: str, path: str | Sequence[str]) -> PatchMeta:
    """The strategic-merge metadata of the field at ``path`` of a kind (``"spec.template.
    spec.containers"``, or a sequence of names; list items are stepped over by name).
    :data:`NO_META` for a field without extensions or unknown to the schema."""
    names = path.split(".") if isinstance(path, str) else path
    return kind_field(api_version, kind).path(names).meta


def referenced(names: Sequence[str]) -> Iterator[str]:
    """``names`` and every definition they refer to, transitively, each once."""
    seen: set[str] = set()
    stack = list(reversed(names))
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        yield name
        stack.extend(sorted(_refs(definitions()[name]), reverse=True))


def _refs(schema: Any) -> set[str]:
    out: set[str] = set()
    if isinstance(schema, Mapping):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith(_REF_PREFIX):
            out.add(ref[len(_REF_PREFIX):])
        for v in schema.values():
            out |= _refs(v)
    elif isinstance(schema, list):
        for v in schema:
            out |= _refs(v)
    return out
