"""Export, replay and ``replay --verify`` against a run recorded from the real processes.

One recorded run (module fixture) drives the stack through creates, node churn, a NoExecute
taint, failing pods (node agent ``--fail-image``) with their backoff, a rolling update, an
undo and a delete; the tests then rebuild it into other prefixes and re-plan its decisions.
"""

from __future__ import annotations

import copy
import itertools
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from services.cli import context
from services.cli.main import cli
from services.node_agent.lifecycle import new_node
from services.replay import export, rebuild, verify
from shared.daemonset import manage
from shared.model import meta, podutil, taints
from shared.model.podutil import target_node
from shared.store import codec
from shared.store.client import Store, connect
from shared.store.keys import Keys
from shared.store.server import RedisServer
from tests.integration import controller_kit as kit
from tests.integration.stack import Stack, wait_for

Obj = dict[str, Any]
KINDS = ["Node", "Pod", "DaemonSet", "ControllerRevision", "Event"]
NS = "kube-system"
FLUENTD = "kube-system/fluentd-elasticsearch"
CRASHY = "kube-system/crashy"
_serial = itertools.count()

MANIFEST = """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: NAME, namespace: kube-system}
spec:
  selector: {matchLabels: {name: NAME}}
  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 1}}
  revisionHistoryLimit: 0
  template:
    metadata: {labels: {name: NAME}}
    spec:
      terminationGracePeriodSeconds: 1
      containers: [{name: main, image: IMAGE}]
"""


def manifest(name: str, image: str) -> Obj:
    doc: Obj = yaml.safe_load(MANIFEST.replace("NAME", name).replace("IMAGE", image))
    return doc


@dataclass
class Recording:
    redis_url: str
    keys: Keys
    store: Store
    path: Path  # the export of the whole run
    tip: str  # its last entry
    live: dict[str, list[Obj]]  # every object as of ``tip``
    mid_tip: str  # a point in the middle of the run
    mid: dict[str, list[Obj]]  # every object as of ``mid_tip``


def _pods(stack: Stack, key: str) -> list[Obj]:
    ds = stack.store.try_get("DaemonSet", key)
    if ds is None:
        return [p for p in stack.pods(NS) if meta.name(p).startswith(key.split("/")[1] + "-")]
    return [p for p in stack.pods(NS) if (meta.controller_ref(p) or {}).get("uid") == meta.uid(ds)]


def _settled(stack: Stack, key: str, nodes: set[str], image: str) -> bool:
    """Exactly one ready pod of ``image`` on each of ``nodes`` and nothing else."""
    pods = _pods(stack, key)
    return sorted(target_node(p) or "" for p in pods) == sorted(nodes) and all(
        podutil.is_ready(p) and not meta.is_being_deleted(p)
        and p["spec"]["containers"][0]["image"] == image for p in pods)


def _set_image(store: Store, key: str, image: str) -> None:
    def change(ds: Obj) -> Obj:
        ds["spec"]["template"]["spec"]["containers"][0]["image"] = image
        return ds

    store.mutate("DaemonSet", key, change)


def _decisions(store: Store, key: str) -> list[Obj]:
    out = []
    for rid, fields in store.r.xrange(store.keys.log):
        if fields.get(b"t") == b"DECISION" and fields.get(b"n") == key.encode():
            out.append(codec.decode_entry(rid, fields).obj)
    return out


def _record(stack: Stack) -> tuple[str, dict[str, list[Obj]]]:
    tip, objs = stack.store.snapshot(KINDS)
    return tip, {k: sorted(v, key=meta.key) for k, v in objs.items()}


