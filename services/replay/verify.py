"""``replay FILE --verify``: re-run every recorded decision and compare, in memory.

Each DECISION entry records what one sync read (``position``: the log id its cache had
applied; ``now``; the expectations flag; the backoff entries) and what it decided
(``actions``); the gc's NoExecute evictions are recorded the same way and re-decided from the
node and its pods as of their position. Verification re-applies the file's entries in log order to an in-memory view
and, for each decision, rebuilds the Snapshot with the builder the live sync uses
(``shared.daemonset.inputs``) — the DaemonSet by key, every Node, the Pods and
ControllerRevisions of its namespace, all as of ``position`` (not as of the decision entry, which comes after the sync's own writes) — then
runs ``planner.plan`` and compares ``record.summarize`` of the new plan with the recorded one.
A per-node decision (its record names its ``nodes``) is recomputed by the function that made
it, ``planner.plan_nodes``, from the per-node snapshot (``inputs.build_nodes``) and a
per-DaemonSet index (``nodeindex``) as of its position: built from the view for the
DaemonSet's first per-node decision (and whenever its revision or basis changed), then kept
and told only of the Nodes and Pods changed since, as the reconciler keeps its own, so a
per-node decision costs its nodes, not the cluster; that it now asks for a full sync is a
divergence too.

Two passes over the file keep memory bounded by the cluster plus the decision records: the
first collects the decisions and orders them by position; the second folds the entries and
evaluates each decision just before the first entry newer than its position.

Objects are decoded when a decision first reads them, a status update over the version
before it when that one was decoded (``_Slot``: only the changed last value is decoded).
Most of the second pass is still the decisions' (decoding the objects they read that changed
since the one before, then re-planning: on the benchmark's log about 85% of it; the fold
alone 15%), and each needs only the fold up to its position: with ``workers`` the sorted
decisions are cut into consecutive shares, this process evaluating the first and a forked
process each later one, folding from the start of the file but evaluating only its own; the
last reads the whole file (its checks and the entry count). The forked ones start before the
first pass and fold ahead while it runs, then take the share they are sent (from the start
again, should it begin before where their fold got to). Their results are joined in
order, as one process would have found them.
"""

from __future__ import annotations

import os
import select
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.replay import logfile
from shared.daemonset import history, inputs, planner
from shared.daemonset import record as ds_record
from shared.daemonset import status as ds_status
from shared.daemonset import types as t
from shared.daemonset.nodeindex import DaemonSetIndex
from shared.eventlog import fold, wire
from shared.eventlog.entry import EntryType
from shared.model import meta, podutil, tainteviction
from shared.model.objkey import ObjectKey
from shared.store import codec, errors

Obj = dict[str, Any]
PlanFn = Callable[[t.Snapshot], t.Plan]
NAMESPACED = ("Pod", "ControllerRevision")
SYNC_KINDS = inputs.KINDS
_READ = frozenset(SYNC_KINDS)
_DECISION = str(EntryType.DECISION)  # plain str: fast ==
#: ``verify(workers=N)`` forks only with at least this many decisions for each worker
SHARE_MIN = 256
#: the cost of folding an entry without evaluating, as a share of a verified entry's (the
#: fold, the decoding and re-planning of its decisions: measured 4.6 µs of 30 on the
#: benchmark's log); sizes the workers' shares
FOLD_COST = 0.15
#: the first pass's cost (``_decisions``), in the same unit: measured 0.52 G instructions of
#: 8.0 G for a whole verify of the benchmark's 100,000-entry log
SCAN_COST = 0.07
#: a worker folding ahead looks whether its share arrived every this many entries
POLL = 4096


@dataclass(frozen=True)
class Divergence:
    key: str  # the DaemonSet
    entry: str  # the DECISION entry id
    position: str  # what the sync read through
    difference: str  # record.first_difference(recorded, recomputed)
    recorded: Any
    recomputed: Any
    subject: str = "daemonset"  # what decided: a DaemonSet sync, or a taint eviction

    def describe(self) -> str:
        return (f"divergence in decision {self.entry} of {self.subject} {self.key} "
                f"(read through {self.position}): recorded != recomputed at {self.difference}")


