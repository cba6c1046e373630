"""``kubectl debug node/NAME`` with the real kubectl and the real Docker engine: kubectl's
typed client posts the debugging Pod as Kubernetes protobuf, the API server decodes it to
the JSON shape and creates it as it would a JSON one, and the docker node agent runs it in
the host's namespaces with the host's root at /host, as kubectl's legacy profile asks.

The engine, its node agent and their clean-up are the docker runtime's tests' (an
``engine`` fixture of ``test_node_agent_docker``); these are in the ``cluster`` mark too.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from shared.model import meta
from tests.integration import test_node_agent_docker as docker_kit
from tests.integration.apiserver_kit import ApiServer
from tests.integration.stack import wait_for

pytestmark = pytest.mark.cluster

engine = docker_kit.engine  # the fixture: a Docker engine, a node for it, and clean-up


def _debugger(e: docker_kit.Engine, name: str) -> dict[str, Any]:
    (pod,) = [p for p in docker_kit.pods(e) if meta.name(p) == name]
    return pod


def _created(out: str, node: str) -> str:
    """The debugging pod's name from what kubectl said it created."""
    found = re.search(rf"Creating debugging pod (node-debugger-{re.escape(node)}-[a-z0-9]{{5}})"
                      rf" with container debugger on node {re.escape(node)}", out)
    assert found, out
    return found.group(1)


def test_kubectl_debug_node_runs_a_pod_in_the_hosts_namespaces_with_its_root(
        engine: docker_kit.Engine, tmp_path: Path) -> None:
    docker_kit.start(engine)
    api = ApiServer(engine.stack, tmp_path)
    api.start()
    (engine.dir / "mark").write_text("seen from the host\n")
    out = api.kubectl("debug", f"node/{engine.node}", f"--image={docker_kit.IMAGE}",
                      "--profile=legacy", "--", "sh", "-c",
                      f"cat /host{engine.dir}/mark; readlink /proc/self/ns/net")
    name = _created(out.stdout + out.stderr, engine.node)
    pod = _debugger(engine, name)
    spec = pod["spec"]
    assert spec["nodeName"] == engine.node
    assert (spec["hostNetwork"], spec["hostPID"], spec["hostIPC"]) == (True, True, True)
    (volume,) = spec["volumes"]  # (its type defaulted, as upstream's is, to "")
    assert (volume["name"], volume["hostPath"]["path"]) == ("host-root", "/")
    assert spec["restartPolicy"] == "Never"
    assert spec["tolerations"] == [{"operator": "Exists"}]
    (c,) = spec["containers"]
    assert (c["name"], c["image"]) == ("debugger", docker_kit.IMAGE)
    assert c["volumeMounts"] == [{"name": "host-root", "mountPath": "/host"}]
    assert c["command"][:2] == ["sh", "-c"]

    def finished() -> dict[str, Any] | None:
        p = _debugger(engine, name)
        return p if (p.get("status") or {}).get("phase") == "Succeeded" else None

    wait_for(finished, timeout=90, what="the debugging pod run to its end")
    said = api.kubectl("logs", name).stdout.splitlines()
    assert said[0] == "seen from the host"  # the host's / at /host
    assert said[1] == os.readlink("/proc/self/ns/net")  # the host's network


def test_kubectl_debug_node_attached_with_the_netadmin_profile(engine: docker_kit.Engine,
                                                               tmp_path: Path) -> None:
    """``-i``: kubectl posts the container with stdin open, waits for it to run and
    attaches to it: what it is given reaches the shell, whose answer comes back through the
    attach; the profile's capabilities come through the protobuf body into the pod."""
    docker_kit.start(engine)
    api = ApiServer(engine.stack, tmp_path)
    api.start()
    out = api.kubectl("debug", f"node/{engine.node}", "-i", f"--image={docker_kit.IMAGE}",
                      "--profile=netadmin", "--", "sh",
                      input="echo typed $((6*7)); echo attached >&2; exit\n", timeout=120)
    assert out.stdout.splitlines()[-1:] == ["typed 42"], (out.stdout, out.stderr)
    name = _created(out.stdout + out.stderr, engine.node)
    pod = _debugger(engine, name)
    assert (pod["spec"]["hostNetwork"], pod["spec"]["hostPID"]) == (True, True)
    (c,) = pod["spec"]["containers"]
    assert (c["stdin"], c.get("stdinOnce"), c.get("tty")) == (True, None, None)
    assert c["securityContext"] == {"capabilities": {"add": ["NET_ADMIN", "NET_RAW"]}}
    wait_for(lambda: (_debugger(engine, name).get("status") or {}).get("phase") == "Succeeded",
             timeout=90, what="the debugging pod run to its end")
    assert "attached" in out.stderr.splitlines()  # its stderr on kubectl's
    assert sorted(api.kubectl("logs", name).stdout.splitlines()) == ["attached", "typed 42"]


def test_kubectl_debug_attaches_an_ephemeral_container_in_its_targets_processes(
        engine: docker_kit.Engine, tmp_path: Path) -> None:
    """``kubectl debug POD -i --target``: kubectl adds an ephemeral container through the
    pod's ``ephemeralcontainers`` subresource, the docker agent starts it in the target
    container's PID namespace (it sees the target's process), kubectl attaches to it; once
    it ends it is not restarted, and it counts for nothing of the pod's readiness."""
    docker_kit.start(engine)
    api = ApiServer(engine.stack, tmp_path)
    api.start()
    engine.stack.store.apply(docker_kit.named_daemonset("target", {
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "app", "image": docker_kit.IMAGE,
                        "command": ["sleep", "3602"]}]}))

    def running() -> dict[str, Any] | None:
        found = [p for p in docker_kit.pods(engine) if meta.name(p).startswith("target-")
                 and "running" in docker_kit.main_status(p).get("state", {})]
        return found[0] if found else None

    name = meta.name(wait_for(running, timeout=90, what="the target pod running"))
    out = api.kubectl("debug", name, "-i", "-c", "dbg", f"--image={docker_kit.IMAGE}",
                      "--target=app", "--profile=general", "--", "sh",
                      input="cat /proc/[0-9]*/cmdline | tr '\\0' ' '; echo; exit\n",
                      timeout=120)
    assert "sleep 3602" in out.stdout, (out.stdout, out.stderr)

    def ended() -> dict[str, Any] | None:
        (p,) = [p for p in docker_kit.pods(engine) if meta.name(p) == name]
        told = (p.get("status") or {}).get("ephemeralContainerStatuses") or [{}]
        return p if "terminated" in told[0].get("state", {}) else None

    pod = wait_for(ended, timeout=60, what="the ephemeral container ended")
    (ec,) = pod["spec"]["ephemeralContainers"]
    assert (ec["name"], ec["targetContainerName"], ec["stdin"]) == ("dbg", "app", True)
    (told,) = pod["status"]["ephemeralContainerStatuses"]
    assert (told["restartCount"], told["ready"], told["state"]["terminated"]["exitCode"]) == (
        0, False, 0)
    assert pod["status"]["phase"] == "Running"
    assert {c["type"]: c["status"] for c in pod["status"]["conditions"]}["Ready"] == "True"
    assert "sleep 3602" in api.kubectl("logs", name, "-c", "dbg").stdout
    assert len(engine.containers(**{"io.kubernetes.container.name": "dbg"})) == 1  # not again
