"""The status-writer end to end (spec §f) and every process's Prometheus metrics.

Status: every counter and observedGeneration exactly as updateDaemonSetStatus computes them,
written only when something changed, shown by `daemonbus get ds`. Metrics: each process
serves them on --metrics-port; the reconciler has client-go's workqueue metrics and its sync
metrics; the status-writer keeps kube-state-metrics' ``kube_daemonset_status_*`` gauges for
every DaemonSet it hears about, written or not.

One stack (processes with metrics ports) serves the module; each test has its own namespace
and node pool.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner
from prometheus_client import REGISTRY

from services.cli import context
from services.cli.main import cli
from services.node_agent.lifecycle import new_node
from services.status_writer.writer import StatusWriter
from shared.store.server import RedisServer
from shared.store.workqueue import RedisWorkQueue
from tests.integration import controller_kit as kit
from tests.integration.stack import Stack, wait_for

Obj = dict[str, Any]

# numberAvailable is 0, and omitempty in apps/v1 DaemonSetStatus: the stored status leaves it out
EXPECTED = {"desiredNumberScheduled": 2, "currentNumberScheduled": 2, "numberMisscheduled": 1,
            "numberReady": 2, "updatedNumberScheduled": 2,
            "numberUnavailable": 2, "observedGeneration": 1}
GAUGES = {"desiredNumberScheduled": "desired_number_scheduled",
          "currentNumberScheduled": "current_number_scheduled",
          "numberMisscheduled": "number_misscheduled", "numberReady": "number_ready",
          "updatedNumberScheduled": "updated_number_scheduled",
          "numberAvailable": "number_available", "numberUnavailable": "number_unavailable",
          "observedGeneration": "observed_generation"}
EXPECTED_GAUGES = {f: float(EXPECTED.get(f, 0)) for f in GAUGES}  # every gauge, 0 included


@pytest.fixture(scope="module")
def stack(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    s = Stack(redis_server.url, "status", tmp_path_factory.mktemp("status-stack"))
    s.store.r.delete(*s.store.r.keys("{status}:*") or ["{status}:none"])
    yield s
    s.stop()


@pytest.fixture(scope="module")
def ports(stack: Stack) -> dict[str, int]:
    return kit.start_with_metrics(stack)


def _setup(stack: Stack, pool: str) -> str:
    """3 nodes with a Ready pod each, then the third tainted NoSchedule (its pod stays,
    misscheduled); minReadySeconds 3600 keeps every pod unavailable. Returns the key."""
    nodes = [f"{pool}-{i}" for i in (1, 2, 3)]
    for n in nodes:
        stack.store.create(new_node(n, labels={"pool": pool}))
    stack.store.apply(kit.daemonset("exporter", pool, node_selector={"pool": pool},
                                    minReadySeconds=3600))
    key = f"{pool}/exporter"
    wait_for(lambda: kit.status(stack.store, key).get("numberReady") == 3, what="3 ready")

    def taint(node: Obj) -> None:
        node["spec"]["taints"] = [{"key": "dedicated", "effect": "NoSchedule"}]

    kit.mutate_node(stack.store, nodes[2], taint)
    wait_for(lambda: kit.status(stack.store, key) == EXPECTED, what=f"status {EXPECTED}")
    return key


def _status_writes(stack: Stack, key: str) -> int:
    return sum(1 for e in kit.log_entries(stack.store, "DaemonSet")
               if e.key == key and e.type == "MODIFIED")


def _more_done(queue: RedisWorkQueue, done: int) -> bool:
    return queue.stats().done_total > done


def _noop_syncs(stack: Stack, key: str, count: int) -> None:
    """``count`` syncs of ``key`` that find nothing to change, each waited for, then the
    status stream drained."""
    queue = RedisWorkQueue(stack.store.r, stack.store.keys)
    for _ in range(count):
        done = queue.stats().done_total
        queue.add([key])
        wait_for(functools.partial(_more_done, queue, done), what="one more sync")
    wait_for(lambda: stack.store.r.xlen(stack.store.keys.status_stream) == 0,
             what="the status-writer consumed every message")


# ---- status ----------------------------------------------------------------------------------


def test_status_counters_and_observed_generation_per_spec(stack: Stack,
                                                          ports: dict[str, int]) -> None:
    key = _setup(stack, "counters")

    def no_min_ready(ds: Obj) -> Obj:
        ds["spec"]["minReadySeconds"] = 0
        return ds

    stack.store.mutate("DaemonSet", key, no_min_ready)
    after = {**EXPECTED, "numberAvailable": 2, "observedGeneration": 2}
    del after["numberUnavailable"]  # 0: omitempty
    wait_for(lambda: kit.status(stack.store, key) == after, what=f"status {after}")


def test_status_is_written_only_when_it_changes(stack: Stack, ports: dict[str, int]) -> None:
    key = _setup(stack, "nowrite")
    writes = _status_writes(stack, key)
    _noop_syncs(stack, key, 5)
    assert _status_writes(stack, key) == writes


def test_get_ds_prints_the_status_columns(stack: Stack, ports: dict[str, int]) -> None:
    _setup(stack, "getds")
    res = CliRunner().invoke(cli, ["--redis-url", stack.redis_url, "--prefix", stack.prefix,
                                   "get", "ds", "-n", "getds"], obj=context.CliEnv(),
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    header, row = res.output.splitlines()[:2]
    assert header.split() == ["NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE",
                              "NODE", "SELECTOR", "AGE"]
    assert row.split()[:7] == ["exporter", "2", "2", "2", "2", "0", "pool=getds"]


# ---- metrics ---------------------------------------------------------------------------------

PER_PROCESS = {"watcher": "daemonbus_watcher_events_total",
               "reconciler-0": "daemonbus_reconcile_total",
               "status-writer": "kube_daemonset_status_desired_number_scheduled",
               "gc": "daemonbus_gc_deleted_total",
               "node-agent": "process_cpu_seconds_total"}


def test_each_process_serves_prometheus_metrics(stack: Stack, ports: dict[str, int]) -> None:
    for name, metric in PER_PROCESS.items():
        page = wait_for(functools.partial(_try_scrape, ports[name]), what=f"{name} metrics")
        assert f"# TYPE {metric.removesuffix('_total')}" in page, name


def _try_scrape(port: int) -> str | None:
    try:
        return kit.scrape(port)
    except OSError:
        return None


def test_reconciler_exports_workqueue_and_sync_metrics(stack: Stack,
                                                        ports: dict[str, int]) -> None:
    _setup(stack, "qmetrics")  # minReadySeconds > 0: every sync re-adds the key later
    page = wait_for(lambda: _try_scrape(ports["reconciler-0"]), what="reconciler metrics")
    q = {"name": "daemonset"}
    assert kit.metric_value(page, "workqueue_depth", **q) is not None
    for counter in ("workqueue_adds_total", "workqueue_retries_total",
                    "workqueue_queue_duration_seconds_count",
                    "workqueue_work_duration_seconds_count"):
        assert (kit.metric_value(page, counter, **q) or 0) >= 1, counter
    assert kit.metric_value(page, "workqueue_queue_duration_seconds_bucket",
                            le="+Inf", **q) is not None
    assert (kit.metric_value(page, "daemonbus_reconcile_total", result="success") or 0) >= 1
    assert (kit.metric_value(page, "daemonbus_reconcile_duration_seconds_count") or 0) >= 1


def test_a_started_status_writer_exports_gauges_of_every_daemonset(
        stack: Stack, ports: dict[str, int]) -> None:
    _setup(stack, "gauges")
    stack.kill("status-writer")
    ports["status-writer"] = kit.free_port()
    stack.start("status-writer", "status-writer", "--metrics-port", str(ports["status-writer"]))
    labels = {"namespace": "gauges", "daemonset": "exporter"}

    def gauges() -> dict[str, float | None]:
        page = _try_scrape(ports["status-writer"]) or ""
        return {f: kit.metric_value(page, f"kube_daemonset_status_{m}", **labels)
                for f, m in GAUGES.items()}

    want = EXPECTED_GAUGES
    wait_for(lambda: gauges() == want, what=f"gauges {want} before any sync")


def test_status_writer_sets_gauges_when_no_write_is_needed(stack: Stack,
                                                            ports: dict[str, int]) -> None:
    key = _setup(stack, "nowritegauges")
    ds = stack.store.get("DaemonSet", key)
    writer = StatusWriter(stack.store, "in-process")  # its gauges are this process's
    message = {"key": key, "uid": ds["metadata"]["uid"], "generation": 1, "observe": True,
               "position": stack.store.log_tip(),
               "status": {k: v for k, v in EXPECTED.items() if k != "observedGeneration"}}
    assert writer.write(key, message) is False, "nothing needed writing"
    labels = {"namespace": "nowritegauges", "daemonset": "exporter"}
    got = {f: REGISTRY.get_sample_value(f"kube_daemonset_status_{m}", labels)
           for f, m in GAUGES.items()}
    assert got == EXPECTED_GAUGES
