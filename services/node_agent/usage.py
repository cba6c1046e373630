"""The node agent's resource sampler (acts: measures the host and its runtime's containers):
every ``resolution`` seconds, on a thread of its own, the node's CPU time and memory in use
(``host.usage``) and each running container's (``Runtime.usage``), turned into the usage of
the window since the previous sample (``shared.api.metrics.Rates``). The agent's endpoint
serves the last window's (``document``), as kubelet's resource metrics that metrics-server
scrapes: nothing until two samples have been taken.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any

from services.node_agent import host
from services.node_agent.podstatus import ContainerState
from services.node_agent.runtime import Runtime
from shared.api import metrics

log = logging.getLogger("node-agent")
Obj = dict[str, Any]
NODE: Hashable = ("node",)
# the running containers to measure, with their pods' metadata (namespace, name, uid)
Running = Callable[[], list[tuple[Obj, list[ContainerState]]]]


class Sampler:
    def __init__(self, runtime: Runtime, running: Running, resolution: float,
                 clock: Callable[[], float] = time.time,
                 measure_node: Callable[[], metrics.Sample] = host.usage) -> None:
        self.runtime = runtime
        self.running = running
        self.resolution = resolution
        self.clock = clock
        self.measure_node = measure_node
        self.rates = metrics.Rates()
        self._lock = threading.Lock()
        self._last: bytes | None = None

    def document(self) -> bytes | None:
        """The last window's usage document (None before the second sample)."""
        with self._lock:
            return self._last

    def sample(self) -> None:
        """Measure once; the window since the previous sample becomes the one served."""
        pods = self.running()
        containers = [c for _, cs in pods for c in cs]
        try:
            by_id = self.runtime.usage(containers)
        except OSError as err:
            log.warning("cannot measure the containers: %s", err)
            by_id = {}
        samples: dict[Hashable, metrics.Sample] = {NODE: self.measure_node()}
        for md, cs in pods:
            for c in cs:
                if c.container_id in by_id:
                    samples[(md.get("uid"), c.name, c.container_id)] = by_id[c.container_id]
        now = self.clock()
        window, usage = self.rates.observe(now, samples)
        if window <= 0:
            return
        measured = []
        for md, cs in pods:
            found = tuple((c.name, usage[k]) for c in cs
                          if (k := (md.get("uid"), c.name, c.container_id)) in usage)
            if found:
                measured.append(metrics.PodUsage(str(md.get("namespace")), str(md.get("name")),
                                                 str(md.get("uid")), found))
        doc = metrics.document(metrics.NodeUsage(now, window, usage.get(NODE), tuple(measured)))
        with self._lock:
            self._last = doc

    def run(self, stop: threading.Event) -> None:
        """Sample every ``resolution`` seconds until ``stop`` is set."""
        while True:
            try:
                self.sample()
            except Exception:  # (a sampler that died would serve a stale window forever)
                log.exception("sampling the node's usage failed")
                with self._lock:
                    self._last = None
            if stop.wait(self.resolution):
                return

    def start(self, stop: threading.Event) -> None:
        threading.Thread(target=self.run, args=(stop,), name="usage-sampler",
                         daemon=True).start()
