"""Commands that run daemonbus: ``up`` (the local stack) and ``run <process>``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from services import common, config
from services.common import STALL_SECONDS


def _ctx_opts(ctx: click.Context) -> tuple[str | None, str | None]:
    obj = ctx.find_root().obj or {}
    return obj.get("redis_url"), obj.get("prefix")


METRICS_BIND_HELP = ("Address the metrics endpoint listens on (default: loopback only; "
                     "0.0.0.0 for every interface).")


@click.command("up")
@click.option("--nodes", type=int, default=3, show_default=True,
              help="Simulated nodes the node agent registers (named node-00001, …).")
@click.option("--workers", type=int, default=2, show_default=True,
              help="Reconciler-worker processes (RQ workers).")
@click.option("--data-dir", type=click.Path(path_type=Path), default=None,
              help="Where the embedded Redis keeps its append-only file "
                   "(default: $DAEMONBUS_HOME/data).")
@click.option("--ready-delay", type=float, default=0.0, show_default=True,
              help="Seconds a pod takes from bound to Running and Ready.")
@click.option("--grace", type=float, default=1.0, show_default=True,
              help="Seconds a deleted pod takes to terminate.")
@click.option("--fail-image", "fail_images", multiple=True, metavar="GLOB",
              help="Pods with a matching image go Failed.")
@click.option("--never-ready", "never_ready", multiple=True, metavar="GLOB",
              help="Pods with a matching image run but never become Ready.")
@click.option("--metrics-base-port", type=int, default=None,
              help="Serve Prometheus metrics on consecutive ports from this one.")
@click.option("--metrics-bind", default=common.METRICS_BIND, show_default=True,
              help=METRICS_BIND_HELP)
@click.option("--log-dir", type=click.Path(path_type=Path), default=None,
              help="Write each process's log to a file here instead of this terminal.")
@click.option("--log-keep", type=int, default=200_000, show_default=True,
              help="Entries of the event log kept by the compactor, which snapshots and "
                   "trims the rest every minute (0: keep everything).")
@click.option("--demo", is_flag=True,
              help="Apply the fluentd-elasticsearch example DaemonSet once the stack runs.")
@click.option("--apiserver-port", type=click.IntRange(0, 65535), default=6443,
              show_default=True,
              help="Port of the Kubernetes API server on 127.0.0.1, for kubectl (0: none).")
@click.pass_context
def up(ctx: click.Context, nodes: int, workers: int, data_dir: Path | None,
       ready_delay: float, grace: float, fail_images: tuple[str, ...],
       never_ready: tuple[str, ...], metrics_base_port: int | None, metrics_bind: str,
       log_dir: Path | None, log_keep: int, demo: bool, apiserver_port: int) -> None:
    """Run the whole stack on this machine until Ctrl-C.

    Without --redis-url (or DAEMONBUS_REDIS_URL) a private Redis is started (the
    redis-server on PATH, else one shipped in a Python wheel; the next when one cannot read
    the data a newer one left) on loopback, with a password generated once into $DAEMONBUS_HOME/redis-password (mode 600) and its append-only file
    on in a directory only you can read; its URL is recorded (mode 600) so `daemonbus`
    commands in other shells find it. Metrics, if asked for, listen on --metrics-bind. Then the
    watcher, the reconciler-workers, the status-writer, the garbage collector, the log
    compactor and a node agent serving --nodes simulated nodes start as child processes.
    Children that die are restarted. Ctrl-C or SIGTERM stops all of them, then Redis.
    An API server on 127.0.0.1:--apiserver-port (TLS, a generated CA) serves kubectl: `up`
    writes $DAEMONBUS_HOME/kubeconfig (context daemonbus) and prints `export KUBECONFIG=…`.

    \b
    Examples:
      daemonbus up --nodes 5 --demo
      daemonbus up --redis-url redis://:secret@10.0.0.5:6379/0 --workers 4
    """
    from services import supervisor

    redis_url, prefix = _ctx_opts(ctx)
    if redis_url is None:
        import os

        redis_url = os.environ.get("DAEMONBUS_REDIS_URL")
    opts = supervisor.StackOptions(
        redis_url=redis_url, prefix=prefix, nodes=nodes, workers=workers, data_dir=data_dir,
        ready_delay=ready_delay, grace=grace, fail_images=fail_images, never_ready=never_ready,
        metrics_base_port=metrics_base_port, metrics_bind=metrics_bind, log_dir=log_dir, log_keep=log_keep,
        apiserver_port=apiserver_port,
    )
    kubeconfig, ca = _prepare_kubeconfig(apiserver_port) if apiserver_port else (None, None)

    def ready(stack: Any) -> None:
        click.echo(f'\nexport DAEMONBUS_REDIS_URL="$(cat {config.recorded_url_file()})"'
                   "   # for other shells (already recorded for this user)"
                   if stack.redis else "")
        if kubeconfig is not None and ca is not None:
            _wait_for_apiserver(stack, apiserver_port, ca)
            if stack.stopping.is_set():  # Ctrl-C while waiting
                return
            click.echo(f"export KUBECONFIG={kubeconfig}   # then: kubectl get ds -A")
            from services.apiserver import server

            click.echo(f"fleet view: https://127.0.0.1:{apiserver_port}/ui   (sign in with a "
                       f"token of {server.default_token_file()})")
        if demo:
            _apply_demo(stack.url, prefix)

    try:
        supervisor.run(opts, echo=click.echo, ready=ready)
    except supervisor.StartError as err:
        raise click.ClickException(str(err)) from err


APISERVER_READY_SECONDS = 60.0


def _wait_for_apiserver(stack: Any, port: int, ca: Path,
                        timeout: float = APISERVER_READY_SECONDS) -> None:
    """Wait until the API server answers ``/readyz`` (its watch cache listed), so the
    kubectl line printed next works at once; says so when it takes a while, and goes on
    when it exits (the supervisor restarts it) or after ``timeout``. Acts."""
    import ssl
    import time
    import urllib.error
    import urllib.request

    from services import supervisor

    context = ssl.create_default_context(cafile=str(ca))
    url = f"https://127.0.0.1:{port}/readyz"
    child = next((c for c in stack.children if c.name == supervisor.APISERVER), None)
    started = time.monotonic()
    said = False
    while not stack.stopping.is_set():
        code = child.proc.poll() if child is not None and child.proc is not None else None
        if code is not None:  # the supervisor restarts it once this returns
            click.echo(f"the API server exited with {code} (its error above; another on port "
                       f"{port}? `daemonbus up --apiserver-port N` picks another); kubectl "
                       f"will fail until it serves")
            return
        try:
            with urllib.request.urlopen(url, context=context, timeout=2) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass  # not listening yet, or not ready (500)
        waited = time.monotonic() - started
        if waited >= timeout:
            click.echo(f"the API server at {url} is not ready after {timeout:.0f} s; "
                       f"kubectl will fail until it is (see its log above)")
            return
        if not said and waited >= 1.0:
            click.echo(f"waiting for the API server at https://127.0.0.1:{port} ...")
            said = True
        stack.stopping.wait(0.1)


def _prepare_kubeconfig(port: int) -> tuple[Path, Path]:
    """The API server's token file and certificates (made before it starts, so the
    kubeconfig can name them), the kubeconfig written, the server recorded: the kubeconfig's
    path and the CA's. Acts."""
    from services.apiserver import kubeconfig, server, tls

    directory = config.apiserver_dir()
    tokens = server.ensure_token_file(server.default_token_file())
    ca, _crt, _key = tls.ensure_serving(directory / "pki", "127.0.0.1")
    url = f"https://127.0.0.1:{port}"
    kubeconfig.record_server(directory, url, ca)
    path = config.kubeconfig_path()
    kubeconfig.write(path, kubeconfig.for_user(url, tokens, ca))
    return path, ca


