"""A leader lease in Redis: one active holder per role (e.g. the watcher), the others stand
by and take over within the TTL (10 s) after the holder stops renewing.

``acquire`` is ``SET key holder NX PX ttl`` (or a PEXPIRE when already ours), ``renew`` and
``release`` act only while we are still the holder — each one Lua call. A holder should renew
every ``ttl/3`` and stop acting as leader as soon as a renew returns False.
"""

from __future__ import annotations

import redis

from shared.control.leader import DEFAULT_TTL_SECONDS
from shared.store import control_scripts as scripts
from shared.store.guard import redis_errors, text
from shared.store.keys import Keys


class RedisLeaderLease:
    """Implements ``shared.control.protocols.LeaderLease`` on ``Keys.lease(role)``."""

    def __init__(self, client: redis.Redis, keys: Keys, role: str, holder: str,
                 ttl_seconds: float = DEFAULT_TTL_SECONDS) -> None:
        self.r, self.key, self.holder = client, keys.lease(role), holder
        self.ttl = ttl_seconds
        self._acquire = client.register_script(scripts.LEASE_ACQUIRE)
        self._renew = client.register_script(scripts.LEASE_RENEW)
        self._release = client.register_script(scripts.LEASE_RELEASE)

    @property
    def _ttl_ms(self) -> int:
        return max(1, int(self.ttl * 1000))

    def acquire(self) -> bool:
        """Take the lease if free, or extend it if already ours; True when we hold it."""
        with redis_errors("lease acquire"):
            return bool(self._acquire(keys=[self.key], args=[self.holder, self._ttl_ms]))

    def renew(self) -> bool:
        """Extend the lease only if we still hold it."""
        with redis_errors("lease renew"):
            return bool(self._renew(keys=[self.key], args=[self.holder, self._ttl_ms]))

    def release(self) -> bool:
        """Give the lease up (only if we hold it), so a stand-by takes over at once."""
        with redis_errors("lease release"):
            return bool(self._release(keys=[self.key], args=[self.holder]))

    def current_holder(self) -> str | None:
        with redis_errors("lease holder"):
            raw = self.r.get(self.key)
        return None if raw is None else text(raw)
