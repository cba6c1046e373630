"""``logs pod/NAME``: a container's output. Read, as ``kubectl logs`` through the API server
is, from the log endpoint of the node agent running the pod (``services.cli.logclient``),
wherever that is; with ``--state-dir`` (or when the node publishes no endpoint) from the
log files of a process runtime's agent on this machine, or for the docker runtime's
containers (containerID ``docker://…``) from the Docker engine's log of the container
(DOCKER_HOST). Which container and which run are decided by
``shared.api.podlog``, as for the API server."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from services.cli import context
from services.cli.errors import CliError
from shared.api import podlog
from shared.model import meta

Obj = dict[str, Any]


def _pod_name(arg: str) -> str:
    kind, sep, name = arg.partition("/")
    if not sep:
        return arg
    if kind.lower() not in ("pod", "pods", "po"):
        raise CliError(f"error: only pods have logs here, not {kind}")
    return name


def _container(pod: Obj, name: str | None) -> str:
    """The container asked for, else the default one, as kubectl picks it (the
    kubectl.kubernetes.io/default-container annotation, else the first container)."""
    names = [str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or []]
    if name is None:
        name = meta.annotations(pod).get("kubectl.kubernetes.io/default-container") or \
            (names[0] if names else "")
        if len(names) > 1:
            click.echo(f'Defaulted container "{name}" out of: {", ".join(names)}', err=True)
    return name


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
              help="Read the log files of the node agent with this --state-dir on this machine "
                   "(default: ask the pod's node agent).")
@context.pass_env
def logs(env: context.CliEnv, target: str, namespace: str | None, container: str | None,
         tail_lines: int, follow: bool, previous: bool, state_dir: Path | None) -> None:
    """Print a container's output (stdout and stderr), as `kubectl logs` does: from the log
    endpoint of the node agent that runs the pod, on whichever machine; with --state-dir,
    from the log files of a process runtime's node agent on this machine.

    \b
    Examples:
      daemonbus logs pod/web-abc12 -n kube-system
      daemonbus logs web-abc12 -c init-setup --previous
      daemonbus logs pod/web-abc12 --tail 20 -f
    """
    from services.cli import logclient
    from services.node_agent import containerlogs, processagent, procs, runtime
    from shared.api import podlog
    from shared.store import nodeserver

    ns = namespace or "default"
    name = _pod_name(target)
    pod = env.store.try_get("Pod", f"{ns}/{name}")
    if pod is None:
        raise CliError(f'Error from server (NotFound): pods "{name}" not found')
    opts = podlog.LogOptions(follow=follow, previous=previous,
                                    tail_lines=None if tail_lines < 0 else tail_lines)
    try:
        cname = podlog.pick_container(pod, _container(pod, container))
        run = podlog.pick_run(pod, cname, previous)
    except podlog.LogError as err:
        raise CliError(f"Error from server (BadRequest): {err}") from None
    node = str(pod["spec"]["nodeName"])
    out = sys.stdout.buffer
    if state_dir is None:
        try:
            ep = nodeserver.endpoint(env.store, node)
        except podlog.LogError:
            ep = None  # no endpoint published: the engine's log, or this machine's files
        if ep is not None:
            try:
                resp = logclient.open_stream(ep, podlog.request_path(pod, cname, run, opts))
            except podlog.LogError as err:
                raise CliError(f"Error from server (BadRequest): {err}") from None
            try:
                while chunk := resp.read1(65536):
                    out.write(chunk)
                    out.flush()
            except KeyboardInterrupt:
                pass
            finally:
                resp.close()
            return
    cid = _container_id(pod, cname, previous)
    if cid.startswith("docker://"):
        _engine_logs(cid.removeprefix("docker://"), cname, name, opts.tail_lines,
                     follow and not previous)
        return
    base = state_dir or processagent.default_state_dir(node)
    pod_dir = runtime.pod_dir(base, pod)
    path = procs.log_file(pod_dir, cname, run)
    try:
        for chunk in containerlogs.stream(path, opts, procs.log_file(pod_dir, cname, run + 1)):
            out.write(chunk)
            out.flush()
    except OSError:
        raise CliError(f"error: no log of container {cname} of pod {name} here ({path}): "
                       f"logs are kept on the machine of node {node}, by its node agent "
                       "(--state-dir)") from None
    except KeyboardInterrupt:
        return


def _container_id(pod: Obj, cname: str, previous: bool) -> str:
    """The containerID of the run asked for: the current one (running or ended), or the
    one before its last restart."""
    cstatus: Obj = podlog.container_status(pod, cname) or {}
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
