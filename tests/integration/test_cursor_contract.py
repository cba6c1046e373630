"""One contract for both cursors: a reader's position in Redis and the in-memory twin."""

from __future__ import annotations

import pytest

from shared.eventlog.memory import InMemoryCursor
from shared.eventlog.ports import Cursor
from shared.store.eventlog import RedisCursor
from shared.store.keys import Keys
from tests.integration.contract import connect


@pytest.fixture(params=["memory", "redis"])
def cursors(request: pytest.FixtureRequest) -> dict[str, Cursor]:
    """A cursor for each of two readers, "watcher" and "other", of one log."""
    readers = ("watcher", "other")
    if request.param == "memory":
        return {reader: InMemoryCursor() for reader in readers}
    client = connect(request.getfixturevalue("redis_url"))
    keys = Keys(request.getfixturevalue("prefix"))
    return {reader: RedisCursor(client, keys, reader) for reader in readers}


def test_a_cursor_never_stored_is_none(cursors: dict[str, Cursor]) -> None:
    assert cursors["watcher"].get() is None


def test_a_stored_position_reads_back_and_moves(cursors: dict[str, Cursor]) -> None:
    cursor = cursors["watcher"]
    cursor.set("5-1")
    assert cursor.get() == "5-1"
    cursor.set("12-0")
    assert cursor.get() == "12-0"


def test_each_reader_has_its_own(cursors: dict[str, Cursor]) -> None:
    cursors["watcher"].set("7-0")
    assert cursors["other"].get() is None
    cursors["other"].set("3-0")
    assert (cursors["watcher"].get(), cursors["other"].get()) == ("7-0", "3-0")
