"""The REST verbs on stored objects: get, list, create, update, patch, delete,
deletecollection, the ``/status`` and ``/ephemeralcontainers`` subresources and pod
eviction. Acts: every read is the view (``Store.snapshot`` / ``get``), every write the
store's one commit, as the request's user (``Store.as_writer``), so the log names who made
each change.

The functions here run in a worker thread (the store is synchronous); ``app`` calls them
through the executor. Each returns ``(HTTP code, document)`` or raises ApiError.
"""

from __future__ import annotations

import copy
import functools
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from services.apiserver import listing, requests
from services.apiserver import status as st
from services.apiserver.requests import Target
from shared.api import managedfields, schema, served, writes
from shared.api import patch as api_patch
from shared.api import warnings as api_warnings
from shared.model import meta
from shared.store import client as store_client
from shared.store import errors

Obj = dict[str, Any]
Store = store_client.Store

PROPAGATION = {"Background": "background", "Foreground": "foreground", "Orphan": "orphan"}
PATCH_RETRIES = store_client.CONFLICT_RETRIES


def not_allowed(t: Target, verb: str) -> st.ApiError:
    """The 405 of a verb ``t``'s resource does not serve."""
    return st.ApiError("MethodNotAllowed", f"the server does not allow this method on the "
                       f"requested resource ({verb} {t.resource.info.plural})")


def _list_kind(kind: str) -> str:
    return kind + "List"


def api_version_of(kind: str) -> str:
    r = served.by_kind(kind)
    return r.info.api_version if r else "v1"


def get(store: Store, t: Target, served_namespace: Callable[[str], Obj | None]) -> Obj:
    """The object ``t`` names (a Namespace as the watch cache serves it)."""
    if t.kind == "Namespace":
        assert t.name is not None
        found = served_namespace(t.name)
        if found is None:
            raise st.not_found("Namespace", t.name)
        return with_type(copy.deepcopy(found))
    try:
        obj = store.get(t.kind, t.key)
    except errors.StoreError as err:
        raise st.from_store(err) from err
    return with_type(obj)


def with_type(obj: Obj) -> Obj:
    """The object with its apiVersion and kind (stored objects carry them; be sure)."""
    kind = str(obj.get("kind") or "")
    if not obj.get("apiVersion"):
        obj["apiVersion"] = api_version_of(kind)
    return obj


def list_objects(store: Store, t: Target, query: Mapping[str, str]) -> tuple[str, list[Obj]]:
    """The log position and the objects a list selects, sorted by namespace and name."""
    match = listing.matcher(t, query)
    try:
        tip, objs = store.snapshot([t.kind])
    except errors.StoreError as err:
        raise st.from_store(err) from err
    return tip, listed([o for o in objs[t.kind] if match(o)])


def listed(objs: list[Obj]) -> list[Obj]:
    """Objects as a list serves them: typed, sorted by namespace and name."""
    items = [with_type(o) for o in objs]
    items.sort(key=lambda o: (meta.namespace(o), meta.name(o)))
    return items


def log_tip(store: Store) -> str:
    """The newest log position."""
    try:
        tip, _ = store.snapshot([])
    except errors.StoreError as err:
        raise st.from_store(err) from err
    return tip


def list_document(kind: str, rv: str, items: list[Obj], cont: str = "",
                  remaining: int | None = None) -> Obj:
    md: Obj = {"resourceVersion": rv}
    if cont:
        md["continue"] = cont
    if remaining is not None:
        md["remainingItemCount"] = remaining
    return {"kind": _list_kind(kind), "apiVersion": api_version_of(kind), "metadata": md,
            "items": items}


# ---- writes --------------------------------------------------------------------------------


def _settle_identity(t: Target, body: Obj, creating: bool) -> Obj:
    """The body checked against the URL: its kind, apiVersion, namespace and name."""
    if not isinstance(body, dict):
        raise st.bad_request("the body must be a JSON object")
    info = t.resource.info
    body.setdefault("apiVersion", info.api_version)
    body.setdefault("kind", info.kind)
    if body.get("kind") != info.kind or body.get("apiVersion") != info.api_version:
        raise st.bad_request(f"the API version in the data ({body.get('apiVersion')}) and "
                             f"kind ({body.get('kind')}) do not match the resource "
                             f"{info.plural} ({info.api_version})")
    md = body.setdefault("metadata", {})
    if not isinstance(md, dict):
        raise st.bad_request("metadata must be an object")
    if info.namespaced:
        given = md.get("namespace")
        if given and given != t.namespace:
            raise st.bad_request("the namespace of the provided object does not match the "
                                 "namespace sent on the request")
        md["namespace"] = t.namespace
    else:
        md.pop("namespace", None)
    if creating and not md.get("name") and md.get("generateName"):
        suffix = "".join(random.choices(meta.NAME_ALPHABET, k=meta.NAME_RANDOM_LENGTH))
        md["name"] = meta.generated_name(str(md["generateName"]), suffix)
    if not creating:
        if md.get("name") and md["name"] != t.name:
            raise st.bad_request(f'the name of the object ({md["name"]}) does not match the '
                                 f"name on the URL ({t.name})")
        md["name"] = t.name
    return body


