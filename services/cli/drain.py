"""``drain``: cordon nodes, then evict the pods that may go, as kubectl's ``drain`` does.

Which pods go is decided by kubectl's pod filters (``k8s.io/kubectl/pkg/drain``): a pod of an
existing DaemonSet is never evicted (the drain stops unless ``--ignore-daemonsets``), mirror
pods are skipped, a pod with emptyDir data needs ``--delete-emptydir-data``, one without a
controller ``--force``; finished pods always go. daemonbus has no PodDisruptionBudgets, so an
eviction is a graceful delete; ``drain`` waits until each evicted pod is gone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click

from services.cli import context, edits, errors, resources, rollout_views, waiting
from shared.model import kinds, meta
from shared.model.objkey import ObjectKey

Obj = dict[str, Any]

MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
# kubectl pkg/drain/filters.go
DAEMONSET_FATAL = "DaemonSet-managed Pods (use --ignore-daemonsets to ignore)"
DAEMONSET_WARNING = "ignoring DaemonSet-managed Pods"
LOCAL_STORAGE_FATAL = "Pods with local storage (use --delete-emptydir-data to override)"
LOCAL_STORAGE_WARNING = "deleting Pods with local storage"
UNMANAGED_FATAL = "Pods declare no controller (use --force to override)"
UNMANAGED_WARNING = "deleting Pods that declare no controller"


@dataclass(frozen=True)
class Verdict:
    """``PodDeleteStatus``: delete the pod or not, and why (a warning or an error)."""

    delete: bool
    reason: str = "okay"  # okay | skip | warning | error
    message: str = ""


@dataclass(frozen=True)
class Options:
    ignore_daemonsets: bool = False
    force: bool = False
    delete_emptydir_data: bool = False


OKAY = Verdict(True)


def _finished(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def verdict(pod: Obj, opts: Options, daemonset_exists: Callable[[str, str], str | None]
            ) -> Verdict:
    """kubectl's filters in order (daemonSet, mirrorPod, localStorage, unreplicated), the
    first that keeps the pod deciding. ``daemonset_exists(namespace, name)`` is None when the
    DaemonSet exists, else the NotFound message. Decides."""
    ref = meta.controller_ref(pod)
    if ref is not None and ref.get("kind") == "DaemonSet" and not _finished(pod):
        missing = daemonset_exists(meta.namespace(pod), str(ref.get("name") or ""))
        if missing is not None:
            return Verdict(True, "warning", missing) if opts.force else Verdict(
                False, "error", missing)
        if not opts.ignore_daemonsets:
            return Verdict(False, "error", DAEMONSET_FATAL)
        return Verdict(False, "warning", DAEMONSET_WARNING)
    if MIRROR_POD_ANNOTATION in meta.annotations(pod):
        return Verdict(False, "skip")
    volumes = (pod.get("spec") or {}).get("volumes") or []
    if any(isinstance(v, dict) and "emptyDir" in v for v in volumes) and not _finished(pod) \
            and not opts.delete_emptydir_data:
        return Verdict(False, "error", LOCAL_STORAGE_FATAL)
    # else localStorageFilter's warning (LOCAL_STORAGE_WARNING) is replaced by what the last
    # filter says, as upstream's TODO notes: it is never shown
    if _finished(pod) or ref is not None:
        return OKAY
    return Verdict(True, "warning", UNMANAGED_WARNING) if opts.force else Verdict(
        False, "error", UNMANAGED_FATAL)


def _grouped(items: list[tuple[Obj, Verdict]], reason: str) -> list[tuple[str, str]]:
    """(message, "ns/a, ns/b") per message of ``reason``, in order of first appearance."""
    by_message: dict[str, list[str]] = {}
    for pod, v in items:
        if v.reason == reason:
            by_message.setdefault(v.message or "unexpected error", []).append(
                f"{meta.namespace(pod)}/{meta.name(pod)}")
    return [(m, ", ".join(pods)) for m, pods in by_message.items()]


def aggregate(messages: list[str]) -> str:
    """``utilerrors.NewAggregate(errs).Error()``: one message as is, several in brackets."""
    return messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"


def _drain_node(env: context.CliEnv, name: str, opts: Options, grace: int | None,
                pod_selector: Any, evict: bool, timeout: float) -> str | None:
    """Acts: evict what may go from node ``name``; None when drained, else the error."""
    store = env.store

    def daemonset_exists(namespace: str, ds_name: str) -> str | None:
        if store.try_get("DaemonSet", f"{namespace}/{ds_name}") is not None:
            return None
        return f'daemonsets.apps "{ds_name}" not found'

    pods = [p for p in store.list("Pod") if (p.get("spec") or {}).get("nodeName") == name
            and (pod_selector is None or pod_selector.matches(meta.labels(p)))]
    judged = [(p, verdict(p, opts, daemonset_exists)) for p in pods]
    fatal = [f"cannot delete {m}: {who}" for m, who in _grouped(judged, "error")]
    if fatal:
        return aggregate(fatal)
    warnings = "; ".join(f"{m}: {who}" for m, who in _grouped(judged, "warning"))
    if warnings:
        click.echo(f"Warning: {warnings}", err=True)
    leaving = [p for p, v in judged if v.delete]
    awaited = []
    for pod in leaving:
        if evict:
            click.echo(f"evicting pod {meta.namespace(pod)}/{meta.name(pod)}")
        left = store.delete("Pod", meta.key(pod), grace_seconds=grace)
        if left is not None:
            awaited.append(waiting.Awaited("Pod", meta.key(pod), meta.uid(pod),
                                           f"pods/{meta.name(pod)}"))
    stuck = {a.key for a in waiting.wait_gone(store, awaited, timeout)} if awaited else set()
    for pod in leaving:
        if meta.key(pod) not in stuck:
            click.echo(f"pod/{meta.name(pod)} {'evicted' if evict else 'deleted'}")
    if stuck:
        return aggregate([f'error when waiting for pod "{ObjectKey.parse(k).name}" in namespace '
                          f'"{ObjectKey.parse(k).namespace}" to terminate: timed out waiting for the '
                          "condition" for k in sorted(stuck)])
    return None


@click.command(short_help="Drain node in preparation for maintenance.")
@click.argument("names", nargs=-1, metavar="NODE... | node/NODE...")
@click.option("--ignore-daemonsets", is_flag=True, help="Ignore DaemonSet-managed pods.")
@click.option("--force", is_flag=True,
              help="Continue even if there are pods that declare no controller.")
@click.option("--delete-emptydir-data", is_flag=True,
              help="Continue even if there are pods using emptyDir (local data that will be "
                   "deleted when the node is drained).")
@click.option("--grace-period", type=int, default=-1, show_default=True,
              help="Seconds each pod may take to terminate (-1: the pod's own setting).")
@click.option("--timeout", default="0s", show_default=True, metavar="DURATION",
              help="How long to wait for the evicted pods to go (0: no limit).")
@click.option("-l", "--selector", help="Drain the nodes this label selector matches.")
@click.option("--pod-selector", help="Only evict the pods this label selector matches.")
@click.option("--disable-eviction", is_flag=True,
              help="Delete instead of evict (daemonbus has no PodDisruptionBudgets: the same "
                   "graceful delete either way, reported as deleted).")
@context.pass_env
def drain(env: context.CliEnv, names: tuple[str, ...], ignore_daemonsets: bool, force: bool,
          delete_emptydir_data: bool, grace_period: int, timeout: str, selector: str | None,
          pod_selector: str | None, disable_eviction: bool) -> None:
    """Cordon nodes, then evict their pods, as kubectl drain does. DaemonSet pods are never
    evicted (their controller ignores unschedulable nodes and would put them back): with
    DaemonSet pods on a node the drain stops unless --ignore-daemonsets. Pods that declare
    no controller need --force, pods with emptyDir volumes --delete-emptydir-data.

    \b
    Examples:
      daemonbus drain node-1 --ignore-daemonsets
      daemonbus drain node/node-1 --ignore-daemonsets --force
    """
    try:
        pod_sel = resources.parse_selector(pod_selector)
    except errors.CliError as err:
        raise errors.CliError("error: --pod-selector=<pod_selector> must be a valid label "
                              "selector") from err
    try:
        wait_seconds = rollout_views.parse_duration(timeout) or waiting.WAIT_FOREVER
    except ValueError as err:
        raise errors.CliError(f'error: invalid argument "{timeout}" for "--timeout" flag: '
                              f"{err}") from err
    keys = edits.cordon_nodes(env, names, selector, schedulable=False, verb="drain")
    opts = Options(ignore_daemonsets, force, delete_emptydir_data)
    fatal, remaining = [], []
    for key in keys:
        name = ObjectKey.parse(key).name
        problem = _drain_node(env, name, opts, None if grace_period < 0 else grace_period,
                              pod_sel, not disable_eviction, wait_seconds)
        if problem is None:
            click.echo(f"{kinds.NODE.qualified_name}/{name} drained")
            continue
        click.echo(f'error: unable to drain node "{name}" due to error:{problem}, continuing '
                   "command...", err=True)
        fatal.append(problem)
        remaining.append(name)
    if remaining:
        click.echo("There are pending nodes to be drained:", err=True)
        for name in remaining:
            click.echo(f" {name}", err=True)
        raise errors.CliError(aggregate(fatal))


def register(cli: click.Group) -> None:
    cli.add_command(drain)
