"""``node add`` / ``node remove``: register and remove simulated nodes.

A node is registered as a kubelet would register it (``lifecycle.new_node``): Ready=False
until a node agent reports it Ready. Several nodes are created in one atomic commit: all of
them or, when any name is taken, none.
"""

from __future__ import annotations

import re

import click

from services.cli import context, edits, errors
from services.cli.errors import CliError
from services.node_agent import lifecycle
from shared.eventlog.entry import CommitResult
from shared.model import meta, syntax
from shared.model.objkey import ObjectKey
from shared.store import errors as store_errors


def next_names(existing: set[str], prefix: str, count: int) -> list[str]:
    """``count`` names ``<prefix><n>`` numbered on from the highest ``n`` already taken."""
    pattern = re.compile(re.escape(prefix) + r"(\d+)$")
    taken = [int(m.group(1)) for n in existing if (m := pattern.match(n))]
    start = max(taken, default=0) + 1
    return [f"{prefix}{i}" for i in range(start, start + count)]


@click.group("node", short_help="Add or remove simulated nodes.")
def node() -> None:
    """Add or remove simulated nodes. A node agent (`daemonbus run node-agent`, started by
    `daemonbus up`) then reports them Ready and runs the daemon pods bound to them.

    \b
    Examples:
      daemonbus node add worker-1 worker-2 --label disktype=ssd
      daemonbus node add --count 100 --name-prefix node-
      daemonbus node remove worker-2
    """


@node.command("add", short_help="Register nodes.")
@click.argument("names", nargs=-1, metavar="[NAME...]")
@click.option("--count", type=click.IntRange(min=1), default=None,
              help="Add this many nodes named <name-prefix><n>, numbered on from the highest "
                   "such node.")
@click.option("--name-prefix", default="node-", show_default=True,
              help="Name prefix for --count.")
@click.option("--label", "label_specs", multiple=True, metavar="KEY=VAL",
              help="Extra node label (repeatable).")
@click.option("--taint", "taint_specs", multiple=True, metavar="KEY[=VAL]:EFFECT",
              help="Node taint (repeatable).")
@context.pass_env
def add(env: context.CliEnv, names: tuple[str, ...], count: int | None, name_prefix: str,
        label_specs: tuple[str, ...], taint_specs: tuple[str, ...]) -> None:
    """Register nodes as a kubelet does: labels kubernetes.io/hostname, kubernetes.io/os=linux
    and kubernetes.io/arch=amd64 plus any --label, the given --taint(s), and a Ready=False
    condition until a node agent marks them Ready. All nodes are created in one atomic
    write: if any name is taken, none is created.

    \b
    Examples:
      daemonbus node add worker-1 --label node-role.kubernetes.io/worker= --taint gpu=true:NoSchedule
      daemonbus node add --count 1000
    """
    if bool(names) == bool(count):
        raise CliError("error: name the nodes to add, or give --count N (not both)")
    extra_labels, removals = edits.parse_labels(list(label_specs))
    if removals:
        raise CliError(f"error: invalid label spec: {removals[0]}-")
    taints, untaints = edits.parse_taints(list(taint_specs))
    if untaints:
        raise CliError("error: --taint takes KEY[=VAL]:EFFECT")
    store = env.store
    if count:
        if problems := syntax.is_dns1123_subdomain(name_prefix + "1"):
            raise CliError(f"error: invalid --name-prefix {name_prefix!r}: {problems[0]}")
        existing = {meta.name(n) for n in store.list("Node")}
        names = tuple(next_names(existing, name_prefix, count))
    if len(set(names)) != len(names):
        raise CliError("error: a node name is given twice")
    ops = [store.create_op(lifecycle.new_node(n, extra_labels, [dict(t) for t in taints]))
           for n in names]
    results = store.commit(ops, atomic=True)
    taken = [ObjectKey.parse(r.op.key).name for r in results if r.status == CommitResult.EXISTS]
    if taken:
        raise CliError("\n".join(f'Error from server (AlreadyExists): nodes "{n}" already exists'
                                 for n in taken))
    failed = [r for r in results if not r.ok]
    if failed:
        raise CliError(f"error: nodes not created: {failed[0].status} {failed[0].op.key}")
    for n in names:
        click.echo(f"node/{n} created")


@node.command("remove", short_help="Delete nodes.")
@click.argument("names", nargs=-1, required=True, metavar="NAME...")
@context.pass_env
def remove(env: context.CliEnv, names: tuple[str, ...]) -> None:
    """Delete nodes. Their pods are removed by the garbage collector (the pod GC role), and
    DaemonSets stop counting them.

    \b
    Example:
      daemonbus node remove worker-2
    """
    problems = []
    for n in names:
        try:
            env.store.delete("Node", f"/{n}")
        except store_errors.NotFoundError:
            problems.append(errors.not_found("nodes", n))
            continue
        click.echo(f'node "{n}" deleted')
    if problems:
        raise CliError("\n".join(problems))


def register(cli: click.Group) -> None:
    cli.add_command(node)
