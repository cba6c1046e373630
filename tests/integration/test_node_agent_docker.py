"""The node agent's docker runtime with the real Docker engine: a DaemonSet of small HTTP
servers from a local image (the project's Debian base image, which has python3), made Ready
by its probe, rolled to a new version, an image that cannot be pulled, an agent SIGKILLed
and started again, and deletion; a pod's containers sharing its sandbox's localhost, and a
sandbox that ended replaced; ``kubectl logs`` of a container through the API server,
from the engine's log, served by the agent's endpoint; a port of a pod on the engine's
network forwarded by that endpoint.

The agent runs on this machine and talks to the engine's socket; its node name is the
test's own, and every container it makes carries that name in a label, so the fixture
removes whatever is left of them, pass or fail. The server's script and its marks are in
a hostPath volume; an emptyDir volume carries what an init container writes to the server.

These need a running engine, the base image and the sandbox image (ops/test.sh starts
the one and ops/build-images.sh builds the others): they are in the ``cluster`` mark, as the compose
cluster's tests are, and fail rather than skip without them.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import select
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import pytest
import yaml

from services.node_agent import dns, dockerrt
from shared.model import meta
from shared.model.podutil import is_ready
from shared.store import nodeserver
from shared.store.cache import Cache
from shared.store.server import free_port
from tests.integration.apiserver_kit import ApiServer
from tests.integration.stack import Stack, wait_for
from tests.integration.test_kubectl_top import assert_burns_and_holds, burner, measured, top_row
from tests.integration.test_node_agent_process import SERVER
from tests.integration.test_pod_exec import in_terminal
from tests.integration.test_pod_logs import (
    APP,
    first_run,
    lines,
    timed_first_run,
    timed_previous,
)
from tests.integration.test_pod_portforward import ECHO, forwards_both_ways, refused

pytestmark = pytest.mark.cluster

IMAGE = os.environ.get("DAEMONBUS_BASE_IMAGE", "daemonbus-base:bookworm")
PAUSE_IMAGE = os.environ.get("DAEMONBUS_PAUSE_IMAGE", "daemonbus-pause:local")

_ips = itertools.count(2)


@dataclass
class Engine:
    """What one test runs on: the engine, its directory (script, marks), node, IP, port."""

    stack: Stack
    client: docker.DockerClient
    dir: Path
    state: Path
    node: str
    ip: str
    port: int

    def agent(self, *args: str) -> None:
        """Start its agent (``args``: more of its options)."""
        self.stack.start("agent", "node-agent", "--runtime", "docker", "--node-name", self.node,
                         "--node-ip", self.ip, "--state-dir", str(self.state),
                         "--backoff-initial", "0.5", "--log-port", "0",
                         "--pod-infra-image", PAUSE_IMAGE, *args)

    def containers(self, **labels: str) -> list[dict[str, Any]]:
        """The engine's summaries of the containers of this test's node (any state; one
        listing, so a container the agent removes meanwhile is simply not in it)."""
        wanted = [f"{dockerrt.LABEL_NODE}={self.node}"] + [
            f"{k}={v}" for k, v in labels.items()]
        return list(self.client.api.containers(all=True, filters={"label": wanted}))

    def running(self) -> list[dict[str, Any]]:
        return [c for c in self.containers() if c["State"] == "running"]

    def get(self) -> str:
        with urllib.request.urlopen(f"http://{self.ip}:{self.port}/", timeout=2) as r:
            return str(r.read().decode())

    def marks(self, what: str) -> list[str]:
        return sorted(f.name for f in self.dir.glob(f"marks/*.{what}.*"))


@pytest.fixture
def engine(stack: Stack, tmp_path: Path) -> Iterator[Engine]:
    try:
        client = docker.from_env()
        client.ping()
        client.images.get(IMAGE)
        client.images.get(PAUSE_IMAGE)
    except docker.errors.DockerException as err:
        pytest.fail(f"the docker runtime's tests need a running Docker engine and the images "
                    f"{IMAGE} and {PAUSE_IMAGE} (bash ops/test.sh starts the one, "
                    f"ops/build-images.sh builds the others): {err}", pytrace=False)
    d = Path(tempfile.mkdtemp(prefix="daemonbus-docker-"))
    (d / "marks").mkdir()
    (d / "server.py").write_text(SERVER)
    port = free_port()
    e = Engine(stack, client, d, tmp_path / "state", f"{stack.prefix}-d", f"127.0.{next(_ips)}.9",
               port)
    try:
        yield e
    finally:
        if "agent" in stack.procs:
            stack.kill("agent")
        for c in e.containers():
            try:
                client.api.remove_container(c["Id"], force=True)
            except docker.errors.NotFound:
                pass
        for v in client.volumes.list(filters={"label": f"{dockerrt.LABEL_NODE}={e.node}"}):
            v.remove(force=True)
        subprocess.run(["rm", "-rf", str(d)], check=False)


def named_daemonset(name: str, pod_spec: dict[str, Any]) -> dict[str, Any]:
    """DaemonSet ``name`` in default of pods labelled ``app: <name>`` with ``pod_spec``."""
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec}}}


def daemonset(e: Engine, version: str, image: str = IMAGE) -> dict[str, Any]:
    env = [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
           {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
           {"name": "PORT", "value": str(e.port)},
           {"name": "MARKS", "value": "/srv/marks"}]
    return yaml.safe_load(yaml.safe_dump(named_daemonset("web", {
                     "hostNetwork": True, "terminationGracePeriodSeconds": 5,
                     "volumes": [{"name": "srv", "hostPath": {"path": str(e.dir)}},
                                 {"name": "work", "emptyDir": {}}],
                     "initContainers": [{
                         "name": "seed", "image": image, "workingDir": "/work",
                         "command": ["python3", "-c",
                                     "import os; open('seed', 'w').write(os.environ['WHO'])"],
                         "env": [{"name": "WHO", "valueFrom": {"fieldRef": {
                             "fieldPath": "metadata.name"}}}],
                         "volumeMounts": [{"name": "work", "mountPath": "/work"}]}],
                     "containers": [{
                         "name": "web", "image": image, "imagePullPolicy": "IfNotPresent",
                         "command": ["python3", "/srv/server.py"], "args": [version],
                         "workingDir": "/work", "env": env,
                         "ports": [{"name": "http", "containerPort": e.port}],
                         "resources": {"limits": {"memory": "96Mi", "cpu": "500m"}},
                         "volumeMounts": [{"name": "srv", "mountPath": "/srv"},
                                          {"name": "work", "mountPath": "/work"}],
                         "readinessProbe": {"httpGet": {"path": "/", "port": "http"},
                                            "periodSeconds": 1},
                         "livenessProbe": {"exec": {"command": ["test", "-f", "seed"]},
                                           "periodSeconds": 1}}]})))


def pods(e: Engine) -> list[dict[str, Any]]:
    return [p for p in e.stack.pods("default") if not meta.is_being_deleted(p)]


def ready_pod(e: Engine) -> dict[str, Any] | None:
    ready = [p for p in pods(e) if is_ready(p)]
    return ready[0] if len(ready) == 1 else None


def main_status(pod: dict[str, Any]) -> dict[str, Any]:
    return ((pod.get("status") or {}).get("containerStatuses") or [{}])[0]


def start(e: Engine, *agent_args: str) -> None:
    e.stack.start_all(workers=1, node_agent=False)
    e.agent(*agent_args)
    # (timeouts are generous: the machine may be loaded, and each process starts slowly)
    wait_for(lambda: e.stack.store.try_get("Node", "/" + e.node), timeout=120,
             what="the node registered")


def cli(e: Engine, *args: str) -> bytes:
    res = subprocess.run([sys.executable, "-m", "services.cli.main", *args],
                         env=e.stack.env(), capture_output=True, timeout=60, check=True)
    return res.stdout


def test_daemonset_runs_in_docker_ready_by_its_probe_and_rolls_to_a_new_version(
        engine: Engine) -> None:
    start(engine)
    node = engine.stack.store.get("Node", "/" + engine.node)
    assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("docker://")
    engine.stack.store.apply(daemonset(engine, "v1"))
    pod = wait_for(lambda: ready_pod(engine), timeout=90, what="the pod Ready by its probe")
    assert engine.get() == f"{engine.node} v1 {meta.name(pod)}"  # env, emptyDir, workingDir
    cs = main_status(pod)
    assert cs["containerID"].startswith("docker://") and cs["restartCount"] == 0
    (web,) = engine.running()
    assert cs["containerID"] == f"docker://{web['Id']}"
    assert web["Labels"][dockerrt.LABEL_UID] == meta.uid(pod)
    config = engine.client.api.inspect_container(web["Id"])["HostConfig"]
    assert config["Memory"] == 96 * 2**20 and config["NanoCpus"] == 500_000_000
    assert config["NetworkMode"] == "host"
    init = pod["status"]["initContainerStatuses"][0]
    assert init["state"]["terminated"]["reason"] == "Completed"
    logs = ["logs", f"pod/{meta.name(pod)}", "-n", "default"]
    assert cli(engine, *logs) == b"serving v1\n"  # the engine's log, via the agent

    engine.stack.store.apply(daemonset(engine, "v2"))

    def rolled() -> dict[str, Any] | None:
        new = ready_pod(engine)
        return new if new and meta.uid(new) != meta.uid(pod) and len(pods(engine)) == 1 \
            else None

    new = wait_for(rolled, timeout=90, what="the rollout to v2")
    assert engine.get() == f"{engine.node} v2 {meta.name(new)}"
    assert len(engine.marks("v1.term")) == 1  # the old server saw SIGTERM
    wait_for(lambda: not engine.containers(**{dockerrt.LABEL_UID: meta.uid(pod)}),
             timeout=60, what="the old pod's containers removed")
    # kubelet's Events of the first pod: its image, its starts, its stop
    told = {(e["type"], e["reason"], e["message"])
            for e in engine.stack.store.list("Event", "default")
            if e["involvedObject"].get("uid") == meta.uid(pod)}
    assert {("Normal", "Pulled", f'Container image "{IMAGE}" already present on machine'),
            ("Normal", "Created", "Created container: seed"),
            ("Normal", "Started", "Started container web"),
            ("Normal", "Killing", "Stopping container web")} <= told
    (web2,) = engine.running()
    assert main_status(new)["containerID"] == f"docker://{web2['Id']}"


def test_a_failing_exec_probe_says_what_its_command_said(engine: Engine) -> None:
    start(engine)
    ds = daemonset(engine, "v1")
    (web,) = ds["spec"]["template"]["spec"]["containers"]
    web["readinessProbe"] = {"exec": {"command": [
        "sh", "-c", "echo not ready; echo from $(pwd) >&2; exit 1"]}, "periodSeconds": 1}
    engine.stack.store.apply(ds)
    unhealthy = ("Warning", "Unhealthy", "Readiness probe failed: not ready\nfrom /work\n")

    def told() -> bool:
        return any(unhealthy == (e["type"], e["reason"], e["message"])
                   for e in engine.stack.store.list("Event", "default"))

    wait_for(told, timeout=90, what="the Unhealthy event with the probe's output")
    assert not any(is_ready(p) for p in pods(engine))


def test_an_image_that_cannot_be_pulled_is_err_image_pull_then_image_pull_back_off(
        engine: Engine) -> None:
    start(engine)
    # a registry on a closed loopback port: the pull fails at once, and asks nobody else
    closed = free_port()
    missing = f"127.0.0.1:{closed}/daemonbus-missing:v1"
    ds = daemonset(engine, "v1", image=missing)
    ds["spec"]["template"]["spec"]["initContainers"] = []
    engine.stack.store.apply(ds)

    def waiting() -> str:
        for pod in pods(engine):
            return str(((main_status(pod).get("state") or {}).get("waiting") or {})
                       .get("reason") or "")
        return ""

    wait_for(lambda: waiting() == "ImagePullBackOff", timeout=60, what="ImagePullBackOff")
    (pod,) = pods(engine)
    assert main_status(pod)["state"]["waiting"]["message"] == \
        f'Back-off pulling image "{missing}"'
    evs = [e for e in engine.stack.store.list("Event", "default")
           if e["involvedObject"].get("uid") == meta.uid(pod)]
    said = {(e["type"], e["reason"], e["message"]) for e in evs}
    assert ("Warning", "Failed", "Error: ErrImagePull") in said
    assert ("Normal", "BackOff", f'Back-off pulling image "{missing}"') in said
    assert any(m.startswith(f'Failed to pull image "{missing}"') for _, _, m in said)
    assert all(e["source"] == {"component": "kubelet", "host": engine.node} for e in evs)
    assert not engine.containers()


def test_agent_sigkilled_and_started_again_adopts_its_container_and_removes_a_gone_pods(
        engine: Engine) -> None:
    start(engine)
    engine.stack.store.apply(daemonset(engine, "v1"))
    pod = wait_for(lambda: ready_pod(engine), timeout=90, what="the pod Ready")
    (web,) = engine.running()
    engine.stack.kill("agent")  # SIGKILL

    engine.agent()
    log = engine.stack.log_dir / "agent.log"
    wait_for(lambda: f"adopted pod {meta.uid(pod)} container web" in log.read_text(),
             timeout=120, what="the new agent adopting the container")
    assert [c["Id"] for c in engine.running()] == [web["Id"]]  # none started twice
    assert engine.get() == f"{engine.node} v1 {meta.name(pod)}"
    assert main_status(engine.stack.store.get("Pod", meta.key(pod)))["restartCount"] == 0

    # the pod goes while no agent runs: the next agent stops what it left of it
    engine.stack.kill("agent")
    engine.stack.store.commit([engine.stack.store.final_delete_op(
        engine.stack.store.get("Pod", meta.key(pod)))])
    engine.agent()
    wait_for(lambda: not engine.containers(**{dockerrt.LABEL_UID: meta.uid(pod)}),
             timeout=120, what="the gone pod's containers removed")
    new = wait_for(lambda: ready_pod(engine), timeout=90, what="the new pod Ready")
    assert meta.uid(new) != meta.uid(pod)
    assert [c["Labels"][dockerrt.LABEL_UID] for c in engine.running()] == [meta.uid(new)]


def test_deleting_the_daemonset_leaves_no_container(engine: Engine) -> None:
    start(engine)
    engine.stack.store.apply(daemonset(engine, "v1"))
    wait_for(lambda: ready_pod(engine), timeout=90, what="the pod Ready")
    engine.stack.store.delete("DaemonSet", "default/web")
    wait_for(lambda: not engine.stack.pods("default"), timeout=60, what="the pod released")
    assert not engine.containers()
    assert len(engine.marks("v1.term")) == 1
    assert not engine.client.volumes.list(
        filters={"label": f"{dockerrt.LABEL_NODE}={engine.node}"})


def test_a_pods_containers_share_its_sandboxs_localhost_and_a_new_one_replaces_it(
        engine: Engine) -> None:
    """The client container is Ready only when its probe reaches the server container on
    127.0.0.1, where alone the server listens: they share the sandbox's network. A sandbox
    killed is replaced, its containers killed and started again in the new one."""
    start(engine)
    port = engine.port
    reach = f"import urllib.request as u; u.urlopen('http://127.0.0.1:{port}/', timeout=1)"
    engine.stack.store.apply(named_daemonset("pair", {
        "terminationGracePeriodSeconds": 1,
        "containers": [
            {"name": "server", "image": IMAGE, "workingDir": "/",
             "command": ["python3", "-m", "http.server", str(port), "--bind", "127.0.0.1"]},
            {"name": "client", "image": IMAGE, "command": ["sleep", "infinity"],
             "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {
                 "fieldPath": "status.podIP"}}}],
             "readinessProbe": {"exec": {"command": ["python3", "-c", reach]},
                                "periodSeconds": 1}}]}))

    def ready(restarts: int) -> dict[str, Any] | None:
        pod = ready_pod(engine)
        counts = [c["restartCount"] for c in (pod or {}).get("status", {}).get(
            "containerStatuses") or []]
        return pod if counts == [restarts, restarts] else None

    pod = wait_for(lambda: ready(0), timeout=90, what="the client Ready over localhost")
    uid = meta.uid(pod)
    (sandbox,) = engine.containers(**{dockerrt.LABEL_UID: uid,
                                      dockerrt.LABEL_CONTAINER: dockerrt.SANDBOX})
    assert sandbox["Names"] == [f"/k8s_POD_{meta.name(pod)}_default_{uid}_0"]
    assert sandbox["Image"] == PAUSE_IMAGE and sandbox["State"] == "running"
    ip = sandbox["NetworkSettings"]["Networks"]["bridge"]["IPAddress"]
    assert pod["status"]["podIP"] == ip and ip != engine.ip
    for c in pod["status"]["containerStatuses"]:
        config = engine.client.api.inspect_container(
            c["containerID"].removeprefix("docker://"))["HostConfig"]
        assert (config["NetworkMode"], config["IpcMode"]) == (
            f"container:{sandbox['Id']}", f"container:{sandbox['Id']}")
    client_id = next(c["containerID"] for c in pod["status"]["containerStatuses"]
                     if c["name"] == "client").removeprefix("docker://")
    said = engine.client.containers.get(client_id).exec_run(
        ["sh", "-c", "hostname; echo $POD_IP"]).output
    # the sandbox's hostname (the pod's name), and its address from the first start
    assert said.decode().split() == [meta.name(pod), ip]

    engine.client.api.kill(sandbox["Id"])
    again = wait_for(lambda: ready(1), timeout=90, what="both started again, Ready")
    assert meta.uid(again) == uid
    (new,) = engine.containers(**{dockerrt.LABEL_UID: uid,
                                  dockerrt.LABEL_CONTAINER: dockerrt.SANDBOX})
    assert new["Id"] != sandbox["Id"] and new["State"] == "running"
    assert again["status"]["podIP"] == new["NetworkSettings"]["Networks"]["bridge"][
        "IPAddress"]
    told = [e for e in engine.stack.store.list("Event", "default")
            if e["involvedObject"].get("uid") == uid and e["reason"] == "SandboxChanged"]
    assert [(e["type"], e["message"], e["involvedObject"].get("fieldPath")) for e in told] \
        == [("Normal", "Pod sandbox changed, it will be killed and re-created.", None)]
    # an agent without --cluster-dns gives a ClusterFirst pod the host's resolver, and
    # says so once, as kubelet does, about the pod and about its node
    missing = [e for e in engine.stack.store.list("Event", "default")
               if e["reason"] == "MissingClusterDNS"]
    assert sorted((e["involvedObject"]["kind"], e["type"], e["message"]) for e in missing) == [
        ("Node", "Warning", dns.MISSING),
        ("Pod", "Warning", f'pod: "{meta.name(pod)}_default({uid})". {dns.MISSING}')]

    engine.stack.store.delete("DaemonSet", "default/pair")
    wait_for(lambda: not engine.stack.pods("default"), timeout=60, what="the pod released")
    assert not engine.containers()


def test_a_pods_dns_is_the_clusters_with_its_dns_config_and_its_processes_are_shared(
        engine: Engine) -> None:
    """With --cluster-dns and --cluster-domain a ClusterFirst pod's resolv.conf names the
    cluster's server, its searches first, then what its dnsConfig adds; with
    shareProcessNamespace its containers see each other's processes."""
    start(engine, "--cluster-dns", "10.96.0.10", "--cluster-domain", "cluster.local")
    look = ("cp /etc/resolv.conf /srv/marks/resolv.conf; while :; do "
            "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -q 'sleep 360[1]' && "
            "echo shared > /srv/marks/pids && break; sleep 0.2; done; sleep infinity")
    engine.stack.store.apply(named_daemonset("resolver", {
        "terminationGracePeriodSeconds": 1, "shareProcessNamespace": True,
        "dnsConfig": {"searches": ["extra.example"],
                      "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}]},
        "volumes": [{"name": "srv", "hostPath": {"path": str(engine.dir)}}],
        "containers": [
            {"name": "sleeper", "image": IMAGE, "command": ["sleep", "3601"]},
            {"name": "looker", "image": IMAGE, "command": ["sh", "-c", look],
             "volumeMounts": [{"name": "srv", "mountPath": "/srv"}]}]}))
    marks = engine.dir / "marks"
    wait_for(lambda: (marks / "pids").exists(), timeout=90,
             what="the looker seeing the sleeper's process")
    conf = dns.parse_resolv_conf((marks / "resolv.conf").read_text())
    assert conf.nameservers == ("10.96.0.10",)
    assert conf.searches[:3] == ("default.svc.cluster.local", "svc.cluster.local",
                                 "cluster.local") and conf.searches[-1] == "extra.example"
    assert sorted(conf.options) == ["edns0", "ndots:2"]
    assert not [e for e in engine.stack.store.list("Event", "default")
                if e["reason"] == "MissingClusterDNS"]


def test_a_sandbox_that_cannot_be_made_is_told_and_its_containers_wait(
        engine: Engine) -> None:
    closed = free_port()  # a registry on a closed loopback port: the pull fails at once
    start(engine, "--pod-infra-image", f"127.0.0.1:{closed}/pause:missing")
    engine.stack.store.apply(named_daemonset("lone", {"containers": [
        {"name": "app", "image": IMAGE, "command": ["sleep", "infinity"]}]}))

    def told() -> list[dict[str, Any]]:
        return [e for e in engine.stack.store.list("Event", "default")
                if e["reason"] == "FailedCreatePodSandBox"]

    (ev,) = wait_for(told, timeout=90, what="kubelet's FailedCreatePodSandBox Warning")
    assert ev["type"] == "Warning" and ev["message"].startswith(
        f'Failed to create pod sandbox: failed to get sandbox image "127.0.0.1:{closed}/'
        'pause:missing": '), ev["message"]
    assert "fieldPath" not in ev["involvedObject"]  # the pod's, not a container's
    (pod,) = pods(engine)
    assert main_status(pod)["state"] == {"waiting": {"reason": "ContainerCreating"}}
    assert not engine.containers()


def test_kubectl_logs_of_a_docker_pod_through_the_api_server(engine: Engine,
                                                             tmp_path: Path) -> None:
    began = time.time_ns()
    start(engine)
    api = ApiServer(engine.stack, tmp_path)
    api.start()
    (engine.dir / "app.py").write_text(APP)
    srv = [{"name": "srv", "mountPath": "/srv"}]
    engine.stack.store.apply({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "chatty", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "chatty"}},
                 "template": {"metadata": {"labels": {"app": "chatty"}}, "spec": {
                     "hostNetwork": True, "terminationGracePeriodSeconds": 1,
                     "volumes": [{"name": "srv", "hostPath": {"path": str(engine.dir)}}],
                     "initContainers": [{"name": "setup", "image": IMAGE, "command": [
                         "python3", "-c", "print('setup done')"]}],
                     "containers": [{"name": "app", "image": IMAGE, "volumeMounts": srv,
                                     "command": ["python3", "/srv/app.py", "/srv"]}]}}}})

    def running(restarts: int) -> dict[str, Any] | None:
        for pod in pods(engine):
            cs = main_status(pod)
            if cs.get("restartCount") == restarts and "running" in (cs.get("state") or {}):
                return pod
        return None

    pod = wait_for(lambda: running(0), timeout=90, what="the pod running")
    name = meta.name(pod)
    first_run(api, name)
    none = api.kubectl("logs", name, "--previous", check=False)
    assert none.returncode != 0
    assert f'previous terminated container "app" in pod "{name}" not found' in none.stderr
    since_time = timed_first_run(api, name, began)  # (the engine keeps each line's time)

    (engine.dir / "stop1").touch()  # the run ends (exit 1); the next one starts
    wait_for(lambda: running(1), timeout=90, what="the container restarted")
    timed_previous(api, name, since_time)
    wait_for(lambda: api.kubectl("logs", name).stdout == lines(2),
             what="the second run's lines")
    assert api.kubectl("logs", name, "--previous").stdout == lines(1, bye=True)
    assert api.kubectl("logs", name, "-p", "--tail", "1").stdout == "run 1 bye\n"
    assert cli(engine, "logs", f"pod/{name}", "--previous") == lines(1, bye=True).encode()