FIELD_VALIDATION = ("Strict", "Warn", "Ignore")


@dataclass
class FieldCheck:
    """``fieldValidation``: unknown fields (by the kind's schema) refuse the write
    (Strict), become ``Warning`` headers (Warn, upstream's default) or pass (Ignore)."""

    mode: str = "Warn"
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, query: Mapping[str, str]) -> FieldCheck:
        mode = query.get("fieldValidation") or "Warn"
        if mode not in FIELD_VALIDATION:
            raise st.bad_request(f'fieldValidation: Unsupported value: "{mode}": supported '
                                 'values: "Ignore", "Strict", "Warn"')
        return cls(mode)

    def check(self, obj: Obj) -> None:
        """Collect the write's warnings: those of the API rules (``shared.api.warnings``),
        whatever the mode, and the unknown fields per the mode."""
        self.warnings += api_warnings.warnings(obj)
        if self.mode == "Ignore":
            return
        try:
            unknown = schema.unknown_fields(obj)
        except schema.UnknownKindError:
            return
        if unknown and self.mode == "Strict":
            raise st.bad_request(schema.strict_decoding_message(unknown))
        self.warnings += [schema.unknown_field_message(u) for u in unknown]

    def duplicated(self, problems: list[str]) -> None:
        """Duplicate keys of the body (the last value kept), as upstream's strict
        decoding reports them."""
        if not problems or self.mode == "Ignore":
            return
        if self.mode == "Strict":
            raise st.bad_request("strict decoding error: " + ", ".join(problems))
        self.warnings += problems


@dataclass(frozen=True)
class Manager:
    """Who a write's fields belong to (``fieldManager``, else the user agent's name) and,
    for a server-side apply, ``force``."""

    name: str = ""
    force: bool | None = None

    @classmethod
    def of(cls, query: Mapping[str, str], user_agent: str | None, verb: str,
           content_type: str | None) -> Manager:
        """The manager of a request; raises ApiError Invalid as upstream's options check
        (``fieldManager`` required for apply, ``force`` only for apply)."""
        applying = verb == "patch" and content_type is not None and \
            api_patch.media_type(content_type) == api_patch.APPLY_PATCH
        given = query.get("fieldManager")
        problem = managedfields.validate_manager(given, applying)
        force = requests.boolean(query["force"]) if "force" in query else None
        if problem is None and force is not None and not applying:
            problem = "force: Forbidden: may not be specified for non-apply patch"
        if problem is not None:
            options = "PatchOptions" if verb == "patch" else \
                "CreateOptions" if verb == "create" else "UpdateOptions"
            raise st.options_invalid(options, [problem])
        return cls(managedfields.manager_of(given, user_agent), force)


def _now(store: Store) -> str:
    return meta.format_time(store.clock())


def _root(t: Target) -> schema.Field:
    return _kind_root(t.resource.info.api_version, t.kind)


@functools.cache
def _kind_root(api_version: str, kind: str) -> schema.Field:
    """A kind's schema root, one per kind (managedfields remembers walks per schema node)."""
    return schema.kind_field(api_version, kind)


def _track(store: Store, t: Target, live: Obj | None, new: Obj, who: Manager) -> None:
    """Record ``who``'s ordinary write of ``new`` over ``live`` in ``new``'s
    managedFields (operation Update). The /status subresource keeps the object's."""
    md = new.setdefault("metadata", {})
    if t.sub is not None:
        if live is not None:
            md["managedFields"] = copy.deepcopy(meta.metadata(live).get("managedFields"))
        if md.get("managedFields") is None:
            md.pop("managedFields", None)
        return
    try:
        entries = managedfields.update(live, new, who.name, _root(t), _now(store))
    except managedfields.ApplyError as err:
        raise st.bad_request(str(err)) from err
    encoded = managedfields.encode(entries, t.resource.info.api_version)
    if encoded:
        md["managedFields"] = encoded
    else:
        md.pop("managedFields", None)


