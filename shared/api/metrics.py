"""Resource metrics (``kubectl top``): what a real node agent measures and serves, and the
``metrics.k8s.io/v1beta1`` objects the API server makes of it, as metrics-server does. Pure.

A node agent samples, every ``resolution`` seconds (metrics-server's 15 by default), the
cumulative CPU time and the memory working set of its node and of each running container
(``Sample``). ``Rates`` turns two samples of the same thing into its usage: CPU as the rate
over the window between them (nanocores), memory as the later working set (bytes). What was
not in the later sample is forgotten, so the state is bounded by what runs; a container
restarted is another thing (its id is part of its key), measured afresh.

The agent serves the usage of its last window at ``PATH`` on its endpoint, as a JSON
``document`` (``VERSION`` its schema): the node's usage, each pod's containers', the time of
the later sample and the window. ``parse_document`` checks one (MetricsError otherwise); the
API server makes ``NodeMetrics`` and ``PodMetrics`` of it (``node_metrics``,
``pod_metrics``): quantities in upstream's canonical form (``12345n``, ``6789Ki``), the
window as Go prints a duration (``15.003s``).
"""

from __future__ import annotations

import decimal
import json
import math
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from shared.model import kinds, meta
from shared.model import quantity as model_quantity

Obj = dict[str, Any]

VERSION = 1
PATH = "/metrics/usage"
DEFAULT_RESOLUTION = 15.0  # seconds between two samples (metrics-server's --metric-resolution)
GROUP_VERSION = "metrics.k8s.io/v1beta1"
MAX_DOCUMENT_BYTES = 16 * 1024 * 1024
_MAX_INT = 2**63 - 1
_MAX_NAME = 253


#: the Metrics API's resources, read only (get, list), no singular name (metrics-server's)
NODE_METRICS = kinds.KindInfo("NodeMetrics", GROUP_VERSION, "nodes", "", (), namespaced=False)
POD_METRICS = kinds.KindInfo("PodMetrics", GROUP_VERSION, "pods", "", (), namespaced=True)


class MetricsError(ValueError):
    """A usage document that is not one (the agent's fault; retrying cannot help)."""


@dataclass(frozen=True)
class Sample:
    """One measurement of one thing: the CPU time it has used so far (seconds, cumulative)
    and its memory working set now (bytes)."""

    cpu_seconds: float
    memory: int


@dataclass(frozen=True)
class Usage:
    """Usage over a window: CPU in nanocores (billionths of a core), memory in bytes."""

    cpu: int
    memory: int


def rate(before: Sample, after: Sample, window: float) -> Usage | None:
    """The usage of a thing sampled ``before`` and ``window`` seconds later ``after``: the
    CPU time it used in between per second, the later working set. None when there is no
    window, or its CPU time went back (it is not the same thing: not a usage)."""
    used = after.cpu_seconds - before.cpu_seconds
    if window <= 0 or used < 0 or not math.isfinite(used):
        return None
    return Usage(min(_MAX_INT, round(used / window * 1e9)), max(0, after.memory))


class Rates:
    """The previous sample of each thing, and what the next sample makes of them. Decides
    (the samples and their time are given)."""

    def __init__(self) -> None:
        self._at: float | None = None
        self._last: dict[Hashable, Sample] = {}

    def observe(self, now: float, samples: Mapping[Hashable, Sample],
                ) -> tuple[float, dict[Hashable, Usage]]:
        """Take ``samples`` (taken at ``now``): the window since the previous ones and the
        usage of each thing sampled both times. Things not in ``samples`` are forgotten."""
        window = 0.0 if self._at is None else now - self._at
        out: dict[Hashable, Usage] = {}
        for key, after in samples.items():
            before = self._last.get(key)
            if before is not None and (u := rate(before, after, window)) is not None:
                out[key] = u
        self._at, self._last = now, dict(samples)
        return window, out


@dataclass(frozen=True)
class PodUsage:
    namespace: str
    name: str
    uid: str
    containers: tuple[tuple[str, Usage], ...]  # (container name, usage), in spec order


