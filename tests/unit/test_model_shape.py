"""``validation.shape_errors``, the check every reader of the store relies on: what the
controllers and the node agent write passes it (a false alarm would hide their own objects
from every reader), and each wrong JSON type is named with its field."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from services.node_agent import lifecycle
from shared.daemonset import history, podtemplate
from shared.model import defaults, events, validation
from tests.unit import daemonset_fixtures as f

Obj = dict[str, Any]


def _daemonset() -> Obj:
    ds = f.make_ds(strategy=f.rolling(max_unavailable="10%", max_surge=0))
    ds = defaults.default(ds)
    ds["status"] = {"currentNumberScheduled": 3, "desiredNumberScheduled": 3,
                    "numberMisscheduled": 0, "numberReady": 3, "observedGeneration": 2,
                    "collisionCount": 1}
    return ds


def _written_objects() -> list[tuple[str, Obj]]:
    """One object of each kind as daemonbus' own processes write it."""
    ds = _daemonset()
    cfg = lifecycle.AgentConfig()
    pod = podtemplate.new_pod(ds, podtemplate.create_pod_template(ds, "h1"),
                              "node-1", "h1")
    pod["metadata"].update(uid="p1", creationTimestamp="2026-01-01T00:00:00Z")
    bound = lifecycle.pod_step(cfg, pod, True, 1_000.0).update or pod
    running = lifecycle.pod_step(cfg, bound, True, 2_000.0).update or bound
    node = lifecycle.new_node("node-1", {"a": "b"},
                              [{"key": "k", "value": "v", "effect": "NoSchedule"}])
    node = lifecycle.node_step(cfg, node, 1_000.0) or node
    revision = history.new_revision(ds, "h1", 1)
    event = events.event(pod, "Normal", "SuccessfulCreate", "Created pod: x", now=1_000.0,
                         salt="s", component="daemonset-controller")
    return [("DaemonSet", ds), ("Pod", pod), ("Pod", bound), ("Pod", running),
            ("Node", node), ("ControllerRevision", revision), ("Event", event)]


@pytest.mark.parametrize("kind,obj", _written_objects(),
                         ids=["ds", "pod-new", "pod-bound", "pod-running", "node", "revision",
                              "event"])
def test_what_daemonbus_writes_has_the_right_shape(kind: str, obj: Obj) -> None:
    assert validation.shape_errors(kind, obj) == []


@pytest.mark.parametrize("kind,path,value,field", [
    ("Pod", ("status", "conditions"), "Ready", "status.conditions"),
    ("Pod", ("metadata", "labels"), ["a"], "metadata.labels"),
    ("Pod", ("spec", "containers"), "c", "spec.containers"),
    ("Node", ("spec", "taints"), "NoSchedule", "metadata.taints"),  # upstream's path
    ("Node", ("status", "conditions"), {"type": "Ready"}, "status.conditions"),
    ("Node", ("status", "conditions", 0, "lastHeartbeatTime"), 5,
     "status.conditions[0].lastHeartbeatTime"),
    ("Pod", ("status", "podIP"), 1, "status.podIP"),
    ("Pod", ("metadata", "uid"), 7, "metadata.uid"),
    ("Pod", ("metadata", "creationTimestamp"), 1.5, "metadata.creationTimestamp"),
    ("Pod", ("metadata", "name"), 7, "metadata.name"),
    ("DaemonSet", ("spec", "template"), "t", "spec.template"),
    ("DaemonSet", ("status", "numberReady"), "3", "status.numberReady"),
    ("DaemonSet", ("spec", "updateStrategy", "rollingUpdate"), [1], "spec.updateStrategy"),
    ("ControllerRevision", ("revision",), 1.5, "revision"),
    ("Event", ("involvedObject",), "pod", "involvedObject"),
])
def test_each_wrong_type_is_named_with_its_field(kind: str, path: tuple[Any, ...], value: Any,
                                                 field: str) -> None:
    obj = copy.deepcopy(dict(_written_objects())[kind] if kind != "Pod"
                        else _written_objects()[3][1])
    target = obj
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    problems = validation.shape_errors(kind, obj)
    assert problems and problems[0].startswith(field), problems
    assert all("must be of type" in p for p in problems)


def test_a_value_that_is_not_an_object_at_all_is_one_error() -> None:
    assert validation.shape_errors("Pod", ["x"]) == [
        'object: Invalid value: []string{"x"}: must be of type object']


def test_kinds_without_shape_rules_pass() -> None:
    assert validation.shape_errors("Deployment", {"spec": "x"}) == []