def create(store: Store, t: Target, body: Obj, dry: bool,
           fields: FieldCheck | None = None, who: Manager | None = None) -> tuple[int, Obj]:
    obj = _settle_identity(t, body, creating=True)
    (fields or FieldCheck()).check(obj)
    _track(store, t, None, obj, who or Manager())
    return _commit_create(store, t, obj, dry)


def _commit_create(store: Store, t: Target, obj: Obj, dry: bool,
                   created: str | None = None) -> tuple[int, Obj]:
    try:
        out = store.create(obj, dry=dry, created=created)
    except errors.AlreadyExistsError as err:
        refused = st.from_store(err)
        there = store.try_get(err.kind, err.key)
        if there is not None and meta.is_being_deleted(there):  # as upstream's registry says
            refused.status["message"] = "object is being deleted: " + \
                refused.status["message"]
        raise refused from err
    except errors.StoreError as err:
        raise st.from_store(err) from err
    return 201, with_type(out)


def _current(store: Store, t: Target, implicit: Obj | None) -> tuple[Obj, bool]:
    """The object ``t`` names as stored, and False; for a namespace without an object (as
    served: ``implicit``), that, and True: the write creates its object. Raises
    StoreError."""
    try:
        return store.get(t.kind, t.key), False
    except errors.NotFoundError:
        if implicit is None:
            raise
        return copy.deepcopy(implicit), True


def update(store: Store, t: Target, body: Obj, dry: bool,
           fields: FieldCheck | None = None, who: Manager | None = None,
           implicit: Obj | None = None) -> tuple[int, Obj]:
    """PUT; ``implicit``: the namespace ``t`` names as served when it has no object."""
    obj = _settle_identity(t, body, creating=False)
    (fields or FieldCheck()).check(obj)
    try:
        obj = writes.decoded(obj)
        current, creating = _current(store, t, implicit)
        _track(store, t, current, obj, who or Manager())
        if creating:
            meta.metadata(obj).pop("resourceVersion", None)
            return 200, _commit_create(store, t, obj, dry,
                                       meta.creation_timestamp(current))[1]
        if t.sub == "finalize":
            left = store.finalize(obj, dry=dry)
            return 200, with_type(left if left is not None else obj)
        out = _update_of(store, t, obj, dry, replace=True)
    except errors.StoreError as err:
        raise st.from_store(err) from err
    return 200, with_type(out)


def patch(store: Store, t: Target, body: Any, content_type: str,
          dry: bool, fields: FieldCheck | None = None,
          who: Manager | None = None, implicit: Obj | None = None) -> tuple[int, Obj]:
    """Apply a JSON, merge or strategic merge patch (``shared.api.patch``) to the current
    object and update it, retrying on a conflict unless the patch pins a resourceVersion;
    a server-side apply goes to :func:`server_side_apply`. ``implicit``: the namespace
    ``t`` names as served when it has no object (patched, it is created)."""
    who = who or Manager()
    if api_patch.media_type(content_type) == api_patch.APPLY_PATCH:
        return server_side_apply(store, t, body, dry, fields or FieldCheck(), who)
    check = fields or FieldCheck()
    decoded = len(check.warnings)  # the body's own (duplicate keys); each try adds its
    for _ in range(PATCH_RETRIES):
        try:
            current, creating = _current(store, t, implicit)
        except errors.StoreError as err:
            raise st.from_store(err) from err
        new = _patched(current, body, content_type, t.kind)
        asked_rv = meta.resource_version(new)
        pinned = bool(asked_rv) and asked_rv != meta.resource_version(current)
        new = _settle_identity(t, new, creating=False)
        del check.warnings[decoded:]
        check.check(new)
        if not pinned:
            new["metadata"]["resourceVersion"] = meta.resource_version(current)
        try:
            new = writes.decoded(new)
        except errors.StoreError as err:
            raise st.from_store(err) from err
        if new == current and not creating:
            return 200, with_type(current)
        _track(store, t, current, new, who)
        if creating:
            new["metadata"].pop("resourceVersion", None)
            try:
                return 200, with_type(store.create(new, dry=dry,
                                                   created=meta.creation_timestamp(current)))
            except errors.AlreadyExistsError:
                continue  # made meanwhile: patch it as stored
            except errors.StoreError as err:
                raise st.from_store(err) from err
        out = _commit_update(store, t, new, pinned, dry)
        if out is not None:
            return 200, with_type(out)
    raise _too_many_conflicts(t)


