"""The simulated kubelet's decisions (pure): what happens next to a pod or a node.

Stages, in the spirit of KWOK:

* an unbound pod whose node affinity names a served node is bound to it (the scheduler's
  job: ``spec.nodeName`` is set) and becomes Pending;
* ``ready_delay`` seconds after binding it becomes Running and Ready — unless its image
  matches a ``fail_images`` glob (it goes Failed), a ``crash_images`` glob (Running, its
  containers waiting in CrashLoopBackOff after a failed start, not Ready: what a kubelet
  shows of a container that keeps exiting under ``restartPolicy: Always``) or a
  ``never_ready`` glob (Running, not Ready);
* a pod being deleted is removed ``grace`` seconds after its deletion started, or by its
  deletionTimestamp (the time by which it should be gone: its grace period after the delete,
  earlier when a later delete shortened it) if that comes first, once it has no finalizers.
"""

from __future__ import annotations

import copy
import fnmatch
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.api import served
from shared.model import meta, podutil

Obj = dict[str, Any]


@dataclass(frozen=True)
class AgentConfig:
    ready_delay: float = 0.0
    grace: float = 1.0
    fail_images: tuple[str, ...] = ()
    never_ready: tuple[str, ...] = ()
    crash_images: tuple[str, ...] = ()
    shard: int = 0
    shards: int = 1
    node_prefix: str = ""  # serve only nodes whose name starts with this
    heartbeat: float = 300.0
    lease_duration: float = 40.0  # node leases, renewed every quarter of it


SIMULATED_RUNTIME = "simulated://daemonbus"


def simulated(node: Obj | None) -> bool:
    """Is ``node`` one a simulated agent may serve: not a real agent's (a machine's Node,
    whose runtime is ``process://`` or ``docker://``: that agent alone runs its pods, as one
    kubelet a node)? A Node not known (yet), or made without a runtime, is."""
    info = ((node or {}).get("status") or {}).get("nodeInfo") or {}
    runtime = info.get("containerRuntimeVersion") if isinstance(info, dict) else None
    return not runtime or str(runtime).startswith("simulated://")


