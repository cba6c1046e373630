"""Node leases: each node's heartbeat outside the log (upstream's Lease objects in
``kube-node-lease``, renewed by kubelet every 10 s). One string key per node,
``Keys.node_lease``, holding its agent's renew time in milliseconds
(``shared.model.nodelifecycle.NodeLease``, versioned; a value it cannot read counts as no
lease) with a TTL of the lease duration; renewing writes no log entry, so thousands of nodes heartbeat every few seconds
without growing the log. The node lifecycle controller (in gc) reads them and notes when a
value changed (``shared.model.nodelifecycle``); the API server shows them as Leases
(``services.apiserver.leases``).

One key per node, not one hash, so the ACL can grant an agent exactly its nodes' keys
(``~{prefix}:nodelease:<node>``; the simulator of every node gets the pattern ``*``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

import redis

from shared.model.errors import CorruptEntryError
from shared.model.nodelifecycle import NodeLease
from shared.store import scripts
from shared.store.guard import redis_errors, text
from shared.store.keys import Keys

log = logging.getLogger(__name__)

DURATION_SECONDS = 40.0  # kubelet's nodeLeaseDurationSeconds; it renews every quarter of it
CHUNK = 1000


def renew_interval(duration: float) -> float:
    """kubelet renews its lease every quarter of the lease duration (10 s of 40 s)."""
    return duration / 4


class NodeLeases:
    """Renew (an agent) and read (the controller) node leases, batched."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.r, self.keys = client, keys
        self._renew = client.register_script(scripts.RENEW_LEASES)

    def renew(self, nodes: Iterable[str], now: float, duration: float = DURATION_SECONDS) -> None:
        """Acts: set each node's lease to ``now`` (ms) for ``duration`` seconds, ``CHUNK``
        nodes per call of ``RENEW_LEASES`` (a thousand SETs in one command)."""
        value = NodeLease(int(now * 1000)).to_value()
        ttl = max(1, int(duration * 1000))
        lease_key = self.keys.node_lease
        keys = [lease_key(n) for n in nodes]
        with redis_errors("node lease renew"):
            for i in range(0, len(keys), CHUNK):
                self._renew(keys=keys[i:i + CHUNK], args=[value, ttl])

    def read(self, nodes: Sequence[str]) -> dict[str, NodeLease | None]:
        """Each node's lease (None: none, expired, or not readable: logged)."""
        values = self.values([self.keys.node_lease(n) for n in nodes])
        return {n: None if v is None else _lease(n, text(v))
                for n, v in zip(nodes, values, strict=True)}

    def values(self, keys: Sequence[str]) -> list[bytes | None]:
        """The raw values of the lease ``keys``, in one round trip (``MGET`` per
        ``CHUNK``)."""
        with redis_errors("node lease read"):
            pipe = self.r.pipeline(transaction=False)
            for i in range(0, len(keys), CHUNK):
                pipe.mget(keys[i:i + CHUNK])
            return [v for chunk in pipe.execute() for v in chunk]


class LeaseWatch:
    """The node lifecycle controller's reads of the leases: at each read, the leases that
    changed since the last one (raw values compared, so an unchanged lease costs no
    decoding and no comparison of values in Python objects; each distinct value parsed
    once). Acts (reads)."""

    def __init__(self, leases: NodeLeases) -> None:
        self.leases = leases
        self._names: list[str] = []
        self._keys: list[str] = []
        self._raw: list[bytes | None] = []

    def changed(self, nodes: Sequence[str]) -> dict[str, NodeLease | None]:
        """The lease of each of ``nodes`` whose raw value differs from the last read or that
        the last read did not cover (None: none, expired, or not readable: logged)."""
        if nodes != self._names:
            last = dict(zip(self._names, self._raw, strict=True))
            key_of = dict(zip(self._names, self._keys, strict=True))
            lease_key = self.leases.keys.node_lease
            self._keys = [key_of.get(n) or lease_key(n) for n in nodes]
            self._names = list(nodes)
            before: list[object] = [last.get(n, _UNREAD) for n in nodes]
        else:
            before = list(self._raw)
        raw = self.leases.values(self._keys)
        self._raw = raw
        parsed: dict[bytes, NodeLease | None] = {}
        out: dict[str, NodeLease | None] = {}
        for name, value, was in zip(self._names, raw, before, strict=True):
            if value != was:
                if value is None:
                    out[name] = None
                elif value in parsed:
                    out[name] = parsed[value]
                else:
                    out[name] = parsed[value] = _lease(name, text(value))
        return out


_UNREAD = object()  # the raw value of a lease not read before: differs from any


def _lease(node: str, value: str) -> NodeLease | None:
    try:
        return NodeLease.from_value(value)
    except CorruptEntryError as err:
        log.warning("node %s: %s: read as no lease", node, err)
        return None
