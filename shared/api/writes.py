"""The API server's rules of a write, as pure functions: each turns what a writer asks for
into a :class:`Write`, the object to store with its precondition, marked with how far it is
trusted. Decides; the store only commits what these return, and a dry run is these rules
without the commit.

The rules are the registry strategies' of Kubernetes: the namespace (defaulted here, once),
defaults, validation, the size limit, uid, creationTimestamp, generation (rises on spec
changes), a DaemonSet's templateGeneration, finalizers, deletionTimestamp and graceful
delete, propagation policies, and kubectl's apply merge. Each object is validated once per
write: a user write in full; a controller's write of a new object it built from validated
parts (a pod from its template, an Event) is stamped and not validated again; a status write
has only its status (and a pod's binding) new, and only those are validated.
"""

from __future__ import annotations

import copy
import decimal
import enum
import json
import math
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shared.api import schema
from shared.daemonset import status as ds_status
from shared.eventlog import wire as encoding
from shared.eventlog.entry import WriteMode
from shared.model import defaults as model_defaults
from shared.model import errors, kinds, meta, podupdate, priority, quantity, syntax
from shared.model import validation as model_validation

Obj = dict[str, Any]

TEMPLATE_GENERATION_ANNOTATION = "deprecated.daemonset.template.generation"
LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"
FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"
MAX_OBJECT_BYTES = 1536 * 1024
"""The largest object stored (encoded): etcd's default request limit (``--max-request-bytes``,
1.5 MiB), which is what caps an object's size behind the API server."""


class Trust(enum.Enum):
    """How far a write was checked by these rules."""

    USER = "user"  # defaulted, validated in full and bookkept: anyone's write
    CONTROLLER = "controller"  # built by a controller from validated parts (stamped only),
    # or a controller's metadata change (validated once)
    STATUS = "status"  # only its status (and a pod's spec.nodeName) is new and validated


@dataclass
class Write:
    """One write to commit: ``mode`` create, ensure (create if absent), update or delete;
    ``obj`` the object to store (for a delete: as read); ``expected`` the resourceVersion it
    must still have ("" = none)."""

    mode: WriteMode
    obj: Obj
    trust: Trust
    expected: str = ""

    @property
    def kind(self) -> str:
        return str(self.obj.get("kind"))

    @property
    def key(self) -> str:
        return meta.key(self.obj)


# ---- names and namespaces ------------------------------------------------------------------


def namespace_for(kind: str, given: Any, fallback: str = model_defaults.DEFAULT_NAMESPACE
                  ) -> str:
    """The namespace an object of ``kind`` is stored in: none for a cluster-scoped kind,
    else ``given`` or, when that is empty, ``fallback`` (for a kind daemonbus does not know
    too: the store refuses it later, by that key)."""
    info = kinds.by_kind(kind)
    if info is not None and not info.namespaced:
        return ""
    return str(given or fallback)


def with_namespace(obj: Obj, fallback: str = model_defaults.DEFAULT_NAMESPACE) -> Obj:
    """``obj`` (changed in place) with its namespace as stored (:func:`namespace_for`): set
    for a namespaced kind, removed for a cluster-scoped one."""
    info = kinds.by_kind(str(obj.get("kind")))
    md = obj.setdefault("metadata", {})
    if isinstance(md, dict) and info is not None:
        if info.namespaced:
            md["namespace"] = namespace_for(info.kind, md.get("namespace"), fallback)
        else:
            md.pop("namespace", None)
    return obj


def manifest_key(obj: Obj) -> str:
    """The key ``<namespace>/<name>`` a manifest's object is stored under."""
    md = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    assert isinstance(md, dict)
    return f"{namespace_for(str(obj.get('kind')), md.get('namespace'))}/{md.get('name') or ''}"


# ---- checks --------------------------------------------------------------------------------


def check_size(obj: Obj) -> None:
    """Refuse ``obj`` when it encodes to more than :data:`MAX_OBJECT_BYTES` (TooLargeError);
    an object that cannot be encoded raises what msgpack raises."""
    size = len(encoding.pack(obj))
    if size > MAX_OBJECT_BYTES:
        raise errors.TooLargeError(str(obj.get("kind")), meta.key(obj), size, MAX_OBJECT_BYTES)


def check(obj: Obj, old: Obj | None = None) -> None:
    """Validate ``obj`` (an update of ``old``), and its size: InvalidError or TooLargeError."""
    _refuse(obj, model_validation.validate(obj, old))


def _refuse(obj: Obj, problems: list[str]) -> None:
    """InvalidError for ``problems`` of ``obj``, else for its size (TooLargeError)."""
    if problems:
        raise errors.InvalidError(str(obj.get("kind")), meta.name(obj), problems)
    try:
        check_size(obj)
    except (OverflowError, TypeError, ValueError) as err:
        raise errors.InvalidError(str(obj.get("kind")), meta.name(obj),
                                  [f"object: Invalid value: cannot be encoded: {err}"]
                                  ) from err


