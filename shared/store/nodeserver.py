"""How to reach a node agent's own HTTPS endpoint (kubelet's server: it serves its pods'
logs). The address and port are public, in the Node (its InternalIP and
``status.daemonEndpoints.kubeletEndpoint.Port``); what a caller needs to trust the endpoint
and be trusted by it is not: the agent publishes it here, outside the log, when it starts —
a bearer token it made for this run and the SHA-256 of its self-signed certificate, which a
caller pins. Only the agent of that node may write the key (ACL); the API server and the CLI
read it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import redis

from shared.api.podlog import Endpoint, LogError, endpoint_of
from shared.store.client import Store
from shared.store.guard import redis_errors, text
from shared.store.keys import Keys

_HEX64 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Credentials:
    token: str
    sha256: str  # hex digest of the endpoint's certificate (DER)


def publish(client: redis.Redis, keys: Keys, node: str, creds: Credentials) -> None:
    """Acts: record the credentials of ``node``'s endpoint (replacing an earlier run's)."""
    with redis_errors("node server publish"):
        client.set(keys.node_server(node),
                   json.dumps({"token": creds.token, "sha256": creds.sha256}))


def lookup(client: redis.Redis, keys: Keys, node: str) -> Credentials | None:
    """The credentials ``node``'s agent published; None when none (or malformed ones)."""
    with redis_errors("node server lookup"):
        raw = client.get(keys.node_server(node))
    return _credentials(raw)


def lookup_many(client: redis.Redis, keys: Keys, nodes: list[str]) -> dict[str, Credentials]:
    """The credentials the agents of ``nodes`` published, of those that did (one ``MGET``)."""
    if not nodes:
        return {}
    with redis_errors("node server lookup"):
        values = client.mget([keys.node_server(n) for n in nodes])
    return {n: creds for n, raw in zip(nodes, values, strict=True)
            if (creds := _credentials(raw)) is not None}


def _credentials(raw: bytes | str | None) -> Credentials | None:
    if raw is None:
        return None
    try:
        doc = json.loads(text(raw))
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    token, digest = doc.get("token"), doc.get("sha256")
    if not isinstance(token, str) or not token or not isinstance(digest, str) \
            or not _HEX64.fullmatch(digest):
        return None
    return Credentials(token, digest)


def endpoint(store: Store, node_name: str, serves: str = "logs") -> Endpoint:
    """The endpoint of the node ``node_name`` (its Node and what its agent published);
    LogError when it has none (saying the node ``serves`` no logs, no exec)."""
    node = store.try_get("Node", "/" + node_name)
    if node is None:
        raise LogError(f'node "{node_name}" not found')
    creds = lookup(store.r, store.keys, node_name)
    return endpoint_of(node, creds.token if creds else "", creds.sha256 if creds else "",
                       serves)
