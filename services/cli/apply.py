"""``apply -f``: create or update objects from manifests, each document on its own.

As kubectl does, every document that is valid is applied and every one that is refused is
reported (kubectl's message, nothing of it written), and the command fails if any was. The
checks before the store's own: the kind is known, the namespace agrees, no field is unknown
to the kind's schema (kubectl's default strict field validation). ``--dry-run`` runs the
same on a store whose commits write nothing.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from services.cli import context, manifests, resources
from services.cli.errors import CliError, invalid_message
from shared.api import schema as api_schema
from shared.api import warnings as api_warnings
from shared.api import writes as api_writes
from shared.model import fielderr, kinds, meta
from shared.store import client as store_client
from shared.store import codec
from shared.store import errors as store_errors

Obj = dict[str, Any]


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
        raise CliError(f'error: resource mapping not found for name: '
                       f'{_quote(str(md.get("name", "")))} namespace: '
                       f'{_quote(str(md.get("namespace", "")))} from {_quote(doc.source)}: '
                       f"{_cut(str(err))}\nensure CRDs are installed first") from err
    if info.namespaced:
        given = md.get("namespace")
        if namespace and given and given != namespace:
            shown = _cut(str(given))
            raise CliError(f'error: the namespace from the provided object "{shown}" does not '
                           f'match the namespace "{namespace}". You must pass '
                           f"'--namespace={shown}' to perform this operation.")
        if not given:
            obj = {**obj, "metadata": {**md, "namespace": api_writes.namespace_for(info.kind,
                                                                                  namespace)}}
    return info, obj


def _check_fields(doc: manifests.Document, info: kinds.KindInfo, obj: Obj,
                  exists: bool) -> None:
    """kubectl's default strict field validation: a field the kind's schema does not declare
    refuses the object (``strict decoding error: unknown field "spec.foo"``)."""
    try:
        unknown = api_schema.unknown_fields(obj)
    except api_schema.UnknownKindError:
        return
    if unknown:
        raise CliError(f"Error from server (BadRequest): {_where(doc, exists)}"
                       + api_schema.strict_decoding_message(unknown, info.kind, info.version))


def _check_size(obj: Obj) -> None:
    """The store's size limit, before the field checks read a huge object."""
    try:
        api_writes.check_size(codec.plain(obj))
    except (OverflowError, TypeError, ValueError):
        pass  # cannot be encoded: the store's validation says so


def _quote(text: str) -> str:
    """Text from the input as kubectl's ``%q`` shows it, cut when long."""
    return _cut(fielderr.go_quote(text))


def _cut(text: str) -> str:
    return fielderr.cut(text, 256)


def _where(doc: manifests.Document, exists: bool) -> str:
    """``cmdutil.AddSourceToErr("creating", source, err)`` on a create; a patch's error
    carries the patch itself, which we do not show."""
    return "" if exists else f"error when creating {_quote(doc.source)}: "


def _server_error(err: store_errors.StoreError, doc: manifests.Document, exists: bool) -> str:
    """kubectl's line for an API error of one document."""
    if isinstance(err, store_errors.InvalidError):
        return invalid_message(err)
    head = f"Error from server ({err.reason})" if err.reason else "Error from server"
    return f"{head}: {_where(doc, exists)}{err}"


def _apply_one(store: store_client.Store, doc: manifests.Document,
               namespace: str | None, dry: bool = False) -> tuple[kinds.KindInfo, Obj, str]:
    """Check and apply one document; its kind, object and action. Raises CliError with
    kubectl's message when it is refused (and nothing of it was written)."""
    info, obj = _check_document(doc, namespace)
    exists = False
    try:
        exists = store.try_get(info.kind, store.manifest_key(obj)) is not None
        _check_size(obj)
        _check_fields(doc, info, obj, exists)
        action, _ = store.apply(obj, dry=dry)
    except store_errors.UnavailableError:
        raise
    except store_errors.StoreError as err:
        raise CliError(_server_error(err, doc, exists)) from err
    return info, obj, action


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
    (unchanged).

    As with kubectl, each document is applied on its own: the valid ones are applied, and
    each one that is refused (invalid, an unknown field, too large, an unknown kind) is
    reported with nothing of it written; the command then fails (exit code 1). A file that
    does not parse is reported; the documents before the bad one are applied. A path that
    does not exist stops the command before anything is applied.

    \b
    Examples:
      daemonbus apply -f fluentd.yaml
      cat node-exporter.yaml | daemonbus apply -f -
      daemonbus apply -f manifests/ -R
    """
    loaded = manifests.load(filenames, sys.stdin, recursive)
    if not loaded.documents and not loaded.errors:
        raise CliError("error: no objects passed to apply")
    store = env.store
    suffix = {"none": "", "server": " (server dry run)", "client": " (dry run)"}[dry_run]
    failures = list(loaded.errors)
    for doc in loaded.documents:
        try:
            info, obj, action = _apply_one(store, doc, namespace, dry=dry_run != "none")
        except CliError as err:
            failures.append(err.message)
            continue
        for warning in api_warnings.warnings(obj):  # as kubectl prints the server's
            click.echo(f"Warning: {warning}", err=True)
        click.echo(f"{resources.ref(info, meta.name(obj))} {action}{suffix}")
    if failures:
        raise CliError("\n".join(failures))
