"""Carry out a Plan: the one place the controller's decisions touch the store.

Order and error rules follow ``syncDaemonSet`` (spec §c.1, §c.6): history first (an error ends
the sync with no status); then claims, on every sync, also one waiting for expectations (an
error means no creates, deletes or status); then expectations, slow-start creates and
deletes; then history cleanup; status is published otherwise (unless the plan has none).

No retry or replay puts a second pod of one revision on one node: pod names are derived from
the decision (``podtemplate.pod_name``: the position the sync read through), so a retried or
replayed plan names the same pods and creation is create-if-absent; a later decision reads
through every earlier one's creates (the key's hand-out position follows them, and
expectations hold it back until the watcher has observed them); and pod creates are fenced
by the key's workqueue lease, so a worker that stalled past its lease while another took
the key over creates nothing.

A sync whose only write is one pod (a node added: the per-node path's usual plan) writes it in
the commit of its Events and decision record, all or nothing (``_DeferredCreate``): one log
write, and one wake-up of every reader of the log, fewer. Should that commit fail (the pod's
name is taken, the lease is lost), nothing was written, and the pod is created as any other
(its own commit, the failure handled there), then the Events.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from shared.control.protocols import BackoffStore, ExpectationsStore
from shared.daemonset import claim as ds_claim
from shared.daemonset import dsutil, podtemplate
from shared.daemonset import events as ds_events
from shared.daemonset import failure as ds_failure
from shared.daemonset import history as ds_history
from shared.daemonset import types as t
from shared.daemonset.messages import StatusMessage
from shared.eventlog.entry import CommitResult, WriteMode
from shared.model import meta, podutil
from shared.model.events import Correlated
from shared.model.objkey import ObjectKey
from shared.store import client as store_client
from shared.store import errors
from shared.store.cache import Cache
from shared.store.client import Op, Result, Store
from shared.store.recorder import Recorder

log = logging.getLogger("reconciler")

Obj = dict[str, Any]
MAX_NAME_SALT = 8
COMMIT_OPS = 500  # ops per commit: a longer list is written in commits of this many
# who the log names for the controller's own writes of a DaemonSet (a failed rollout paused
# or rolled back): upstream's controller identity
CONTROLLER_USER = "system:serviceaccount:kube-system:daemon-set-controller"


class SyncError(Exception):
    """A sync step failed; the key is retried with backoff."""


@dataclass
class Outcome:
    errors: list[str] = field(default_factory=list)
    created: int = 0
    deleted: int = 0
    ops: int = 0  # objects written
    # False: the sync failed before its status (history or claims), as upstream's
    # syncDaemonSet returns then without updateDaemonSetStatus
    publish_status: bool = True

    @property
    def ok(self) -> bool:
        return not self.errors


@dataclass(frozen=True)
class _DeferredCreate:
    """The one pod of a sync, written with its Events (``Executor._events``): the create
    (``op``: fails if the name is taken), the SuccessfulCreate ``event`` it adds, and where
    its errors go among the outcome's should it be created alone after all."""

    key: str
    hash_: str
    create: t.CreatePod
    op: Op
    event: t.EmitEvent
    errors_at: int


