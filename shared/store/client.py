"""The store: every write of every process goes through here, as one Lua commit.

A commit validates and defaults the object (in Python, before anything is sent), then the
``COMMIT`` script checks the resourceVersion precondition, updates the materialised view and
appends one log entry per object, atomically. The API-server bookkeeping of Kubernetes
(uid, creationTimestamp, generation, templateGeneration, deletionTimestamp and finalizers)
is applied here, so every writer gets it.
"""

from __future__ import annotations

import builtins
import copy
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

from shared.daemonset import status as ds_status
from shared.model import defaults as model_defaults
from shared.model import kinds as model_kinds
from shared.model import meta
from shared.model import syntax as model_syntax
from shared.model import validation as model_validation
from shared.store import codec, errors, roles, scripts
from shared.store.keys import Keys
from shared.store.logmark import LogMark

Obj = dict[str, Any]
log = logging.getLogger(__name__)

TEMPLATE_GENERATION_ANNOTATION = "deprecated.daemonset.template.generation"
FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"
CONFLICT_RETRIES = 8
MAX_OBJECT_BYTES = 1536 * 1024
"""The largest object stored (encoded): etcd's default request limit (``--max-request-bytes``,
1.5 MiB), which is what caps an object's size behind the API server."""
CONNECT_TIMEOUT = 5.0  # seconds
READ_TIMEOUT = 15.0  # seconds
DEAD_PEER_SECONDS = 25


def connect(url: str | None = None, **kwargs: Any) -> redis.Redis:
    """A redis-py client for ``url`` (``redis://``, ``rediss://`` with TLS, passwords in the
    URL), defaulting to ``DAEMONBUS_REDIS_URL``."""
    url = url or os.environ.get("DAEMONBUS_REDIS_URL")
    if not url:
        raise errors.UnavailableError(
            "no Redis URL: pass --redis-url, set DAEMONBUS_REDIS_URL, or run `daemonbus up`"
        )
    kwargs.setdefault("health_check_interval", 15)
    # No call waits on Redis unbounded, whatever redis-py's defaults (they changed between
    # versions): a connect gives up after CONNECT_TIMEOUT, a reply after READ_TIMEOUT (more
    # than any one round trip of ours takes; blocking reads ask for less, see workqueue).
    kwargs.setdefault("socket_connect_timeout", CONNECT_TIMEOUT)
    kwargs.setdefault("socket_timeout", READ_TIMEOUT)
    kwargs.setdefault("socket_keepalive", True)
    kwargs.setdefault("socket_keepalive_options", dead_peer_options())
    return redis.Redis.from_url(url, **kwargs)


def check_size(obj: Obj) -> None:
    """Refuse ``obj`` when it encodes to more than :data:`MAX_OBJECT_BYTES` (TooLargeError);
    an object that cannot be encoded raises what msgpack raises. Decides."""
    size = len(codec.pack(obj))
    if size > MAX_OBJECT_BYTES:
        raise errors.TooLargeError(str(obj.get("kind")), meta.key(obj), size, MAX_OBJECT_BYTES)


def dead_peer_options() -> dict[int, int]:
    """TCP options (level IPPROTO_TCP) under which a connection to a vanished Redis (a
    partition, a moved address) fails in about DEAD_PEER_SECONDS, not in the kernel's
    defaults of minutes to hours, so a process blocked on it reconnects. Keepalive probes
    only an idle connection; a request sent into the partition is unacknowledged data,
    which the kernel retransmits for ~15 minutes unless TCP_USER_TIMEOUT bounds it."""
    options: dict[int, int] = {}
    if hasattr(socket, "TCP_KEEPIDLE"):
        options.update({socket.TCP_KEEPIDLE: 10, socket.TCP_KEEPINTVL: 5, socket.TCP_KEEPCNT: 3})
    if hasattr(socket, "TCP_USER_TIMEOUT"):
        options[socket.TCP_USER_TIMEOUT] = DEAD_PEER_SECONDS * 1000
    return options


