"""The store: every write of every process goes through here, as one Lua commit.

What to write is decided by the API's rules (``shared.api.writes``: defaults, validation,
uid, creationTimestamp, generation, templateGeneration, finalizers, graceful delete, the
apply merge), which return each write marked with how far it is trusted; the store reads,
commits and retries on a conflict. The ``COMMIT`` script checks the writer's role and the
resourceVersion precondition, updates the materialised view and appends one log entry per
object, atomically. With ``dry`` the verbs run the same reads and rules and commit nothing.
"""

from __future__ import annotations

import builtins
import copy
import logging
import os
import socket
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

from shared.api import serviceips, writes
from shared.eventlog.entry import CommitResult, WriteMode
from shared.model import kinds, meta, priority
from shared.store import codec, errors, roles, scripts
from shared.store.keys import Keys
from shared.store.logmark import NOT_READ, ConnectCount, LogMark
from shared.store.ownwrites import OBJECT_WRITES, OwnWrites

Obj = dict[str, Any]
log = logging.getLogger(__name__)

TEMPLATE_GENERATION_ANNOTATION = writes.TEMPLATE_GENERATION_ANNOTATION
FOREGROUND = writes.FOREGROUND
ORPHAN = writes.ORPHAN
CONFLICT_RETRIES = 8
MAX_OBJECT_BYTES = writes.MAX_OBJECT_BYTES
check_size = writes.check_size
requested_template_generation = writes.requested_template_generation
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
    # a log mark reads the log's identity again after a new connection (shared.store.logmark)
    kwargs.setdefault("redis_connect_func", ConnectCount())
    return redis.Redis.from_url(url, **kwargs)


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

    mode: WriteMode
    kind: str
    key: str
    payload: bytes
    expected: str = ""
    obj: Obj | None = None
    trust: writes.Trust | None = None  # how far the rules checked it (None: a record)

    @classmethod
    def record(cls, kind: str, key: str, record: Obj) -> Op:
        return cls(WriteMode.RECORD, kind, key, codec.pack(record))

    @classmethod
    def of(cls, write: writes.Write) -> Op:
        """The op that commits ``write``."""
        return cls(write.mode, write.kind, write.key, codec.pack_object(write.obj),
                   write.expected, write.obj, write.trust)


@dataclass(frozen=True)
class Fence:
    """A commit precondition: ``token`` still holds the workqueue lease of ``key`` (so a
    worker whose lease ran out and was handed to another writes nothing)."""

    key: str
    token: str


@dataclass
class Result:
    status: CommitResult
    value: str  # the new resourceVersion (ok), the current one, or why it is forbidden
    op: Op = field(repr=False, default_factory=lambda: Op(WriteMode.RECORD, "", "", b""))

    @property
    def ok(self) -> bool:
        return self.status == CommitResult.OK


def slow_start_batches(count: int, first: int) -> Iterator[tuple[int, int]]:
    """The [start, stop) of each batch of ``count`` ops in batches of ``first``, twice as
    many, ... (the last one cut at ``count``), as a ``slow_start`` commit tries them."""
    start, size = 0, first
    while start < count:
        yield start, min(start + size, count)
        start, size = start + size, size * 2


def _picking_again(write: Callable[[], Obj]) -> Obj:
    """``write()``, done again (up to ``CONFLICT_RETRIES`` times in all) while what the
    registry allocated for it was taken by another write committed meanwhile (``TakenError``:
    another API server's Service took the same address or port first); each try picks anew
    from the view as it then is."""
    for _ in range(CONFLICT_RETRIES - 1):
        try:
            return write()
        except errors.TakenError:
            continue
    return write()