class Executor:
    """Acts on a plan. It reads no clock: every time it writes (expectations, creation
    timestamps, Events) is the snapshot's ``now``."""

    def __init__(self, store: Store, cache: Cache, expectations: ExpectationsStore,
                 backoff: BackoffStore) -> None:
        self.store = store
        self.cache = cache
        self.expectations = expectations
        self.backoff = backoff
        self._fence: store_client.Fence | None = None
        self._record: Callable[[Outcome], Op | None] | None = None
        self._deferred: _DeferredCreate | None = None
        self.recorder = Recorder(store, prepared=True)

    def _read(self, kind: str, key: str) -> Obj | None:
        """A live read; an object stored in the wrong shape fails the step (SyncError, the
        key is retried with backoff), it is not taken as missing."""
        try:
            return self.store.try_get(kind, key)
        except errors.CorruptEntryError as err:
            raise SyncError(f"reading {kind.lower()} {key}: {err}") from err

    # ---- entry point ------------------------------------------------------------------------

    def execute(self, plan: t.Plan, snap: t.Snapshot, lease_token: str = "",
                record: Callable[[Outcome], Op | None] | None = None) -> Outcome:
        """Carry out ``plan`` (decided from ``snap``). ``lease_token``: the workqueue lease
        this sync holds its key by; pod creates are fenced by it ("" = no fence).
        ``record``: the decision record's op, made from the outcome once every step is done,
        is written last, in the commit of the sync's Events (one log write for both)."""
        out = Outcome()
        self._record = record
        self._deferred = None
        self._fence = store_client.Fence(plan.key, lease_token) if lease_token else None
        key = plan.key
        if plan.delete_expectations:
            self.expectations.delete(key)
        events = list(plan.events)
        if plan.backoff:
            self.backoff.put_many({b.key: b.entry for b in plan.backoff})
        try:
            self._history(plan, snap, out)
        except SyncError as err:
            # syncDaemonSet: "failed to construct revisions of DaemonSet: %v", returned
            # before any status is computed
            out.errors.append(f"failed to construct revisions of DaemonSet: {err}")
            out.publish_status = False
            self._events(snap, events, out)
            return out
        sync_error: str | None = None
        try:
            # every sync claims: upstream's manage and updateDaemonSetStatus both start with
            # getNodesToDaemonPods, which adopts and releases, so the status-only pass of a
            # sync waiting for expectations claims too; when it fails, so does the status
            self._claims(plan, snap, out)
        except SyncError as err:
            sync_error = str(err)
            out.publish_status = False
        if snap.expectations_satisfied and sync_error is None:
            try:
                if plan.failure is not None:
                    self._fail_rollout(plan.failure, snap, events, out)
                if plan.sync_nodes is not None:
                    self._sync_nodes(key, snap, plan, plan.sync_nodes, events, out)
                self._cleanup(plan, out)
            except SyncError as err:
                sync_error = str(err)
        if sync_error:
            out.errors.append(sync_error)
        if plan.error:
            out.errors.append(plan.error)
        self._events(snap, events, out)
        return out

    # ---- history (§e.3) ------------------------------------------------------------------------

    def _history(self, plan: t.Plan, snap: t.Snapshot, out: Outcome) -> None:
        ds = snap.ds
        for action in plan.history:
            if isinstance(action, t.CreateRevision):
                self._create_revision(action.revision, ds or {}, out)
            elif isinstance(action, t.UpdateRevision):
                self._patch("ControllerRevision", action.namespace, action.name, action.uid,
                            functools.partial(_update_revision, a=action), out)
            elif isinstance(action, t.DeleteRevision):
                self._delete_object("ControllerRevision", action.namespace, action.name,
                                    action.uid, out)
            elif isinstance(action, t.RelabelPod):
                self._patch("Pod", action.namespace, action.name, action.uid,
                            functools.partial(_relabel, labels=action.labels), out)
            elif isinstance(action, t.PatchOwner):
                self._claim_batch([action], snap, out)

    def _create_revision(self, rev: Obj, ds: Obj, out: Outcome) -> None:
        op = self.store.create_op(rev)
        res = self.store.commit([op])[0]
        out.ops += 1
        if res.ok:
            return
        if res.status != CommitResult.EXISTS:
            raise SyncError(f"creating revision {meta.name(rev)}: {res.status}")
        existing = self._read("ControllerRevision", meta.key(rev))
        if existing is not None and ds_history.matches(ds, existing):
            return  # we created it before
        # a hash collision: bump status.collisionCount and retry the sync (§e.3 step 5)
        fresh = self._read("DaemonSet", meta.key(ds))
        if fresh is None:
            raise SyncError("DaemonSet disappeared while resolving a revision name collision")
        status = ds_history.bumped_collision_count(ds, fresh)
        if status is None:
            raise SyncError("found a stale collision count "
                            f"({dsutil.collision_count(ds)} != "
                            f"{dsutil.collision_count(fresh)}), will retry until it is updated")
        fresh["status"] = status
        try:
            self.store.update_status(fresh)
        except errors.StoreError as err:
            raise SyncError(f"updating collisionCount: {err}") from err
        raise SyncError(f'controllerrevisions.apps "{meta.name(rev)}" already exists')

    def _patch(self, kind: str, ns: str, name: str, uid: str,
               fn: Callable[[Obj], Obj | None], out: Outcome) -> None:
        def guarded(obj: Obj) -> Obj | None:
            if uid and meta.uid(obj) != uid:
                return None
            return fn(obj)

        try:
            self.store.mutate(kind, str(ObjectKey(ns, name)), guarded)
            out.ops += 1
        except errors.NotFoundError:
            return
        except errors.StoreError as err:
            raise SyncError(f"updating {kind} {name}: {err}") from err

    def _delete_object(self, kind: str, ns: str, name: str, uid: str, out: Outcome) -> None:
        try:
            self.store.delete(kind, str(ObjectKey(ns, name)), uid=uid or None)
            out.ops += 1
        except errors.NotFoundError:
            return
        except errors.StoreError as err:
            raise SyncError(f"deleting {kind} {name}: {err}") from err

    # ---- claims (§c.3) -----------------------------------------------------------------------

    def _claims(self, plan: t.Plan, snap: t.Snapshot, out: Outcome) -> None:
        if plan.claims:
            self._claim_batch(plan.claims, snap, out)

    def _claim_batch(self, claims: list[t.PatchOwner], snap: t.Snapshot, out: Outcome) -> None:
        ds = snap.ds or {}
        if any(c.adopt for c in claims):
            # one fresh read per pass: adoption only for the very DaemonSet, not being deleted
            fresh = self._read("DaemonSet", meta.key(ds))
            if fresh is None or meta.uid(fresh) != meta.uid(ds):
                raise SyncError(f"couldn't get node to daemon pod mapping for daemon set "
                                f'"{meta.name(ds)}": original DaemonSet is gone')
            if meta.is_being_deleted(fresh):
                raise SyncError(f"couldn't get node to daemon pod mapping for daemon set "
                                f'"{meta.name(ds)}": DaemonSet is being deleted')
        ops: list[Op] = []
        for c in claims:
            obj = self.cache.get(c.kind, str(ObjectKey(c.namespace, c.name)))
            if obj is None or meta.uid(obj) != c.uid:
                continue
            ops.append(self.store.raw_update_op(ds_claim.owner_change(obj, c, meta.uid(ds)),
                                                meta.resource_version(obj)))
        problems = [f"{r.op.kind} {r.op.key}: {r.status}"
                    for r in self._commit(ops, out) if r.status not in (CommitResult.OK, CommitResult.NOTFOUND)]
        if problems:
            raise SyncError(f"couldn't get node to daemon pod mapping for daemon set "
                            f'"{meta.name(ds)}": ' + "; ".join(problems))

    # ---- a failed rollout (shared.daemonset.failure) ----------------------------------------

    def _fail_rollout(self, action: t.FailRollout, snap: t.Snapshot,
                      events: list[t.EmitEvent], out: Outcome) -> None:
        """Pause or roll back the DaemonSet as the plan saw it: one update through the store's
        validation and bookkeeping, named in the log as the controller's, and its Warning
        Event once written. A DaemonSet changed meanwhile (Conflict) or gone is left alone:
        that change queues a sync that judges again."""
        new = ds_failure.applied(snap.ds or {}, action)
        try:
            self.store.as_writer(CONTROLLER_USER).update(new)
            out.ops += 1
        except (errors.ConflictError, errors.NotFoundError) as err:
            log.info("%s/%s: not taking the failure action %s: %s", action.namespace,
                     action.name, action.action, err)
        except errors.StoreError as err:
            raise SyncError(f"failed to {action.action} the failed rollout: {err}") from err
        else:
            log.warning("%s", action.message)
            events.append(t.EmitEvent("Warning", ds_failure.EVENT_REASON, action.message))

    # ---- syncNodes (§c.6) --------------------------------------------------------------------

    def _sync_nodes(self, key: str, snap: t.Snapshot, plan: t.Plan, sn: t.SyncNodes,
                    events: list[t.EmitEvent], out: Outcome) -> None:
        self.expectations.set(key, len(sn.creates), len(sn.deletes), snap.now)
        if len(sn.creates) == 1 and not sn.deletes and not plan.cleanup:
            self._defer_create(key, snap, plan.hash, sn.creates[0], events, out)
            return
        problems = self._create_pods(key, snap, plan.hash, sn.creates, events, out)
        if sn.deletes:
            problems += self._delete_pods(key, sn.deletes, events, out, snap.now)
        if problems:
            raise SyncError("; ".join(problems))

    def _defer_create(self, key: str, snap: t.Snapshot, hash_: str, c: t.CreatePod,
                      events: list[t.EmitEvent], out: Outcome) -> None:
        """The sync's one write, a pod: counted and announced as created now, written with
        the Events (``_events``), which undoes both should that commit fail."""
        pod = {**c.pod, "metadata": dict(c.pod["metadata"])}
        op = self.store.create_op(self.store.stamp(pod, snap.now), prepared=True)
        event = t.EmitEvent("Normal", "SuccessfulCreate",
                            f"Created pod: {ObjectKey.parse(op.key).name}")
        events.append(event)
        out.created += 1
        self._deferred = _DeferredCreate(key, hash_, c, op, event, len(out.errors))

    def _create_pods(self, key: str, snap: t.Snapshot, hash_: str, creates: list[t.CreatePod],
                     events: list[t.EmitEvent], out: Outcome) -> list[str]:
        """syncNodes' slow start (spec §c.6): creates in batches of 1, 2, 4, ...; after a
        batch with an error the rest is not tried (its expectations lowered). The batches
        go in one commit, which stops after the first batch with a result other than "ok"
        (``Store.commit``'s ``slow_start``); that batch is settled as a batch of its own
        would be (a name taken by another pod is tried with the next salt), then the rest
        goes in the next commit, its batches growing on from there."""
        problems: list[str] = []
        remaining = list(creates)
        batch = 1
        while remaining and not problems:
            count = _whole_batches(len(remaining), batch)
            chunk, remaining = remaining[:count], remaining[count:]
            ops = [self._create_op(snap, hash_, c, c.salt) for c in chunk]
            results = self.store.commit(ops, fence=self._fence, slow_start=batch)
            _count_writes(results, out)
            for first, stop in store_client.slow_start_batches(count, batch):
                batch *= 2
                pending = [(c, c.salt) for c in chunk[first:stop]]
                settled = results[first:stop]
                retry, problems = self._settle(key, snap, hash_, pending, settled, events, out)
                if not all(r.ok for r in settled):  # where the commit stopped
                    problems += self._create_batch(key, snap, hash_, retry, events, out)
                    remaining = chunk[stop:] + remaining
                    break
        if problems and remaining:
            self.expectations.lower(key, len(remaining), 0)
        return problems

    def _create_op(self, snap: t.Snapshot, hash_: str, c: t.CreatePod, salt: int) -> Op:
        # stamping and renaming touch metadata only: copy that level, share the rest (the
        # plan's pod is never changed, the op is packed at once)
        pod = {**c.pod, "metadata": dict(c.pod["metadata"])}
        if salt != c.salt:
            pod["metadata"]["name"] = podtemplate.pod_name(snap.ds or {}, c.node, hash_, salt,
                                                           snap.position)
        return self.store.create_op(self.store.stamp(pod, snap.now), ensure=True, prepared=True)

    def _create_batch(self, key: str, snap: t.Snapshot, hash_: str,
                      pending: list[tuple[t.CreatePod, int]], events: list[t.EmitEvent],
                      out: Outcome) -> list[str]:
        """Create one batch of pods, each (create, salt of its name), a name taken by
        another pod tried again with the next salt; returns the errors."""
        problems: list[str] = []
        while pending:
            ops = [self._create_op(snap, hash_, c, salt) for c, salt in pending]
            results = self._commit(ops, out, fence=self._fence)
            pending, found = self._settle(key, snap, hash_, pending, results, events, out)
            problems += found
        return problems

    def _settle(self, key: str, snap: t.Snapshot, hash_: str,
                pending: list[tuple[t.CreatePod, int]], results: list[Result],
                events: list[t.EmitEvent], out: Outcome,
                ) -> tuple[list[tuple[t.CreatePod, int]], list[str]]:
        """Count, announce or lower the expectations of each create's result; returns the
        creates to try again with the next salt, and the errors."""
        ds = snap.ds or {}
        retry: list[tuple[t.CreatePod, int]] = []
        problems: list[str] = []
        for (c, salt), res in zip(pending, results, strict=True):
            name = ObjectKey.parse(res.op.key).name
            if res.status == CommitResult.FENCED:
                # deposed: the key's next holder decides again from newer state
                self.expectations.lower(key, 1, 0)
                problems.append(f"lost the lease of {key}: pod for node {c.node} not created")
                continue
            if res.ok:
                out.created += 1
                events.append(t.EmitEvent("Normal", "SuccessfulCreate", f"Created pod: {name}"))
                continue
            if res.status == CommitResult.EXISTS:
                existing = self._read("Pod", res.op.key)
                if existing is not None and _same_daemon_pod(existing, ds, c.node, hash_):
                    # created by an earlier attempt: its creation was observed before the
                    # expectations were set again, so lower them ourselves
                    self.expectations.lower(key, 1, 0)
                    continue
                if salt + 1 < MAX_NAME_SALT:
                    retry.append((c, salt + 1))
                    continue
            self.expectations.lower(key, 1, 0)
            msg = f"Error creating: pods \"{name}\": {res.status}"
            events.append(t.EmitEvent("Warning", "FailedCreate", msg))
            problems.append(msg)
        return retry, problems

    def _delete_pods(self, key: str, deletes: list[t.DeletePod], events: list[t.EmitEvent],
                     out: Outcome, now: float) -> list[str]:
        ops: list[Op] = []
        problems: list[str] = []
        for d in deletes:
            pod = self.cache.get("Pod", str(ObjectKey(d.namespace, d.name)))
            if pod is None or (d.uid and meta.uid(pod) != d.uid):
                self.expectations.lower(key, 0, 1)  # NotFound: observed, not an error
                continue
            op = self.store.delete_op(pod, now=now)
            if op is None:
                self.expectations.lower(key, 0, 1)
                continue
            ops.append(op)
        for res in self._commit(ops, out):
            name = ObjectKey.parse(res.op.key).name
            if res.ok:
                out.deleted += 1
                events.append(t.EmitEvent("Normal", "SuccessfulDelete", f"Deleted pod: {name}"))
                continue
            if res.status == CommitResult.CONFLICT:
                try:  # changed since our read (e.g. status): delete the current version
                    self.store.delete("Pod", res.op.key, uid=meta.uid(res.op.obj or {}) or None,
                                      now=now)
                    out.deleted += 1
                    events.append(t.EmitEvent("Normal", "SuccessfulDelete",
                                              f"Deleted pod: {name}"))
                    continue
                except errors.NotFoundError:
                    self.expectations.lower(key, 0, 1)
                    continue
                except errors.StoreError as err:
                    msg = f"Error deleting: {err}"
            elif res.status == CommitResult.NOTFOUND:
                self.expectations.lower(key, 0, 1)
                continue
            else:
                msg = f"Error deleting: pods \"{name}\": {res.status}"
            self.expectations.lower(key, 0, 1)
            events.append(t.EmitEvent("Warning", "FailedDelete", msg))
            problems.append(msg)
        return problems

    # ---- cleanupHistory (§e.5) ---------------------------------------------------------------

    def _cleanup(self, plan: t.Plan, out: Outcome) -> None:
        for c in plan.cleanup:
            try:
                self._delete_object("ControllerRevision", c.namespace, c.name, c.uid, out)
            except SyncError as err:
                raise SyncError(f"failed to clean up revisions of DaemonSet: {err}") from err

    # ---- events (§i) ---------------------------------------------------------------------------

    def _events(self, snap: t.Snapshot, events: list[t.EmitEvent], out: Outcome) -> None:
        """Write the Events about the DaemonSet (``shared.daemonset.events``), then the
        decision record (``execute``'s ``record``), in one commit; a deferred pod create
        (``_defer_create``) first in the same commit, all or nothing, else on its own."""
        deferred, self._deferred = self._deferred, None
        try:
            told, ops = self._event_ops(snap, events, out)
        except BaseException:
            if deferred is not None:  # never written: the watcher will not observe it
                self.expectations.lower(deferred.key, 1, 0)
            raise
        if deferred is not None:
            if len(ops) < COMMIT_OPS:  # the pod and all of them fit in one commit
                results = self.store.commit([deferred.op, *ops], atomic=True, fence=self._fence)
                if results[0].ok:
                    self.recorder.written(told, results)
                    _count_writes(results, out)
                    return
            # nothing was written: the pod is created as a sync of several creates would,
            # its Events told again
            self.recorder.unwritten(told)
            out.created -= 1
            events.remove(deferred.event)
            problems = self._create_batch(deferred.key, snap, deferred.hash_,
                                          [(deferred.create, deferred.create.salt)], events, out)
            if problems:
                out.errors.insert(deferred.errors_at, "; ".join(problems))
            told, ops = self._event_ops(snap, events, out)
        self.recorder.written(told, self._commit(ops, out))

    def _event_ops(self, snap: t.Snapshot, events: list[t.EmitEvent],
                   out: Outcome) -> tuple[list[Correlated], list[Op]]:
        """The Events through the recorder (``shared.store.recorder``: a repeat of an
        earlier sync's counts on its Event) and their ops, then the op of the decision
        record, made from ``out`` as it is now."""
        ds = snap.ds
        if events and ds is not None:
            for ev in ds_events.event_objects(ds, events, snap.now, snap.position):
                self.recorder.tell(ev, snap.now)
        told, ops = self.recorder.ops(snap.now)
        record = self._record(out) if self._record is not None else None
        if record is not None:
            ops.append(record)
        return told, ops

    # ---- helpers -------------------------------------------------------------------------------

    def _commit(self, ops: list[Op], out: Outcome,
                fence: store_client.Fence | None = None) -> list[Result]:
        results: list[Result] = []
        for i in range(0, len(ops), COMMIT_OPS):
            results += self.store.commit(ops[i:i + COMMIT_OPS], fence=fence)
        _count_writes(results, out)
        return results