@dataclass(frozen=True)
class NodeUsage:
    """What a node agent measured over its last window: the node's usage (None: not
    measured) and its pods' (those with a container measured)."""

    timestamp: float  # when the later sample was taken (epoch seconds)
    window: float  # seconds between the two samples
    node: Usage | None
    pods: tuple[PodUsage, ...]


# ---- the document an agent serves ---------------------------------------------------------


def _usage_doc(u: Usage) -> Obj:
    return {"cpu": u.cpu, "memory": u.memory}


def document(u: NodeUsage) -> bytes:
    """The JSON an agent serves at ``PATH``."""
    return json.dumps({
        "version": VERSION, "timestamp": u.timestamp, "window": u.window,
        "usage": None if u.node is None else _usage_doc(u.node),
        "pods": [{"namespace": p.namespace, "name": p.name, "uid": p.uid,
                  "containers": [{"name": n, **_usage_doc(c)} for n, c in p.containers]}
                 for p in u.pods]}).encode()


def _field(doc: Mapping[str, Any], name: str, types: type | tuple[type, ...], where: str) -> Any:
    value = doc.get(name)
    if not isinstance(value, types) or isinstance(value, bool):
        raise MetricsError(f"{where}{name}: {value!r} is not a {_type_name(types)}")
    return value


def _type_name(types: type | tuple[type, ...]) -> str:
    return "number" if isinstance(types, tuple) else {str: "string", int: "integer",
                                                      list: "list"}.get(types, "object")


def _name(doc: Mapping[str, Any], name: str, where: str) -> str:
    value: str = _field(doc, name, str, where)
    if not value or len(value) > _MAX_NAME:
        raise MetricsError(f"{where}{name}: {value!r} is not a name")
    return value


def _usage(doc: Any, where: str) -> Usage:
    if not isinstance(doc, dict):
        raise MetricsError(f"{where}: {doc!r} is not an object")
    values = [_field(doc, k, int, f"{where}.") for k in ("cpu", "memory")]
    if any(not 0 <= v <= _MAX_INT for v in values):
        raise MetricsError(f"{where}: {values} out of range")
    return Usage(*values)


def parse_document(raw: bytes) -> NodeUsage:
    """The usage an agent's document gives; MetricsError when it is not one of
    ``VERSION``."""
    if len(raw) > MAX_DOCUMENT_BYTES:
        raise MetricsError(f"the document is larger than {MAX_DOCUMENT_BYTES} bytes")
    try:
        doc = json.loads(raw)
    except ValueError as err:
        raise MetricsError(f"not JSON: {err}") from err
    if not isinstance(doc, dict) or doc.get("version") != VERSION:
        raise MetricsError(f"not a usage document of version {VERSION}")
    stamp, window = (float(_field(doc, k, (int, float), "")) for k in ("timestamp", "window"))
    if not (math.isfinite(stamp) and math.isfinite(window) and window > 0):
        raise MetricsError(f"timestamp {stamp}, window {window}: not a window")
    node = None if doc.get("usage") is None else _usage(doc["usage"], "usage")
    pods = []
    for i, p in enumerate(_field(doc, "pods", list, "")):
        where = f"pods[{i}]."
        if not isinstance(p, dict):
            raise MetricsError(f"pods[{i}]: not an object")
        containers = tuple(
            (_name(c, "name", f"{where}containers[{j}].") if isinstance(c, dict) else "",
             _usage(c, f"{where}containers[{j}]"))
            for j, c in enumerate(_field(p, "containers", list, where)))
        pods.append(PodUsage(_name(p, "namespace", where), _name(p, "name", where),
                             _name(p, "uid", where), containers))
    return NodeUsage(stamp, window, node, tuple(pods))


# ---- the Metrics API's objects ------------------------------------------------------------


def cpu_text(nanocores: int) -> str:
    """CPU usage as metrics-server writes it (a quantity scaled to nano: ``12345n``,
    ``250m``, ``1``)."""
    return model_quantity.Quantity(decimal.Decimal(nanocores).scaleb(-9),
                                   model_quantity.DECIMAL_SI).canonical()


