"""What a kubelet decides about a pod's containers (pure): restarts and their back-off, the
environment a container gets, and the status it reports (phase, conditions,
containerStatuses), from the state of its containers and the clock it is given.

The agent's process runtime (``procs``) keeps a ``ContainerState`` per container; these
functions never touch a process.
"""

from __future__ import annotations

import decimal
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from shared.model import configmap, meta, podutil
from shared.model import quantity as model_quantity

Obj = dict[str, Any]

# kubelet's crash-loop back-off: 10 s doubling to 5 min; a container that ran this long
# before it ended restarts at once again.
BACKOFF_INITIAL = 10.0
BACKOFF_MAX = 300.0
BACKOFF_RESET = 600.0


@dataclass
class ContainerState:
    """One container of one pod as the agent runs it (kept in the state dir, so a restarted
    agent knows what it left). ``terminated`` is the current Kubernetes terminated state
    (while it stays terminated), ``last_terminated`` the one before a restart."""

    name: str
    init: bool = False
    ephemeral: bool = False  # an ephemeral container (``kubectl debug``): never restarted
    pid: int = 0
    create_time: float = 0.0  # the process's start time as the OS has it (psutil)
    container_id: str = ""  # process://<pid> or docker://<id> of the current run
    started_at: float | None = None
    restart_count: int = 0
    terminated: Obj | None = None
    last_terminated: Obj | None = None
    backoff: float = 0.0  # the next back-off step; 0 = none pending
    restart_at: float | None = None  # in back-off until then
    waiting_reason: str = ""
    waiting_message: str = ""
    ready: bool = False  # readiness, and startup below: not kept (probes start afresh)
    started: bool = False
    stop_deadline: float | None = None  # SIGTERM sent; SIGKILL at this time
    starting: bool = False  # its process is being started (run number ``restart_count``)
    pull_backoff: float = 0.0  # the image pull's next back-off step; 0 = none pending
    pull_at: float | None = None  # ImagePullBackOff until then
    image_id: str = ""  # the image the current run was made from, as kubelet names it

    def running(self) -> bool:
        return (self.pid > 0 or bool(self.container_id)) and self.terminated is None

    def to_record(self) -> Obj:
        rec = asdict(self)
        rec.pop("ready")
        rec.pop("started")
        return rec

    @classmethod
    def from_record(cls, rec: Obj) -> ContainerState:
        """A record read back; ValueError unless every field has its type (a damaged file
        must not make the agent signal a pid it did not record)."""
        if not isinstance(rec, dict) or not isinstance(rec.get("name"), str):
            raise ValueError("not a container record")
        out = cls(rec["name"])
        for name, types in _RECORD_TYPES.items():
            if name not in rec:
                continue
            value = rec[name]
            if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
                raise ValueError(f"container record: {name}: {value!r} has the wrong type")
            setattr(out, name, value)
        return out


_NUMBER = (int, float)
_RECORD_TYPES: dict[str, tuple[type, ...]] = {
    "init": (bool,), "ephemeral": (bool,), "pid": (int,), "create_time": _NUMBER,
    "started_at": (*_NUMBER, type(None)),
    "restart_count": (int,), "terminated": (dict, type(None)),
    "last_terminated": (dict, type(None)), "backoff": _NUMBER,
    "restart_at": (*_NUMBER, type(None)), "waiting_reason": (str,), "waiting_message": (str,),
    "stop_deadline": (*_NUMBER, type(None)), "starting": (bool,), "container_id": (str,),
    "pull_backoff": _NUMBER, "pull_at": (*_NUMBER, type(None)), "image_id": (str,),
}


# ---- restarts ---------------------------------------------------------------------------


def should_restart(policy: str, exit_code: int) -> bool:
    """restartPolicy: Always restarts every ended container, OnFailure those that failed."""
    if policy == "Never":
        return False
    return policy != "OnFailure" or exit_code != 0


def after_exit(c: ContainerState, policy: str, terminated: Obj, now: float,
               base: float = BACKOFF_INITIAL) -> None:
    """Decides: record that ``c``'s process ended (``terminated``) and when it starts again.
    The first restart is at once; each further one waits the back-off (``base`` doubling to
    5 min), as kubelet's; a container that had run for 10 minutes starts the count afresh."""
    c.pid, c.container_id = 0, ""
    c.ready = c.started = False
    c.stop_deadline = None
    c.terminated = terminated
    exit_code = int(terminated.get("exitCode") or 0)
    if not should_restart(policy, exit_code):
        return
    started = meta.parse_time(terminated.get("startedAt")) or now
    if now - started >= BACKOFF_RESET:
        c.backoff = 0.0
    c.restart_at = now + c.backoff
    c.waiting_message = f"back-off {int(c.backoff)}s"
    c.backoff = base if c.backoff <= 0 else min(2 * c.backoff, max(BACKOFF_MAX, base))