def _whole_batches(count: int, first: int) -> int:
    """How many of ``count`` creates one commit carries from a batch of ``first`` on:
    its whole batches within COMMIT_OPS, and at least the first."""
    carried = 0
    for _, stop in store_client.slow_start_batches(count, first):
        if carried and stop > COMMIT_OPS:
            break
        carried = stop
    return carried


def _same_daemon_pod(pod: Obj, ds: Obj, node: str, hash_: str) -> bool:
    ref = meta.controller_ref(pod)
    return (ref is not None and ref.get("uid") == meta.uid(ds)
            and podutil.target_node(pod) == node
            and meta.labels(pod).get("controller-revision-hash") == hash_)


def _update_revision(obj: Obj, a: t.UpdateRevision) -> Obj | None:
    changed = False
    if a.revision is not None and obj.get("revision") != a.revision:
        obj["revision"] = a.revision
        changed = True
    if a.labels is not None:
        labels = {**meta.labels(obj), **a.labels}
        if labels != meta.labels(obj):
            obj["metadata"]["labels"] = labels
            changed = True
    return obj if changed else None


def _relabel(obj: Obj, labels: dict[str, str]) -> Obj | None:
    merged = {**meta.labels(obj), **labels}
    if merged == meta.labels(obj):
        return None
    obj["metadata"]["labels"] = merged
    return obj


def status_message(snap: t.Snapshot, plan: t.Plan) -> StatusMessage:
    """What the status-writer receives for one sync (a plan with a status)."""
    ds = snap.ds or {}
    return StatusMessage(
        key=plan.key, uid=meta.uid(ds),
        generation=int((ds.get("metadata") or {}).get("generation") or 0),
        status=plan.status or {}, observe=plan.update_observed_generation,
        position=snap.position,
        unavailable={reason: len(names) for reason, names in plan.unavailable.items()})


def _count_writes(results: list[Result], out: Outcome) -> None:
    """Count in ``out`` the object writes that ``results`` made (a decision record is none)."""
    out.ops += sum(1 for r in results if r.ok and r.op.mode != WriteMode.RECORD)
