"""ControllerExpectations in Redis (spec §g.1), shared by the watcher and every reconciler.

One hash (``Keys.expectations``): DaemonSet key → msgpack ``[add, del, timestamp]``.
``set`` is one HSET; ``observe`` lowers any number of entries in one Lua call (the watcher
batches the observations of thousands of pod events); the satisfied decision is the pure
``shared.control.expectations.satisfied``. Timestamps are the caller's ``now`` (the
snapshot's time), so replays decide the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import redis

from shared.control import expectations as exp
from shared.store import codec, errors
from shared.store import control_scripts as scripts
from shared.store.guard import redis_errors
from shared.store.keys import Keys

log = logging.getLogger(__name__)


def _decode(raw: bytes | str) -> exp.Expectation:
    if isinstance(raw, str):
        raise errors.CorruptEntryError("the client decodes responses; msgpack needs bytes")
    value: Any = codec.unpack(raw)
    try:
        if not isinstance(value, list) or len(value) != 3:
            raise TypeError
        return exp.Expectation(int(value[0]), int(value[1]), float(value[2]))
    except (TypeError, ValueError, OverflowError) as err:
        raise errors.CorruptEntryError(
            f"expectation entry is not [add, del, timestamp]: {value!r:.200}") from err


def observe_args(observations: Iterable[tuple[str, int, int]]) -> list[str | int]:
    """The triples ``lower_expectations`` (control_scripts) takes, one per DaemonSet key:
    ``(key, creates_seen, deletes_seen)`` observations of one key summed, so the script
    rewrites each entry once however many pod events a batch saw for it."""
    totals: dict[str, list[int]] = {}
    for key, add, delete in observations:
        t = totals.setdefault(key, [0, 0])
        t[0] += add
        t[1] += delete
    args: list[str | int] = []
    for key, (add, delete) in totals.items():
        args += [key, add, delete]
    return args


class RedisExpectations:
    """Implements ``shared.control.protocols.ExpectationsStore``.

    The client must return bytes (``decode_responses=False``): values are msgpack.
    """

    def __init__(self, client: redis.Redis, keys: Keys,
                 timeout: float = exp.EXPECTATIONS_TIMEOUT) -> None:
        self.r, self.keys, self.timeout = client, keys, timeout
        self._observe = client.register_script(scripts.EXP_OBSERVE)

    def get(self, key: str) -> exp.Expectation | None:
        with redis_errors("expectations get"):
            raw = self.r.hget(self.keys.expectations, key)
        if raw is None:
            return None
        try:
            return _decode(raw)
        except errors.CorruptEntryError as err:  # read as none: the next sync sets it anew
            log.error("ignored expectations of %s: %s", key, err)
            return None

    def set(self, key: str, add: int, delete: int, now: float) -> None:
        """``SetExpectations``: replace the entry, stamped ``now``."""
        with redis_errors("expectations set"):
            self.r.hset(self.keys.expectations, key, codec.pack([add, delete, float(now)]))

    def lower(self, key: str, add: int, delete: int) -> None:
        """``LowerExpectations``; no-op without an entry."""
        self.observe([(key, add, delete)])

    def observe(self, observations: Iterable[tuple[str, int, int]]) -> None:
        """Lower many entries in one round trip: ``(key, creates_seen, deletes_seen)`` each.
        Observations of one key are summed first; keys without an entry are skipped."""
        args = observe_args(observations)
        if not args:
            return
        with redis_errors("expectations observe"):
            self._observe(keys=[self.keys.expectations], args=args)

    def satisfied(self, key: str, now: float) -> bool:
        """``SatisfiedExpectations`` at ``now``."""
        return exp.satisfied(self.get(key), now, self.timeout)

    def delete(self, key: str) -> None:
        """``DeleteExpectations``."""
        with redis_errors("expectations delete"):
            self.r.hdel(self.keys.expectations, key)
