"""``delete --wait``: block until deleted objects are really gone (their finalizers done,
their grace period over), as ``kubectl delete --wait`` does.

The wait follows the event log (a blocking read) instead of polling the store: after each
batch of entries, the objects still awaited are looked up again by uid, so an object
re-created under the same name does not count as the one awaited.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from shared.model import meta
from shared.store import adapters
from shared.store.client import Store
from shared.store.log import redis_reader

BLOCK_MS = 1000
WAIT_FOREVER = 7 * 24 * 3600.0  # kubectl's --timeout=0: a week


@dataclass(frozen=True)
class Awaited:
    kind: str
    key: str
    uid: str
    ref: str  # kubectl's TYPE/NAME for messages, e.g. daemonsets.apps/fluentd


def wait_gone(store: Store, awaited: list[Awaited], timeout: float) -> list[Awaited]:
    """Acts (reads only): wait until every awaited object is gone or ``timeout`` seconds have
    passed; returns those still present."""
    reader = adapters.on(store, redis_reader, store.log_tip(), name="delete-wait")
    deadline = time.monotonic() + timeout
    left = list(awaited)
    while True:
        left = [a for a in left if _present(store, a)]
        remaining = deadline - time.monotonic()
        if not left or remaining <= 0:
            return left
        reader.read(count=1000, block_ms=max(1, int(min(remaining, BLOCK_MS / 1000) * 1000)))


def _present(store: Store, a: Awaited) -> bool:
    obj = store.try_get(a.kind, a.key)
    return obj is not None and meta.uid(obj) == a.uid
