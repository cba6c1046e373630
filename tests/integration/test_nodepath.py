"""Per-node decisions on the real processes: a node added to a settled DaemonSet gets its pod
from a sync of that node alone (its decision record names the node), and ``replay --verify``
of the exported log recomputes every decision, per-node ones by the per-node function, with
no divergence."""

from __future__ import annotations

from pathlib import Path

from services.node_agent.lifecycle import new_node
from services.replay import export, verify
from shared.model import podutil
from tests.integration import controller_kit as kit
from tests.integration.stack import Stack, wait_for

KEY = "default/agent"


def _ready_on(stack: Stack, nodes: list[str]) -> bool:
    pods = kit.owned_pods(stack.store, KEY)
    return kit.nodes_of(pods) == sorted(nodes) and all(podutil.is_ready(p) for p in pods)


def test_a_node_added_gets_its_pod_from_a_per_node_decision(stack: Stack,
                                                            tmp_path: Path) -> None:
    nodes = kit.start(stack, nodes=3)
    store = stack.store
    store.apply(kit.daemonset("agent"))

    def settled() -> bool:
        """Every pod ready, the status written, and its write's own sync done: a status
        write is a DaemonSet change, whose sync is a full one (upstream's updateDaemonset)."""
        return (_ready_on(stack, nodes)
                and kit.status(store, KEY).get("numberAvailable") == len(nodes)
                and kit.queue_idle(store))

    wait_for(settled, what="a ready pod on each node, counted")
    for extra in ("node-new-a", "node-new-b"):
        store.create(new_node(extra))
        nodes.append(extra)
        wait_for(settled, what=f"a ready pod on {extra}, counted")

    per_node = [r for r in kit.decisions(store, KEY) if r.get("nodes") is not None]
    assert [r["nodes"] for r in per_node] == [["node-new-a"], ["node-new-b"]]
    for rec, node in zip(per_node, ("node-new-a", "node-new-b"), strict=True):
        assert [c[0] for c in rec["actions"]["creates"]] == [node]
        assert rec["reasonsBy"] == {"pod creation planned": [node]}

    tip = store.r.xrevrange(store.keys.log, count=1)[0][0].decode()
    path = tmp_path / "run.dblog"
    export.export(store.r, store.keys, path, until=tip)
    result = verify.verify(path)
    assert result.divergences == []
    assert result.verified >= 3  # the first full sync and the two per-node ones
