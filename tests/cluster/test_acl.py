"""Redis in compose.yaml: a password for every client, and each role its own ACL user with
only the commands and keys it needs (ops/redis/users.acl.in)."""

from __future__ import annotations

import pytest
import redis

from tests.cluster.cluster import PREFIX, Cluster
from tests.integration.stack import wait_for

pytestmark = pytest.mark.cluster

OWN_KEY = "{" + PREFIX + "}:obj:Node"


def client(cluster: Cluster, role: str) -> redis.Redis:
    return redis.Redis.from_url(cluster.url(role), socket_timeout=10)


def test_anonymous_and_wrong_password_clients_are_refused(cluster: Cluster) -> None:
    address = cluster.redis_address()
    with pytest.raises(redis.RedisError, match=r"(?i)auth"):
        redis.Redis.from_url(f"redis://{address}/0").ping()
    with pytest.raises(redis.AuthenticationError):
        redis.Redis.from_url(f"redis://node-agent:wrong@{address}/0").ping()


def test_node_agent_user_cannot_flush_or_configure(cluster: Cluster) -> None:
    r = client(cluster, "node-agent")
    assert r.hlen(OWN_KEY) >= 1  # its own keys: yes
    for call in (r.flushall, r.flushdb, lambda: r.config_get("maxmemory"),
                 lambda: r.execute_command("SHUTDOWN")):
        with pytest.raises(redis.exceptions.NoPermissionError):
            call()


def test_node_agent_user_cannot_touch_rq_or_workqueue_keys(cluster: Cluster) -> None:
    r = client(cluster, "node-agent")
    with pytest.raises(redis.exceptions.NoPermissionError):
        r.smembers("rq:workers")
    with pytest.raises(redis.exceptions.NoPermissionError):
        r.set("rq:forged", "1")
    with pytest.raises(redis.exceptions.NoPermissionError):
        r.lpush("{" + PREFIX + "}:wq:queue", "kube-system/forged")
    with pytest.raises(redis.exceptions.NoPermissionError):
        r.xtrim("{" + PREFIX + "}:log", maxlen=0)


def test_reconciler_user_reaches_rq_keys_but_no_other_cluster(cluster: Cluster) -> None:
    r = client(cluster, "reconciler")
    assert r.smembers("rq:workers")
    with pytest.raises(redis.exceptions.NoPermissionError):
        r.get("{another-cluster}:meta")
    with pytest.raises(redis.exceptions.NoPermissionError):
        r.flushall()


def test_each_role_connects_as_its_own_user(cluster: Cluster) -> None:
    admin = client(cluster, "admin")
    roles = {"watcher", "reconciler", "status-writer", "gc", "node-agent"}

    def missing() -> set[str]:
        return roles - {c["user"] for c in admin.client_list()}

    # the cluster fixture waits for the nodes, workers and watcher lease only: the status-
    # writer and gc may still be starting (their first connection is their first read)
    wait_for(lambda: not missing(), timeout=60, interval=0.5,
             what="a connection of every role's own user")
