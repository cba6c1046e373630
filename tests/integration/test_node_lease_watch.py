"""The node lifecycle controller's lease reads (``shared.store.nodelease.LeaseWatch``, real
Redis): each read gives the leases that changed since the last one and those of nodes it
did not read then, so a look decides only what changed."""

from __future__ import annotations

import redis

from shared.model.nodelifecycle import NodeLease
from shared.store import nodelease
from shared.store.keys import Keys
from shared.store.nodelease import LeaseWatch, NodeLeases


def test_a_lease_watch_reads_only_what_changed_since_its_last_read(
        client: redis.Redis, keys: Keys) -> None:
    leases = NodeLeases(client, keys)
    watch = LeaseWatch(leases)
    names = [f"node-{i:04d}" for i in range(2500)]  # three MGET chunks
    leases.renew(names[:2000], 1000.0)
    first = watch.changed(names)
    assert first == {**{n: NodeLease(1_000_000) for n in names[:2000]},
                     **{n: None for n in names[2000:]}}  # every node, read once
    assert watch.changed(names) == {}  # nothing renewed since
    leases.renew(names[5:7] + names[2400:2401], 1010.0)
    client.delete(keys.node_lease(names[8]))  # expired
    client.set(keys.node_lease(names[9]), "2:{}")  # a later version: read as no lease
    assert watch.changed(names) == {names[5]: NodeLease(1_010_000),
                                    names[6]: NodeLease(1_010_000),
                                    names[2400]: NodeLease(1_010_000),
                                    names[8]: None, names[9]: None}
    # a node gone and one new: only the new one is read as changed
    fewer = [n for n in names if n != names[3]] + ["node-new"]
    leases.renew(["node-new"], 1020.0)
    assert watch.changed(fewer) == {"node-new": NodeLease(1_020_000)}
    # a node back after it was left out is read as new, its lease as it is
    assert watch.changed(names) == {names[3]: NodeLease(1_000_000)}
    assert nodelease.CHUNK < len(names)


def test_renewing_sets_each_lease_to_the_time_with_the_lease_duration_as_its_ttl(
        client: redis.Redis, keys: Keys) -> None:
    leases = NodeLeases(client, keys)
    names = [f"node-{i:04d}" for i in range(2500)]  # three calls of RENEW_LEASES
    leases.renew(iter(names), 1000.5, duration=30.0)
    leases.renew([], 2000.0)  # nothing to renew: nothing written
    assert leases.read(names) == {n: NodeLease(1_000_500) for n in names}
    ttls = {client.pttl(keys.node_lease(n)) for n in (names[0], names[1500], names[-1])}
    assert all(29_000 < ttl <= 30_000 for ttl in ttls), ttls
    leases.renew(names[1:2], 1001.0, duration=0.0001)  # at least a millisecond
    assert client.pttl(keys.node_lease(names[1])) in (0, 1, -2)
    assert client.exists(keys.node_lease("node-2500")) == 0
