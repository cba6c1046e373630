"""NoExecute eviction with tolerationSeconds (upstream's taint manager,
pkg/controller/tainteviction/taint_eviction.go: processPodOnNode, addConditionAndDeletePod,
emitPodDeletionEvent), run by the gc.

The first tests drive the collector in-process on a real Redis with a fake clock (no waiting);
the last runs the whole stack and the CLI with a small tolerationSeconds and polls."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from services.gc.collector import Collector
from services.node_agent.lifecycle import new_node
from services.replay import verify
from services.replay.export import export
from shared.model import meta, tainteviction
from shared.model.podutil import target_node
from shared.store.client import Store, connect
from shared.store.keys import Keys
from tests.integration import controller_kit as kit
from tests.integration import gcstack
from tests.integration.stack import Stack, wait_for

Obj = dict[str, Any]
T0 = 1_700_000_000.0
TAINT = {"key": "dedicated", "value": "infra", "effect": "NoExecute"}


class FakeClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def store(redis_url: str, prefix: str, clock: FakeClock) -> Store:
    return Store(connect(redis_url), Keys(prefix), clock=clock)


def _pod(name: str, node: str, *tolerations: Obj) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "tolerations": list(tolerations),
                     "containers": [{"name": "c", "image": "pause"}]}}


def _tolerate(seconds: int | None = None) -> Obj:
    t: Obj = {"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}
    if seconds is not None:
        t["tolerationSeconds"] = seconds
    return t


def _set_taints(store: Store, node: str, taints: list[Obj]) -> None:
    def change(n: Obj) -> Obj:
        n["spec"]["taints"] = taints
        return n

    store.mutate("Node", f"/{node}", change)


def _tainted_at_t0(store: Store, clock: FakeClock, *pods: Obj) -> Collector:
    """Node n1 with ``pods`` bound to it and a collector that has seen them; then n1 gets the
    NoExecute taint, added at T0."""
    store.create(new_node("n1"))
    for pod in pods:
        store.create(pod)
    gc = Collector(store, clock=clock)
    gc.cache.sync()
    gc.full_pass()
    _set_taints(store, "n1", [{**TAINT, "timeAdded": meta.format_time(T0)}])
    return gc


def _evicted(store: Store, name: str) -> bool:
    pod = store.try_get("Pod", f"default/{name}")
    return pod is None or meta.is_being_deleted(pod)


def test_a_pod_tolerating_the_taint_for_n_seconds_is_evicted_n_seconds_after_it_appears(
        store: Store, clock: FakeClock) -> None:
    gc = _tainted_at_t0(store, clock, _pod("brief", "n1", _tolerate(30)),
                        _pod("forever", "n1", _tolerate()), _pod("intolerant", "n1"))

    clock.now = T0 + 1
    gc.step(block_ms=1)
    assert _evicted(store, "intolerant")  # not tolerated: at once
    assert not _evicted(store, "brief") and gc.evict_at == {"n1": T0 + 30}

    clock.now = T0 + 29.5
    gc.step(block_ms=1)
    assert not _evicted(store, "brief")
    clock.now = T0 + 30
    gc.step(block_ms=1)
    brief = store.get("Pod", "default/brief")
    assert meta.is_being_deleted(brief)
    [cond] = [c for c in brief["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert (cond["reason"], cond["message"]) == ("DeletionByTaintManager",
                                                 "Taint manager: deleting due to NoExecute taint")
    assert not _evicted(store, "forever")  # no tolerationSeconds: tolerated for good
    events = [e for e in store.list("Event", "default")
              if e["reason"] == "TaintManagerEviction"]
    assert sorted(e["message"] for e in events) == ["Marking for deletion Pod default/brief",
                                                   "Marking for deletion Pod default/intolerant"]
    assert all(e["involvedObject"]["kind"] == "Pod" and e["source"]["component"]
               == "taint-eviction-controller" for e in events)


def test_a_taint_removed_before_the_toleration_runs_out_evicts_nothing(
        store: Store, clock: FakeClock) -> None:
    gc = _tainted_at_t0(store, clock, _pod("brief", "n1", _tolerate(30)))
    clock.now = T0 + 10
    gc.step(block_ms=1)
    _set_taints(store, "n1", [])
    clock.now = T0 + 11
    gc.step(block_ms=1)
    assert gc.evict_at == {}
    clock.now = T0 + 60
    gc.step(block_ms=1)
    assert not _evicted(store, "brief")


def test_evictions_are_recorded_and_replay_verify_recomputes_them(
        store: Store, clock: FakeClock, tmp_path: Path) -> None:
    gc = _tainted_at_t0(store, clock, _pod("brief", "n1", _tolerate(5)))
    clock.now = T0 + 5
    gc.step(block_ms=1)
    records = [e.obj for e in _decisions(store)]
    assert [r["actions"]["evictions"] for r in records] == [
        [["default/brief", meta.uid(store.get("Pod", "default/brief")),
          "dedicated=infra:NoExecute", T0 + 5, True]]]
    assert records[0]["now"] == T0 + 5 and records[0]["type"] == tainteviction.RECORD_TYPE

    path = tmp_path / "evict.dblog"
    export(store.r, store.keys, path)
    result = verify.verify(path)
    assert result.ok and result.verified == 1, [d.describe() for d in result.divergences]
    # a different toleration rule would have decided otherwise: verify says where
    original = tainteviction.toleration_seconds
    try:
        tainteviction.toleration_seconds = lambda t: None  # type: ignore[assignment]
        diverged = verify.verify(path)
    finally:
        tainteviction.toleration_seconds = original  # type: ignore[assignment]
    [div] = diverged.divergences
    assert "of taint eviction node/n1" in div.describe() and "evictions" in div.difference


def _decisions(store: Store) -> list[Any]:
    return [e for e in kit.log_entries(store, "Node") if e.type == "DECISION"]


def test_cli_taint_evicts_a_daemon_pod_after_its_toleration_seconds(
        stack: Stack, tmp_path: Path) -> None:
    stack.start_all(workers=1, nodes=2)
    wait_for(lambda: len(stack.store.list("Node")) == 2, what="2 nodes")
    doc = gcstack.manifest("brief")
    doc = doc.replace("terminationGracePeriodSeconds: 5",
                      "terminationGracePeriodSeconds: 5\n      tolerations:\n"
                      "      - {key: dedicated, operator: Exists, effect: NoExecute, "
                      "tolerationSeconds: 2}")
    res = gcstack.run(stack, "apply", "-f", "-", input=doc)
    assert res.exit_code == 0, res.output
    ds = stack.store.get("DaemonSet", "default/brief")
    first = {target_node(p): p for p in gcstack.ready_pods(stack, meta.uid(ds), 2)}

    res = gcstack.run(stack, "taint", "node/node-00001", "dedicated=infra:NoExecute")
    assert res.exit_code == 0, res.output
    res = gcstack.run(stack, "taint", "node/node-00002",
                      "node.kubernetes.io/unreachable:NoExecute")
    assert res.exit_code == 0, res.output
    node = stack.store.get("Node", "/node-00001")
    added = meta.parse_time(node["spec"]["taints"][0]["timeAdded"])
    assert added is not None

    wait_for(lambda: gcstack.gone(stack, first["node-00001"])
             or meta.is_being_deleted(stack.store.get("Pod", meta.key(first["node-00001"]))),
             timeout=30, what="the daemon pod on node-00001 evicted")
    [record] = [e.obj for e in _decisions(stack.store)
                if e.obj["actions"]["evictions"]
                and e.obj["actions"]["evictions"][0][0] == meta.key(first["node-00001"])][:1]
    assert record["now"] >= added + 2  # not before its 2 s ran out
    # the default daemon tolerations (unreachable, no tolerationSeconds) keep node-00002's
    still = stack.store.get("Pod", meta.key(first["node-00002"]))
    assert meta.uid(still) == meta.uid(first["node-00002"]) and not meta.is_being_deleted(still)
    events = gcstack.run(stack, "get", "events")
    assert "TaintManagerEviction" in events.output, events.output
    why = gcstack.run(stack, "why", f"pod/{meta.name(first['node-00001'])}")
    assert why.exit_code == 0, why.output
    assert "by the taint manager: decision " in why.output
    assert "why: NoExecute taint dedicated=infra:NoExecute, tolerated until " in why.output

    path = tmp_path / "brief.dblog"
    assert gcstack.run(stack, "log", "export", str(path)).exit_code == 0
    verified = gcstack.run(stack, "replay", str(path), "--verify")
    assert verified.exit_code == 0, verified.output
    assert "no divergence" in verified.output