def shape(obj: Any) -> Obj:
    """Refuse what is not an object with a kind and a metadata.name at all, before any
    other processing (kubectl's own client-side checks)."""
    if not isinstance(obj, dict):
        raise errors.InvalidError("Object", "", [
            f"Object: Invalid value: {type(obj).__name__}: must be a map with "
            "apiVersion, kind and metadata"])
    kind = obj.get("kind")
    if not isinstance(kind, str) or not kind:
        raise errors.InvalidError("Object", "", ["kind: Required value: Object 'Kind' is "
                                                 "missing"])
    md = obj.get("metadata")
    if not isinstance(md, dict) or not isinstance(md.get("name"), str) or not md["name"]:
        raise errors.InvalidError(kind, "", ["metadata.name: Required value: name or "
                                             "generateName is required"])
    if not isinstance(md.get("namespace", ""), str | None):
        raise errors.InvalidError(kind, md["name"], [
            "metadata.namespace: Invalid value: must be a string"])
    try:  # the size first, as etcd refuses a request before anyone reads it
        check_size(obj)
    except (OverflowError, TypeError, ValueError):
        pass  # reported by the validation (``check``)
    for f in ("creationTimestamp", "deletionTimestamp"):  # metav1.Time decodes them
        value = md.get(f)
        if isinstance(value, str) and value:
            try:
                syntax.parse_rfc3339(value)
            except ValueError as err:
                raise _undecodable(obj, err) from err
    return obj


def canonical_quantities(obj: Obj) -> None:
    """Every resource quantity of ``obj`` (by its kind's schema: container resources, a
    node's capacity, volume size limits, ...) in its canonical text, in place, as the API
    server decodes and writes them back (``0.5`` → ``500m``, ``1024Mi`` → ``1Gi``); the
    values of resource lists rounded up to milli units first (``SetDefaults_ResourceList``).
    One that does not parse fails the decode: BadRequestError, with upstream's message."""
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    info = kinds.by_kind(str(kind))
    if info is None:
        return
    version = api_version if isinstance(api_version, str) else info.api_version

    def rewrite(value: Any, in_list: bool) -> str:
        try:
            return quantity.canonical_milli(value) if in_list else quantity.canonical(value)
        except ValueError as err:
            raise _undecodable(obj, err, version) from err

    try:
        definition = schema.definition_name(version, str(kind))
    except schema.UnknownKindError:
        return
    schema.rewrite_quantities(obj, definition, rewrite)


def decoded(obj: Obj) -> Obj:
    """``obj`` as the API server holds a request's object once decoded: its quantities in
    their canonical text (in place) and its defaults set (a defaulted copy is returned).
    What a field manager compares a write with, and what tells a write that changes nothing.
    BadRequestError as :func:`canonical_quantities`."""
    canonical_quantities(obj)
    out = model_defaults.default(obj)
    assert isinstance(out, dict)
    return out


def requested_template_generation(obj: Obj) -> int:
    """The templateGeneration a DaemonSet carries in (``Convert_v1_DaemonSet_To_apps_DaemonSet``,
    pkg/apis/apps/v1/conversion.go): its ``deprecated.daemonset.template.generation``
    annotation parsed by ``strconv.ParseInt(v, 10, 64)``, 0 without one. A value that does not
    parse fails the decode: BadRequestError, with the API server's message."""
    raw = meta.annotations(obj).get(TEMPLATE_GENERATION_ANNOTATION)
    if raw is None:
        return 0
    try:
        return syntax.parse_int64(str(raw))
    except ValueError as err:
        raise _undecodable(obj, err) from err


def _undecodable(obj: Obj, err: Exception, api_version: str = "v1") -> errors.BadRequestError:
    """The decode failure of ``obj`` (upstream's 400 for a body it cannot read)."""
    return errors.BadRequestError(schema.undecodable_message(
        str(obj.get("kind")), schema.split_api_version(api_version)[1], str(err)))