LOOKS = ('f=/etc/app/greeting; while :; do echo "$(cat $f) $(readlink $f) '
         '$(stat -L -c %a $f) $(cat /etc/app/bin/blob | wc -c) '
         '$(touch /etc/app/x 2>/dev/null && echo rw || echo ro)" > /srv/marks/seen.tmp; '
         'mv /srv/marks/seen.tmp /srv/marks/seen; sleep 0.2; done')


def config_map(greeting: str) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "app-config", "namespace": "default"},
                       "data": {"greeting": greeting},
                       "binaryData": {"blob": base64.b64encode(bytes(300)).decode()}})


def test_a_configmap_volume_is_mounted_read_only_and_follows_kubectl_apply(
        engine: Engine, tmp_path: Path) -> None:
    start(engine)
    api = ApiServer(engine.stack, tmp_path)
    api.start()
    api.kubectl("apply", "-f", "-", input=config_map("hello"))
    api.kubectl("apply", "-f", "-", input=json.dumps(named_daemonset("reader", {
                     "hostNetwork": True, "terminationGracePeriodSeconds": 1,
                     "volumes": [{"name": "srv", "hostPath": {"path": str(engine.dir)}},
                                 {"name": "config", "configMap": {
                                     "name": "app-config", "items": [
                                         {"key": "greeting", "path": "greeting"},
                                         {"key": "blob", "path": "bin/blob", "mode": 0o600}]}}],
                     "containers": [{
                         "name": "reader", "image": IMAGE, "command": ["sh", "-c", LOOKS],
                         "volumeMounts": [{"name": "srv", "mountPath": "/srv"},
                                          {"name": "config", "mountPath": "/etc/app"}]}]})))
    seen = engine.dir / "marks" / "seen"

    def says(text: str) -> bool:
        return seen.exists() and seen.read_text().strip() == text

    # kubelet's layout (the file a link into ..data), the default mode, the binary key's
    # bytes, and read-only
    wait_for(lambda: says("hello ..data/greeting 644 300 ro"), timeout=90,
             what=f"the mounted ConfigMap (last: {seen.read_text() if seen.exists() else ''})")
    api.kubectl("apply", "-f", "-", input=config_map("bonjour"))
    wait_for(lambda: says("bonjour ..data/greeting 644 300 ro"), timeout=60,
             what="the changed ConfigMap in the running container")
    assert main_status(pods(engine)[0])["restartCount"] == 0  # the same container saw it


