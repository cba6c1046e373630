"""Turning redis-py failures into the store's own errors at the boundary (STYLE habit 6)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import redis

from shared.store import errors


@contextmanager
def redis_errors(what: str) -> Iterator[None]:
    """Re-raise connection problems as ``UnavailableError`` (retryable) and Redis error
    replies as ``StoreError`` (a bug or a misconfigured server: retrying will not help)."""
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError) as err:
        raise errors.UnavailableError(f"redis: {what}: {err}") from err
    except redis.RedisError as err:
        raise errors.StoreError(f"redis: {what}: {err}") from err


def text(value: bytes | str | int) -> str:
    """A reply as ``str`` whether or not the client decodes responses."""
    return value.decode() if isinstance(value, bytes) else str(value)
