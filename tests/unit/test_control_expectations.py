"""ControllerExpectations (spec §g.1) with an injected clock."""

from __future__ import annotations

from shared.control import expectations as exp
from shared.control.clock import FakeClock


def make() -> tuple[exp.ControllerExpectations, FakeClock]:
    clock = FakeClock()
    return exp.ControllerExpectations(clock), clock


def test_no_entry_is_satisfied() -> None:
    e, _ = make()
    assert e.get("ns/ds") is None
    assert e.satisfied("ns/ds")


def test_pending_creates_are_not_satisfied_until_observed() -> None:
    e, _ = make()
    e.set("ns/ds", 2, 0)
    assert not e.satisfied("ns/ds")
    e.creation_observed("ns/ds")
    assert not e.satisfied("ns/ds")
    e.creation_observed("ns/ds")
    assert e.satisfied("ns/ds")


def test_pending_deletes_are_not_satisfied_until_observed() -> None:
    e, _ = make()
    e.set("ns/ds", 0, 1)
    assert not e.satisfied("ns/ds")
    e.deletion_observed("ns/ds")
    assert e.satisfied("ns/ds")


def test_counters_may_go_negative_and_stay_fulfilled() -> None:
    e, _ = make()
    e.set("ns/ds", 1, 0)
    e.lower("ns/ds", 3, 2)
    entry = e.get("ns/ds")
    assert entry is not None and (entry.add, entry.delete) == (-2, -2)
    assert entry.fulfilled()


def test_lower_without_entry_is_a_noop() -> None:
    e, _ = make()
    e.lower("ns/ds", 1, 1)
    e.creation_observed("ns/ds")
    assert e.get("ns/ds") is None


def test_set_replaces_the_entry_and_restamps_it() -> None:
    e, clock = make()
    e.set("ns/ds", 5, 5)
    clock.advance(100)
    e.set("ns/ds", 1, 0)
    assert e.get("ns/ds") == exp.Expectation(1, 0, clock.now())


def test_lower_keeps_the_timestamp() -> None:
    e, clock = make()
    e.set("ns/ds", 5, 0)
    stamp = clock.now()
    clock.advance(10)
    e.lower("ns/ds", 1, 0)
    entry = e.get("ns/ds")
    assert entry is not None and entry.timestamp == stamp


def test_expectations_expire_after_five_minutes() -> None:
    e, clock = make()
    e.set("ns/ds", 1, 0)
    clock.advance(300)
    assert not e.satisfied("ns/ds")  # exactly 5 minutes: not yet expired
    clock.advance(0.001)
    assert e.satisfied("ns/ds")
    entry = e.get("ns/ds")
    assert entry is not None and entry.add == 1  # expiry does not change the entry


def test_explicit_now_overrides_the_clock() -> None:
    e, _ = make()
    e.set("ns/ds", 1, 0, now=1000.0)
    assert e.satisfied("ns/ds", now=1300.5)
    assert not e.satisfied("ns/ds", now=1299.0)


def test_observe_lowers_many_entries_at_once() -> None:
    e, _ = make()
    e.set("a/x", 2, 1)
    e.set("b/y", 1, 0)
    e.observe([("a/x", 1, 0), ("b/y", 1, 0), ("a/x", 1, 1), ("c/missing", 1, 1)])
    assert e.satisfied("a/x") and e.satisfied("b/y")
    assert e.get("c/missing") is None


def test_delete_removes_the_entry() -> None:
    e, _ = make()
    e.set("ns/ds", 1, 0)
    e.delete("ns/ds")
    assert e.get("ns/ds") is None and e.satisfied("ns/ds")
    e.delete("ns/ds")  # idempotent


def test_pure_satisfied_rules() -> None:
    assert exp.satisfied(None, 0.0)
    assert exp.satisfied(exp.Expectation(0, 0, 0.0), 0.0)
    assert not exp.satisfied(exp.Expectation(1, 0, 0.0), 300.0)
    assert exp.satisfied(exp.Expectation(1, 0, 0.0), 300.5)
    assert exp.lowered(exp.Expectation(3, 2, 7.0), 1, 2) == exp.Expectation(2, 0, 7.0)
