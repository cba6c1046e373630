"""The ``daemonbus`` command line: kubectl's verbs and output for daemonbus objects.

This module holds the group and the get/describe/delete verbs; ``apply`` is in ``apply``,
label, taint, cordon and ``node`` in ``edits`` and ``nodes``; output formatting is in
``printers``, ``describe`` and ``sections``, manifest parsing in ``manifests``. Every store or Redis error ends as one
line on stderr and exit code 1 (``context.Group``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import click

from services.cli import apply as apply_cmd
from services.cli import (
    context,
    describe,
    drain,
    edits,
    errors,
    health,
    logcmd,
    nodes,
    ops,
    podlogs,
    printers,
    resources,
    waiting,
)
from services.cli import rollout as rollout_cmd
from services.cli.errors import CliError
from shared.api import namespaces
from shared.model import kinds, labels, meta
from shared.store import errors as store_errors

Obj = dict[str, Any]

RESOURCE_HELP = ("Resource types: daemonsets (ds), pods (po), nodes (no), controllerrevisions, "
                 "events (ev), namespaces (ns); also TYPE/NAME.")


@click.group(cls=context.Group, context_settings={"help_option_names": ["-h", "--help"]})
@context.global_options
@click.pass_context
def cli(ctx: click.Context) -> None:
    """daemonbus controls a daemonbus cluster: the Kubernetes DaemonSet controller running
    as an event-sourced system on Redis. Its verbs and output follow kubectl.

    \b
    Examples:
      daemonbus node add --count 3
      daemonbus apply -f fluentd.yaml
      daemonbus get ds -A
    """
    ctx.ensure_object(context.CliEnv)  # the global flags are on it (context.global_options)


def main() -> None:
    """Console-script entry point."""
    cli.main(prog_name="daemonbus")


# ---- shared by the verbs ------------------------------------------------------------------


def _namespace_option(f: Any) -> Any:
    return click.option("-n", "--namespace", default=None,
                        help="Namespace of the objects (default: default).")(f)


def _fetch(env: context.CliEnv, targets: Sequence[resources.Target], namespace: str,
           all_namespaces: bool, selector: labels.Selector | None,
           ) -> tuple[list[tuple[kinds.KindInfo, list[Obj]]], list[str]]:
    """The objects the targets name, grouped by type in argument order, and the NotFound
    messages of the named ones that do not exist."""
    groups: list[tuple[kinds.KindInfo, list[Obj]]] = []
    problems: list[str] = []
    listed: namespaces.Namespaces | None = None  # read once, for the first namespace named
    for t in targets:
        if t.name is None:
            objs = printers.sort_objects(t.info.kind, context.list_matching(
                env, t.info, None if all_namespaces else namespace, selector))
        else:
            if t.info.kind == kinds.NAMESPACE.kind:
                listed = listed or context.served_namespaces(env)
                obj = listed.served(t.name)
            else:
                obj = env.store.try_get(t.info.kind,
                                        resources.store_key(t.info, t.name, namespace))
            if obj is None:
                problems.append(errors.not_found(t.info.qualified_plural, t.name))
            objs = [obj] if obj is not None else []
        if groups and groups[-1][0] == t.info:
            groups[-1][1].extend(objs)
        else:
            groups.append((t.info, objs))
    return groups, problems


def _no_resources(namespace: str, all_namespaces: bool, infos: list[kinds.KindInfo]) -> str:
    if all_namespaces or not any(i.namespaced for i in infos):
        return "No resources found"
    return f"No resources found in {namespace} namespace."


def _check_names(targets: Sequence[resources.Target], selector: str | None,
                 all_namespaces: bool = False) -> None:
    """Named objects exclude -l and -A, as in kubectl."""
    if not any(t.name for t in targets):
        return
    if selector:
        raise CliError("error: selectors and the all flag cannot be used when passing "
                       "resource/name arguments")
    if all_namespaces:
        raise CliError("error: a resource cannot be retrieved by name across all namespaces")


# ---- get ----------------------------------------------------------------------------------


@cli.command(short_help="Display one or many resources.", epilog=RESOURCE_HELP)
@click.argument("args", nargs=-1, metavar="TYPE[,TYPE...] [NAME...] | TYPE/NAME...")
@click.option("-o", "--output", type=click.Choice(["json", "yaml", "wide", "name"]),
              help="Output format.")
@_namespace_option
@click.option("-A", "--all-namespaces", is_flag=True, help="List across all namespaces.")
@click.option("-l", "--selector", help="Label selector, e.g. -l 'app=x,tier in (a,b),!legacy'.")
@click.option("--no-headers", is_flag=True, help="Leave out the table header.")
@click.option("--show-labels", is_flag=True, help="Add a LABELS column.")
@click.option("-L", "--label-columns", multiple=True, metavar="KEY",
              help="Add a column with the value of this label (repeatable, or comma-separated).")
@click.option("--show-kind", is_flag=True, help="Prefix names with their type.")
@context.pass_env
def get(env: context.CliEnv, args: tuple[str, ...], output: str | None, namespace: str | None,
        all_namespaces: bool, selector: str | None, no_headers: bool, show_labels: bool,
        label_columns: tuple[str, ...], show_kind: bool) -> None:
    """Display one or many resources as a table (like kubectl get), or as JSON, YAML or
    TYPE/NAME lines with -o. Without NAME, lists every object of the type in the namespace
    (-n, default "default"; -A for all), optionally filtered by a label selector (-l).

    \b
    Examples:
      daemonbus get ds -A -o wide
      daemonbus get pods -n kube-system -l name=fluentd-elasticsearch
      daemonbus get ds fluentd -n kube-system -o yaml
      daemonbus get nodes -L kubernetes.io/os
    """
    targets = resources.parse_targets(args, "get")
    _check_names(targets, selector, all_namespaces)
    ns = namespace or "default"
    groups, problems = _fetch(env, targets, ns, all_namespaces,
                              resources.parse_selector(selector))
    found = [o for _, objs in groups for o in objs]
    single = len(targets) == 1 and targets[0].name is not None
    if output in ("json", "yaml"):
        if found or not problems:
            doc = found[0] if single and found else printers.as_list(found)
            click.echo(printers.to_json(doc) if output == "json" else printers.to_yaml(doc),
                       nl=False)
    elif output == "name":
        for info, objs in groups:
            for o in objs:
                click.echo(resources.ref(info, meta.name(o)))
    else:
        columns = [c for spec in label_columns for c in spec.split(",") if c]
        kinds_shown = show_kind or len({info.kind for info, _ in groups}) > 1
        tables = [printers.get_table(
            info, objs, env.now(), wide=output == "wide", all_namespaces=all_namespaces,
            show_kind=kinds_shown, headers=not no_headers, show_labels=show_labels,
            label_columns=columns) for info, objs in groups if objs]
        click.echo("\n".join(tables), nl=False)
    if not found and not problems and output not in ("json", "yaml"):
        click.echo(_no_resources(ns, all_namespaces, [i for i, _ in groups]), err=True)
    if problems:
        raise CliError("\n".join(problems))


# ---- describe -----------------------------------------------------------------------------


@cli.command("describe", short_help="Show details of a resource or group of resources.",
             epilog=RESOURCE_HELP)
@click.argument("args", nargs=-1, metavar="TYPE [NAME...] | TYPE/NAME...")
@_namespace_option
@click.option("-A", "--all-namespaces", is_flag=True, help="Describe across all namespaces.")
@click.option("-l", "--selector", help="Label selector.")
@context.pass_env
def describe_cmd(env: context.CliEnv, args: tuple[str, ...], namespace: str | None,
                 all_namespaces: bool, selector: str | None) -> None:
    """Show the details of objects, with their recent Events, as kubectl describe does:
    for a DaemonSet its selector, node selector, scheduling counts, pod status tallies,
    pod template and Events; for a Node its taints, conditions and pods; for a Pod its
    containers, conditions and volumes. Without NAME, describes every object of the type.

    \b
    Examples:
      daemonbus describe ds fluentd-elasticsearch -n kube-system
      daemonbus describe node/node-1
    """
    targets = resources.parse_targets(args, "describe")
    _check_names(targets, selector, all_namespaces)
    ns = namespace or "default"
    groups, problems = _fetch(env, targets, ns, all_namespaces,
                              resources.parse_selector(selector))
    _, related = env.store.snapshot(["Pod", "Event"])
    now = env.now()
    texts = [describe.describe(obj, related["Pod"], related["Event"], now)
             for _, objs in groups for obj in objs]
    click.echo("\n\n".join(texts), nl=False)
    if not texts and not problems:
        click.echo(_no_resources(ns, all_namespaces, [i for i, _ in groups]), err=True)
    if problems:
        raise CliError("\n".join(problems))


# ---- delete -------------------------------------------------------------------------------

CASCADE_BOOL = {"true": "background", "false": "orphan"}
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "": 1.0}


def _duration(value: str) -> float:
    """Seconds of a kubectl duration (``30s``, ``2m``, ``1h``, ``500ms``; a bare number is
    seconds)."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m|h|)", value.strip())
    if m is None:
        raise CliError(f'error: invalid argument "{value}" for "--timeout" flag: '
                       f'time: invalid duration "{value}"')
    return float(m.group(1)) * _DURATION_UNITS[m.group(2)]