@dataclass
class VerifyResult:
    verified: int = 0
    skipped: int = 0  # decisions that read state older than the file's snapshot
    entries: int = 0
    divergences: list[Divergence] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.divergences


class _Slot:
    """One object of the view: raw payload, decoded on first use. A newer version of an
    object decoded before (``base``) is decoded over it when only its last top-level value
    changed, as a status update does (``wire.unpack_object_over``)."""

    __slots__ = ("at", "base", "key", "obj", "payload", "rv")

    def __init__(self, rv: str, payload: bytes) -> None:
        self.rv, self.payload = rv, payload
        self.obj: Obj | None = None
        self.base: _Slot | None = None  # the newest decoded older version, until decoded
        self.at = -1  # where the last top-level value starts (-1: not known yet, 0: none)
        self.key = ""  # its key

    def get(self) -> Obj:
        if self.obj is None:
            base, self.base = self.base, None
            try:
                obj = self._over(base) if base is not None else None
                self.obj = obj if obj is not None else \
                    codec.unpack_object(self.payload, self.rv)
            except errors.CorruptEntryError as err:
                raise logfile.LogFileError(f"entry {self.rv}: {err}") from err
        return self.obj

    def _over(self, base: _Slot) -> Obj | None:
        """This version decoded over ``base``'s object, or None (decode it whole)."""
        if base.at < 0:
            found = wire.last_value_at(base.payload)
            base.at, base.key = found if found is not None else (0, "")
        if not base.at:
            return None
        assert base.obj is not None
        obj = wire.unpack_object_over(self.payload, self.rv, base.obj, base.payload, base.at,
                                      base.key)
        if obj is not None:
            self.at, self.key = base.at, base.key  # the same bytes up to there
        return obj

    def follows(self, old: _Slot) -> None:
        """This slot holds the version after ``old``'s."""
        self.base = old if old.obj is not None else old.base


class _Kept:
    """A DaemonSet's index and the keys of the Nodes and Pods changed since it was last
    brought up to date (``View.index``)."""

    __slots__ = ("index", "nodes", "pods")

    def __init__(self, index: DaemonSetIndex) -> None:
        self.index = index
        self.nodes: dict[str, None] = {}
        self.pods: dict[str, None] = {}


