"""The whole stack under the compose cluster's ACL file (each process as its own role's
Redis user): it runs a DaemonSet's life without one NOPERM; and each role's user is refused
(NOPERM) every command it must not have."""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from services.node_agent import lifecycle
from shared.model import meta
from shared.store import errors, logmark, noderequests, roles, scripts
from shared.store.client import Store, connect
from shared.store.keys import Keys
from tests.integration.acl_cluster import USERS, AclRedis
from tests.integration.stack import Stack, wait_for
from tests.integration.test_store import DS


@pytest.fixture
def acl(tmp_path: Path, prefix: str) -> Iterator[AclRedis]:
    server = AclRedis(tmp_path, prefix)
    yield server
    server.stop()


@pytest.fixture
def acl_stack(acl: AclRedis, prefix: str, tmp_path: Path) -> Iterator[Stack]:
    processes = ("watcher", "reconciler", "status-writer", "gc", "node-agent", "node-admission")
    stack = Stack(acl.url("admin"), prefix, tmp_path, {p: acl.url(p) for p in processes})
    yield stack
    stack.stop()


def _acl_log(acl: AclRedis) -> list[dict[str, Any]]:
    return list(redis.Redis.from_url(acl.url("admin"), decode_responses=True).acl_log())


def test_the_stack_runs_a_daemonsets_life_under_the_acl_without_one_noperm(
        acl: AclRedis, acl_stack: Stack, prefix: str) -> None:
    cli = Store(connect(acl.url("cli")), Keys(prefix), role=roles.ADMIN)
    acl_stack.start("node-admission", "node-admission")
    acl_stack.start_all(workers=1, nodes=3, agent_args=("--grace", "0.2", "--via-admission"))
    cli.create(DS)

    def ready(image: str) -> bool:
        st = acl_stack.status("default/agent")
        pods = [p for p in cli.list("Pod", "default")
                if p["spec"]["containers"][0]["image"] == image and
                (p.get("status") or {}).get("phase") == "Running"]
        return len(pods) == 3 and st.get("numberReady") == 3 and \
            st.get("updatedNumberScheduled") == 3

    try:
        wait_for(lambda: ready("agent:1"), timeout=60, what="3 pods ready and counted")
    finally:
        print("ACL LOG:", _acl_log(acl))
    ds = cli.get("DaemonSet", "default/agent")
    new = copy.deepcopy(ds)
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "agent:2"
    cli.update(new)
    wait_for(lambda: ready("agent:2") and len(cli.list("Pod", "default")) == 3, timeout=90,
             what="the rollout to agent:2")
    cli.delete("DaemonSet", "default/agent")
    wait_for(lambda: not cli.list("Pod", "default"), timeout=60,
             what="the pods collected after their DaemonSet")
    # a namespace deleted: gc deletes its DaemonSet, the pods go, then gc deletes it
    cli.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    in_team = copy.deepcopy(DS)
    in_team["metadata"]["namespace"] = "team"
    cli.create(in_team)
    wait_for(lambda: len(cli.list("Pod", "team")) == 3, timeout=60, what="3 pods in team")
    cli.delete("Namespace", "/team")
    wait_for(lambda: cli.try_get("Namespace", "/team") is None, timeout=60,
             what="the namespace emptied, then deleted")
    assert cli.list("DaemonSet", "team") == [] and cli.list("Pod", "team") == []
    assert _acl_log(acl) == []


# ---- each role's user: what it must not do is NOPERM -------------------------------------

EVAL = ("EVAL", "return 1", "0")
RENEW_LEASES_SHA = hashlib.sha1(scripts.RENEW_LEASES.encode()).hexdigest()
FUNCTION = ("FUNCTION", "LOAD", "#!lua name=probe\nredis.register_function('f', function() return 1 end)")


