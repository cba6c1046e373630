"""``replay --verify`` on hand-built export files: each decision is re-planned against the
state as of the position it read through, and a changed decision is reported with its entry."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from services.replay import logfile, verify
from shared.daemonset import manage, nodeindex, planner
from shared.daemonset import record as ds_record
from shared.daemonset import types as t
from shared.model import meta, podutil
from shared.store import codec
from tests.unit.daemonset_fixtures import NOW, make_ds, make_node, ts

Obj = dict[str, Any]


class LogBuilder:
    """Objects and decisions appended as log entries (ids 1000-0, 1001-0, …), with the
    in-memory state a reconciler's cache would hold."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, str, str, str, bytes]] = []
        self.state: dict[tuple[str, str], Obj] = {}
        self.n = 1000
        self.sync_hash = ""  # the current revision's, for a per-node sync's index

    def add(self, etype: str, obj: Obj) -> str:
        eid = f"{self.n}-0"
        self.n += 1
        obj = copy.deepcopy(obj)
        obj["metadata"].setdefault("uid", f"uid-{meta.name(obj)}")
        kind, key = obj["kind"], meta.key(obj)
        self.entries.append((eid, etype, kind, key, codec.pack_object(obj)))
        obj["metadata"]["resourceVersion"] = eid
        if etype == "DELETED":
            self.state.pop((kind, key), None)
        else:
            self.state[(kind, key)] = obj
        return eid

    @property
    def tip(self) -> str:
        return self.entries[-1][0]

    def snapshot(self, key: str, now: float = NOW) -> t.Snapshot:
        ds = self.state.get(("DaemonSet", key))
        ns = key.split("/")[0]
        of = [o for (k, _), o in self.state.items()]
        return t.Snapshot(
            key=key, ds=ds, nodes=[o for o in of if o["kind"] == "Node"],
            pods=[o for o in of if o["kind"] == "Pod" and meta.namespace(o) == ns],
            revisions=[o for o in of if o["kind"] == "ControllerRevision"
                       and meta.namespace(o) == ns],
            backoff={}, expectations_satisfied=True, now=now, position=self.tip)

    def sync(self, key: str, nodes: list[str] | None = None) -> Obj:
        """Plan on the current state, write the revision and pods it creates, then the
        DECISION entry (as the reconciler does: after its own writes). With ``nodes``, a
        per-node sync: ``plan_nodes`` with an index of every Node and Pod."""
        snap = self.snapshot(key)
        if nodes is None:
            plan = planner.plan(snap)
        else:
            assert snap.ds is not None
            index = nodeindex.DaemonSetIndex(snap.ds, self.sync_hash, snap.nodes, snap.pods)
            per_node = planner.plan_nodes(snap, nodes, index, {meta.name(p) for p in snap.pods})
            assert per_node is not None, "expected a per-node decision"
            plan = per_node
        for h in plan.history:
            if isinstance(h, t.CreateRevision):
                self.add("ADDED", h.revision)
        assert plan.sync_nodes is not None
        for c in plan.sync_nodes.creates:
            self.add("ADDED", c.pod)
        rec = ds_record.make_record(snap, plan, "w1").to_map()
        self.decision(key, rec)
        return rec

    def decision(self, key: str, rec: Obj) -> str:
        eid = f"{self.n}-0"
        self.n += 1
        self.entries.append((eid, "DECISION", "DaemonSet", key, codec.pack(rec)))
        return eid

    def write(self, path: Path, snapshot_objects: list[Obj] | None = None,
              snapshot_id: str = "") -> Path:
        header = logfile.Header(prefix="unit", first=self.entries[0][0],
                                last=self.entries[-1][0], complete=True,
                                snapshot=snapshot_id, objects=len(snapshot_objects or []))
        with logfile.Writer(path, header) as w:
            for obj in snapshot_objects or []:
                w.object(obj["kind"], meta.key(obj), meta.resource_version(obj),
                         codec.pack_object(obj))
            for eid, etype, kind, key, payload in self.entries:
                w.entry(eid, "1", etype, kind, key, payload)
        return path


KEY = "default/foo"


def _cluster() -> LogBuilder:
    log = LogBuilder()
    for i in range(3):
        log.add("ADDED", make_node(f"node-{i}"))
    log.add("ADDED", make_ds("foo"))
    return log


def test_verify_recomputes_a_recorded_decision(tmp_path: Path) -> None:
    log = _cluster()
    log.sync(KEY)
    result = verify.verify(log.write(tmp_path / "a.dblog"))
    assert (result.verified, result.divergences) == (1, [])