class View(fold.View[_Slot]):
    """The objects of the kinds a sync reads, as of ``position`` (the one fold,
    ``shared.eventlog.fold``), with pods and revisions indexed by namespace (as the
    reconciler's cache is). Acts on itself only."""

    def __init__(self, position: str = "0-0") -> None:
        super().__init__(SYNC_KINDS, position)
        self.ds = self.objects["DaemonSet"]
        self.node_slots = self.objects["Node"]
        # the keys of each namespace's objects, in the order they were added (a change to an
        # object already there, most entries, leaves the index alone)
        self.by_ns: dict[str, dict[str, dict[str, None]]] = {k: {} for k in NAMESPACED}

        # DaemonSet key → the index its per-node decisions are planned with (``index``)
        self.kept: dict[str, _Kept] = {}

    def _set(self, kind: str, key: str, value: _Slot) -> None:
        table = self.objects[kind]
        old = table.get(key)
        if old is not None:
            value.follows(old)
        elif kind in NAMESPACED:
            self.by_ns[kind].setdefault(ObjectKey.parse(key).namespace, {})[key] = None
        table[key] = value
        if self.kept:
            self._changed(kind, key)

    def _unset(self, kind: str, key: str) -> None:
        super()._unset(kind, key)
        if kind in NAMESPACED:
            self.by_ns[kind].get(ObjectKey.parse(key).namespace, {}).pop(key, None)
        if self.kept:
            self._changed(kind, key)

    def _changed(self, kind: str, key: str) -> None:
        """Note a Node or Pod change for the kept indexes it may concern."""
        if kind == "Node":
            for kept in self.kept.values():
                kept.nodes[key] = None
        elif kind == "Pod":
            namespace = ObjectKey.parse(key).namespace
            for kept in self.kept.values():
                if kept.index.namespace == namespace:
                    kept.pods[key] = None

    def index(self, key: str, ds: Obj, hash: str) -> DaemonSetIndex:
        """The index of DaemonSet ``key`` at revision ``hash`` as of this view: the one kept
        for it, told of the Nodes and Pods changed since it was last asked for, while it
        fits ``ds`` at ``hash``; else one built from every Node and the namespace's Pods
        (and kept). Decides (and keeps it)."""
        kept = self.kept.get(key)
        if kept is None or kept.index.hash != hash or not kept.index.update_ds(ds):
            index = DaemonSetIndex(ds, hash, self.nodes(), self.pods(meta.namespace(ds)))
            self.kept[key] = _Kept(index)
            return index
        index, pods = kept.index, self.objects["Pod"]
        for node_key in kept.nodes:
            slot = self.node_slots.get(node_key)
            if slot is None:
                index.remove_node(ObjectKey.parse(node_key).name)
            else:
                index.set_node(slot.get())
        for pod_key in kept.pods:
            slot = pods.get(pod_key)
            if slot is None:
                index.remove_pod(pod_key)
            else:
                index.set_pod(slot.get())
        kept.nodes.clear()
        kept.pods.clear()
        return index

    def pod_names(self, namespace: str) -> set[str]:
        """The names of the Pods of ``namespace`` (none decoded)."""
        return {ObjectKey.parse(k).name for k in self.by_ns["Pod"].get(namespace, ())}

    def namespaced(self, kind: str, namespace: str) -> list[Obj]:
        """The objects of ``kind`` in ``namespace``, decoded."""
        table = self.objects[kind]
        return [(slot := table[k]).obj or slot.get() for k in self.by_ns[kind].get(namespace, ())]

    def snapshot(self, rec: ds_record.DecisionRecord) -> t.Snapshot:
        """The Snapshot the sync ``rec`` records read (``shared.daemonset.inputs``, as the
        live sync builds it), with the backoff, expectations and time it recorded.
        Decides."""
        backoff = {str(k): t.BackoffEntry(float(v[0]), float(v[1]))
                   for k, v in rec.backoff.items()}
        return inputs.build(
            rec.key, self, rec.now, rec.position,
            lambda wanted: {k: backoff[k] for k in wanted if k in backoff},
            lambda: rec.expectations_satisfied)

    def node_snapshot(self, rec: ds_record.DecisionRecord, nodes: list[str]) -> t.Snapshot:
        """The Snapshot the per-node sync ``rec`` read (``inputs.build_nodes``). Decides."""
        backoff = {str(k): t.BackoffEntry(float(v[0]), float(v[1]))
                   for k, v in rec.backoff.items()}
        return inputs.build_nodes(
            rec.key, nodes, self, rec.now, rec.position,
            lambda wanted: {k: backoff[k] for k in wanted if k in backoff},
            lambda: rec.expectations_satisfied)

    # what a sync reads (``shared.daemonset.inputs.NodeSource``)

    def node(self, name: str) -> Obj | None:
        slot = self.node_slots.get(str(ObjectKey("", name)))
        return slot.get() if slot is not None else None

    def pods_on(self, namespace: str, node: str) -> list[Obj]:
        return [p for p in self.pods(namespace) if podutil.target_node(p) == node]

    def daemonset(self, key: str) -> Obj | None:
        slot = self.ds.get(key)
        return slot.get() if slot is not None else None

    def nodes(self) -> list[Obj]:
        return [s.obj or s.get() for s in self.node_slots.values()]  # most are decoded

    def pods(self, namespace: str) -> list[Obj]:
        return self.namespaced("Pod", namespace)

    def revisions(self, namespace: str) -> list[Obj]:
        return self.namespaced("ControllerRevision", namespace)

    def priority_classes(self) -> dict[str, Obj]:
        return {ObjectKey.parse(key).name: slot.get()
                for key, slot in self.objects["PriorityClass"].items()}


@dataclass(order=True)
class _Pending:
    position: tuple[int, int]
    entry_order: tuple[int, int]
    entry: str = field(compare=False)
    raw: bytes = field(compare=False)


