"""``set image`` and ``rollout status|history|undo|restart|pause|resume|promote`` for DaemonSets, with
kubectl's arguments, output and errors. A template change (set image, undo, restart) is one
store update of the DaemonSet; the controller then rolls the pods per its update strategy and
keeps the revision history (spec §d, §e). What to print and what to change is decided in
``rollout_views``; this module reads, writes and follows the log.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

import click

from services.cli import context, errors, resources
from services.cli import rollout_views as views
from services.cli.errors import CliError
from shared.eventlog.entry import EntryType
from shared.model import kinds, meta
from shared.model.objkey import ObjectKey
from shared.store.cache import Cache

Obj = dict[str, Any]

ROLLOUT_HELP = "Resource types: daemonsets (ds). TYPE NAME or TYPE/NAME."


def _namespace_option(f: Any) -> Any:
    return click.option("-n", "--namespace", default=None,
                        help="Namespace of the objects (default: default).")(f)


def _targets(env: context.CliEnv, args: tuple[str, ...] | list[str], namespace: str | None,
             verb: str, selector: str | None = None,
             all_: bool = False) -> list[tuple[kinds.KindInfo, Obj]]:
    """The objects ``TYPE NAME...`` / ``TYPE/NAME...`` name (or ``-l``/``--all`` select),
    read from the store. A named object that does not exist is kubectl's NotFound."""
    if not args:
        raise CliError("error: required resource not specified")
    ns = namespace or "default"
    out: list[tuple[kinds.KindInfo, Obj]] = []
    for t in resources.parse_targets(args, verb):
        if t.name is not None:
            obj = env.store.try_get(t.info.kind, resources.store_key(t.info, t.name, ns))
            if obj is None:
                raise CliError(errors.not_found(t.info.qualified_plural, t.name))
            out.append((t.info, obj))
            continue
        sel = resources.parse_selector(selector)
        if sel is None and not all_:
            raise CliError("error: resource(s) were provided, but no name was specified")
        out += [(t.info, o) for o in context.list_matching(env, t.info, ns, sel)]
    return out


def _daemonset_revisions(env: context.CliEnv, ds: Obj) -> list[Obj]:
    return views.owned_revisions(ds, env.store.list("ControllerRevision", meta.namespace(ds)))


def _update(env: context.CliEnv, info: kinds.KindInfo, obj: Obj,
            edit: Callable[[Obj], Obj | None]) -> Obj | None:
    """Read-modify-write ``obj`` (retried on Conflict); None when ``edit`` changed nothing."""
    return env.store.mutate(info.kind, meta.key(obj), edit)


# ---- set image ------------------------------------------------------------------------------


@click.group("set", short_help="Set specific features on objects.")
def set_group() -> None:
    """Configure application resources: change existing objects in place."""


@set_group.command("image", short_help="Update the image of a pod template.",
                   epilog=ROLLOUT_HELP)
@click.argument("args", nargs=-1, metavar="(TYPE NAME | TYPE/NAME) CONTAINER=IMAGE...")
@_namespace_option
@click.option("-l", "--selector", help="Update the objects this label selector matches.")
@click.option("--all", "all_", is_flag=True, help="Update every object of the type.")
@context.pass_env
def set_image(env: context.CliEnv, args: tuple[str, ...], namespace: str | None,
              selector: str | None, all_: bool) -> None:
    """Update the container images of a DaemonSet's pod template (or of a pod). On a
    DaemonSet this starts a rollout: RollingUpdate replaces the pods within the
    maxUnavailable/maxSurge budget, OnDelete replaces a pod when it is deleted.
    CONTAINER * sets the image of every container.

    \b
    Examples:
      daemonbus set image ds/fluentd-elasticsearch fluentd-elasticsearch=fluentd:v2.6 -n kube-system
      daemonbus set image daemonset web '*=nginx:1.27'
    """
    try:
        res_args, images = views.split_image_args(args)
    except views.RolloutError as err:
        raise CliError(f"error: {err}") from err
    problems: list[str] = []
    for info, obj in _targets(env, res_args, namespace, "set", selector, all_):
        if info.kind not in ("DaemonSet", "Pod"):
            problems.append(f"error: {info.plural}/{meta.name(obj)} the object is not a pod or "
                            f"does not have a pod template: *{info.version}.{info.kind}")
            continue
        missing: list[str] = []

        def edit(current: Obj, missing: list[str] = missing) -> Obj | None:
            new, missing[:] = views.with_images(current, images)
            return new

        changed = _update(env, info, obj, edit)
        problems += missing
        if changed is not None:
            click.echo(f"{resources.ref(info, meta.name(obj))} image updated")
    if problems:
        raise CliError("\n".join(problems))


