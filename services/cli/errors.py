"""The CLI's errors and how store errors read on the terminal (kubectl's wording).

Every expected failure ends as one ``CliError``: its message goes to stderr as it is, the
exit code is 1, and no traceback is shown.
"""

from __future__ import annotations

import re
from typing import Any

import click

from shared.model import fielderr
from shared.model.objkey import ObjectKey
from shared.store import errors as store_errors


class CliError(click.ClickException):
    """An expected failure; ``message`` is printed verbatim (it carries its own prefix,
    ``error:`` or ``Error from server (Reason):``)."""

    exit_code = 1

    def show(self, file: Any = None) -> None:
        click.echo(printable(self.message), err=True)


MAX_MESSAGE_CHARS = 64 * 1024

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(message: str) -> str:
    """``message`` safe for a terminal: control characters other than newlines and tabs
    (escape sequences included) shown as ``\\xNN``, and cut after
    :data:`MAX_MESSAGE_CHARS` characters. Values inside field errors are already quoted and
    cut (``fielderr.render``); this is the last guard for text taken from the input."""
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", message)
    return fielderr.cut(text, MAX_MESSAGE_CHARS)


def invalid_message(err: store_errors.InvalidError) -> str:
    """``The DaemonSet "x" is invalid: <cause>``, or one ``* <cause>`` line per cause when
    there are several (kubectl's ``MultilineError``)."""
    head = f"The {err.kind} {fielderr.cut(fielderr.go_quote(err.name), 256)} is invalid: "
    causes = list(err.causes)
    if len(causes) == 1:
        return head + causes[0]
    return head.rstrip() + "\n" + "\n".join(f"* {c}" for c in causes)


def not_found(resource: str, name: str) -> str:
    """``Error from server (NotFound): daemonsets.apps "x" not found``."""
    return f'Error from server (NotFound): {resource} "{name}" not found'


def server_message(err: store_errors.StoreError, resource: str | None = None) -> str:
    """A store error as kubectl prints an API error. ``resource`` (``daemonsets.apps``)
    names the resource in NotFound/AlreadyExists messages."""
    if isinstance(err, store_errors.InvalidError):
        return invalid_message(err)
    if isinstance(err, store_errors.UnavailableError):
        return f"error: {err}"
    if isinstance(err, store_errors.NotFoundError) and resource:
        return not_found(resource, ObjectKey.parse(err.key).name)
    if isinstance(err, store_errors.AlreadyExistsError) and resource:
        return f'Error from server (AlreadyExists): {resource} "{ObjectKey.parse(err.key).name}" ' \
               "already exists"
    if not err.reason:  # an error the API server has no reason for (etcd's, say)
        return f"Error from server: {err}"
    return f"Error from server ({err.reason}): {err}"
