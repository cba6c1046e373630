"""``label``, ``taint``, ``cordon`` and ``uncordon``: read-modify-write edits of live objects.

Each edit is a pure function of the current object, run through ``Store.mutate`` (which
retries on a Conflict with the newest version), so concurrent writers never lose updates.
Argument parsing and messages follow kubectl.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from services.cli import context, resources
from services.cli.errors import CliError
from shared.model import kinds, meta, syntax
from shared.model import taints as model_taints
from shared.model.objkey import ObjectKey

Obj = dict[str, Any]
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def _split_args(args: tuple[str, ...], is_change: Callable[[str], bool],
                what: str) -> tuple[list[str], list[str]]:
    """Resource arguments first, then the changes (the first argument that looks like one)."""
    for i, a in enumerate(args):
        if is_change(a):
            if not all(is_change(x) for x in args[i:]):
                raise CliError(f"error: all resources must be specified before {what} changes: "
                               f"{' '.join(args[i:])}")
            return list(args[:i]), list(args[i:])
    return list(args), []


def _targets(env: context.CliEnv, res_args: list[str], namespace: str | None,
             selector: str | None, verb: str) -> list[tuple[kinds.KindInfo, str]]:
    """(kind, store key) of each object named, or matched by ``-l`` when no names."""
    targets = resources.parse_targets(res_args, verb)
    ns = namespace or "default"
    out = []
    for t in targets:
        if t.name is not None:
            out.append((t.info, resources.store_key(t.info, t.name, ns)))
            continue
        sel = resources.parse_selector(selector)
        if sel is None:
            raise CliError("error: resource(s) were provided, but no name was specified")
        out += [(t.info, meta.key(o)) for o in context.list_matching(env, t.info, ns, sel)]
    return out


# ---- label --------------------------------------------------------------------------------


def parse_labels(specs: list[str]) -> tuple[dict[str, str], list[str]]:
    """``k=v`` to set and ``k-`` to remove, checked as label keys and values."""
    add: dict[str, str] = {}
    remove: list[str] = []
    for spec in specs:
        if spec.endswith("-") and "=" not in spec:
            key, value = spec[:-1], None
        else:
            key, sep, value = spec.partition("=")
            if not sep or "=" in value:
                raise CliError(f"error: invalid label spec: {spec}")
        problems = syntax.is_qualified_name(key)
        if value is not None:
            problems += syntax.is_valid_label_value(value)
        if problems:
            raise CliError(f"error: invalid label spec: {spec}, {'; '.join(problems)}")
        if value is None:
            remove.append(key)
        else:
            add[key] = value
    if set(add) & set(remove):
        raise CliError("error: can not both modify and remove a label in the same command")
    return add, remove


def relabel(obj: Obj, add: dict[str, str], remove: list[str], overwrite: bool,
            notes: list[str]) -> Obj | None:
    """``obj`` with the labels changed (None: no change). Decides; ``notes`` collects
    kubectl's ``label "k" not found.`` lines."""
    current = meta.labels(obj)
    if not overwrite:
        clashes = [f"'{k}' already has a value ({current[k]}), and --overwrite is false"
                   for k, v in add.items() if k in current and current[k] != v]
        if clashes:
            raise CliError("error: " + "\nerror: ".join(clashes))
    new_labels = {**current, **add}
    for k in remove:
        if k not in new_labels:
            notes.append(f'label "{k}" not found.')
        new_labels.pop(k, None)
    if new_labels == current:
        return None
    obj.setdefault("metadata", {})["labels"] = new_labels
    return obj


@click.command(short_help="Update the labels on a resource.")
@click.argument("args", nargs=-1, required=True,
                metavar="(TYPE NAME... | TYPE/NAME...) KEY=VAL... KEY-...")
@click.option("--overwrite", is_flag=True, help="Allow replacing the value of existing labels.")
@click.option("-n", "--namespace", default=None, help="Namespace (default: default).")
@click.option("-l", "--selector", help="Label the objects this selector matches.")
@context.pass_env
def label(env: context.CliEnv, args: tuple[str, ...], overwrite: bool, namespace: str | None,
          selector: str | None) -> None:
    """Add, change (with --overwrite) or remove (KEY-) labels on nodes, DaemonSets or pods.
    Node labels decide where DaemonSets with a nodeSelector or node affinity place pods.

    \b
    Examples:
      daemonbus label node/node-1 disktype=ssd
      daemonbus label nodes node-1 node-2 zone=b --overwrite
      daemonbus label node/node-1 disktype-
    """
    res_args, specs = _split_args(args, lambda a: "=" in a or a.endswith("-"), "label")
    if not specs:
        raise CliError("error: at least one label update is required")
    add, remove = parse_labels(specs)
    for info, key in _targets(env, res_args, namespace, selector, "label"):
        notes: list[str] = []

        def edit(obj: Obj, notes: list[str] = notes) -> Obj | None:
            notes.clear()
            return relabel(obj, add, remove, overwrite, notes)

        changed = env.store.mutate(info.kind, key, edit)
        for note in notes:
            click.echo(note)
        msg = "not labeled" if changed is None else "unlabeled" if not add else "labeled"
        click.echo(f"{resources.ref(info, ObjectKey.parse(key).name)} {msg}")