@pytest.fixture(scope="module")
def recording(redis_server: RedisServer) -> Iterator[Recording]:
    prefix = f"rec{os.getpid()}x{next(_serial)}"
    tmp = Path(tempfile.mkdtemp(prefix="replay-test-"))
    stack = Stack(redis_server.url, prefix, tmp)
    try:
        stack.start_all(workers=2, nodes=4,
                        agent_args=("--fail-image", "*:broken", "--grace", "0.1"))
        store = stack.store
        all4 = {f"node-{i:05d}" for i in range(1, 5)}
        wait_for(lambda: len(store.list("Node")) == 4, what="4 nodes")
        store.apply(manifest("fluentd-elasticsearch", "fluentd:v1"))
        wait_for(lambda: _settled(stack, FLUENTD, all4, "fluentd:v1"), what="fluentd on 4 nodes")
        mid_tip, mid = _record(stack)

        # failing pods: deleted and recreated after a backoff, then the DaemonSet is deleted
        store.apply(manifest("crashy", "crashy:broken"))
        wait_for(lambda: sum(1 for r in _decisions(store, CRASHY) if r["actions"]["backoff"])
                 >= 2, what="two failed-pod backoff decisions")
        store.delete("DaemonSet", CRASHY)
        wait_for(lambda: not _pods(stack, CRASHY), what="crashy pods gone")

        # node churn and a NoExecute taint
        store.create(new_node("node-extra"))
        wait_for(lambda: _settled(stack, FLUENTD, all4 | {"node-extra"}, "fluentd:v1"),
                 what="a pod on the new node")

        def taint(node: Obj) -> Obj:
            node["spec"]["taints"] = [{"key": "dedicated", "value": "db",
                                       "effect": "NoExecute"}]
            return node

        store.mutate("Node", "/node-00002", taint)
        store.delete("Node", "/node-extra")
        three = all4 - {"node-00002"}
        wait_for(lambda: _settled(stack, FLUENTD, three, "fluentd:v1"),
                 what="pods gone from the tainted and the deleted node")

        # a rolling update, then an undo (the template set back)
        _set_image(store, FLUENTD, "fluentd:v2")
        wait_for(lambda: _settled(stack, FLUENTD, three, "fluentd:v2"), timeout=60,
                 what="rolled out to v2")
        _set_image(store, FLUENTD, "fluentd:v1")
        wait_for(lambda: _settled(stack, FLUENTD, three, "fluentd:v1"), timeout=60,
                 what="rolled back to v1")
        ds = store.get("DaemonSet", FLUENTD)
        wait_for(lambda: (store.get("DaemonSet", FLUENTD).get("status") or {}).get(
            "updatedNumberScheduled") == 3, timeout=60, what="status after the undo")
        assert ds["metadata"]["generation"] == 3
        tip, live = _record(stack)
        path = tmp / "run.dblog"
        export.export(store.r, store.keys, path, until=tip)
        yield Recording(redis_server.url, store.keys, store, path, tip, live, mid_tip, mid)
    finally:
        stack.stop()
        for f in tmp.glob("*"):
            f.unlink()
        tmp.rmdir()


def _copy_keys(rec: Recording) -> Keys:
    return Keys(f"{rec.keys.prefix}-copy{next(_serial)}")


def _list_all(store: Store) -> dict[str, list[Obj]]:
    return {k: sorted(store.list(k), key=meta.key) for k in KINDS}


def test_replay_rebuilds_the_objects_of_a_live_run(recording: Recording) -> None:
    target = Store(connect(recording.redis_url), _copy_keys(recording))
    stats = rebuild.rebuild(recording.path, target.r, target.keys)
    assert stats.last == recording.tip
    assert _list_all(target) == recording.live
    assert {k: len(v) for k, v in recording.live.items() if k != "Event"} == {
        "Node": 4, "Pod": 3, "DaemonSet": 1, "ControllerRevision": 1}


def test_replay_keeps_every_log_entry_and_its_id(recording: Recording) -> None:
    target = Store(connect(recording.redis_url), _copy_keys(recording))
    rebuild.rebuild(recording.path, target.r, target.keys)
    source = recording.store.r.xrange(recording.keys.log, max=recording.tip)
    assert target.r.xrange(target.keys.log) == source


def test_replay_until_rebuilds_an_earlier_state(recording: Recording) -> None:
    target = Store(connect(recording.redis_url), _copy_keys(recording))
    rebuild.rebuild(recording.path, target.r, target.keys, until=recording.mid_tip)
    assert _list_all(target) == recording.mid
    assert target.log_tip() == recording.mid_tip


def test_replay_refuses_a_non_empty_target_and_writes_nothing(recording: Recording) -> None:
    target = Store(connect(recording.redis_url), _copy_keys(recording))
    target.r.set(target.keys.cursor("someone"), "1-0")
    with pytest.raises(rebuild.RebuildError, match="the target is not empty"):
        rebuild.rebuild(recording.path, target.r, target.keys)
    assert target.r.keys(target.keys.tag + ":*") == [target.keys.cursor("someone").encode()]


