"""The Metrics API, ``metrics.k8s.io/v1beta1`` (``kubectl top``), as metrics-server serves
it: ``NodeMetrics`` (cluster-scoped) and ``PodMetrics`` (namespaced), get and list, with
label selectors (the node's, the pod's labels) and field selectors (the Node's and Pod's
fields). Acts.

Nothing is kept: each request asks the endpoints of the real node agents it concerns, all at
once, for the usage of their last window (``shared.api.metrics``; at most
``SCRAPE_TIMEOUT`` seconds); a node whose agent does not answer, or answers nothing yet, is
left out, as metrics-server leaves out a node it could not scrape. Simulated nodes publish no
endpoint: they have no metrics (none are made up). The nodes and pods are the watch cache's;
their agents' credentials are one ``MGET``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, TypeVar

import aiohttp

from services.apiserver import listing
from services.apiserver import status as st
from services.apiserver.requests import Target
from services.apiserver.watchcache import WatchCache
from shared.api import metrics, podlog, served
from shared.model import meta
from shared.store import nodeserver
from shared.store.client import Store

log = logging.getLogger(__name__)
Obj = dict[str, Any]
SCRAPE_TIMEOUT = 3.0  # seconds a node agent has to answer
T = TypeVar("T")


class State(Protocol):
    store: Store
    cache: WatchCache

    async def run(self, fn: Callable[..., T], *args: Any) -> T: ...


def serves(t: Target) -> bool:
    """Whether ``t`` is the Metrics API's."""
    return t.resource.info.api_version == metrics.GROUP_VERSION


def with_endpoint(nodes: Iterable[Obj]) -> list[Obj]:
    """The nodes whose agent says it serves an endpoint (a real one's). Decides."""
    return [n for n in nodes if ((n.get("status") or {}).get("daemonEndpoints") or {})
            .get("kubeletEndpoint", {}).get("Port")]


async def gather(state: State, nodes: list[Obj]) -> dict[str, metrics.NodeUsage]:
    """The usage each of ``nodes`` (with an endpoint) serves, by node name, of those that
    answered in time."""
    nodes = with_endpoint(nodes)
    if not nodes:
        return {}
    names = [meta.name(n) for n in nodes]
    creds = await state.run(nodeserver.lookup_many, state.store.r, state.store.keys, names)
    endpoints: dict[str, podlog.Endpoint] = {}
    for node in nodes:
        c = creds.get(meta.name(node))
        if c is None:
            continue
        try:
            endpoints[meta.name(node)] = podlog.endpoint_of(node, c.token, c.sha256, "metrics")
        except podlog.LogError:
            continue
    timeout = aiohttp.ClientTimeout(total=SCRAPE_TIMEOUT)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        got = await asyncio.gather(*(_scrape(session, name, ep)
                                     for name, ep in endpoints.items()))
    return {name: u for name, u in zip(endpoints, got, strict=True) if u is not None}


async def _scrape(session: aiohttp.ClientSession, node: str,
                  ep: podlog.Endpoint) -> metrics.NodeUsage | None:
    try:
        async with session.get(ep.base + metrics.PATH,
                               headers={"Authorization": f"Bearer {ep.token}"},
                               ssl=aiohttp.Fingerprint(bytes.fromhex(ep.sha256))) as resp:
            raw = await resp.content.read(metrics.MAX_DOCUMENT_BYTES + 1)
            if resp.status != 200:
                log.debug("node %s: no metrics: %s %s", node, resp.status, raw[:200])
                return None
        return metrics.parse_document(raw)
    except (aiohttp.ClientError, OSError, TimeoutError, metrics.MetricsError) as err:
        log.info("node %s: no metrics: %s", node, str(err) or type(err).__name__)
        return None


def _of(kind: str, t: Target) -> Target:
    """The Target of the Node or Pod objects whose metrics ``t`` asks for."""
    resource = served.by_kind(kind)
    assert resource is not None
    return Target(resource, t.namespace, t.name, None)


async def serve(state: State, t: Target, query: Mapping[str, str]) -> Obj:
    """The NodeMetrics or PodMetrics ``t`` names, or the list of those the query selects;
    ApiError NotFound for an object without metrics (or none at all)."""
    now = time.time()
    cache = state.cache
    if t.kind == metrics.NODE_METRICS.kind:
        nodes: dict[str, Obj] = cache.objects.get("Node", {})
        if t.name is not None:
            node = nodes.get(f"/{t.name}")
            if node is None:
                raise st.not_found("Node", t.name)
            usage = (await gather(state, [node])).get(t.name)
            found = None if usage is None else metrics.node_metrics(node, usage, now)
            if found is None:
                raise _no_metrics(t, t.name)
            return found
        match = listing.matcher(_of("Node", t), query)
        chosen = [n for n in nodes.values() if match(n)]
        usages = await gather(state, chosen)
        items = [m for n in sorted(chosen, key=meta.name) if meta.name(n) in usages
                 and (m := metrics.node_metrics(n, usages[meta.name(n)], now)) is not None]
        return metrics.metrics_list(t.kind, items)
    pods: dict[str, Obj] = cache.objects.get("Pod", {})
    if t.name is not None:
        pod = pods.get(f"{t.namespace}/{t.name}")
        if pod is None:
            raise st.not_found("Pod", t.name)
        chosen = [pod]
    else:
        match = listing.matcher(_of("Pod", t), query)
        chosen = [p for p in pods.values() if match(p)]
    on = {str((p.get("spec") or {}).get("nodeName") or "") for p in chosen}
    usages = await gather(state, [n for name in sorted(on - {""})
                                  if (n := cache.objects.get("Node", {}).get(f"/{name}"))])
    measured = metrics.pods_measured(usages.values())
    items = [metrics.pod_metrics(p, *measured[k], now)
             for p in sorted(chosen, key=meta.key)
             if (k := (meta.namespace(p), meta.name(p), meta.uid(p))) in measured]
    if t.name is not None:
        if not items:
            raise _no_metrics(t, f"{t.namespace}/{t.name}")
        return items[0]
    return metrics.metrics_list(t.kind, items)


def _no_metrics(t: Target, name: str) -> st.ApiError:
    """metrics-server's 404 for an object it has no metrics of."""
    return st.ApiError("NotFound", metrics.not_found(t.kind, name),
                       {"name": name, "group": t.resource.info.group,
                        "kind": t.kind.lower()})
