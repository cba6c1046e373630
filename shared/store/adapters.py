"""The Redis adapters of ``shared.store`` on one store's connection and names: how a process
wires its ports without holding the Redis handle itself (``services`` import no ``redis``
and never reach ``Store.r``; an import-linter contract keeps it so)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Concatenate, ParamSpec, TypeVar

import redis

from shared.store.client import Store
from shared.store.keys import Keys

P = ParamSpec("P")
T = TypeVar("T")

# the connection the adapters and functions of ``shared.store`` take first: what a command
# of ``services`` that works on a Redis other than its store's (``replay``'s target) holds
# and passes on, never calls
Connection = redis.Redis


def on(store: Store, adapter: Callable[Concatenate[redis.Redis, Keys, P], T],
       *args: P.args, **kwargs: P.kwargs) -> T:
    """``adapter`` (a class or function of ``shared.store`` taking the connection and the
    names first) on ``store``'s: ``on(store, RedisWorkQueue, lease_seconds=8)``."""
    return adapter(store.r, store.keys, *args, **kwargs)


def connection(store: Store) -> Connection:
    """``store``'s connection itself, for what takes one: the RQ adapter
    (``services.reconciler.worker``, the one module of ``services`` that speaks to Redis
    through a library of its own), and ``replay``'s rebuild into another prefix, which
    passes it on to ``shared.store.restore``."""
    return store.r