def _cascade(value: str) -> str:
    if value in CASCADE_BOOL:
        click.echo(f"warning: --cascade={value} is deprecated (boolean value) and can be "
                   f"replaced with --cascade={CASCADE_BOOL[value]}.", err=True)
        return CASCADE_BOOL[value]
    if value not in ("background", "foreground", "orphan"):
        raise CliError(f'error: invalid cascade value ({value}). Must be "background", '
                       f'"foreground", or "orphan".')
    return value


@cli.command(short_help="Delete resources by names or label selector.", epilog=RESOURCE_HELP)
@click.argument("args", nargs=-1, metavar="TYPE NAME... | TYPE/NAME...")
@_namespace_option
@click.option("-l", "--selector", help="Delete the objects this label selector matches.")
@click.option("--all", "all_", is_flag=True, help="Delete every object of the type.")
@click.option("--cascade", default="background", is_flag=False, flag_value="background",
              show_default=True, metavar="background|foreground|orphan",
              help="What happens to dependents (pods of a DaemonSet): deleted in the "
                   "background, before the owner (foreground), or left alone (orphan).")
@click.option("--grace-period", type=int, default=-1,
              help="Seconds a pod may take to terminate (-1: its own setting).")
@click.option("--now", is_flag=True, help="Terminate pods at once (grace period 1).")
@click.option("--force", is_flag=True, help="Remove pods at once (grace period 0).")
@click.option("--ignore-not-found", is_flag=True, help="Missing objects are not an error.")
@click.option("--wait", default="false", is_flag=False, flag_value="true", show_default=True,
              type=click.Choice(["true", "false"]), metavar="[=true|false]",
              help="Wait until the objects are gone (finalizers done, pods terminated).")
