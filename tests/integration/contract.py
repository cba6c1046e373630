"""Fixtures shared by the contract suites: each port in memory and in Redis."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
import redis

T = TypeVar("T")


def connect(url: str) -> redis.Redis:
    return redis.Redis.from_url(url)


def wait_for(fn: Callable[[], T], timeout: float = 5.0, interval: float = 0.01) -> T:
    """Poll ``fn`` until it returns something truthy, failing after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(interval)


class Counting:
    """Records the commands a client sends from now on; without pipelines each one is a
    round trip."""

    def __init__(self, client: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[str] = []
        original: Callable[..., Any] = client.execute_command

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(str(args[0]))
            return original(*args, **kwargs)

        monkeypatch.setattr(client, "execute_command", counted)
