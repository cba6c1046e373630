"""``daemonbus why`` against the log of a real run: the decision that created or deleted a
pod, and why a node has no daemon pod (selector, taint — from the recorded decision, or
computed from the current state when no recent decision mentions the node)."""

from __future__ import annotations

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
from services.replay import why
from shared.model import meta, nodelifecycle, podutil
from shared.model.podutil import target_node
from shared.store import codec
from shared.store.client import Store
from shared.store.server import RedisServer
from tests.integration.stack import Stack, wait_for

Obj = dict[str, Any]
NS = "monitoring"
KEY = f"{NS}/agent"
_serial = itertools.count()

AGENT = """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: monitoring}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      nodeSelector: {tier: web}
      terminationGracePeriodSeconds: 1
      containers: [{name: agent, image: agent:v1}]
"""


@dataclass
class Run:
    stack: Stack
    store: Store
    first_pod: Obj  # the pod created on node-00001, later deleted
    deleted_at: str  # the log tip once it was gone


def _pods(store: Store) -> list[Obj]:
    return store.list("Pod", NS)


def _decisions(store: Store) -> list[tuple[str, Obj]]:
    return [(codec.decode_entry(rid, f).id, codec.decode_entry(rid, f).obj)
            for rid, f in store.r.xrange(store.keys.log) if f.get(b"t") == b"DECISION"]


def _set_label(store: Store, node: str, value: str | None) -> None:
    def change(obj: Obj) -> Obj:
        labels = obj["metadata"].setdefault("labels", {})
        if value is None:
            labels.pop("tier", None)
        else:
            labels["tier"] = value
        return obj

    store.mutate("Node", "/" + node, change)


@pytest.fixture(scope="module")
def run(redis_server: RedisServer) -> Iterator[Run]:
    tmp = Path(tempfile.mkdtemp(prefix="why-test-"))
    stack = Stack(redis_server.url, f"why{os.getpid()}x{next(_serial)}", tmp)
    store = stack.store
    try:
        store.create(new_node("node-00001", {"tier": "web"}))
        store.create(new_node("node-00002"))
        store.create(new_node("node-00003", {"tier": "web"}, taints=[
            {"key": "dedicated", "value": "db", "effect": "NoSchedule"}]))
        store.create(new_node("node-00004", {"tier": "web"}))
        stack.start_all(workers=1, nodes=0, agent_args=("--grace", "0.1"))
        # the node agent reports each node Ready (a Node write) when it starts: that must
        # come before the DaemonSet's decisions, or a node looks changed since the decision
        # that gave its reason (why_node's "reason at the time of", not "reason from")
        wait_for(lambda: [nodelifecycle.ready_status(n) for n in store.list("Node")]
                 == ["True"] * 4, what="the node agent reporting every node Ready")
        store.apply(yaml.safe_load(AGENT))
        wait_for(lambda: sorted(target_node(p) or "" for p in _pods(store)
                                if podutil.is_ready(p)) == ["node-00001", "node-00004"],
                 what="pods on node-00001 and node-00004")
        first = next(p for p in _pods(store) if target_node(p) == "node-00001")
        _set_label(store, "node-00001", None)  # the pod there must go
        wait_for(lambda: [target_node(p) for p in _pods(store)] == ["node-00004"],
                 what="the pod on node-00001 deleted")
        yield Run(stack, store, first, store.log_tip())
    finally:
        stack.stop()
        for f in tmp.glob("*"):
            f.unlink()
        tmp.rmdir()


def test_why_pod_names_the_decision_that_created_it(run: Run) -> None:
    pod = next(p for p in _pods(run.store) if target_node(p) == "node-00004")
    text = "\n".join(why.why_pod(run.store, NS, meta.name(pod)))
    creator = next((eid, rec) for eid, rec in _decisions(run.store)
                   if ["node-00004", meta.name(pod)] in rec["actions"]["creates"])
    assert f"by decision {creator[0]} " in text
    assert f"of daemonset {KEY} by worker " in text
    assert f"read the log through {creator[1]['position']} " in text
    assert "expectations: satisfied" in text


def test_why_pod_names_the_decision_that_deleted_it(run: Run) -> None:
    lines = why.why_pod(run.store, NS, meta.name(run.first_pod))
    text = "\n".join(lines)
    assert "  deleted: entry " in text
    assert "why: the daemon should not run on node-00001: node selector does not match" in text
    deleter = next(eid for eid, rec in _decisions(run.store)
                   if [meta.name(run.first_pod), "node-00001"] in rec["actions"]["deletes"])
    deleted = text.split("  deleted: ")[1]
    assert f"by decision {deleter} " in deleted


def test_why_node_gives_the_recorded_selector_reason(run: Run) -> None:
    text = "\n".join(why.why_node(run.store, KEY, "node-00002", run.store.clock()))
    assert "reason from the most recent decision: node selector does not match" in text, \
        "\n".join([text, *why.why_changes(run.store, "Node", "/node-00002")])
    assert "node node-00002 (version " in text and "nodeSelector {'tier': 'web'}" in text


def test_why_node_gives_the_recorded_taint_reason(run: Run) -> None:
    text = "\n".join(why.why_node(run.store, KEY, "node-00003", run.store.clock()))
    assert "untolerated taint dedicated=db:NoSchedule" in text
    assert "taints [dedicated=db:NoSchedule]" in text


def test_why_node_computes_the_reason_when_no_decision_mentions_the_node(run: Run) -> None:
    """A node added after the last decision: its sync planned nothing, so nothing was
    recorded; the reason is computed from the current node and DaemonSet."""
    run.store.create(new_node("node-late", {"tier": "db"}))
    tip = run.store.log_tip()
    wait_for(lambda: codec.id_tuple(run.store.r.get(run.store.keys.cursor("watcher"))
                                    .decode()) >= codec.id_tuple(tip), what="watcher saw it")
    text = "\n".join(why.why_node(run.store, KEY, "node-late", run.store.clock()))
    assert ("reason now (the most recent decision does not mention this node; computed from "
            "the current state): node selector does not match") in text


def test_why_node_with_a_running_pod(run: Run) -> None:
    text = "\n".join(why.why_node(run.store, KEY, "node-00004", run.store.clock()))
    assert "is there (Running)" in text


def _cli(run: Run, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--redis-url", run.stack.redis_url, "--prefix",
                                    run.stack.prefix, *args], obj=context.CliEnv(),
                              catch_exceptions=False)


def test_cli_why_pod(run: Run) -> None:
    res = _cli(run, "why", f"pod/{meta.name(run.first_pod)}", "-n", NS)
    assert res.exit_code == 0, res.output
    assert res.output.startswith(f"pod {NS}/{meta.name(run.first_pod)} (uid ")


def test_cli_why_ds_node(run: Run) -> None:
    res = _cli(run, "why", "ds/agent", "node/node-00002", "-n", NS)
    assert res.exit_code == 0, res.output
    assert "node selector does not match" in res.output


def test_cli_why_unknown_pod_is_not_found(run: Run) -> None:
    res = _cli(run, "why", "pod/nope", "-n", NS)
    assert res.exit_code == 1
    assert res.stderr.startswith('Error from server (NotFound): pods "nope" not found')
