"""The compose cluster under test: docker-compose and docker commands on one project, the
store as Redis's administrator sees it (for assertions), and the daemonbus CLI run from the
host as the ``cli`` ACL user against Redis's published port (for every change a test makes).

Nothing here sleeps to wait for logic: callers poll with ``wait_for``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from shared.daemonset.dsutil import HASH_LABEL
from shared.model import meta
from shared.model.podutil import is_ready, target_node
from shared.store import codec
from shared.store.client import Store, connect
from shared.store.keys import Keys
from tests.integration.apiserver_kit import kubectl_binary
from tests.integration.stack import wait_for

Obj = dict[str, Any]

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "compose.yaml"
ENV_FILE = ROOT / ".env"
IMAGE = os.environ.get("DAEMONBUS_IMAGE", "daemonbus:local")
PAUSE_IMAGE = os.environ.get("DAEMONBUS_PAUSE_IMAGE", "daemonbus-pause:local")

PREFIX = "daemonbus"
NODES = 5
RECONCILERS = 2
NODE_NAMES = [f"node-{i:05d}" for i in range(1, NODES + 1)]
# The reconciler's test hook (services/reconciler/worker.py): every sync of this one key
# sleeps first, so a test can kill the worker holding it in the middle of its sync.
SLOW_KEY = "cluster-kill/victim"
SLOW_SECONDS = 2.0

# The compose file's variables for this run (docker-compose reads them from the environment).
SETTINGS = {
    "DAEMONBUS_IMAGE": IMAGE,
    "DAEMONBUS_PAUSE_IMAGE": PAUSE_IMAGE,
    "DAEMONBUS_REDIS_PUBLISH": "127.0.0.1:",  # any free port on loopback
    "DAEMONBUS_APISERVER_PUBLISH": "127.0.0.1:",
    "DAEMONBUS_PREFIX": PREFIX,
    "DAEMONBUS_RECONCILERS": str(RECONCILERS),
    "DAEMONBUS_NODES": str(NODES),
    "DAEMONBUS_READY_DELAY": "0.5",
    "DAEMONBUS_GRACE": "0.5",
    "DAEMONBUS_TEST_SYNC_DELAY": f"{SLOW_KEY}={SLOW_SECONDS}",
    "COMPOSE_PROFILES": "machines",
    "DAEMONBUS_PODS_NETWORK": f"dbcluster{os.getpid()}-pods",
}

# The machine containers (profile "machines"), each a real node agent's Node of this name.
MACHINES = ["machine-1", "machine-2"]
SERVICES = ["redis", "watcher", "watcher-standby", "reconciler", "status-writer", "gc",
            "node-agent", "node-admission", "apiserver", *MACHINES]


def run(cmd: list[str], *, check: bool = True, timeout: float = 180,
        stdin: str | None = None, env: dict[str, str] | None = None,
        ) -> subprocess.CompletedProcess[str]:
    """Acts: run a command, capturing text output; raise with its output when it fails."""
    proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=str(ROOT), check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {proc.returncode}:\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc


def env_file() -> dict[str, str]:
    """The variables of .env (the Redis passwords ops/compose-env.sh generated)."""
    out: dict[str, str] = {}
    for line in ENV_FILE.read_text().splitlines():
        name, sep, value = line.partition("=")
        if sep and not name.startswith("#"):
            out[name.strip()] = value.strip()
    return out


@dataclass
class Cluster:
    """One compose project of compose.yaml."""

    project: str
    passwords: dict[str, str] = field(default_factory=dict)
    _stores: dict[str, Store] = field(default_factory=dict)
    _address: str | None = None

    # ---- docker and docker-compose ------------------------------------------------------

    def compose(self, *args: str, check: bool = True, timeout: float = 180) -> str:
        return run(["docker-compose", "-f", str(COMPOSE_FILE), "-p", self.project, *args],
                   check=check, timeout=timeout).stdout

    def docker(self, *args: str, check: bool = True, timeout: float = 60) -> str:
        return run(["docker", *args], check=check, timeout=timeout).stdout

    def containers(self, service: str) -> list[str]:
        """Full ids of the running containers of ``service``."""
        out = self.docker("ps", "--no-trunc", "--format", "{{.ID}}",
                          "--filter", f"label=com.docker.compose.project={self.project}",
                          "--filter", f"label=com.docker.compose.service={service}")
        return sorted(out.split())

    def container_of(self, process_id: str, service: str) -> str:
        """The container of ``service`` running the process whose instance id (``<role>-
        <hostname>-<pid>-<hex>``) is given: a container's hostname is its short id."""
        found = [c for c in self.containers(service) if f"-{c[:12]}-" in process_id]
        assert len(found) == 1, f"no single {service} container runs {process_id}: {found}"
        return found[0]

    def health(self, container: str) -> str:
        """``healthy``, ``unhealthy`` or ``starting`` (docker's health status)."""
        return self.docker("inspect", "--format", "{{.State.Health.Status}}", container).strip()

    def inspect(self, container: str, template: str) -> str:
        return self.docker("inspect", "--format", template, container).strip()

    def stacks(self, container: str, timeout: float = 10.0) -> str:
        """Acts: SIGUSR1 to the container's daemonbus process, which writes every thread's
        Python stack to its log; returns those lines (for a report: where is it stuck?)."""
        since = f"{time.time() - 1:.3f}"
        self.docker("kill", "--signal", "USR1", container, check=False)
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            proc = run(["docker", "logs", "--since", since, container], check=False)
            text = proc.stdout + proc.stderr
            if "Current thread" in text:
                break
            time.sleep(0.2)
        return text

    def network(self) -> str:
        return f"{self.project}_default"

    def scale_reconcilers(self, n: int) -> None:
        """Acts: start stopped containers and run ``n`` reconciler-workers (never recreates)."""
        self.compose("up", "-d", "--no-recreate", "--scale", f"reconciler={n}")

    def logs(self, tail: int = 60) -> str:
        return self.compose("logs", "--no-color", "--tail", str(tail), check=False)

    # ---- Redis and the store ------------------------------------------------------------

    def redis_address(self) -> str:
        """Redis's published address on the host (asked once: call ``redis_moved`` when
        Redis restarts, which publishes it on another free port)."""
        if self._address is None:
            self._address = self.published("redis", 6379)
        return self._address

    def published(self, service: str, port: int) -> str:
        """The host address (``127.0.0.1:PORT``) ``service`` publishes its ``port`` on."""
        out = self.compose("port", service, str(port)).strip().splitlines()
        assert out, f"{service} publishes no port {port}"
        return "127.0.0.1:" + out[-1].rsplit(":", 1)[1]

    def redis_moved(self) -> None:
        self._address = None

    def url(self, role: str, address: str | None = None) -> str:
        """The URL of an ACL user (``admin`` = Redis's default user, with every right)."""
        var = "DAEMONBUS_REDIS_PASSWORD_" + role.upper().replace("-", "_")
        user = "" if role == "admin" else role
        return f"redis://{user}:{self.passwords[var]}@{address or self.redis_address()}/0"

    def store(self) -> Store:
        """The store as the administrator sees it, on Redis's current address."""
        address = self.redis_address()
        if address not in self._stores:
            self._stores[address] = Store(connect(self.url("admin", address)), Keys(PREFIX))
        return self._stores[address]

    # ---- the CLI, from the host ---------------------------------------------------------

    def cli(self, *args: str, stdin: str | None = None, check: bool = True,
            ) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, DAEMONBUS_REDIS_URL=self.url("cli"), DAEMONBUS_PREFIX=PREFIX)
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        return run([sys.executable, "-m", "services.cli.main", *args], stdin=stdin,
                   env=env, check=check, timeout=60)

    def apply(self, manifest: Obj) -> None:
        self.cli("apply", "-f", "-", stdin=yaml.safe_dump(manifest))

    # ---- the real kubectl, from the host, through the cluster's API server ----------------

    def kubectl(self, tmp: Path) -> Kubectl:
        """The host's kubectl with a kubeconfig for the API server's published port (as its
        admin; the kubeconfig in ``tmp``), once the server is ready."""
        server = "https://" + self.published("apiserver", 6443)

        def printed() -> str:  # the API server makes its CA and tokens at its first start
            out = self.compose("run", "--rm", "-T", "cli", "kubeconfig", "--server", server,
                               check=False, timeout=120)
            return out if "current-context: daemonbus" in out else ""

        config = tmp / "kubeconfig"
        config.write_text(wait_for(printed, timeout=90, interval=1, what="a kubeconfig"))
        kube = Kubectl(kubectl_binary(), config, tmp / "cache", server)
        wait_for(lambda: kube("get", "--raw", "/readyz").stdout == "ok", timeout=90,
                 interval=1, what="the API server ready")
        return kube


