"""Shared fixtures: a real redis-server per test session, a fresh key prefix per test."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pytest
import redis

from shared.store.keys import Keys
from shared.store.server import RedisServer
from tests import testdata

_counter = itertools.count()


def pytest_configure(config: pytest.Config) -> None:
    """Refuse to start without the real manifests: the tests that apply each of them would
    otherwise have none to apply, and pass."""
    if not testdata.manifests():
        raise pytest.UsageError(
            f"no DaemonSet manifests in {testdata.DAEMONSETS}: the tests need the team's "
            "reference folder beside the checkout (../shared/testdata/daemonsets), or "
            "DAEMONBUS_TESTDATA naming a folder of them")


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer().start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    return redis_server.url


@pytest.fixture
def prefix() -> str:
    """A key prefix of this test's own, so tests sharing one server never see each other."""
    return f"t{os.getpid()}x{next(_counter)}"


@pytest.fixture
def keys(prefix: str) -> Keys:
    """The Redis names of this test's prefix."""
    return Keys(prefix)


@pytest.fixture
def client(redis_url: str) -> redis.Redis:
    """A connection of the test's own (bytes replies, as the store's)."""
    return redis.Redis.from_url(redis_url)


@pytest.fixture
def stack(redis_url: str, prefix: str, tmp_path):  # type: ignore[no-untyped-def]
    """Real daemonbus processes on the test Redis; logs printed when a test fails."""
    from tests.integration.stack import Stack

    s = Stack(redis_url, prefix, tmp_path)
    yield s
    s.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):  # type: ignore[no-untyped-def]
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call" and rep.failed and "stack" in getattr(item, "funcargs", {}):
        rep.sections.append(("daemonbus process logs", item.funcargs["stack"].logs()))
