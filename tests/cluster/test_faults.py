"""Faults in the compose cluster: workers scaled mid-rollout, a worker killed mid-sync, the
active watcher killed, Redis restarted, a worker cut off from the network. After each, every
DaemonSet converges with one pod per node, and no pod of one revision is ever created twice
on a node."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable

import pytest

from services.common import STALL_SECONDS
from shared.store.client import Store
from tests.cluster.cluster import (
    NODES,
    RECONCILERS,
    SERVICES,
    SLOW_KEY,
    Cluster,
    assert_no_duplicate_creates,
    converged,
    daemon_pods,
    daemonset,
    rq_jobs_done,
    run,
    updated_pods,
)
from tests.integration.stack import wait_for

pytestmark = pytest.mark.cluster


def _id(stream_id: str) -> tuple[int, int]:
    ms, _, seq = stream_id.partition("-")
    return int(ms), int(seq or 0)


def _text(raw: object) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw or "")


def _owner(store: Store, key: str) -> str | None:
    """The worker id holding ``key``'s workqueue lease (``<token>:<ms>:<worker>``)."""
    raw = store.r.hget(store.keys.wq_owner, key)
    return None if raw is None else _text(raw).split(":", 2)[2]


def _restart_counts(c: Cluster) -> dict[str, str]:
    """Docker's restart count of every daemonbus container (the processes' crashes)."""
    return {x: c.inspect(x, "{{.RestartCount}}")
            for s in SERVICES if s != "redis" for x in c.containers(s)}


def _health(c: Cluster, container: str) -> tuple[int, str]:
    """``daemonbus health reconciler`` run in the container: exit code and its line."""
    proc = run(["docker", "exec", container, "daemonbus", "health", "reconciler",
                "--metrics-port", "9100", "--timeout", "2"], check=False, timeout=60)
    return proc.returncode, proc.stdout + proc.stderr


def _reclaimed(store: Store) -> int:
    return int(store.r.hget(store.keys.wq_stats, "reclaimed") or 0)


def _nudge_until(cluster: Cluster, ns: str, name: str, done: Callable[[], bool],
                 what: str, timeout: float = 60) -> None:
    """Change a label of the DaemonSet (each change is one more sync) until ``done()``."""
    count = itertools.count(1)

    def nudged() -> bool:
        if done():
            return True
        cluster.cli("label", "ds", name, f"nudge={next(count)}", "--overwrite", "-n", ns)
        return False

    wait_for(nudged, timeout=timeout, interval=0.2, what=what)


