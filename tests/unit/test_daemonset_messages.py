"""The status message, versioned: it round-trips, a message without a version (as published
before they carried one) is version 1, and a newer version or a field of the wrong type is
refused."""

from __future__ import annotations

import pytest

from shared.daemonset.messages import VERSION, StatusMessage
from shared.model.errors import CorruptEntryError

MSG = StatusMessage(key="ns/ds", status={"numberReady": 1}, uid="u1", generation=2,
                    observe=True, position="5-0", unavailable={"NotReady": 1})


def test_a_message_round_trips_with_its_version() -> None:
    doc = MSG.to_map()
    assert doc["v"] == VERSION and StatusMessage.from_map(doc) == MSG


def test_a_message_without_a_version_is_the_first() -> None:
    doc = MSG.to_map()
    del doc["v"]
    assert StatusMessage.from_map(doc) == MSG
    assert StatusMessage.from_map({"key": "ns/ds", "status": {}}) == StatusMessage(
        key="ns/ds", status={})


@pytest.mark.parametrize("change,error", [
    ({"v": VERSION + 1}, "unsupported version"), ({"v": True}, "unsupported version"),
    ({"generation": True}, "'generation' is not of type int"),
    ({"status": None}, "'status' is not of type dict"), ({"key": 3}, "'key'")])
def test_a_newer_or_malformed_message_is_refused(change: dict[str, object], error: str) -> None:
    with pytest.raises(CorruptEntryError, match=error):
        StatusMessage.from_map({**MSG.to_map(), **change})
