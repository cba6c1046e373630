"""PriorityClasses through the real kubectl against a live stack: the built-in classes the
API server writes, ``kubectl create priorityclass`` (a protobuf body), upstream's table and
refusals (one global default, a value that never changes, a built-in class that cannot be
deleted), and the Priority admission plugin's resolution of a pod's priority, for a pod
created through the API and for a DaemonSet's pods, whose creates a missing class refuses."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.integration import apiserver_kit
from tests.integration.apiserver_kit import ApiServer
from tests.integration.stack import Stack, wait_for


@pytest.fixture
def api(stack: Stack, tmp_path: Path) -> ApiServer:
    return apiserver_kit.in_front(stack, tmp_path, nodes=2)


def rows(api: ApiServer, *args: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split() for line in api.kubectl(*args).stdout.splitlines()}


def test_the_built_in_classes_and_kubectl_create_priorityclass(api: ApiServer) -> None:
    def listed() -> dict[str, list[str]] | None:
        found = rows(api, "get", "pc")
        return found if "system-node-critical" in found else None

    found = wait_for(listed, timeout=30, what="the built-in classes written")
    assert found["NAME"] == ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"]
    assert found["system-node-critical"][1:3] + found["system-node-critical"][4:] == [
        "2000001000", "false", "PreemptLowerPriority"]
    assert found["system-cluster-critical"][1] == "2000000000"

    assert api.kubectl("create", "priorityclass", "agents", "--value=1000",
                       "--description=node agents", "--preemption-policy=Never").stdout == \
        "priorityclass.scheduling.k8s.io/agents created\n"
    pc = api.json("get", "priorityclass", "agents")
    assert (pc["value"], pc["description"], pc["preemptionPolicy"], pc.get("globalDefault")) \
        == (1000, "node agents", "Never", None)

    api.kubectl("create", "priorityclass", "fallback", "--value=5", "--global-default")
    second = api.kubectl("create", "priorityclass", "another", "--value=6",
                         "--global-default", check=False)
    assert second.returncode == 1
    assert second.stderr == (
        'error: failed to create priorityclass: priorityclasses.scheduling.k8s.io "another" '
        "is forbidden: PriorityClass fallback is already marked as default. Only one default "
        "can exist\n")
    changed = api.kubectl("patch", "pc", "agents", "-p", '{"value": 5}', check=False)
    assert changed.returncode == 1
    assert 'The PriorityClass "agents" is invalid: value: Forbidden: may not be changed in ' \
        "an update." in changed.stderr
    kept = api.kubectl("delete", "pc", "system-node-critical", check=False)
    assert kept.stderr == (
        'Error from server (Forbidden): priorityclasses.scheduling.k8s.io '
        '"system-node-critical" is forbidden: this is a system priority class and cannot be '
        "deleted\n")
    reserved = api.kubectl("create", "priorityclass", "system-mine", "--value=5", check=False)
    assert "system-mine is not a known system priority class" in reserved.stderr


def pod(name: str, **spec: object) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": name, "namespace": "default"},
                       "spec": {"containers": [{"name": "c", "image": "agent:1"}], **spec}})


def test_a_pods_priority_is_its_classs_or_the_global_defaults(api: ApiServer) -> None:
    api.kubectl("create", "priorityclass", "agents", "--value=1000",
                "--preemption-policy=Never")
    api.kubectl("apply", "-f", "-", input=pod("named", priorityClassName="agents"))
    spec = api.json("get", "pod", "named")["spec"]
    assert (spec["priority"], spec["preemptionPolicy"]) == (1000, "Never")

    api.kubectl("apply", "-f", "-", input=pod("plain"))
    assert api.json("get", "pod", "plain")["spec"]["priority"] == 0
    api.kubectl("create", "priorityclass", "fallback", "--value=7", "--global-default")
    api.kubectl("apply", "-f", "-", input=pod("defaulted"))
    spec = api.json("get", "pod", "defaulted")["spec"]
    assert (spec["priorityClassName"], spec["priority"]) == ("fallback", 7)

    missing = api.kubectl("apply", "-f", "-", input=pod("lost", priorityClassName="gone"),
                          check=False)
    assert missing.returncode == 1
    assert missing.stderr == (
        'Error from server (Forbidden): error when creating "STDIN": pods "lost" is '
        "forbidden: no PriorityClass with name gone was found\n")
    given = api.kubectl("apply", "-f", "-", input=pod("pinned", priorityClassName="agents",
                                                      priority=3), check=False)
    assert "the integer value of priority (3) must not be provided in pod spec; priority " \
        "admission controller computed 1000 from the given PriorityClass name" in given.stderr


def daemonset(name: str, class_name: str) -> str:
    return json.dumps({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {
                     "priorityClassName": class_name,
                     "containers": [{"name": "c", "image": "agent:1"}]}}}})


def test_a_daemonsets_pods_are_admitted_with_their_class(api: ApiServer) -> None:
    api.kubectl("create", "priorityclass", "agents", "--value=1000")
    api.kubectl("apply", "-f", "-", input=daemonset("kept", "agents"))
    api.kubectl("apply", "-f", "-", input=daemonset("refused", "gone"))
    api.kubectl("rollout", "status", "ds/kept", "--timeout=60s")
    pods = api.json("get", "pods", "-l", "app=kept")["items"]
    assert [(p["spec"]["priority"], p["spec"]["preemptionPolicy"]) for p in pods] == [
        (1000, "PreemptLowerPriority")] * 2

    def refused() -> list[dict[str, Any]]:
        return [e for e in api.json("get", "events")["items"]
                if e["reason"] == "FailedCreate" and e["involvedObject"]["name"] == "refused"]

    # each retry (with backoff) counts on the one Event, as upstream's recorder counts it
    said = wait_for(lambda: (evs := refused()) and evs[0].get("count", 1) >= 3 and evs,
                    timeout=30, what="the refused creates' FailedCreate Event, counted")
    assert len(said) == 1 and said[0]["message"] == (
        'Error creating: pods "refused-" is forbidden: no PriorityClass with name gone was '
        "found")
    described = api.kubectl("describe", "ds", "refused").stdout
    assert re.search(r"Warning\s+FailedCreate\s+\S+ \(x\d+ over \S+\)\s+daemonset-controller",
                     described), described
    assert api.json("get", "pods", "-l", "app=refused")["items"] == []

    # the class made: the next sync creates the pods
    api.kubectl("create", "priorityclass", "gone", "--value=10")
    api.kubectl("rollout", "status", "ds/refused", "--timeout=60s")
    assert {p["spec"]["priority"] for p in
            api.json("get", "pods", "-l", "app=refused")["items"]} == {10}
