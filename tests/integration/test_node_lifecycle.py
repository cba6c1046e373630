"""Node leases and the node lifecycle controller with real processes: node agents renew
their leases outside the log; an agent stopped (SIGSTOP) or killed is noticed by gc's node
lifecycle controller within the grace period (Ready Unknown, tainted unreachable), its daemon
pod stays while a pod without the tolerations is evicted, and the taints go when it is back.

The grace periods are short here (agents' leases of 1 s, renewed every 0.25 s; gc looks
every 0.2 s and allows 3 s) so the test is fast."""

from __future__ import annotations

import signal
import time
from typing import Any

from shared.model import meta, nodelifecycle, podutil
from shared.store.nodelease import NodeLeases
from tests.integration.stack import Stack, wait_for
from tests.integration.test_node_agent_process import Machine, daemonset, machine

__all__ = ["machine"]  # the fixture, shared with the process runtime's tests
GRACE = 3.0
LEASE = ("--node-lease-duration", "1")
GC = ("gc", "--node-monitor-period", "0.2", "--node-monitor-grace-period", str(GRACE))


def ready(node: dict[str, Any] | None) -> str:
    return nodelifecycle.ready_status(node or {})


def controller_taints(node: dict[str, Any] | None) -> set[str]:
    return {f"{t['key']}:{t['effect']}" for t in ((node or {}).get("spec") or {}).get("taints")
            or [] if t["key"] in nodelifecycle.CONTROLLER_TAINTS}


UNREACHABLE = {"node.kubernetes.io/unreachable:NoSchedule",
               "node.kubernetes.io/unreachable:NoExecute"}


def test_simulated_agent_renews_leases_of_its_nodes_without_log_entries(stack: Stack) -> None:
    stack.start("node-agent", "node-agent", "--nodes", "200", *LEASE)
    leases = NodeLeases(stack.store.r, stack.store.keys)
    names = [f"node-{i:05d}" for i in range(1, 201)]

    def all_leased() -> dict[str, str | None] | None:
        got = leases.read(names)
        return got if all(got.values()) else None

    first = wait_for(all_leased, what="a lease for each of 200 nodes")
    node_rvs = {meta.resource_version(n) for n in stack.store.list("Node")}
    tip = stack.store.log_tip()
    wait_for(lambda: all(v != first[n] for n, v in leases.read(names).items()),
             what="every lease renewed")
    wait_for(lambda: all(v != first[n] for n, v in leases.read(names).items()),
             what="renewed again")
    # the Nodes were not written for it, nor was anything else
    assert {meta.resource_version(n) for n in stack.store.list("Node")} == node_rvs
    assert stack.store.log_tip() == tip


def start_stack(m: Machine) -> tuple[str, str]:
    m.stack.start_all(workers=1, gc=False, node_agent=False)
    m.stack.start("gc", *GC)
    a, b = sorted(m.ips)
    for n in (a, b):
        m.stack.start(f"agent-{n}", "node-agent", "--runtime", "process", "--node-name", n,
                      "--node-ip", m.ips[n], "--state-dir", str(m.state / n), *LEASE)
    wait_for(lambda: {ready(m.stack.store.try_get("Node", f"/{n}")) for n in (a, b)}
             == {"True"}, what="both nodes Ready")
    return a, b


def plain_pod(m: Machine, node: str) -> dict[str, Any]:
    """A pod bound to ``node`` with no tolerations (not a daemon pod)."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "plain", "namespace": "default"},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "c", "image": "python:3", "command": [
                         "python3", "-c", "import time; time.sleep(600)", str(m.dir)]}]}}


def test_stopped_agent_is_unreachable_within_grace_and_untainted_when_back(
        machine: Machine) -> None:
    stack = machine.stack
    a, b = start_stack(machine)
    stack.store.apply(daemonset(machine, "v1", probe=False))
    stack.store.create(plain_pod(machine, a))

    def running() -> bool:
        pods = stack.pods("default")
        return len(pods) == 3 and all((p.get("status") or {}).get("phase") == "Running"
                                      for p in pods)

    wait_for(running, timeout=60, what="the daemon pods and the plain pod Running")
    daemon_a = next(p for p in stack.pods("default")
                    if p["spec"]["nodeName"] == a and meta.name(p) != "plain")

    stack.procs[f"agent-{a}"].send_signal(signal.SIGSTOP)
    stopped_at = time.monotonic()
    node = wait_for(lambda: (n := stack.store.try_get("Node", f"/{a}"))
                    and controller_taints(n) == UNREACHABLE and n,
                    timeout=GRACE + 20, what=f"{a} tainted unreachable")
    took = time.monotonic() - stopped_at
    cond = podutil.ready_condition(node)
    assert cond is not None
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.")
    # not before the grace period ran out (the wait above bounds it from above: a look
    # every 0.2 s, but a loaded machine may be slow to run the gc)
    assert took >= GRACE - 1
    # b was renewing all along: untouched
    other = stack.store.get("Node", f"/{b}")
    assert ready(other) == "True" and not controller_taints(other)
    # the plain pod is evicted by the taint manager; the daemon pod stays
    plain = wait_for(lambda: (p := stack.store.try_get("Pod", "default/plain"))
                     and meta.is_being_deleted(p) and p, what="the plain pod evicted")
    assert any(c.get("type") == "DisruptionTarget"
               for c in plain["status"].get("conditions") or [])
    still = stack.store.get("Pod", meta.key(daemon_a))
    assert meta.uid(still) == meta.uid(daemon_a) and not meta.is_being_deleted(still)
    events = [e for e in stack.store.list("Event", "default")
              if e.get("reason") == "NodeNotReady"]
    assert [e["involvedObject"]["name"] for e in events] == [a]

    stack.procs[f"agent-{a}"].send_signal(signal.SIGCONT)
    back = wait_for(lambda: (n := stack.store.try_get("Node", f"/{a}"))
                    and ready(n) == "True" and not controller_taints(n) and n,
                    timeout=30, what=f"{a} Ready and untainted again")
    assert not controller_taints(back)
    # the evicted pod is released by its agent; the daemon pod is still the same one
    wait_for(lambda: stack.store.try_get("Pod", "default/plain") is None, timeout=30,
             what="the evicted pod released")
    assert not meta.is_being_deleted(stack.store.get("Pod", meta.key(daemon_a)))


def test_killed_agent_is_unreachable_and_its_restart_removes_the_taints(
        machine: Machine) -> None:
    stack = machine.stack
    a, b = start_stack(machine)
    stack.kill(f"agent-{b}")
    wait_for(lambda: controller_taints(stack.store.try_get("Node", f"/{b}")) == UNREACHABLE,
             timeout=GRACE + 20, what=f"{b} tainted unreachable")
    assert ready(stack.store.get("Node", f"/{a}")) == "True"
    stack.start(f"agent-{b}", "node-agent", "--runtime", "process", "--node-name", b,
                "--node-ip", machine.ips[b], "--state-dir", str(machine.state / b), *LEASE)
    wait_for(lambda: (n := stack.store.try_get("Node", f"/{b}")) is not None
             and ready(n) == "True" and not controller_taints(n),
             timeout=30, what=f"{b} Ready and untainted again")