def test_verify_uses_the_state_as_of_the_recorded_position(tmp_path: Path) -> None:
    """The decision entry comes after the pods its sync created; re-planning on the state as
    of the decision entry would see them and plan no creates."""
    log = _cluster()
    rec = log.sync(KEY)
    assert len(rec["actions"]["creates"]) == 3
    log.add("ADDED", make_node("node-3"))  # after the sync; must not leak into its snapshot
    second = log.sync(KEY)
    assert second["actions"]["creates"] == [["node-3", second["actions"]["creates"][0][1]]]
    result = verify.verify(log.write(tmp_path / "a.dblog"))
    assert (result.verified, result.divergences) == (2, [])


def test_verify_reports_a_record_that_does_not_match(tmp_path: Path) -> None:
    log = _cluster()
    rec = log.sync(KEY)
    log.entries.pop()
    tampered = copy.deepcopy(rec)
    tampered["actions"]["creates"] = tampered["actions"]["creates"][:2]
    eid = log.decision(KEY, tampered)
    result = verify.verify(log.write(tmp_path / "a.dblog"))
    assert result.verified == 0
    [div] = result.divergences
    assert (div.key, div.entry, div.position) == (KEY, eid, rec["position"])
    assert div.difference.startswith("creates[2]: '<none>' != ")
    assert f"decision {eid} of daemonset {KEY}" in div.describe()