def terminated_state(exit_code: int, signal: int, started_at: float | None, now: float,
                     container_id: str, reason: str = "", message: str = "") -> Obj:
    """A Kubernetes terminated state: exitCode 128+N for signal N, reason Completed or
    Error as container runtimes report them."""
    code = 128 + signal if signal else exit_code
    out: Obj = {"exitCode": code, "reason": reason or ("Completed" if code == 0 else "Error"),
                "startedAt": meta.format_time(started_at or now),
                "finishedAt": meta.format_time(now), "containerID": container_id}
    if signal:
        out["signal"] = signal
    if message:
        out["message"] = message
    return out


# ---- environment ------------------------------------------------------------------------

_REF = re.compile(r"\$\$|\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def expand(value: str, env: dict[str, str]) -> str:
    """$(VAR) references as kubelet expands them in env values, command and args: a defined
    variable is replaced, an undefined reference stays as written, $$ is a literal $."""
    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))
    return _REF.sub(sub, value)


def pod_ref(pod: Obj) -> str:
    """How kubelet names a pod in its messages (``format.Pod``): name_namespace(uid)."""
    return f"{meta.name(pod)}_{meta.namespace(pod)}({meta.uid(pod)})"


class ConfigError(ValueError):
    """A container whose configuration cannot be satisfied (kubelet's
    CreateContainerConfigError): it waits with the message, and nothing runs."""


def field_ref(pod: Obj, path: str, volume: bool = False) -> str:
    """valueFrom.fieldRef.fieldPath, the downward API's pod fields (``volume``: a
    downwardAPI volume's, which has the pod's metadata alone)."""
    md = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    st = pod.get("status") or {}
    simple = {"metadata.name": md.get("name"), "metadata.namespace": md.get("namespace"),
              "metadata.uid": md.get("uid")}
    if not volume:
        simple |= {"spec.nodeName": spec.get("nodeName"),
                   "spec.serviceAccountName": spec.get("serviceAccountName"),
                   "status.podIP": st.get("podIP"), "status.hostIP": st.get("hostIP")}
    if path in simple:
        return str(simple[path] or "")
    m = re.fullmatch(r"metadata\.(labels|annotations)\['([^']*)'\]", path)
    if m:
        return str((md.get(m.group(1)) or {}).get(m.group(2)) or "")
    raise ConfigError(f"unsupported fieldPath: {path}")


#: finds a ConfigMap or a Secret (by kind) of the pod's namespace by name (None: none)
Sources = Callable[[str, str], Obj | None]
_ENV_VAR_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")


def _no_sources(_kind: str, _name: str) -> Obj | None:
    return None


@dataclass(frozen=True)
class _Source:
    """A kind a container's environment is read from, and kubelet's words for it."""

    kind: str  # ConfigMap, Secret
    word: str  # as a missing one is named: configmap "x" not found
    ref: str  # envFrom's reference to one
    key_ref: str  # valueFrom's reference to one of its keys
    env_word: str  # as the warning of envFrom's skipped keys names it

    def values(self, obj: Obj | None) -> dict[str, str]:
        """Its keys and values as environment variables: a ConfigMap's ``data``, a
        Secret's ``data`` decoded (bytes kept as they are: ``surrogateescape``)."""
        if self.kind == "ConfigMap":
            return {k: str(v) for k, v in ((obj or {}).get("data") or {}).items()}
        return {k: v.decode("utf-8", "surrogateescape")
                for k, v in configmap.secret_contents(obj).items()}


_SOURCES = (_Source("ConfigMap", "configmap", "configMapRef", "configMapKeyRef", "configMap"),
            _Source("Secret", "secret", "secretRef", "secretKeyRef", "secret"))


def _found(ref: Obj, source: _Source, sources: Sources) -> Obj | None:
    """The object ``ref`` names, None when it is optional and missing; ConfigError with
    kubelet's words when it is missing and not optional."""
    name = str(ref.get("name") or "")
    found = sources(source.kind, name)
    if found is None and not ref.get("optional"):
        raise ConfigError(f'{source.word} "{name}" not found')
    return found


