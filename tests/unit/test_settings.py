"""Settings: one default per length, each overridable by its environment variable, and a
bad value refused at start with the variable's name."""

from __future__ import annotations

import pytest

from shared.settings import Settings


def test_the_environment_overrides_a_default_by_its_name() -> None:
    s = Settings.from_env({"DAEMONBUS_WORKER_LEASE_SECONDS": "12.5", "DAEMONBUS_LOG_PAGE": "7",
                           "DAEMONBUS_SCAN_PAGE": "", "OTHER": "1"})
    assert (s.worker_lease_seconds, s.log_page, s.scan_page) == (12.5, 7, Settings().scan_page)
    assert Settings.from_env({}) == Settings()


@pytest.mark.parametrize("name,value", [("DAEMONBUS_LOG_PAGE", "1.5"),
                                        ("DAEMONBUS_LOG_PAGE", "0"),
                                        ("DAEMONBUS_LEADER_LEASE_SECONDS", "-1"),
                                        ("DAEMONBUS_STALL_SECONDS", "soon")])
def test_a_value_that_is_not_a_positive_number_is_refused(name: str, value: str) -> None:
    with pytest.raises(ValueError, match=name):
        Settings.from_env({name: value})


def test_the_leases_that_were_three_lengths_are_one_setting_each() -> None:
    from services.reconciler import worker
    from services.watcher import watcher
    from shared.control import workqueue
    from shared.store import workqueue as redis_workqueue

    s = Settings()
    assert watcher.LEASE_SECONDS == s.leader_lease_seconds
    assert worker.LEASE_SECONDS == workqueue.DEFAULT_LEASE_SECONDS == s.worker_lease_seconds
    assert redis_workqueue.DEFAULT_LEASE_SECONDS == s.worker_lease_seconds