def _now() -> float:
    return time.time()


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
        # what it wrote, while a cache of it reads that back (``shared.store.ownwrites``)
        self.own = OwnWrites()
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
        known = self.mark.known(self.r)
        try:
            raw = self._read_only(self._snapshot, keys, [known.seen])
        except redis.RedisError as err:
            raise errors.UnavailableError(f"redis: {err}") from err
        tip = raw[0].decode()
        self.mark.settle(self.r, self.keys, raw[1], [True] if raw[2] else [], raw[3], known)
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
               fence: Fence | None = None, nodes: Iterable[str] = (),
               slow_start: int = 0) -> builtins.list[Result]:
        """Send ``ops`` in one script call, authorised as this store's role. With ``atomic`` a
        failed precondition of any op writes nothing at all; an op the role may not make
        (status "forbidden") makes the whole call write nothing. An object may appear at
        most once in a batch. With a ``fence`` nothing is written (every result "fenced")
        unless its token still holds the workqueue lease of its key. ``nodes``: the nodes a
        node-admission caller vouches for. ``slow_start`` B: the ops are tried in batches of
        B, 2B, 4B, ... (``slow_start_batches``), and those after the first batch with a
        result other than "ok" are not tried ("skipped")."""
        if not ops:
            return []
        pairs: dict[str, int] = {}
        keys = [self.keys.log]
        known = self.mark.known(self.r)
        mode = f"s{slow_start}" if slow_start > 0 else "1" if atomic else "0"
        args: builtins.list[Any] = [len(ops), mode, codec.SCHEMA_VERSION,
                                    self.log_maxlen, fence.token if fence else "",
                                    fence.key if fence else "", known.seen, self.writer,
                                    self.role, ",".join(nodes),
                                    "1" if self.mark.wants_epoch(known) else "0"]
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
        epoch, found, trimmed_to, read = raw[-1]
        # the mark is checked before anything is written: a rewind counts even though this
        # batch's new entries are past what was lost
        self.mark.settle(self.r, self.keys, epoch if read else NOT_READ,
                         [True] if found else [], trimmed_to, known)
        out = [Result(CommitResult(s.decode()), v.decode(), op) for (s, v), op in zip(raw[:-1], ops,
                                                                          strict=True)]
        for res in reversed(out):  # ids rise through a batch: the last written is the newest
            if res.ok:
                self.mark.saw(res.value)
                break
        if self.own.enabled:
            self.own.add((r.value, r.op.kind, r.op.payload, r.op.obj) for r in out
                         if r.ok and r.op.mode in OBJECT_WRITES and r.op.obj is not None)
        for res in out:
            if res.status == CommitResult.FORBIDDEN:
                log.error("commit refused: role %s, %s %s %s: %s", self.role, res.op.mode,
                          res.op.kind, res.op.key, res.value)
        return out

    def _raise_for(self, res: Result) -> None:
        if res.status == CommitResult.EXISTS:
            raise errors.AlreadyExistsError(res.op.kind, res.op.key)
        if res.status == CommitResult.NOTFOUND:
            raise errors.NotFoundError(res.op.kind, res.op.key)
        if res.status == CommitResult.CONFLICT:
            raise errors.ConflictError(res.op.kind, res.op.key)
        if res.status == CommitResult.TAKEN:
            raise errors.TakenError(res.op.kind, res.op.key, f"{res.value}; try again")
        if res.status == CommitResult.FORBIDDEN:
            raise errors.ForbiddenError(res.op.kind, res.op.key, self.role, res.value)
        if not res.ok:
            raise errors.StoreError(f"{res.op.kind} {res.op.key}: {res.status}")

    # ---- writes as the API's rules prepare them (shared.api.writes) ---------------------

    def stamp(self, obj: Obj, now: float | None = None) -> Obj:
        """``writes.stamp`` (uid, creationTimestamp, generation) at ``now`` or this store's
        clock: a controller's new object, built from validated parts, changed in place."""
        return writes.stamp(obj, self.clock() if now is None else now)

    def prepare_create(self, obj: Obj, now: float | None = None) -> Obj:
        """``writes.prepare_create``: validate, default and stamp a new object."""
        return writes.prepare_create(obj, self.clock() if now is None else now,
                                     allocate=self.allocate)

    def allocate(self, obj: Obj, old: Obj | None) -> None:
        """What the registry allocates (``writes.Allocate``): a Service's cluster IP and
        node ports, picked from those no stored Service holds (read from the view now)."""
        if obj.get("kind") == kinds.SERVICE.kind:
            ips, ports = serviceips.taken(self.list(kinds.SERVICE.kind), obj)
            serviceips.allocate(obj, old, ips, ports)

    def create_op(self, obj: Obj, ensure: bool = False, prepared: bool = False) -> Op:
        """A create (``ensure``: if absent) of a user's object, or with ``prepared`` of a
        controller's, already stamped and not validated again."""
        if prepared:
            return Op.of(writes.controller_create(obj, ensure))
        return Op.of(writes.create(obj, self.clock(), ensure, allocate=self.allocate))

    def update_op(self, obj: Obj, old: Obj) -> Op:
        """``writes.update``: an update of ``old`` (as read) to ``obj``."""
        return Op.of(writes.update(obj, old, allocate=self.allocate))

    def status_op(self, new: Obj, old: Obj) -> Op:
        """``writes.system_status``: a system component's status write over ``old``."""
        return Op.of(writes.system_status(new, old))

    def recount_op(self, event: Obj) -> Op:
        """``writes.recount``: a repeated Event counted on the one written before."""
        return Op.of(writes.recount(event))

    def final_delete_op(self, old: Obj) -> Op:
        """``writes.final_delete``: remove an object whose deletion is due."""
        return Op.of(writes.final_delete(old))

    def raw_update_op(self, new: Obj, expected_rv: str) -> Op:
        """``writes.metadata_update``: a controller's metadata change, validated once."""
        return Op.of(writes.metadata_update(new, expected_rv))

    def delete_op(self, current: Obj, propagation: str | None = None,
                  grace_seconds: int | None = None, now: float | None = None) -> Op | None:
        """``writes.delete`` of ``current`` (as read) at ``now`` or this store's clock; None:
        nothing to write (already terminating)."""
        write = writes.delete(current, self.clock() if now is None else now, propagation,
                              grace_seconds)
        return None if write is None else Op.of(write)

    def manifest_key(self, obj: Obj) -> str:
        return writes.manifest_key(obj)

    # ---- single-object API --------------------------------------------------------------

    def _write(self, write: writes.Write, current: Obj | None, dry: bool) -> Obj:
        """Commit ``write`` (``current``: the object as read, None if absent) and return its
        object with the new resourceVersion; with ``dry`` commit nothing and return what
        ``writes.dry_run`` says."""
        if write.mode == WriteMode.UPDATE and current is not None \
                and writes.no_op(write.obj, current):
            return copy.deepcopy(current)
        if write.mode in (WriteMode.CREATE, WriteMode.ENSURE, WriteMode.UPDATE):
            self._admit(write)
        if dry:
            return writes.dry_run(write, current)
        res = self.commit([Op.of(write)])[0]
        self._raise_for(res)
        # a cache of this store's own writes reads this one back as the object written: the
        # caller, who may change what it gets, gets a copy
        obj = copy.deepcopy(write.obj) if self.own.enabled else write.obj
        obj["metadata"]["resourceVersion"] = res.value
        return obj

    def _admit(self, write: writes.Write) -> None:
        """Upstream's admission of a user's create or update, as prepared: its
        NamespaceLifecycle (nothing new in a namespace being deleted:
        NamespaceTerminatingError; what slips in meanwhile, a create racing the delete, its
        deletion deletes too), and its Priority plugin (a new pod's priority from its class,
        ``write.obj`` changed in place; a second global default class refused), both
        reading the view now."""
        if write.mode == WriteMode.UPDATE:
            self._admit_priority_class(write)
            return
        ns = meta.namespace(write.obj)
        holder = self.try_get(kinds.NAMESPACE.kind, "/" + ns) if ns else None
        if holder is not None and meta.is_being_deleted(holder):
            raise errors.NamespaceTerminatingError(write.kind, write.key, ns)
        if write.kind == kinds.POD.kind:
            try:
                priority.admit(write.obj["spec"], self.priority_classes())
            except priority.Forbidden as err:
                md = write.obj["metadata"]
                raise errors.AdmissionError(write.kind, write.key, str(err),
                                            md.get("generateName") or md.get("name")) from err
        self._admit_priority_class(write)

    def _admit_priority_class(self, write: writes.Write) -> None:
        if write.kind == kinds.PRIORITY_CLASS.kind:
            why = priority.default_conflict(write.obj, self.list(kinds.PRIORITY_CLASS.kind))
            if why is not None:
                raise errors.AdmissionError(write.kind, write.key, why)

    def priority_classes(self) -> dict[str, Obj]:
        """The stored PriorityClasses by name (``priority.admit``'s ``classes``)."""
        return {meta.name(pc): pc for pc in self.list(kinds.PRIORITY_CLASS.kind)}

    def create(self, obj: Obj, dry: bool = False, created: str | None = None) -> Obj:
        """Create ``obj``; ``created``: the creation time it keeps (a namespace without an
        object given one is as old as it was), else now."""
        def once() -> Obj:
            write = writes.create(obj, self.clock(), created=created, allocate=self.allocate)
            return self._write(write, self.try_get(write.kind, write.key) if dry else None, dry)
        return _picking_again(once)

    def update(self, obj: Obj, dry: bool = False, replace: bool = True) -> Obj:
        """Replace an object; ``metadata.resourceVersion`` must be current (else Conflict),
        and with ``replace`` (a PUT's object; a patched one names no precondition) its
        ``metadata.uid``, if it names one, the stored one's (``writes.check_uid``): both
        checked before the object, uid first, as upstream's storage does."""
        def once() -> Obj:
            old = self.get(str(obj.get("kind")), meta.key(obj))
            if replace:
                writes.check_uid(obj, old)
            writes.check_version(obj, old)
            return self._write(writes.update(obj, old, replace, self.allocate), old, dry)
        return _picking_again(once)

    def update_status(self, obj: Obj, dry: bool = False, current: Obj | None = None,
                      replace: bool = True) -> Obj:
        """The /status subresource: keep the stored spec and metadata, replace status.
        ``current``: the stored object as the caller has just read it (``get``), instead of
        reading it again; its resourceVersion is the precondition, so a change since is a
        Conflict as ever. ``replace``: as for :meth:`update`."""
        old = current if current is not None else self.get(str(obj.get("kind")), meta.key(obj))
        if replace:
            writes.check_uid(obj, old)
        return self._write(writes.status_update(obj, old), old, dry)

    def update_ephemeral(self, obj: Obj, dry: bool = False, replace: bool = True) -> Obj:
        """A pod's /ephemeralcontainers subresource (``writes.ephemeral_update``): the stored
        pod with ``obj``'s ephemeral containers; ``replace``: as for :meth:`update`."""
        old = self.get(str(obj.get("kind")), meta.key(obj))
        if replace:
            writes.check_uid(obj, old)
        return self._write(writes.ephemeral_update(obj, old), old, dry)

    def finalize(self, obj: Obj, dry: bool = False) -> Obj | None:
        """A Namespace's ``/finalize`` subresource (``writes.finalize_update``; a PUT: its
        uid is a precondition, as :meth:`update`'s): the object as left, or None when that
        deleted it."""
        old = self.get(str(obj.get("kind")), meta.key(obj))
        writes.check_uid(obj, old)
        write = writes.finalize_update(obj, old)
        out = self._write(write, old, dry)
        return None if write.mode == WriteMode.DELETE and not dry else out

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

    def delete(
        self,
        kind: str,
        key: str,
        propagation: str | None = None,
        uid: str | None = None,
        grace_seconds: int | None = None,
        resource_version: str | None = None,
        dry: bool = False,
        now: float | None = None,
        implicit: Obj | None = None,
    ) -> Obj | None:
        """Delete an object (``writes.delete``, at ``now`` or this store's clock); ``uid`` and
        ``resource_version`` are preconditions. Returns the object as left in the store, or
        None when it is gone. ``implicit``: a namespace without an object, as served
        (``shared.api.namespaces``): its object is made, then deleted (what is in it goes
        first)."""
        writes.check_deletable(kind, key)
        at = self.clock() if now is None else now
        if implicit is not None and self.try_get(kind, key) is None:
            if dry:
                made = writes.prepare_create(implicit, at, meta.creation_timestamp(implicit))
                write = writes.delete(made, at, propagation, grace_seconds)
                return write.obj if write is not None else made
            try:
                self.create(copy.deepcopy(implicit), created=meta.creation_timestamp(implicit))
            except errors.AlreadyExistsError:
                pass  # made meanwhile: delete it as stored
        for _ in range(CONFLICT_RETRIES):
            current = self.get(kind, key)
            writes.check_delete_preconditions(current, uid, resource_version)
            write = writes.delete(current, at, propagation, grace_seconds)
            if write is None:
                return current
            try:
                out = self._write(write, current, dry)
            except errors.ConflictError:
                continue
            return None if write.mode == WriteMode.DELETE else out
        raise errors.ConflictError(kind, key, "too many concurrent changes; try again")

    # ---- apply (kubectl apply) -----------------------------------------------------------

    def apply(self, obj: Obj, dry: bool = False) -> tuple[str, Obj]:
        """Create or update from a manifest (``writes.apply``): "created", "configured" or
        "unchanged"."""
        manifest = writes.apply_manifest(obj)
        kind, key = str(manifest.get("kind")), writes.manifest_key(manifest)
        for _ in range(CONFLICT_RETRIES):
            current = self.try_get(kind, key)
            verb, write = writes.apply(manifest, current, self.clock(), self.allocate)
            if write is None:
                assert current is not None
                return verb, current
            try:
                return verb, self._write(write, current, dry)
            except (errors.AlreadyExistsError, errors.ConflictError):
                continue
        raise errors.ConflictError(kind, key, "too many concurrent changes; try again")