# ---- rollout --------------------------------------------------------------------------------


@click.group("rollout", short_help="Manage the rollout of a resource.")
def rollout() -> None:
    """Manage the rollout of DaemonSets: watch it (status), list and show revisions
    (history), roll back (undo), or restart every pod (restart).

    \b
    Examples:
      daemonbus rollout status ds/fluentd-elasticsearch -n kube-system
      daemonbus rollout undo ds/fluentd-elasticsearch -n kube-system --to-revision=1
    """


def _only_daemonsets(info: kinds.KindInfo, what: str) -> None:
    if info.kind != "DaemonSet":
        raise CliError(f"error: {what}")


@rollout.command("status", short_help="Show the status of the rollout.", epilog=ROLLOUT_HELP)
@click.argument("args", nargs=-1, metavar="(TYPE NAME | TYPE/NAME)")
@_namespace_option
@click.option("-w", "--watch", type=click.BOOL, default=True, is_flag=False, flag_value=True,
              show_default=True, help="Watch the status of the rollout until it's done.")
@click.option("--timeout", default="0", metavar="DURATION",
              help="How long to watch before giving up (e.g. 30s, 2m); 0 means never.")
@context.pass_env
def status_cmd(env: context.CliEnv, args: tuple[str, ...], namespace: str | None,
               watch: bool, timeout: str) -> None:
    """Show the status of a DaemonSet's rollout, as kubectl does: one line per change of its
    status until all desired pods are updated and available (exit 0). With --watch=false,
    print the current status once. After --timeout, fail with "timed out waiting for the
    condition". Only RollingUpdate DaemonSets have a rollout status.

    \b
    Examples:
      daemonbus rollout status ds/web
      daemonbus rollout status daemonset web --timeout 2m
    """
    try:
        seconds = views.parse_duration(timeout)
    except ValueError as err:
        raise CliError(f'error: invalid argument "{timeout}" for "--timeout" flag: '
                       f"{err}") from err
    targets = _targets(env, args, namespace, "rollout status", all_=True)
    if len(targets) != 1:
        raise CliError("error: rollout status is only supported on individual resources and "
                       f"resource collections - {len(targets)} resources were found")
    info, obj = targets[0]
    _only_daemonsets(info, f"no status viewer has been implemented for {info.kind}")
    _follow_status(env, meta.key(obj), watch, seconds)


def _follow_status(env: context.CliEnv, key: str, watch: bool, timeout: float) -> None:
    """kubectl's ``UntilWithSync`` over the log: print the status of the DaemonSet as listed,
    then after each change of it, until done (or at once without ``watch``)."""
    cache = Cache(env.store, ["DaemonSet"], name="rollout-status")
    cache.sync()
    ds = cache.get("DaemonSet", key)
    if ds is None:
        raise CliError(errors.not_found("daemonsets.apps", ObjectKey.parse(key).name))
    deadline = time.monotonic() + timeout if timeout > 0 else None
    pending = [ds]
    while True:
        for current in pending:
            try:
                message, done = views.status_message(current)
            except views.RolloutError as err:
                raise CliError(f"error: {err}") from err
            click.echo(message, nl=False)
            if done or not watch:
                return
        pending = []
        while not pending:
            wait = 1.0
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    raise CliError(f"error: {views.TIMEOUT_MESSAGE}")
            for change in cache.poll(count=5000, block_ms=max(1, int(wait * 1000))):
                if change.type == EntryType.DECISION or change.kind != "DaemonSet" or change.key != key:
                    continue  # decision records share the DaemonSet's key
                if change.type == EntryType.DELETED:
                    raise CliError("error: object has been deleted")
                pending.append(change.new)