def test_a_secret_volume_is_mounted_read_only_with_its_mode_and_follows_its_secret(
        engine: Engine, tmp_path: Path) -> None:
    start(engine)
    api = ApiServer(engine.stack, tmp_path)
    api.start()
    api.kubectl("create", "secret", "generic", "es-creds", "--from-literal=password=first")
    look = ('f=/etc/creds/password; while :; do echo "$(cat $f) $(stat -L -c %a $f) '
            '$(touch /etc/creds/x 2>/dev/null && echo rw || echo ro)" > /srv/marks/s.tmp; '
            'mv /srv/marks/s.tmp /srv/marks/secret; sleep 0.2; done')
    api.kubectl("apply", "-f", "-", input=json.dumps(named_daemonset("creds", {
        "hostNetwork": True, "terminationGracePeriodSeconds": 1,
        "volumes": [{"name": "srv", "hostPath": {"path": str(engine.dir)}},
                    {"name": "creds", "secret": {"secretName": "es-creds",
                                                 "defaultMode": 0o400}}],
        "containers": [{"name": "reader", "image": IMAGE, "command": ["sh", "-c", look],
                        "volumeMounts": [{"name": "srv", "mountPath": "/srv"},
                                         {"name": "creds", "mountPath": "/etc/creds"}]}]})))
    seen = engine.dir / "marks" / "secret"

    def says(text: str) -> bool:
        return seen.exists() and seen.read_text().strip() == text

    wait_for(lambda: says("first 400 ro"), timeout=90,
             what=f"the mounted Secret (last: {seen.read_text() if seen.exists() else ''})")
    api.kubectl("patch", "secret", "es-creds", "-p", json.dumps(
        {"stringData": {"password": "second"}}))
    wait_for(lambda: says("second 400 ro"), timeout=60,
             what="the changed Secret in the running container")
    assert main_status(pods(engine)[0])["restartCount"] == 0