# ---- taint --------------------------------------------------------------------------------


def parse_taint(spec: str) -> Obj:
    """``key[=value][:effect]`` (kubectl's ``parseTaint``)."""
    parts = spec.split(":")
    if len(parts) > 2:
        raise CliError(f"error: invalid taint spec: {spec}")
    key, value, effect = parts[0], "", parts[1] if len(parts) == 2 else ""
    if len(parts) == 2:
        if effect not in EFFECTS:
            raise CliError(f"error: invalid taint effect: {effect}, unsupported taint effect")
        kv = parts[0].split("=")
        if len(kv) > 2:
            raise CliError(f"error: invalid taint spec: {spec}")
        key = kv[0]
        value = kv[1] if len(kv) == 2 else ""
        if errs := syntax.is_valid_label_value(value):
            raise CliError(f"error: invalid taint spec: {spec}, {'; '.join(errs)}")
    if errs := syntax.is_qualified_name(key):
        raise CliError(f"error: invalid taint spec: {spec}, {'; '.join(errs)}")
    taint: Obj = {"key": key, "effect": effect}
    if value:
        taint["value"] = value
    return taint


def parse_taints(specs: list[str]) -> tuple[list[Obj], list[Obj]]:
    """Taints to add (``k=v:Effect``, ``k:Effect``) and to remove (``k:Effect-``, ``k-``)."""
    add: list[Obj] = []
    remove: list[Obj] = []
    for spec in specs:
        if spec.endswith("-"):
            remove.append(parse_taint(spec[:-1]))
            continue
        taint = parse_taint(spec)
        if not taint["effect"]:
            raise CliError(f"error: invalid taint spec: {spec}")
        if any(t["key"] == taint["key"] and t["effect"] == taint["effect"] for t in add):
            raise CliError(f"error: duplicated taints with the same key and effect: "
                           f"{model_taints.taint_string(taint)}")
        add.append(taint)
    return add, remove


def _same(a: Obj, b: Obj) -> bool:
    return a.get("key") == b.get("key") and a.get("effect") == b.get("effect")


def retaint(node: Obj, add: list[Obj], remove: list[Obj], overwrite: bool,
            now: str) -> tuple[Obj, str]:
    """``node`` with its taints changed, and kubectl's word for it (tainted / untainted /
    modified). Decides. NoExecute taints get ``timeAdded``."""
    old = model_taints.node_taints(node)
    if not overwrite:
        clash = [t["key"] for t in add if any(_same(t, o) for o in old)]
        if clash:
            raise CliError(f"error: node {meta.name(node)} already has {','.join(clash)} "
                           "taint(s) with same effect(s) and --overwrite is false")
    new = [{**t, "timeAdded": now} if t["effect"] == "NoExecute" else dict(t) for t in add]
    new += [o for o in old if not any(_same(o, t) for t in new)]
    added = len(new) != len(old)
    deleted = False
    for r in remove:
        keep = [t for t in new if not (t.get("key") == r["key"] and
                                       (not r["effect"] or t.get("effect") == r["effect"]))]
        if len(keep) == len(new):
            raise CliError(f'error: taint "{model_taints.taint_string(r).rstrip(":")}" '
                           "not found")
        new, deleted = keep, True
    node.setdefault("spec", {})["taints"] = new
    if not new:
        node["spec"].pop("taints")
    word = "modified" if (added and deleted) or overwrite else "tainted" if added else "untainted"
    return node, word


def _node_targets(env: context.CliEnv, res_args: list[str], selector: str | None,
                  verb: str) -> list[str]:
    targets = _targets(env, res_args, None, selector, verb)
    wrong = [i.plural for i, _ in targets if i.kind != "Node"]
    if wrong:
        raise CliError(f"error: invalid resource type {wrong[0]}, only node types are supported")
    return [key for _, key in targets]


@click.command(short_help="Update the taints on one or more nodes.")
@click.argument("args", nargs=-1, required=True,
                metavar="(node NAME... | node/NAME...) KEY[=VAL]:EFFECT... KEY[:EFFECT]-...")
