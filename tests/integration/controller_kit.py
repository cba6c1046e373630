"""Builders and reads shared by the controller, watcher, worker and chaos tests (real Redis,
real processes). Reads go straight to the store; nothing here waits except ``wait_for``."""

from __future__ import annotations

import copy
import urllib.request
from collections import defaultdict
from typing import Any

from shared.daemonset import dsutil
from shared.model import meta
from shared.model.podutil import target_node
from shared.store import codec
from shared.store.client import Store
from shared.store.expectations import RedisExpectations
from shared.store.server import free_port
from shared.store.workqueue import RedisWorkQueue
from tests.integration.stack import Stack, wait_for

Obj = dict[str, Any]


def daemonset(name: str, namespace: str = "default", *, labels: dict[str, str] | None = None,
              image: str = "registry.k8s.io/pause:3.9", node_selector: dict[str, str] | None = None,
              selector: Obj | None = None, pod: Obj | None = None, **spec: Any) -> Obj:
    """A DaemonSet manifest (``pod``: its pod spec, else one ``image`` container); extra
    keyword arguments go into ``spec``."""
    lb = dict(labels or {"app": name})
    pod_spec: Obj = copy.deepcopy(pod) if pod is not None else \
        {"containers": [{"name": "main", "image": image}]}
    if node_selector:
        pod_spec["nodeSelector"] = dict(node_selector)
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": selector if selector is not None else {"matchLabels": dict(lb)},
                 "template": {"metadata": {"labels": dict(lb)}, "spec": pod_spec}, **spec},
    }


def owned_pods(store: Store, key: str, *, live_only: bool = True) -> list[Obj]:
    """Pods whose controller ref is the DaemonSet ``key`` (by uid); without terminating ones
    unless ``live_only`` is False."""
    ds = store.try_get("DaemonSet", key)
    if ds is None:
        return []
    pods = [p for p in store.list("Pod", meta.namespace(ds))
            if (meta.controller_ref(p) or {}).get("uid") == meta.uid(ds)]
    return [p for p in pods if not (live_only and meta.is_being_deleted(p))]


def nodes_of(pods: list[Obj]) -> list[str]:
    return sorted(target_node(p) or "" for p in pods)


def one_per_node(store: Store, key: str, nodes: list[str]) -> bool:
    return nodes_of(owned_pods(store, key)) == sorted(nodes)


def status(store: Store, key: str) -> Obj:
    ds = store.try_get("DaemonSet", key)
    return dict((ds or {}).get("status") or {})


def fulfilled(store: Store, key: str) -> bool:
    """The DaemonSet's expectations are met (no entry, or add <= 0 and del <= 0)."""
    entry = RedisExpectations(store.r, store.keys).get(key)
    return entry is None or entry.fulfilled()


def queue_idle(store: Store) -> bool:
    """Nothing queued, being processed or delayed in the workqueue."""
    st = RedisWorkQueue(store.r, store.keys).state()
    return not (st.queue or st.processing or st.waiting or st.dirty)


def rq_worker_registered(stack: Stack, name: str) -> bool:
    return bool(stack.store.r.exists(f"rq:worker:{name}"))


def log_entries(store: Store, kind: str | None = None) -> list[codec.Entry]:
    """Every log entry (of ``kind``), decoded, in log order."""
    out: list[codec.Entry] = []
    last = "-"
    while True:
        raw: Any = store.r.xrange(store.keys.log, min=last, count=5000)
        if last != "-":
            raw = raw[1:]
        if not raw:
            return out
        for eid, fields in raw:
            e = codec.decode_entry(eid, fields)
            if kind is None or e.kind == kind:
                out.append(e)
        last = raw[-1][0].decode()


def revision_of(pod: Obj) -> str:
    """The pod's controller-revision-hash label ("" when it has none)."""
    return meta.labels(pod).get(dsutil.HASH_LABEL, "")


def live_together(entries: list[codec.Entry], per_revision: bool = False) -> list[str]:
    """Replay Pod entries in log order: the places where a DaemonSet (by uid) held two live
    pods on one node at once (of one revision, with ``per_revision``: a surge legitimately
    runs an old and a new pod side by side)."""
    live: dict[tuple[str, ...], set[str]] = defaultdict(set)
    problems: list[str] = []
    for e in entries:
        ref = meta.controller_ref(e.obj)
        if ref is None:
            continue
        slot: tuple[str, ...] = (str(ref.get("uid")), target_node(e.obj) or "")
        if per_revision:
            slot += (revision_of(e.obj),)
        if e.type == "DELETED" or meta.is_being_deleted(e.obj):
            live[slot].discard(e.key)
            continue
        live[slot].add(e.key)
        if len(live[slot]) > 1:
            problems.append(f"{e.id}: {sorted(live[slot])} live together on {slot[1]}")
    return problems


def decisions(store: Store, key: str) -> list[Obj]:
    return [e.obj for e in log_entries(store) if e.type == "DECISION" and e.key == key]


def events(store: Store, ds_key: str, reason: str | None = None) -> list[Obj]:
    """Events about the DaemonSet ``ds_key`` (namespace/name), optionally of one reason."""
    ns, name = ds_key.split("/", 1)
    return [e for e in store.list("Event", ns)
            if (e.get("involvedObject") or {}).get("name") == name
            and (reason is None or e.get("reason") == reason)]


def mutate_node(store: Store, name: str, fn: Any) -> None:
    def change(node: Obj) -> Obj:
        node = copy.deepcopy(node)
        fn(node)
        return node

    store.mutate("Node", "/" + name, change)


def start(stack: Stack, *, workers: int = 1, nodes: int = 3,
          agent_args: tuple[str, ...] = ()) -> list[str]:
    """Start every process with ``nodes`` simulated nodes; returns their names once ready."""
    stack.start_all(workers=workers, nodes=nodes, agent_args=agent_args)
    names = [f"node-{i:05d}" for i in range(1, nodes + 1)]
    wait_for(lambda: len(stack.store.list("Node")) >= nodes, what=f"{nodes} nodes registered")
    return names


def start_with_metrics(stack: Stack, workers: int = 1,
                       agent_args: tuple[str, ...] = ()) -> dict[str, int]:
    """Start every process with its own ``--metrics-port``; returns process name → port."""
    names = ["watcher", *(f"reconciler-{i}" for i in range(workers)), "status-writer", "gc",
             "node-agent"]
    ports = {n: free_port() for n in names}
    for name in names:
        port = str(ports[name])
        if name.startswith("reconciler-"):
            stack.start(name, "reconciler", "--metrics-port", port, "--name",
                        f"{stack.prefix}-r{name.rsplit('-', 1)[1]}")
        elif name == "node-agent":
            stack.start(name, "node-agent", "--metrics-port", port, *agent_args)
        else:
            stack.start(name, name, "--metrics-port", port)
    return ports


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return str(resp.read().decode())


def metric_value(text: str, metric: str, **labels: str) -> float | None:
    """The value of the first sample ``metric{labels...}`` in a Prometheus text page."""
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(metric):
            continue
        head, _, value = line.rpartition(" ")
        sample, _, lbl = head.partition("{")
        if sample != metric:
            continue
        if all(f'{k}="{v}"' in lbl for k, v in labels.items()):
            return float(value)
    return None
