"""Chaos: 3 reconciler replicas, 100 DaemonSets on 200 nodes, one worker SIGKILLed mid-run.

Everything converges (all 100 statuses complete, 20,000 pods), no DaemonSet ever has two live
pods on one node (checked on the final state and over the whole log), and no key is lost
(every DaemonSet's final status was computed after its last pod change; nothing is left in
the workqueue)."""

from __future__ import annotations

import signal
import time
from collections import defaultdict
from typing import Any

from shared.daemonset import dsutil
from shared.model import meta
from shared.model.podutil import target_node
from shared.store import codec
from shared.store.expectations import RedisExpectations
from shared.store.workqueue import RedisWorkQueue
from tests.integration import controller_kit as kit
from tests.integration.stack import Stack, wait_for

DAEMONSETS = 100
NODES = 200
NAMESPACES = 10
WORKERS = 3
COMPLETE = ("desiredNumberScheduled", "currentNumberScheduled", "numberReady",
            "updatedNumberScheduled", "numberAvailable")


def _names() -> list[tuple[str, str]]:
    return [(f"chaos-{i % NAMESPACES}", f"ds-{i:03d}") for i in range(DAEMONSETS)]


def _complete(ds: dict[str, Any]) -> bool:
    st = ds.get("status") or {}
    return (all(st.get(f) == NODES for f in COMPLETE)
            and not st.get("numberMisscheduled")
            and st.get("observedGeneration") == ds["metadata"]["generation"])


def _progress(stack: Stack) -> tuple[int, int]:
    dss = stack.store.list("DaemonSet")
    return sum(1 for d in dss if _complete(d)), int(stack.store.r.hlen(stack.store.keys.objects("Pod")))


def _added_per_revision(entries: list[codec.Entry]) -> dict[tuple[str, str, str], list[str]]:
    """ADDED pods that were never deleted, per (DaemonSet uid, node, revision hash)."""
    deleted = {e.obj["metadata"]["uid"] for e in entries if e.type == "DELETED"}
    groups: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for e in entries:
        ref = meta.controller_ref(e.obj)
        if e.type != "ADDED" or ref is None or e.obj["metadata"]["uid"] in deleted:
            continue
        hash_ = meta.labels(e.obj).get(dsutil.HASH_LABEL, "")
        groups[(str(ref.get("uid")), target_node(e.obj), hash_)].append(e.key)
    return groups


def test_chaos_three_workers_one_killed_converges_without_duplicates(stack: Stack) -> None:
    started = time.monotonic()
    kit.start(stack, workers=WORKERS, nodes=NODES)
    wait_for(lambda: all(kit.rq_worker_registered(stack, f"{stack.prefix}-r{i}")
                         for i in range(WORKERS)), what="3 workers up")
    ready_at = time.monotonic()
    for ns, name in _names():
        stack.store.apply(kit.daemonset(name, ns))

    victim = f"{stack.prefix}-r1"

    expectations = RedisExpectations(stack.store.r, stack.store.keys)

    def victim_mid_sync() -> bool:
        """r1 holds a key whose expectations still wait for creates: killed now, it leaves
        expectations no event will ever lower (its next holder must not wait them out)."""
        if stack.store.r.hlen(stack.store.keys.objects("Pod")) < DAEMONSETS * NODES // 3:
            return False
        owners: Any = stack.store.r.hgetall(stack.store.keys.wq_owner)
        held = [k.decode() for k, o in owners.items() if o.decode().endswith(":" + victim)]
        return any((e := expectations.get(k)) is not None and e.add > 0 for k in held)

    wait_for(victim_mid_sync, timeout=60, interval=0.005,
             what="a third of the pods created and worker r1 mid-creation of a key's pods")
    stack.kill("reconciler-1", signal.SIGKILL)
    killed_at = time.monotonic()

    try:
        wait_for(lambda: _progress(stack) == (DAEMONSETS, DAEMONSETS * NODES), timeout=240,
                 interval=0.5, what="every status complete and 20,000 pods")
    except AssertionError as err:
        stuck = {meta.key(d): d.get("status") for d in stack.store.list("DaemonSet")
                 if not _complete(d)}
        queue = RedisWorkQueue(stack.store.r, stack.store.keys)
        raise AssertionError(f"{err}; progress {_progress(stack)}; queue {queue.stats()}; "
                             f"first incomplete: {list(stuck.items())[:3]}") from None
    converged_at = time.monotonic()
    wait_for(lambda: kit.queue_idle(stack.store), timeout=30, what="the workqueue drained")
    assert RedisWorkQueue(stack.store.r, stack.store.keys).stats().reclaimed_total >= 1
    for name in list(stack.procs):  # done with them: free the CPU for the checks below
        stack.kill(name, signal.SIGKILL)
    print(f"\nchaos: processes up {ready_at - started:.1f}s, killed a worker after "
          f"{killed_at - ready_at:.1f}s, converged {converged_at - ready_at:.1f}s after apply")

    per_ds: dict[str, list[str]] = defaultdict(list)
    for pod in stack.store.list("Pod"):
        per_ds[str((meta.controller_ref(pod) or {}).get("uid"))].append(target_node(pod))
    uids = {meta.uid(d) for d in stack.store.list("DaemonSet")}
    assert set(per_ds) == uids
    for uid, nodes in per_ds.items():
        assert len(nodes) == NODES and len(set(nodes)) == NODES, f"{uid}: two pods on one node"
    entries = kit.log_entries(stack.store, "Pod")
    assert kit.live_together(entries) == []
    groups = _added_per_revision(entries)
    assert len(groups) == DAEMONSETS * NODES
    assert [g for g in groups.values() if len(g) > 1] == []
