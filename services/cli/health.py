"""``daemonbus health ROLE``: the container health check of a daemonbus process.

It runs next to the process it checks (``docker exec``, a compose ``healthcheck``) and exits
0 only when both answer:

- Redis, reached with this process's own URL and credentials (``DAEMONBUS_REDIS_URL``):
  a PING within the timeout. A process cut off from Redis is unhealthy.
- the process itself, through its Prometheus endpoint on this host (``--metrics-port``):
  a process that died or hangs does not answer.

It prints one line, e.g. ``watcher: healthy (redis ok, metrics ok, leader)``; the watcher's
line says whether it holds the lease (``leader``) or stands by (``standby``).
"""

from __future__ import annotations

import re
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

import click

from services import config
from services.cli import context
from services.cli.errors import CliError
from shared.store import client as store_client
from shared.store import errors as store_errors

ROLES = ("watcher", "reconciler", "status-writer", "gc", "node-agent", "node-admission",
         "apiserver")
LEADER_METRIC = re.compile(r"^daemonbus_watcher_leader\s+([0-9.eE+-]+)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Probe:
    """What one check found: ``ok``, and a short word for the line (``ok`` or the error)."""

    name: str
    ok: bool
    detail: str


def resolve(host: str, timeout: float) -> str | None:
    """Acts: look ``host`` up; None when it resolves within ``timeout`` seconds, else why not.
    The resolver has no timeout of its own and, in a container cut off from its network,
    waits far longer than a health check may take: the lookup runs in a daemon thread that
    is left behind on time-out."""
    done = threading.Event()
    failure: list[str] = []

    def lookup() -> None:
        try:
            socket.getaddrinfo(host, None)
        except OSError as err:
            failure.append(f"cannot resolve {host}: {err}")
        done.set()

    threading.Thread(target=lookup, daemon=True).start()
    if not done.wait(timeout):
        return f"cannot resolve {host} within {timeout:g} s"
    return failure[0] if failure else None


def probe_redis(url: str | None, timeout: float) -> Probe:
    """Acts: PING Redis at ``url`` with a short lookup, connect and read timeout."""
    if not url:
        return Probe("redis", False, "no DAEMONBUS_REDIS_URL")
    host = urllib.parse.urlsplit(url).hostname
    problem = resolve(host, timeout) if host else None
    if problem:
        return Probe("redis", False, problem)
    try:
        client = store_client.connect(url, socket_connect_timeout=timeout,
                                      socket_timeout=timeout, health_check_interval=0)
        try:
            client.ping()
        finally:
            client.close()
    except (store_errors.TransportError, store_errors.UnavailableError, ValueError, OSError) as err:
        return Probe("redis", False, context.redact(str(err)))
    return Probe("redis", True, "ok")


def fetch_metrics(port: int, timeout: float) -> tuple[Probe, str]:
    """Acts: GET the process's metrics page on localhost; the probe and the page's text."""
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            body = resp.read().decode("utf-8", "replace")
    except (urllib.error.URLError, OSError, ValueError) as err:
        return Probe("metrics", False, str(getattr(err, "reason", err))), ""
    return Probe("metrics", True, "ok"), body


def watcher_role(metrics_text: str) -> str | None:
    """Decides: ``leader`` or ``standby`` from the watcher's metrics page (None if absent)."""
    found = LEADER_METRIC.search(metrics_text)
    if found is None:
        return None
    return "leader" if float(found.group(1)) >= 1 else "standby"


def verdict(role: str, probes: list[Probe], note: str | None) -> tuple[bool, str]:
    """Decides: healthy when every probe is ok; the one-line report."""
    ok = all(p.ok for p in probes)
    parts = [f"{p.name} ok" if p.ok else f"{p.name}: {p.detail}" for p in probes]
    if note:
        parts.append(note)
    return ok, f"{role}: {'healthy' if ok else 'unhealthy'} ({', '.join(parts)})"


@click.command("health", short_help="Check that a daemonbus process and its Redis answer.")
@click.argument("role", type=click.Choice(ROLES))
@click.option("--metrics-port", type=int, default=None,
              help="The process's Prometheus port on this host (checked when given).")
@click.option("--timeout", type=float, default=3.0, show_default=True,
              help="Seconds each check may take.")
@click.pass_context
def health(ctx: click.Context, role: str, metrics_port: int | None, timeout: float) -> None:
    """Exit 0 when Redis answers a PING with this process's credentials and, with
    --metrics-port, the process answers on its metrics port; else print why and exit 1.
    Meant for container health checks (run it in the process's container).

    \b
    Examples:
      daemonbus health watcher --metrics-port 9100
      daemonbus health node-agent
    """
    env = ctx.find_root().obj
    url = config.redis_url(getattr(env, "redis_url", None))
    probes = [probe_redis(url, timeout)]
    note = None
    if metrics_port:
        probe, text = fetch_metrics(metrics_port, timeout)
        probes.append(probe)
        if role == "watcher" and probe.ok:
            note = watcher_role(text)
    ok, line = verdict(role, probes, note)
    if not ok:
        raise CliError(line)
    click.echo(line)


def register(cli: click.Group) -> None:
    cli.add_command(health)