@click.option("--timeout", default="0s", show_default=True, metavar="DURATION",
              help="How long --wait waits (e.g. 30s, 2m; 0: no limit).")
@context.pass_env
def delete(env: context.CliEnv, args: tuple[str, ...], namespace: str | None,
           selector: str | None, all_: bool, cascade: str, grace_period: int, now: bool,
           force: bool, ignore_not_found: bool, wait: str, timeout: str) -> None:
    """Delete objects by TYPE and NAME, TYPE/NAME, label selector (-l) or --all, the way the
    API server does: a DaemonSet's pods are deleted after it (background, the default),
    before it (foreground), or kept (orphan); pods on a node terminate gracefully unless
    --now or --force.

    \b
    Examples:
      daemonbus delete ds fluentd-elasticsearch -n kube-system
      daemonbus delete ds/fluentd-elasticsearch -n kube-system --cascade=orphan
      daemonbus delete pods -l name=fluentd-elasticsearch -n kube-system --force
      daemonbus delete ds/fluentd-elasticsearch -n kube-system --cascade=foreground --wait
    """
    propagation = _cascade(cascade)
    wait_seconds = _duration(timeout)
    if now:
        if grace_period != -1:
            raise CliError("error: --now and --grace-period cannot be specified together")
        grace_period = 1
    if grace_period == 0 and not force:
        grace_period = 1  # as kubectl: --grace-period=0 without --force means 1
    if force and grace_period < 0:
        grace_period = 0
    if force and grace_period == 0:
        click.echo("Warning: Immediate deletion does not wait for confirmation that the running "
                   "resource has been terminated. The resource may continue to run on the "
                   "cluster indefinitely.", err=True)
    targets = resources.parse_targets(args, "delete")
    _check_names(targets, selector)
    if any(t.name is None for t in targets) and not (selector or all_):
        raise CliError("error: resource(s) were provided, but no name was specified")
    ns = namespace or "default"
    groups, problems = _fetch(env, targets, ns, False, resources.parse_selector(selector))
    if ignore_not_found:
        problems = []
    deleted = 0
    awaited: list[waiting.Awaited] = []
    for info, objs in groups:
        for obj in objs:
            try:
                left = env.store.delete(info.kind, meta.key(obj), propagation=propagation,
                                        grace_seconds=None if grace_period < 0 else grace_period,
                                        implicit=None if info.kind != kinds.NAMESPACE.kind
                                        or namespaces.has_object(obj) else obj)
            except store_errors.NotFoundError as err:
                if not ignore_not_found:
                    problems.append(context.store_error_message(err))
                continue
            except store_errors.UndeletableError as err:
                problems.append(context.store_error_message(err))
                continue
            verb = "force deleted" if force and grace_period == 0 else "deleted"
            click.echo(f'{info.qualified_name} "{meta.name(obj)}" {verb}')
            deleted += 1
            if left is not None:
                awaited.append(waiting.Awaited(info.kind, meta.key(left), meta.uid(left),
                                               f"{info.qualified_plural}/"
                                               f"{meta.name(left)}"))
    if not deleted and not problems and not any(t.name for t in targets):
        click.echo(_no_resources(ns, False, [i for i, _ in groups]), err=True)
    if wait == "true" and awaited:
        for a in waiting.wait_gone(env.store, awaited, wait_seconds or waiting.WAIT_FOREVER):
            problems.append(f"error: timed out waiting for the condition on {a.ref}")
    if problems:
        raise CliError("\n".join(problems))


cli.add_command(apply_cmd.apply)
edits.register(cli)
drain.register(cli)
nodes.register(cli)

# ---- commands registered by other modules ---------------------------------------------------
# Register further command modules here (``up``, ``run``, ``rollout``, ``set image``, ``log``,
# ``replay``, ``why``): each module exposes ``register(cli)`` and its commands take the store
# from ``@context.pass_env`` (``env.store``); store errors they let escape are printed as
# kubectl does by ``context.Group``.

ops.register(cli)  # up, run
logcmd.register(cli)  # log export|tail|compact, replay, why
rollout_cmd.register(cli)  # set image, rollout
health.register(cli)  # health (container health checks)
podlogs.register(cli)  # logs pod/NAME (the process runtime's log files)
context.accept_global_options_anywhere(cli)  # after every registration: --redis-url anywhere

if __name__ == "__main__":  # python -m services.cli.main (the supervisor starts processes so)
    main()