@dataclass
class Op:
    """One write of a batch. Build with the class methods; ``Store.commit`` sends them."""

    mode: str
    kind: str
    key: str
    payload: bytes
    expected: str = ""
    obj: Obj | None = None

    @classmethod
    def record(cls, kind: str, key: str, record: Obj) -> Op:
        return cls("record", kind, key, codec.pack(record))


@dataclass(frozen=True)
class Fence:
    """A commit precondition: ``token`` still holds the workqueue lease of ``key`` (so a
    worker whose lease ran out and was handed to another writes nothing)."""

    key: str
    token: str


@dataclass
class Result:
    status: str  # ok | exists | conflict | notfound | forbidden | skipped | fenced
    value: str  # the new resourceVersion (ok), the current one, or why it is forbidden
    op: Op = field(repr=False, default_factory=lambda: Op("", "", "", b""))

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def _now() -> float:
    return time.time()


def _spec_equal(a: Any, b: Any) -> bool:
    return codec.pack(a) == codec.pack(b)


def requested_template_generation(obj: Obj) -> int:
    """The templateGeneration a DaemonSet carries in (``Convert_v1_DaemonSet_To_apps_DaemonSet``,
    pkg/apis/apps/v1/conversion.go): its ``deprecated.daemonset.template.generation``
    annotation parsed by ``strconv.ParseInt(v, 10, 64)``, 0 without one. A value that does not
    parse fails the decode: BadRequestError, with the API server's message."""
    raw = meta.annotations(obj).get(TEMPLATE_GENERATION_ANNOTATION)
    if raw is None:
        return 0
    try:
        return model_syntax.parse_int64(str(raw))
    except ValueError as err:
        raise errors.BadRequestError(
            f'{obj.get("kind")} in version "v1" cannot be handled as a {obj.get("kind")}: {err}'
        ) from err