def test_verify_finds_no_divergence_in_a_recorded_run(recording: Recording) -> None:
    result = verify.verify(recording.path)
    assert result.divergences == []
    records = _decisions(recording.store, FLUENTD) + _decisions(recording.store, CRASHY)
    # the gc's taint manager records its NoExecute evictions too: node-00002's pod, unless
    # the DaemonSet controller deleted it first (both react to the taint, as upstream)
    evictions = _decisions(recording.store, "/node-00002")
    assert all(r["type"] == "taint-eviction" for r in evictions)
    assert result.verified == len(records) + len(evictions) and len(records) >= 10
    kinds_of_action = {k for r in records for k in ("creates", "deletes", "backoff", "history",
                                                    "cleanup") if r["actions"][k]}
    assert kinds_of_action == {"creates", "deletes", "backoff", "history", "cleanup"}


def test_verify_reports_a_changed_burst_cap(recording: Recording,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(manage, "BURST_REPLICAS", 1)
    result = verify.verify(recording.path)
    first = result.divergences[0]
    assert first.key == FLUENTD and first.difference.startswith("creates[1]: ")
    assert result.verified == 0


def test_verify_reports_changed_placement(recording: Recording,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Taints ignored: the first DaemonSet decision that read the NoExecute taint (it
    deleted the pod on that node, or found it evicted by the taint manager and planned no
    new one) diverges."""
    monkeypatch.setattr(taints, "find_untolerated", lambda *a, **k: None)
    result = verify.verify(recording.path)
    [div] = result.divergences
    tainted = next(codec.id_tuple(e.id) for e in kit.log_entries(recording.store, "Node")
                   if e.key == "/node-00002" and e.type == "MODIFIED"
                   and (e.obj.get("spec") or {}).get("taints"))
    rec = min((r for r in _decisions(recording.store, FLUENTD)
               if codec.id_tuple(r["position"]) >= tainted),
              key=lambda r: codec.id_tuple(r["position"]))
    assert div.key == FLUENTD
    assert codec.id_tuple(div.position) == codec.id_tuple(rec["position"])
    assert result.verified > 0


def _cli(rec: Recording, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--redis-url", rec.redis_url, "--prefix", rec.keys.prefix,
                                    *args], obj=context.CliEnv(), catch_exceptions=False)


def test_cli_export_then_verify(recording: Recording, tmp_path: Path) -> None:
    path = tmp_path / "cli.dblog"
    out = _cli(recording, "log", "export", str(path), "--until", recording.tip)
    assert out.exit_code == 0, out.output
    assert out.output.startswith("exported ")
    res = _cli(recording, "replay", str(path), "--verify")
    assert res.exit_code == 0, res.output
    assert "no divergence" in res.output


def test_cli_verify_exits_non_zero_on_divergence(recording: Recording,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(manage, "BURST_REPLICAS", 1)
    res = _cli(recording, "replay", str(recording.path), "--verify")
    assert res.exit_code == 1
    assert f"of daemonset {FLUENTD}" in res.stderr and "creates[1]" in res.stderr


def test_cli_replay_into_another_prefix(recording: Recording) -> None:
    keys = _copy_keys(recording)
    res = _cli(recording, "replay", str(recording.path), "--prefix", keys.prefix)
    assert res.exit_code == 0, res.output
    assert _list_all(Store(connect(recording.redis_url), keys)) == recording.live
    again = _cli(recording, "replay", str(recording.path), "--prefix", keys.prefix)
    assert again.exit_code == 1 and "the target is not empty" in again.stderr


def test_cli_log_tail_summarises_decisions(recording: Recording) -> None:
    res = _cli(recording, "log", "tail", "-n", "1000")
    lines = res.output.splitlines()
    decisions = [x for x in lines if "  DECISION  " in x and "  DaemonSet  " in x]
    assert decisions and all(" creates " in x and " deletes " in x for x in decisions)
    evictions = [x for x in lines if "  DECISION  " in x and "  Node  " in x]
    assert all(" evicts 1 taint-eviction-controller read-through " in x for x in evictions)
    assert len(evictions) == len(_decisions(recording.store, "/node-00002"))
    assert any("  ADDED     Node                /node-extra  ready=" in x for x in lines)


def test_export_is_byte_stable(recording: Recording, tmp_path: Path) -> None:
    """Two exports of the same range hold the same entries (only ``created`` differs)."""
    other = tmp_path / "again.dblog"
    export.export(recording.store.r, recording.keys, other, until=recording.tip)
    a = verify.logfile.Reader(recording.path)
    b = verify.logfile.Reader(other)
    with a, b:
        assert copy.copy(a.header).__dict__ | {"created": 0} == b.header.__dict__ | {
            "created": 0}
        assert list(a.records()) == list(b.records())