def _commit_update(store: Store, t: Target, new: Obj, pinned: bool, dry: bool) -> Obj | None:
    """The update of a patch; None for a conflict worth another read (not ``pinned`` to
    the resourceVersion the client gave). Its uid is no precondition (upstream's patcher
    names none): one the patch changes is refused as immutable."""
    try:
        return _update_of(store, t, new, dry, replace=False)
    except errors.ConflictError as err:
        if pinned:
            raise st.from_store(err) from err
        return None
    except errors.StoreError as err:
        raise st.from_store(err) from err


def _update_of(store: Store, t: Target, obj: Obj, dry: bool, replace: bool) -> Obj:
    """The store's update of what ``t`` names: the object, its status, or a pod's
    ephemeral containers. Raises StoreError."""
    if t.sub == "status":
        return store.update_status(obj, dry=dry, replace=replace)
    if t.sub == "ephemeralcontainers":
        return store.update_ephemeral(obj, dry=dry, replace=replace)
    return store.update(obj, dry=dry, replace=replace)


def _too_many_conflicts(t: Target) -> st.ApiError:
    return st.from_store(errors.ConflictError(t.kind, t.key, "too many concurrent changes; "
                                              "try again"))


def server_side_apply(store: Store, t: Target, body: Any, dry: bool, fields: FieldCheck,
                      who: Manager) -> tuple[int, Obj]:
    """``application/apply-patch+yaml``: the configuration merged into the live object by
    field ownership (``shared.api.managedfields``), a 409 on a field another manager owns
    unless ``force``; a missing object is created. Not on subresources (415)."""
    if t.sub is not None:
        raise st.ApiError("UnsupportedMediaType", f"server-side apply is not supported on "
                          f"the {t.sub} subresource in daemonbus; use a merge or strategic "
                          "merge patch")
    config = _decoded(body, api_patch.APPLY_PATCH, t.kind)
    if (config.get("metadata") or {}).get("managedFields") is not None:
        raise st.bad_request("metadata.managedFields must be nil")
    config.pop("status", None)  # reset on the main resource, as upstream's strategies
    asked_rv = meta.resource_version(config)
    config = _settle_identity(t, config, creating=False)
    fields.check(config)
    try:
        writes.canonical_quantities(config)  # as the configuration is read into its type
    except errors.StoreError as err:
        raise st.from_store(err) from err
    for _ in range(PATCH_RETRIES):
        try:
            current: Obj | None = store.get(t.kind, t.key)
        except errors.NotFoundError:
            current = None
        except errors.StoreError as err:
            raise st.from_store(err) from err
        try:
            result = managedfields.apply(current, config, who.name, bool(who.force),
                                         _root(t), _now(store))
        except managedfields.ConflictError as err:
            raise st.ApiError("Conflict", str(err), {"causes": err.causes}) from err
        except managedfields.ApplyError as err:
            raise st.bad_request(str(err)) from err
        new = result.obj
        # the rules' warnings are of the object as merged, not of the configuration alone
        fields.warnings += [w for w in api_warnings.warnings(new) if w not in fields.warnings]
        md = new.setdefault("metadata", {})
        md["managedFields"] = managedfields.encode(result.entries,
                                                   t.resource.info.api_version)
        if current is None:
            md.pop("resourceVersion", None)
            return _commit_create(store, t, new, dry)
        pinned = bool(asked_rv) and asked_rv != meta.resource_version(current)
        md["resourceVersion"] = asked_rv if pinned else meta.resource_version(current)
        if new == current:
            return 200, with_type(current)
        out = _commit_update(store, t, new, pinned, dry)
        if out is not None:
            return 200, with_type(out)
    raise _too_many_conflicts(t)


def patch_error(err: api_patch.PatchError) -> st.ApiError:
    details = {"causes": [{"reason": "UnexpectedServerResponse", "message": err.cause}]} \
        if err.cause else None
    return st.ApiError(err.reason, str(err), details, code=err.code)


def _patched(current: Obj, body: Any, content_type: str, kind: str) -> Obj:
    try:
        return api_patch.apply_patch(copy.deepcopy(current), body, content_type, kind)
    except api_patch.PatchError as err:
        raise patch_error(err) from err


def _decoded(body: Any, content_type: str, kind: str) -> Obj:
    """The object a server-side apply body describes (for a create)."""
    return _patched({}, body, content_type, kind)


