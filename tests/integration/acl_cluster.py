"""A Redis under the compose cluster's ACL file (ops/redis/users.acl.in, rendered by
ops/compose-env.sh for a prefix of the test's own), with a URL per role."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from shared.store.server import RedisServer
from tests.integration.stack import ROOT

# role in compose → its ACL user ("admin" is Redis' default user)
USERS = {"admin": "default", "health": "health", "cli": "cli", "watcher": "watcher",
         "reconciler": "reconciler", "status-writer": "status-writer", "gc": "gc",
         "node-agent": "node-agent", "node-admission": "node-admission"}


class AclRedis:
    """Acts: renders the ACL file for ``prefix`` into ``work`` and runs a redis-server on it."""

    def __init__(self, work: Path, prefix: str) -> None:
        env_file, acl_file = work / "acl.env", work / "users.acl"
        subprocess.run(["bash", "ops/compose-env.sh"], cwd=str(ROOT), check=True,
                       capture_output=True,
                       env=dict(os.environ, DAEMONBUS_COMPOSE_ENV=str(env_file),
                                DAEMONBUS_ACL_FILE=str(acl_file), DAEMONBUS_PREFIX=prefix))
        self.passwords = {}
        for line in env_file.read_text().splitlines():
            name, _, value = line.partition("=")
            self.passwords[name.removeprefix("DAEMONBUS_REDIS_PASSWORD_")] = value
        self.server = RedisServer(data_dir=str(work / "data"), aclfile=str(acl_file)).start()

    def url(self, role: str) -> str:
        password = self.passwords[role.upper().replace("-", "_")]
        return f"redis://{USERS[role]}:{password}@127.0.0.1:{self.server.port}/0"

    def stop(self) -> None:
        self.server.stop()