def env_from(pod: Obj, container: Obj, sources: Sources) -> tuple[dict[str, str], list[str]]:
    """``envFrom``'s variables (kubelet's makeEnvironmentVariables: each configMapRef's or
    secretRef's data, its keys prefixed, a later source over an earlier one), and what
    kubelet warns of the keys it skipped as invalid environment variable names (its
    InvalidEnvironmentVariableNames Event's message, one per source)."""
    out: dict[str, str] = {}
    warnings: list[str] = []
    for item in container.get("envFrom") or []:
        source = next((s for s in _SOURCES if item.get(s.ref) is not None), None)
        if source is None:
            raise ConfigError("envFrom: an item names neither a configMapRef nor a secretRef")
        ref = item[source.ref]
        prefix = str(item.get("prefix") or "")
        skipped: list[str] = []
        for key, value in source.values(_found(ref, source, sources)).items():
            if _ENV_VAR_NAME.fullmatch(prefix + key):
                out[prefix + key] = value
            else:
                skipped.append(prefix + key)
        if skipped:
            warnings.append(f"Keys [{', '.join(sorted(skipped))}] from the EnvFrom "
                            f"{source.env_word} {meta.namespace(pod)}/{ref.get('name')} were "
                            "skipped since they are considered invalid environment variable "
                            "names.")
    return out, warnings


def container_spec(pod: Obj, name: str) -> Obj:
    """The spec of the (init, ephemeral) container ``name`` of ``pod`` (empty: none of that
    name; a name is one container's of any kind)."""
    spec = pod.get("spec") or {}
    return next((s for key in podutil.CONTAINER_LISTS for s in spec.get(key) or []
                 if s.get("name") == name), {})


def spec_key(c: ContainerState) -> str:
    """The list of a pod's spec that has ``c`` (an Event's ``fieldPath`` names it)."""
    return "initContainers" if c.init else \
        "ephemeralContainers" if c.ephemeral else "containers"


def resource_field_ref(pod: Obj, container: Obj, ref: Obj,
                       allocatable: Mapping[str, Any]) -> str:
    """valueFrom.resourceFieldRef, as kubelet gives it (``containerResourceRuntimeValue``):
    a resource of ``container`` (or of the pod's container ``containerName``) over its
    ``divisor``, rounded up (cpu in millicores, the others in units); a limit a container
    does not set is the node's ``allocatable`` (``defaultPodLimitsForDownwardAPI``), a
    request it does not set 0."""
    wanted = str(ref.get("containerName") or "")
    if wanted:
        container = container_spec(pod, wanted)
        if not container:
            raise ConfigError(f"container {wanted} not found")
    resource = str(ref.get("resource") or "")
    group, _, name = resource.partition(".")
    defaulted = name in ("cpu", "memory", "ephemeral-storage")
    if group not in ("limits", "requests") or not (defaulted or name.startswith("hugepages-")):
        raise ConfigError(f"unsupported container resource : {resource}")
    value = ((container.get("resources") or {}).get(group) or {}).get(name)
    if value is None and group == "limits" and defaulted:
        value = allocatable.get(name)
    amount = _amount(value if value is not None else 0)
    divisor = _amount(ref.get("divisor") or 0) or decimal.Decimal(1)
    if name == "cpu":  # (MilliValue: rounded up to whole millicores)
        amount, divisor = (amount * 1000).to_integral_value(decimal.ROUND_CEILING), \
            (divisor * 1000).to_integral_value(decimal.ROUND_CEILING)
    else:  # (Value: rounded up to whole units)
        amount, divisor = amount.to_integral_value(decimal.ROUND_CEILING), \
            divisor.to_integral_value(decimal.ROUND_CEILING)
    return str(int((amount / divisor).to_integral_value(decimal.ROUND_CEILING)))


def _amount(value: object) -> decimal.Decimal:
    try:
        return model_quantity.parse(value).value
    except ValueError as err:
        raise ConfigError(f"{err}: {value!r}") from err


def _value_from(pod: Obj, container: Obj, name: str, value_from: Obj, sources: Sources,
                allocatable: Mapping[str, Any]) -> str | None:
    """One ``valueFrom``: a fieldRef's value, a resourceFieldRef's, a configMapKeyRef's or
    secretKeyRef's (None: optional and missing, the variable is left out)."""
    if value_from.get("fieldRef"):
        return field_ref(pod, str(value_from["fieldRef"].get("fieldPath") or ""))
    if value_from.get("resourceFieldRef"):
        return resource_field_ref(pod, container, value_from["resourceFieldRef"], allocatable)
    source = next((s for s in _SOURCES if value_from.get(s.key_ref)), None)
    if source is None:
        raise ConfigError(f"env {name}: only valueFrom.fieldRef, resourceFieldRef, "
                          "configMapKeyRef and secretKeyRef are supported")
    ref = value_from[source.key_ref]
    obj = _found(ref, source, sources)
    if obj is None:
        return None
    key = str(ref.get("key") or "")
    value = source.values(obj).get(key)
    if value is None:
        if ref.get("optional"):
            return None
        raise ConfigError(f"couldn't find key {key} in {source.kind} "
                          f"{meta.namespace(pod)}/{ref.get('name')}")
    return value


