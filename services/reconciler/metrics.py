"""Prometheus metrics of the shared workqueue, under client-go's names (label name=daemonset),
so existing workqueue dashboards read them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import REGISTRY, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from shared.control.protocols import WorkQueue

QUEUE_NAME = "daemonset"
BUCKETS = (1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 0.01, 0.1, 1, 10, 100, 1000)

QUEUE_DURATION = Histogram("workqueue_queue_duration_seconds",
                           "How long in seconds an item stays in workqueue before being requested.",
                           ["name"], buckets=BUCKETS)
WORK_DURATION = Histogram("workqueue_work_duration_seconds",
                          "How long in seconds processing an item from workqueue takes.",
                          ["name"], buckets=BUCKETS)


class QueueCollector:
    """Reads the queue's counters from Redis at scrape time (one round trip)."""

    def __init__(self, queue: WorkQueue) -> None:
        self.queue = queue

    def collect(self) -> Iterator[Any]:
        try:
            s = self.queue.stats()
        except Exception:
            return
        depth = GaugeMetricFamily("workqueue_depth", "Current depth of workqueue", labels=["name"])
        depth.add_metric([QUEUE_NAME], s.depth)
        yield depth
        adds = CounterMetricFamily("workqueue_adds", "Total number of adds handled by workqueue",
                                   labels=["name"])
        adds.add_metric([QUEUE_NAME], s.adds_total)
        yield adds
        retries = CounterMetricFamily("workqueue_retries",
                                      "Total number of retries handled by workqueue",
                                      labels=["name"])
        retries.add_metric([QUEUE_NAME], s.retries_total)
        yield retries
        unfinished = GaugeMetricFamily(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has done that is in progress and hasn't been observed "
            "by work_duration.", labels=["name"])
        unfinished.add_metric([QUEUE_NAME], s.unfinished_work_seconds)
        yield unfinished
        longest = GaugeMetricFamily(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            labels=["name"])
        longest.add_metric([QUEUE_NAME], s.longest_running_seconds)
        yield longest


_registered = False


def start_queue_metrics(queue: WorkQueue) -> None:
    global _registered
    if not _registered:
        REGISTRY.register(QueueCollector(queue))  # type: ignore[arg-type]
        _registered = True
