"""What a user's update may change in a Pod's spec (``ValidatePodUpdate``): images,
activeDeadlineSeconds (set or lowered), tolerations (only added), scheduling gates (only
removed); anything else is Forbidden with upstream's message and a diff."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from shared.api import writes
from shared.model import defaults, errors, podupdate, validation

Obj = dict[str, Any]
FORBIDDEN = ("spec: Forbidden: pod updates may not change fields other than "
             "`spec.containers[*].image`,`spec.initContainers[*].image`,"
             "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing "
             "tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it "
             "was previously negative)\n")


def stored_pod(**spec: Any) -> Obj:
    pod = writes.prepare_create({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "agent:1"}],
                 "tolerations": [{"key": "a", "operator": "Exists", "effect": "NoExecute",
                                  "tolerationSeconds": 30}], **spec}}, 0.0)
    pod["metadata"]["resourceVersion"] = "5-0"
    return pod


def update_errors(change: Callable[[Obj], Any], **spec: Any) -> list[str]:
    old = stored_pod(**spec)
    new = copy.deepcopy(old)
    change(new["spec"])
    try:
        writes.update(new, old)
    except errors.InvalidError as err:
        return err.causes
    return []


@pytest.mark.parametrize("change", [
    lambda s: s["containers"][0].update(image="agent:2"),
    lambda s: s.update(activeDeadlineSeconds=60),
    lambda s: s["tolerations"].append({"key": "b", "operator": "Exists"}),
    lambda s: s["tolerations"][0].update(tolerationSeconds=5),
    lambda s: s.update(terminationGracePeriodSeconds=1),
    lambda s: s["containers"][0].update(image="agent:1"),  # no change at all
], ids=["image", "deadline-set", "toleration-added", "toleration-seconds", "grace-to-1",
        "none"])
def test_a_pod_update_may_change_what_upstream_allows_and_nothing_else(
        change: Callable[[Obj], Any]) -> None:
    assert update_errors(change, terminationGracePeriodSeconds=-1) == []

    def and_move(spec: Obj) -> None:
        change(spec)
        spec["nodeName"] = "node-2"

    [problem] = update_errors(and_move, terminationGracePeriodSeconds=-1)
    changed = [line for line in problem.splitlines() if line.startswith(("-", "+"))]
    assert changed == ['-  "nodeName": "node-1",', '+  "nodeName": "node-2",']


def test_a_pod_update_may_not_move_the_pod_to_another_node() -> None:
    [problem] = update_errors(lambda s: s.update(nodeName="node-2"))
    assert problem.startswith(FORBIDDEN)
    assert '-  "nodeName": "node-1",' in problem and '+  "nodeName": "node-2",' in problem


@pytest.mark.parametrize(("change", "spec", "expected"), [
    (lambda s: s["containers"].append({"name": "d", "image": "x"}), {},
     "spec.containers: Forbidden: pod updates may not add or remove containers"),
    (lambda s: s["containers"][0].update(image=" agent:2"), {},
     'spec.containers[0].image: Invalid value: " agent:2": must not have leading or trailing '
     "whitespace"),
    (lambda s: s.update(activeDeadlineSeconds=90), {"activeDeadlineSeconds": 60},
     "spec.activeDeadlineSeconds: Invalid value: 90: must be less than or equal to previous "
     "value"),
    (lambda s: s.pop("activeDeadlineSeconds"), {"activeDeadlineSeconds": 60},
     "spec.activeDeadlineSeconds: Invalid value: null: must not update from a positive "
     "integer to nil value"),
    (lambda s: s.update(tolerations=[]), {},
     "spec.tolerations: Forbidden: existing toleration can not be modified except its "
     "tolerationSeconds"),
    (lambda s: s.update(schedulingGates=[{"name": "a"}, {"name": "b"}]),
     {"schedulingGates": [{"name": "a"}]},
     "spec.schedulingGates[1].name: Forbidden: only deletion is allowed, but found new "
     "scheduling gate 'b'"),
], ids=["containers-added", "image-spaces", "deadline-raised", "deadline-unset",
        "toleration-removed", "gate-added"])
def test_a_pod_update_is_refused_as_upstream_refuses_it(
        change: Callable[[Obj], Any], spec: Obj, expected: str) -> None:
    assert update_errors(change, **spec) == [expected]


def test_scheduling_gates_may_be_removed_and_a_gated_pod_gain_node_selector_entries() -> None:
    gated = {"schedulingGates": [{"name": "a"}], "nodeSelector": {"zone": "a"}}
    assert update_errors(lambda s: s.pop("schedulingGates"), **gated) == []
    assert update_errors(lambda s: s["nodeSelector"].update(disk="ssd"), **gated) == []
    assert update_errors(lambda s: s["nodeSelector"].update(zone="b"), **gated) == [
        'spec.nodeSelector: Invalid value: map[string]string{"zone":"b"}: only additions to '
        "spec.nodeSelector are allowed (no mutations or deletions)"]


def test_only_an_update_is_checked_not_a_new_pod_nor_the_node_agents_binding() -> None:
    pod = stored_pod()
    assert validation.validate_pod(pod) == []
    moved = copy.deepcopy(pod)
    moved["spec"]["nodeName"] = "node-2"
    assert validation.validate_pod(moved) == []  # as created
    bound = writes.system_status({"spec": {"nodeName": "node-2"}, "status": {}}, pod)
    assert bound.obj["spec"]["nodeName"] == "node-2"
    assert validation.validate_pod(moved, pod) != []


# ---- ephemeral containers ------------------------------------------------------------------

EPHEMERAL = "spec.ephemeralContainers: Forbidden: existing ephemeral containers "
DEBUGGER = {"name": "debugger", "image": "busybox:1", "targetContainerName": "c"}


def debugged_pod(*ephemeral: Obj) -> Obj:
    """A stored pod with the ephemeral containers given, defaulted (as the subresource
    stores them: a pod may not be created with any)."""
    pod = stored_pod()
    pod["spec"]["ephemeralContainers"] = [defaults.default_container(e) for e in ephemeral]
    return pod


def ephemeral_errors(old: Obj, new_ephemeral: list[Any]) -> list[str]:
    new = copy.deepcopy(old["spec"])
    new["ephemeralContainers"] = new_ephemeral
    errs: list[str] = []
    podupdate.validate_ephemeral_update(new, old["spec"], errs)
    return errs


def test_ephemeral_containers_may_be_added_in_any_order_as_given_or_defaulted() -> None:
    old = debugged_pod(DEBUGGER, {"name": "other", "image": "busybox:1"})
    kept = copy.deepcopy(old["spec"]["ephemeralContainers"])
    added = {"name": "third", "image": "busybox:1"}
    assert ephemeral_errors(old, [added, *reversed(kept)]) == []
    assert ephemeral_errors(old, [dict(DEBUGGER), {"name": "other", "image": "busybox:1"}]) \
        == []  # compared defaulted
    assert ephemeral_errors(debugged_pod(), [added]) == []


def test_an_ephemeral_container_may_not_be_removed() -> None:
    old = debugged_pod(DEBUGGER, {"name": "other", "image": "busybox:1"})
    assert ephemeral_errors(old, [old["spec"]["ephemeralContainers"][1]]) == [
        EPHEMERAL + '"debugger" may not be removed\n']
    assert ephemeral_errors(old, []) == [EPHEMERAL + '"debugger" may not be removed\n',
                                         EPHEMERAL + '"other" may not be removed\n']


def test_an_ephemeral_container_may_not_be_changed_and_the_error_shows_how() -> None:
    old = debugged_pod(DEBUGGER)
    [problem] = ephemeral_errors(old, [{**DEBUGGER, "image": "busybox:2"}])
    assert problem.startswith(EPHEMERAL + '"debugger" may not be changed\n')
    changed = [line for line in problem.splitlines() if line.startswith(("-", "+"))]
    assert changed == ['-  "image": "busybox:1",', '+  "image": "busybox:2",']


def test_a_pod_update_may_not_change_its_ephemeral_containers() -> None:
    old = debugged_pod(DEBUGGER)
    kept = old["spec"]["ephemeralContainers"]
    for change, shown in (([], '+  "ephemeralContainers": [],'),
                          ([*kept, {"name": "e", "image": "x:1"}], '+      "name": "e",'),
                          ([{**kept[0], "stdin": True}], '+      "stdin": true,')):
        new = copy.deepcopy(old)
        new["spec"]["ephemeralContainers"] = change
        with pytest.raises(errors.InvalidError) as err:
            writes.update(new, old)
        [problem] = err.value.causes
        assert problem.startswith(FORBIDDEN)
        assert shown in problem.splitlines()
    same = copy.deepcopy(old)
    same["spec"]["containers"][0]["image"] = "agent:2"
    assert writes.update(same, old).obj["spec"]["ephemeralContainers"] == \
        old["spec"]["ephemeralContainers"]


def test_the_subresource_takes_only_the_ephemeral_containers_of_its_request() -> None:
    """``writes.ephemeral_update``: the stored pod with the request's ephemeral containers,
    defaulted; what else the request changes is not taken; a stale resourceVersion is a
    Conflict, a field an ephemeral container may not set Invalid; a pod created with one is
    refused."""
    old = stored_pod()
    new = copy.deepcopy(old)
    new["metadata"]["labels"] = {"changed": "yes"}
    new["spec"]["containers"][0]["image"] = "agent:2"
    new["spec"]["ephemeralContainers"] = [dict(DEBUGGER)]
    write = writes.ephemeral_update(new, old)
    assert write.obj["spec"]["ephemeralContainers"] == [defaults.default_container(DEBUGGER)]
    assert write.obj["metadata"] == old["metadata"]
    assert write.obj["spec"]["containers"] == old["spec"]["containers"]
    assert write.expected == "5-0"
    stale = {**new, "metadata": {**new["metadata"], "resourceVersion": "4-0"}}
    with pytest.raises(errors.ConflictError):
        writes.ephemeral_update(stale, old)
    with pytest.raises(errors.InvalidError) as err:
        writes.ephemeral_update({**new, "spec": {**new["spec"], "ephemeralContainers": [
            {**DEBUGGER, "ports": [{"containerPort": 80}]}]}}, old)
    assert err.value.causes == ["spec.ephemeralContainers[0].ports: Forbidden: cannot be set "
                                "for an Ephemeral Container"]
    with pytest.raises(errors.InvalidError) as err:
        writes.create({**old, "metadata": {"name": "q"}, "spec": new["spec"]}, 0.0)
    assert err.value.causes == ["spec.ephemeralContainers: Forbidden: cannot be set on create"]