def delete_options(query: Mapping[str, str], body: Obj | None) -> Obj:
    """DeleteOptions from the body and the query (the query wins, as upstream)."""
    opts = dict(body or {})
    if "propagationPolicy" in query:
        opts["propagationPolicy"] = query["propagationPolicy"]
    grace = requests.integer(query, "gracePeriodSeconds", minimum=None)
    if grace is not None:
        opts["gracePeriodSeconds"] = grace
    if "orphanDependents" in query:
        opts["orphanDependents"] = requests.boolean(query["orphanDependents"])
    return opts


def deletion(opts: Obj) -> tuple[str | None, int | None]:
    """Decides what a DELETE's options ask for, as upstream's ``ValidateDeleteOptions``
    (staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/validation/validation.go): the
    propagation ("background", "foreground" or "orphan"; None when neither
    ``propagationPolicy`` nor ``orphanDependents`` is given) and the grace period (None:
    the object's own). A negative grace period is not refused: the deletion takes it as 1 s
    (``BeforeDelete`` of staging/src/k8s.io/apiserver/pkg/registry/rest/delete.go,
    ``writes.graceful_delete``). ApiError for what upstream refuses: a policy it does not
    know, or one given with ``orphanDependents``."""
    policy = opts.get("propagationPolicy")
    orphan = opts.get("orphanDependents")
    problems = []
    if policy is not None and orphan is not None:
        problems.append(f'propagationPolicy: Invalid value: "{policy}": orphanDependents and '
                        'deletionPropagation cannot be both set')
    if policy is not None and policy not in PROPAGATION:
        problems.append(f'propagationPolicy: Unsupported value: "{policy}": supported values: '
                        '"Foreground", "Background", "Orphan", "nil"')
    if problems:
        raise st.options_invalid("DeleteOptions", problems)
    grace = opts.get("gracePeriodSeconds")
    if grace is not None and (isinstance(grace, bool) or not isinstance(grace, int)):
        raise st.bad_request("gracePeriodSeconds: must be an integer")
    if policy is None:
        return (None if orphan is None else "orphan" if orphan is True else "background"), grace
    return PROPAGATION[str(policy)], grace


def delete(store: Store, t: Target, opts: Obj, dry: bool,
           implicit: Obj | None = None) -> tuple[int, Obj]:
    """DELETE; ``implicit``: the namespace ``t`` names as served when it has no object
    (its object is created, then deleted: what is in it is deleted first)."""
    propagation, grace = deletion(opts)
    pre = opts.get("preconditions") or {}
    if not isinstance(pre, dict):
        raise st.bad_request("preconditions must be an object")
    try:
        left = store.delete(t.kind, t.key, propagation=propagation,
                            uid=pre.get("uid") or None, grace_seconds=grace,
                            resource_version=pre.get("resourceVersion") or None, dry=dry,
                            implicit=implicit)
    except errors.StoreError as err:
        raise st.from_store(err) from err
    if left is None:
        return 200, st.success(str(t.name), t.kind)
    return 200, with_type(left)


def delete_collection(store: Store, t: Target, query: Mapping[str, str], opts: Obj,
                      dry: bool) -> tuple[int, Obj]:
    tip, items = list_objects(store, t, query)
    deleted = []
    for obj in items:
        one = Target(t.resource, meta.namespace(obj) or None, meta.name(obj), None)
        try:
            _code, doc = delete(store, one, dict(opts), dry)
        except st.ApiError as err:
            if err.code == 404:
                continue
            raise
        deleted.append(doc if doc.get("kind") != "Status" else obj)
    return 200, list_document(t.kind, tip, deleted)  # the list's position, as upstream


def evict(store: Store, t: Target, body: Obj, dry: bool) -> tuple[int, Obj]:
    """``pods/<name>/eviction``: delete the pod as its DeleteOptions say (no disruption
    budgets exist in daemonbus, so an eviction is always allowed)."""
    if not isinstance(body, dict) or body.get("kind") not in (None, "Eviction"):
        raise st.bad_request("the body of an eviction must be an Eviction")
    md = body.get("metadata")
    if not isinstance(md, dict) or md.get("name") != t.name:
        raise st.bad_request("name in URL does not match name in Eviction object")
    opts = body.get("deleteOptions") or {}
    pod = Target(t.resource, t.namespace, t.name, None)
    delete(store, pod, opts if isinstance(opts, dict) else {}, dry)
    return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                 "code": 201}
