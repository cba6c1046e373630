"""Node leases as the API serves them: ``coordination.k8s.io/v1`` Leases in
``kube-node-lease``, read only (get and list).

A node agent renews its nodes' leases outside the log, one Redis key per node holding its
renew time (``shared.store.nodelease``), so that thousands of heartbeats a second write no
log entry. A Lease is made from that key and the Node in the watch cache: named after the
node, held by it, owned by it, renewed at the key's time, with that time (in milliseconds) as
its resourceVersion. A node whose agent has not renewed within the lease's duration has no
key left, so no Lease (``kubectl describe node`` then says it failed to get one). The
duration an agent renews for is its own setting and not in the key, so
``leaseDurationSeconds`` is not given. No watch: leases change every few seconds per node.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from shared.model import kinds, meta
from shared.model.errors import CorruptEntryError
from shared.model.nodelifecycle import NodeLease
from shared.store import adapters
from shared.store.client import Store
from shared.store.guard import text
from shared.store.nodelease import NodeLeases

Obj = dict[str, Any]

_UID_SPACE = uuid.UUID("7d1f3e0c-3b8e-4a55-9d0e-6c4f1f6f2a11")  # lease uids, from node uids


def micro_time(ms: int) -> str:
    """``metav1.MicroTime``: RFC 3339 in UTC with microseconds."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_object(node: Obj, renew_ms: int) -> Obj:
    """The Lease of ``node`` renewed at ``renew_ms``. Decides."""
    name, node_uid = meta.name(node), meta.uid(node)
    md: Obj = {"name": name, "namespace": kinds.NODE_LEASE_NAMESPACE,
               "uid": str(uuid.uuid5(_UID_SPACE, node_uid or name)),
               "resourceVersion": str(renew_ms),
               "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name,
                                    "uid": node_uid}]}
    created = meta.creation_timestamp(node)
    if created:
        md["creationTimestamp"] = created
    return {"apiVersion": kinds.LEASE.api_version, "kind": kinds.LEASE.kind, "metadata": md,
            "spec": {"holderIdentity": name, "renewTime": micro_time(renew_ms)}}


def _renewed(raw: bytes | None) -> int | None:
    if raw is None:
        return None
    try:
        return NodeLease.from_value(text(raw)).renew_ms
    except (CorruptEntryError, UnicodeDecodeError):
        return None  # as the node lifecycle controller reads it: no lease


def read(store: Store, nodes: Sequence[Obj]) -> list[Obj]:
    """The Leases of ``nodes`` that have one, in their order (one ``MGET`` per thousand
    nodes). Acts (reads Redis)."""
    leases = adapters.on(store, NodeLeases)
    key = leases.keys.node_lease
    values = leases.values([key(meta.name(n)) for n in nodes])
    return [lease_object(n, ms) for n, raw in zip(nodes, values, strict=True)
            if (ms := _renewed(raw)) is not None]


def nodes_for(namespace: str | None, name: str | None, nodes: Mapping[str, Obj]) -> list[Obj]:
    """The nodes (of ``nodes``, by their keys ``/<name>``) whose leases a request in
    ``namespace`` (None: all) names: the one named ``name``, or all of them by name.
    Decides."""
    if namespace not in (None, kinds.NODE_LEASE_NAMESPACE):
        return []
    if name is not None:
        found = nodes.get(f"/{name}")
        return [] if found is None else [found]
    return sorted(nodes.values(), key=meta.name)
