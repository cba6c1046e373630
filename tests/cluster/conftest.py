"""Fixtures of the compose-cluster tests (pytest-docker).

compose.yaml is brought up once for this package (pytest-docker's ``docker_services``,
package-scoped here so that the containers are gone before the other suites run), under a
project name of this run, with the settings of ``cluster.SETTINGS`` (5 nodes, 2
reconciler-workers, Redis on a free loopback port), and torn down with its volume after the
last cluster test. Tests change the cluster only through the
CLI (from the host, as the ``cli`` ACL user), docker and docker-compose, and read it as
Redis's administrator.

They need a running Docker engine, docker-compose (v1) and the image of
ops/build-images.sh; ops/test.sh installs and starts all of it. Without them these tests
FAIL, they never skip: deselect them with ``-m "not cluster"`` on a machine without Docker.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from pytest_docker.plugin import Services, get_docker_services

from services.node_agent import dockerrt
from tests.cluster.cluster import (
    COMPOSE_FILE,
    IMAGE,
    MACHINES,
    NODES,
    PAUSE_IMAGE,
    RECONCILERS,
    SERVICES,
    SETTINGS,
    Cluster,
    env_file,
    run,
)
from tests.integration.stack import wait_for


def _require_docker() -> None:
    """Fail (not skip) with what is missing for the cluster tests."""
    if shutil.which("docker") is None or shutil.which("docker-compose") is None:
        pytest.fail("cluster tests need docker and docker-compose (v1): run `bash ops/test.sh` "
                    "as root, which installs them, or deselect with -m 'not cluster'",
                    pytrace=False)
    try:
        info = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"],
                              capture_output=True, text=True, timeout=30, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail("cluster tests: `docker info` hangs: is the Docker engine healthy?",
                    pytrace=False)
    if info.returncode != 0:
        pytest.fail(f"cluster tests need a running Docker engine (docker info: "
                    f"{info.stderr.strip()}); ops/test.sh starts one", pytrace=False)
    for name in (IMAGE, PAUSE_IMAGE):
        image = subprocess.run(["docker", "image", "inspect", name], capture_output=True,
                               check=False)
        if image.returncode != 0:
            pytest.fail(f"cluster tests need the image {name}: run `bash ops/build-images.sh`",
                        pytrace=False)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_stale_projects() -> None:
    """Acts: take down the projects of earlier runs whose pytest is gone (a run killed midway
    leaves containers behind, and the engine restarts them when it starts again)."""
    out = run(["docker", "ps", "-a", "--format", '{{.Label "com.docker.compose.project"}}'],
              check=False).stdout
    for project in sorted(set(out.split())):
        found = re.fullmatch(r"dbcluster(\d+)", project)
        if found and not _alive(int(found.group(1))):
            run(["docker-compose", "-f", str(COMPOSE_FILE), "-p", project, "down", "-v",
                 "--remove-orphans", "--timeout", "1"], check=False)


@pytest.fixture(scope="package")
def cluster_environment() -> Iterator[None]:
    """Docker checked, .env and the Redis ACL file present, and the compose variables of
    this run in the environment (docker-compose reads them there) until the session ends."""
    _require_docker()
    run(["bash", "ops/compose-env.sh"])
    _remove_stale_projects()
    saved = {k: os.environ.get(k) for k in SETTINGS}
    os.environ.update(SETTINGS)
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session")
def docker_compose_command() -> str:
    return "docker-compose"


@pytest.fixture(scope="session")
def docker_compose_file() -> str:
    return str(COMPOSE_FILE)


@pytest.fixture(scope="session")
def docker_compose_project_name() -> str:
    return f"dbcluster{os.getpid()}"


@pytest.fixture(scope="package")
def docker_setup(cluster_environment: None) -> list[str]:
    return ["up -d"]


@pytest.fixture(scope="package")
def docker_cleanup() -> list[str]:
    return ["down -v --remove-orphans --timeout 5"]


@pytest.fixture(scope="package")
def docker_services(docker_compose_command: str, docker_compose_file: str,
                    docker_compose_project_name: str, docker_setup: list[str],
                    docker_cleanup: list[str]) -> Iterator[Services]:
    """pytest-docker's fixture, for this package only."""
    with get_docker_services(docker_compose_command, docker_compose_file,
                             docker_compose_project_name, docker_setup,
                             docker_cleanup) as services:
        yield services
        _remove_machine_pods(docker_compose_project_name)


def _remove_machine_pods(project: str) -> None:
    """Acts: stop machine-2, then remove what its agent left on the host's engine (its pods'
    containers and volumes are not the project's: `down` would leave them, and fail to
    remove their network)."""
    run(["docker-compose", "-f", str(COMPOSE_FILE), "-p", project, "stop", "-t", "1",
         MACHINES[1]], check=False)
    for kind in ("container", "volume"):
        out = run(["docker", kind, "ls", "-q", *(["-a"] if kind == "container" else []),
                   "--filter", f"label={dockerrt.LABEL_NODE}={MACHINES[1]}"],
                  check=False).stdout.split()
        if out:
            run(["docker", kind, "rm", "-f", *out], check=False)


@pytest.fixture(scope="package")
def cluster(docker_services: Services, docker_compose_project_name: str) -> Cluster:
    """The running cluster, once Redis answers, the nodes are registered, every reconciler-
    worker is registered with RQ and a watcher holds the lease."""
    c = Cluster(docker_compose_project_name, passwords=env_file())

    def ready() -> bool:
        try:
            store = c.store()
            workers = store.r.smembers("rq:workers")
            return (len(store.list("Node")) >= NODES and len(workers) >= RECONCILERS
                    and store.r.get(store.keys.lease("watcher")) is not None)
        except Exception:  # Redis still starting: poll again
            return False

    wait_for(ready, timeout=120, interval=0.5, what="the compose cluster to come up")
    return c


@pytest.fixture
def full_cluster(cluster: Cluster) -> Iterator[Cluster]:
    """The cluster in its starting shape before and after the test: every service running,
    RECONCILERS reconciler-workers (faults tests kill, scale and disconnect containers)."""
    restore(cluster)
    yield cluster
    restore(cluster)


def restore(c: Cluster) -> None:
    c.scale_reconcilers(RECONCILERS)
    wait_for(lambda: all(c.containers(s) for s in SERVICES)
             and len(c.containers("reconciler")) == RECONCILERS,
             timeout=60, interval=0.5, what="every service running")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Iterator[None]:
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call" and rep.failed:
        c = item.funcargs.get("full_cluster") or item.funcargs.get("cluster")
        if isinstance(c, Cluster):
            rep.sections.append(("compose logs", c.logs()))
            stacks = [f"--- {service} {cid[:12]}\n{c.stacks(cid)}"
                      for service in SERVICES if service != "redis"
                      for cid in c.containers(service)]
            rep.sections.append(("every process's threads", "\n".join(stacks)))