@rollout.command("history", short_help="View rollout history.", epilog=ROLLOUT_HELP)
@click.argument("args", nargs=-1, metavar="(TYPE NAME | TYPE/NAME)")
@_namespace_option
@click.option("--revision", type=int, default=0,
              help="Show the pod template of this revision.")
@context.pass_env
def history_cmd(env: context.CliEnv, args: tuple[str, ...], namespace: str | None,
                revision: int) -> None:
    """List a DaemonSet's revisions (its ControllerRevisions) with their change cause (the
    kubernetes.io/change-cause annotation), or show the pod template of one revision.

    \b
    Examples:
      daemonbus rollout history ds/web
      daemonbus rollout history ds/web --revision=2
    """
    if revision < 0:
        raise CliError(f"error: revision must be a positive integer: {revision}")
    for info, obj in _targets(env, args, namespace, "rollout history", all_=True):
        _only_daemonsets(info, f'no history viewer has been implemented for "{info.kind}"')
        try:
            text = views.history_output(resources.ref(info, meta.name(obj)),
                                        _daemonset_revisions(env, obj), revision)
        except views.RolloutError as err:
            raise CliError(f"error: {err}") from err
        click.echo(text, nl=False)


@rollout.command("undo", short_help="Undo a previous rollout.", epilog=ROLLOUT_HELP)
@click.argument("args", nargs=-1, metavar="(TYPE NAME | TYPE/NAME)")
@_namespace_option
@click.option("--to-revision", type=int, default=0,
              help="The revision to roll back to (default 0: the previous revision).")
@context.pass_env
def undo_cmd(env: context.CliEnv, args: tuple[str, ...], namespace: str | None,
             to_revision: int) -> None:
    """Roll a DaemonSet back to an earlier revision: its pod template is replaced by the
    revision's, the controller renumbers that revision to the newest and rolls the pods to
    it per the update strategy. Nothing changes if the template already matches.

    \b
    Examples:
      daemonbus rollout undo ds/web
      daemonbus rollout undo ds/web --to-revision=1
    """
    for info, obj in _targets(env, args, namespace, "rollout undo", all_=True):
        _only_daemonsets(info, f'no rollbacker has been implemented for "{info.kind}"')
        ref = resources.ref(info, meta.name(obj))
        try:
            target, same = views.find_rollback(obj, _daemonset_revisions(env, obj), to_revision)
        except views.RolloutError as err:
            raise CliError(f"error: {err}") from err
        number = int(target.get("revision") or 0)
        if same:
            click.echo(f"{ref} skipped rollback (current template already matches "
                       f"revision {number})")
            continue
        _update(env, info, obj, functools.partial(views.rolled_back, revision=target))
        click.echo(f"{ref} rolled back")


@rollout.command("restart", short_help="Restart a resource.", epilog=ROLLOUT_HELP)
@click.argument("args", nargs=-1, metavar="(TYPE NAME | TYPE/NAME)")
@_namespace_option
@click.option("-l", "--selector", help="Restart the objects this label selector matches.")
@context.pass_env
def restart_cmd(env: context.CliEnv, args: tuple[str, ...], namespace: str | None,
                selector: str | None) -> None:
    """Replace every pod of a DaemonSet by a rollout: sets the
    kubectl.kubernetes.io/restartedAt annotation of its pod template to now.

    \b
    Examples:
      daemonbus rollout restart ds/web
    """
    problems: list[str] = []
    for info, obj in _targets(env, args, namespace, "rollout restart", selector, all_=True):
        name = meta.name(obj)
        if info.kind != "DaemonSet":
            problems.append(f'error: {info.qualified_plural} "{name}" restarting '
                            "is not supported")
            continue
        changed = _update(env, info, obj,
                          functools.partial(_restart_edit, now=env.now()))
        if changed is None:
            problems.append(f"failed to create patch for {name}: if restart has already been "
                            "triggered within the past second, please wait before attempting "
                            "to trigger another")
            continue
        click.echo(f"{resources.ref(info, name)} restarted")
    if problems:
        raise CliError("\n".join(problems))