def forbidden(tag: str) -> dict[str, list[tuple[str, ...]]]:
    """Per role, commands its user must be refused (NOPERM) with the keys of cluster ``tag``."""
    log, status = f"{tag}:log", f"{tag}:status"
    for_all = [EVAL, FUNCTION, ("FLUSHALL",), ("CONFIG", "GET", "maxmemory"), ("KEYS", "*"),
               ("SCRIPT", "FLUSH"), ("ACL", "SETUSER", "intruder", "on")]
    log_rewrites = [("DEL", log), ("SET", log, "x"), ("RENAME", log, f"{tag}:gone"),
                    ("XTRIM", log, "MAXLEN", "0"), ("XDEL", log, "1-1")]
    obj = {k: (("HSET", f"{tag}:obj:{k}", "default/x", "forged"),
               ("DEL", f"{tag}:obj:{k}")) for k in ("DaemonSet", "Pod", "Node")}
    # a node agent's endpoint credentials run commands in pods: the API server's and the
    # CLI's to read, not the controllers'
    endpoint = ("GET", f"daemonbus-nodeserver:{tag}:n1")
    return {
        "cli": for_all,
        "watcher": for_all + log_rewrites + [("XADD", log, "*", "t", "DELETED"),
                                              *obj["DaemonSet"], *obj["Pod"], endpoint],
        "reconciler": for_all + log_rewrites + [*obj["Node"], ("DEL", f"{tag}:obj:Pod"),
                                                ("HSET", f"{tag}:status:pos", "k", "1-1"),
                                                endpoint],
        "status-writer": for_all + log_rewrites + [endpoint,
            ("XADD", status, "*", "m", "forged"), *obj["Pod"], ("DEL", status),
            ("DEL", f"{tag}:obj:DaemonSet"), ("LPUSH", f"{tag}:wq:queue", "default/x")],
        # (gc's node lifecycle controller commits Node conditions and taints: HSET of the
        # Node hash is its commit's; its SET is its leader lease's only)
        "gc": for_all + log_rewrites + [("DEL", f"{tag}:obj:Node"),
                                        ("XADD", status, "*", "m", "forged"),
                                        ("DEL", f"{tag}:obj:Pod"),
                                        ("SET", f"{tag}:lease:watcher", "gc"),
                                        ("SET", f"{tag}:nodelease:n1", "1"), endpoint],
        "node-agent": for_all + log_rewrites + [
            ("XADD", log, "*", "t", "DELETED"), *obj["DaemonSet"], *obj["Pod"], *obj["Node"],
            ("XADD", status, "*", "m", "forged"), ("XADD", f"{tag}:nodereq:other", "*", "m", "x"),
            ("EVALSHA", "0" * 40, "0"), ("LPUSH", f"{tag}:wq:queue", "default/x"),
            ("HSET", f"{tag}:exp", "default/x", "forged"), ("SMEMBERS", "rq:workers"),
            ("SET", f"{tag}:lease:node-lifecycle", "agent"), ("DEL", f"{tag}:nodelease:n1"),
            # its lease script on anything but a lease
            ("EVALSHA", RENEW_LEASES_SHA, "2", f"{tag}:nodelease:n1", log, "1", "1000"),
            ("EVALSHA", RENEW_LEASES_SHA, "1", f"{tag}:lease:node-lifecycle", "1", "1000"),
            endpoint],
        "node-admission": for_all + log_rewrites + [
            *obj["DaemonSet"], ("DEL", f"{tag}:obj:Pod"), ("XADD", status, "*", "m", "x"),
            ("XADD", f"{tag}:nodereq:node-agent", "*", "m", "forged"), endpoint],
    }


@pytest.mark.parametrize("role", ["cli", "watcher", "reconciler", "status-writer", "gc",
                                  "node-agent", "node-admission"])
def test_each_role_is_refused_every_command_it_must_not_have(acl: AclRedis, prefix: str,
                                                             role: str) -> None:
    r = redis.Redis.from_url(acl.url(role))
    assert r.ping()
    allowed = []
    for command in forbidden(Keys(prefix).tag)[role]:
        try:
            r.execute_command(*command)
            allowed.append(command)
        except redis.exceptions.NoPermissionError:
            continue
    assert allowed == [], f"{role} may run what it must not"
    log = _acl_log(acl)
    assert log and {e["username"] for e in log} == {USERS[role]}


# ---- the node agent's probes, end to end on the running stack ---------------------------

def _second_agent(acl: AclRedis, prefix: str, user: str, nodes_glob: str) -> redis.Redis:
    """Acts: add ACL user ``user`` with the node agent's rights but the nodes ``nodes_glob``
    only (as a per-machine agent would have), and return a client of it."""
    line = next(ln for ln in Path(acl.server.aclfile).read_text().splitlines()
                if ln.startswith("user node-agent "))
    tag = Keys(prefix).tag
    rules = re.findall(r"\([^)]*\)|\S+", line)[3:]  # after "user node-agent on"
    rules = [">probe-password" if r.startswith("#") else
             r.replace("nodereq:node-agent", f"nodereq:{user}")
              .replace(f"daemonbus-node:{tag}:*", f"daemonbus-node:{tag}:{nodes_glob}")
              .replace(f"daemonbus-nodeserver:{tag}:*",
                       f"daemonbus-nodeserver:{tag}:{nodes_glob}")
             for r in rules]
    admin = redis.Redis.from_url(acl.url("admin"))
    admin.execute_command("ACL", "SETUSER", user, "on", *rules)
    return redis.Redis.from_url(
        f"redis://{user}:probe-password@127.0.0.1:{acl.server.port}/0")


