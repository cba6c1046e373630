"""The node agent of one real machine (``--runtime process`` or ``docker``): registers this
host as one Node, heartbeats it, and runs the pods bound to it through kubelet's lifecycle:
init containers in order, each to completion, then the containers; images pulled as their
imagePullPolicy says, with kubelet's pull back-off; restartPolicy with crash-loop back-off;
startup, readiness and liveness probes; on deletion SIGTERM, the grace period, SIGKILL,
then the pod is released. One lifecycle for both runtimes: what runs a container is the
``runtime.Runtime`` it is given (``procs``: a child process; ``dockerrt``: a Docker
container). Decisions about statuses and restarts are ``podstatus``'s; this module is the
shell that acts on them.

It wakes on log entries and at least every ``TICK`` seconds (probes, back-offs and exits are
checked then), and writes a pod's status only when it changed.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services import common
from services.node_agent import (
    atomicwriter,
    configvolumes,
    dns,
    host,
    hostpath,
    lifecycle,
    logserver,
    podstatus,
    probes,
    runtime,
    usage,
)
from services.node_agent.podstatus import ContainerState
from services.node_agent.runtime import Exit, ImageError, Runtime
from shared.api import metrics, podexec
from shared.eventlog.entry import CommitResult
from shared.model import events, meta, podutil
from shared.store import adapters, errors, nodelease, noderequests, nodeserver
from shared.store.cache import Cache
from shared.store.client import Op, Result, Store
from shared.store.recorder import Recorder

log = logging.getLogger("node-agent")
Obj = dict[str, Any]
TICK = 0.2
PROBE_THREADS = 8
DEFAULT_GRACE = 30.0
REGISTER_RETRY = 2.0  # seconds between tries to register a Node that is not there
# kubelet's image pull back-off: 10 s doubling to 5 min
PULL_BACKOFF_INITIAL = 10.0
PULL_BACKOFF_MAX = 300.0
PRESSURE_EVERY = 10.0  # seconds: kubelet's --node-status-update-frequency
MOUNT_BACKOFF_INITIAL = 0.5  # seconds: the volume manager's first back-off, doubling
MOUNT_BACKOFF_MAX = 122.0  # to at most 2 min 2 s
CONFIG_RETRY = 10.0  # seconds: kubelet's pod worker's back-off after a failed sync

PROBE_NAMES = {"startupProbe": "Startup", "readinessProbe": "Readiness",
               "livenessProbe": "Liveness"}  # as kubelet's Unhealthy events name them


@dataclass(frozen=True)
class ProcessConfig:
    node_name: str
    node_ip: str
    state_dir: Path
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Obj, ...] = ()
    heartbeat: float = 300.0
    lease_duration: float = nodelease.DURATION_SECONDS
    log_port: int | None = logserver.DEFAULT_PORT  # None: serve no logs
    backoff_initial: float = podstatus.BACKOFF_INITIAL
    metrics_resolution: float = metrics.DEFAULT_RESOLUTION  # seconds between usage samples


@dataclass
class PodRun:
    """A pod this agent runs (or stops): its newest object, its containers' states."""

    uid: str
    pod: Obj
    pod_dir: Path
    inits: list[ContainerState]
    mains: list[ContainerState]
    trackers: dict[tuple[str, str], probes.ProbeTracker] = field(default_factory=dict)
    gone: bool = False  # the pod object is gone: stop everything, then forget
    backoff_told: dict[str, float] = field(default_factory=dict)  # container → restart_at
    # container → when its configuration error was last told (``_maybe_start``)
    config_told: dict[str, float] = field(default_factory=dict)
    # container → when to check again a configuration its image refused (the image is
    # looked at, and its Pulled Event told, once per CONFIG_RETRY, as kubelet's back-off)
    config_retry_at: dict[str, float] = field(default_factory=dict)
    # configMap, secret and downwardAPI volumes (a runtime that mounts them): what each was
    # last made from (its source and the object the cache held, or the pod's labels and
    # annotations), and why one could not be made (``ProcessAgent._config_volumes``)
    volumes_from: dict[str, tuple[Obj, object]] = field(default_factory=dict)
    volume_errors: dict[str, str] = field(default_factory=dict)
    # the pod's volumes were all set up once (``ProcessAgent._mounted``); until then, when
    # to try again and the back-off after that
    mounted: bool = False
    mount_retry_at: float = 0.0
    mount_backoff: float = 0.0
    dns_told: bool = False  # its DNS's fallback told, if it falls back (``_sandboxed``)
    # its ephemeral containers (``kubectl debug``), as the pod's spec adds them
    ephemerals: list[ContainerState] = field(default_factory=list)

    def containers(self) -> list[ContainerState]:
        return self.inits + self.mains + self.ephemerals