def _decisions(path: str | Path, limit: tuple[int, int] | None) -> list[_Pending]:
    """Pass 1: every DECISION entry of the file, ordered by the position it read through."""
    out: list[_Pending] = []
    with logfile.Reader(path) as reader:
        for rec in reader.entries_of(_DECISION):
            eid = rec[1]
            if limit is not None and codec.id_tuple(eid) > limit:
                break
            try:
                position = str(codec.unpack(rec[6]).get("position") or "0-0")
            except (errors.CorruptEntryError, AttributeError):
                position = "0-0"
            out.append(_Pending(codec.id_tuple(position), codec.id_tuple(eid), eid, rec[6]))
    out.sort()
    return out


def check_eviction(view: View, entry: str,
                   rec: tainteviction.EvictionRecord) -> Divergence | None:
    """Re-decide one recorded NoExecute eviction (the gc's taint manager) against ``view``
    (as of its position): the node and every pod bound to it then, at the recorded time.
    Decides."""
    name = rec.node
    slot = view.node_slots.get(str(ObjectKey("", name)))
    node = slot.get() if slot is not None else {"metadata": {"name": name}}
    pods = [p for ns in view.by_ns["Pod"] for p in view.namespaced("Pod", ns)]
    decision = tainteviction.decide(node, pods, rec.now)
    recomputed = tainteviction.summarize(decision)
    recorded = rec.actions
    diff = ds_record.first_difference(recorded, codec.unpack(codec.pack(recomputed)))
    if diff is None:
        return None
    return Divergence(f"node/{name}", entry, rec.position, diff,
                      recorded, recomputed, subject="taint eviction")


def check(view: View, entry: str, doc: Obj, plan_fn: PlanFn) -> Divergence | None:
    """Re-plan one recorded sync (the map ``doc``, as logged) against ``view`` (which must
    be as of its position) and compare; a taint-eviction record is re-decided by
    ``check_eviction``; a record that cannot be read is a divergence. Decides."""
    try:
        rec = ds_record.read(doc)
    except errors.CorruptEntryError as err:
        return Divergence(str(doc.get("key") or "?") if isinstance(doc, dict) else "?",
                          entry, "?", f"record: {err}", doc, None)
    if isinstance(rec, tainteviction.EvictionRecord):
        return check_eviction(view, entry, rec)
    recorded = rec.actions
    if isinstance(recorded.get("status"), dict):
        # records written before the status took its JSON shape carry zero omitempty counters
        recorded = {**recorded, "status": ds_status.json_shape(recorded["status"])}
    nodes = rec.nodes
    if nodes is not None and not all(isinstance(n, str) for n in nodes):
        return Divergence(rec.key, entry, rec.position, "record: nodes are not names", doc,
                          None)
    snap = view.snapshot(rec) if nodes is None else view.node_snapshot(rec, nodes)
    uid = str(((snap.ds or {}).get("metadata") or {}).get("uid") or "")
    if snap.ds is not None and rec.uid and uid != rec.uid:
        return Divergence(snap.key, entry, snap.position,
                          f"input DaemonSet uid: {rec.uid!r} != {uid!r}", rec.uid, uid)
    if nodes is None:
        plan = plan_fn(snap)
    else:
        per_node = _plan_nodes(view, snap, nodes)
        if per_node is None:
            return Divergence(snap.key, entry, snap.position,
                              f"nodes: a per-node decision for {nodes} now needs a full sync",
                              recorded, None)
        plan = per_node
    recomputed = ds_record.summarize(plan)
    diff = ds_record.first_difference(recorded, codec.unpack(codec.pack(recomputed)))
    if diff is None:
        return None
    return Divergence(snap.key, entry, snap.position, diff, recorded, recomputed)


def _plan_nodes(view: View, snap: t.Snapshot, nodes: list[str]) -> t.Plan | None:
    """``planner.plan_nodes`` of ``snap`` with the DaemonSet's index as of ``view``
    (``View.index``). Decides."""
    ds = snap.ds
    if ds is None:
        return None
    hash = history.construct_history(ds, sorted(snap.revisions, key=meta.name), []).hash
    return planner.plan_nodes(snap, nodes, view.index(snap.key, ds, hash),
                              view.pod_names(meta.namespace(ds)))