def test_verify_finds_a_changed_burst_cap(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    log = _cluster()
    log.sync(KEY)
    path = log.write(tmp_path / "a.dblog")
    monkeypatch.setattr(manage, "BURST_REPLICAS", 1)
    result = verify.verify(path)
    assert not result.ok
    assert result.divergences[0].difference.startswith("creates[1]")


def test_verify_skips_decisions_that_read_state_before_the_snapshot(tmp_path: Path) -> None:
    log = _cluster()
    log.sync(KEY)
    cut = log.add("ADDED", make_node("node-3"))
    objects = list(log.state.values())
    log.sync(KEY)
    # the file as a compaction at ``cut`` leaves it: the snapshot, then the entries from cut
    log.entries = [e for e in log.entries if codec.id_tuple(e[0]) >= codec.id_tuple(cut)]
    result = verify.verify(log.write(tmp_path / "a.dblog", objects, cut))
    assert (result.verified, result.skipped, result.divergences) == (1, 0, [])
    log.decision(KEY, {**ds_record.make_record(log.snapshot(KEY), planner.plan(
        log.snapshot(KEY))).to_map(), "position": "1000-0"})
    result = verify.verify(log.write(tmp_path / "b.dblog", objects, cut))
    assert (result.verified, result.skipped) == (1, 1)


def test_verify_refuses_a_partial_file(tmp_path: Path) -> None:
    log = _cluster()
    path = tmp_path / "p.dblog"
    header = logfile.Header(prefix="unit", first="1000-0", last="1000-0", complete=False)
    with logfile.Writer(path, header) as w:
        eid, etype, kind, key, payload = log.entries[0]
        w.entry(eid, "1", etype, kind, key, payload)
    with pytest.raises(logfile.LogFileError, match="only part of the history"):
        verify.verify(path)


def _running(log: LogBuilder) -> None:
    """The node agent: every pod Running and Ready (a minute ago)."""
    for (kind, _), obj in list(log.state.items()):
        if kind == "Pod" and not (obj.get("status") or {}).get("conditions"):
            pod = copy.deepcopy(obj)
            pod["status"] = {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": ts(NOW - 60)}]}
            pod["metadata"]["creationTimestamp"] = ts(NOW - 120)
            log.add("MODIFIED", pod)


def test_verify_recomputes_a_per_node_decision_by_the_per_node_function(tmp_path: Path) -> None:
    log = _cluster()
    first = log.sync(KEY)
    log.sync_hash = first["actions"]["hash"]
    _running(log)
    log.add("ADDED", make_node("node-3"))
    rec = log.sync(KEY, ["node-3"])
    assert rec["nodes"] == ["node-3"]
    assert [c[0] for c in rec["actions"]["creates"]] == ["node-3"]
    result = verify.verify(log.write(tmp_path / "a.dblog"))
    assert (result.verified, result.divergences) == (2, [])

    # the same record, had it read a cluster where another node had no pod yet: the
    # per-node function asks for a full sync now, a divergence
    log.entries.pop()
    log.add("ADDED", make_node("node-4"))
    rec["position"] = log.tip
    eid = log.decision(KEY, rec)
    [div] = verify.verify(log.write(tmp_path / "b.dblog")).divergences
    assert div.entry == eid and "now needs a full sync" in div.difference


def _pod_status(log: LogBuilder, ready: str) -> None:
    """The node agent's status update of every pod: Running, Ready ``ready``."""
    for (kind, _), obj in list(log.state.items()):
        if kind == "Pod":
            pod = copy.deepcopy(obj)
            pod["status"] = {"phase": "Running", "conditions": [
                {"type": "Ready", "status": ready, "lastTransitionTime": ts(NOW - 60)}]}
            log.add("MODIFIED", pod)


def test_a_status_update_between_two_decisions_is_seen_by_the_second(tmp_path: Path) -> None:
    """The pods' status changes after a decision read them: the next decision reads their
    new status (verify decodes such a version over the one it decoded before)."""
    log = _cluster()
    log.sync(KEY)
    _pod_status(log, "False")
    before = log.sync(KEY)  # reads the pods not ready
    _pod_status(log, "True")
    after = log.sync(KEY)
    assert before["actions"]["status"] != after["actions"]["status"]
    result = verify.verify(log.write(tmp_path / "a.dblog"))
    assert (result.verified, result.divergences) == (3, [])
    log.entries.pop()
    eid = log.decision(KEY, {**after, "actions": {**after["actions"],
                                                  "status": before["actions"]["status"]}})
    [div] = verify.verify(log.write(tmp_path / "b.dblog")).divergences
    assert div.entry == eid and div.difference.startswith("status")


def test_an_undecodable_object_a_decision_reads_is_refused_naming_its_entry(
        tmp_path: Path) -> None:
    # objects are decoded only when a decision reads them: the one it cannot is named
    log = _cluster()
    log.add("MODIFIED", make_node("node-1", labels={"a": "b"}))
    eid, etype, kind, key, _payload = log.entries[-1]
    log.entries[-1] = (eid, etype, kind, key, b"\xc1")  # never valid msgpack
    log.add("MODIFIED", make_node("node-0", labels={"a": "c"}))  # later entries fold on
    log.decision(KEY, ds_record.make_record(log.snapshot(KEY), planner.plan(log.snapshot(KEY)),
                                            "w1").to_map())
    with pytest.raises(logfile.LogFileError, match=f"entry {eid}: undecodable msgpack"):
        verify.verify(log.write(tmp_path / "a.dblog"))


def _growing_cluster(syncs: int) -> tuple[LogBuilder, list[str]]:
    """A DaemonSet synced after each of ``syncs`` nodes is added; the DECISION entry ids."""
    log = _cluster()
    decisions = []
    for i in range(syncs):
        log.add("ADDED", make_node(f"extra-{i}"))
        log.sync(KEY)
        decisions.append(log.tip)
    return log, decisions


def _tamper(log: LogBuilder, eid: str) -> None:
    """Drop the last create of the DECISION entry ``eid``."""
    at = next(i for i, e in enumerate(log.entries) if e[0] == eid)
    _eid, etype, kind, key, payload = log.entries[at]
    rec = codec.unpack(payload)
    rec["actions"]["creates"] = rec["actions"]["creates"][:-1]
    log.entries[at] = (eid, etype, kind, key, codec.pack(rec))


def _outcome(result: verify.VerifyResult) -> tuple[Any, ...]:
    return (result.verified, result.skipped, result.entries,
            [(d.entry, d.key, d.position, d.difference) for d in result.divergences])


@pytest.mark.parametrize("workers", [2, 3])
def test_verify_shared_out_between_processes_finds_what_one_process_finds(
        tmp_path: Path, workers: int) -> None:
    log, decisions = _growing_cluster(7)
    clean = log.write(tmp_path / "clean.dblog")
    one = verify.verify(clean)
    assert one.verified == 7 and one.ok
    assert _outcome(verify.verify(clean, workers=workers, share_min=1)) == _outcome(one)
    _tamper(log, decisions[1])  # in the first share (this process)
    _tamper(log, decisions[5])  # in the last share (a forked worker)
    bad = log.write(tmp_path / "bad.dblog")
    for keep_going in (False, True):
        one = verify.verify(bad, keep_going=keep_going)
        shared = verify.verify(bad, keep_going=keep_going, workers=workers, share_min=1)
        assert _outcome(shared) == _outcome(one)
        assert [d.entry for d in shared.divergences] == \
            ([decisions[1], decisions[5]] if keep_going else [decisions[1]])


def test_verify_shared_out_raises_what_a_worker_met(tmp_path: Path) -> None:
    log, _decisions = _growing_cluster(4)
    log.add("MODIFIED", make_node("node-1", labels={"a": "b"}))
    eid, etype, kind, key, _payload = log.entries[-1]
    log.entries[-1] = (eid, etype, kind, key, b"\xc1")  # read by the last decision only
    log.add("ADDED", make_node("extra-last"))
    log.decision(KEY, ds_record.make_record(
        log.snapshot(KEY), planner.plan(log.snapshot(KEY)), "w1").to_map())
    path = log.write(tmp_path / "a.dblog")
    with pytest.raises(logfile.LogFileError, match=f"entry {eid}: undecodable msgpack"):
        verify.verify(path, workers=2, share_min=1)


def test_per_node_decisions_share_one_index_told_of_the_changes_between_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = _cluster()
    log.sync_hash = log.sync(KEY)["actions"]["hash"]
    _running(log)
    for name in ("node-3", "node-4"):
        log.add("ADDED", make_node(name))
        log.sync(KEY, [name])
        _running(log)
    again = log.sync(KEY, ["node-3"])  # node-3 has its pod: nothing to do
    assert not again["actions"]["creates"]
    built: list[str] = []

    class Counted(nodeindex.DaemonSetIndex):
        def __init__(self, ds: Obj, hash: str, *args: Any) -> None:
            built.append(hash)
            super().__init__(ds, hash, *args)

    monkeypatch.setattr(verify, "DaemonSetIndex", Counted)
    result = verify.verify(log.write(tmp_path / "a.dblog"))
    assert (result.verified, result.divergences) == (4, [])
    assert built == [log.sync_hash]  # one index for the three per-node decisions

    # node-3's pod goes away, and the same decision is recorded as read after that: the kept
    # index must see the deletion (the per-node plan now creates a pod there)
    [pod] = [o for (k, _), o in log.state.items()
             if k == "Pod" and podutil.target_node(o) == "node-3"]
    log.add("DELETED", pod)
    eid = log.decision(KEY, {**again, "position": log.tip})
    built.clear()
    [div] = verify.verify(log.write(tmp_path / "b.dblog")).divergences
    assert div.entry == eid and div.difference.startswith("creates[0]")
    assert built == [log.sync_hash]


def test_a_share_arriving_while_the_file_is_folded_ahead_is_evaluated_as_if_known(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A forked worker folds the file while the first pass runs; its share, arriving then,
    is evaluated as it would have been from the start, unless the fold already passed the
    share's first position: then the worker is told to start again (_Late)."""
    log, decisions = _growing_cluster(7)
    _tamper(log, decisions[5])
    path = log.write(tmp_path / "a.dblog")
    share = verify._decisions(path, None)[3:]
    known = verify._run(path, None, share, planner.plan, True, to_end=True)
    assert known.verified == 3 and [d.entry for d in known.divergences] == [decisions[5]]
    monkeypatch.setattr(verify, "POLL", 1)  # asked at every entry
    first = next(i for i, e in enumerate(log.entries) if codec.id_tuple(e[0]) >
                 share[0].position)  # the first entry the share's first decision must precede
    asked: list[bool] = []

    def after(n: int) -> verify.Awaited:
        def awaited(wait: bool) -> tuple[list[verify._Pending], bool] | None:
            asked.append(wait)
            return (share, True) if wait or len(asked) > n else None
        return awaited

    for n in (0, first // 2, first):  # arrives before that entry is folded
        asked.clear()
        got = verify._run(path, None, [], planner.plan, True, False, awaited=after(n))
        assert _outcome(got) == _outcome(known) and asked[-1] is False
    for n in (first + 1, 10 ** 6):  # after it, or at the end of the file (waited for)
        asked.clear()
        with pytest.raises(verify._Late):
            verify._run(path, None, [], planner.plan, True, False, awaited=after(n))
    asked.clear()
    nothing = verify._run(path, None, [], planner.plan, True, False,
                          awaited=lambda wait: ([], False) if wait else None)
    assert _outcome(nothing)[:2] == (0, 0) and nothing.divergences == []


def test_a_share_starting_later_folds_what_came_before_it_from_each_objects_newest_entry(
        tmp_path: Path) -> None:
    """A run whose first decision comes late keeps each object's newest entry aside until
    then: nodes deleted and added again, relabelled or deleted for good before any decision
    of a share leave it the state one process folding every entry has."""
    log = _cluster()
    decisions = []
    for i in range(5):
        log.add("ADDED", make_node(f"extra-{i}"))
        log.add("MODIFIED", make_node("node-0", labels={"round": str(i)}))
        log.add("DELETED", make_node("node-1"))
        if i % 2 == 0:
            log.add("ADDED", make_node("node-1"))
        if i % 3 == 2:
            log.add("DELETED", make_node(f"extra-{i - 1}"))
        log.sync(KEY)
        decisions.append(log.tip)
    _tamper(log, decisions[3])
    path = log.write(tmp_path / "a.dblog")
    pending = verify._decisions(path, None)
    whole = verify._run(path, None, pending, planner.plan, True, to_end=True)
    assert whole.verified == 4 and [d.entry for d in whole.divergences] == [decisions[3]]
    for k in range(1, len(pending)):
        share = verify._run(path, None, pending[k:], planner.plan, True, to_end=True)
        assert share.verified == (4 if k <= 3 else 5) - k
        assert [d.entry for d in share.divergences] == ([decisions[3]] if k <= 3 else [])
