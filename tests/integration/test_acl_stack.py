"""The whole stack under the compose cluster's ACL file (each process as its own role's
Redis user): it runs a DaemonSet's life without one NOPERM; and each role's user is refused
(NOPERM) every command it must not have."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from shared.store import roles
from shared.store.client import Store, connect
from shared.store.keys import Keys
from tests.integration.acl_cluster import AclRedis
from tests.integration.stack import Stack, wait_for
from tests.integration.test_store import DS


@pytest.fixture
def acl(tmp_path: Path, prefix: str) -> Iterator[AclRedis]:
    server = AclRedis(tmp_path, prefix)
    yield server
    server.stop()


@pytest.fixture
def acl_stack(acl: AclRedis, prefix: str, tmp_path: Path) -> Iterator[Stack]:
    processes = ("watcher", "reconciler", "status-writer", "gc", "node-agent")
    stack = Stack(acl.url("admin"), prefix, tmp_path, {p: acl.url(p) for p in processes})
    yield stack
    stack.stop()


def _acl_log(acl: AclRedis) -> list[dict[str, Any]]:
    return list(redis.Redis.from_url(acl.url("admin"), decode_responses=True).acl_log())


def test_the_stack_runs_a_daemonsets_life_under_the_acl_without_one_noperm(
        acl: AclRedis, acl_stack: Stack, prefix: str) -> None:
    cli = Store(connect(acl.url("cli")), Keys(prefix), role=roles.ADMIN)
    acl_stack.start_all(workers=1, nodes=3, agent_args=("--grace", "0.2"))
    cli.create(DS)

    def ready(image: str) -> bool:
        st = acl_stack.status("default/agent")
        pods = [p for p in cli.list("Pod", "default")
                if p["spec"]["containers"][0]["image"] == image and
                (p.get("status") or {}).get("phase") == "Running"]
        return len(pods) == 3 and st.get("numberReady") == 3 and \
            st.get("updatedNumberScheduled") == 3

    wait_for(lambda: ready("agent:1"), timeout=60, what="3 pods ready and counted")
    ds = cli.get("DaemonSet", "default/agent")
    new = copy.deepcopy(ds)
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "agent:2"
    cli.update(new)
    wait_for(lambda: ready("agent:2") and len(cli.list("Pod", "default")) == 3, timeout=90,
             what="the rollout to agent:2")
    cli.delete("DaemonSet", "default/agent")
    wait_for(lambda: not cli.list("Pod", "default"), timeout=60,
             what="the pods collected after their DaemonSet")
    assert _acl_log(acl) == []