def verify(path: str | Path, until: str = "", plan_fn: PlanFn | None = None,
           keep_going: bool = False, workers: int = 1,
           share_min: int = SHARE_MIN) -> VerifyResult:
    """Verify every decision of the export at ``path`` (up to ``until``). Stops at the first
    divergence unless ``keep_going``. With ``workers`` > 1 and at least ``share_min``
    decisions for each, the decisions are shared out in position order between this process
    and forked ones (``_shares``); the result is the one a single process finds. Acts (reads
    the file, forks)."""
    plan_fn = plan_fn or planner.plan
    started = time.monotonic()
    limit = codec.id_tuple(until) if until else None
    if workers > 1:
        result = _parallel(path, limit, workers, share_min, plan_fn, keep_going)
    else:
        result = _run(path, limit, _decisions(path, limit), plan_fn, keep_going, to_end=True)
    result.seconds = time.monotonic() - started
    return result


def default_workers() -> int:
    """The CPUs this process may run on: the ``workers`` ``replay --verify`` uses."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _shares(pending: list[_Pending], workers: int, share_min: int) -> list[list[_Pending]]:
    """``pending`` cut into consecutive shares, one per worker: a later share's worker folds
    the entries before its first decision without evaluating any, so shares shrink by
    FOLD_COST each (a worker's cost being its fold plus its decisions). Decides."""
    n = max(1, min(workers, len(pending) // max(1, share_min)))
    if n == 1:
        return [pending]
    weights = [(1.0 - FOLD_COST) ** k for k in range(n)]
    weights[0] -= SCAN_COST  # this process made the first pass while the others folded
    total, out, start, acc = sum(weights), [], 0, 0.0
    for k, w in enumerate(weights):
        acc += w
        end = len(pending) if k == n - 1 else round(len(pending) * acc / total)
        out.append(pending[start:end])
        start = end
    return [share for share in out if share]


def _order_of(kept: tuple[tuple[int, int], list[Any]]) -> tuple[int, int]:
    return kept[0]


class _Late(Exception):
    """A share arrived after the fold had passed its first decision's position."""


#: a share not known yet (``_run``): called with whether to wait for it, it answers the
#: decisions and ``to_end``, or None while they have not arrived (when not waiting)
Awaited = Callable[[bool], tuple[list[_Pending], bool] | None]


def _run(path: str | Path, limit: tuple[int, int] | None, pending: list[_Pending],
         plan_fn: PlanFn, keep_going: bool, to_end: bool,
         awaited: Awaited | None = None) -> VerifyResult:
    """Fold the file and evaluate the decisions ``pending`` (in position order), each as of
    its position; reads to the end of the file when ``to_end``, else stops after the last
    of them. ``awaited``: the decisions and ``to_end`` are not known yet (``pending`` is
    empty): the file is folded ahead, asking every POLL entries whether they arrived (and
    waiting for them at its end); raises _Late when they arrive after the fold passed the
    first one's position. Until the first decision is due, each object's newest entry is
    kept aside instead of folded (all a decision as of a later position reads of the entries
    before), and those are folded in log order then. Acts (reads the file)."""
    result = VerifyResult()
    with logfile.Reader(path) as reader:
        header = reader.header
        if not header.complete:
            raise logfile.LogFileError(
                f"{path} holds only part of the history: the state a decision read cannot "
                "be rebuilt from it (export without --since)")
        start = codec.id_tuple(header.snapshot or "0-0")
        view = View(header.snapshot or "0-0")
        todo: Iterator[_Pending] = iter(pending)
        nxt = next(todo, None)
        # (kind, key) → (order, record) of its newest entry, until the first decision is due
        ahead: dict[tuple[str, str], tuple[tuple[int, int], list[Any]]] | None = {}

        def fold_ahead() -> None:
            """Fold the entries kept aside, in log order, and stop keeping them aside."""
            nonlocal ahead
            assert ahead is not None
            for order, rec in sorted(ahead.values(), key=_order_of):
                apply(rec[1], rec[3], rec[4], rec[5], _Slot(rec[1], rec[6]), order)
            ahead = None

        def run_until(bound: tuple[int, int] | None) -> bool:
            """Evaluate pending decisions whose position is below ``bound``; False: stop."""
            nonlocal nxt
            if ahead is not None:
                fold_ahead()
            while nxt is not None and (bound is None or nxt.position < bound):
                if header.snapshot and nxt.position < start:
                    result.skipped += 1
                else:
                    div = check(view, nxt.entry, codec.unpack(nxt.raw), plan_fn)
                    if div is None:
                        result.verified += 1
                    else:
                        result.divergences.append(div)
                        if not keep_going:
                            return False
                nxt = next(todo, None)
            return True

        def arrived(wait: bool) -> bool:
            """Whether the awaited decisions arrived (and were taken)."""
            nonlocal todo, nxt, to_end, awaited
            assert awaited is not None
            got = awaited(wait)
            if got is None:
                return False
            awaited, (share, to_end) = None, got
            todo = iter(share)
            nxt = next(todo, None)
            folded = max([codec.id_tuple(view.position),
                          *(order for order, _rec in (ahead or {}).values())])
            if nxt is not None and nxt.position < folded:
                raise _Late()
            return True

        apply, entries, read = view.apply, 0, _READ
        for rec in reader.records():  # once per entry: kept to the fold and one id parse
            if rec[0] == logfile.OBJECT:
                view.put(rec[1], rec[2], _Slot(rec[3], rec[4]))
                continue
            eid = rec[1]
            order = codec.id_tuple(eid)
            if limit is not None and order > limit:
                break
            if nxt is not None and nxt.position < order and not run_until(order):
                break
            if nxt is None:
                if awaited is None:
                    if not to_end:
                        break  # this share's decisions are done: the rest is another's
                elif not entries % POLL and arrived(False):
                    if nxt is not None and nxt.position < order and not run_until(order):
                        break
                    if nxt is None and not to_end:
                        break
            if header.snapshot and order <= start:
                continue  # already in the snapshot
            entries += 1
            if rec[4] in read and rec[3] != _DECISION:  # others change nothing a sync reads
                if ahead is None:
                    apply(eid, rec[3], rec[4], rec[5], _Slot(eid, rec[6]), order)
                else:
                    ahead[rec[4], rec[5]] = (order, rec)
        result.entries = entries
        if awaited is not None:
            arrived(True)
        if not result.divergences or keep_going:
            run_until(None)
    return result


def _parallel(path: str | Path, limit: tuple[int, int] | None, workers: int, share_min: int,
              plan_fn: PlanFn, keep_going: bool) -> VerifyResult:
    """Fork ``workers`` - 1 children at once, which fold the file ahead while this process
    makes the first pass; then cut the decisions into shares (``_shares``), evaluate the
    first here and send each child its own (none: the child has nothing to do), which it
    evaluates and sends its result back as msgpack on a pipe; then join them in share order
    as one process would have found them: stopping at the first share with a divergence
    unless ``keep_going``, the entries counted by the last share's worker (which reads the
    whole file). Acts."""
    children: list[tuple[int, int, int]] = []  # pid, result pipe, share pipe
    results: list[VerifyResult | Exception] = []
    try:
        for _ in range(workers - 1):
            rfd, wfd = os.pipe()
            share_r, share_w = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: evaluate, send, exit without the parent's cleanup
                os.close(rfd)
                os.close(share_w)
                _child(wfd, share_r, path, limit, plan_fn, keep_going)
            os.close(wfd)
            os.close(share_r)
            children.append((pid, rfd, share_w))
        shares = _shares(_decisions(path, limit), workers, share_min)
        for k, (_pid, _rfd, share_w) in enumerate(children, start=1):
            _send_share(share_w, shares[k] if k < len(shares) else [], k == len(shares) - 1)
        results.append(_run(path, limit, shares[0], plan_fn, keep_going,
                            to_end=len(shares) == 1))
        for pid, rfd, _share_w in children[:len(shares) - 1]:
            results.append(_received(rfd, pid))
    finally:
        for k, (pid, rfd, share_w) in enumerate(children, start=1):
            _close(share_w)
            _reap(pid, rfd, stop=k >= len(results))
    joined = VerifyResult()
    for got in results:
        if isinstance(got, Exception):
            raise got  # where one process would have met it: after the shares before it
        joined.verified += got.verified
        joined.skipped += got.skipped
        joined.divergences.extend(got.divergences)
        joined.entries = got.entries
        if got.divergences and not keep_going:
            break
    return joined


def _send_share(fd: int, share: list[_Pending], to_end: bool) -> None:
    """Send a child its share (``_Receiver`` reads it). Acts (writes the pipe)."""
    doc = codec.pack([to_end, [[*p.position, *p.entry_order, p.entry, p.raw] for p in share]])
    with os.fdopen(fd, "wb", closefd=False) as out:
        out.write(len(doc).to_bytes(8, "big") + doc)


class _Receiver:
    """A child's end of its share pipe: ``_run``'s ``awaited``. Acts (reads the pipe)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.got: tuple[list[_Pending], bool] | None = None

    def __call__(self, wait: bool) -> tuple[list[_Pending], bool] | None:
        if self.got is None and (wait or select.select([self.fd], [], [], 0)[0]):
            with os.fdopen(self.fd, "rb", closefd=False) as pipe:
                size = int.from_bytes(pipe.read(8), "big")
                to_end, share = codec.unpack(pipe.read(size)) if size else (False, [])
            self.got = ([_Pending((p[0], p[1]), (p[2], p[3]), p[4], p[5]) for p in share],
                        bool(to_end))
        return self.got


def _child(wfd: int, share_fd: int, path: str | Path, limit: tuple[int, int] | None,
           plan_fn: PlanFn, keep_going: bool) -> None:
    """A forked worker: folds the file ahead until its share arrives on ``share_fd`` (from
    the start again if it came too late), then sends its result (or its error) as msgpack
    on ``wfd``. Never returns. Acts."""
    code = 0
    try:
        try:
            share = _Receiver(share_fd)
            try:
                got = _run(path, limit, [], plan_fn, keep_going, False, awaited=share)
            except _Late:
                assert share.got is not None
                pending, to_end = share.got
                got = _run(path, limit, pending, plan_fn, keep_going, to_end)
            doc: Obj = {"verified": got.verified, "skipped": got.skipped,
                        "entries": got.entries,
                        "divergences": [[d.key, d.entry, d.position, d.difference, d.recorded,
                                         d.recomputed, d.subject] for d in got.divergences]}
        except logfile.LogFileError as err:
            doc = {"error": str(err)}
        except BaseException as err:  # reported to the parent, which raises it
            doc = {"failed": f"{type(err).__name__}: {err}"}
        with os.fdopen(wfd, "wb") as out:
            out.write(codec.pack(doc))
    except BaseException:  # nothing left to report it to
        code = 1
    finally:
        os._exit(code)


def _received(rfd: int, pid: int) -> VerifyResult | Exception:
    """A child's result, as ``_child`` sent it, or its error. Acts (reads the pipe)."""
    with os.fdopen(rfd, "rb", closefd=False) as pipe:
        data = pipe.read()
    try:
        doc = codec.unpack(data)
    except errors.CorruptEntryError:
        return RuntimeError(f"verify worker {pid} sent no result")
    if "error" in doc:
        return logfile.LogFileError(str(doc["error"]))
    if "failed" in doc:
        return RuntimeError(f"verify worker {pid} failed: {doc['failed']}")
    return VerifyResult(verified=int(doc["verified"]), skipped=int(doc["skipped"]),
                        entries=int(doc["entries"]),
                        divergences=[Divergence(*d) for d in doc["divergences"]])


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def _reap(pid: int, rfd: int, stop: bool) -> None:
    """Close a child's pipe and wait for it (it exits once it sent); ``stop`` ends it first
    (its result was not read: this process failed, or the child had no share). Acts."""
    _close(rfd)
    if stop:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
