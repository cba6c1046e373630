"""``apply -f``: create or update objects from manifests, all or nothing on invalid input.

Every document is first applied to a dry-run store (the real store's reads, validation and
bookkeeping, with commits that write nothing), so an invalid document anywhere stops the
command before the first write, with kubectl's message for each invalid one.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import click

from services.cli import context, manifests, resources
from services.cli.errors import CliError, invalid_message
from shared.model import kinds, meta
from shared.store import client as store_client
from shared.store import errors as store_errors

Obj = dict[str, Any]


class DryRunStore(store_client.Store):
    """A store whose commits write nothing and report success: an ``apply`` against it runs
    every read, validation and bookkeeping step of the real one (kubectl's server-side
    dry run). Relies on the store's contract that every write goes through ``commit``."""

    def commit(self, ops: Sequence[store_client.Op], atomic: bool = False,
               fence: store_client.Fence | None = None) -> list[store_client.Result]:
        return [store_client.Result("ok", meta.resource_version(op.obj or {}) or "0-0", op)
                for op in ops]


def _check_document(doc: manifests.Document, namespace: str | None) -> tuple[kinds.KindInfo, Obj]:
    """The kind of a manifest document and the object with its namespace settled (kubectl's
    resource mapping and namespace enforcement)."""
    obj = doc.obj
    missing = [f"{f} not set" for f in ("apiVersion", "kind") if not obj.get(f)]
    if missing:
        text = missing[0] if len(missing) == 1 else "[" + ", ".join(missing) + "]"
        raise CliError(f'error: error validating "{doc.source}": error validating data: {text}')
    md = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    assert isinstance(md, dict)
    try:
        info = kinds.lookup(str(obj["apiVersion"]), str(obj["kind"]))
    except kinds.NoKindMatchError as err:
        raise CliError(f'error: resource mapping not found for name: "{md.get("name", "")}" '
                       f'namespace: "{md.get("namespace", "")}" from "{doc.source}": {err}\n'
                       "ensure CRDs are installed first") from err
    if info.namespaced:
        given = md.get("namespace")
        if namespace and given and given != namespace:
            raise CliError(f'error: the namespace from the provided object "{given}" does not '
                           f'match the namespace "{namespace}". You must pass '
                           f"'--namespace={given}' to perform this operation.")
        if not given:
            obj = {**obj, "metadata": {**md, "namespace": namespace or "default"}}
    return info, obj


def _validate_all(env: context.CliEnv, docs: list[tuple[str, Obj]]) -> list[str]:
    """kubectl's message for every document (source, object) the store would refuse;
    nothing is written."""
    store = env.store
    dry = DryRunStore(store.r, store.keys, clock=store.clock)
    problems = []
    for source, obj in docs:
        exists = store.try_get(str(obj.get("kind")), store.manifest_key(obj)) is not None
        try:
            dry.apply(obj)
        except store_errors.InvalidError as err:
            problems.append(invalid_message(err))
        except store_errors.BadRequestError as err:
            # cmdutil.AddSourceToErr("creating", source, err) on a create; a patch's error
            # carries the patch itself, which we do not show
            where = "" if exists else f'error when creating "{source}": '
            problems.append(f"Error from server ({err.reason}): {where}{err}")
    return problems


@click.command(short_help="Apply a configuration to a resource by file name or stdin.")
@click.option("-f", "--filename", "filenames", multiple=True, required=True, metavar="FILE",
              help="Manifest file, directory of manifests, or - for stdin (repeatable).")
@click.option("-R", "--recursive", is_flag=True, help="Read directories given with -f "
                                                       "recursively.")
@click.option("-n", "--namespace", default=None,
              help="Namespace for objects that name none (default: default).")
@click.option("--dry-run", type=click.Choice(["none", "server", "client"]), default="none",
              help="Only show what would happen; write nothing.")
@context.pass_env
def apply(env: context.CliEnv, filenames: tuple[str, ...], recursive: bool,
          namespace: str | None, dry_run: str) -> None:
    """Create or update objects from YAML or JSON manifests (several documents per file,
    separated by ---; a kind: List works too). An object that exists gets the manifest's
    spec, labels and annotations (configured) or is left alone when nothing differs
    (unchanged). All documents are validated before anything is written: if any is
    invalid, the command writes nothing.

    \b
    Examples:
      daemonbus apply -f fluentd.yaml
      cat node-exporter.yaml | daemonbus apply -f -
      daemonbus apply -f manifests/ -R
    """
    docs = manifests.load(filenames, sys.stdin, recursive)
    checked = [_check_document(d, namespace) for d in docs]
    if not checked:
        raise CliError("error: no objects passed to apply")
    problems = _validate_all(env, [(d.source, obj) for d, (_, obj) in zip(docs, checked,
                                                                           strict=True)])
    if problems:
        raise CliError("\n".join(problems))
    store = env.store if dry_run == "none" else DryRunStore(
        env.store.r, env.store.keys, clock=env.store.clock)
    suffix = {"none": "", "server": " (server dry run)", "client": " (dry run)"}[dry_run]
    failures = []
    for info, obj in checked:
        try:
            action, _ = store.apply(obj)
        except store_errors.StoreError as err:
            failures.append(context.store_error_message(err))
            continue
        click.echo(f"{resources.ref(info, meta.name(obj))} {action}{suffix}")
    if failures:
        raise CliError("\n".join(failures))
