"""PriorityClass validation and the Priority admission plugin's resolution of a new pod's
priority (``shared.model.priority``), in upstream's words."""

from __future__ import annotations

import re
from typing import Any

import pytest

from shared.model import defaults, priority, validation

Obj = dict[str, Any]


def pc(name: str, value: Any = 1000, **fields: Any) -> Obj:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value, **fields}


def test_a_class_is_defaulted_to_preempt_lower_priority() -> None:
    assert defaults.default(pc("high"))["preemptionPolicy"] == "PreemptLowerPriority"
    assert defaults.default(pc("meek", preemptionPolicy="Never"))["preemptionPolicy"] == "Never"


@pytest.mark.parametrize(("obj", "errors"), [
    (pc("high", 1_000_000_000), []),
    (pc("too-high", 1_000_000_001), [
        "value: Forbidden: maximum allowed value of a user defined priority is 1000000000"]),
    (pc("system-node-critical", 2000001000), []),
    (pc("system-node-critical", 7), [
        "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved "
        "for system use only. error: value of system-node-critical PriorityClass must be "
        "2000001000"]),
    (pc("system-node-critical", 2000001000, globalDefault=True), [
        "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved "
        "for system use only. error: globalDefault of system-node-critical PriorityClass "
        "must be false"]),
    (pc("system-mine", 5), [
        "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved "
        "for system use only. error: system-mine is not a known system priority class"]),
    (pc("odd", preemptionPolicy="Sometimes"), [
        'preemptionPolicy: Unsupported value: "Sometimes": supported values: '
        '"PreemptLowerPriority", "Never"']),
    (pc("Bad_Name"), None),
])
def test_validation_in_upstreams_words(obj: Obj, errors: list[str] | None) -> None:
    found = validation.validate(defaults.default(obj))
    if errors is None:
        assert any(e.startswith("metadata.name: Invalid value: \"Bad_Name\"") for e in found)
    else:
        assert found == errors


def test_the_value_and_the_preemption_policy_never_change() -> None:
    old = defaults.default(pc("high", 1000))
    old["metadata"].update(uid="u", resourceVersion="1-0", creationTimestamp="2026-01-01T00:00:00Z")
    new = {**old, "value": 2000, "preemptionPolicy": "Never", "description": "changed"}
    assert validation.validate(new, old) == [
        "value: Forbidden: may not be changed in an update.",
        'preemptionPolicy: Invalid value: "Never": field is immutable']
    assert validation.validate({**old, "description": "only this"}, old) == []


def test_one_global_default() -> None:
    stored = [pc("first", 10, globalDefault=True), pc("other", 20)]
    assert priority.default_conflict(pc("second", 5, globalDefault=True), stored) == \
        "PriorityClass first is already marked as default. Only one default can exist"
    assert priority.default_conflict(pc("first", 10, globalDefault=True), stored) is None
    assert priority.default_conflict(pc("second", 5), stored) is None


def spec(**fields: Any) -> Obj:
    return {"containers": [{"name": "c", "image": "x:1"}], **fields}


CLASSES = {"high": pc("high", 1000, preemptionPolicy="Never"),
           "system-node-critical": {**pc("system-node-critical", 2000001000),
                                    "preemptionPolicy": "PreemptLowerPriority"}}


@pytest.mark.parametrize(("given", "classes", "want"), [
    (spec(priorityClassName="high"), CLASSES, (1000, "Never", "high")),
    (spec(priorityClassName="system-cluster-critical"), {},  # built in, though not stored
     (2000000000, "PreemptLowerPriority", "system-cluster-critical")),
    (spec(priorityClassName="system-node-critical"), CLASSES,
     (2000001000, "PreemptLowerPriority", "system-node-critical")),
    (spec(), CLASSES, (0, "PreemptLowerPriority", None)),
    (spec(), {**CLASSES, "low": pc("low", 5, globalDefault=True, preemptionPolicy="Never"),
              "lower": pc("lower", 3, globalDefault=True, preemptionPolicy="Never")},
     (3, "Never", "lower")),  # (two defaults after a race: the lowest value's)
    (spec(priorityClassName="high", priority=1000), CLASSES, (1000, "Never", "high")),
])
def test_admission_resolves_a_new_pods_priority(given: Obj, classes: dict[str, Obj],
                                                want: tuple[int, str, str | None]) -> None:
    priority.admit(given, classes)
    assert (given["priority"], given["preemptionPolicy"],
            given.get("priorityClassName")) == want


@pytest.mark.parametrize(("given", "message"), [
    (spec(priorityClassName="missing"), "no PriorityClass with name missing was found"),
    (spec(priorityClassName="high", priority=7),
     "the integer value of priority (7) must not be provided in pod spec; priority admission "
     "controller computed 1000 from the given PriorityClass name"),
    (spec(priorityClassName="high", preemptionPolicy="PreemptLowerPriority"),
     "the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod "
     "spec; priority admission controller computed Never from the given PriorityClass name"),
])
def test_admission_refuses_in_the_plugins_words(given: Obj, message: str) -> None:
    with pytest.raises(priority.Forbidden, match=r"^" + re.escape(message) + "$"):
        priority.admit(given, CLASSES)