def test_the_node_agents_probes_are_refused_end_to_end(acl: AclRedis, acl_stack: Stack,
                                                       prefix: str) -> None:
    """The probes of the security review, as the node-agent user of a running stack: rewrite
    a DaemonSet, forge a DELETED entry, forge status, write another node's pod. Each way in
    (raw commands, the commit script, requests to node-admission) is refused and nothing
    changes; a request for its own node goes through."""
    keys = Keys(prefix)
    cli = Store(connect(acl.url("cli")), keys, role=roles.ADMIN)
    agent_b = _second_agent(acl, prefix, "node-agent-b", "node-b*")
    acl_stack.start("node-admission", "node-admission", "--agent", "node-agent",
                    "--agent", "node-agent-b")
    acl_stack.start_all(workers=1, nodes=2, agent_args=("--via-admission",))
    cli.create(lifecycle.new_node("node-b1"))
    ds = cli.create(DS)
    wait_for(lambda: acl_stack.status("default/agent").get("numberReady") == 3, timeout=60,
             what="the DaemonSet ready on its 3 nodes")
    ds = cli.get("DaemonSet", "default/agent")
    pod_a = next(p for p in cli.list("Pod", "default") if p["spec"]["nodeName"] == "node-00001")
    before = {"ds": ds, "pod": pod_a, "log": cli.r.xlen(keys.log)}

    agent = redis.Redis.from_url(acl.url("node-agent"))
    as_agent = Store(agent, keys, role=roles.NODE_AGENT)
    evil = copy.deepcopy(ds)
    evil["spec"]["template"]["spec"]["containers"][0]["image"] = "evil.example/miner:latest"
    rewrite = cli.update_op(evil, ds)
    forged_status = as_agent.status_op(dict(ds, status={**ds["status"], "numberReady": 0}), ds)
    deleted = as_agent.final_delete_op(ds)
    # raw commands and the commit script itself: NOPERM
    for command in (("HSET", keys.objects("DaemonSet"), "default/agent", rewrite.payload),
                    ("XADD", keys.log, "*", "v", "1", "t", "DELETED", "k", "DaemonSet",
                     "n", "default/agent", "o", deleted.payload),
                    ("XADD", keys.status_stream, "*", "m", b"forged")):
        with pytest.raises(redis.exceptions.NoPermissionError):
            agent.execute_command(*command)
    with pytest.raises(errors.ForbiddenError, match="may not run the commit"):
        as_agent.commit([rewrite])
    # requests to node-admission: dropped or refused
    node_a = noderequests.Sender(agent, keys, "node-agent")
    for op in (rewrite, deleted, forged_status):
        node_a.commit([op], ["node-00001"])
    other_node = copy.deepcopy(pod_a)
    other_node["status"] = {**pod_a["status"], "phase": "Failed"}
    sender_b = noderequests.Sender(agent_b, keys, "node-agent-b")
    sender_b.commit([as_agent.status_op(other_node, pod_a)], ["node-00001"])
    node_b1 = cli.get("Node", "/node-b1")
    marked = copy.deepcopy(node_b1)
    marked["status"]["conditions"].append({"type": "Probe", "status": "True"})
    sender_b.commit([as_agent.status_op(marked, node_b1)], ["node-b1"])

    def consumed() -> bool:
        return all(cli.r.xlen(keys.node_requests(u)) == 0 for u in ("node-agent", "node-agent-b"))

    wait_for(consumed, timeout=30, what="node-admission to take every request")
    wait_for(lambda: any(c["type"] == "Probe" for c in
                         cli.get("Node", "/node-b1")["status"]["conditions"]),
             timeout=30, what="node-agent-b's write for its own node")
    after = cli.get("DaemonSet", "default/agent")
    assert after["spec"] == before["ds"]["spec"] and after["status"] == before["ds"]["status"]
    assert cli.get("Pod", meta.key(pod_a))["status"]["phase"] != "Failed"
    entries = cli.r.xrange(keys.log, min=before["ds"]["metadata"]["resourceVersion"])
    assert not [e for _id, e in entries
                if e[b"t"] == b"DELETED" and e[b"k"] == b"DaemonSet"], "no forged deletion"
    admission_log = (acl_stack.log_dir / "node-admission.log").read_text()
    assert admission_log.count("dropped: malformed op") == 3  # no DaemonSet in a request
    assert "commit refused: role node-agent" in admission_log  # another node's pod


@pytest.mark.parametrize("role", ["watcher", "reconciler", "status-writer", "gc", "node-agent",
                                  "node-admission"])
def test_each_role_may_create_the_logs_identity(acl: AclRedis, prefix: str, role: str) -> None:
    """Whichever process starts first creates the log's epoch (shared.store.logmark): every
    role's user may, and nothing more of the meta hash."""
    keys = Keys(prefix)
    Store(connect(acl.url("admin")), keys).create(lifecycle.new_node("node-1"))
    redis.Redis.from_url(acl.url("admin")).hdel(keys.meta, "epoch")
    assert logmark.ensure_epoch(redis.Redis.from_url(acl.url(role)), keys)
    assert _acl_log(acl) == []
