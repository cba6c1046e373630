"""syncDaemonSet (spec §c) end to end through the real processes on real Redis: nodes come and
go, change labels and taints, pods fail, duplicate or appear orphaned, and the controller
converges as upstream does, with the Events of §i.

One stack serves the whole module (starting processes is the slow part). Each test owns a
namespace and nodes labelled ``suite=<its name>``, and its DaemonSets select only those nodes,
so tests never see each other's objects.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from services.cli import context
from services.cli.main import cli
from services.node_agent.lifecycle import new_node
from shared.control.backoff import BackoffEntry
from shared.model import meta
from shared.store import codec
from shared.store.server import RedisServer
from shared.store.workqueue import RedisWorkQueue
from tests.integration import controller_kit as kit
from tests.integration.stack import Stack, wait_for

Obj = dict[str, Any]
FAIL_GLOB = "*:fail"


@pytest.fixture(scope="module")
def stack(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    s = Stack(redis_server.url, "sync", tmp_path_factory.mktemp("sync-stack"))
    s.store.r.delete(*s.store.r.keys("{sync}:*") or ["{sync}:none"])
    s.start_all(workers=2, nodes=0, agent_args=("--fail-image", FAIL_GLOB))
    yield s
    s.stop()


def _nodes(stack: Stack, suite: str, count: int, **labels: str) -> list[str]:
    names = [f"{suite}-{i}" for i in range(1, count + 1)]
    ops = [stack.store.create_op(new_node(n, labels={"suite": suite, **labels}), ensure=True)
           for n in names]
    for i in range(0, len(ops), 500):
        stack.store.commit(ops[i:i + 500])
    return names


def _apply(stack: Stack, suite: str, name: str = "agent", **kwargs: Any) -> str:
    kwargs.setdefault("node_selector", {"suite": suite})
    stack.store.apply(kit.daemonset(name, f"t-{suite}", **kwargs))
    return f"t-{suite}/{name}"


def _label(stack: Stack, node: str, **labels: str | None) -> None:
    def change(n: Obj) -> None:
        lb = n["metadata"].setdefault("labels", {})
        for k, v in labels.items():
            if v is None:
                lb.pop(k, None)
            else:
                lb[k] = v

    kit.mutate_node(stack.store, node, change)


def _taint(stack: Stack, node: str, effect: str | None) -> None:
    def change(n: Obj) -> None:
        if effect is None:
            n["spec"].pop("taints", None)
        else:
            n["spec"]["taints"] = [{"key": "dedicated", "value": "x", "effect": effect}]

    kit.mutate_node(stack.store, node, change)


def _on(stack: Stack, key: str, nodes: list[str]) -> bool:
    return kit.one_per_node(stack.store, key, nodes)


def _status_is(stack: Stack, key: str, **want: int) -> bool:
    st = kit.status(stack.store, key)
    return all(int(st.get(k) or 0) == v for k, v in want.items())


def _cli(stack: Stack, *args: str) -> str:
    res = CliRunner().invoke(cli, ["--redis-url", stack.redis_url, "--prefix", stack.prefix,
                                   *args], obj=context.CliEnv(), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.output


# ---- nodes ----------------------------------------------------------------------------------


def test_node_added_gets_a_daemon_pod(stack: Stack) -> None:
    nodes = _nodes(stack, "add", 2)
    key = _apply(stack, "add")
    wait_for(lambda: _on(stack, key, nodes), what="a pod on each node")
    more = _nodes(stack, "add", 3)
    wait_for(lambda: _on(stack, key, more), what="a pod on the added node")
    wait_for(lambda: _status_is(stack, key, desiredNumberScheduled=3, numberReady=3),
             what="status counts 3")


def test_deleted_node_pods_are_garbage_collected(stack: Stack) -> None:
    nodes = _nodes(stack, "gone", 3)
    key = _apply(stack, "gone")
    wait_for(lambda: _on(stack, key, nodes), what="a pod on each node")
    stack.store.delete("Node", f"/{nodes[1]}")
    wait_for(lambda: kit.nodes_of(kit.owned_pods(stack.store, key, live_only=False))
             == [nodes[0], nodes[2]], what="the bound pod of the deleted node removed")
    wait_for(lambda: _status_is(stack, key, desiredNumberScheduled=2, currentNumberScheduled=2,
                                numberReady=2), what="status counts 2")


def test_node_relabelled_out_of_the_selector_loses_its_pod_and_regains_it(stack: Stack) -> None:
    nodes = _nodes(stack, "relabel", 2)
    key = _apply(stack, "relabel")
    wait_for(lambda: _on(stack, key, nodes), what="a pod on each node")
    _label(stack, nodes[0], suite="elsewhere")
    wait_for(lambda: kit.nodes_of(kit.owned_pods(stack.store, key, live_only=False))
             == [nodes[1]], what="the pod on the relabelled node deleted")
    wait_for(lambda: _status_is(stack, key, desiredNumberScheduled=1, numberMisscheduled=0),
             what="desired 1")
    _label(stack, nodes[0], suite="relabel")
    wait_for(lambda: _on(stack, key, nodes), what="the pod recreated")


def test_no_schedule_taint_keeps_the_pod_and_counts_it_misscheduled(stack: Stack) -> None:
    nodes = _nodes(stack, "noschedule", 2)
    key = _apply(stack, "noschedule")
    wait_for(lambda: _on(stack, key, nodes), what="a pod on each node")
    before = {meta.uid(p) for p in kit.owned_pods(stack.store, key)}
    _taint(stack, nodes[0], "NoSchedule")
    wait_for(lambda: _status_is(stack, key, desiredNumberScheduled=1, currentNumberScheduled=1,
                                numberMisscheduled=1), what="misscheduled 1")
    assert {meta.uid(p) for p in kit.owned_pods(stack.store, key)} == before


def test_no_execute_taint_evicts_the_pod(stack: Stack) -> None:
    nodes = _nodes(stack, "noexecute", 2)
    key = _apply(stack, "noexecute")
    wait_for(lambda: _on(stack, key, nodes), what="a pod on each node")
    _taint(stack, nodes[0], "NoExecute")
    wait_for(lambda: kit.nodes_of(kit.owned_pods(stack.store, key, live_only=False))
             == [nodes[1]], what="the pod evicted")
    wait_for(lambda: _status_is(stack, key, desiredNumberScheduled=1, numberMisscheduled=0),
             what="desired 1, misscheduled 0")


def test_cordon_alone_does_not_evict_and_uncordon_changes_nothing(stack: Stack) -> None:
    nodes = _nodes(stack, "cordon", 2)
    key = _apply(stack, "cordon")
    wait_for(lambda: _on(stack, key, nodes), what="a pod on each node")
    before = {meta.uid(p) for p in kit.owned_pods(stack.store, key)}
    assert "cordoned" in _cli(stack, "cordon", nodes[0])
    unschedulable = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}

    def tainted() -> list[dict[str, Any]]:
        return [{k: t.get(k) for k in ("key", "effect")} for t in
                (stack.store.get("Node", "/" + nodes[0]).get("spec") or {}).get("taints") or []]

    wait_for(lambda: tainted() == [unschedulable], what="the cordoned node's taint")
    # a DaemonSet applied after the cordon still lands there (the taint is tolerated)
    late = _apply(stack, "cordon", name="late")
    wait_for(lambda: _on(stack, late, nodes), what="the late DaemonSet on both nodes")
    assert {meta.uid(p) for p in kit.owned_pods(stack.store, key)} == before
    assert _status_is(stack, key, desiredNumberScheduled=2, numberMisscheduled=0)
    assert "uncordoned" in _cli(stack, "uncordon", nodes[0])
    wait_for(lambda: tainted() == [], what="the taint gone with the cordon")
    wait_for(lambda: _status_is(stack, late, numberReady=2), what="late ready on both")
    assert {meta.uid(p) for p in kit.owned_pods(stack.store, key)} == before


# ---- pods ----------------------------------------------------------------------------------


def _backoff(stack: Stack) -> dict[str, BackoffEntry]:
    raw: Any = stack.store.r.hgetall(stack.store.keys.backoff)
    out = {}
    for k, v in raw.items():
        delay, last = codec.unpack(v)
        out[k.decode()] = BackoffEntry(float(delay), float(last))
    return out


def test_failed_pods_are_killed_with_doubling_backoff_and_recreated(stack: Stack) -> None:
    nodes = _nodes(stack, "failed", 1)
    key = _apply(stack, "failed", image="busybox:fail")
    ds = wait_for(lambda: stack.store.try_get("DaemonSet", key), what="the DaemonSet")
    prefix = f"{meta.uid(ds)}/"
    seen: dict[str, list[BackoffEntry]] = {}

    def doubled_twice() -> bool:
        for field, entry in _backoff(stack).items():
            if field.startswith(prefix):
                history = seen.setdefault(field, [])
                if not history or history[-1] != entry:
                    history.append(entry)
        return any([e.delay for e in h][:3] == [1.0, 2.0, 4.0] for h in seen.values())

    wait_for(doubled_twice, timeout=30, interval=0.02, what="backoff delays 1 s, 2 s, 4 s")
    history = next(h for h in seen.values() if [e.delay for e in h][:3] == [1.0, 2.0, 4.0])
    for prev, cur in itertools.pairwise(history[:3]):
        assert cur.last_update > prev.last_update
        assert cur.last_update - prev.last_update >= prev.delay  # never killed inside backoff
    assert all(field.endswith(f"/{nodes[0]}") for field in seen)
    # the kill's Event is a commit of its own, after the backoff entry: wait for it
    failed = wait_for(lambda: (lambda evs: evs if len(evs) >= 3 else None)(
        kit.events(stack.store, key, "FailedDaemonPod")), what="three FailedDaemonPod events")
    msg = failed[0]["message"]
    assert msg.startswith("Found failed daemon pod t-failed/agent-") and msg.endswith(
        f" on node {nodes[0]}, will try to kill it")
    assert all(e["type"] == "Warning" for e in failed)
    # and each kill is followed by a new pod on the node
    created = kit.events(stack.store, key, "SuccessfulCreate")
    assert len(created) >= 3
    assert "FailedDaemonPod" in _cli(stack, "get", "events", "-n", "t-failed")
    described = _cli(stack, "describe", "ds/agent", "-n", "t-failed")
    assert "will try to kill it" in described[described.index("Events:"):]


def test_duplicate_pod_on_a_node_the_newer_one_is_deleted(stack: Stack) -> None:
    nodes = _nodes(stack, "dup", 1)
    key = _apply(stack, "dup")
    wait_for(lambda: _on(stack, key, nodes), what="a pod on the node")
    wait_for(lambda: _status_is(stack, key, numberReady=1), what="ready")
    original = kit.owned_pods(stack.store, key)[0]
    dup = copy.deepcopy(original)
    dup["metadata"] = {k: v for k, v in original["metadata"].items()
                       if k in ("namespace", "labels", "ownerReferences")}
    dup["metadata"]["name"] = "zz-duplicate"  # also last on a creationTimestamp tie
    dup.pop("status", None)
    stack.store.create(dup)
    wait_for(lambda: stack.store.try_get("Pod", "t-dup/zz-duplicate") is None,
             what="the newer pod deleted")
    assert [meta.uid(p) for p in kit.owned_pods(stack.store, key)] == [meta.uid(original)]


def test_orphan_pod_is_adopted_and_no_extra_pod_is_created(stack: Stack) -> None:
    nodes = _nodes(stack, "adopt", 2)
    orphan = stack.store.create({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "orphan", "namespace": "t-adopt", "labels": {"app": "agent"}},
        "spec": {"nodeName": nodes[0],
                 "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]},
    })
    key = _apply(stack, "adopt", updateStrategy={"type": "OnDelete"})
    wait_for(lambda: _on(stack, key, nodes), what="one pod per node")
    adopted = stack.store.get("Pod", "t-adopt/orphan")
    ds = stack.store.get("DaemonSet", key)
    assert (meta.controller_ref(adopted) or {}).get("uid") == meta.uid(ds)
    on_first = [p for p in kit.owned_pods(stack.store, key) if kit.nodes_of([p]) == [nodes[0]]]
    assert [meta.uid(p) for p in on_first] == [meta.uid(orphan)]
    assert not any(meta.name(p) != "orphan" and p["spec"].get("nodeName") == nodes[0]
                   for p in stack.store.list("Pod", "t-adopt"))


# ---- guards and limits ---------------------------------------------------------------------


def test_empty_selector_warns_selecting_all_creates_nothing_writes_no_status(
        stack: Stack) -> None:
    _nodes(stack, "empty", 1)
    manifest = kit.daemonset("agent", "t-empty", node_selector={"suite": "empty"})
    obj = stack.store.prepare_create(manifest)
    obj["spec"]["selector"] = {}  # refused by validation today: a legacy object
    assert stack.store.commit([stack.store.create_op(obj, prepared=True)])[0].ok
    key = "t-empty/agent"
    wait_for(lambda: kit.events(stack.store, key, "SelectingAll"), what="SelectingAll")
    RedisWorkQueue(stack.store.r, stack.store.keys).add([key])
    # each sync warns again: counted on the first Event (per reconciler-worker), as
    # upstream's recorder counts a repeat
    wait_for(lambda: sum(e.get("count", 1) for e in kit.events(stack.store, key,
                                                                "SelectingAll")) >= 2,
             what="a second sync")
    ev = kit.events(stack.store, key, "SelectingAll")[0]
    assert ev["type"] == "Warning"
    assert ev["message"] == ("This daemon set is selecting all pods. "
                             "A non-empty selector is required.")
    assert [p for p in stack.store.list("Pod")
            if (meta.controller_ref(p) or {}).get("uid") == meta.uid(obj)] == []
    writes = [e for e in kit.log_entries(stack.store, "DaemonSet")
              if e.key == key and e.type == "MODIFIED"]
    assert writes == []
    described = _cli(stack, "describe", "ds/agent", "-n", "t-empty")
    assert "SelectingAll" in described[described.index("Events:"):]


def test_burst_replicas_caps_creates_at_250_per_sync(stack: Stack) -> None:
    nodes = _nodes(stack, "burst", 300)
    key = _apply(stack, "burst")
    wait_for(lambda: kit.decisions(stack.store, key), what="the first decision")
    first = kit.decisions(stack.store, key)[0]
    assert len(first["actions"]["creates"]) == 250
    wait_for(lambda: len(kit.owned_pods(stack.store, key)) == 300, timeout=60,
             what="all 300 pods")
    assert kit.nodes_of(kit.owned_pods(stack.store, key)) == sorted(nodes)


# ---- events (§i) ---------------------------------------------------------------------------


def test_events_show_in_get_events_and_describe(stack: Stack) -> None:
    nodes = _nodes(stack, "events", 2)
    key = _apply(stack, "events")
    wait_for(lambda: _on(stack, key, nodes), what="a pod on each node")
    _label(stack, nodes[0], suite=None)
    wait_for(lambda: kit.events(stack.store, key, "SuccessfulDelete"), what="a delete")
    pods = {meta.name(p) for p in stack.store.list("Pod", "t-events")}
    listed = _cli(stack, "get", "events", "-n", "t-events")
    assert "LAST SEEN" in listed and "REASON" in listed
    assert "SuccessfulCreate" in listed and "SuccessfulDelete" in listed
    assert "daemonset/agent" in listed
    assert any(f"Created pod: {p}" in listed for p in pods)
    described = _cli(stack, "describe", "ds/agent", "-n", "t-events")
    events_section = described[described.index("Events:"):]
    assert "SuccessfulCreate" in events_section and "SuccessfulDelete" in events_section
    assert "daemonset-controller" in events_section