def memory_text(size: int) -> str:
    """Memory usage as metrics-server writes it (a binary quantity: ``6789Ki``, ``64Mi``,
    ``1k``, as upstream writes a binary quantity under 1Ki)."""
    return model_quantity.Quantity(decimal.Decimal(size), model_quantity.BINARY).canonical()


def duration_text(seconds: float) -> str:
    """A window as Go prints a ``time.Duration`` (``15s``, ``15.003s``, ``1m0.5s``,
    ``500ms``), to the millisecond."""
    ms = round(seconds * 1000)
    if ms < 1000:
        return f"{ms}ms" if ms else "0s"
    hours, ms = divmod(ms, 3_600_000)
    minutes, ms = divmod(ms, 60_000)
    whole, frac = divmod(ms, 1000)
    text = f"{whole}.{frac:03d}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{hours}h{minutes}m{text}"
    return f"{minutes}m{text}" if minutes else text


def _usage_obj(u: Usage) -> Obj:
    return {"cpu": cpu_text(u.cpu), "memory": memory_text(u.memory)}


def _metadata(obj: Obj, now: float) -> Obj:
    """An object's metrics' metadata: its name (and namespace), its labels, created now (as
    metrics-server makes each object at the request)."""
    md: Obj = {"name": meta.name(obj)}
    if meta.namespace(obj):
        md["namespace"] = meta.namespace(obj)
    md["creationTimestamp"] = meta.format_time(now)
    if labels := meta.labels(obj):
        md["labels"] = dict(labels)
    return md


def node_metrics(node: Obj, usage: NodeUsage, now: float) -> Obj | None:
    """The ``NodeMetrics`` of ``node`` from its agent's ``usage`` (None: not measured)."""
    if usage.node is None:
        return None
    return {"kind": "NodeMetrics", "apiVersion": GROUP_VERSION, "metadata": _metadata(node, now),
            "timestamp": meta.format_time(usage.timestamp),
            "window": duration_text(usage.window), "usage": _usage_obj(usage.node)}


def pod_metrics(pod: Obj, measured: PodUsage, usage: NodeUsage, now: float) -> Obj:
    """The ``PodMetrics`` of ``pod`` from what its node's agent ``measured`` of it."""
    return {"kind": "PodMetrics", "apiVersion": GROUP_VERSION, "metadata": _metadata(pod, now),
            "timestamp": meta.format_time(usage.timestamp),
            "window": duration_text(usage.window),
            "containers": [{"name": name, "usage": _usage_obj(u)}
                           for name, u in measured.containers]}


def pods_measured(usages: Iterable[NodeUsage]) -> dict[tuple[str, str, str], tuple[
        PodUsage, NodeUsage]]:
    """Each pod measured (by namespace, name and uid) with what its agent served."""
    return {(p.namespace, p.name, p.uid): (p, u) for u in usages for p in u.pods}


def total(usages: list[Obj]) -> Obj:
    """The sum of usages as the objects write them (a pod's, of its containers'); a value
    that is not a quantity counts as none."""
    cpu, memory = decimal.Decimal(0), decimal.Decimal(0)
    for u in usages:
        try:
            cpu += model_quantity.parse(u.get("cpu", "0")).value
            memory += model_quantity.parse(u.get("memory", "0")).value
        except ValueError:
            continue
    return {"cpu": cpu_text(int(cpu.scaleb(9))), "memory": memory_text(int(memory))}


def metrics_list(kind: str, items: list[Obj]) -> Obj:
    """A ``NodeMetricsList`` or ``PodMetricsList`` (``kind``: of its items)."""
    return {"kind": f"{kind}List", "apiVersion": GROUP_VERSION, "metadata": {},
            "items": items}


def not_found(kind: str, name: str) -> str:
    """metrics-server's words for an object it has no metrics of (``name``: a pod's is
    ``namespace/name``)."""
    return f'{kind.lower()}.metrics.k8s.io "{name}" not found'