@click.command("kubeconfig")
@click.option("--server", default=None, metavar="URL",
              help="The API server (default: the one `daemonbus up` runs).")
@click.option("--user", default=None, help="A user of the token file (default: its first "
                                           "admin).")
@click.option("--token-file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Default: $DAEMONBUS_HOME/apiserver/tokens.")
@click.option("--ca-file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="The CA of the server's certificate (default: the generated one).")
@click.option("-n", "--namespace", default="default", show_default=True)
def kubeconfig_cmd(server: str | None, user: str | None, token_file: Path | None,
                   ca_file: Path | None, namespace: str) -> None:
    """Print a kubeconfig for the running stack's API server (context daemonbus, a bearer
    token, the CA), for kubectl and client libraries.

    \b
    Examples:
      daemonbus kubeconfig > ~/.kube/daemonbus && export KUBECONFIG=~/.kube/daemonbus
      daemonbus kubeconfig --user viewer --server https://10.0.0.5:6443
    """
    from services.apiserver import auth, kubeconfig
    from services.apiserver import server as api_server

    directory = config.apiserver_dir()
    recorded = kubeconfig.recorded_server(directory)
    url = server or (recorded[0] if recorded else None)
    if not url:
        raise click.ClickException("no API server recorded: start one with `daemonbus up`, "
                                   "or pass --server")
    ca = ca_file or (recorded[1] if recorded else None) or directory / "pki" / "ca.crt"
    try:
        doc = kubeconfig.for_user(url, token_file or api_server.default_token_file(),
                                  ca if ca.exists() else None, user, namespace)
    except auth.TokenFileError as err:
        raise click.ClickException(str(err)) from err
    click.echo(kubeconfig.dump(doc), nl=False)


DEMO = """\
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: fluentd-elasticsearch
  namespace: kube-system
  labels:
    k8s-app: fluentd-logging
spec:
  selector:
    matchLabels:
      name: fluentd-elasticsearch
  template:
    metadata:
      labels:
        name: fluentd-elasticsearch
    spec:
      tolerations:
      - key: node-role.kubernetes.io/control-plane
        operator: Exists
        effect: NoSchedule
      containers:
      - name: fluentd-elasticsearch
        image: quay.io/fluentd_elasticsearch/fluentd:v2.5.2
"""


def _apply_demo(url: str, prefix: str | None) -> None:
    import yaml

    store = common.open_store(url, prefix)
    result, _obj = store.apply(yaml.safe_load(DEMO))
    click.echo(f"daemonset.apps/fluentd-elasticsearch {result}  (try: kubectl get ds -A)")


@click.group("run")
def run() -> None:
    """Run one daemonbus process in the foreground (what `daemonbus up` and compose start).

    Every process finds Redis through --redis-url / DAEMONBUS_REDIS_URL, stops cleanly on
    SIGTERM, and may be killed and restarted at any moment.
    """


def _metrics_opt(f: Any) -> Any:
    f = click.option("--metrics-bind", default=common.METRICS_BIND, show_default=True,
                     envvar="DAEMONBUS_METRICS_BIND", help=METRICS_BIND_HELP)(f)
    return click.option("--metrics-port", type=int, default=None,
                        help="Serve Prometheus metrics on this port.")(f)


@run.command("watcher")
@_metrics_opt
@click.pass_context
def run_watcher(ctx: click.Context, metrics_port: int | None, metrics_bind: str) -> None:
    """Tail the event log and feed DaemonSet keys to the workqueue.

    One watcher is active; start more and they stand by on a Redis lease, taking over
    within 10 s when the active one dies. A restarted watcher resumes from its stored
    position.
    """
    from services import runner

    runner.run_watcher(*_ctx_opts(ctx), (metrics_port, metrics_bind))


@run.command("reconciler")
@_metrics_opt
@click.option("--name", default=None, help="Worker name (as `rq info` shows it).")
@click.option("--burst", is_flag=True, help="Exit when the workqueue is empty.")
@click.option("--stall-seconds", type=click.FloatRange(min=1), default=STALL_SECONDS,
              show_default=True,
              help="Exit (status 1, every thread's stack in the log) when the idle loop "
                   "has not come round for this long: a hang, for the supervisor to restart.")
@click.pass_context
def run_reconciler(ctx: click.Context, metrics_port: int | None, metrics_bind: str,
                   name: str | None,
                   burst: bool, stall_seconds: float) -> None:
    """Run one reconciler-worker (an RQ worker) syncing DaemonSets from the workqueue.

    Start as many as you like, on any host: the workqueue hands each key to one worker at
    a time, and a key held by a worker that dies is handed out again within 10 s.
    """
    from services import runner

    runner.run_reconciler(*_ctx_opts(ctx), (metrics_port, metrics_bind), name=name, burst=burst,
                          stall_seconds=stall_seconds)


@run.command("status-writer")
@_metrics_opt
@click.pass_context
def run_status_writer(ctx: click.Context, metrics_port: int | None, metrics_bind: str) -> None:
    """Write DaemonSet .status from the reconcilers' computed status (only on change)."""
    from services import runner

    runner.run_status_writer(*_ctx_opts(ctx), (metrics_port, metrics_bind))


@run.command("gc")
@_metrics_opt
@click.option("--batch", type=click.IntRange(min=1), default=500, show_default=True,
              help="Objects written per commit.")
@click.option("--max-deletes-per-second", type=click.FloatRange(min=0), default=0.0,
              show_default=True, help="Throttle cascades to this rate (0: no limit).")
@click.option("--node-monitor-period", type=click.FloatRange(min=0.05), default=5.0,
              show_default=True, help="Seconds between two looks at the node leases.")
@click.option("--node-monitor-grace-period", type=click.FloatRange(min=0.1), default=40.0,
              show_default=True,
              help="Seconds without a lease renewal or heartbeat before a node is Ready "
                   "Unknown and tainted unreachable.")
@click.option("--node-startup-grace-period", type=click.FloatRange(min=0.1), default=60.0,
              show_default=True,
              help="The same for a node whose agent never posted a heartbeat.")
@click.option("--no-node-lifecycle", is_flag=True,
              help="Do not run the node lifecycle controller in this process.")
@click.pass_context
def run_gc(ctx: click.Context, metrics_port: int | None, metrics_bind: str, batch: int,
           max_deletes_per_second: float, node_monitor_period: float,
           node_monitor_grace_period: float, node_startup_grace_period: float,
           no_node_lifecycle: bool) -> None:
    """Run the garbage collector: cascading deletes, orphaning, pod GC, the control state
    of deleted DaemonSets, event TTL, NoExecute taint eviction; and the node lifecycle
    controller (nodes whose leases went quiet become Ready Unknown and are tainted
    node.kubernetes.io/unreachable), one active among several gc processes."""
    from services import runner
    from services.gc.nodelifecycle import Settings

    settings = None if no_node_lifecycle else Settings(
        node_monitor_period, node_monitor_grace_period, node_startup_grace_period)
    runner.run_gc(*_ctx_opts(ctx), (metrics_port, metrics_bind), batch, max_deletes_per_second,
                  settings)


@run.command("node-agent")
@_metrics_opt
@click.option("--nodes", type=int, default=0, help="Register this many simulated nodes first.")
@click.option("--name-prefix", default="node-", show_default=True,
              help="Name prefix of the nodes --nodes registers.")
@click.option("--ready-delay", type=float, default=0.0, show_default=True,
              help="Seconds from bound to Running and Ready.")
@click.option("--grace", type=float, default=1.0, show_default=True,
              help="Seconds a deleted pod takes to terminate (at most its own grace period).")
@click.option("--fail-image", "fail_images", multiple=True, metavar="GLOB",
              help="Pods whose image matches go Failed (repeatable).")
@click.option("--never-ready", "never_ready", multiple=True, metavar="GLOB",
              help="Pods whose image matches run but never become Ready (repeatable).")
@click.option("--crash-image", "crash_images", multiple=True, metavar="GLOB",
              help="Pods whose image matches run, their containers waiting in "
                   "CrashLoopBackOff, never Ready (repeatable).")
@click.option("--heartbeat", type=float, default=300.0, show_default=True,
              help="Seconds between two writes of a node's Ready status when nothing changed.")
@click.option("--node-lease-duration", type=click.FloatRange(min=0.1), default=40.0,
              show_default=True,
              help="Seconds of the node leases, renewed every quarter of it (outside the "
                   "log: a renewal writes no log entry).")
@click.option("--shard", default="0/1", show_default=True, metavar="I/N",
              help="Serve only the nodes whose name hashes to shard I of N.")
@click.option("--serve-prefix", default="", help="Serve only nodes whose name starts with this.")
@click.option("--runtime", type=click.Choice(["simulated", "process", "docker"]),
              default="simulated", show_default=True,
              help="simulated: many make-believe nodes; process: this machine as one node, "
                   "running its pods as processes; docker: the same, running them as "
                   "containers of the Docker engine (DOCKER_HOST, else its local socket).")
@click.option("--node-name", default=None,
              help="[process, docker] This machine's Node name (default: the host name).")
@click.option("--node-ip", default=None,
              help="[process, docker] The node's InternalIP, where the API server reaches its "
                   "endpoint and the IP of its pods on the host's network (default: the "
                   "host's address on the route to Redis, else its first non-loopback IPv4 "
                   "address).")
@click.option("--label", "label_specs", multiple=True, metavar="KEY=VAL",
              help="[process, docker] Extra node label at registration (repeatable).")
@click.option("--taint", "taint_specs", multiple=True, metavar="KEY[=VAL]:EFFECT",
              help="[process, docker] Node taint at registration (repeatable).")
@click.option("--run-as", default=None, metavar="USER",
              help="[process] User the containers run as (default: nobody when the agent "
                   "runs as root, else the agent's own user; root only with --run-as root).")
@click.option("--state-dir", type=click.Path(path_type=Path), default=None,
              help="[process, docker] Container records (and the process runtime's logs; "
                   "default: /var/lib/daemonbus/node-agent/NODE as root, else "
                   "~/.daemonbus/node-agent/NODE).")
@click.option("--backoff-initial", type=click.FloatRange(min=0.01), default=10.0,
              show_default=True,
              help="[process, docker] First crash-loop back-off in seconds (doubling to "
                   "5 min).")
@click.option("--docker-network", default="bridge", show_default=True,
              help="[docker] The engine's network of pods without hostNetwork.")
@click.option("--pod-infra-image", default="registry.k8s.io/pause:3.10", show_default=True,
              help="[docker] The image of each pod's sandbox (kubelet's "
                   "--pod-infra-container-image): a container that holds the network and "
                   "IPC namespaces its containers share; any image whose own command keeps "
                   "running until it is stopped (ops/build-images.sh builds "
                   "daemonbus-pause:local for machines without a registry).")
@click.option("--cluster-dns", "cluster_dns", multiple=True, metavar="IP",
              help="[docker] A DNS server of the cluster (kubelet's --cluster-dns; again for "
                   "more): pods of dnsPolicy ClusterFirst get them, with the searches of "
                   "--cluster-domain. Without one they get the host's resolver and a "
                   "MissingClusterDNS Warning, as kubelet's.")
@click.option("--cluster-domain", default="", metavar="DOMAIN",
              help="[docker] The cluster's DNS domain (kubelet's --cluster-domain, e.g. "
                   "cluster.local): a ClusterFirst pod searches <namespace>.svc.DOMAIN, "
                   "svc.DOMAIN and DOMAIN first.")
@click.option("--resolv-conf", default="/etc/resolv.conf", show_default=True,
              help="[docker] The host's resolver configuration that pods of dnsPolicy "
                   "Default with a dnsConfig add to (kubelet's --resolv-conf).")
@click.option("--log-port", type=click.IntRange(min=-1, max=65535), default=10250,
              show_default=True,
              help="[process, docker] Port of the agent's HTTPS endpoint serving its pods' "
                   "logs, on the node IP (kubelet's port; 0: any free one; -1: none).")
@click.option("--metrics-resolution", type=click.FloatRange(min=0.1), default=15.0,
              show_default=True,
              help="[process, docker] Seconds between two samples of the node's and its "
                   "containers' CPU and memory usage, served on its endpoint for kubectl top "
                   "(metrics-server's resolution).")
@click.option("--via-admission", is_flag=True,
              help="Send every write to node-admission instead of committing it (for "
                   "credentials that may not write the store: compose's node-agent user).")
@click.pass_context
def run_node_agent(ctx: click.Context, metrics_port: int | None, metrics_bind: str, nodes: int,
                   name_prefix: str,
                   ready_delay: float, grace: float, fail_images: tuple[str, ...],
                   never_ready: tuple[str, ...], crash_images: tuple[str, ...],
                   heartbeat: float, shard: str,
                   serve_prefix: str, runtime: str, node_name: str | None, node_ip: str | None,
                   label_specs: tuple[str, ...], taint_specs: tuple[str, ...],
                   run_as: str | None, state_dir: Path | None, backoff_initial: float,
                   docker_network: str, pod_infra_image: str, cluster_dns: tuple[str, ...],
                   cluster_domain: str, resolv_conf: str, log_port: int,
                   via_admission: bool,
                   node_lease_duration: float, metrics_resolution: float) -> None:
    """Run a node agent: a simulated kubelet for many nodes (in the spirit of KWOK), or
    with --runtime process or docker a kubelet for this machine that runs its pods as
    processes or as Docker containers.

    Simulated, it reports its nodes Ready with a heartbeat, binds the daemon pods aimed at
    them, runs them Pending → Running → Ready after --ready-delay, and removes deleted pods
    after --grace. By default it serves every Node in the store; one process serves
    thousands.

    With --runtime process it registers this machine as one Node (--node-name, default the
    host name; labels kubernetes.io/hostname, os and arch from the host; capacity, nodeInfo,
    addresses), heartbeats it every --heartbeat seconds, and runs each container of each
    pod bound to it (command + args, env, workingDir) as a process in its own process group,
    as --run-as, with its output in --state-dir: restartPolicy with crash-loop back-off,
    readiness and liveness probes, SIGTERM then SIGKILL after the grace period on deletion.
    Killed and started again, it adopts the processes it left.

    With --runtime docker it does the same with each container as a container of the Docker
    engine: image and imagePullPolicy (a missing image that cannot be pulled is
    ErrImagePull, then ImagePullBackOff), ports, hostNetwork, hostPath and emptyDir
    volumes, memory and cpu limits; its endpoint serves the engine's logs of them. The
    containers of a pod without hostNetwork share its sandbox's address and localhost
    (--pod-infra-image), and its processes with shareProcessNamespace; its dnsPolicy and
    dnsConfig are kubelet's (--cluster-dns, --cluster-domain).

    \b
    Examples:
      daemonbus run node-agent --nodes 100 --ready-delay 2 --fail-image '*:broken'
      daemonbus run node-agent --never-ready '*:hangs' --crash-image '*:crashes'
      daemonbus run node-agent --runtime process --label disktype=ssd
      daemonbus run node-agent --runtime docker --node-name "$(hostname)"
    """
    from services import runner
    from services.node_agent.lifecycle import AgentConfig

    if runtime in ("process", "docker"):
        from services.cli import edits
        from services.node_agent import host, processagent, procs
        from services.node_agent import runtime as runtime_

        labels, removals = edits.parse_labels(list(label_specs))
        taints, untaints = edits.parse_taints(list(taint_specs))
        if removals or untaints:
            raise click.BadParameter("labels and taints are KEY=VAL and KEY[=VAL]:EFFECT")
        try:
            user = procs.resolve_user(run_as)
        except ValueError as err:
            raise click.BadParameter(str(err), param_hint="--run-as") from None
        if runtime == "docker" and run_as is not None:
            raise click.BadParameter("containers run as their image's user",
                                     param_hint="--run-as")
        from shared.model import syntax

        name = node_name or host.hostname()
        if problems := syntax.is_dns1123_subdomain(name):
            raise click.BadParameter(f"{name!r}: {problems[0]}", param_hint="--node-name")
        import ipaddress

        for ip, flag in [(node_ip, "--node-ip"), *((ip, "--cluster-dns") for ip in cluster_dns)]:
            try:
                if ip is not None:
                    ipaddress.ip_address(ip)
            except ValueError:
                raise click.BadParameter(f"{ip!r} is not an IP address",
                                         param_hint=flag) from None
        pcfg = processagent.ProcessConfig(
            node_name=name,
            node_ip=node_ip or host.route_ip(config.redis_url(_ctx_opts(ctx)[0]))
            or host.primary_ip(),
            state_dir=state_dir or processagent.default_state_dir(name), labels=labels,
            taints=tuple(dict(t) for t in taints), heartbeat=heartbeat,
            lease_duration=node_lease_duration, backoff_initial=backoff_initial,
            log_port=None if log_port < 0 else log_port,
            metrics_resolution=metrics_resolution)
        state = pcfg.state_dir
        rt: runtime_.Runtime
        if runtime == "docker":
            import docker

            from services.node_agent import dockerrt

            try:
                client = docker.from_env()
                client.ping()
            except docker.errors.DockerException as err:
                raise click.ClickException(f"--runtime docker: no Docker engine answers "
                                           f"(DOCKER_HOST or its local socket): {err}") from None
            rt = dockerrt.DockerRuntime(state, name, client, network=docker_network,
                                        infra_image=pod_infra_image, cluster_dns=cluster_dns,
                                        cluster_domain=cluster_domain, resolv_conf=resolv_conf)
        else:
            rt = procs.ProcessRuntime(state, user)
        runner.run_process_agent(*_ctx_opts(ctx), (metrics_port, metrics_bind), pcfg, rt,
                                 via_admission=via_admission)
        return

    try:
        i, n = (int(x) for x in shard.split("/", 1))
        if not 0 <= i < n:
            raise ValueError
    except ValueError:
        raise click.BadParameter("use I/N with 0 <= I < N, e.g. 0/2",
                                 param_hint="--shard") from None
    cfg = AgentConfig(ready_delay=ready_delay, grace=grace, fail_images=fail_images,
                      never_ready=never_ready, crash_images=crash_images, shard=i, shards=n,
                      node_prefix=serve_prefix, heartbeat=heartbeat,
                      lease_duration=node_lease_duration)
    runner.run_node_agent(*_ctx_opts(ctx), (metrics_port, metrics_bind), nodes, name_prefix, cfg,
                          via_admission=via_admission)


@run.command("node-admission")
@_metrics_opt
@click.option("--agent", "agents", multiple=True, default=("node-agent",), show_default=True,
              metavar="USER", help="ACL user of a node agent whose requests to commit "
                                   "(repeatable).")
@click.pass_context
def run_node_admission(ctx: click.Context, metrics_port: int | None, metrics_bind: str,
                       agents: tuple[str, ...]) -> None:
    """Commit node agents' write requests (node-agent --via-admission) as the node-agent
    role, for the nodes each agent's ACL user is granted (daemonbus-node:{prefix}:<node>
    keys): Kubernetes' Node authorizer, for agents whose credentials may not write the store.
    """
    from services import runner

    runner.run_node_admission(*_ctx_opts(ctx), (metrics_port, metrics_bind), list(agents))


@run.command("apiserver")
@_metrics_opt
@click.option("--bind", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=6443, show_default=True)
@click.option("--token-file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Lines of token,user,role (admin, edit or view). Default: "
                   "$DAEMONBUS_HOME/apiserver/tokens, made with an admin token if missing.")
@click.option("--tls/--no-tls", default=True, show_default=True,
              help="Serve HTTPS with a certificate from a generated CA. --no-tls only on "
                   "loopback (kubectl sends no token over plain HTTP).")
@click.option("--cert-dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Where the CA and serving certificate live "
                   "(default: $DAEMONBUS_HOME/apiserver/pki).")
@click.option("--service-account-key-file", type=click.Path(path_type=Path, dir_okay=False),
              default=None,
              help="The P-256 EC private key (PEM) that signs and checks ServiceAccount tokens "
                   "(kubectl create token); made if missing. Give every API server of a "
                   "cluster the same one. Default: sa.key in the --cert-dir.")
@click.pass_context
def run_apiserver(ctx: click.Context, metrics_port: int | None, metrics_bind: str, bind: str,
                  port: int, token_file: Path | None, tls: bool, cert_dir: Path | None,
                  service_account_key_file: Path | None) -> None:
    """Serve the Kubernetes API for daemonbus objects, so kubectl and client libraries
    work unchanged (see `daemonbus kubeconfig`). Stateless: run as many as you like.

    \b
    Examples:
      daemonbus run apiserver --port 6443
      daemonbus run apiserver --bind 0.0.0.0 --token-file /etc/daemonbus/tokens
    """
    from services.apiserver import server

    opts = server.Options(bind=bind, port=port, token_file=token_file, tls=tls,
                          cert_dir=cert_dir,
                          service_account_key_file=service_account_key_file)
    try:
        server.run(*_ctx_opts(ctx), opts, (metrics_port, metrics_bind))
    except server.ConfigError as err:
        raise click.ClickException(str(err)) from err


def register(cli: click.Group) -> None:
    cli.add_command(up)
    cli.add_command(run)
    cli.add_command(kubeconfig_cmd)


__all__ = ["config", "register"]
