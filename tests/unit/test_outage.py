"""services.common.Outage: one warning when an outage begins, one when it ends, backoff
doubling to its cap between attempts, and a fresh outage after a success."""

from __future__ import annotations

import logging

import pytest

from services import common


def test_an_outage_is_logged_once_as_it_begins_and_once_as_it_ends(
        caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    outage = common.Outage(logging.getLogger("outage-test"), clock=lambda: now[0])
    caplog.set_level(logging.WARNING, "outage-test")
    delays = [outage.failed(ConnectionError("refused"), "get") for _ in range(8)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0, 5.0, 5.0]
    now[0] += 12.5
    outage.ok()
    outage.ok()  # no outage in progress: nothing to say
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "redis unavailable (get): refused; retrying with backoff until it is back",
        "redis is back after 12.5s (8 failed attempts)",
    ]
    assert not outage.down
    assert outage.failed(ConnectionError("reset")) == 0.5  # the next outage starts afresh
    assert len(caplog.records) == 3 and outage.down
