"""The log commands: ``log export|tail|compact``, ``replay`` and ``why``.

The work is done by ``services.replay``; this module parses arguments and prints.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import click

from services import common
from services.cli import context, resources
from services.cli.errors import CliError
from services.replay import bounds, compact, export, logfile, rebuild, tail, verify, why
from shared.store import adapters
from shared.store.eventlog import RedisEventLog
from shared.store.keys import Keys
from shared.store.log import redis_reader


def _point(text: str | None, lower: bool = False) -> str:
    if not text:
        return ""
    try:
        return bounds.lower(text) if lower else bounds.upper(text)
    except bounds.BoundError as err:
        raise CliError(f"error: {err}") from err


# ---- log ----------------------------------------------------------------------------------


@click.group("log")
def log_group() -> None:
    """Export, follow and compact the event log (the source of truth of every object)."""


@log_group.command("export")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--since", metavar="ID|TIME",
              help="Only entries from this log id or time on (a partial file: readable, "
                   "not for a rebuild).")
@click.option("--until", metavar="ID|TIME", help="Only entries up to this log id or time.")
@context.pass_env
def export_cmd(env: context.CliEnv, file: Path, since: str | None, until: str | None) -> None:
    """Write the event log to FILE (versioned msgpack), streamed page by page.

    Without --since the file holds the whole history — the snapshot a compaction kept plus
    every entry after it — so `daemonbus replay FILE` rebuilds every object exactly.

    \b
    Examples:
      daemonbus log export cluster.dblog
      daemonbus log export before-upgrade.dblog --until 2024-05-01T10:00:00Z
    """
    store = env.store
    try:
        stats = adapters.on(store, export.export, file, since=_point(since, lower=True),
                            until=_point(until))
    except export.ExportError as err:
        raise CliError(f"error: {err}") from err
    except OSError as err:
        raise CliError(f"error: cannot write {file}: {err.strerror}") from err
    span = f"{stats.first} .. {stats.last}" if stats.entries else "no entries"
    snap = f", snapshot {stats.snapshot} ({stats.objects} objects)" if stats.snapshot else ""
    click.echo(f"exported {stats.entries} entries ({span}){snap} to {file} in "
               f"{stats.seconds:.2f}s")
    if not stats.complete and not since:
        click.echo("warning: the log lost entries no snapshot covers; the file is partial",
                   err=True)


@log_group.command("tail")
@click.option("-n", "--lines", "count", type=int, default=10, show_default=True,
              help="How many of the newest entries to print first.")
@click.option("-f", "--follow", is_flag=True, help="Keep printing entries as they come.")
@context.pass_env
def tail_cmd(env: context.CliEnv, count: int, follow: bool) -> None:
    """Print the newest log entries, one line each: id, time, type, kind, key, summary.

    \b
    Examples:
      daemonbus log tail -n 50
      daemonbus log tail -f
    """
    store = env.store
    entries = tail.last(adapters.on(store, RedisEventLog), max(count, 0))
    for e in entries:
        click.echo(tail.line(e))
    if not follow:
        return
    position = entries[-1].id if entries else store.log_tip()
    stop = common.stop_event()
    for batch in tail.follow(adapters.on(store, redis_reader, position, name="tail")):
        for e in batch:
            click.echo(tail.line(e))
        if stop.is_set():
            return


@log_group.command("compact")
@click.option("--keep", type=int, default=None, metavar="N",
              help="Keep the newest N entries.")
@click.option("--max-age", default=None, metavar="DURATION",
              help="Keep the entries younger than this (90s, 10m, 2h, 7d).")
@click.option("--every", default=None, metavar="DURATION",
              help="Compact again after each such interval until stopped.")
@context.pass_env
def compact_cmd(env: context.CliEnv, keep: int | None, max_age: str | None,
                every: str | None) -> None:
    """Bound the log: snapshot every object as of the cut, then trim the entries before it.

    Export plus replay still rebuild exactly (snapshot plus the entries kept); readers whose
    position is older than the cut relist.

    \b
    Examples:
      daemonbus log compact --keep 100000
      daemonbus log compact --max-age 7d --every 10m
    """
    stop = common.stop_event() if every else threading.Event()  # first: SIGTERM any time
    if (keep is None) == (max_age is None):
        raise CliError("error: give one of --keep N and --max-age DURATION")
    if keep is not None and keep < 1:
        raise CliError("error: --keep must be at least 1")
    try:
        age = bounds.duration(max_age) if max_age is not None else None
        period = bounds.duration(every) if every is not None else None
    except bounds.BoundError as err:
        raise CliError(f"error: {err}") from err
    store = env.store
    outage = common.Outage(logging.getLogger("compactor"))
    while True:
        wait = period
        try:
            res = adapters.on(store, compact.compact, keep=keep, max_age=age)
            outage.ok()
        except common.REDIS_DOWN as err:
            if period is None:
                raise
            wait = min(period, outage.failed(err))  # --every rides out a Redis outage
        except compact.CompactError as err:
            if period is None:
                raise CliError(f"error: {err}") from err
            click.echo(f"warning: {err}", err=True)
        else:
            if res.snapshot:
                click.echo(f"snapshot at {res.snapshot} ({res.objects} objects); trimmed "
                           f"{res.trimmed} entries; {res.length} left")
            elif period is None:
                click.echo(f"nothing to compact ({res.length} entries)")
        if wait is None or stop.wait(wait):
            return


# ---- replay -------------------------------------------------------------------------------


@click.command("replay")
@click.argument("file", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--redis-url", "target_url", metavar="URL",
              help="Redis to rebuild into (else the global --redis-url / $DAEMONBUS_REDIS_URL).")
@click.option("--prefix", "target_prefix", metavar="P",
              help="Key prefix to rebuild into; it must be empty (default: the global "
                   "--prefix, else $DAEMONBUS_PREFIX, else the file's).")
@click.option("--until", metavar="ID|TIME", help="Stop after this log id or time.")
@click.option("--verify", "verify_", is_flag=True,
              help="Re-run every recorded decision in memory instead (no Redis needed) and "
                   "report the first divergence.")
@click.option("--keep-going", is_flag=True, help="With --verify: report every divergence.")
@click.option("--partial", is_flag=True,
              help="Rebuild from a partial file (exported with --since) anyway.")
@context.pass_env
def replay_cmd(env: context.CliEnv, file: Path, target_url: str | None,
               target_prefix: str | None, until: str | None, verify_: bool,
               keep_going: bool, partial: bool) -> None:
    """Rebuild every object from an export into an empty Redis or key prefix (with the
    original log ids, so resourceVersions are kept), or verify its decisions.

    \b
    Examples:
      daemonbus replay cluster.dblog --redis-url redis://127.0.0.1:6390/0
      daemonbus replay cluster.dblog --prefix restored --until 2024-05-01T10:00:00Z
      daemonbus replay cluster.dblog --verify
    """
    bound = _point(until)
    if verify_:
        _verify(file, bound, keep_going)
        return
    try:
        with logfile.Reader(file) as reader:
            header = reader.header
    except logfile.LogFileError as err:
        raise CliError(f"error: {err}") from err
    prefix = target_prefix or env.prefix or os.environ.get("DAEMONBUS_PREFIX") or header.prefix
    target = context.CliEnv(redis_url=target_url or env.redis_url, prefix=prefix)
    store = target.store
    try:
        stats = rebuild.rebuild(file, adapters.connection(store), Keys(prefix), until=bound,
                                allow_partial=partial)
    except (rebuild.RebuildError, logfile.LogFileError) as err:
        raise CliError(f"error: {err}") from err
    click.echo(f"replayed {stats.entries} entries into prefix {prefix!r}: {stats.objects} "
               f"objects, last id {stats.last or '-'} ({stats.rate:,.0f} entries/s)")


def _verify(file: Path, until: str, keep_going: bool) -> None:
    try:
        result = verify.verify(file, until=until, keep_going=keep_going,
                               workers=verify.default_workers())
    except logfile.LogFileError as err:
        raise CliError(f"error: {err}") from err
    for d in result.divergences:
        click.echo(d.describe(), err=True)
    skipped = f", {result.skipped} skipped (read state older than the file's snapshot)" \
        if result.skipped else ""
    if result.divergences:
        raise CliError(f"error: {len(result.divergences)} divergence(s); {result.verified} "
                       f"decisions verified before{skipped}")
    click.echo(f"verified {result.verified} decisions over {result.entries} entries: "
               f"no divergence{skipped} ({result.seconds:.2f}s)")


# ---- why ----------------------------------------------------------------------------------


@click.command("why")
@click.argument("args", nargs=-1, required=True,
                metavar="pod/NAME | ds/NAME | ds/NAME node/NODE | TYPE/NAME")
@click.option("-n", "--namespace", default=None, help="Namespace (default: default).")
@context.pass_env
def why_cmd(env: context.CliEnv, args: tuple[str, ...], namespace: str | None) -> None:
    """Explain from the log why a pod exists (or went away), or why a DaemonSet has no pod
    on a node: the decision, the state it read and when. For a DaemonSet alone: its
    unavailable pods by cause with the node names, the nodes its rollout gates hold at the
    old revision and its rollout conditions, from the current state, then its recent writes.
    Any other TYPE/NAME: its recent writes and who made them (the API server's user).

    \b
    Examples:
      daemonbus why pod/fluentd-elasticsearch-x2k4f -n kube-system
      daemonbus why ds/fluentd-elasticsearch node/node-00003 -n kube-system
      daemonbus why ds/fluentd-elasticsearch -n kube-system
    """
    targets = resources.parse_targets(list(args), "why")
    ns = namespace or "default"
    kinds_given = [t.info.kind for t in targets]
    try:
        if kinds_given == ["Pod"] and targets[0].name:
            lines = why.why_pod(env.store, ns, targets[0].name)
        elif kinds_given == ["DaemonSet"] and targets[0].name:
            key = f"{ns}/{targets[0].name}"
            lines = why.why_daemonset(env.store, key, env.now())
            try:
                lines += why.why_changes(env.store, "DaemonSet", key)
            except why.WhyError as err:  # its writes compacted away: the breakdown stands
                lines.append(str(err))
        elif sorted(kinds_given) == ["DaemonSet", "Node"] and all(t.name for t in targets):
            ds = next(t for t in targets if t.info.kind == "DaemonSet")
            node = next(t for t in targets if t.info.kind == "Node")
            lines = why.why_node(env.store, f"{ns}/{ds.name}", str(node.name), env.now())
        elif len(targets) == 1 and targets[0].name:
            info = targets[0].info
            lines = why.why_changes(env.store, info.kind,
                                    resources.store_key(info, targets[0].name, ns))
        else:
            raise CliError("error: ask about pod/NAME, ds/NAME, ds/NAME node/NODE, or "
                           "TYPE/NAME (who wrote it)")
    except why.WhyError as err:
        raise CliError(str(err)) from err
    click.echo("\n".join(lines))


def register(cli: click.Group) -> None:
    cli.add_command(log_group)
    cli.add_command(replay_cmd)
    cli.add_command(why_cmd)