def test_reconcilers_scaled_up_mid_rollout_finish_it(full_cluster: Cluster) -> None:
    c = full_cluster
    c.scale_reconcilers(1)
    wait_for(lambda: len(c.containers("reconciler")) == 1, timeout=30, what="one worker")
    before = set(c.containers("reconciler"))
    ns, name = "cluster-scale", "rolling"
    key = f"{ns}/{name}"
    c.apply(daemonset(ns, name, image="agent:v1", minReadySeconds=2, updateStrategy={
        "type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}))
    wait_for(lambda: converged(c.store(), key, "agent:v1"), timeout=60, interval=0.2,
             what="v1 on every node")

    c.cli("set", "image", f"ds/{name}", "main=agent:v2", "-n", ns)
    wait_for(lambda: 1 <= updated_pods(c.store(), key, "agent:v2") <= 2 and
             not converged(c.store(), key, "agent:v2"),
             timeout=60, interval=0.1, what="the rollout under way")
    c.scale_reconcilers(3)
    added = set(c.containers("reconciler")) - before
    assert len(added) == 2, f"scaled to 3 but new workers are {added}"
    assert updated_pods(c.store(), key, "agent:v2") < NODES or \
        not converged(c.store(), key, "agent:v2"), "the rollout ended before the scale-up"

    wait_for(lambda: converged(c.store(), key, "agent:v2"), timeout=90, interval=0.2,
             what="v2 on every node with three workers")
    assert len(c.containers("reconciler")) == 3
    _nudge_until(c, ns, name, lambda: all(
        rq_jobs_done(c.store(), f"reconciler-{cid[:12]}-") >= 1 for cid in added),
        what="both new workers syncing")
    assert_no_duplicate_creates(c.store(), key)


def test_reconciler_killed_mid_sync_hands_its_key_out_again(full_cluster: Cluster) -> None:
    c = full_cluster
    ns, name = SLOW_KEY.split("/")
    store = c.store()
    reclaimed = _reclaimed(store)
    c.apply(daemonset(ns, name, image="victim:v1"))
    # The test hook makes every sync of this key sleep first: the worker holding it now
    # is in the middle of its sync.
    victim = wait_for(lambda: _owner(store, SLOW_KEY), timeout=30, interval=0.01,
                      what="a worker syncing the key")
    c.docker("kill", c.container_of(victim, "reconciler"))
    assert daemon_pods(store, SLOW_KEY) == [], "the killed worker finished its sync first"

    wait_for(lambda: _reclaimed(store) > reclaimed, timeout=30, interval=0.1,
             what="the dead worker's lease reclaimed")
    wait_for(lambda: converged(store, SLOW_KEY, "victim:v1"), timeout=60, interval=0.2,
             what="the key synced by another worker")
    assert_no_duplicate_creates(store, SLOW_KEY)
    assert len(daemon_pods(store, SLOW_KEY)) == NODES


def test_active_watcher_killed_standby_takes_over_without_missing_events(
        full_cluster: Cluster) -> None:
    c = full_cluster
    store = c.store()
    lease = store.keys.lease("watcher")
    holder = _text(store.r.get(lease))
    service = next(s for s in ("watcher", "watcher-standby")
                   if any(f"-{x[:12]}-" in holder for x in c.containers(s)))
    standby = c.containers("watcher-standby" if service == "watcher" else "watcher")[0]
    c.docker("kill", c.container_of(holder, service))

    # Changes while no watcher is active: the standby must still see them all.
    ns = "cluster-watcher"
    c.apply(daemonset(ns, "during-gap", image="gap:v1"))
    created = store.get("DaemonSet", f"{ns}/during-gap")["metadata"]["resourceVersion"]
    c.cli("label", "node", "node-00001", "cluster-watcher=gap", "--overwrite")

    wait_for(lambda: f"-{standby[:12]}-" in _text(store.r.get(lease)), timeout=30,
             interval=0.1, what="the standby watcher holding the lease")
    wait_for(lambda: converged(store, f"{ns}/during-gap", "gap:v1"), timeout=60,
             interval=0.2, what="the DaemonSet made during the gap converged")
    wait_for(lambda: _id(_text(store.r.get(store.keys.cursor("watcher")))) >= _id(created),
             timeout=30, interval=0.1, what="the new watcher's cursor past the gap")
    # The new leader ran the gap's entries through the event handlers (replay from the
    # stored cursor), not only a relist: its replay spans the DaemonSet's creation.
    logs = run(["docker", "logs", standby], check=False).stderr
    spans = [(_id(a), _id(b)) for a, b in re.findall(r"replayed log from (\S+) to (\S+)", logs)]
    assert any(a < _id(created) <= b for a, b in spans), f"no replay over the gap: {spans}"
    assert_no_duplicate_creates(store, f"{ns}/during-gap")


def test_redis_restart_loses_nothing_and_every_service_reconnects(
        full_cluster: Cluster) -> None:
    c = full_cluster
    ns = "cluster-redis"
    c.apply(daemonset(ns, "before", image="before:v1"))
    store = c.store()
    wait_for(lambda: converged(store, f"{ns}/before", "before:v1"), timeout=60, interval=0.2,
             what="the first DaemonSet converged")
    log_length = store.r.xlen(store.keys.log)
    uids = sorted(p["metadata"]["uid"] for p in daemon_pods(store, f"{ns}/before"))
    restarts = _restart_counts(c)

    c.compose("restart", "redis")
    c.redis_moved()

    def reachable() -> bool:
        try:
            return bool(c.store().r.ping())
        except Exception:  # restarting, or the AOF still loading
            return False

    wait_for(reachable, timeout=60, interval=0.2, what="Redis back")
    store = c.store()
    assert store.r.xlen(store.keys.log) >= log_length, "log entries lost in the restart"
    assert sorted(p["metadata"]["uid"] for p in daemon_pods(store, f"{ns}/before")) == uids
    assert len(store.list("Node")) >= NODES

    # Every service carries on: the watcher, workers, node agent and status-writer converge
    # a new DaemonSet; the gc cascades a delete.
    c.apply(daemonset(ns, "after", image="after:v1"))
    wait_for(lambda: converged(store, f"{ns}/after", "after:v1"), timeout=90, interval=0.2,
             what="a DaemonSet applied after the restart converged")
    c.cli("delete", "ds", "before", "-n", ns)
    wait_for(lambda: not [p for p in store.list("Pod", ns)
                          if p["metadata"]["name"].startswith("before-")],
             timeout=60, interval=0.2, what="the gc removing the deleted DaemonSet's pods")
    assert _restart_counts(c) == restarts, "a service's process died and was restarted"


def test_reconciler_cut_off_from_network_carries_on_after_heal(full_cluster: Cluster) -> None:
    c = full_cluster
    ns, name = "cluster-net", "partition"
    key = f"{ns}/{name}"
    cut = c.containers("reconciler")[0]
    c.docker("network", "disconnect", c.network(), cut)
    try:
        rc, probe = _health(c, cut)
        assert rc != 0 and "unhealthy" in probe, f"a cut-off worker reports: {probe!r}"

        c.apply(daemonset(ns, name, image="net:v1", updateStrategy={
            "type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}}))
        wait_for(lambda: converged(c.store(), key, "net:v1"), timeout=60, interval=0.2,
                 what="converged with one worker cut off")
        c.cli("set", "image", f"ds/{name}", "main=net:v2", "-n", ns)
        wait_for(lambda: converged(c.store(), key, "net:v2"), timeout=90, interval=0.2,
                 what="rolled out with one worker cut off")
    finally:
        c.docker("network", "connect", c.network(), cut, check=False)

    wait_for(lambda: _health(c, cut)[0] == 0, timeout=30, interval=0.5,
             what="the healed worker reaching Redis")
    jobs = rq_jobs_done(c.store(), f"reconciler-{cut[:12]}-")
    try:
        # within seconds; a worker whose loop hung restarts itself (STALL_SECONDS) first
        _nudge_until(c, ns, name,
                     lambda: rq_jobs_done(c.store(), f"reconciler-{cut[:12]}-") > jobs,
                     what="the healed worker syncing again", timeout=STALL_SECONDS + 30)
    except AssertionError as err:
        raise AssertionError(f"{err}\nthe healed worker's threads:\n{c.stacks(cut)}") from err
    wait_for(lambda: converged(c.store(), key, "net:v2"), timeout=60, interval=0.2,
             what="still converged")
    assert_no_duplicate_creates(c.store(), key)
    assert len(c.containers("reconciler")) == RECONCILERS
