"""The docker runtime (acts): each container of a pod is a container of the Docker engine,
through its API (the Docker SDK for Python; the engine named by DOCKER_HOST, else its local
socket), named as kubelet's dockershim named them
(``k8s_<container>_<pod>_<namespace>_<uid>_<restartCount>``) and labelled with the pod's
uid, name and namespace, the container's name and run, and this node's name.

What it maps from the pod: ``image`` and ``imagePullPolicy`` (no registry is asked when the
image is present, unless the policy is Always), ``command`` (the entrypoint) and ``args``
(the command), ``env``, ``workingDir``, ``hostNetwork`` (the engine host's network) or else
the pod's sandbox (below), ``ports`` with a ``hostPort`` (published on the sandbox),
``hostPath`` volumes (their ``mountPropagation`` the bind's), ``emptyDir`` volumes (a
volume of the engine per pod and name, removed with the pod), configMap, secret and
downwardAPI volumes (``configvolumes``), ``resources.limits`` (memory, cpu),
the security context (``securitycontext``: user and groups, privileged, capabilities, a
read-only root, no new privileges, seccomp, sysctls, ``hostPID``, ``hostIPC``), checked
against the image's user for ``runAsNonRoot`` as kubelet checks it, and a file of the agent's
at ``terminationMessagePath`` (``runtime.termination_message`` reads it as the run ends).
A pod without ``hostNetwork`` has a sandbox, as kubelet's: a container of the agent's
--pod-infra-image (``k8s_POD_<pod>_<namespace>_<uid>_0``) on the agent's --docker-network,
named for the pod's hostname, that holds the pod's network and IPC namespaces. Each of its
containers joins them: they share its address (the pod's IP) and localhost, and its
published ports. A sandbox that ended is replaced as kubelet replaces it: the containers
still in the old one are killed (``refresh``) and start again, per their restartPolicy, in
a new one.

The lifecycle's records live in the state dir (``runtime.Records``) as for the process
runtime. The engine mounts the state dir's files into containers (configMap volumes,
termination message files) by their paths on its own host, so an agent that runs in a
container of its own needs the state dir's ``pods`` mounted from that host at the same
path (as ``compose.yaml`` mounts machine-2's). The labels let an agent whose state dir was
lost remove what it left (``sweep``), and find a container it was starting when it died
(``find_started``). A container's output is the engine's log of it, served by the agent's
log endpoint (``logs``); a container that ended is kept until the one after its restart
ends too, for ``--previous``.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import docker
import docker.errors
import docker.utils
import docker.utils.socket

from services.node_agent import (
    configvolumes,
    containerlogs,
    dns,
    podstatus,
    probes,
    securitycontext,
)
from services.node_agent.podstatus import ContainerState
from services.node_agent.runtime import LOOPBACK, Exit, ImageError, Records, termination_file
from shared.api import metrics, podexec, podlog
from shared.api.podexec import ExecOptions

log = logging.getLogger("node-agent")
Obj = dict[str, Any]

LABEL_NODE = "io.daemonbus.node"
LABEL_UID = "io.kubernetes.pod.uid"
LABEL_POD = "io.kubernetes.pod.name"
LABEL_NAMESPACE = "io.kubernetes.pod.namespace"
LABEL_CONTAINER = "io.kubernetes.container.name"
LABEL_RUN = "io.kubernetes.container.restartCount"
SCHEME = "docker://"
SANDBOX = "POD"  # the container name of a pod's sandbox (upper case: no container's name)
#: kubelet's default sandbox image (its --pod-infra-container-image)
INFRA_IMAGE = "registry.k8s.io/pause:3.10"
EXEC_POLL = 0.05
RESOLV_CONF = "/etc/resolv.conf"  # the host's, as kubelet's --resolv-conf
# a volumeMount's mountPropagation as a bind's (None: the engine's default, rprivate)
PROPAGATION = {"HostToContainer": "rslave", "Bidirectional": "rshared"}


def container_name(pod: Obj, container: str, run: int) -> str:
    md = pod.get("metadata") or {}
    return f"k8s_{container}_{md.get('name')}_{md.get('namespace')}_{md.get('uid')}_{run}"


def engine_id(c: ContainerState) -> str:
    return c.container_id.removeprefix(SCHEME) if c.container_id.startswith(SCHEME) else ""


def working_set(memory_stats: Obj | None) -> int:
    """A container's memory working set from the engine's memory stats, as cAdvisor and
    kubelet compute it: its usage less its inactive file cache (cgroup v2's
    ``inactive_file``, v1's ``total_inactive_file``), never below zero."""
    stats = memory_stats or {}
    usage = int(stats.get("usage") or 0)
    detail = stats.get("stats") or {}
    inactive = int(detail.get("inactive_file", detail.get("total_inactive_file")) or 0)
    return max(0, usage - inactive)


def pull_policy(container: Obj) -> str:
    """imagePullPolicy, defaulted as the API server does (Always for :latest or no tag)."""
    policy = str(container.get("imagePullPolicy") or "")
    if policy:
        return policy
    _, tag = docker.utils.parse_repository_tag(str(container.get("image") or ""))
    return "Always" if tag in (None, "latest") else "IfNotPresent"


def _uid(pod_dir: Path) -> str:
    return pod_dir.name.rsplit("_", 1)[-1]


class DockerRuntime(Records):
    kind = "docker"
    mounts = True

    def __init__(self, state_dir: Path, node_name: str, client: docker.DockerClient,
                 network: str = "bridge", infra_image: str = INFRA_IMAGE,
                 cluster_dns: Sequence[str] = (), cluster_domain: str = "",
                 resolv_conf: str = RESOLV_CONF) -> None:
        """``cluster_dns``, ``cluster_domain``, ``resolv_conf``: kubelet's --cluster-dns,
        --cluster-domain and --resolv-conf, the DNS its pods get (``dns``)."""
        super().__init__(state_dir)
        self.node = node_name
        self.client = client
        self.api = client.api
        self.network = network
        self.infra_image = infra_image
        self.cluster_dns = tuple(cluster_dns)
        self.cluster_domain = cluster_domain
        self.resolv_conf = resolv_conf
        self._version = f"docker://{client.version().get('Version', '')}"
        self._seen: dict[str, Obj] = {}  # engine id → the engine's summary of the container
        self._pulls: dict[str, Future[str]] = {}  # image → its pull under way
        self._puller = ThreadPoolExecutor(max_workers=2, thread_name_prefix="pull")

    def version(self) -> str:
        return self._version

    def _ours(self, *labels: str) -> list[Obj]:
        try:
            found: list[Obj] = self.api.containers(
                all=True, filters={"label": [f"{LABEL_NODE}={self.node}", *labels]})
        except docker.errors.DockerException as err:
            raise OSError(f"docker: {err}") from err
        return found

    def refresh(self) -> set[str]:
        """Read what the engine has of this node's; kill each running container whose
        sandbox is not running (it ended, or was removed): its network is gone, and it
        starts again in the pod's new sandbox (kubelet's "pod sandbox changed")."""
        self._seen = {s["Id"]: s for s in self._ours()}
        changed: set[str] = set()
        for eid, s in self._seen.items():
            mode = str((s.get("HostConfig") or {}).get("NetworkMode") or "")
            holder = self._seen.get(mode.removeprefix("container:")) or {}
            if s.get("State") == "running" and mode.startswith("container:") \
                    and holder.get("State") != "running":
                labels = s.get("Labels") or {}
                log.info("pod sandbox of %s/%s changed: killing its container %s, which "
                         "starts again in a new one", labels.get(LABEL_NAMESPACE),
                         labels.get(LABEL_POD), labels.get(LABEL_CONTAINER))
                changed.add(str(labels.get(LABEL_UID)))
                try:
                    self.api.kill(eid)
                except docker.errors.DockerException as err:
                    log.warning("cannot kill container %s: %s", eid[:12], err)
        return changed

    def sandbox(self, pod: Obj) -> None:
        self._sandbox(pod)

    def _running_sandbox(self, pod: Obj) -> Obj | None:
        """The engine's summary of the pod's running sandbox, as of this round's ``refresh``
        (or made since), if it has one."""
        return self._running(pod, SANDBOX)

    def _running(self, pod: Obj, name: str) -> Obj | None:
        """The engine's summary of the pod's running container ``name`` (or its sandbox), as
        of this round's ``refresh`` (or made since), if it has one."""
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        for s in self._seen.values():
            labels = s.get("Labels") or {}
            if labels.get(LABEL_UID) == uid and labels.get(LABEL_CONTAINER) == name \
                    and s.get("State") == "running":
                return s
        return None

    def _sandbox(self, pod: Obj) -> str:
        """Acts: the engine id of the pod's running sandbox (``_running_sandbox``: the
        engine is not asked again for each container), made and started when there is
        none (one that ended is removed): a container of the infra image on the pods'
        network, named for the pod's hostname, publishing every hostPort of its containers,
        its IPC namespace shareable."""
        running = self._running_sandbox(pod)
        if running is not None:
            return str(running["Id"])
        md, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        found = self._ours(f"{LABEL_UID}={md.get('uid')}", f"{LABEL_CONTAINER}={SANDBOX}")
        for s in found:
            if s.get("State") == "running":
                return str(s["Id"])
        for s in found:
            self._remove(s["Id"])
        image = self.infra_image
        try:
            if not self._present(image):
                log.info("pulling the sandbox image %s", image)
                self._pull(image)
        except (docker.errors.DockerException, OSError) as err:
            raise OSError(f'Failed to create pod sandbox: failed to get sandbox image '
                          f'"{image}": {getattr(err, "explanation", None) or err}') from err
        containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
        ports = {f"{p.get('containerPort')}/{str(p.get('protocol') or 'TCP').lower()}":
                 (str(p.get("hostIP") or ""), int(p["hostPort"]))
                 for c in containers for p in c.get("ports") or [] if p.get("hostPort")}
        labels = self._labels(pod, SANDBOX, 0)
        name = container_name(pod, SANDBOX, 0)
        hostname = str(spec.get("hostname") or md.get("name") or "")[:63]
        try:
            eid = self._started(name, labels, lambda: self.client.containers.create(
                image, name=name, labels=labels, detach=True, network=self.network,
                hostname=hostname, ports=ports or None, ipc_mode="shareable",
                **self._dns_options(pod)))
        except docker.errors.DockerException as err:
            raise OSError("Failed to create pod sandbox: "
                          f"{getattr(err, 'explanation', None) or err}") from err
        log.info("pod %s/%s: sandbox %s started", md.get("namespace"), md.get("name"),
                 eid[:12])
        return eid

    def _dns_options(self, pod: Obj) -> Obj:
        """The engine's DNS options of ``pod`` (its sandbox's, or its containers' on the
        host's network): ``dns.pod_dns`` over this machine's resolv.conf; none when it is
        the host's as it is (the engine's own copy of it)."""
        try:
            host = dns.parse_resolv_conf(Path(self.resolv_conf).read_text())
        except OSError:
            host = dns.PodDNS()
        found = dns.pod_dns(pod, self.cluster_dns, self.cluster_domain, host)
        if found is None:
            return {}
        return {"dns": list(found.nameservers), "dns_search": list(found.searches),
                "dns_opt": list(found.options)}

    def dns_fallback(self, pod: Obj) -> bool:
        return dns.fallback(pod, self.cluster_dns)

    def _labels(self, pod: Obj, container: str, run: int) -> dict[str, str]:
        """The labels of a container of ``pod`` (its sandbox's: ``SANDBOX``, run 0)."""
        md = pod.get("metadata") or {}
        return {LABEL_NODE: self.node, LABEL_UID: str(md.get("uid") or ""),
                LABEL_POD: str(md.get("name") or ""),
                LABEL_NAMESPACE: str(md.get("namespace") or ""),
                LABEL_CONTAINER: container, LABEL_RUN: str(run)}

    def _started(self, name: str, labels: dict[str, str], create: Callable[[], Any]) -> str:
        """Acts: the engine id of the container ``create()`` makes (or of the one named
        ``name`` that a run of the agent that died made), started, and kept as running with
        its address (the pod's IP from its start) till the next ``refresh``. Raises
        DockerException."""
        try:
            eid = str(create().id)
        except docker.errors.APIError as err:
            if err.status_code != 409:  # (409: made by a run of the agent that died)
                raise
            eid = str(self.api.inspect_container(name)["Id"])
        self.api.start(eid)
        info = self.api.inspect_container(eid)
        self._seen[eid] = {"Id": eid, "State": "running", "Labels": labels,
                           "NetworkSettings": {"Networks": (info.get("NetworkSettings") or {})
                                               .get("Networks") or {}}}
        return eid

    def base_env(self) -> dict[str, str]:
        return {}  # the image's own environment (PATH, HOME) is the engine's to add

    def argv(self, container: Obj, env: dict[str, str]) -> list[str]:
        return podstatus.argv(container, env, need_command=False)

    # ---- images ----------------------------------------------------------------------------

    def _present(self, image: str) -> bool:
        try:
            self.client.images.get(image)
        except docker.errors.ImageNotFound:
            return False
        except docker.errors.DockerException as err:
            raise OSError(f"docker: {err}") from err
        return True

    def _pull(self, image: str) -> str:
        """Acts: pull ``image``; what kubelet's Pulled event says of it."""
        started = time.monotonic()
        repo, tag = docker.utils.parse_repository_tag(image)
        self.api.pull(repo, tag=tag or "latest")
        took = f"{time.monotonic() - started:.3f}s"
        size = self.client.images.get(image).attrs.get("Size")
        return (f'Successfully pulled image "{image}" in {took} ({took} including waiting). '
                f"Image size: {size} bytes.")

    def image_ready(self, container: Obj) -> str | None:
        image = str(container.get("image") or "")
        if not image:
            raise ImageError("InvalidImageName", "a container needs an image")
        policy = pull_policy(container)
        pull = self._pulls.get(image)
        if pull is None:
            if policy != "Always" and self._present(image):
                return f'Container image "{image}" already present on machine'
            if policy == "Never":
                raise ImageError("ErrImageNeverPull", f'Container image "{image}" is not '
                                 "present with pull policy of Never")
            log.info("pulling image %s", image)
            self._pulls[image] = self._puller.submit(self._pull, image)
            return None
        if not pull.done():
            return None
        del self._pulls[image]
        err = pull.exception()
        if err is not None:
            explanation = getattr(err, "explanation", None) or str(err)
            raise ImageError("ErrImagePull", f"failed to pull image {image!r}: {explanation}")
        return pull.result()

    def _image(self, container: Obj) -> Obj:
        """The engine's inspection of the container's image (present)."""
        try:
            image: Obj = self.api.inspect_image(  # type: ignore[no-untyped-call]
                str(container.get("image")))
        except docker.errors.DockerException as err:
            raise OSError(getattr(err, "explanation", None) or str(err)) from err
        return image

    def check_config(self, pod: Obj, container: Obj) -> None:
        spec = pod.get("spec") or {}
        if spec.get("shareProcessNamespace") and spec.get("hostNetwork"):
            raise podstatus.ConfigError(
                "shareProcessNamespace: the docker runtime shares a pod's processes through "
                "its sandbox, which a pod on the host's network does not have")
        user = image_user(self._image(container))
        securitycontext.engine_options(pod, container, user)  # (what it cannot give)
        why = securitycontext.non_root_error(pod, container, user)
        if why is not None:
            raise podstatus.ConfigError(why)

    # ---- containers ------------------------------------------------------------------------

    def _volumes(self, pod_dir: Path, pod: Obj, container: Obj) -> list[str]:
        """The container's volumeMounts as the engine's binds (hostPath: the host's path,
        with its mountPropagation as the bind's, as kubelet's docker shim gave it;
        emptyDir: an engine volume of the pod's; configMap, secret and downwardAPI: the
        directory the agent keeps its files in under the pod's own,
        ``configvolumes.volume_dir``, read-only)."""
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        vols = {str(v.get("name")): v for v in (pod.get("spec") or {}).get("volumes") or []}
        of_objects = configvolumes.object_volumes(pod)
        binds = []
        for m in container.get("volumeMounts") or []:
            name = str(m.get("name") or "")
            v = vols.get(name)
            if v is None:
                raise OSError(f"volumeMount {name}: no such volume")
            if v.get("hostPath") is not None:
                source = str((v["hostPath"] or {}).get("path") or "")
            elif name in of_objects:
                source = str(configvolumes.volume_dir(pod_dir, of_objects[name][0], name))
                m = {**m, "readOnly": True}  # (kubelet mounts it read-only, whatever it says)
            elif "emptyDir" in v:
                source = f"k8s_{uid}_{name}"
                self.client.volumes.create(source, labels={LABEL_UID: uid,
                                                           LABEL_NODE: self.node})
            else:
                raise OSError(f"volume {name}: the docker runtime mounts only hostPath, "
                              "emptyDir, configMap, secret and downwardAPI volumes")
            if m.get("subPath"):
                raise OSError(f"volumeMount {name}: subPath is not supported")
            mode = "ro" if m.get("readOnly") else "rw"
            if source.startswith("/") and m.get("mountPropagation") in PROPAGATION:
                mode += "," + PROPAGATION[m["mountPropagation"]]  # (a bind, not a volume)
            binds.append(f"{source}:{m.get('mountPath')}:{mode}")
        return binds

    def start(self, pod_dir: Path, pod: Obj, container: Obj, c: ContainerState,
              words: list[str], env: dict[str, str]) -> None:
        spec = pod.get("spec") or {}
        command = container.get("command") or []
        entrypoint = words[:len(command)] if command else None
        cmd = words[len(command):] if command else (words or None)
        labels = self._labels(pod, c.name, c.restart_count)
        image = self._image(container)  # (its user here, its id for the status)
        try:
            options = securitycontext.engine_options(pod, container, image_user(image))
            memory = podstatus.memory_limit(container)
            cpu = podstatus.cpu_limit(container)
        except podstatus.ConfigError as err:
            raise OSError(str(err)) from err
        if spec.get("hostNetwork"):
            options["network_mode"] = "host"
            options.update(self._dns_options(pod))
        else:
            sandbox = self._sandbox(pod)
            options["network_mode"] = f"container:{sandbox}"  # (its resolv.conf too)
            options.setdefault("ipc_mode", f"container:{sandbox}")  # (unless hostIPC)
            if spec.get("shareProcessNamespace"):
                options["pid_mode"] = f"container:{sandbox}"
        target = container.get("targetContainerName")
        if target:  # (an ephemeral container: in its target's PID namespace)
            running = self._running(pod, str(target))
            if running is None:
                raise OSError(f'the target container "{target}" is not running')
            options["pid_mode"] = f"container:{running['Id']}"
        if memory is not None:
            options["mem_limit"] = memory
            options["memswap_limit"] = memory
        if cpu is not None:
            options["nano_cpus"] = int(cpu * 1e9)
        name = container_name(pod, c.name, c.restart_count)
        try:
            binds = self._volumes(pod_dir, pod, container)
            at = container.get("terminationMessagePath")
            if at:  # (emptied: what the run before said was read as it ended)
                told = termination_file(pod_dir, c.name)
                told.parent.mkdir(parents=True, exist_ok=True)
                told.write_bytes(b"")
                told.chmod(0o666)  # (whatever user the container runs as may write it)
                binds.append(f"{told}:{at}:rw")
            eid = self._started(name, labels, lambda: self.client.containers.create(
                str(container.get("image")), command=cmd, entrypoint=entrypoint,
                environment=env, working_dir=container.get("workingDir") or None,
                name=name, labels=labels, volumes=binds, detach=True,
                stdin_open=bool(container.get("stdin")), tty=bool(container.get("tty")),
                **options))
        except docker.errors.DockerException as err:
            raise OSError(getattr(err, "explanation", None) or str(err)) from err
        c.pid, c.create_time = 0, 0.0
        c.container_id = SCHEME + eid
        c.image_id = image_id(image)
        self._remove_older(pod, c)

    def _remove_older(self, pod: Obj, c: ContainerState) -> None:
        """Keep a container's current run and the one before (``logs --previous``)."""
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        for s in self._ours(f"{LABEL_UID}={uid}", f"{LABEL_CONTAINER}={c.name}"):
            run = int((s.get("Labels") or {}).get(LABEL_RUN) or 0)
            if run < c.restart_count - 1:
                self._remove(s["Id"])

    def _remove(self, eid: str) -> None:
        try:
            self.api.remove_container(eid, force=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.DockerException as err:
            log.warning("cannot remove container %s: %s", eid[:12], err)

    def find_started(self, pod_dir: Path, c: ContainerState) -> None:
        found = self._ours(f"{LABEL_UID}={_uid(pod_dir)}", f"{LABEL_CONTAINER}={c.name}",
                           f"{LABEL_RUN}={c.restart_count}")
        if not found:
            return
        s = found[0]
        if s.get("State") == "created":
            try:
                self.api.start(s["Id"])
            except docker.errors.DockerException as err:
                log.warning("cannot start container %s: %s", s["Id"][:12], err)
        c.container_id = SCHEME + s["Id"]
        c.started_at = float(s.get("Created") or time.time())
        log.info("found container %s (%s) started by an earlier run", c.name, s["Id"][:12])

    def is_ours(self, c: ContainerState) -> bool:
        """Is the recorded container still there (running, or ended with its exit code)?"""
        if not self._seen:
            self.refresh()
        return engine_id(c) in self._seen

    def exited(self, c: ContainerState) -> Exit | None:
        eid = engine_id(c)
        s = self._seen.get(eid)
        if s is None:
            return Exit(-1)  # removed behind the agent's back: its end is unknown
        if s.get("State") not in ("exited", "dead"):
            return None
        try:
            state = self.api.inspect_container(eid)["State"]
        except docker.errors.NotFound:
            return Exit(-1)
        except docker.errors.DockerException as err:
            log.warning("cannot inspect container %s: %s", eid[:12], err)
            return None
        return Exit(int(state.get("ExitCode") or 0), 0,
                    "OOMKilled" if state.get("OOMKilled") else "")

    def signal(self, c: ContainerState, sig: int) -> None:
        eid = engine_id(c)
        if eid not in self._seen:
            return
        try:
            self.api.kill(eid, signal=int(sig))
        except docker.errors.DockerException:
            pass  # (not running any more: 409)

    def exec_probe(self, c: ContainerState, words: list[str], env: dict[str, str], cwd: str,
                   timeout: float) -> tuple[bool, str]:
        """The command run in the container (``docker exec``), with the container's
        environment, its output (stdout and stderr, as they came) read from the engine's
        connection; a probe that outlasts ``timeout`` failed (the engine cannot stop it:
        its connection is closed)."""
        deadline = time.monotonic() + timeout
        try:
            ex = self.api.exec_create(engine_id(c), words, environment=env,
                                      workdir=cwd or None, stdout=True, stderr=True)
            sock: Any = self.api.exec_start(ex["Id"], socket=True)
            raw: socket.socket = getattr(sock, "_sock", sock)
            got = bytearray()
            try:
                while (left := deadline - time.monotonic()) > 0:
                    raw.settimeout(left)
                    chunk = raw.recv(1 << 16)
                    if not chunk:
                        break
                    got += chunk[:max(0, 2 * probes.EXEC_OUTPUT_MAX - len(got))]
                else:
                    return False, probes.timed_out(words)
            except TimeoutError:
                return False, probes.timed_out(words)
            finally:
                raw.close()
            output = _demuxed(bytes(got))[:probes.EXEC_OUTPUT_MAX].decode(errors="replace")
            while time.monotonic() < deadline:
                info = self.api.exec_inspect(ex["Id"])
                if not info.get("Running"):
                    return info.get("ExitCode") == 0, output
                time.sleep(EXEC_POLL)
        except docker.errors.DockerException as err:
            return False, f"docker: {err}"
        return False, probes.timed_out(words)

    def exec(self, c: ContainerState, env: dict[str, str], cwd: str,
             opts: ExecOptions) -> DockerExec:
        """``docker exec`` in the container, its streams on the engine's hijacked
        connection."""
        try:
            ex = self.api.exec_create(engine_id(c), list(opts.command), stdout=opts.stdout,
                                      stderr=opts.stderr, stdin=opts.stdin, tty=opts.tty,
                                      environment=env, workdir=cwd or None)
            sock = self.api.exec_start(ex["Id"], tty=opts.tty, socket=True)
        except docker.errors.DockerException as err:
            raise OSError(getattr(err, "explanation", None) or str(err)) from err
        return DockerExec(self.api, str(ex["Id"]), sock, opts.tty)

    def attach(self, pod: Obj, c: ContainerState, run: int,
               opts: ExecOptions) -> DockerAttach | None:
        """The engine's attach to the running container ``c`` when the caller sends input
        and the container keeps its input open (``stdin: true``): its streams on the
        engine's hijacked connection. None otherwise (the caller follows its output)."""
        if not opts.stdin:
            return None
        try:
            eid = engine_id(c)
            config = self.api.inspect_container(eid).get("Config") or {}
            if not config.get("OpenStdin"):
                return None
            sock = self.api.attach_socket(eid, params={
                "stdin": 1, "stdout": int(opts.stdout), "stderr": int(opts.stderr),
                "stream": 1})
        except docker.errors.DockerException as err:
            raise OSError(getattr(err, "explanation", None) or str(err)) from err
        return DockerAttach(self.api, eid, sock, bool(config.get("Tty")))

    def on_host_network(self, pod: Obj) -> bool:
        return bool((pod.get("spec") or {}).get("hostNetwork"))

    def pod_ip(self, pod: Obj, containers: list[ContainerState]) -> str:
        """The address of the pod's running sandbox on the pods' network."""
        s = self._running_sandbox(pod) or {}
        nets = ((s.get("NetworkSettings") or {}).get("Networks") or {})
        return str((nets.get(self.network) or {}).get("IPAddress") or "")

    def forward_host(self, pod: Obj, containers: list[ContainerState]) -> str:
        """The loopback address for a hostNetwork pod (the engine runs beside the agent);
        else its sandbox's address on the pods' network (``pod_ip``)."""
        if self.on_host_network(pod):
            return LOOPBACK if any(c.running() for c in containers) else ""
        return self.pod_ip(pod, containers)

    def usage(self, containers: list[ContainerState]) -> dict[str, metrics.Sample]:
        """The engine's stats of each running container (one read each, not waiting for a
        second): its cgroup's CPU time and its memory working set (``working_set``)."""
        out = {}
        for c in containers:
            eid = engine_id(c)
            if not c.running() or (self._seen.get(eid) or {}).get("State") != "running":
                continue
            try:
                stats = self.api.stats(eid, stream=False, one_shot=True)
                cpu = int(stats["cpu_stats"]["cpu_usage"]["total_usage"])
            except (docker.errors.DockerException, KeyError, TypeError, ValueError):
                continue  # gone meanwhile, or not measured (yet)
            out[c.container_id] = metrics.Sample(cpu / 1e9,
                                                 working_set(stats.get("memory_stats")))
        return out

    def sweep(self, known: set[str]) -> None:
        for eid, s in list(self._seen.items()):
            labels = s.get("Labels") or {}
            if labels.get(LABEL_UID) not in known:
                log.info("removing container %s of pod %s/%s, which this agent has no record "
                         "of", eid[:12], labels.get(LABEL_NAMESPACE), labels.get(LABEL_POD))
                self._remove(eid)
                del self._seen[eid]

    def logs(self, pod: Obj, container: str, run: int, opts: podlog.LogOptions,
             stop: threading.Event | None = None) -> Iterator[bytes]:
        """The engine's log of the run's container (stdout and stderr); following it ends
        when the container does. The run before the current is kept (``_remove_older``);
        one not there is upstream's "previous terminated container ... not found".

        The engine keeps the time of each line: with ``timestamps`` it prefixes each line
        with it as kubelet does (RFC 3339 in UTC, nine digits of fraction, a space), and
        its ``since`` keeps the lines at or after a time. Like kubelet it takes the last
        ``tail_lines`` lines first, then drops those older than the since; ``limit_bytes``
        (cut here) counts the prefixes too."""
        oldest = podlog.since(opts, time.time_ns())
        if oldest is not None and oldest < podlog.SECOND:
            oldest = None  # (every line the engine has is later; it takes no time before)
        md = pod.get("metadata") or {}
        found = self._ours(f"{LABEL_UID}={md.get('uid')}", f"{LABEL_CONTAINER}={container}",
                           f"{LABEL_RUN}={run}")
        if not found:
            if opts.previous:
                raise podlog.no_previous(container, str(md.get("name")))
            raise OSError(f"no container of run {run} of {container}")
        try:
            chunks = self.api.logs(found[0]["Id"], stdout=True, stderr=True, stream=True,
                                   follow=opts.follow and not opts.previous,
                                   tail="all" if opts.tail_lines is None else opts.tail_lines,
                                   timestamps=opts.timestamps,
                                   since=None if oldest is None else oldest / podlog.SECOND)
        except docker.errors.DockerException as err:
            raise OSError(f"docker: {err}") from err
        return containerlogs.limited(chunks, opts.limit_bytes, stop)

    def forget(self, pod_dir: Path) -> None:
        uid = _uid(pod_dir)
        for s in self._ours(f"{LABEL_UID}={uid}"):
            self._remove(s["Id"])
            self._seen.pop(s["Id"], None)
        try:
            for v in self.client.volumes.list(filters={"label": f"{LABEL_UID}={uid}"}):
                v.remove(force=True)
        except docker.errors.DockerException as err:
            log.warning("cannot remove the volumes of pod %s: %s", uid, err)
        super().forget(pod_dir)


def image_user(image: Obj) -> str:
    """The ``User`` an image runs as (empty: root)."""
    return str((image.get("Config") or {}).get("User") or "")


def image_id(image: Obj) -> str:
    """A container's ``imageID`` as kubelet's docker runtime named it: the image's first
    repository digest (``docker-pullable://repo@sha256:…``) when it was pulled from one, else
    its own id (``docker://sha256:…``)."""
    digests = image.get("RepoDigests") or []
    return f"docker-pullable://{digests[0]}" if digests else f"docker://{image.get('Id', '')}"


def _demuxed(stream: bytes) -> bytes:
    """The payloads of the engine's multiplexed stream (each frame: its stream's number,
    three zero bytes, its size as 4 bytes big-endian, the bytes), in the order they came;
    a frame cut short keeps what arrived."""
    out, i = bytearray(), 0
    while i + 8 <= len(stream):
        size = int.from_bytes(stream[i + 4:i + 8], "big")
        out += stream[i + 8:i + 8 + size]
        i += 8 + size
    return bytes(out)


class DockerExec:
    """A ``docker exec`` for a caller (``ExecSession``)."""

    def __init__(self, api: docker.APIClient, exec_id: str, sock: Any, tty: bool) -> None:
        self.api = api
        self.id = exec_id
        self.sock = sock
        self.raw: socket.socket = getattr(sock, "_sock", sock)
        self.tty = tty

    def pump(self, send: Callable[[int, bytes], None]) -> None:
        try:
            frames: Iterator[tuple[int, bytes]] = docker.utils.socket.frames_iter(  # type: ignore[no-untyped-call]
                self.sock, self.tty)
            for stream, data in frames:
                if data:
                    send(podexec.STDERR if stream == docker.utils.socket.STDERR
                         else podexec.STDOUT, data)
        except OSError:
            return

    def write_stdin(self, data: bytes) -> None:
        try:
            self.raw.sendall(data)
        except OSError:
            pass

    def close_stdin(self) -> None:
        try:
            self.raw.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def resize(self, width: int, height: int) -> None:
        try:
            self.api.exec_resize(self.id, height=height, width=width)
        except docker.errors.DockerException:
            pass

    def wait(self) -> int:
        self._close()
        while True:
            try:
                info = self.api.exec_inspect(self.id)
            except docker.errors.DockerException:
                return -1
            if not info.get("Running"):
                return int(info.get("ExitCode") or 0)
            time.sleep(EXEC_POLL)

    def kill(self) -> None:
        """The engine cannot stop an exec (its pid is the engine host's, not to be signalled
        from here): its connection is closed, so the command's input and output end; it
        ends with the container at the latest."""
        self._close()

    def _close(self) -> None:
        try:
            self.raw.close()
        except OSError:
            pass


class DockerAttach(DockerExec):
    """The engine's attach to a running container for a caller (``ExecSession``): its output
    from now on, the caller's input to its open stdin; it ends when the caller goes or the
    container stops, and leaves the container running."""

    def close_stdin(self) -> None:
        """The caller's input ended; the container's stays open (no stdinOnce: a later
        caller may attach), and its output still comes (the engine would end the whole
        attach at a half-close)."""

    def resize(self, width: int, height: int) -> None:
        try:
            self.api.resize(self.id, height=height, width=width)
        except docker.errors.DockerException:
            pass

    def wait(self) -> int:
        self._close()
        return 0