def test_a_downward_api_volume_has_the_pods_fields_and_follows_its_labels(
        engine: Engine) -> None:
    """A downwardAPI volume's files, as kubelet writes them: the pod's labels (followed
    as they change, in the running container), its name, a container's cpu limit."""
    start(engine)
    look = ('while :; do { cat /etc/podinfo/labels; echo; cat /etc/podinfo/name; echo; '
            'cat /etc/podinfo/cpu; } > /srv/marks/i.tmp; mv /srv/marks/i.tmp /srv/marks/info; '
            'sleep 0.2; done')
    engine.stack.store.apply(named_daemonset("informed", {
        "hostNetwork": True, "terminationGracePeriodSeconds": 1,
        "volumes": [{"name": "srv", "hostPath": {"path": str(engine.dir)}},
                    {"name": "podinfo", "downwardAPI": {"items": [
                        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                        {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
                        {"path": "cpu", "resourceFieldRef": {
                            "containerName": "app", "resource": "limits.cpu",
                            "divisor": "1m"}}]}}],
        "containers": [{"name": "app", "image": IMAGE, "command": ["sh", "-c", look],
                        "resources": {"limits": {"cpu": "300m"}},
                        "volumeMounts": [{"name": "srv", "mountPath": "/srv"},
                                         {"name": "podinfo", "mountPath": "/etc/podinfo"}]}]}))
    seen = engine.dir / "marks" / "info"

    def says() -> list[str]:
        return seen.read_text().splitlines() if seen.exists() else []

    (pod,) = wait_for(lambda: pods(engine) if says() else None, timeout=90,
                      what="the downward API's files in the container")
    *labels, name, cpu = says()
    assert (name, cpu) == (meta.name(pod), "300")
    assert labels == sorted(f'{k}="{v}"' for k, v in meta.labels(pod).items())

    def labelled(p: dict[str, Any]) -> dict[str, Any]:
        return {**p, "metadata": {**p["metadata"],
                                  "labels": {**p["metadata"]["labels"], "zone": "a"}}}

    engine.stack.store.mutate("Pod", meta.key(pod), labelled)  # (the agent writes it too)
    wait_for(lambda: 'zone="a"' in says()[:-2], timeout=60,
             what=f"the new label in the running container (last: {says()})")
    assert main_status(pods(engine)[0])["restartCount"] == 0


def test_a_missing_secret_volume_holds_the_pod_and_a_host_mount_reaches_in(
        engine: Engine) -> None:
    """A secret volume whose Secret is not there yet is kubelet's FailedMount: nothing of
    the pod is made, its container waits in ContainerCreating, and it starts once the
    Secret is there. A hostPath mounted with HostToContainer propagation (a slave bind of
    a shared mount) sees what the host mounts there after the container started."""
    host = engine.dir / "host"
    host.mkdir()
    subprocess.run(["mount", "--bind", str(host), str(host)], check=True)
    try:
        subprocess.run(["mount", "--make-rshared", str(host)], check=True)
        start(engine)
        look = ("while :; do grep -q ' /host/sub ' /proc/self/mountinfo && "
                "echo \"$(cat /etc/creds/token)\" > /srv/marks/seen; sleep 0.2; done")
        engine.stack.store.apply(named_daemonset("mounter", {
            "hostNetwork": True, "terminationGracePeriodSeconds": 1,
            "volumes": [
                {"name": "srv", "hostPath": {"path": str(engine.dir), "type": "Directory"}},
                {"name": "host", "hostPath": {"path": str(host), "type": "Directory"}},
                {"name": "creds", "secret": {"secretName": "late"}}],
            "containers": [{"name": "app", "image": IMAGE, "command": ["sh", "-c", look],
                            "volumeMounts": [
                                {"name": "srv", "mountPath": "/srv"},
                                {"name": "host", "mountPath": "/host",
                                 "mountPropagation": "HostToContainer"},
                                {"name": "creds", "mountPath": "/etc/creds"}]}]}))

        def failed_mount() -> list[dict[str, Any]]:
            return [e for e in engine.stack.store.list("Event", "default")
                    if e["reason"] == "FailedMount"]

        (ev,) = wait_for(failed_mount, timeout=90, what="kubelet's FailedMount Warning")
        assert (ev["type"], ev["message"]) == (
            "Warning", 'MountVolume.SetUp failed for volume "creds" : secret "late" not found')
        (pod,) = pods(engine)
        assert main_status(pod)["state"] == {"waiting": {"reason": "ContainerCreating"}}
        assert not engine.containers()

        engine.stack.store.apply({"apiVersion": "v1", "kind": "Secret",
                                  "metadata": {"name": "late", "namespace": "default"},
                                  "stringData": {"token": "t0k3n"}})
        wait_for(lambda: engine.running(), timeout=90, what="the container started")
        (host / "sub").mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(host / "sub")], check=True)
        seen = engine.dir / "marks" / "seen"
        wait_for(lambda: seen.exists() and seen.read_text() == "t0k3n\n", timeout=60,
                 what="the host's later mount seen in the container, with the Secret's file")
    finally:
        subprocess.run(["umount", "-R", "-l", str(host)], check=False)