class ProcessAgent:
    def __init__(self, store: Store, cfg: ProcessConfig, runtime: Runtime,
                 clock: Callable[[], float] = time.time,
                 sender: noderequests.Sender | None = None) -> None:
        """``sender``: send every write as a request to node-admission (credentials that may
        not write the store, as compose's node-agent user)."""
        self.store = store
        self.sender = sender
        self._register_at = 0.0
        self.cfg = cfg
        self.clock = clock
        self.runtime = runtime
        self.recorder = Recorder(store)  # (its Events go with each round's commit)
        self._pressure: dict[str, bool] = {}  # the node's pressure conditions, last seen
        self._pressure_at = 0.0
        self._started_told = self._conditions_told = False  # (``_node_events``)
        self._event_ns = 0  # the time (ns) in the last Event's name: each one's is later
        # ConfigMaps and Secrets: its pods' env, envFrom and volumes (every one of them:
        # docs/security.md)
        self.cache = Cache(store, ["Node", "Pod", "ConfigMap", "Secret"], name="node-agent",
                           decisions=False, indexes={
            "node": ("Pod", lambda p: [podutil.target_node(p) or ""]),
        })
        self.runs: dict[str, PodRun] = {}
        self._recorded: dict[str, dict[str, ContainerState]] = {}
        self._written: dict[str, tuple[str, Obj]] = {}  # uid → (rv written over, status)
        self._node_cfg = lifecycle.AgentConfig(heartbeat=cfg.heartbeat)
        self.leases = adapters.on(store, nodelease.NodeLeases)
        self._renew_at = 0.0
        self.logs: logserver.LogServer | None = None
        self.outage = common.Outage(log)
        self.prober = ThreadPoolExecutor(max_workers=PROBE_THREADS, thread_name_prefix="probe")
        self.sampler = usage.Sampler(runtime, self.running_containers, cfg.metrics_resolution,
                                     clock)

    # ---- setup ------------------------------------------------------------------------------

    def register(self) -> None:
        """Create this machine's Node if absent; else report the host's status fields on it
        (labels and taints are the registration's, as kubelet's --register-with-taints)."""
        self._register_at = self.clock() + REGISTER_RETRY
        port = self.logs.port if self.logs is not None else 0
        if self.logs is not None:
            adapters.on(self.store, nodeserver.publish, self.cfg.node_name,
                        self.logs.credentials)
        old = self.store.try_get("Node", "/" + self.cfg.node_name)
        if old is None:
            node = host.new_node(self.cfg.node_name, self.cfg.node_ip, self.cfg.labels,
                                 list(self.cfg.taints), self.runtime.version(), port)
            res = self._commit([self.store.create_op(node, ensure=True)])[0]
            if res.ok or res.status == CommitResult.QUEUED:
                log.info("registered node %s%s", self.cfg.node_name,
                         " (requested from node-admission)" if self.sender else "")
            return
        new = {**old, "status": {**(old.get("status") or {}),
                                 **host.host_status(self.cfg.node_ip,
                                                    self.runtime.version(), port)}}
        if new["status"] != old.get("status"):
            self._commit([self.store.status_op(new, old)])
        log.info("node %s exists; its status updated from this host", self.cfg.node_name)

    def _commit(self, ops: list[Op]) -> list[Result]:
        """Acts: commit ``ops``, or send them to node-admission (all are for this node)."""
        if self.sender is None:
            return self.store.commit(ops)
        return self.sender.commit(ops, [self.cfg.node_name])

    def adopt(self) -> None:
        """Read what a previous run of this agent left: containers whose recorded process
        still runs are adopted, those whose process is gone are recorded as ended."""
        now = self.clock()
        self.runtime.refresh()
        self._recorded = self.runtime.recorded()
        dirs = self.runtime.pod_dirs()
        for uid, states in self._recorded.items():
            for c in states.values():
                if c.starting:
                    self.runtime.find_started(dirs[uid], c)
                    c.starting = False
                if c.running() and not self.runtime.is_ours(c):
                    c.pid, c.container_id = 0, ""
                    c.terminated = podstatus.terminated_state(
                        137, 0, c.started_at, now, "", reason="ContainerStatusUnknown",
                        message="the process ended while the node agent was away")
                elif c.running():
                    log.info("adopted pod %s container %s (%s)", uid, c.name, c.container_id)

    # ---- the loop ---------------------------------------------------------------------------

    def serve_logs(self) -> None:
        """Acts: start the log endpoint on the node's IP (a port in use: no endpoint)."""
        if self.cfg.log_port is None:
            return
        try:
            self.logs = logserver.LogServer(self.runtime, self.cfg.state_dir,
                                            self.cfg.node_ip, self.cfg.log_port,
                                            self.exec_target, self.forward_host,
                                            self.sampler.document)
        except OSError as err:
            log.warning("no log endpoint (port %d on %s): %s", self.cfg.log_port,
                        self.cfg.node_ip, err)
            return
        self.logs.start()

    def exec_target(self, uid: str, name: str) -> tuple[ContainerState, dict[str, str], str]:
        """What a command run in container ``name`` of pod ``uid`` runs in (called on the log
        endpoint's threads: reads what the loop keeps, changes nothing)."""
        run = self.runs.get(uid)
        c = next((c for c in run.containers() if c.name == name), None) \
            if run is not None and not run.gone else None
        if run is None or c is None or not c.running():
            raise podexec.ExecError(f'container not found ("{name}")')
        cspec = podstatus.container_spec(run.pod, name)
        return c, self._env(run.pod, cspec), str(cspec.get("workingDir") or "")

    def running_containers(self) -> list[tuple[Obj, list[ContainerState]]]:
        """The pods this agent runs, their metadata with their running containers (called on
        the sampler's thread: reads what the loop keeps, changes nothing)."""
        return [(run.pod.get("metadata") or {}, [c for c in run.containers() if c.running()])
                for run in list(self.runs.values()) if not run.gone]

    def forward_host(self, uid: str) -> str | None:
        """Where a port of pod ``uid`` is reached from here (``Runtime.forward_host``): None
        when the pod does not run here, "" while nothing of it runs (called on the log
        endpoint's threads: reads what the loop keeps, changes nothing)."""
        run = self.runs.get(uid)
        if run is None or run.gone:
            return None
        return self.runtime.forward_host(run.pod, run.containers())

    def sources(self, pod: Obj) -> podstatus.Sources:
        """The ConfigMaps and Secrets of ``pod``'s namespace by kind and name, as this
        agent's cache has them."""
        ns = meta.namespace(pod)
        return lambda kind, name: self.cache.get(kind, f"{ns}/{name}")

    def _allocatable(self) -> Obj:
        """This node's allocatable resources, as its Node says (the limits a container's
        resourceFieldRef reads when it sets none)."""
        node = self.cache.get("Node", "/" + self.cfg.node_name) or {}
        return dict((node.get("status") or {}).get("allocatable") or {})

    def _env(self, pod: Obj, cspec: Obj) -> dict[str, str]:
        """The environment a command run beside ``cspec``'s process gets (an exec probe's,
        a caller's): the container's, else (its env cannot be made) the runtime's base."""
        try:
            return podstatus.container_env(pod, cspec, self.runtime.base_env(),
                                           self.sources(pod), allocatable=self._allocatable())
        except podstatus.ConfigError:
            return self.runtime.base_env()

    def run(self, stop: threading.Event) -> None:
        self.adopt()
        self.serve_logs()
        if self.logs is not None:
            self.sampler.start(stop)
        while not stop.is_set():
            try:
                self.register()
                self.cache.sync()
                break
            except common.REDIS_DOWN as err:
                stop.wait(self.outage.failed(err))
        while not stop.is_set():
            self.step()
        self.prober.shutdown(wait=False, cancel_futures=True)
        if self.logs is not None:
            self.logs.close()
        log.info("node agent stopping; its containers keep running (a new agent adopts them)")

    def step(self, block: float = TICK) -> None:
        try:
            self.cache.poll(count=5000, block_ms=max(1, int(block * 1000)))
        except common.REDIS_DOWN as err:
            time.sleep(self.outage.failed(err))
            return
        self.outage.ok()
        now = self.clock()
        ops: list[Op] = []
        try:
            changed = self.runtime.refresh()
        except OSError as err:
            log.warning("the container runtime does not answer: %s", err)
            return
        for uid in changed:
            run = self.runs.get(uid)
            if run is not None:
                self._event(run, "Normal", "SandboxChanged",
                            "Pod sandbox changed, it will be killed and re-created.", None, now)
        node = self.cache.get("Node", "/" + self.cfg.node_name)
        if node is None:
            if now >= self._register_at:  # (a request to node-admission takes a moment)
                self._safe(self.register)
        else:
            if now >= self._renew_at:
                self._safe(lambda: self.leases.renew([self.cfg.node_name], now,
                                                     self.cfg.lease_duration))
                self._renew_at = now + nodelease.renew_interval(self.cfg.lease_duration)
            if now >= self._pressure_at:  # (kubelet's node status update frequency)
                self._pressure = host.pressure(self.cfg.state_dir)
                self._pressure_at = now + PRESSURE_EVERY
            beat = lifecycle.node_step(self._node_cfg, node, now, self._pressure,
                                       lifecycle.READY_MESSAGE)
            if beat is not None:
                ops.append(self.store.status_op(beat, node))
                self._node_events(node, beat, now)
        desired = {meta.uid(p): p for p in self.cache.by_index("node", self.cfg.node_name)}
        for uid, pod in desired.items():
            if not (pod.get("spec") or {}).get("nodeName"):
                # (an unbound pod is removed by its delete at once: nothing to release)
                if node is not None and not meta.is_being_deleted(pod):
                    stamp = meta.format_time(now)
                    ops.append(self.store.status_op(lifecycle.bind(
                        pod, self.cfg.node_name, self.cfg.node_ip, self._pod_ip(pod, []),
                        stamp), pod))
                continue
            run = self.runs.get(uid) or self._new_run(pod)
            run.pod = pod
            ops.extend(self._sync(run, now))
        # pods recorded by an earlier run, or gone from the store: stop and forget
        for uid, states in list(self._recorded.items()):
            if uid not in desired:
                self._orphan(uid, states)
        for uid, run in list(self.runs.items()):
            if uid not in desired and not run.gone:
                run.gone = True
            if run.gone:
                self._stop(run, now)
                if not any(c.running() for c in run.containers()):
                    self.runtime.forget(run.pod_dir)
                    del self.runs[uid]
                    self._written.pop(uid, None)
        self.runtime.sweep(set(self.runs) | set(self._recorded))
        told, event_ops = self.recorder.ops(now)
        ops.extend(event_ops)
        if ops:
            self._safe(lambda: self.recorder.written(told, self._commit(ops)))

    def _node_events(self, old: Obj, new: Obj, now: float) -> None:
        """kubelet's Events of its node's conditions: once this agent starts, then at each
        change (``Node x status is now: NodeHasSufficientMemory``, ..., ``NodeReady``)."""
        if not self._started_told:
            self._started_told = True
            self._node_event("Normal", "Starting", "Starting kubelet.", now)
        before = {c.get("type"): c.get("status")
                  for c in (old.get("status") or {}).get("conditions") or []}
        for c in (new.get("status") or {}).get("conditions") or []:
            if before.get(c["type"]) == c["status"] and self._conditions_told:
                continue
            now_is = "NodeReady" if c["type"] == "Ready" else \
                "Node" + str(c["reason"]).removeprefix("Kubelet")
            self._node_event("Normal", now_is,
                             f"Node {self.cfg.node_name} status is now: {now_is}", now)
        self._conditions_told = True

    def _safe(self, fn: Callable[[], object]) -> None:
        try:
            fn()
        except common.REDIS_DOWN as err:
            self.outage.failed(err)
        except errors.StoreError as err:
            log.warning("write refused: %s", err)

    # ---- one pod ------------------------------------------------------------------------------

    def _new_run(self, pod: Obj) -> PodRun:
        uid = meta.uid(pod)
        spec = pod.get("spec") or {}
        left = self._recorded.pop(uid, {})

        def states(key: str, init: bool, ephemeral: bool = False) -> list[ContainerState]:
            return [left.get(str(c.get("name")))
                    or ContainerState(str(c.get("name")), init=init, ephemeral=ephemeral)
                    for c in spec.get(key) or []]
        run = PodRun(uid, pod, self.runtime.pod_dir(pod), states("initContainers", True),
                     states("containers", False),
                     ephemerals=states("ephemeralContainers", False, True))
        now = self.clock()
        for c in run.containers():
            t = c.terminated
            if t is not None and c.restart_at is None and \
                    t.get("reason") == "ContainerStatusUnknown":
                # ended while no agent ran (``adopt``): restarted as its restartPolicy says
                podstatus.after_exit(c, self._policy(pod, c), t, now, self.cfg.backoff_initial)
        self.runs[uid] = run
        self.runtime.save_pod(run.pod_dir, pod)
        return run

    def _orphan(self, uid: str, states: dict[str, ContainerState]) -> None:
        del self._recorded[uid]
        pod_dir = self.runtime.pod_dirs().get(uid)
        if pod_dir is None:
            return
        log.info("pod %s is gone: stopping what an earlier run left of it", uid)
        pod = self.runtime.pod_stub(pod_dir) or {"metadata": {"uid": uid}}
        self.runs[uid] = PodRun(uid, pod, pod_dir, [], list(states.values()), gone=True)

    def _grace(self, pod: Obj) -> float:
        md = pod.get("metadata") or {}
        for v in (md.get("deletionGracePeriodSeconds"),
                  (pod.get("spec") or {}).get("terminationGracePeriodSeconds")):
            if v is not None:
                return float(v)
        return DEFAULT_GRACE

    def _stop(self, run: PodRun, now: float) -> None:
        """SIGTERM every running container, SIGKILL it once the grace period is over; a
        shorter period seen later (a delete that shortened it) brings the SIGKILL forward,
        a longer one never puts it off (the kubelet's ``calculateEffectiveGracePeriod``)."""
        for c in run.containers():
            if not c.running():
                continue
            if self._reap(run, c, now, "Never"):
                continue
            deadline = now + self._grace(run.pod)
            if c.stop_deadline is None:
                log.info("stopping pod %s container %s (%s)", meta.name(run.pod) or run.uid,
                         c.name, c.container_id)
                self.runtime.signal(c, signal.SIGTERM)
                c.stop_deadline = deadline
                self.runtime.save(run.pod_dir, c)
                self._event(run, "Normal", "Killing", f"Stopping container {c.name}", c, now)
            elif now >= c.stop_deadline:
                self.runtime.signal(c, signal.SIGKILL)
            elif deadline < c.stop_deadline:  # now + the same period never is
                c.stop_deadline = deadline
                self.runtime.save(run.pod_dir, c)

    def _reap(self, run: PodRun, c: ContainerState, now: float, policy: str) -> bool:
        """If ``c``'s process ended, record it (and when it restarts); True if it ended."""
        ended: Exit | None = self.runtime.exited(c)
        if ended is None:
            return False
        cid = c.container_id
        if ended.code < 0:
            term = podstatus.terminated_state(137, 0, c.started_at, now, cid,
                                              reason="ContainerStatusUnknown",
                                              message="the process ended while the node "
                                                      "agent was away")
        else:
            term = podstatus.terminated_state(ended.code, ended.signal, c.started_at, now, cid,
                                              reason=ended.reason)
            message = runtime.termination_message(self.runtime, run.pod_dir, run.pod,
                                                  podstatus.container_spec(run.pod, c.name), c,
                                                  term["exitCode"])
            if message:
                term["message"] = message
        log.info("pod %s container %s exited: %s", meta.name(run.pod), c.name,
                 term.get("exitCode"))
        podstatus.after_exit(c, policy, term, now, self.cfg.backoff_initial)
        run.trackers = {k: t for k, t in run.trackers.items() if k[0] != c.name}
        self.runtime.save(run.pod_dir, c)
        return True

    def _sync(self, run: PodRun, now: float) -> list[Op]:
        pod = run.pod
        spec = pod.get("spec") or {}
        if meta.is_being_deleted(pod):
            self._stop(run, now)
            if any(c.running() for c in run.containers()) or meta.finalizers(pod):
                return []
            log.info("pod %s terminated; released", meta.key(pod))
            self.runtime.forget(run.pod_dir)
            self.runs.pop(run.uid, None)
            return [self.store.final_delete_op(pod)]
        for c in run.containers():
            if c.running():
                self._reap(run, c, now, self._policy(pod, c))
        for c in run.containers():
            if c.running() and c.stop_deadline is not None and now >= c.stop_deadline:
                self.runtime.signal(c, signal.SIGKILL)
        self._config_volumes(run)
        if not self._mounted(run, now):
            return self._report(run, now)
        self._start_ephemerals(run, now)
        init_specs = spec.get("initContainers") or []
        initialized = True
        for cspec, c in zip(init_specs, run.inits, strict=False):
            t = c.terminated
            if t is not None and c.restart_at is None and int(t.get("exitCode") or 0) == 0:
                continue  # completed
            initialized = False
            if not c.running():
                self._maybe_start(run, cspec, c, now)
            break
        if initialized:
            for cspec, c in zip(spec.get("containers") or [], run.mains, strict=False):
                if not c.running():
                    self._maybe_start(run, cspec, c, now)
        self._probe(run, now)
        return self._report(run, now)

    def _start_ephemerals(self, run: PodRun, now: float) -> None:
        """Start the ephemeral containers the pod's spec added since (``kubectl debug``),
        each once: kubelet starts them whether or not the pod's init containers are done,
        and never restarts one (its policy is Never)."""
        specs = (run.pod.get("spec") or {}).get("ephemeralContainers") or []
        known = {c.name for c in run.ephemerals}
        run.ephemerals += [ContainerState(str(cspec.get("name")), ephemeral=True)
                           for cspec in specs if cspec.get("name") not in known]
        by_name = {c.name: c for c in run.ephemerals}
        for cspec in specs:
            c = by_name[str(cspec.get("name"))]
            if not c.running():
                self._maybe_start(run, cspec, c, now)

    def _config_volumes(self, run: PodRun) -> None:
        """Acts: write the pod's configMap, secret and downwardAPI volumes as their objects
        (the pod's labels and annotations) are now (kubelet updates a mounted ConfigMap's or
        Secret's files eventually, atomically), under the pod's own directory, once per
        version of each (the cache holds a new object for each); keep why one could not be
        made for the containers that mount it."""
        if not self.runtime.mounts:
            return
        ns = meta.namespace(run.pod)
        for name, (plugin, source) in configvolumes.object_volumes(run.pod).items():
            if plugin is configvolumes.DOWNWARD_API:  # (of the pod itself)
                obj: Obj | None = run.pod
                made_of: object = configvolumes.downward_inputs(run.pod)
            else:
                obj = made_of = self.cache.get(
                    plugin.kind, f"{ns}/{configvolumes.source_name(plugin, source)}")
            made = run.volumes_from.get(name)
            if made is not None and made[0] == source and (made[1] is made_of
                                                           or made[1] == made_of):
                continue  # as made (or refused) from this version already
            try:
                files = configvolumes.payload(plugin, source, obj, self._allocatable())
            except podstatus.ConfigError as err:
                run.volume_errors[name] = str(err)
                run.volumes_from[name] = (source, made_of)
                continue
            try:  # (a no-op when the files there are these already)
                atomicwriter.write(configvolumes.volume_dir(run.pod_dir, plugin, name), files)
            except OSError as err:
                run.volume_errors[name] = str(err)  # (tried again next round)
                continue
            run.volume_errors.pop(name, None)
            run.volumes_from[name] = (source, made_of)

    def _mounted(self, run: PodRun, now: float) -> bool:
        """Whether the pod's containers may start, its volumes set up: kubelet's volume
        manager sets up every volume a container of the pod mounts before the sandbox or any
        container is made. A hostPath volume that is not of its type (made first for the
        ``…OrCreate`` types: ``hostpath``), or a configMap, secret or downwardAPI volume
        whose files could not be made, is kubelet's FailedMount Warning, tried again after
        a back-off that doubles from 0.5 s to 2 min 2 s (the volume manager's); the
        containers wait as ContainerCreating meanwhile. Once all were set up, a volume that
        fails later (its Secret deleted) is told the same way, but holds nothing back: its
        files stay as they were, as kubelet's do."""
        if now < run.mount_retry_at or (run.mounted and not run.volume_errors
                                         and not run.mount_backoff):
            return run.mounted  # (waiting out a back-off, or all set up and nothing failed)
        spec = run.pod.get("spec") or {}
        used = {str(m.get("name")) for c in (spec.get("initContainers") or [])
                + (spec.get("containers") or []) for m in c.get("volumeMounts") or []}
        failed = {}
        for v in spec.get("volumes") or []:
            name = str(v.get("name"))
            if name not in used:
                continue
            why = run.volume_errors.get(name)
            if why is None and v.get("hostPath") is not None and not run.mounted:
                source = v.get("hostPath") or {}
                why = hostpath.check(str(source.get("path") or ""), str(source.get("type") or ""))
            if why is not None:
                failed[name] = why
        if not failed:
            run.mounted, run.mount_backoff = True, 0.0
            return True
        for name, why in failed.items():
            log.info("pod %s volume %s: %s", meta.key(run.pod), name, why)
            self._event(run, "Warning", "FailedMount",
                        f'MountVolume.SetUp failed for volume "{name}" : {why}', None, now)
        run.mount_backoff = min(2 * run.mount_backoff or MOUNT_BACKOFF_INITIAL,
                                MOUNT_BACKOFF_MAX)
        run.mount_retry_at = now + run.mount_backoff
        return run.mounted

    def _maybe_start(self, run: PodRun, cspec: Obj, c: ContainerState, now: float) -> None:
        pod = run.pod
        if c.restart_at is not None and now < c.restart_at:
            if run.backoff_told.get(c.name) != c.restart_at:  # once per back-off
                run.backoff_told[c.name] = c.restart_at
                self._event(run, "Warning", "BackOff", "Back-off restarting failed container "
                            f"{c.name} in pod {podstatus.pod_ref(pod)}", c, now)
            return
        if c.terminated is not None and c.restart_at is None:
            return  # ended for good (its restartPolicy)
        if now < run.config_retry_at.get(c.name, now):
            return
        if not self._sandboxed(run, c, now):
            return
        skipped: list[str] = []  # (envFrom's keys that are no variable names)
        try:
            env = podstatus.container_env(self._addressed(pod, run), cspec,
                                          self.runtime.base_env(), self.sources(pod), skipped,
                                          self._allocatable())
            words = self.runtime.argv(cspec, env)
            configvolumes.check_mounts(pod, cspec, self.runtime.mounts)
        except podstatus.ConfigError as err:
            self._config_error(run, c, err, now)
            return
        if not self._image_ready(run, cspec, c, now):
            return
        try:
            self.runtime.check_config(pod, cspec)
        except podstatus.ConfigError as err:
            self._config_error(run, c, err, now)
            run.config_retry_at[c.name] = now + CONFIG_RETRY
            return
        except OSError as err:  # (the runtime cannot say yet: the next round asks again)
            log.warning("pod %s container %s: %s", meta.name(pod), c.name, err)
            return
        run.config_retry_at.pop(c.name, None)
        for warning in skipped:
            self._event(run, "Warning", "InvalidEnvironmentVariableNames", warning, c, now)
        if c.terminated is not None:  # a restart: the run before becomes lastState
            c.restart_count += 1
            c.last_terminated = c.terminated
            c.terminated = None
        c.restart_at = None
        c.waiting_reason = c.waiting_message = ""
        # recorded before the process exists: an agent killed in between finds the
        # process by its log file (``Runtime.find_started``) instead of starting another
        c.starting = True
        self.runtime.save(run.pod_dir, c)
        try:
            self.runtime.start(run.pod_dir, pod, cspec, c, words, env)
        except OSError as err:
            log.info("pod %s container %s failed to start: %s", meta.name(pod), c.name, err)
            self._event(run, "Warning", "Failed", f"Error: {err}", c, now)
            c.starting = False
            podstatus.after_exit(c, self._policy(pod, c),
                                 podstatus.terminated_state(128, 0, now, now, "",
                                                            reason="StartError",
                                                            message=str(err)),
                                 now, self.cfg.backoff_initial)
            self.runtime.save(run.pod_dir, c)
            return
        c.starting = False
        c.started_at = now
        log.info("pod %s container %s started (%s)", meta.name(pod), c.name, c.container_id)
        self.runtime.save(run.pod_dir, c)
        self._event(run, "Normal", "Created", f"Created container: {c.name}", c, now)
        self._event(run, "Normal", "Started", f"Started container {c.name}", c, now)

    def _sandboxed(self, run: PodRun, c: ContainerState, now: float) -> bool:
        """Whether the pod has its sandbox (made first, as kubelet's sync makes it before
        any container); when it cannot be made, ``c`` waits as ContainerCreating and the
        pod is told why in kubelet's FailedCreatePodSandBox Warning, tried again after the
        pod worker's back-off. A pod whose DNS falls back to the host's for want of cluster
        DNS is told so first, once (kubelet's MissingClusterDNS, about the pod and the
        node)."""
        if not run.dns_told:  # (kubelet tells it as it makes the pod's sandbox)
            run.dns_told = True
            if self.runtime.dns_fallback(run.pod):
                self._node_event("Warning", "MissingClusterDNS", dns.MISSING, now)
                self._event(run, "Warning", "MissingClusterDNS",
                            f'pod: "{podstatus.pod_ref(run.pod)}". {dns.MISSING}', None, now)
        if self.runtime.on_host_network(run.pod):
            return True
        try:
            self.runtime.sandbox(run.pod)
        except OSError as err:
            log.info("pod %s: %s", meta.key(run.pod), err)
            c.waiting_reason, c.waiting_message = "ContainerCreating", ""
            run.config_retry_at[c.name] = now + CONFIG_RETRY
            self._event(run, "Warning", "FailedCreatePodSandBox", str(err), None, now)
            return False
        return True

    def _addressed(self, pod: Obj, run: PodRun) -> Obj:
        """``pod`` with its IP in its status when the status has none yet (written with
        this round's report): a container's ``status.podIP`` variable has it from its
        first start, as the sandbox has it before any container starts."""
        status = pod.get("status") or {}
        ip = "" if status.get("podIP") else self._pod_ip(pod, run.containers())
        return {**pod, "status": {**status, "podIP": ip}} if ip else pod

    def _config_error(self, run: PodRun, c: ContainerState, err: podstatus.ConfigError,
                      now: float) -> None:
        """``c`` waits as CreateContainerConfigError, saying why in a Warning Event once per
        ``CONFIG_RETRY`` (kubelet's pod worker tries again after its back-off, telling each
        time)."""
        c.waiting_reason, c.waiting_message = "CreateContainerConfigError", str(err)
        if now - run.config_told.get(c.name, -CONFIG_RETRY) >= CONFIG_RETRY:
            run.config_told[c.name] = now
            self._event(run, "Warning", "Failed", f"Error: {err}", c, now)

    def _image_ready(self, run: PodRun, cspec: Obj, c: ContainerState, now: float) -> bool:
        """Is ``c``'s image here? A failed pull is ErrImagePull (with a Warning Event), and
        the next try waits the pull back-off (ImagePullBackOff, a BackOff Event), as
        kubelet's image manager does."""
        image = str(cspec.get("image") or "")
        if c.pull_at is not None and now < c.pull_at:
            if c.waiting_reason != "ImagePullBackOff":
                c.waiting_reason = "ImagePullBackOff"
                c.waiting_message = f'Back-off pulling image "{image}"'
                self._event(run, "Normal", "BackOff", c.waiting_message, c, now)
            return False
        try:
            pulled = self.runtime.image_ready(cspec)
        except ImageError as err:
            c.waiting_reason, c.waiting_message = err.reason, err.message
            c.pull_backoff = PULL_BACKOFF_INITIAL if c.pull_backoff <= 0 else \
                min(2 * c.pull_backoff, PULL_BACKOFF_MAX)
            c.pull_at = now + c.pull_backoff
            log.info("pod %s container %s: %s: %s", meta.name(run.pod), c.name, err.reason,
                     err.message)
            self._event(run, "Warning", "Failed", f'Failed to pull image "{image}": '
                        f"{err.message}", c, now)
            self._event(run, "Warning", "Failed", f"Error: {err.reason}", c, now)
            self.runtime.save(run.pod_dir, c)
            return False
        if pulled is None:
            if c.waiting_reason != "ContainerCreating":
                self._event(run, "Normal", "Pulling", f'Pulling image "{image}"', c, now)
            c.waiting_reason, c.waiting_message = "ContainerCreating", ""
            return False
        if c.pull_at is not None:
            c.pull_at, c.pull_backoff = None, 0.0
        if pulled:
            self._event(run, "Normal", "Pulled", pulled, c, now)
        return True

    def _event(self, run: PodRun, type_: str, reason: str, message: str,
               c: ContainerState | None, now: float) -> None:
        """An Event about the pod's container ``c`` (None: the pod itself, its sandbox), as
        kubelet records it (``_tell``)."""
        ev = events.event({**run.pod, "apiVersion": "v1", "kind": "Pod"}, type_, reason,
                          message, now=now, salt=f"{c.name if c else reason}|{now}",
                          component="kubelet")
        if c is not None:
            ev["involvedObject"]["fieldPath"] = f"spec.{podstatus.spec_key(c)}{{{c.name}}}"
        self._tell(ev, meta.name(run.pod), now)

    def _node_event(self, type_: str, reason: str, message: str, now: float) -> None:
        """An Event about this node, as kubelet records it: about a reference whose uid is
        the node's name, in the default namespace (``_tell``)."""
        name = self.cfg.node_name
        ev = events.event({"apiVersion": "v1", "kind": "Node",
                           "metadata": {"name": name, "uid": name}}, type_, reason, message,
                          now=now, salt=str(now), component="kubelet")
        ev["metadata"]["namespace"] = "default"
        self._tell(ev, name, now)

    def _tell(self, ev: Obj, about: str, now: float) -> None:
        """``ev`` (from kubelet on this node) to the recorder (``shared.store.recorder``:
        client-go's correlator), written with this round's commit."""
        # named as client-go's recorder names it, the object's name and the time in
        # nanoseconds in hex: lists (sorted by name) and kubectl describe (by time, to the
        # second) show one second's Events in the order they happened (Pulled, Created,
        # Started)
        self._event_ns = max(int(now * 1e9), self._event_ns + 1)
        ev["metadata"]["name"] = f"{about}.{self._event_ns:x}"
        ev["source"]["host"] = self.cfg.node_name
        ev["reportingInstance"] = self.cfg.node_name
        self.recorder.tell(ev, now)

    @staticmethod
    def _policy(pod: Obj, c: ContainerState) -> str:
        """The restart policy of one container: init containers restart only when they
        fail, unless the pod's policy is Never; an ephemeral container never does."""
        if c.ephemeral:
            return "Never"
        policy = str((pod.get("spec") or {}).get("restartPolicy") or "Always")
        return policy if not c.init or policy == "Never" else "OnFailure"

    def _probe(self, run: PodRun, now: float) -> None:
        """Run the probes that are due: the startup probe until it succeeds (readiness and
        liveness wait for it), then readiness and liveness. A failed startup or liveness
        probe stops the container (its restartPolicy then says what follows)."""
        pod = run.pod
        specs = {str(c.get("name")): c for c in (pod.get("spec") or {}).get("containers") or []}
        for c in run.mains:
            cspec = specs.get(c.name) or {}
            if not c.running() or c.stop_deadline is not None:
                continue
            if not cspec.get("startupProbe"):
                c.started = True
            elif not c.started:
                verdict = self._run_probe(run, c, cspec, "startupProbe", False, now)
                if verdict is not None:
                    c.started = verdict.ok
                    if not verdict.ok and verdict.failures >= \
                            int(cspec["startupProbe"].get("failureThreshold") or 3):
                        self._kill_unhealthy(run, c, "startup")
                continue
            if not cspec.get("readinessProbe"):
                c.ready = True
            else:
                verdict = self._run_probe(run, c, cspec, "readinessProbe", False, now)
                if verdict is not None:
                    c.ready = verdict.ok
            verdict = self._run_probe(run, c, cspec, "livenessProbe", True, now)
            if verdict is not None and not verdict.ok:
                self._kill_unhealthy(run, c, "liveness")

    def _run_probe(self, run: PodRun, c: ContainerState, cspec: Obj, kind: str, initial: bool,
                   now: float) -> probes.ProbeTracker | None:
        """Run ``c``'s probe ``kind`` if it is due; its tracker after the result, else None."""
        probe = cspec.get(kind)
        if not probe:
            return None
        tracker = run.trackers.get((c.name, kind))
        if tracker is None:
            tracker = probes.ProbeTracker(probe, c.started_at or now, initial)
            run.trackers[(c.name, kind)] = tracker
        if tracker.pending is not None:
            if not tracker.pending.done():
                return None
            done = tracker.pending
            success, output = done.result() if done.exception() is None else \
                (False, str(done.exception()))
            tracker.pending = None
            tracker.record(success, self.clock())
            if not success:
                self._event(run, "Warning", "Unhealthy",
                            f"{PROBE_NAMES[kind]} probe failed: {output}", c, now)
            return tracker
        if not tracker.due(now):
            return None
        env = self._env(run.pod, cspec)
        pod_ip = self._pod_ip(run.pod, run.containers())
        cwd = str(cspec.get("workingDir") or "/")

        def exec_probe(words: list[str], timeout: float) -> tuple[bool, str]:
            return self.runtime.exec_probe(c, words, env, cwd, timeout)
        # each probe runs on the pool (as kubelet's run in their own goroutines), so a slow
        # one holds up no other pod; its result is taken on a later round
        tracker.pending = self.prober.submit(probes.run, probe, cspec, pod_ip, exec_probe)
        return None

    def _kill_unhealthy(self, run: PodRun, c: ContainerState, which: str) -> None:
        log.info("pod %s container %s failed its %s probe; restarting", meta.name(run.pod),
                 c.name, which)
        self.runtime.signal(c, signal.SIGTERM)
        now = self.clock()
        c.stop_deadline = now + self._grace(run.pod)
        self._event(run, "Normal", "Killing",
                    f"Container {c.name} failed {which} probe, will be restarted", c, now)

    def _pod_ip(self, pod: Obj, containers: list[ContainerState]) -> str:
        """The pod's address: its runtime's (docker: its sandbox's on the pods' network), or
        the node's for a pod on the node's network; "" while it has none."""
        if self.runtime.on_host_network(pod):
            return self.cfg.node_ip
        return self.runtime.pod_ip(pod, containers)

    def _report(self, run: PodRun, now: float) -> list[Op]:
        pod = run.pod
        status = podstatus.pod_status(pod, run.inits, run.mains, now, run.ephemerals)
        # the node's address as it is now (a machine may come back with another one), and
        # the pod's (``_pod_ip``)
        ip = self._pod_ip(run.pod, run.containers())
        status["hostIP"] = self.cfg.node_ip
        if ip:  # (kubelet writes none before the pod has one)
            status["podIP"], status["podIPs"] = ip, [{"ip": ip}]
        if status == (pod.get("status") or {}):
            return []
        rv = meta.resource_version(pod)
        if self._written.get(run.uid) == (rv, status):
            return []  # written over this version already; the log entry is on its way
        self._written[run.uid] = (rv, status)
        return [self.store.status_op({**pod, "status": status}, pod)]


def default_state_dir(node_name: str) -> Path:
    base = Path("/var/lib/daemonbus") if os.getuid() == 0 else \
        Path.home() / ".daemonbus"
    return base / "node-agent" / node_name
