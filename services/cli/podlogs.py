"""``logs pod/NAME``: a container's output, read from the log files the process runtime's
node agent writes on its machine (``services.node_agent.procs``), or for the docker
runtime's containers (containerID ``docker://…``) from the Docker engine's log of the
container. Run it where the pod's agent runs (or give that agent's --state-dir, or
DOCKER_HOST)."""

from __future__ import annotations

import os
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

import click

from services.cli import context
from services.cli.errors import CliError
from shared.model import meta

Obj = dict[str, Any]
FOLLOW_POLL = 0.2


def _pod_name(arg: str) -> str:
    kind, sep, name = arg.partition("/")
    if not sep:
        return arg
    if kind.lower() not in ("pod", "pods", "po"):
        raise CliError(f"error: only pods have logs here, not {kind}")
    return name


def _container(pod: Obj, name: str | None) -> tuple[str, Obj]:
    """The container asked for, else the default one, as kubectl picks it (the
    kubectl.kubernetes.io/default-container annotation, else the first container)."""
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    statuses = {str(c.get("name")): c for c in (status.get("initContainerStatuses") or []) +
                (status.get("containerStatuses") or [])}
    names = [str(c.get("name")) for c in spec.get("containers") or []]
    every = [str(c.get("name")) for c in spec.get("initContainers") or []] + names
    if name is None:
        name = meta.annotations(pod).get("kubectl.kubernetes.io/default-container") or \
            (names[0] if names else "")
        if len(names) > 1:
            click.echo(f'Defaulted container "{name}" out of: {", ".join(names)}', err=True)
    if name not in every:
        raise CliError(f"error: container {name} is not valid for pod {meta.name(pod)}")
    return name, statuses.get(name) or {}


def _tail(path: Path, lines: int | None) -> tuple[bytes, int]:
    """The file's last ``lines`` lines (all when None) and the offset read up to."""
    with open(path, "rb") as f:
        if lines is None:
            data = f.read()
        else:
            data = b"".join(deque(f, maxlen=lines)) if lines > 0 else b""
            f.seek(0, os.SEEK_END)
        return data, f.tell()


@click.command("logs")
@click.argument("target", metavar="pod/NAME")
@click.option("-n", "--namespace", default=None, help="Namespace (default: default).")
@click.option("-c", "--container", default=None, help="Container (default: the first).")
@click.option("--tail", "tail_lines", type=int, default=-1, show_default=True,
              help="Lines from the end to show (-1: all).")
@click.option("-f", "--follow", is_flag=True, help="Keep printing what the container writes.")
@click.option("-p", "--previous", is_flag=True,
              help="The container's previous run (before its last restart).")
@click.option("--state-dir", type=click.Path(path_type=Path), default=None,
              help="The node agent's --state-dir (default: its default for the pod's node).")
@context.pass_env
def logs(env: context.CliEnv, target: str, namespace: str | None, container: str | None,
         tail_lines: int, follow: bool, previous: bool, state_dir: Path | None) -> None:
    """Print a container's output (stdout and stderr), as `kubectl logs` does, from the
    log files of the process runtime's node agent on this machine, or from the Docker
    engine for the docker runtime's containers.

    \b
    Examples:
      daemonbus logs pod/web-abc12 -n kube-system
      daemonbus logs web-abc12 -c init-setup --previous
      daemonbus logs pod/web-abc12 --tail 20 -f
    """
    from services.node_agent import processagent, procs, runtime  # only for this command

    ns = namespace or "default"
    name = _pod_name(target)
    pod = env.store.try_get("Pod", f"{ns}/{name}")
    if pod is None:
        raise CliError(f'Error from server (NotFound): pods "{name}" not found')
    cname, cstatus = _container(pod, container)
    run = int(cstatus.get("restartCount") or 0)
    if previous:
        if run == 0:
            raise CliError(f'Error from server (BadRequest): previous terminated container '
                           f'"{cname}" in pod "{name}" not found')
        run -= 1
    node = str((pod.get("spec") or {}).get("nodeName") or "")
    if not node:
        raise CliError(f'Error from server (BadRequest): pod "{name}" is not bound to a node')
    cid = _container_id(cstatus, previous)
    if cid.startswith("docker://"):
        _engine_logs(cid.removeprefix("docker://"), cname, name,
                     None if tail_lines < 0 else tail_lines, follow and not previous)
        return
    base = state_dir or processagent.default_state_dir(node)
    path = procs.log_file(runtime.pod_dir(base, pod), cname, run)
    try:
        data, offset = _tail(path, None if tail_lines < 0 else tail_lines)
    except OSError:
        raise CliError(f"error: no log of container {cname} of pod {name} here ({path}): "
                       f"logs are kept on the machine of node {node}, by its node agent "
                       "(--state-dir)") from None
    out = sys.stdout.buffer
    out.write(data)
    out.flush()
    if not follow or previous:
        return
    newer = procs.log_file(runtime.pod_dir(base, pod), cname, run + 1)
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            while True:
                chunk = f.read(65536)
                if chunk:
                    out.write(chunk)
                    out.flush()
                    continue
                if newer.exists() or not path.parent.exists():
                    return  # the container restarted or its pod is gone: this run is over
                time.sleep(FOLLOW_POLL)
    except KeyboardInterrupt:
        return


def _container_id(cstatus: Obj, previous: bool) -> str:
    """The containerID of the run asked for: the current one (running or ended), or the
    one before its last restart."""
    if previous:
        return str(((cstatus.get("lastState") or {}).get("terminated") or {})
                   .get("containerID") or "")
    state = cstatus.get("state") or {}
    return str(cstatus.get("containerID") or (state.get("terminated") or {})
               .get("containerID") or "")


def _engine_logs(eid: str, cname: str, pod: str, tail: int | None, follow: bool) -> None:
    """Acts: copy the engine's log of container ``eid`` to stdout (following it)."""
    import docker

    out = sys.stdout.buffer
    try:
        api = docker.from_env().api
        chunks = api.logs(eid, stdout=True, stderr=True, stream=True, follow=follow,
                          tail="all" if tail is None else tail)
        for chunk in chunks:
            out.write(chunk)
            out.flush()
    except docker.errors.NotFound:
        raise CliError(f"error: container {cname} of pod {pod} is gone from the Docker engine "
                       "(its log went with it)") from None
    except docker.errors.DockerException as err:
        raise CliError(f"error: the log of container {cname} of pod {pod} is kept by the "
                       f"Docker engine of its node, which does not answer here: {err}") from None
    except KeyboardInterrupt:
        return


def register(cli: click.Group) -> None:
    cli.add_command(logs)