class Store:
    """The API of daemonbus: get/list/create/update/delete of Kubernetes-shaped objects."""

    def __init__(
        self,
        client: redis.Redis,
        keys: Keys | None = None,
        clock: Callable[[], float] = _now,
        log_maxlen: int = 0,
        writer: str = "",
        role: str = roles.ADMIN,
    ) -> None:
        """``role``: what every commit of this store is authorised as (``shared.store.roles``);
        the caller's Redis credentials must hold it."""
        self.r = client
        self.keys = keys or Keys()
        self.role = role
        self.clock = clock
        self.log_maxlen = log_maxlen
        # what this process read from and wrote to the log: its caches check it on every read
        self.mark = LogMark()
        self.writer = writer  # named in every log entry this store commits ("u"); "" = none
        self._commit = client.register_script(scripts.COMMIT)
        self._snapshot = client.register_script(scripts.SNAPSHOT)

    def as_writer(self, writer: str) -> Store:
        """This store (same connection, scripts and clock) committing as ``writer``: the API
        server's user of one request, recorded in each log entry its commits append."""
        other = copy.copy(self)
        other.writer = writer
        return other

    # ---- reads --------------------------------------------------------------------------

    def get(self, kind: str, key: str) -> Obj:
        try:
            pipe = self.r.pipeline(transaction=True)
            pipe.hget(self.keys.objects(kind), key)
            pipe.hget(self.keys.versions(kind), key)
            data, rv = pipe.execute()
        except redis.RedisError as err:
            raise errors.UnavailableError(f"redis: {err}") from err
        if data is None:
            raise errors.NotFoundError(kind, key)
        return codec.unpack_object(data, rv.decode(), kind, key)

    def try_get(self, kind: str, key: str) -> Obj | None:
        try:
            return self.get(kind, key)
        except errors.NotFoundError:
            return None

    def list(self, kind: str, namespace: str | None = None) -> builtins.list[Obj]:
        """All objects of a kind (of one namespace when given), sorted by namespace/name."""
        _tip, objs = self.snapshot([kind])
        items = objs[kind]
        if namespace is not None:
            items = [o for o in items if meta.namespace(o) == namespace]
        return sorted(items, key=lambda o: (meta.namespace(o), meta.name(o)))

    def snapshot(self, kinds: Sequence[str]) -> tuple[str, dict[str, builtins.list[Obj]]]:
        """The log tip and every object of ``kinds`` at that tip, read atomically, with the
        check of this process's log mark (a rewind is counted there: see
        ``shared.store.logmark``)."""
        keys = [self.keys.log, self.keys.meta, self.keys.log_snapshot_id]
        for kind in kinds:
            keys += [self.keys.objects(kind), self.keys.versions(kind)]
        try:
            raw = self._read_only(self._snapshot, keys, [self.mark.seen])
        except redis.RedisError as err:
            raise errors.UnavailableError(f"redis: {err}") from err
        tip = raw[0].decode()
        self.mark.settle(self.r, self.keys, raw[1], [True] if raw[2] else [], raw[3])
        out: dict[str, builtins.list[Obj]] = {}
        for i, kind in enumerate(kinds):
            flat_objs, flat_rvs = raw[4 + 2 * i], raw[5 + 2 * i]
            rvs = {flat_rvs[j]: flat_rvs[j + 1].decode() for j in range(0, len(flat_rvs), 2)}
            items = []
            for j in range(0, len(flat_objs), 2):
                f = flat_objs[j]
                try:
                    items.append(codec.unpack_object(flat_objs[j + 1], rvs.get(f, "0-0"),
                                                     kind, f.decode("utf-8", "replace")))
                except errors.CorruptEntryError as err:
                    # skipped: readers see it again when a well-formed version is written
                    log.error("skipped stored %s %s: %s", kind, f.decode("utf-8", "replace"),
                              err)
            out[kind] = items
        return tip, out

    def names(self, kind: str) -> set[str]:
        """The keys of every stored object of ``kind``, readable or not (for a check of
        existence that must not take a malformed object for a missing one)."""
        try:
            raw: Any = self.r.hkeys(self.keys.objects(kind))
        except redis.RedisError as err:
            raise errors.UnavailableError(f"redis: {err}") from err
        return {k.decode("utf-8", "replace") for k in raw}

    def _read_only(self, script: Any, keys: builtins.list[str],
                   args: builtins.list[str]) -> Any:
        """Run a script that only reads with EVALSHA_RO, so the caller's ACL needs only read
        access to its keys (EVALSHA wants write access to every key it names), loading it
        first after a restart of Redis."""
        try:
            return self.r.evalsha_ro(script.sha, len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:
            self.r.script_load(script.script)
            return self.r.evalsha_ro(script.sha, len(keys), *keys, *args)

    def log_tip(self) -> str:
        last: Any = self.r.xrevrange(self.keys.log, count=1)
        return str(last[0][0].decode()) if last else "0-0"

    # ---- batched commits -----------------------------------------------------------------

    def commit(self, ops: Sequence[Op], atomic: bool = False,
               fence: Fence | None = None, nodes: Iterable[str] = ()) -> builtins.list[Result]:
        """Send ``ops`` in one script call, authorised as this store's role. With ``atomic`` a
        failed precondition of any op writes nothing at all; an op the role may not make
        (status "forbidden") makes the whole call write nothing. An object may appear at
        most once in a batch. With a ``fence`` nothing is written (every result "fenced")
        unless its token still holds the workqueue lease of its key. ``nodes``: the nodes a
        node-admission caller vouches for."""
        if not ops:
            return []
        pairs: dict[str, int] = {}
        keys = [self.keys.log]
        args: builtins.list[Any] = [len(ops), "1" if atomic else "0", codec.SCHEMA_VERSION,
                                    self.log_maxlen, fence.token if fence else "",
                                    fence.key if fence else "", self.mark.seen, self.writer,
                                    self.role, ",".join(nodes)]
        for op in ops:
            if op.kind not in pairs:
                pairs[op.kind] = len(pairs) + 1
                keys += [self.keys.objects(op.kind), self.keys.versions(op.kind)]
            args += [op.mode, pairs[op.kind], op.kind, op.key, op.expected, op.payload]
        keys += [self.keys.meta, self.keys.log_snapshot_id]
        if fence:
            keys.append(self.keys.wq_owner)
        try:
            raw = self._commit(keys=keys, args=args)
        except redis.exceptions.NoPermissionError as err:
            raise errors.ForbiddenError(ops[0].kind, ops[0].key, self.role,
                                        f"the Redis user may not run the commit: {err}") from err
        except redis.RedisError as err:
            raise errors.UnavailableError(f"redis: {err}") from err
        epoch, found, trimmed_to = raw[-1]
        # the mark is checked before anything is written: a rewind counts even though this
        # batch's new entries are past what was lost
        self.mark.settle(self.r, self.keys, epoch, [True] if found else [], trimmed_to)
        out = [Result(s.decode(), v.decode(), op) for (s, v), op in zip(raw[:-1], ops,
                                                                          strict=True)]
        for res in reversed(out):  # ids rise through a batch: the last written is the newest
            if res.ok:
                self.mark.saw(res.value)
                break
        for res in out:
            if res.status == "forbidden":
                log.error("commit refused: role %s, %s %s %s: %s", self.role, res.op.mode,
                          res.op.kind, res.op.key, res.value)
        return out

    def _raise_for(self, res: Result) -> None:
        if res.status == "exists":
            raise errors.AlreadyExistsError(res.op.kind, res.op.key)
        if res.status == "notfound":
            raise errors.NotFoundError(res.op.kind, res.op.key)
        if res.status == "conflict":
            raise errors.ConflictError(res.op.kind, res.op.key)
        if res.status == "forbidden":
            raise errors.ForbiddenError(res.op.kind, res.op.key, self.role, res.value)
        if not res.ok:
            raise errors.StoreError(f"{res.op.kind} {res.op.key}: {res.status}")

    # ---- preparing objects ---------------------------------------------------------------

    def _check(self, obj: Obj, old: Obj | None = None) -> None:
        problems = model_validation.validate(obj, old)
        if problems:
            raise errors.InvalidError(str(obj.get("kind")), meta.name(obj), problems)
        try:
            check_size(obj)
        except (OverflowError, TypeError, ValueError) as err:
            raise errors.InvalidError(str(obj.get("kind")), meta.name(obj),
                                      [f"object: Invalid value: cannot be encoded: {err}"]
                                      ) from err

    @staticmethod
    def _shape(obj: Any) -> Obj:
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
            pass  # reported by the validation (``_check``)
        for f in ("creationTimestamp", "deletionTimestamp"):  # metav1.Time decodes them
            value = md.get(f)
            if isinstance(value, str) and value:
                try:
                    model_syntax.parse_rfc3339(value)
                except ValueError as err:
                    raise errors.BadRequestError(
                        f'{kind} in version "v1" cannot be handled as a {kind}: {err}'
                    ) from err
        return obj

    def stamp(self, obj: Obj, now: float | None = None) -> Obj:
        """Stamp a new object built by a controller from validated parts (uid,
        creationTimestamp, generation) without re-validating it: the hot path of pod
        creation. ``obj`` is changed in place and returned."""
        md = obj["metadata"]
        md["uid"] = str(uuid.uuid4())
        md["creationTimestamp"] = meta.format_time(self.clock() if now is None else now)
        md["generation"] = 1
        return obj

    def prepare_create(self, obj: Obj, now: float | None = None) -> Obj:
        """Validate, default and stamp a new object (uid, creationTimestamp, generation)."""
        obj = self._shape(copy.deepcopy(codec.plain(obj)))
        requested_tg = requested_template_generation(obj) if obj["kind"] == "DaemonSet" else 0
        info = model_kinds.by_kind(str(obj.get("kind")))
        obj.setdefault("apiVersion", info.api_version) if info else None
        md = obj.setdefault("metadata", {})
        if isinstance(md, dict) and info is not None:
            if info.namespaced:
                md.setdefault("namespace", "default")
                if not md.get("namespace"):
                    md["namespace"] = "default"
            else:
                md.pop("namespace", None)
        obj = model_defaults.default(obj)
        self._check(obj)
        md = obj["metadata"]
        for f in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            md.pop(f, None)
        self.stamp(obj, now)
        if obj.get("kind") == "DaemonSet":
            # PrepareForCreate (pkg/registry/apps/daemonset/strategy.go): the requested
            # templateGeneration, raised to 1 when lower; written back as FormatInt
            ann = md.setdefault("annotations", {})
            ann[TEMPLATE_GENERATION_ANNOTATION] = str(max(requested_tg, 1))
            obj["status"] = {
                "currentNumberScheduled": 0, "desiredNumberScheduled": 0,
                "numberMisscheduled": 0, "numberReady": 0,
            }
        return obj

    def create_op(self, obj: Obj, ensure: bool = False, prepared: bool = False) -> Op:
        if not prepared:
            obj = self.prepare_create(obj)
        return Op("ensure" if ensure else "create", obj["kind"], meta.key(obj),
                  codec.pack_object(obj), obj=obj)

    def _bookkeep_update(self, new: Obj, old: Obj) -> Obj:
        """Server-side rules of an update (registry strategy): keep identity and status,
        bump generation on spec changes, templateGeneration on template changes."""
        new = copy.deepcopy(codec.plain(new))
        if new.get("kind") == "DaemonSet":
            requested_template_generation(new)  # decoded (and refused if bad), then ignored
        new = model_defaults.default(new)
        md, omd = new.setdefault("metadata", {}), old["metadata"]
        for f in ("uid", "creationTimestamp", "namespace", "name"):
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
            if not _spec_equal(new.get("spec"), old.get("spec")):
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
            if not _spec_equal(
                (new.get("spec") or {}).get("template"), (old.get("spec") or {}).get("template")
            ):
                tg += 1
            ann[TEMPLATE_GENERATION_ANNOTATION] = str(tg)
        self._check(new, old)
        return new

    def update_op(self, obj: Obj, old: Obj) -> Op:
        """An update of ``old`` (as read) to ``obj``; precondition: ``obj``'s rv if it has one,
        else ``old``'s. Removing the last finalizer of a deleted object deletes it, unless a
        grace period is still running (a terminating pod: its node agent removes it)."""
        new = self._bookkeep_update(obj, old)
        expected = meta.resource_version(obj) or meta.resource_version(old)
        grace_left = int(meta.metadata(old).get("deletionGracePeriodSeconds") or 0) > 0
        if meta.is_being_deleted(new) and not meta.finalizers(new) and not grace_left:
            return Op("delete", new["kind"], meta.key(new), codec.pack_object(new), expected, new)
        return Op("update", new["kind"], meta.key(new), codec.pack_object(new), expected, new)

    def status_op(self, new: Obj, old: Obj) -> Op:
        """A status write by a system component (node agent binding a pod or reporting its
        status, a node reporting conditions): ``new``'s ``status`` and ``spec.nodeName`` over
        ``old`` as stored. Only those are new, so only they are validated (the rest is the
        stored, validated object; for a node agent the commit script refuses any other
        difference). Precondition: ``old``'s version.

        The node agent writes thousands of these per second, so nothing is deep-copied: the
        op's object is a new top level and metadata (and spec when nodeName changes) over the
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
                    model_syntax.is_dns1123_subdomain(node_name):
                problems.append(f"spec.nodeName: Invalid value: {node_name!r}: "
                                "must be a node's name")
        if problems:
            raise errors.InvalidError(kind, meta.name(old), problems)
        return Op("update", merged["kind"], meta.key(merged), codec.pack_object(merged),
                  meta.resource_version(old), merged)

    def final_delete_op(self, old: Obj) -> Op:
        """Remove an object whose deletion is due (grace period over, no finalizers left)."""
        return Op("delete", old["kind"], meta.key(old), codec.pack_object(old),
                  meta.resource_version(old), old)

    # ---- single-object API --------------------------------------------------------------

    def create(self, obj: Obj) -> Obj:
        op = self.create_op(obj)
        res = self.commit([op])[0]
        self._raise_for(res)
        assert op.obj is not None
        op.obj["metadata"]["resourceVersion"] = res.value
        return op.obj

    def update(self, obj: Obj) -> Obj:
        """Replace an object; ``metadata.resourceVersion`` must be current (else Conflict)."""
        kind, key = str(obj.get("kind")), meta.key(obj)
        old = self.get(kind, key)
        if meta.resource_version(obj) and meta.resource_version(obj) != meta.resource_version(old):
            raise errors.ConflictError(kind, key)
        op = self.update_op(obj, old)
        res = self.commit([op])[0]
        self._raise_for(res)
        assert op.obj is not None
        op.obj["metadata"]["resourceVersion"] = res.value
        return op.obj

    def update_status(self, obj: Obj) -> Obj:
        """The /status subresource: keep the stored spec and metadata, replace status."""
        kind, key = str(obj.get("kind")), meta.key(obj)
        old = self.get(kind, key)
        if meta.resource_version(obj) and meta.resource_version(obj) != meta.resource_version(old):
            raise errors.ConflictError(kind, key)
        new = copy.deepcopy(old)
        new["status"] = copy.deepcopy(obj.get("status") or {})
        if kind == "DaemonSet":
            if isinstance(new["status"], dict):
                new["status"] = ds_status.json_shape(new["status"])
            problems = model_validation.validate_daemonset_status(
                new["status"], old.get("status") or {}
            )
            if problems:
                raise errors.InvalidError(kind, meta.name(old), problems)
        op = Op("update", kind, key, codec.pack_object(new), meta.resource_version(old), new)
        res = self.commit([op])[0]
        self._raise_for(res)
        new["metadata"]["resourceVersion"] = res.value
        return new

    def mutate(self, kind: str, key: str, fn: Callable[[Obj], Obj | None],
               status: bool = False) -> Obj | None:
        """Read-modify-write with Conflict retries. ``fn`` returns the new object, or None
        for "no change". Returns the stored object (None if ``fn`` made no change)."""
        for _ in range(CONFLICT_RETRIES):
            current = self.get(kind, key)
            new = fn(copy.deepcopy(current))
            if new is None:
                return None
            new.setdefault("metadata", {})["resourceVersion"] = meta.resource_version(current)
            try:
                return self.update_status(new) if status else self.update(new)
            except errors.ConflictError:
                continue
        raise errors.ConflictError(kind, key, "too many concurrent changes; try again")

    def delete_op(self, current: Obj, propagation: str = "background",
                  grace_seconds: int | None = None) -> Op | None:
        """The write that deletes ``current`` (as read) the way the API server does.

        Objects with finalizers (or a foreground/orphan propagation, which adds one) get a
        deletionTimestamp and stay until their finalizers are removed. Pods bound to a node
        are deleted gracefully: they get a deletionTimestamp and the node agent removes them
        after their grace period (``grace_seconds=0`` removes them at once). None: nothing to
        write (already terminating).
        """
        kind, key = str(current.get("kind")), meta.key(current)
        # only metadata keys change below: copy that map, share the rest (a rollout deletes
        # thousands of pods; deep copies and packing whole pods to compare them showed up)
        new = {**current, "metadata": dict(current["metadata"])}
        md = new["metadata"]
        fins = meta.finalizers(new)
        if propagation == "foreground" and FOREGROUND not in fins:
            fins.append(FOREGROUND)
        elif propagation == "orphan" and ORPHAN not in fins:
            fins.append(ORPHAN)
        graceful = False
        if kind == "Pod":
            if meta.is_being_deleted(current) and grace_seconds != 0:
                return None  # already terminating; the node agent finishes it
            spec = new.get("spec") or {}
            grace = grace_seconds
            if grace is None:
                grace = int(spec.get("terminationGracePeriodSeconds", 30))
            phase = (new.get("status") or {}).get("phase")
            graceful = bool(spec.get("nodeName")) and grace > 0 and phase not in (
                "Succeeded", "Failed")
            if graceful:
                md["deletionGracePeriodSeconds"] = grace
            elif fins:  # no grace left: removing the last finalizer then removes the pod
                md["deletionGracePeriodSeconds"] = 0
        rv = meta.resource_version(current)
        if fins or graceful:
            if fins:
                md["finalizers"] = fins
            if not md.get("deletionTimestamp"):
                md["deletionTimestamp"] = meta.format_time(self.clock())
            if _spec_equal(md, current["metadata"]):
                return None
            return Op("update", kind, key, codec.pack_object(new), rv, new)
        return Op("delete", kind, key, codec.pack_object(current), rv, current)

    def delete(
        self,
        kind: str,
        key: str,
        propagation: str = "background",
        uid: str | None = None,
        grace_seconds: int | None = None,
        resource_version: str | None = None,
    ) -> Obj | None:
        """Delete an object (see ``delete_op``); ``uid`` and ``resource_version`` are
        preconditions. Returns the object as left in the store, or None when it is gone."""
        for _ in range(CONFLICT_RETRIES):
            current = self.get(kind, key)
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
            op = self.delete_op(current, propagation, grace_seconds)
            if op is None:
                return current
            res = self.commit([op])[0]
            if res.status == "conflict":
                continue
            self._raise_for(res)
            if op.mode == "delete":
                return None
            assert op.obj is not None
            op.obj["metadata"]["resourceVersion"] = res.value
            return op.obj
        raise errors.ConflictError(kind, key, "too many concurrent changes; try again")

    def raw_update_op(self, new: Obj, expected_rv: str) -> Op:
        """A metadata change by a controller (owner references, labels of its own pods):
        written as given (no server-side bookkeeping), with the version precondition, once
        validated like any stored object."""
        self._check(new)
        return Op("update", str(new["kind"]), meta.key(new), codec.pack_object(new),
                  expected_rv, new)

    # ---- apply (kubectl apply) -----------------------------------------------------------

    def apply(self, obj: Obj) -> tuple[str, Obj]:
        """Create or update from a manifest: "created", "configured" or "unchanged".

        The manifest's spec, labels and annotations replace the stored ones (a two-way
        apply); status and server-set metadata are kept.
        """
        obj = self._shape(codec.plain(obj))
        kind, key = str(obj.get("kind")), self.manifest_key(obj)
        if kind == "DaemonSet":
            requested_template_generation(obj)  # a bad value is refused on update too
        for _ in range(CONFLICT_RETRIES):
            current = self.try_get(kind, key)
            if current is None:
                try:
                    return "created", self.create(obj)
                except errors.AlreadyExistsError:
                    continue
            new = copy.deepcopy(current)
            md = new["metadata"]
            for f in ("labels", "annotations"):
                given = (obj.get("metadata") or {}).get(f)
                if f == "annotations":
                    keep = {k: v for k, v in (md.get(f) or {}).items()
                            if k == TEMPLATE_GENERATION_ANNOTATION}
                    given = {**(given or {}), **keep} if (given or keep) else None
                if given:
                    md[f] = given
                else:
                    md.pop(f, None)
            for f, v in obj.items():
                if f not in ("metadata", "status", "apiVersion", "kind"):
                    new[f] = v
            for f in list(new):
                if f not in obj and f not in ("metadata", "status", "apiVersion", "kind"):
                    del new[f]
            try:
                prepared = self._bookkeep_update(new, current)
            except errors.InvalidError:
                raise
            if _spec_equal(prepared, current):
                return "unchanged", current
            try:
                return "configured", self.update(new)
            except errors.ConflictError:
                continue
        raise errors.ConflictError(kind, key, "too many concurrent changes; try again")

    def manifest_key(self, obj: Obj) -> str:
        info = model_kinds.by_kind(str(obj.get("kind")))
        md = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        assert isinstance(md, dict)
        ns = (md.get("namespace") or "default") if (info is None or info.namespaced) else ""
        return f"{ns}/{md.get('name') or ''}"



class DryRunStore(Store):
    """A store whose commits write nothing and report success: every read, validation and
    bookkeeping step of the real one runs (the API's ``dryRun=All``, kubectl's server-side
    dry run). Relies on the store's contract that every write goes through ``commit``."""

    def commit(self, ops: Sequence[Op], atomic: bool = False,
               fence: Fence | None = None, nodes: Iterable[str] = ()) -> builtins.list[Result]:
        return [Result("ok", meta.resource_version(op.obj or {}) or "0-0", op) for op in ops]

    @classmethod
    def of(cls, store: Store) -> DryRunStore:
        """A dry-run twin of ``store`` (same connection, keys, clock and writer)."""
        return cls(store.r, store.keys, clock=store.clock, writer=store.writer, role=store.role)
