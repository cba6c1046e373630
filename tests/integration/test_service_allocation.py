"""Two API servers allocating for Services at once, against a real redis-server: each picks
a cluster IP and node ports from the view as it prepares a write, and the commit script
refuses the one whose pick another Service's write took meanwhile ("taken"); the store then
prepares it again, picking anew. No two Services ever hold one address or port."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest

from shared.api import serviceips, writes
from shared.eventlog.entry import CommitResult
from shared.model import meta
from shared.store import errors
from shared.store.client import Op, Store, connect
from shared.store.keys import Keys
from shared.store.log import redis_reader

NODE_PORT = {"apiVersion": "v1", "kind": "Service",
             "metadata": {"name": "first", "namespace": "default"},
             "spec": {"type": "NodePort", "selector": {"app": "agent"},
                      "ports": [{"port": 80, "protocol": "TCP"}]}}


@pytest.fixture
def store(redis_url: str, prefix: str) -> Store:
    return Store(connect(redis_url), Keys(prefix))


@pytest.fixture
def replica(redis_url: str, prefix: str) -> Store:
    """A second API server's store on the same cluster."""
    return Store(connect(redis_url), Keys(prefix))


def named(name: str, svc: dict = NODE_PORT) -> dict:
    out = copy.deepcopy(svc)
    out["metadata"]["name"] = name
    return out


def holding(svc: dict) -> tuple[str, int]:
    return svc["spec"]["clusterIP"], svc["spec"]["ports"][0]["nodePort"]


def prepared_as(store: Store, name: str, ip: str, port: int) -> Op:
    """A Service's create as an API server prepares it from a view that lacks the Service
    holding ``ip`` and ``port`` (written meanwhile by another): they are its picks."""
    svc = named(name)
    svc["spec"]["clusterIP"], svc["spec"]["clusterIPs"] = ip, [ip]
    svc["spec"]["ports"][0]["nodePort"] = port
    return Op.of(writes.create(svc, store.clock()))  # (no allocation: the view has both)


def stale_first_read(replica: Store, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The replica's first read of the view misses the Service "first" (committed after
    it read); the list returned counts its reads."""
    reads: list[int] = []
    listed = replica.list

    def stale_once(kind: str, namespace: str | None = None) -> list[dict]:
        reads.append(1)
        out = listed(kind, namespace)
        return [s for s in out if meta.name(s) != "first"] if len(reads) == 1 else out
    monkeypatch.setattr(replica, "list", stale_once)
    return reads


def added(store: Store, name: str) -> int:
    return sum(1 for e in redis_reader(store.r, store.keys).read(count=10_000)
               if e.kind == "Service" and e.key == f"default/{name}" and e.type == "ADDED")


def test_a_commit_refuses_an_address_or_port_another_service_took_meanwhile(
        store: Store, replica: Store) -> None:
    ip, port = holding(store.create(named("first")))
    free_port, free_ip = 30000 if port != 30000 else 30001, "10.96.200.200"
    for name, picks, what in (("same-ip", (ip, free_port), f"IP {ip}"),
                              ("same-port", (free_ip, port), f"node port {port}")):
        op = prepared_as(replica, name, *picks)
        res = replica.commit([op])[0]
        assert res.status == CommitResult.TAKEN, res
        assert res.value == f"{what} is held by Service default/first"
        assert replica.try_get("Service", f"default/{name}") is None
    assert added(store, "same-ip") == added(store, "same-port") == 0
    # an update of the holder keeping what it holds is its own
    first = store.get("Service", "default/first")
    first["metadata"]["labels"] = {"kept": "yes"}
    assert holding(store.update(first)) == (ip, port)


def test_two_services_of_one_batch_cannot_take_the_same_port(store: Store) -> None:
    ops = [prepared_as(store, "a", "10.96.1.1", 30111),
           prepared_as(store, "b", "10.96.1.2", 30111)]
    results = store.commit(ops, atomic=False)
    assert [r.status for r in results] == [CommitResult.OK, CommitResult.TAKEN]
    assert results[1].value == "node port 30111 is held by Service default/a"


def test_a_create_that_lost_the_race_picks_again(
        store: Store, replica: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The replica reads a view without "first" (it is committed after the replica read)
    and picks its address and port; the commit refuses them and the store prepares the
    write again, from the view as it then is."""
    first = named("first")
    first["spec"]["ports"][0]["nodePort"] = 30500
    ip, _ = holding(store.create(first))
    reads = stale_first_read(replica, monkeypatch)
    picks: Callable[..., str] = serviceips._free_ip

    def first_pick(ips: set[str], rng) -> str:  # type: ignore[no-untyped-def]
        return ip if ip not in ips else picks(ips, rng)
    monkeypatch.setattr(serviceips, "_free_ip", first_pick)
    svc = replica.create(named("second", {**NODE_PORT, "spec": {
        **NODE_PORT["spec"], "ports": [{"port": 80, "protocol": "TCP", "nodePort": 31000}]}}))
    assert len(reads) == 2  # prepared twice
    assert svc["spec"]["clusterIP"] != ip and svc["spec"]["ports"][0]["nodePort"] == 31000
    assert added(store, "second") == 1


def test_a_given_address_taken_meanwhile_is_refused_in_upstreams_words(
        store: Store, replica: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Prepared again, a write whose own (not picked) address another Service took
    meanwhile is refused by the registry's rule, as when it was taken before."""
    ip, _ = holding(store.create(named("first")))
    reads = stale_first_read(replica, monkeypatch)
    svc = named("second")
    svc["spec"]["clusterIP"] = ip
    with pytest.raises(errors.InvalidError) as err:
        replica.create(svc)
    assert f"spec.clusterIPs: Invalid value: []string{{\"{ip}\"}}: failed to allocate IP " \
        f"{ip}: provided IP is already allocated" in str(err.value)
    assert len(reads) == 2 and added(store, "second") == 0