@dataclass(frozen=True)
class Kubectl:
    binary: str
    config: Path
    cache: Path
    server: str

    def __call__(self, *args: str, stdin: str | None = None,
                 timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run([self.binary, "--kubeconfig", str(self.config), "--cache-dir",
                               str(self.cache), *args], input=stdin, capture_output=True,
                              text=True, timeout=timeout, check=False)


# ---- manifests and reads ------------------------------------------------------------------


def daemonset(namespace: str, name: str, image: str = "registry.k8s.io/pause:3.9",
              **spec: Any) -> Obj:
    """A DaemonSet manifest on every node; extra keyword arguments go into ``spec``."""
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"terminationGracePeriodSeconds": 1,
                                       "containers": [{"name": "main", "image": image}]}},
                 **spec},
    }


def daemon_pods(store: Store, key: str) -> list[Obj]:
    """Live (not terminating) pods controlled by the DaemonSet ``key``."""
    ds = store.try_get("DaemonSet", key)
    if ds is None:
        return []
    return [p for p in store.list("Pod", meta.namespace(ds))
            if (meta.controller_ref(p) or {}).get("uid") == meta.uid(ds)
            and not meta.is_being_deleted(p)]


def assert_one_pod_per_node_at_most(store: Store, key: str) -> None:
    """No node runs two live pods of the DaemonSet (checked on every poll)."""
    per_node = Counter(target_node(p) for p in daemon_pods(store, key))
    doubled = {n: c for n, c in per_node.items() if c > 1}
    assert not doubled, f"{key}: duplicate daemon pods on {doubled}"