def same(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` encode alike (as stored: key order and number types count)."""
    return encoding.pack(a) == encoding.pack(b)


def no_op(new: Obj, old: Obj) -> bool:
    """Whether an update of ``old`` (as stored) to ``new`` (as prepared) changes nothing but
    the times of its field managers' entries: upstream's storage then writes nothing (no
    new resourceVersion, no watch event) and answers with the object as it is."""
    def bare(obj: Obj) -> Obj:
        md = dict(obj.get("metadata") or {})
        md.pop("resourceVersion", None)
        entries = md.get("managedFields")
        if isinstance(entries, list):
            md["managedFields"] = [{k: v for k, v in e.items() if k != "time"}
                                   if isinstance(e, dict) else e for e in entries]
        return {**obj, "metadata": md}
    return bare(new) == bare(old)


# ---- create --------------------------------------------------------------------------------


def stamp(obj: Obj, now: float) -> Obj:
    """A new object's identity (uid, creationTimestamp, generation 1), set in place on
    ``obj``, which is returned."""
    md = obj["metadata"]
    md["uid"] = str(uuid.uuid4())
    md["creationTimestamp"] = meta.format_time(now)
    md["generation"] = 1
    return obj


Allocate = Callable[[Obj, "Obj | None"], object]
"""What the registry allocates for a new object or an update (given the object, and the
stored one for an update), before it is validated: a Service's cluster IP and node ports
(``shared.store.client`` reads the others' from the view, ``shared.api.serviceips``)."""


def prepare_create(given: Any, now: float, created: str | None = None,
                   allocate: Allocate | None = None) -> Obj:
    """A user's new object (a copy): shaped, its namespace and defaults set, what the
    registry allocates allocated, validated, its server-set metadata dropped and stamped
    (PrepareForCreate); ``created``: the creation time it keeps instead of now (a namespace
    without an object given one is as old as it was)."""
    obj = shape(copy.deepcopy(encoding.plain(given)))
    requested_tg = requested_template_generation(obj) if obj["kind"] == "DaemonSet" else 0
    info = kinds.by_kind(str(obj.get("kind")))
    if info is not None:
        obj.setdefault("apiVersion", info.api_version)
    obj = decoded(with_namespace(obj))
    if allocate is not None:
        allocate(obj, None)
    _refuse(obj, model_validation.validate(obj) + model_validation.validate_pod_create(obj))
    md = obj["metadata"]
    for f in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
        md.pop(f, None)
    stamp(obj, now)
    if created:
        md["creationTimestamp"] = created
    if obj.get("kind") == "DaemonSet":
        # PrepareForCreate (pkg/registry/apps/daemonset/strategy.go): the requested
        # templateGeneration, raised to 1 when lower; written back as FormatInt
        ann = md.setdefault("annotations", {})
        ann[TEMPLATE_GENERATION_ANNOTATION] = str(max(requested_tg, 1))
        obj["status"] = {
            "currentNumberScheduled": 0, "desiredNumberScheduled": 0,
            "numberMisscheduled": 0, "numberReady": 0,
        }
    elif obj.get("kind") == "Namespace":
        # PrepareForCreate (pkg/registry/core/namespace/strategy.go): Active, and the
        # finalizer that keeps it until everything in it is deleted
        spec = obj["spec"] = obj.get("spec") or {}
        fins = spec.get("finalizers") or []
        if model_validation.NAMESPACE_FINALIZER not in fins:
            spec["finalizers"] = [*fins, model_validation.NAMESPACE_FINALIZER]
        obj["status"] = {"phase": "Active"}
    elif obj.get("kind") == kinds.SERVICE.kind:
        obj["status"] = {"loadBalancer": {}}  # (a load balancer's controller would fill it)
    return obj


def create(obj: Any, now: float, ensure: bool = False, created: str | None = None,
           allocate: Allocate | None = None) -> Write:
    """A user's create (``ensure``: if absent; ``created`` and ``allocate``: as
    :func:`prepare_create`)."""
    return Write(WriteMode.ENSURE if ensure else WriteMode.CREATE,
                 prepare_create(obj, now, created, allocate), Trust.USER)


def controller_create(obj: Obj, ensure: bool = False) -> Write:
    """A controller's new object, built from validated parts and already stamped
    (:func:`stamp`): written as it is, not validated again (the hot path of pod creation)."""
    return Write(WriteMode.ENSURE if ensure else WriteMode.CREATE, obj, Trust.CONTROLLER)


# ---- update --------------------------------------------------------------------------------

STATUS_KEPT = frozenset({kinds.POD.kind, kinds.NODE.kind, kinds.SERVICE.kind})
"""The kinds besides a DaemonSet and a Namespace whose update of the main resource keeps the
stored status (PrepareForUpdate of pkg/registry/core/pod/strategy.go,
pkg/registry/core/node/strategy.go and pkg/registry/core/service/strategy.go:
``newPod.Status = oldPod.Status``): their status is
written through ``/status`` (:func:`status_update`) or by the node agent
(:func:`system_status`), never by an update of the object."""


def prepare_update(new: Obj, old: Obj, allocate: Allocate | None = None) -> Obj:
    """An update of ``old`` (as stored) to ``new`` (a copy; PrepareForUpdate): defaults;
    what the registry allocates (``allocate``, as :func:`prepare_create`'s);
    identity (a uid given must be the stored one: the validation refuses another as
    immutable), deletion and the status of a kind with a /status subresource kept
    (:data:`STATUS_KEPT`); generation raised on a spec change, templateGeneration on a
    template change; validated against ``old``."""
    new = copy.deepcopy(encoding.plain(new))
    if new.get("kind") == "DaemonSet":
        requested_template_generation(new)  # decoded (and refused if bad), then ignored
    new = decoded(new)
    md, omd = new.setdefault("metadata", {}), old["metadata"]
    # BeforeUpdate: the stored uid only when none is given (another is refused as immutable)
    keep = ("creationTimestamp", "namespace", "name") if md.get("uid") else \
        ("uid", "creationTimestamp", "namespace", "name")
    for f in keep:
        if f in omd:
            md[f] = omd[f]
        else:
            md.pop(f, None)
    for f in ("deletionTimestamp", "deletionGracePeriodSeconds"):
        if f in omd:
            md[f] = omd[f]
        else:
            md.pop(f, None)
    md["resourceVersion"] = omd.get("resourceVersion")
    generation = int(omd.get("generation") or 1)
    if "spec" in old or "spec" in new:
        if new.get("spec") != old.get("spec"):  # by value, as upstream (not key order)
            generation += 1
    md["generation"] = generation
    if new.get("kind") == "DaemonSet":
        new["status"] = copy.deepcopy(old.get("status") or {})
        ann = md.setdefault("annotations", {})
        old_tg = meta.annotations(old).get(TEMPLATE_GENERATION_ANNOTATION, "1")
        try:
            tg = int(old_tg)
        except ValueError:
            tg = 1
        if (new.get("spec") or {}).get("template") != (old.get("spec") or {}).get("template"):
            tg += 1
        ann[TEMPLATE_GENERATION_ANNOTATION] = str(tg)
    elif new.get("kind") == "Namespace":  # its finalizers and phase are the server's
        new["spec"] = copy.deepcopy(old.get("spec") or {})
        new["status"] = copy.deepcopy(old.get("status") or {})
    elif new.get("kind") in STATUS_KEPT:
        if "status" in old:
            new["status"] = copy.deepcopy(old["status"])
        else:
            new.pop("status", None)
    if allocate is not None:
        allocate(new, old)
    check(new, old)
    return new


def check_version(obj: Obj, old: Obj) -> None:
    """ConflictError unless ``obj`` names no resourceVersion or ``old``'s."""
    if meta.resource_version(obj) and meta.resource_version(obj) != meta.resource_version(old):
        raise errors.ConflictError(str(obj.get("kind")), meta.key(obj))


ETCD_RESOURCES = {kinds.NODE.kind: "minions"}
"""The kinds etcd keeps under another name than their resource's (nodes kept their pre-1.0
name, ``/registry/minions/<name>``)."""


def storage_key(kind: str, key: str) -> str:
    """The etcd key upstream's storage keeps an object of ``kind`` at ``key`` under
    (``/registry/<resource>/<namespace>/<name>``), which its storage errors name."""
    info = kinds.by_kind(kind)
    resource = ETCD_RESOURCES.get(kind) or (info.plural if info else f"{kind.lower()}s")
    ns, _, name = key.partition("/")
    return f"/registry/{resource}/{ns}/{name}" if ns else f"/registry/{resource}/{name}"


def check_uid(obj: Obj, old: Obj) -> None:
    """A replace's uid precondition: ConflictError when ``obj`` names a uid and ``old`` (as
    stored) has another, as upstream's storage says it (``rest.DefaultUpdatedObjectInfo``
    makes the uid of a PUT's object a precondition; ``storage.Preconditions.Check`` fails it
    as an invalid object, which ``InterpretUpdateError`` turns into a Conflict). A stale
    manifest then cannot overwrite an object recreated under its name."""
    uid = meta.uid(obj)
    if uid and uid != meta.uid(old):
        kind = str(old.get("kind"))
        raise errors.ConflictError(kind, meta.key(old), (
            f"StorageError: invalid object, Code: 4, Key: {storage_key(kind, meta.key(old))}, "
            f"ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: "
            f"{uid}, UID in object meta: {meta.uid(old)}"))


def _updated(new: Obj, expected: str, old: Obj) -> Write:
    """The write of a prepared update: removing the last finalizer of a deleted object
    deletes it, unless a grace period is still running (a terminating pod: its node agent
    removes it)."""
    grace_left = int(meta.metadata(old).get("deletionGracePeriodSeconds") or 0) > 0
    if meta.is_being_deleted(new) and not meta.finalizers(new) and not grace_left \
            and not namespace_finalizers(new):
        return Write(WriteMode.DELETE, new, Trust.USER, expected)
    return Write(WriteMode.UPDATE, new, Trust.USER, expected)


def namespace_finalizers(obj: Obj) -> list[str]:
    """A Namespace's ``spec.finalizers`` (what keeps it until its content is gone); none for
    any other kind."""
    if obj.get("kind") != kinds.NAMESPACE.kind:
        return []
    fins = (obj.get("spec") or {}).get("finalizers")
    return list(fins) if isinstance(fins, list) else []


def finalize_update(obj: Obj, old: Obj) -> Write:
    """A Namespace's ``/finalize`` subresource: ``old`` with ``obj``'s ``spec.finalizers``
    (upstream's finalize strategy); a namespace being deleted that is left with none is
    deleted (what is in it is no longer waited for)."""
    check_version(obj, old)
    new = copy.deepcopy(old)
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    new["spec"] = {**(new.get("spec") or {}), "finalizers": copy.deepcopy(spec.get("finalizers"))}
    if new["spec"]["finalizers"] is None:
        del new["spec"]["finalizers"]
    check(new, old)
    return _updated(new, meta.resource_version(old), old)


def update(obj: Obj, old: Obj, replace: bool = True, allocate: Allocate | None = None) -> Write:
    """An update of ``old`` (as read) to ``obj``; precondition: ``obj``'s rv if it has one,
    else ``old``'s, and with ``replace`` (a PUT's object, not a patched one: upstream's
    patcher names no precondition) ``obj``'s uid (:func:`check_uid`); ``allocate``: as
    :func:`prepare_create`'s."""
    if replace:
        check_uid(obj, old)
    new = prepare_update(obj, old, allocate)
    return _updated(new, meta.resource_version(obj) or meta.resource_version(old), old)


def recount(event: Obj) -> Write:
    """A recorder's repeat of an Event it wrote: ``event`` as stored with its ``count``,
    ``lastTimestamp`` and ``message`` new (``events.Correlator``), at whatever version it
    is: client-go's recorder patches these three and names no precondition."""
    return Write(WriteMode.UPDATE, event, Trust.CONTROLLER, "*")


def status_update(obj: Obj, old: Obj) -> Write:
    """The ``/status`` subresource: ``old``'s spec and metadata, ``obj``'s status (for a
    DaemonSet in its JSON shape and validated against the stored one)."""
    check_version(obj, old)
    kind = str(old.get("kind"))
    new = copy.deepcopy(old)
    new["status"] = copy.deepcopy(obj.get("status") or {})
    if kind == "DaemonSet":
        if isinstance(new["status"], dict):
            new["status"] = ds_status.json_shape(new["status"])
        problems = model_validation.validate_daemonset_status(new["status"],
                                                              old.get("status") or {})
        if problems:
            raise errors.InvalidError(kind, meta.name(old), problems)
    elif kind == "Namespace":
        check(new, old)
    return Write(WriteMode.UPDATE, new, Trust.STATUS, meta.resource_version(old))


def ephemeral_update(obj: Obj, old: Obj) -> Write:
    """A pod's ``/ephemeralcontainers`` subresource (upstream's
    podEphemeralContainersStrategy): ``old`` as stored with ``obj``'s
    ``spec.ephemeralContainers`` alone, defaulted, validated as any pod and by the
    subresource's rule (an ephemeral container is only ever added: none removed or changed,
    ``ValidatePodEphemeralContainersUpdate``). Its precondition: ``obj``'s resourceVersion
    if it names one, else ``old``'s."""
    check_version(obj, old)
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    new = copy.deepcopy(old)
    new_spec = new.setdefault("spec", {})
    if spec.get("ephemeralContainers") is None:
        new_spec.pop("ephemeralContainers", None)
    else:
        new_spec["ephemeralContainers"] = copy.deepcopy(encoding.plain(
            spec["ephemeralContainers"]))
        new = decoded(new)
    problems = model_validation.validate_pod(new)
    podupdate.validate_ephemeral_update(new.get("spec"), old.get("spec"), problems)
    _refuse(new, problems)
    return Write(WriteMode.UPDATE, new, Trust.USER, meta.resource_version(old))


def system_status(new: Obj, old: Obj) -> Write:
    """A status write by a system component (node agent binding a pod or reporting its
    status, a node reporting conditions): ``new``'s ``status`` and ``spec.nodeName`` over
    ``old`` as stored. Only those are new, so only they are validated (the rest is the
    stored, validated object; for a node agent the commit script refuses any other
    difference). Precondition: ``old``'s version.

    The node agent writes thousands of these per second, so nothing is deep-copied: the
    write's object is a new top level and metadata (and spec when nodeName changes) over the
    nested values of ``old`` and ``new.status``, which callers must not change afterwards.
    """
    kind = str(old.get("kind"))
    merged = {**old, "metadata": dict(old.get("metadata") or {}),
              "status": new.get("status") or {}}
    problems = model_validation.validate_status(kind, merged["status"], old.get("status"))
    node_name = (new.get("spec") or {}).get("nodeName")
    if node_name is not None:
        merged["spec"] = {**(old.get("spec") or {}), "nodeName": node_name}
        if kind != "Pod" or not isinstance(node_name, str) or \
                syntax.is_dns1123_subdomain(node_name):
            problems.append(f"spec.nodeName: Invalid value: {node_name!r}: "
                            "must be a node's name")
    if problems:
        raise errors.InvalidError(kind, meta.name(old), problems)
    return Write(WriteMode.UPDATE, merged, Trust.STATUS, meta.resource_version(old))


def metadata_update(new: Obj, expected: str) -> Write:
    """A metadata change by a controller (owner references, labels of its own pods):
    written as given (no server-side bookkeeping), with the version precondition, once
    validated like any stored object."""
    check(new)
    return Write(WriteMode.UPDATE, new, Trust.CONTROLLER, expected)


# ---- delete --------------------------------------------------------------------------------


def check_delete_preconditions(current: Obj, uid: str | None,
                               resource_version: str | None) -> None:
    """A delete's preconditions on ``current`` (as read): ConflictError when it fails."""
    kind, key = str(current.get("kind")), meta.key(current)
    if uid and meta.uid(current) != uid:
        raise errors.ConflictError(
            kind, key, f"Precondition failed: UID in precondition: {uid}, "
            f"UID in object meta: {meta.uid(current)}"
        )
    if resource_version and meta.resource_version(current) != resource_version:
        raise errors.ConflictError(
            kind, key, "Precondition failed: ResourceVersion in precondition: "
            f"{resource_version}, ResourceVersion in object meta: "
            f"{meta.resource_version(current)}"
        )


def check_deletable(kind: str, key: str) -> None:
    """UndeletableError for what no one may delete: a namespace every cluster has
    (upstream's NamespaceLifecycle keeps default, kube-system and kube-public; daemonbus'
    node leases are not objects, so kube-node-lease stays too), and a built-in priority
    class (as upstream's registry keeps them)."""
    if kind == kinds.NAMESPACE.kind and key.lstrip("/") in kinds.BUILTIN_NAMESPACES:
        raise errors.UndeletableError(kind, key, "this namespace may not be deleted")
    if kind == kinds.PRIORITY_CLASS.kind and key.lstrip("/") in priority.SYSTEM:
        raise errors.UndeletableError(kind, key, "this is a system priority class and cannot "
                                      "be deleted")


def delete(current: Obj, now: float, propagation: str | None = None,
           grace_seconds: int | None = None) -> Write | None:
    """The write that deletes ``current`` (as read) the way the API server does
    (``Store.Delete`` of staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go).

    A pod is deleted gracefully (:func:`graceful_delete`): its deletionTimestamp is the time
    by which it should be gone, now plus its grace period, and it stays until then for its
    node agent to stop it and remove it, or until a later delete shortens the period; with
    no grace left (``grace_seconds=0``, not bound to a node, or terminal) it goes at once.
    An object with finalizers (or a foreground/orphan propagation, which adds one:
    :func:`deletion_finalizers`) that is not being deleted gracefully is marked as deleting
    (:func:`mark_deleting`) and stays until its finalizers are removed. ``propagation``:
    "background", "foreground" or "orphan" as asked, None when none was (the object's own
    propagation finalizer stays). None: nothing to write (its deletion is pending as asked
    already).
    """
    kind = str(current.get("kind"))
    # only metadata keys change below: copy that map, share the rest (a rollout deletes
    # thousands of pods; deep copies and packing whole pods to compare them showed up)
    new = {**current, "metadata": dict(current["metadata"])}
    md = new["metadata"]
    fins = deletion_finalizers(meta.finalizers(new), propagation)
    rv = meta.resource_version(current)
    if namespace_finalizers(new):
        # its content is deleted first (services.gc), then its finalizer and itself
        if md.get("deletionTimestamp"):
            return None
        md["deletionTimestamp"] = meta.format_time(now)
        new["status"] = {**(new.get("status") or {}), "phase": "Terminating"}
        return Write(WriteMode.UPDATE, new, Trust.USER, rv)
    graceful = graceful_delete(new, now, grace_seconds) if kind == "Pod" else False
    if graceful is None:
        return None  # a graceful deletion pending, not shortened
    if not graceful and not fins:
        return Write(WriteMode.DELETE, current, Trust.USER, rv)
    if fins:
        md["finalizers"] = fins
    elif md.get("finalizers"):
        del md["finalizers"]  # its propagation finalizer taken back by this delete
    if not graceful:
        mark_deleting(md, now)
    elif not fins and not md["deletionGracePeriodSeconds"]:
        return Write(WriteMode.DELETE, current, Trust.USER, rv)  # no grace left
    if same(md, current["metadata"]):
        return None
    return Write(WriteMode.UPDATE, new, Trust.USER, rv)


def deletion_finalizers(finalizers: list[str], propagation: str | None) -> list[str]:
    """Decides an object's finalizers after a delete that asks for ``propagation``, as
    ``deletionFinalizersForGarbageCollection`` of upstream's store
    (staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go): the policy asked
    for decides both propagation finalizers, ``foregroundDeletion`` for foreground,
    ``orphan`` for orphan, neither for background, so a later delete with another policy
    swaps them (or takes its one back); with none asked the object's own stays (a DaemonSet's
    default policy, background, adds none). The others are kept in their order, the one
    added last; unchanged as a set, the list is returned as it was."""
    if propagation is None:
        return list(finalizers)
    kept = [f for f in finalizers if f not in (FOREGROUND, ORPHAN)]
    if propagation == "foreground":
        kept.append(FOREGROUND)
    elif propagation == "orphan":
        kept.append(ORPHAN)
    return list(finalizers) if set(kept) == set(finalizers) else kept


def graceful_delete(pod: Obj, now: float, grace_seconds: int | None) -> bool | None:
    """Decides, as ``rest.BeforeDelete`` with the pod strategy's ``CheckGracefulDelete``
    (staging/src/k8s.io/apiserver/pkg/registry/rest/delete.go,
    pkg/registry/core/pod/strategy.go), whether a delete of ``pod`` is graceful, setting
    its deletion metadata in place: True, graceful; False, not (its deletion was started
    with no grace left: it goes now, or is held by its finalizers); None, a graceful
    deletion is pending and stays as it is.

    A first delete sets deletionTimestamp to now plus the grace period (the time by which
    the pod should be gone: ``grace_seconds``, else ``spec.terminationGracePeriodSeconds``;
    0 for a pod on no node or terminal) and ``deletionGracePeriodSeconds`` to that period,
    and raises ``generation``. A later delete may only shorten the period: deletionTimestamp
    moves back by the difference, never before now (and a period asked for that is then
    over already becomes 1 s, unless 0 was asked for); an equal or longer one, or none,
    changes nothing.
    """
    md = pod["metadata"]
    if grace_seconds is not None and grace_seconds < 0:
        grace_seconds = 1  # as BeforeDelete takes a negative period
    if md.get("deletionTimestamp"):
        running = int(md.get("deletionGracePeriodSeconds") or 0)
        if running <= 0:
            return False
        if grace_seconds is None or grace_seconds >= running:
            return None
        period = grace_seconds
        due = (meta.parse_time(str(md["deletionTimestamp"])) or now) - running + period
        if due < now:
            due = now
            if period != 0:
                period = 1
        md["deletionTimestamp"] = meta.format_time(due)
        md["deletionGracePeriodSeconds"] = period
        return True
    spec = pod.get("spec") or {}
    grace = grace_seconds
    if grace is None:  # defaulted on create; a pod made without defaults has the default
        grace = int(spec.get("terminationGracePeriodSeconds",
                             model_defaults.DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS))
    if not spec.get("nodeName") or (pod.get("status") or {}).get("phase") in (
            "Succeeded", "Failed"):
        grace = 0
    grace = 1 if grace < 0 else grace
    md["deletionTimestamp"] = meta.format_time(now + grace)
    md["deletionGracePeriodSeconds"] = grace
    _raise_generation(md)
    return True


def mark_deleting(md: Obj, now: float) -> None:
    """Sets, in ``md`` (an object's metadata), what ``markAsDeleting`` of upstream's store
    sets on an object its finalizers hold that is not deleted gracefully: deletionTimestamp
    now (unless it has an earlier one), ``deletionGracePeriodSeconds`` 0, and
    ``generation`` raised when its deletion starts."""
    started = md.get("deletionTimestamp")
    if not started:
        _raise_generation(md)
    due = meta.parse_time(str(started)) if started else None
    if due is None or due > now:
        md["deletionTimestamp"] = meta.format_time(now)
    md["deletionGracePeriodSeconds"] = 0


def _raise_generation(md: Obj) -> None:
    """A deletion that starts raises ``generation`` when the object has one (its
    controllers then see a change to act on, as upstream's BeforeDelete says)."""
    generation = md.get("generation")
    if isinstance(generation, int) and generation > 0:
        md["generation"] = generation + 1


def final_delete(old: Obj) -> Write:
    """Remove an object whose deletion is due (grace period over, no finalizers left)."""
    return Write(WriteMode.DELETE, old, Trust.CONTROLLER, meta.resource_version(old))


# ---- apply (kubectl apply) -----------------------------------------------------------------


def apply_manifest(given: Any) -> Obj:
    """A manifest as apply takes it: plain JSON data, shaped, a DaemonSet's
    templateGeneration decoded (a bad value is refused on update too), and annotated with
    itself as ``kubectl apply`` annotates what it applies (:func:`last_applied`), so that a
    later ``kubectl apply`` of the same file finds it unchanged and merges an edited one
    three ways."""
    obj = shape(encoding.plain(given))
    if obj.get("kind") == "DaemonSet":
        requested_template_generation(obj)
    md = obj["metadata"]
    given = md.get("annotations")
    if given is not None and not isinstance(given, dict):
        return obj  # refused by the validation, with its path
    annotations = {k: v for k, v in (given or {}).items() if k != LAST_APPLIED_ANNOTATION}
    md["annotations"] = annotations
    try:
        applied = last_applied(obj)
    except errors.BadRequestError:  # a number JSON has no text for: the validation refuses
        if given is None:  # it where it is, with its path (or, where nothing checks it, the
            md.pop("annotations")  # object is stored without the annotation)
        else:
            md["annotations"] = given
        return obj
    md["annotations"] = {**annotations, LAST_APPLIED_ANNOTATION: applied}
    return obj


_GO_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                             "\u2028": "\\u2028", "\u2029": "\\u2029"})


def last_applied(manifest: Obj) -> str:
    """The ``kubectl.kubernetes.io/last-applied-configuration`` of ``manifest`` (without
    that annotation; an empty ``annotations`` stays), byte for byte as kubectl writes it:
    Go's JSON encoder, keys sorted, no spaces, ``<``, ``>`` and ``&`` escaped, numbers as Go
    writes a float64, a newline at the end. Decides; BadRequestError for a number JSON
    has no text for (infinite, not a number)."""
    return _go_json(manifest).translate(_GO_ESCAPES) + "\n"


def _go_json(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(str(k), ensure_ascii=False)}:{_go_json(v)}"
                              for k, v in sorted(value.items())) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_go_json(v) for v in value) + "]"
    if isinstance(value, float):
        return go_float(value)
    return json.dumps(value, ensure_ascii=False)


def go_float(x: float) -> str:
    """A float as Go's ``encoding/json`` writes it: the shortest digits that read back as
    it, in plain notation from 1e-6 up to 1e21 (``1.0`` is ``1``), else as ``1e-7``,
    ``1.5e+21``. Decides."""
    if not math.isfinite(x):  # what kubectl's YAML to JSON conversion says of it
        raise errors.BadRequestError(f"json: unsupported value: {x:+}".replace("inf", "Inf")
                                     .replace("+nan", "NaN"))
    a = abs(x)
    if a != 0 and (a < 1e-6 or a >= 1e21):
        text = repr(x)  # Python writes these in exponent form too, with two digits at least
        mantissa, _, exponent = text.partition("e")
        sign, digits = exponent[0], exponent[1:].lstrip("0")
        return f"{mantissa}e{sign}{digits}"
    return format(decimal.Decimal(repr(x)).normalize(), "f")


def apply_merge(manifest: Obj, current: Obj) -> Obj:
    """kubectl apply's two-way merge of ``manifest`` over ``current`` (a copy): the
    manifest's spec (every top-level field but metadata and status), labels and annotations
    replace the stored ones (the templateGeneration annotation is kept); status and
    server-set metadata are kept."""
    new = copy.deepcopy(current)
    md = new["metadata"]
    for f in ("labels", "annotations"):
        given = (manifest.get("metadata") or {}).get(f)
        if f == "annotations":
            keep = {k: v for k, v in (md.get(f) or {}).items()
                    if k == TEMPLATE_GENERATION_ANNOTATION}
            given = {**(given or {}), **keep} if (given or keep) else None
        if given:
            md[f] = given
        else:
            md.pop(f, None)
    for f, v in manifest.items():
        if f not in ("metadata", "status", "apiVersion", "kind"):
            new[f] = v
    for f in list(new):
        if f not in manifest and f not in ("metadata", "status", "apiVersion", "kind"):
            del new[f]
    return new


def apply(manifest: Obj, current: Obj | None, now: float,
          allocate: Allocate | None = None) -> tuple[str, Write | None]:
    """What ``kubectl apply`` of ``manifest`` (:func:`apply_manifest`) over ``current`` (as
    read; None: absent) writes: ("created", a create), ("configured", an update) or
    ("unchanged", None); ``allocate``: as :func:`prepare_create`'s."""
    if current is None:
        return "created", create(manifest, now, allocate=allocate)
    new = apply_merge(manifest, current)
    prepared = prepare_update(new, current, allocate)
    if no_op(prepared, current):
        return "unchanged", None
    return "configured", _updated(prepared, meta.resource_version(current), current)


# ---- dry run -------------------------------------------------------------------------------


def dry_run(write: Write, current: Obj | None) -> Obj:
    """What committing ``write`` would return, without committing it (the API's
    ``dryRun=All``, kubectl's server-side dry run): its object, with the resourceVersion it
    has (an update's, the object's as read; a create's none, as upstream's dry run).
    ``current``: the object as read, None if absent; the create of an object that exists
    is AlreadyExists, as the commit would find."""
    if write.mode == WriteMode.CREATE and current is not None:
        raise errors.AlreadyExistsError(write.kind, write.key)
    return write.obj
