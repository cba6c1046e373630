"""Redis in compose.yaml: a password for every client, and each role its own ACL user with
only the commands and keys it needs (ops/redis/users.acl.in)."""

from __future__ import annotations

import copy

import pytest
import redis

from shared.store import errors, noderequests, roles
from shared.store.client import Store
from shared.store.keys import Keys
from tests.cluster.cluster import PREFIX, Cluster, converged, daemonset
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
    assert r.hget(OWN_KEY, "/node-00001")  # what it reads: yes
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
    roles = {"watcher", "reconciler", "status-writer", "gc", "node-agent", "node-admission",
             "apiserver"}

    def missing() -> set[str]:
        return roles - {c["user"] for c in admin.client_list()}

    # the cluster fixture waits for the nodes, workers and watcher lease only: the status-
    # writer and gc may still be starting (their first connection is their first read)
    wait_for(lambda: not missing(), timeout=60, interval=0.5,
             what="a connection of every role's own user")


def test_node_agent_probes_are_refused_on_the_running_cluster(cluster: Cluster) -> None:
    """The security review's probes as the compose node-agent user: rewrite a DaemonSet,
    forge a DELETED entry, forge status, change a pod. Raw commands and the commit script
    are NOPERM; requests to node-admission are dropped or refused; nothing changes."""
    cluster.apply(daemonset("cluster-acl", "probe", image="probe:v1"))
    store = cluster.store()
    key = "cluster-acl/probe"
    wait_for(lambda: converged(store, key, "probe:v1"), timeout=60, interval=0.2,
             what="the probe DaemonSet on every node")
    keys = Keys(PREFIX)
    ds = store.get("DaemonSet", key)
    pod = next(p for p in store.list("Pod", "cluster-acl"))
    agent = client(cluster, "node-agent")
    as_agent = Store(agent, keys, role=roles.NODE_AGENT)
    evil = copy.deepcopy(ds)
    evil["spec"]["template"]["spec"]["containers"][0]["image"] = "evil.example/miner:latest"
    rewrite = store.update_op(evil, ds)
    deleted = as_agent.final_delete_op(ds)
    forged_status = as_agent.status_op(dict(ds, status={**ds["status"], "numberReady": 0}), ds)
    for command in (("HSET", keys.objects("DaemonSet"), key, rewrite.payload),
                    ("XADD", keys.log, "*", "v", "1", "t", "DELETED", "k", "DaemonSet",
                     "n", key, "o", deleted.payload),
                    ("XADD", keys.status_stream, "*", "m", b"forged"),
                    ("HSET", keys.objects("Pod"), pod["metadata"]["namespace"] + "/" +
                     pod["metadata"]["name"], b"forged")):
        with pytest.raises(redis.exceptions.NoPermissionError):
            agent.execute_command(*command)
    with pytest.raises(errors.ForbiddenError):
        as_agent.commit([rewrite])
    changed_pod = copy.deepcopy(pod)
    changed_pod["spec"]["containers"][0]["image"] = "evil.example/miner:latest"
    sender = noderequests.Sender(agent, keys)
    for op in (rewrite, deleted, forged_status,
               store.raw_update_op(changed_pod, pod["metadata"]["resourceVersion"])):
        sender.commit([op], [pod["spec"]["nodeName"]])
    wait_for(lambda: store.r.xlen(keys.node_requests("node-agent")) == 0, timeout=30,
             interval=0.2, what="node-admission to take every request")
    after = store.get("DaemonSet", key)
    assert after["spec"] == ds["spec"]
    assert after["status"]["numberReady"] == ds["status"]["numberReady"]
    images = {p["spec"]["containers"][0]["image"] for p in store.list("Pod", "cluster-acl")}
    assert images == {"probe:v1"}
    logs = cluster.compose("logs", "--no-color", "node-admission")
    assert "dropped" in logs and "commit refused: role node-agent" in logs