FACTS = ('echo user=$(id -u); echo group=$(id -g); echo groups="$(id -G)"; '
         'grep -E "^(CapBnd|CapEff|NoNewPrivs)" /proc/self/status; '
         'touch /x 2>/dev/null && echo root=rw || echo root=ro; '
         'test -d /proc/$HOST_PID && echo pid=host || echo pid=own; echo end; sleep 3600')


def facts(e: Engine, container: str) -> dict[str, str]:
    """What ``FACTS`` printed in the pod's ``container``, once it has."""
    def printed() -> str | None:
        found = e.containers(**{dockerrt.LABEL_CONTAINER: container})
        out = e.client.api.logs(found[0]["Id"]).decode() if found else ""
        return out if "end" in out.split() else None

    out = wait_for(printed, timeout=90, what=f"what {container} printed")
    return dict(line.replace(":\t", "=").split("=", 1) for line in out.splitlines()
                if "=" in line or ":\t" in line)


def test_a_pods_security_context_is_what_its_containers_run_with(engine: Engine) -> None:
    """User, groups, capabilities, no new privileges, a read-only root and the host's
    process namespace as the pod asks; runAsNonRoot with an image that runs as root never
    starts, in kubelet's words. (Not privileged: the engine here lacks a capability, and
    refuses every privileged container.)"""
    start(engine)
    env = [{"name": "HOST_PID", "value": str(os.getpid())}]
    engine.stack.store.apply(named_daemonset("guarded", {
        "hostNetwork": True, "hostPID": True, "terminationGracePeriodSeconds": 1,
        "securityContext": {"supplementalGroups": [3456]},
        "containers": [
            {"name": "locked", "image": IMAGE, "command": ["sh", "-c", FACTS], "env": env,
             "securityContext": {"runAsUser": 1234, "runAsGroup": 2345,
                                 "readOnlyRootFilesystem": True,
                                 "allowPrivilegeEscalation": False,
                                 "capabilities": {"drop": ["ALL"],
                                                  "add": ["NET_BIND_SERVICE"]}}},
            {"name": "admin", "image": IMAGE, "command": ["sh", "-c", FACTS], "env": env,
             "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}]}))
    locked = facts(engine, "locked")
    assert (locked["user"], locked["group"]) == ("1234", "2345")
    assert "3456" in locked["groups"].split()
    assert int(locked["CapBnd"], 16) == 1 << 10  # CAP_NET_BIND_SERVICE alone
    assert int(locked["CapEff"], 16) == 0  # (not root)
    assert locked["NoNewPrivs"] == "1"
    assert (locked["root"], locked["pid"]) == ("ro", "host")
    admin = facts(engine, "admin")
    assert admin["user"] == "0"
    assert int(admin["CapEff"], 16) & (1 << 21)  # CAP_SYS_ADMIN, which no default gives
    assert (admin["root"], admin["pid"]) == ("rw", "host")

    engine.stack.store.apply(named_daemonset("strict", {
        "hostNetwork": True, "terminationGracePeriodSeconds": 1,
        "securityContext": {"runAsNonRoot": True},
        "containers": [{"name": "app", "image": IMAGE, "command": ["sleep", "3600"]}]}))

    def refused() -> tuple[dict[str, Any], dict[str, Any]] | None:
        for pod in pods(engine):
            if meta.name(pod).startswith("strict-"):
                waiting = (main_status(pod).get("state") or {}).get("waiting") or {}
                if waiting.get("reason") == "CreateContainerConfigError":
                    return pod, waiting
        return None

    pod, waiting = wait_for(refused, timeout=90, what="CreateContainerConfigError")
    assert waiting["message"] == (
        "container has runAsNonRoot and image will run as root (pod: "
        f'"{meta.name(pod)}_default({meta.uid(pod)})", container: app)')
    assert not engine.containers(**{dockerrt.LABEL_UID: meta.uid(pod)})  # nothing made
    # the image is looked at again (and told of) once per kubelet's back-off, not each round
    pulled = [e for e in engine.stack.store.list("Event", "default")
              if e["involvedObject"].get("uid") == meta.uid(pod) and e["reason"] == "Pulled"]
    assert len(pulled) == 1 and pulled[0].get("count", 1) <= 2, pulled


def test_a_container_says_why_it_ended_in_its_termination_message_file(engine: Engine) -> None:
    """What a container writes to its terminationMessagePath is its terminated state's
    message, as kubelet reads it; a later run starts with the file empty."""
    start(engine)
    engine.stack.store.apply(named_daemonset("teller", {
        "hostNetwork": True, "terminationGracePeriodSeconds": 1,
        "securityContext": {"runAsUser": 1234},  # (any user may write it)
        "containers": [{"name": "app", "image": IMAGE, "command": ["sh", "-c",
                        'cat /dev/termination-log; echo "run $(date +%s%N) failed" > '
                        '/dev/termination-log; exit 2']}]}))

    def ended(runs: int) -> dict[str, Any] | None:
        for pod in pods(engine):
            cs = main_status(pod)
            if cs.get("restartCount", 0) >= runs:
                return (cs.get("lastState") or {}).get("terminated")
        return None

    term = wait_for(lambda: ended(1), timeout=90, what="the first run ended")
    assert term["exitCode"] == 2
    assert term["message"].startswith("run ") and term["message"].endswith(" failed\n")
    later = wait_for(lambda: (t := ended(2)) and t["message"] != term["message"] and t,
                     timeout=90, what="the second run ended")
    assert later["message"].startswith("run ")  # its own message, not the first run's
    found = engine.containers(**{dockerrt.LABEL_CONTAINER: "app"})
    logs = b"".join(engine.client.api.logs(c["Id"]) for c in found)
    assert b"failed" not in logs  # each run found the file empty


def test_kubectl_exec_in_a_docker_pod_through_the_api_server(engine: Engine,
                                                             tmp_path: Path) -> None:
    start(engine)
    api = ApiServer(engine.stack, tmp_path)
    api.start()
    engine.stack.store.apply({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "shell", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "shell"}},
                 "template": {"metadata": {"labels": {"app": "shell"}}, "spec": {
                     "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "app", "image": IMAGE, "workingDir": "/tmp",
                                     "env": [{"name": "GREETING", "value": "hello there"}],
                                     "command": ["sh", "-c", "while true; do echo tick; "
                                                 "sleep 0.2; done"]}]}}}})

    def running() -> dict[str, Any] | None:
        ready = [p for p in pods(engine) if "running" in (main_status(p).get("state") or {})]
        return ready[0] if ready else None

    name = meta.name(wait_for(running, timeout=90, what="the pod running"))
    ran = api.kubectl("exec", name, "--", "sh", "-c",
                      'echo "$GREETING"; pwd; echo oops >&2')
    assert (ran.stdout, ran.stderr) == ("hello there\n/tmp\n", "oops\n")
    assert api.kubectl("exec", name, "-i", "--", "tr", "a-z", "A-Z",
                       input="quiet input\n").stdout == "QUIET INPUT\n"
    failed = api.kubectl("exec", name, "--", "sh", "-c", "exit 7", check=False)
    assert failed.returncode == 7
    assert "command terminated with exit code 7" in failed.stderr
    seen, rc = in_terminal(api, name, b"echo term=$TERM; stty size; exit 3\n", b"33 91")
    assert b"term=xterm" in seen
    assert rc == 3
    (tmp_path / "up.txt").write_text("copied in\n")
    api.kubectl("cp", str(tmp_path / "up.txt"), f"{name}:/tmp/in.txt")
    assert api.kubectl("exec", name, "--", "cat", "/tmp/in.txt").stdout == "copied in\n"
    # kubectl attach: the container's output, from the engine's log as it comes
    attach = api.popen("attach", name, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    try:
        assert attach.stdout is not None
        assert select.select([attach.stdout], [], [], 30)[0], "kubectl attach showed nothing"
        assert attach.stdout.readline() == "tick\n"
    finally:
        attach.kill()
        attach.wait(timeout=30)


def test_port_forward_to_a_docker_pod_on_its_network(engine: Engine) -> None:
    start(engine)
    (engine.dir / "echo.py").write_text(ECHO)
    port = engine.port
    engine.stack.store.apply({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "echo", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "echo"}},
                 "template": {"metadata": {"labels": {"app": "echo"}}, "spec": {
                     "terminationGracePeriodSeconds": 1,
                     "volumes": [{"name": "srv", "hostPath": {"path": str(engine.dir)}}],
                     "containers": [{"name": "app", "image": IMAGE,
                                     "volumeMounts": [{"name": "srv", "mountPath": "/srv"}],
                                     "command": ["python3", "/srv/echo.py", str(port),
                                                 "/srv/marks", "0.0.0.0"]}]}}}})

    def addressed() -> dict[str, Any] | None:
        ready = [p for p in pods(engine) if "running" in (main_status(p).get("state") or {})
                 and (p.get("status") or {}).get("podIP") not in (None, "", engine.ip)]
        return ready[0] if ready else None

    pod = wait_for(addressed, timeout=90, what="the pod running with its own IP")
    # from its first status on: never the node's address first (kubelet knows a pod's IP
    # before its containers start), and its image named as kubelet's docker runtime names it
    versions = [ch.new for ch in Cache(engine.stack.store, ["Pod"], name="versions").poll(
        count=100_000, block_ms=0) if meta.uid(ch.new) == meta.uid(pod)]
    assert {(v.get("status") or {}).get("podIP") for v in versions} <= {
        None, pod["status"]["podIP"]}, versions
    assert main_status(pod)["imageID"].startswith("docker://sha256:")
    wait_for(lambda: (engine.dir / "marks" / "listening").exists(), what="the echo server")
    ep = nodeserver.endpoint(engine.stack.store, engine.node, "port-forward")
    name, uid = meta.name(pod), meta.uid(pod)
    forwards_both_ways(ep, engine.dir / "marks", name, uid, port)
    assert refused(ep, f"/portforward/default/{name}?uid={uid}&port={port + 1}") == (
        400, f"error forwarding port {port + 1} to pod {name}, uid {uid}: dial tcp "
             f"{pod['status']['podIP']}:{port + 1}: connect: connection refused")


def test_kubectl_top_of_a_docker_pod_from_the_engines_stats(engine: Engine,
                                                           tmp_path: Path) -> None:
    start(engine, "--metrics-resolution", "2")
    api = ApiServer(engine.stack, tmp_path)
    api.start()
    engine.stack.store.apply(burner(IMAGE, "python3"))

    def running() -> dict[str, Any] | None:
        ready = [p for p in pods(engine) if "running" in (main_status(p).get("state") or {})]
        return ready[0] if ready else None

    name = meta.name(wait_for(running, timeout=90, what="the pod running"))
    row = wait_for(lambda: measured(api, "pod", name), timeout=60, interval=0.5,
                   what="the pod's metrics")
    shown, cpu_m, memory_mi = top_row(row.strip())
    assert shown == name
    assert_burns_and_holds(cpu_m, memory_mi)  # (the working set: the cgroup's, less its cache)
    by_container = api.kubectl("top", "pod", name, "--containers", "--no-headers").stdout
    assert by_container.split()[:2] == [name, "burn"]
    node = wait_for(lambda: measured(api, "node"), timeout=30, what="the node's metrics")
    assert node.split()[0] == engine.node