def _restart_edit(current: Obj, now: float) -> Obj | None:
    new = views.restarted(current, now)
    return None if new == current else new


def _annotate(env: context.CliEnv, args: tuple[str, ...], namespace: str | None, verb: str,
              noun: str, edit: Callable[[Obj], Obj | None]) -> None:
    """``rollout pause|resume|promote``: apply ``edit`` (a rollout_views annotation edit) to
    each named DaemonSet and print ``<ref> <verb>`` (``already <verb>`` when it changed
    nothing), as kubectl's pause and resume print; other kinds are refused as kubectl refuses
    them (``"<name>" <noun> is not supported``)."""
    problems: list[str] = []
    for info, obj in _targets(env, args, namespace, f"rollout {verb}", all_=True):
        if info.kind != "DaemonSet":
            problems.append(f'error: {info.qualified_plural} "{meta.name(obj)}" '
                            f"{noun} is not supported")
            continue
        changed = _update(env, info, obj, edit)
        ref = resources.ref(info, meta.name(obj))
        click.echo(f"{ref} {verb}d" if changed is not None else f"{ref} already {verb}d")
    if problems:
        raise CliError("\n".join(problems))


_GATES_HELP = ("DaemonSets only: the rollout.daemonbus.io annotations (docs/rollouts.md); "
               + ROLLOUT_HELP)


@rollout.command("pause", short_help="Mark the provided resource as paused.", epilog=_GATES_HELP)
@click.argument("args", nargs=-1, metavar="(TYPE NAME | TYPE/NAME)")
@_namespace_option
@context.pass_env
def pause_cmd(env: context.CliEnv, args: tuple[str, ...], namespace: str | None) -> None:
    """Pause a DaemonSet's rollout: sets the rollout.daemonbus.io/paused annotation, so no
    pod of an old revision is replaced until it is resumed (nodes that newly need a pod still
    get one, of the current revision).

    \b
    Examples:
      daemonbus rollout pause ds/fluentd-elasticsearch -n kube-system
    """
    _annotate(env, args, namespace, "pause", "pausing", views.paused)


@rollout.command("resume", short_help="Resume a paused resource.", epilog=_GATES_HELP)
@click.argument("args", nargs=-1, metavar="(TYPE NAME | TYPE/NAME)")
@_namespace_option
@context.pass_env
def resume_cmd(env: context.CliEnv, args: tuple[str, ...], namespace: str | None) -> None:
    """Resume a paused DaemonSet's rollout: removes the rollout.daemonbus.io/paused
    annotation.

    \b
    Examples:
      daemonbus rollout resume ds/fluentd-elasticsearch -n kube-system
    """
    _annotate(env, args, namespace, "resume", "resuming", views.resumed)


@rollout.command("promote", short_help="Roll a partitioned or canary rollout out to all nodes.",
                 epilog=_GATES_HELP)
@click.argument("args", nargs=-1, metavar="(TYPE NAME | TYPE/NAME)")
@_namespace_option
@context.pass_env
def promote_cmd(env: context.CliEnv, args: tuple[str, ...], namespace: str | None) -> None:
    """Finish a DaemonSet's partitioned or canary rollout: removes the
    rollout.daemonbus.io/partition and rollout.daemonbus.io/node-selector annotations, so
    every node is updated (a pause stays: resume it too).

    \b
    Examples:
      daemonbus rollout promote ds/fluentd-elasticsearch -n kube-system
    """
    _annotate(env, args, namespace, "promote", "promoting", views.promoted)


def register(cli: click.Group) -> None:
    """Add ``set`` (``set image``) and ``rollout`` to the command line."""
    cli.add_command(set_group)
    cli.add_command(rollout)
