"""What every CLI command shares: the store (connected on first use), the clock, and the
translation of store and Redis errors into kubectl's one-line messages.

Commands get it with ``@context.pass_env`` and use ``env.store``; commands registered by
other modules (``up``, ``rollout``, ...) do the same.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import click

from services import config
from services.cli import errors
from shared.api import namespaces
from shared.model import kinds, labels, meta
from shared.store import client as store_client
from shared.store import errors as store_errors
from shared.store.keys import Keys

Obj = dict[str, Any]


def redact(url: str) -> str:
    """The URL without its password (``redis://:***@host``)."""
    return re.sub(r"(//[^:/@]*:)[^@/]*@", r"\1***@", url)


@dataclass
class CliEnv:
    """Per-invocation state. ``clock`` and ``store`` may be injected (tests)."""

    redis_url: str | None = None
    prefix: str | None = None
    clock: Callable[[], float] | None = None
    _store: store_client.Store | None = field(default=None, repr=False)

    def now(self) -> float:
        return self.clock() if self.clock is not None else time.time()

    def get(self, name: str, default: Any = None) -> Any:
        """Dict-style access to the global options (``ctx.find_root().obj.get("redis_url")``),
        for commands that read them that way."""
        return getattr(self, name, default) if name in ("redis_url", "prefix") else default

    @property
    def store(self) -> store_client.Store:
        """The store, connected (and checked with a PING) on first use."""
        if self._store is None:
            url = config.redis_url(self.redis_url)
            if not url:
                raise errors.CliError(
                    "error: no Redis configured: pass --redis-url, set DAEMONBUS_REDIS_URL, "
                    "or start a local cluster with `daemonbus up`")
            try:
                client = store_client.connect(url)
                client.ping()
            except (store_errors.TransportError, ValueError) as err:
                raise errors.CliError(
                    f"error: cannot reach Redis at {redact(url)}: {err}") from err
            keys = Keys(config.prefix(self.prefix))
            if self.clock is not None:
                self._store = store_client.Store(client, keys, clock=self.clock)
            else:
                self._store = store_client.Store(client, keys)
        return self._store


pass_env = click.make_pass_decorator(CliEnv, ensure=True)


def list_matching(env: CliEnv, info: kinds.KindInfo, namespace: str | None,
                  selector: labels.Selector | None) -> list[Obj]:
    """Objects of a kind in ``namespace`` (every namespace when None, and always for
    cluster-scoped kinds) whose labels match ``selector`` (all when None)."""
    if info.kind == kinds.NAMESPACE.kind:
        objs = served_namespaces(env).objects()
    else:
        objs = env.store.list(info.kind, namespace if info.namespaced else None)
    return objs if selector is None else [o for o in objs if selector.matches(meta.labels(o))]


def served_namespaces(env: CliEnv) -> namespaces.Namespaces:
    """The namespaces as the API server serves them: those with an object, those something
    lives in and the four every cluster has (one read of every object)."""
    _tip, objs = env.store.snapshot(list(kinds.STORED))
    return namespaces.served(objs)


def store_error_message(err: store_errors.StoreError) -> str:
    """kubectl's message for a store error, naming the resource (``daemonsets.apps``)."""
    info = kinds.by_kind(getattr(err, "kind", ""))
    return errors.server_message(err, info.qualified_plural if info else None)


GLOBAL_OPTIONS = (
    ("--redis-url", "redis_url", "URL",
     "Redis of the cluster (else $DAEMONBUS_REDIS_URL, else the one `daemonbus up` recorded)."),
    ("--prefix", "prefix", "P", "Key prefix of the cluster (else $DAEMONBUS_PREFIX)."),
)


def _set_global(name: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def store(ctx: click.Context, _param: click.Parameter, value: Any) -> None:
        if value is not None:
            setattr(ctx.ensure_object(CliEnv), name, value)
    return store


def global_options(f: Any) -> Any:
    """The group's own ``--redis-url`` and ``--prefix`` (stored on the CliEnv)."""
    for flag, name, metavar, help_ in reversed(GLOBAL_OPTIONS):
        f = click.option(flag, metavar=metavar, help=help_, expose_value=False,
                         callback=_set_global(name))(f)
    return f


def accept_global_options_anywhere(group: click.Group) -> None:
    """Let every command below ``group`` take the global flags too, as kubectl's persistent
    flags: ``daemonbus get nodes --redis-url URL`` works like ``daemonbus --redis-url URL get
    nodes``. A command with an option of the same name keeps its own (``replay --prefix``
    names the prefix to rebuild into). Acts on the command tree; call it once, after every
    command is registered."""
    for cmd in group.commands.values():
        taken = {opt for p in cmd.params for opt in getattr(p, "opts", [])}
        for flag, name, metavar, help_ in GLOBAL_OPTIONS:
            if flag not in taken:
                cmd.params.append(click.Option([flag], metavar=metavar, help=help_,
                                               expose_value=False, callback=_set_global(name)))
        if isinstance(cmd, click.Group):
            accept_global_options_anywhere(cmd)


class Group(click.Group):
    """A click group that turns store and Redis errors escaping any command into one line
    on stderr and exit code 1 (no traceback)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except store_errors.StoreError as err:
            raise errors.CliError(store_error_message(err)) from err
        except store_errors.TransportError as err:
            raise errors.CliError(f"error: redis: {err}") from err