def serves(cfg: AgentConfig, node_name: str) -> bool:
    if cfg.node_prefix and not node_name.startswith(cfg.node_prefix):
        return False
    if cfg.shards <= 1:
        return True
    digest = hashlib.blake2b(node_name.encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big") % cfg.shards == cfg.shard


def node_ip(node_name: str) -> str:
    """A stable simulated InternalIP for a node (data only; nothing listens there)."""
    h = hashlib.blake2b(node_name.encode(), digest_size=2).digest()
    return f"10.{h[0] % 250}.{h[1]}.{1 + len(node_name) % 250}"


def pod_ip(node_name: str, pod_name: str) -> str:
    """A stable simulated pod IP from the node's /24 pod range."""
    n = hashlib.blake2b(node_name.encode(), digest_size=2).digest()
    p = hashlib.blake2b(pod_name.encode(), digest_size=1).digest()
    return f"10.{100 + n[0] % 150}.{n[1]}.{2 + p[0] % 250}"


def _images(pod: Obj) -> list[str]:
    spec = pod.get("spec") or {}
    return [str(c.get("image") or "") for c in (spec.get("containers") or [])]


def _matches(globs: tuple[str, ...], images: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(img, g) for g in globs for img in images)


def _condition(type_: str, status: str, now: str) -> Obj:
    return {"type": type_, "status": status, "lastProbeTime": None, "lastTransitionTime": now}


# The order kubelet reports pod conditions in; Ready comes early, so every reader looking for
# it (status counting and rollouts check each pod's Ready condition on every sync) finds it
# after one or two entries.
_CONDITION_ORDER = {"PodReadyToStartContainers": 0, "Initialized": 1, "Ready": 2,
                    "ContainersReady": 3, "PodScheduled": 4}


def _condition_key(cond: Obj) -> tuple[int, str]:
    kind = str(cond.get("type"))
    return _CONDITION_ORDER.get(kind, len(_CONDITION_ORDER)), kind


def _set_condition(status: Obj, cond: Obj) -> None:
    conds = [c for c in status.get("conditions") or [] if c.get("type") != cond["type"]]
    old = next((c for c in status.get("conditions") or [] if c.get("type") == cond["type"]), None)
    if old is not None and old.get("status") == cond["status"]:
        cond = {**cond, "lastTransitionTime": old.get("lastTransitionTime")}
    conds.append(cond)
    status["conditions"] = sorted(conds, key=_condition_key)


@dataclass
class Step:
    """What to do with one pod now: ``update`` (new object), ``delete`` or nothing; and when
    to look at it again (``wake_at``, epoch seconds; None = only on its next change)."""

    update: Obj | None = None
    delete: bool = False
    wake_at: float | None = None
    notes: list[str] = field(default_factory=list)


def pod_step(cfg: AgentConfig, pod: Obj, node_exists: bool, now: float) -> Step:
    """Decide the next stage of ``pod`` on a served node at ``now``."""
    md = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    stamp = meta.format_time(now)
    if md.get("deletionTimestamp"):
        if meta.finalizers(pod):
            return Step()
        due = meta.parse_time(md.get("deletionTimestamp")) or now
        # deletionTimestamp is the deadline, deletionGracePeriodSeconds before it the start
        started = due - float(md.get("deletionGracePeriodSeconds") or 0)
        gone_by = min(due, started + cfg.grace)
        if status.get("phase") in ("Failed", "Succeeded") or now >= gone_by:
            return Step(delete=True)
        # deletionTimestamp is stamped at whole seconds: wake a little after the boundary
        return Step(wake_at=gone_by + 0.001)
    if not node_exists:
        return Step()
    phase = status.get("phase") or "Pending"
    if not spec.get("nodeName"):
        node = podutil.target_node(pod) or ""
        host = node_ip(node)
        ip = host if spec.get("hostNetwork") else pod_ip(node, meta.name(pod))
        new = bind(pod, node, host, ip, stamp)
        if cfg.ready_delay <= 0:
            _run(cfg, new, stamp)
            return Step(update=new)
        return Step(update=new, wake_at=now + cfg.ready_delay)
    if phase == "Pending":
        bound_at = meta.parse_time(status.get("startTime")) or now
        if now < bound_at + cfg.ready_delay:
            return Step(wake_at=bound_at + cfg.ready_delay)
        new = _evolve(pod)
        _run(cfg, new, stamp)
        return Step(update=new)
    if spec.get("ephemeralContainers") and phase == "Running":
        told = status.get("ephemeralContainerStatuses") or []
        if len(told) < len(spec["ephemeralContainers"]):
            new = _evolve(pod)
            new["status"]["ephemeralContainerStatuses"] = _ephemerals(spec, told, stamp)
            return Step(update=new)
    return Step()


def _ephemerals(spec: Obj, told: list[Obj], stamp: str) -> list[Obj]:
    """The statuses of a running pod's ephemeral containers (``kubectl debug``'s): those
    reported, and each added since as running from ``stamp``."""
    known = {s.get("name") for s in told}
    return told + [{"name": c.get("name"), "image": c.get("image"), "imageID": "",
                    "ready": False, "restartCount": 0, "state": {"running": {"startedAt": stamp}},
                    "lastState": {}}
                   for c in spec["ephemeralContainers"] if c.get("name") not in known]


def bind(pod: Obj, node: str, host_ip: str, ip: str, stamp: str) -> Obj:
    """Decides: ``pod`` bound to ``node`` (the scheduler's part: spec.nodeName) and Pending
    there (the kubelet's first status: PodScheduled, startTime, hostIP, podIP: "" while the
    pod has no address yet, and none is written)."""
    new = _evolve(pod)
    new["spec"]["nodeName"] = node
    st = new["status"]
    st["phase"] = "Pending"
    _set_condition(st, _condition("PodScheduled", "True", stamp))
    st.setdefault("startTime", stamp)
    st["hostIP"] = host_ip
    if ip:
        st["podIP"] = ip
        st["podIPs"] = [{"ip": ip}]
    return new


def _evolve(pod: Obj) -> Obj:
    """A copy of ``pod`` whose ``spec`` and ``status`` maps may be changed without touching
    ``pod``: the stages only set keys of those two maps and replace lists and nested maps
    whole, so one level is copied, not the whole object (thousands of pods a second)."""
    new = dict(pod)
    new["spec"] = dict(pod.get("spec") or {})
    new["status"] = dict(pod.get("status") or {})
    return new


def _run(cfg: AgentConfig, pod: Obj, stamp: str) -> None:
    """Move a bound pod to Running (Ready or not) or Failed, per the image globs."""
    st = pod.setdefault("status", {})
    images = _images(pod)
    containers = (pod.get("spec") or {}).get("containers") or []
    if _matches(cfg.fail_images, images):
        st["phase"] = "Failed"
        st["reason"] = "Error"
        st["message"] = "simulated failure (--fail-image)"
        _set_condition(st, _condition("Ready", "False", stamp))
        st["containerStatuses"] = [
            {"name": c.get("name"), "image": c.get("image"), "imageID": "", "ready": False,
             "restartCount": 0, "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}
            for c in containers
        ]
        return
    if _matches(cfg.crash_images, images):
        st["phase"] = "Running"
        _set_condition(st, _condition("Initialized", "True", stamp))
        _set_condition(st, _condition("ContainersReady", "False", stamp))
        _set_condition(st, _condition("Ready", "False", stamp))
        st["containerStatuses"] = [
            {"name": c.get("name"), "image": c.get("image"), "imageID": "", "ready": False,
             "restartCount": 1, "started": False,
             "state": {"waiting": {"reason": "CrashLoopBackOff",
                                   "message": "simulated crash loop (--crash-image)"}},
             "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}}
            for c in containers
        ]
        return
    ready = not _matches(cfg.never_ready, images)
    st["phase"] = "Running"
    _set_condition(st, _condition("Initialized", "True", stamp))
    _set_condition(st, _condition("ContainersReady", "True" if ready else "False", stamp))
    _set_condition(st, _condition("Ready", "True" if ready else "False", stamp))
    st["containerStatuses"] = [
        {"name": c.get("name"), "image": c.get("image"), "imageID": "", "ready": ready,
         "restartCount": 0, "started": True, "state": {"running": {"startedAt": stamp}}}
        for c in containers
    ]


READY_MESSAGE = "kubelet is posting ready status"
SIMULATED_READY_MESSAGE = f"{READY_MESSAGE} (simulated by daemonbus node-agent)"
#: kubelet's node conditions besides Ready, in its order: (reason, message) without the
#: pressure and with it
PRESSURE: dict[str, tuple[tuple[str, str], tuple[str, str]]] = {
    "MemoryPressure": (("KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                       ("KubeletHasInsufficientMemory",
                        "kubelet has insufficient memory available")),
    "DiskPressure": (("KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                     ("KubeletHasDiskPressure", "kubelet has disk pressure")),
    "PIDPressure": (("KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                    ("KubeletHasInsufficientPID", "kubelet has insufficient PID available")),
}


def node_step(cfg: AgentConfig, node: Obj, now: float,
              pressure: Mapping[str, bool] | None = None,
              message: str = SIMULATED_READY_MESSAGE) -> Obj | None:
    """Report the node Ready with ``message``, and each condition of ``pressure`` (type →
    under it: kubelet's MemoryPressure, DiskPressure, PIDPressure) as kubelet words it;
    written when Ready was not True or one of them changed, else when the heartbeat is
    due. None = no change."""
    status = node.get("status") or {}
    had = {c.get("type"): c for c in status.get("conditions") or [] if isinstance(c, dict)}
    ready = had.get("Ready")
    last = meta.parse_time((ready or {}).get("lastHeartbeatTime"))
    # (a new Ready message alone waits for the heartbeat: a benchmark's nodes registered
    # Ready in words of their own are not all written again at once)
    given = pressure or {}
    changed = any((had.get(kind) or {}).get("status") != str(under)
                  for kind, under in given.items())
    if ready is not None and ready.get("status") == "True" and last is not None \
            and now < last + cfg.heartbeat and status.get("addresses") and not changed:
        return None
    new = copy.deepcopy(node)
    st = new.setdefault("status", {})
    st.setdefault("addresses", [{"type": "InternalIP", "address": node_ip(meta.name(node))},
                                {"type": "Hostname", "address": meta.name(node)}])
    stamp = meta.format_time(now)

    def posted(kind: str, state: str, reason: str, words: str) -> Obj:
        before = had.get(kind) or {}
        since = before.get("lastTransitionTime") if before.get("status") == state else None
        return {"type": kind, "status": state, "reason": reason, "message": words,
                "lastHeartbeatTime": stamp, "lastTransitionTime": since or stamp}

    ours = [posted(kind, str(given[kind]), *PRESSURE[kind][given[kind]])
            for kind in PRESSURE if kind in given]
    ours.append(posted("Ready", "True", "KubeletReady", message))
    kinds = {c["type"] for c in ours}
    st["conditions"] = [c for c in st.get("conditions") or [] if c.get("type") not in kinds] \
        + ours
    return new


MAX_PODS = 110  # kubelet's default --max-pods
KUBELET_VERSION = served.VERSION
SIMULATED_CAPACITY = {"cpu": "4", "ephemeral-storage": "100Gi", "memory": "16Gi",
                      "pods": str(MAX_PODS)}
"""What a simulated node reports it has (4 cores, 16 GiB, 100 GiB of disk), as a kubelet
reports its machine's: kubectl describe node shows each pod's requests as a share of it."""


def new_node(name: str, labels: dict[str, str] | None = None,
             taints: list[Obj] | None = None) -> Obj:
    """A Node object as a kubelet registers it."""
    lb = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
          "kubernetes.io/arch": "amd64", **(labels or {})}
    node: Obj = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": lb},
        "spec": {},
        "status": {
            "conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                            "message": "waiting for a node agent"}],
            # every field of NodeSystemInfo is required (client libraries refuse a node
            # without them): a simulated node has no machine, boot or kernel to name
            "nodeInfo": {"machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "",
                         "osImage": "", "containerRuntimeVersion": SIMULATED_RUNTIME,
                         "kubeletVersion": KUBELET_VERSION, "kubeProxyVersion": "",
                         "operatingSystem": "linux", "architecture": "amd64"},
            "capacity": dict(SIMULATED_CAPACITY),
            "allocatable": dict(SIMULATED_CAPACITY),
            "addresses": [{"type": "InternalIP", "address": node_ip(name)},
                          {"type": "Hostname", "address": name}],
        },
    }
    if taints:
        node["spec"]["taints"] = taints
    return node
