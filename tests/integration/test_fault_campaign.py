"""The fault campaign, bounded for CI: rolling updates while random processes of every role
are SIGKILLed and Redis is SIGKILLed and restarted, with the invariants checked throughout.

A fixed seed chooses the victims and the pauses, so a failure replays the same campaign. Redis
runs as `daemonbus up` and the compose cluster run it (append-only file, ``appendfsync
always``); dead processes are started again as a supervisor would (with a fresh RQ name for a
worker). Checked:

- never two live pods of one revision of a DaemonSet on one node — on every state the
  monitor lists (atomic snapshots, several a second) and over the whole log at the end;
- never more nodes unavailable than ``maxUnavailable`` allows once the first revision ran
  everywhere (a node counts as available while it has a Ready pod not being deleted);
- convergence within 30 s of the last fault: every node runs one Ready pod of the newest
  template, the status says so, and the workqueue is drained (no key stuck);
- nothing lost: every write the campaign had acknowledged is still in the log, the log's
  tip never went back over a Redis restart, and no process saw the log go backwards.

The campaign's figures are printed at the end.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis

from shared.model import meta, podutil
from shared.store import codec, errors
from shared.store.client import Store, connect
from shared.store.keys import Keys
from tests.integration import controller_kit as kit
from tests.integration import faultkit
from tests.integration.stack import Stack, wait_for

SEED = 20261201
NODES = 30
ROUNDS = 3
KILLS_PER_ROUND = 6
CONVERGE_SECONDS = 30.0
# name → (manifest updateStrategy, the unavailable nodes it allows)
DAEMONSETS: dict[str, tuple[dict[str, Any], int]] = {
    "unavail": ({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "20%"}}, 6),
    "surge": ({"type": "RollingUpdate",
               "rollingUpdate": {"maxSurge": "20%", "maxUnavailable": 0}}, 0),
}
PROCESSES: dict[str, tuple[str, ...]] = {
    "watcher-1": ("watcher",), "watcher-2": ("watcher",),
    "reconciler-1": ("reconciler",), "reconciler-2": ("reconciler",),
    "status-writer": ("status-writer",), "gc": ("gc",),
    "node-agent": ("node-agent", "--nodes", str(NODES), "--ready-delay", "0.2"),
}


def _image(n: int) -> str:
    return f"registry.k8s.io/pause:3.{n}"


@pytest.fixture
def cluster(tmp_path: Path, prefix: str) -> Iterator[tuple[faultkit.AofRedis, Stack]]:
    with faultkit.aof_stack(tmp_path, prefix, appendfsync="always") as both:
        yield both


@pytest.fixture
def stack(cluster: tuple[faultkit.AofRedis, Stack]) -> Stack:
    return cluster[1]  # named so: a failed test prints the processes' logs


@dataclass
class Monitor:
    """Lists every pod and DaemonSet in one atomic snapshot, over and over, and checks the
    invariants on each state (in a thread of its own, on a connection of its own)."""

    url: str
    prefix: str
    checks: int = 0
    violations: list[str] = field(default_factory=list)
    max_unavailable: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    armed: set[str] = field(default_factory=set)  # DaemonSets whose first revision ran
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        store = Store(connect(self.url), Keys(self.prefix))
        while not self.stop.wait(0.1):
            try:
                _tip, objs = store.snapshot(["DaemonSet", "Pod"])
            except (errors.StoreError, redis.RedisError):
                continue  # Redis is being restarted
            self.check(objs["DaemonSet"], objs["Pod"])

    def check(self, dss: list[dict[str, Any]], pods: list[dict[str, Any]]) -> None:
        self.checks += 1
        for ds in dss:
            name = meta.name(ds)
            by_node = faultkit.live_pods_by_node(pods, meta.uid(ds))
            for node, live in by_node.items():
                per_rev = Counter(kit.revision_of(p) for p in live)
                for rev, n in per_rev.items():
                    if n > 1:
                        self.violations.append(f"{name}: {n} live pods of {rev} on {node}")
            ready = sum(1 for live in by_node.values()
                        if any(podutil.is_ready(p) for p in live))
            unavailable = NODES - ready
            if name not in self.armed:
                if unavailable == 0:
                    self.armed.add(name)
                continue
            self.max_unavailable[name] = max(self.max_unavailable[name], unavailable)
            if unavailable > DAEMONSETS[name][1]:
                self.violations.append(f"{name}: {unavailable} nodes unavailable")


def test_fault_campaign_random_kills_of_every_role_and_redis_during_rollouts(
        stack: Stack, cluster: tuple[faultkit.AofRedis, Stack]) -> None:
    aof = cluster[0]
    rng = random.Random(SEED)
    sup = faultkit.Supervisor(stack, PROCESSES)
    sup.start_all()
    nodes = [f"node-{i:05d}" for i in range(1, NODES + 1)]
    wait_for(lambda: len(stack.store.list("Node")) == NODES, what="nodes registered")
    manifests = {}
    acked: list[str] = []  # resourceVersions of the campaign's acknowledged writes
    for name, (strategy, _allowed) in DAEMONSETS.items():
        manifests[name] = kit.daemonset(name, image=_image(0), updateStrategy=strategy)
        _verb, obj = stack.store.apply(manifests[name])
        acked.append(meta.resource_version(obj))
    for name in DAEMONSETS:
        wait_for(lambda n=name: faultkit.rolled_out(stack, f"default/{n}", nodes, _image(0)),
                 timeout=60, what=f"{name} rolled out")

    monitor = Monitor(aof.url, stack.prefix)
    watching = threading.Thread(target=monitor.run, daemon=True)
    watching.start()
    kills: Counter[str] = Counter()
    redis_restarts = 0
    tips: list[tuple[str, str]] = []  # the log tip before each Redis kill, and after
    convergence: list[float] = []
    started = time.monotonic()
    try:
        for round_ in range(1, ROUNDS + 1):
            for name in DAEMONSETS:
                manifests[name]["spec"]["template"]["spec"]["containers"][0]["image"] = \
                    _image(round_)
                _verb, obj = stack.store.apply(manifests[name])
                acked.append(meta.resource_version(obj))
            redis_at = rng.randrange(KILLS_PER_ROUND)
            for k in range(KILLS_PER_ROUND):
                pause = time.monotonic() + rng.uniform(0.2, 1.2)
                while time.monotonic() < pause:
                    sup.revive()
                    time.sleep(0.05)
                if k == redis_at:
                    before = stack.store.log_tip()
                    aof.kill()
                    aof.restart()
                    redis_restarts += 1
                    stack.store = Store(connect(aof.url), Keys(stack.prefix))
                    tips.append((before, stack.store.log_tip()))
                    continue
                victim = rng.choice(sorted(PROCESSES))
                if victim in stack.procs and stack.procs[victim].poll() is None:
                    stack.kill(victim)
                    kills[victim.rsplit("-", 1)[0] if victim[-1].isdigit() else victim] += 1
            last_fault = time.monotonic()
            while time.monotonic() - last_fault < CONVERGE_SECONDS + 30:
                sup.revive()
                if all(faultkit.rolled_out(stack, f"default/{n}", nodes, _image(round_))
                       for n in DAEMONSETS) and kit.queue_idle(stack.store):
                    break
                time.sleep(0.1)
            convergence.append(time.monotonic() - last_fault)
    finally:
        monitor.stop.set()
        watching.join(10)
    elapsed = time.monotonic() - started

    logs = {f.stem: f.read_text() for f in stack.log_dir.glob("*.log")}
    rewound = sorted(n for n, text in logs.items() if "the log went backwards" in text)
    lost = [rv for rv in acked if not stack.store.r.xrange(stack.store.keys.log, rv, rv)]
    over_the_log = kit.live_together(kit.log_entries(stack.store, "Pod"), per_revision=True)
    print(f"\nfault campaign (seed {SEED}): {ROUNDS} rollouts of {len(DAEMONSETS)} "
          f"DaemonSets on {NODES} nodes in {elapsed:.1f}s; SIGKILLs {dict(sorted(kills.items()))}"
          f", Redis SIGKILLed and restarted {redis_restarts}x; processes restarted "
          f"{sum(sup.restarts.values())}x ({dict(sorted(sup.restarts.items()))}); "
          f"{monitor.checks} states checked, violations {len(monitor.violations)}; most "
          f"unavailable {dict(monitor.max_unavailable)} (allowed "
          f"{ {n: a for n, (_s, a) in DAEMONSETS.items()} }); converged "
          f"{', '.join(f'{s:.1f}s' for s in convergence)} after each round's last fault; "
          f"acknowledged writes lost {len(lost)} of {len(acked)}")
    assert monitor.checks > 50
    assert monitor.violations == [], monitor.violations[:10]
    assert over_the_log == [], over_the_log[:10]
    assert set(monitor.armed) == set(DAEMONSETS)
    assert all(s <= CONVERGE_SECONDS for s in convergence), convergence
    assert lost == []
    assert all(codec.id_ge(after, before) for before, after in tips), tips
    assert rewound == [], f"a process saw the log go backwards: {rewound}"
    assert redis_restarts == ROUNDS and sum(kills.values()) >= ROUNDS * 3
