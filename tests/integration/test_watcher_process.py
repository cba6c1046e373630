"""The watcher process on real Redis: it resumes from its stored cursor after a kill -9 (no
event missed while it was down, expectations still satisfied), and a stand-by watcher takes
the Redis lease over within 10 s when the active one is SIGKILLed."""

from __future__ import annotations

import signal
import time
from typing import Any

from services.node_agent.lifecycle import new_node
from shared.store import codec
from shared.store.lease import RedisLeaderLease
from shared.store.workqueue import RedisWorkQueue
from tests.integration import controller_kit as kit
from tests.integration.stack import Stack, wait_for

KEY = "default/agent"


def _holder(stack: Stack) -> str | None:
    return RedisLeaderLease(stack.store.r, stack.store.keys, "watcher", "probe").current_holder()


def _holder_is(stack: Stack, name: str) -> bool:
    return f"-{stack.procs[name].pid}-" in (_holder(stack) or "")


def _cursor(stack: Stack) -> str:
    raw: Any = stack.store.r.get(stack.store.keys.cursor("watcher"))
    return raw.decode() if raw else "0-0"


def _passed(stack: Stack, position: str) -> bool:
    return codec.id_ge(_cursor(stack), position)


def _kill_leader(stack: Stack) -> None:
    """SIGKILL the watcher and let its lease lapse now rather than LEASE_SECONDS later (the
    lapse itself is what the take-over test measures)."""
    stack.kill("watcher", signal.SIGKILL)
    stack.store.r.delete(stack.store.keys.lease("watcher"))


def test_watcher_resumes_from_its_cursor_after_kill_9(stack: Stack) -> None:
    nodes = kit.start(stack, nodes=3)
    stack.store.apply(kit.daemonset("agent"))
    wait_for(lambda: kit.one_per_node(stack.store, KEY, nodes), what="a pod on each node")
    wait_for(lambda: kit.fulfilled(stack.store, KEY), what="expectations met")
    wait_for(lambda: _passed(stack, stack.store.log_tip()), what="the watcher at the tip")
    _kill_leader(stack)
    cursor_at_kill = _cursor(stack)

    # While it is down: a node joins, and a key queued before the crash is synced by the
    # reconciler, which creates the pod there and expects to observe that creation.
    stack.store.create(new_node("node-late"))
    RedisWorkQueue(stack.store.r, stack.store.keys).add([KEY])
    wait_for(lambda: kit.one_per_node(stack.store, KEY, [*nodes, "node-late"]),
             what="the pod on the late node")
    assert not kit.fulfilled(stack.store, KEY), "nobody observed the creation yet"
    # and a daemon pod disappears: only the log says so
    victim = kit.owned_pods(stack.store, KEY)[0]
    stack.store.delete("Pod", f"default/{victim['metadata']['name']}", grace_seconds=0)
    assert _cursor(stack) == cursor_at_kill

    stack.start("watcher", "watcher")
    wait_for(lambda: kit.fulfilled(stack.store, KEY), what="expectations met from the replay")
    wait_for(lambda: kit.one_per_node(stack.store, KEY, [*nodes, "node-late"]), timeout=20,
             what="the deleted pod replaced")
    wait_for(lambda: kit.status(stack.store, KEY).get("numberReady") == 4, what="4 ready")
    assert _cursor(stack) > cursor_at_kill


def test_watcher_resumes_and_a_node_added_while_down_gets_its_pod(stack: Stack) -> None:
    nodes = kit.start(stack, nodes=2)
    stack.store.apply(kit.daemonset("agent", node_selector={"pool": "a"}))
    wait_for(lambda: kit.status(stack.store, KEY).get("observedGeneration") == 1,
             what="the DaemonSet synced")
    wait_for(lambda: _passed(stack, stack.store.log_tip()) and kit.queue_idle(stack.store),
             what="the watcher at the tip and the queue idle")
    _kill_leader(stack)
    stack.store.create(new_node("node-a1", labels={"pool": "a"}))
    kit.mutate_node(stack.store, nodes[0], lambda n: n["metadata"]["labels"].update(pool="a"))
    assert kit.owned_pods(stack.store, KEY) == []
    stack.start("watcher", "watcher")
    wait_for(lambda: kit.one_per_node(stack.store, KEY, ["node-a1", nodes[0]]),
             what="pods on the two pool-a nodes")
    wait_for(lambda: kit.status(stack.store, KEY).get("desiredNumberScheduled") == 2,
             what="desired 2")


def test_standby_watcher_takes_over_within_10s_of_sigkill(stack: Stack) -> None:
    nodes = kit.start(stack, nodes=2)
    wait_for(lambda: _holder_is(stack, "watcher"), what="the first watcher holds the lease")
    stack.start("watcher-2", "watcher")
    stack.store.apply(kit.daemonset("agent"))
    wait_for(lambda: kit.one_per_node(stack.store, KEY, nodes), what="pods from the leader")
    assert _holder_is(stack, "watcher"), "the stand-by must not take a held lease"

    killed = time.monotonic()
    stack.kill("watcher", signal.SIGKILL)
    wait_for(lambda: _holder_is(stack, "watcher-2"), timeout=15, interval=0.02,
             what="the stand-by holds the lease")
    takeover = time.monotonic() - killed
    print(f"watcher lease takeover after SIGKILL: {takeover:.2f}s")
    assert takeover < 10.0

    stack.store.create(new_node("node-new"))
    wait_for(lambda: kit.one_per_node(stack.store, KEY, [*nodes, "node-new"]),
             what="the new leader reacts to a node add")


def test_sigterm_releases_the_lease_for_an_immediate_takeover(stack: Stack) -> None:
    kit.start(stack, nodes=1)
    wait_for(lambda: _holder_is(stack, "watcher"), what="the first watcher holds the lease")
    stack.start("watcher-2", "watcher")
    # time the hand-over, not the stand-by's start: under load, starting a Python process
    # alone can take seconds
    wait_for(lambda: "standing by" in (stack.log_dir / "watcher-2.log").read_text(),
             what="the second watcher stands by")
    stopped = time.monotonic()
    stack.kill("watcher", signal.SIGTERM)
    wait_for(lambda: _holder_is(stack, "watcher-2"), timeout=10, interval=0.02,
             what="the stand-by holds the lease")
    assert time.monotonic() - stopped < 3.0