def assert_no_duplicate_creates(store: Store, key: str) -> None:
    """The log never added two pods of one revision of the DaemonSet on one node (a retried
    or replayed sync must not create a second one)."""
    ds = store.get("DaemonSet", key)
    seen: Counter[tuple[str, str]] = Counter()
    last = "-"
    while True:
        raw: Any = store.r.xrange(store.keys.log, min=last, count=5000)
        if last != "-":
            raw = raw[1:]
        if not raw:
            break
        for eid, fields in raw:
            entry = codec.decode_entry(eid, fields)
            if entry.kind == "Pod" and entry.type == "ADDED" and \
                    (meta.controller_ref(entry.obj) or {}).get("uid") == meta.uid(ds):
                seen[(target_node(entry.obj), meta.labels(entry.obj).get(HASH_LABEL, ""))] += 1
        last = raw[-1][0].decode()
    doubled = {k: c for k, c in seen.items() if c > 1}
    assert not doubled, f"{key}: pods created twice for (node, revision): {doubled}"


def converged(store: Store, key: str, image: str | None = None) -> bool:
    """Every node runs one Ready pod of the DaemonSet (with ``image``), and its status, as
    the status-writer wrote it, says so for the current generation (all of them available,
    minReadySeconds included). Asserts no node runs two of its pods."""
    assert_one_pod_per_node_at_most(store, key)
    ds = store.try_get("DaemonSet", key)
    if ds is None:
        return False
    pods = daemon_pods(store, key)
    if sorted(target_node(p) for p in pods) != NODE_NAMES or not all(map(is_ready, pods)):
        return False
    if image is not None and any(c.get("image") != image
                                 for p in pods for c in p["spec"]["containers"]):
        return False
    st = ds.get("status") or {}
    return (st.get("observedGeneration") == ds["metadata"].get("generation")
            and st.get("desiredNumberScheduled") == NODES
            and st.get("numberReady") == NODES
            and st.get("numberAvailable") == NODES
            and st.get("updatedNumberScheduled") == NODES)


def updated_pods(store: Store, key: str, image: str) -> int:
    return sum(1 for p in daemon_pods(store, key)
               if all(c.get("image") == image for c in p["spec"]["containers"]))


def rq_jobs_done(store: Store, worker_prefix: str) -> int:
    """Jobs RQ counts as done by the reconciler-workers whose names start with
    ``worker_prefix`` (``reconciler-<hostname>-``)."""
    total = 0
    for raw in store.r.smembers("rq:workers"):
        name = raw.decode().removeprefix("rq:worker:")
        if name.startswith(worker_prefix):
            total += int(store.r.hget(f"rq:worker:{name}", "successful_job_count") or 0)
    return total
