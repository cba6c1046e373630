"""The node agent as a real process: many nodes in one process, stages, termination."""

from __future__ import annotations

import redis
import yaml

from services.node_agent.agent import NodeAgent
from services.node_agent.lifecycle import AgentConfig
from shared.model import meta
from shared.model.podutil import is_ready
from shared.store import nodelease
from shared.store.client import Store
from shared.store.keys import Keys
from shared.store.nodelease import NodeLeases
from tests.integration import controller_kit as kit
from tests.integration.stack import Stack, wait_for

DS = """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: default}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      terminationGracePeriodSeconds: 30
      containers: [{name: agent, image: "%s"}]
"""


def test_one_agent_process_serves_two_thousand_nodes(stack: Stack) -> None:
    stack.start_all(workers=2, nodes=2000)
    wait_for(lambda: stack.store.r.hlen(stack.store.keys.objects("Node")) == 2000,
             what="2000 nodes registered")

    def all_nodes_ready() -> bool:
        return all(any(c.get("type") == "Ready" and c.get("status") == "True"
                       for c in (n.get("status") or {}).get("conditions", []))
                   for n in stack.store.list("Node"))

    wait_for(all_nodes_ready, timeout=60, interval=0.5, what="every node reported Ready")
    stack.store.apply(yaml.safe_load(DS % "agent:1"))
    wait_for(lambda: stack.status("default/agent").get("numberReady") == 2000, timeout=90,
             interval=0.5, what="2000 daemon pods ready")
    pods = stack.pods("default")
    assert len(pods) == 2000
    assert len({p["spec"]["nodeName"] for p in pods}) == 2000


def test_pods_go_pending_then_ready_after_the_delay(stack: Stack) -> None:
    stack.start_all(workers=1, nodes=2, agent_args=("--ready-delay", "1"))
    stack.store.apply(yaml.safe_load(DS % "agent:1"))
    wait_for(lambda: len(stack.pods("default")) == 2 and all(
        is_ready(p) for p in stack.pods("default")), timeout=15, what="pods ready")
    # read from the log, on Redis' clock (what a poll sees depends on the machine's load):
    # each pod was bound Pending first, and made Ready no sooner than the delay after its
    # startTime (stamped at the binding, in whole seconds)
    bound: dict[str, int] = {}
    ready: dict[str, int] = {}
    started: dict[str, float] = {}
    for e in kit.log_entries(stack.store, "Pod"):
        ms = int(e.id.split("-")[0])
        status = e.obj.get("status") or {}
        # (created Pending, as upstream's registry makes a pod; bound once it has a start)
        if status.get("phase") == "Pending" and status.get("startTime") and e.key not in bound:
            bound[e.key] = ms
            started[e.key] = meta.parse_time(status.get("startTime")) or 0.0
        if is_ready(e.obj):
            ready.setdefault(e.key, ms)
    assert set(ready) == set(bound) and len(ready) == 2, (bound, ready)
    for key, at in ready.items():
        assert bound[key] < at and started[key] > 0, (key, bound[key], at)
        assert at >= (started[key] + 1) * 1000, (key, started[key], at)


def test_deleted_pod_terminates_after_grace_and_is_replaced(stack: Stack) -> None:
    stack.start_all(workers=1, nodes=1, agent_args=("--grace", "1"))
    stack.store.apply(yaml.safe_load(DS % "agent:1"))
    wait_for(lambda: stack.status("default/agent").get("numberReady") == 1, what="1 ready")
    victim = stack.pods("default")[0]
    left = stack.store.delete("Pod", meta.key(victim))
    assert left is not None and left["metadata"]["deletionTimestamp"]
    # the replacement may reuse the name (names are deterministic per node and revision),
    # so the old pod is recognised by its uid
    wait_for(lambda: meta.uid(stack.store.try_get("Pod", meta.key(victim)) or {})
             != meta.uid(victim), timeout=15,
             what="the terminating pod removed after its grace period")
    wait_for(lambda: [meta.uid(p) for p in stack.pods("default") if is_ready(p)]
             not in ([], [meta.uid(victim)]), timeout=15, what="a replacement pod ready")


def test_fail_image_pods_fail_and_never_ready_pods_stay_unready(stack: Stack) -> None:
    stack.start_all(workers=1, nodes=1, agent_args=("--fail-image", "*:broken",
                                                     "--never-ready", "*:stuck"))
    stack.store.apply(yaml.safe_load(DS % "agent:stuck"))
    wait_for(lambda: [(p.get("status") or {}).get("phase") for p in stack.pods("default")]
             == ["Running"], what="a running pod")
    wait_for(lambda: stack.status("default/agent").get("currentNumberScheduled") == 1,
             what="status counted")
    assert stack.status("default/agent").get("numberReady", 0) == 0
    assert not is_ready(stack.pods("default")[0])


def test_leases_are_renewed_a_thousand_nodes_at_a_time_spread_over_the_interval(
        client: redis.Redis, keys: Keys) -> None:
    clock = {"now": 1_000_000.0}
    agent = NodeAgent(Store(client, keys), AgentConfig(lease_duration=40.0),
                      clock=lambda: clock["now"])
    assert agent.ensure_nodes(2500) == 2500
    agent.cache.sync()
    names = [f"node-{i:05d}" for i in range(1, 2501)]
    leases = NodeLeases(client, keys)
    gap = nodelease.renew_interval(40.0) / 3  # 2,500 nodes: three slices per 10 s

    def renewed_at(t: float) -> int:
        return sum(1 for v in leases.read(names).values()
                   if v is not None and v.renew_ms == int(t * 1000))

    t0 = clock["now"]
    agent.step(max_block=0)
    assert renewed_at(t0) == 1000  # one slice, not every node at once
    agent.step(max_block=0)
    assert renewed_at(t0) == 1000  # the next slice is not due yet
    for i in (1, 2):
        clock["now"] = t0 + i * (gap + 0.01)
        agent.step(max_block=0)
        assert renewed_at(clock["now"]) == (1000 if i == 1 else 500)
    assert all(leases.read(names).values())  # every node renewed within one interval
    clock["now"] = t0 + 3 * (gap + 0.01)  # the next interval starts with the first slice again
    agent.step(max_block=0)
    assert renewed_at(clock["now"]) == 1000 and renewed_at(t0) == 0


def test_a_slow_loop_renews_every_slice_that_fell_due(client: redis.Redis, keys: Keys) -> None:
    clock = {"now": 2_000_000.0}
    agent = NodeAgent(Store(client, keys), AgentConfig(lease_duration=40.0),
                      clock=lambda: clock["now"])
    agent.ensure_nodes(2500)
    agent.cache.sync()
    names = [f"node-{i:05d}" for i in range(1, 2501)]
    leases = NodeLeases(client, keys)
    gap = nodelease.renew_interval(40.0) / 3

    t0 = clock["now"]
    agent.step(max_block=0)  # the first slice
    clock["now"] = t0 + 2 * gap + 0.5  # the loop was busy for two slices' time
    agent.step(max_block=0)
    got = leases.read(names)
    assert sum(1 for v in got.values() if v is not None and v.renew_ms ==
               int(clock["now"] * 1000)) == 1500  # both slices that fell due, at once
    assert all(got.values())