@click.option("--overwrite", is_flag=True, help="Replace taints with the same key and effect.")
@click.option("-l", "--selector", help="Taint the nodes this label selector matches.")
@context.pass_env
def taint(env: context.CliEnv, args: tuple[str, ...], overwrite: bool,
          selector: str | None) -> None:
    """Add or remove node taints. A DaemonSet places a pod on a tainted node only if the
    pod template tolerates the taint; NoExecute also evicts running daemon pods that do
    not. Effects: NoSchedule, PreferNoSchedule, NoExecute.

    \b
    Examples:
      daemonbus taint node/node-1 dedicated=gpu:NoSchedule
      daemonbus taint nodes node-1 dedicated:NoSchedule-
      daemonbus taint node/node-1 dedicated-
    """
    res_args, specs = _split_args(
        args, lambda a: ":" in a or "=" in a or a.endswith("-"), "taint")
    if not specs:
        raise CliError("error: at least one taint update is required")
    add, remove = parse_taints(specs)
    for key in _node_targets(env, res_args, selector, "taint"):
        words: list[str] = []

        def edit(node: Obj, words: list[str] = words) -> Obj:
            node, word = retaint(node, add, remove, overwrite, meta.format_time(env.now()))
            words[:] = [word]
            return node

        env.store.mutate("Node", key, edit)
        click.echo(f"node/{ObjectKey.parse(key).name} {words[0]}")


# ---- cordon / uncordon --------------------------------------------------------------------


def set_schedulable(node: Obj, schedulable: bool) -> Obj | None:
    """``spec.unschedulable`` and the ``node.kubernetes.io/unschedulable:NoSchedule`` taint
    the node lifecycle controller keeps in step with it. None: nothing to change."""
    spec = node.setdefault("spec", {})
    before = (bool(spec.get("unschedulable")), model_taints.node_taints(node))
    others = [t for t in before[1] if not _same(t, UNSCHEDULABLE_TAINT)]
    if schedulable:
        spec.pop("unschedulable", None)
        taints = others
    else:
        spec["unschedulable"] = True
        taints = [*others, dict(UNSCHEDULABLE_TAINT)]
    if taints:
        spec["taints"] = taints
    else:
        spec.pop("taints", None)
    return None if (bool(spec.get("unschedulable")), taints) == before else node


def node_args(names: tuple[str, ...] | list[str]) -> list[str]:
    """kubectl's ``ResourceNames("nodes", args...)``: each argument a bare NODE name or
    TYPE/NAME (``node/NAME``), as TYPE/NAME arguments."""
    return [a if "/" in a else f"node/{a}" for a in names]


def cordon_nodes(env: context.CliEnv, names: tuple[str, ...], selector: str | None,
                 schedulable: bool, verb: str | None = None) -> list[str]:
    """Acts: (un)cordon the named nodes (``NAME`` or ``node/NAME``) or those ``selector``
    matches, printing kubectl's line for each; returns their store keys."""
    done = "uncordon" if schedulable else "cordon"
    verb = verb or done
    if not names and not selector:
        raise CliError(f"error: USAGE: {verb} NODE [flags]")
    if names and selector:
        raise CliError("error: cannot specify both a node name and a --selector option")
    keys = _node_targets(env, node_args(names) if names else ["node"], selector, verb)
    for key in keys:
        was: list[bool] = []

        def edit(node: Obj, was: list[bool] = was) -> Obj | None:
            was[:] = [not (node.get("spec") or {}).get("unschedulable")]
            return set_schedulable(node, schedulable)

        env.store.mutate("Node", key, edit)
        already = "already " if was[0] == schedulable else ""
        click.echo(f"node/{ObjectKey.parse(key).name} {already}{done}ed")
    return keys


@click.command(short_help="Mark node as unschedulable.")
@click.argument("names", nargs=-1, metavar="NODE... | node/NODE...")
@click.option("-l", "--selector", help="Cordon the nodes this label selector matches.")
@context.pass_env
def cordon(env: context.CliEnv, names: tuple[str, ...], selector: str | None) -> None:
    """Mark nodes unschedulable (spec.unschedulable and the
    node.kubernetes.io/unschedulable:NoSchedule taint). Daemon pods tolerate that taint, so
    DaemonSets keep running on cordoned nodes, as in Kubernetes.

    \b
    Examples:
      daemonbus cordon node-1
      daemonbus cordon node/node-1
    """
    cordon_nodes(env, names, selector, schedulable=False)


@click.command(short_help="Mark node as schedulable.")
@click.argument("names", nargs=-1, metavar="NODE... | node/NODE...")
@click.option("-l", "--selector", help="Uncordon the nodes this label selector matches.")
@context.pass_env
def uncordon(env: context.CliEnv, names: tuple[str, ...], selector: str | None) -> None:
    """Mark nodes schedulable again: clears spec.unschedulable and removes the
    node.kubernetes.io/unschedulable:NoSchedule taint.

    \b
    Examples:
      daemonbus uncordon node-1
      daemonbus uncordon node/node-1
    """
    cordon_nodes(env, names, selector, schedulable=True)


def register(cli: click.Group) -> None:
    for cmd in (label, taint, cordon, uncordon):
        cli.add_command(cmd)