def container_env(pod: Obj, container: Obj, base: dict[str, str],
                  sources: Sources = _no_sources,
                  warnings: list[str] | None = None,
                  allocatable: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The environment of one container, as kubelet makes it: ``base`` (PATH, HOME), then
    ``envFrom`` (ConfigMaps and Secrets, :func:`env_from`; its warnings of skipped keys
    added to ``warnings``), then ``env`` in order over them, a value expanded against the
    variables before it, a ``valueFrom`` read from the pod (fieldRef), from its containers'
    resources (resourceFieldRef; ``allocatable``: the node's, for limits not set) or from a
    ConfigMap or Secret of its namespace (configMapKeyRef, secretKeyRef, found by
    ``sources``). A missing ConfigMap, Secret or key that is not optional is a ConfigError
    in kubelet's words."""
    env = dict(base)
    variables, skipped = env_from(pod, container, sources)
    env.update(variables)
    if warnings is not None:
        warnings.extend(skipped)
    for item in container.get("env") or []:
        name = str(item.get("name") or "")
        if item.get("value"):
            env[name] = expand(str(item["value"]), env)
        elif item.get("valueFrom") is not None:
            value = _value_from(pod, container, name, item["valueFrom"] or {}, sources,
                                allocatable or {})
            if value is not None:
                env[name] = value
        else:
            env[name] = ""
    for name, value in env.items():  # (no process can be given one: exec refuses it)
        if "\x00" in name or "\x00" in value:
            raise ConfigError(f"env {name.replace(chr(0), '?')}: a NUL byte in a variable")
    return env


def argv(container: Obj, env: dict[str, str], need_command: bool = True) -> list[str]:
    """command + args, expanded; the process runtime has no image entrypoint to fall back on
    (``need_command``)."""
    words = [str(w) for w in (container.get("command") or [])] + \
        [str(w) for w in (container.get("args") or [])]
    if need_command and not container.get("command"):
        raise ConfigError("the process runtime needs a command (there is no image entrypoint)")
    return [expand(w, env) for w in words]


# ---- resources --------------------------------------------------------------------------

def quantity(value: object) -> float:
    """A resource.Quantity ("128Mi", "0.5", "250m", "1e3") as a number; ConfigError if it is
    not one."""
    try:
        return float(model_quantity.parse(value).value)
    except ValueError as err:
        raise ConfigError(f"{err}: {value!r}") from err


def _limit(container: Obj, name: str) -> float | None:
    limits = (container.get("resources") or {}).get("limits") or {}
    return quantity(limits[name]) if name in limits else None


def memory_limit(container: Obj) -> int | None:
    """resources.limits.memory in bytes, None without one."""
    value = _limit(container, "memory")
    return None if value is None else int(value)


def cpu_limit(container: Obj) -> float | None:
    """resources.limits.cpu in cores, None without one."""
    return _limit(container, "cpu")


# ---- status -----------------------------------------------------------------------------


def _container_status(spec: Obj, c: ContainerState, waiting: str, pod: Obj) -> Obj:
    cid = c.container_id if c.running() else ""
    state: Obj
    if c.running():
        state = {"running": {"startedAt": meta.format_time(c.started_at or 0)}}
    elif c.terminated is not None and c.restart_at is None:
        state = {"terminated": c.terminated}
    elif c.restart_at is not None:
        msg = f"{c.waiting_message} restarting failed container={c.name} pod={pod_ref(pod)}"
        state = {"waiting": {"reason": "CrashLoopBackOff", "message": msg}}
    else:
        w: Obj = {"reason": c.waiting_reason or waiting}
        if c.waiting_message:
            w["message"] = c.waiting_message
        state = {"waiting": w}
    last = c.last_terminated if c.restart_at is None else (c.terminated or c.last_terminated)
    out: Obj = {"name": c.name, "image": str(spec.get("image") or ""), "imageID": c.image_id,
                "ready": c.ready and c.started and c.running(),
                "restartCount": c.restart_count,
                "started": (c.started or c.init) and c.running(),
                "state": state,
                "lastState": {"terminated": last} if last else {}}
    if c.ephemeral:  # (never ready, no startup: kubelet reports neither)
        del out["started"]
    if cid:
        out["containerID"] = cid
    return out


def _phase(policy: str, inits: list[ContainerState], mains: list[ContainerState]) -> str:
    """kubelet's getPhase, for containers this agent runs."""
    for c in inits:
        t = c.terminated
        if t is not None and c.restart_at is None and int(t.get("exitCode") or 0) != 0:
            return "Failed"  # restartPolicy Never: a failed init container fails the pod
        if not (t is not None and int(t.get("exitCode") or 0) == 0 and c.restart_at is None):
            return "Pending"
    running = waiting = stopped = succeeded = 0
    for c in mains:
        if c.running():
            running += 1
        elif c.terminated is not None and c.restart_at is None:
            stopped += 1
            succeeded += int(c.terminated.get("exitCode") or 0) == 0
        elif c.restart_at is not None or c.last_terminated is not None:
            stopped += 1  # waiting to restart after having run
        else:
            waiting += 1
    if waiting:
        return "Pending"
    if running:
        return "Running"
    if policy == "Always":
        return "Running"
    if policy == "OnFailure":
        return "Succeeded" if stopped == succeeded else "Running"
    return "Succeeded" if stopped == succeeded else "Failed"


def _condition(old: list[Obj], type_: str, ok: bool, stamp: str, reason: str = "",
               message: str = "") -> Obj:
    status = "True" if ok else "False"
    prev = next((c for c in old if c.get("type") == type_), None)
    since = prev.get("lastTransitionTime") if prev and prev.get("status") == status else stamp
    cond: Obj = {"type": type_, "status": status, "lastProbeTime": None,
                 "lastTransitionTime": since}
    if not ok and reason:
        cond["reason"] = reason
        cond["message"] = message
    return cond


def pod_status(pod: Obj, inits: list[ContainerState], mains: list[ContainerState],
               now: float, ephemerals: list[ContainerState] | None = None) -> Obj:
    """Decides: the status a kubelet reports for ``pod`` now. Fields it does not own
    (hostIP, podIP, startTime) are kept; a condition keeps its lastTransitionTime while its
    status holds, so an unchanged pod yields an equal status (and nothing is written).
    ``ephemerals`` (``kubectl debug``'s containers) are reported in
    ``ephemeralContainerStatuses`` and count for nothing else: neither the phase nor
    readiness."""
    spec = pod.get("spec") or {}
    old = dict(pod.get("status") or {})
    conds = list(old.get("conditions") or [])
    stamp = meta.format_time(now)
    policy = str(spec.get("restartPolicy") or "Always")
    init_specs = {str(c.get("name")): c for c in spec.get("initContainers") or []}
    main_specs = {str(c.get("name")): c for c in spec.get("containers") or []}
    phase = _phase(policy, inits, mains)
    initialized = all(c.terminated is not None and c.restart_at is None
                      and int(c.terminated.get("exitCode") or 0) == 0 for c in inits)
    unready = [c.name for c in mains if not (c.ready and c.started and c.running())]
    pending_init = [c.name for c in inits if not (c.terminated and c.restart_at is None
                                                  and c.terminated.get("exitCode") == 0)]
    new_conds = [
        _condition(conds, "Initialized", initialized, stamp, "ContainersNotInitialized",
                   f"containers with incomplete status: [{' '.join(pending_init)}]"),
        _condition(conds, "Ready", not unready, stamp, "ContainersNotReady",
                   f"containers with unready status: [{' '.join(unready)}]"),
        _condition(conds, "ContainersReady", not unready, stamp, "ContainersNotReady",
                   f"containers with unready status: [{' '.join(unready)}]"),
    ]
    new_conds += [c for c in conds if c.get("type") not in
                  ("Initialized", "Ready", "ContainersReady")]
    status = {**old, "phase": phase, "conditions": new_conds,
              "containerStatuses": [_container_status(main_specs.get(c.name, {}), c,
                                                      "PodInitializing" if not initialized
                                                      else "ContainerCreating", pod)
                                    for c in mains]}
    if inits:
        status["initContainerStatuses"] = [
            _container_status(init_specs.get(c.name, {}), c, "PodInitializing", pod)
            for c in inits]
    if ephemerals:
        specs = {str(c.get("name")): c for c in spec.get("ephemeralContainers") or []}
        status["ephemeralContainerStatuses"] = [
            _container_status(specs.get(c.name, {}), c, "ContainerCreating", pod)
            for c in ephemerals]
    return status
