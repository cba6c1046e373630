"""The watcher's writes for one batch of log changes: one atomic Lua call, fenced by its lease.

Per batch the watcher deletes and lowers expectations, adds DaemonSet keys to the workqueue
(now, after a delay, or with node hints) and stores its cursor. ``WATCHER_BATCH``
(control_scripts) does all of it in one script, with the semantics of the single-port
scripts it is built from (EXP_OBSERVE, WQ_ADD, WQ_ADD_AFTER, WQ_ADD_NODES), so:

- a batch is written entirely or not at all: a crash never leaves the cursor behind writes it
  covers, so a restarted watcher's replay never observes a creation or deletion twice;
- a deposed watcher writes nothing: the script first checks that the caller still holds the
  leader lease (``Keys.lease(role)``, as ``shared.store.lease`` stores it), in the same atomic
  step, so one that was paused past its TTL while a stand-by took over cannot move the
  cursor, lower expectations or enqueue behind the new leader's back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from shared.control.workqueue import check_keys
from shared.store import control_scripts as scripts
from shared.store.expectations import observe_args
from shared.store.guard import redis_errors, text
from shared.store.keys import Keys
from shared.store.workqueue import hint_args, upgrade, wq_keys


@dataclass(frozen=True)
class Written:
    """The lease holder's batch was written."""

    added: int  # keys newly marked dirty (a key already dirty is not added again)
    queue_shut_down: bool  # the adds were ignored: the workqueue is shut down
    lowered: int  # expectation entries lowered (keys without an entry are skipped)


@dataclass(frozen=True)
class NotLeader:
    """Nothing was written: the lease is held by ``holder`` (None: by nobody), not by us."""

    holder: str | None


class RedisWatcherBatch:
    """Writes the watcher's batches as ``holder`` of the ``lease_role`` lease; the cursor is
    ``Keys.cursor(cursor_reader)``."""

    def __init__(self, client: redis.Redis, keys: Keys, holder: str,
                 lease_role: str = "watcher", cursor_reader: str = "watcher") -> None:
        self.r, self.holder = client, holder
        self._keys = [*wq_keys(keys), keys.expectations, keys.cursor(cursor_reader),
                      keys.lease(lease_role)]
        self._batch = client.register_script(scripts.WATCHER_BATCH)
        upgrade(client, keys)

    def apply(self, position: str | None, *, delete_expectations: Iterable[str] = (),
              observe: Iterable[tuple[str, int, int]] = (), enqueue: Sequence[str] = (),
              enqueue_after: Mapping[str, float] | None = None,
              enqueue_nodes: Mapping[str, Sequence[str]] | None = None) -> Written | NotLeader:
        """Write one batch in one round trip if we hold the lease: DeleteExpectations of
        ``delete_expectations``, LowerExpectations of ``observe`` (``(key, creates_seen,
        deletes_seen)`` each, summed per key), ``Add`` of ``enqueue``, ``AddAfter`` of each
        ``enqueue_after`` key (delay in seconds), ``add_nodes`` of ``enqueue_nodes`` (key →
        node hints), then the cursor at ``position`` (None: the cursor is left as it is)."""
        deleted = list(delete_expectations)
        lowered = observe_args(observe)
        added = list(check_keys(enqueue))
        delayed: list[str] = []
        for key, seconds in (enqueue_after or {}).items():
            delayed += [key, repr(seconds * 1000.0)]
        hinted = hint_args(enqueue_nodes or {})
        args: list[Any] = [self.holder, position or "", len(deleted), len(lowered) // 3, len(added),
                           len(delayed) // 2, *deleted, *lowered, *added, *delayed, *hinted]
        with redis_errors("watcher batch"):
            raw = self._batch(keys=self._keys, args=args)
        if not int(raw[0]):
            return NotLeader(text(raw[1]) or None)
        return Written(added=int(raw[1]), queue_shut_down=bool(int(raw[2])),
                       lowered=int(raw[3]))
