"""shared.api.tables: upstream's Table columns and cells per kind (printers.go), the Table
document the API serves for as=Table, and the CLI's get table built from the same columns."""

from __future__ import annotations

from typing import Any

import pytest

from services.cli import printers
from shared.api import tables
from shared.model import kinds, meta

Obj = dict[str, Any]
T0 = "2026-01-01T00:00:00Z"
NOW = meta.parse_time(T0) or 0.0


def _at(seconds: int) -> str:
    return meta.format_time(NOW - seconds)


@pytest.mark.parametrize(("seconds", "text"), [
    (-5, "<invalid>"), (-1, "0s"), (0, "0s"), (5, "5s"), (119, "119s"), (120, "2m"),
    (182, "3m2s"), (599, "9m59s"), (600, "10m"), (3 * 3600 - 1, "179m"), (4 * 3600, "4h"),
    (5 * 3600 + 180, "5h3m"), (47 * 3600, "47h"), (48 * 3600, "2d"), (76 * 3600, "3d4h"),
    (10 * 86400, "10d"), (800 * 86400, "2y70d"), (9 * 365 * 86400, "9y"),
])
def test_ages_read_like_kubectl(seconds: int, text: str) -> None:
    assert tables.human_duration(seconds) == text


def test_age_of_a_missing_timestamp_is_unknown() -> None:
    assert tables.age(None, 0) == "<unknown>"


@pytest.mark.parametrize(("kind", "headers"), [
    ("DaemonSet", "NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE NODE-SELECTOR AGE "
                  "| CONTAINERS IMAGES SELECTOR"),
    ("Pod", "NAME READY STATUS RESTARTS AGE | IP NODE NOMINATED-NODE READINESS-GATES"),
    ("Node", "NAME STATUS ROLES AGE VERSION | INTERNAL-IP EXTERNAL-IP OS-IMAGE KERNEL-VERSION "
             "CONTAINER-RUNTIME"),
    ("Event", "LAST-SEEN TYPE REASON OBJECT | SUBOBJECT SOURCE | MESSAGE | FIRST-SEEN COUNT "
              "NAME"),
    ("Namespace", "NAME STATUS AGE"),
    ("ControllerRevision", "NAME CONTROLLER REVISION AGE"),
])
def test_columns_are_upstreams_with_wide_ones_at_priority_1(kind: str, headers: str) -> None:
    groups, last = [], None
    for c in tables.columns(kind):
        if c.priority != last:
            groups.append([])
            last = c.priority
        groups[-1].append(c.header.replace(" ", "-"))
    assert " | ".join(" ".join(g) for g in groups) == headers
    assert tables.columns(kind)[0].priority == 0


def test_column_definitions_carry_type_format_and_the_schemas_descriptions() -> None:
    defs = [c.definition() for c in tables.columns("DaemonSet")]
    assert defs[0]["name"] == "Name" and defs[0]["format"] == "name"
    assert defs[0]["description"].startswith("Name must be unique within a namespace.")
    assert defs[1] == {"name": "Desired", "type": "integer", "format": "", "priority": 0,
                       "description": defs[1]["description"]}
    assert "nodes that should be running the daemon pod" in defs[1]["description"]
    assert defs[8]["priority"] == 1 and defs[8]["description"] == (
        "Names of each container in the template.")
    for kind in tables.PRINTERS:
        assert all(c.definition()["description"] for c in tables.columns(kind)), kind


def _ds() -> Obj:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "fluentd", "namespace": "kube-system", "creationTimestamp":
                         _at(300), "labels": {"app": "f"}},
            "spec": {"selector": {"matchLabels": {"app": "f"}},
                     "template": {"spec": {"nodeSelector": {"disk": "ssd", "os": "linux"},
                                           "containers": [{"name": "a", "image": "a:1"},
                                                          {"name": "b", "image": "b:2"}]}}},
            "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3,
                       "numberReady": 2, "updatedNumberScheduled": 1, "numberAvailable": 2}}


def test_daemonset_cells() -> None:
    assert tables.cells("DaemonSet", _ds(), NOW) == [
        "fluentd", 3, 3, 2, 1, 2, "disk=ssd,os=linux", "5m", "a,b", "a:1,b:2", "app=f"]
    assert tables.cells("DaemonSet", {"metadata": {"name": "x"}}, NOW)[1:8] == [
        0, 0, 0, 0, 0, "<none>", "<unknown>"]


def _pod(**status: Any) -> Obj:
    return {"metadata": {"name": "p", "creationTimestamp": _at(60)},
            "spec": {"containers": [{"name": "c"}]}, "status": status}


def _cs(**fields: Any) -> Obj:
    return {"name": "c", "ready": False, "restartCount": 0, **fields}


@pytest.mark.parametrize(("pod", "ready", "status", "restarts"), [
    (_pod(phase="Running", containerStatuses=[_cs(restartCount=4, state={
        "waiting": {"reason": "CrashLoopBackOff"}})]), "0/1", "CrashLoopBackOff", "4"),
    (_pod(phase="Running", containerStatuses=[_cs(ready=True, restartCount=2, state={
        "running": {}}, lastState={"terminated": {"finishedAt": _at(120)}})]),
     "1/1", "Running", "2 (2m ago)"),
    (_pod(phase="Running", conditions=[{"type": "Ready", "status": "True"}]), "0/1", "Running",
     "0"),
    (_pod(phase="Failed", containerStatuses=[_cs(state={
        "terminated": {"exitCode": 1, "reason": "Error"}})]), "0/1", "Error", "0"),
    (_pod(phase="Running", containerStatuses=[_cs(state={"terminated": {"exitCode": 137}})]),
     "0/1", "ExitCode:137", "0"),
    (_pod(phase="Running", containerStatuses=[_cs(state={"terminated": {"signal": 9}})]),
     "0/1", "Signal:9", "0"),
    (_pod(), "0/1", "Pending", "0"),
    (_pod(phase="Pending", conditions=[{"type": "PodScheduled", "status": "False",
                                        "reason": "SchedulingGated"}]),
     "0/1", "SchedulingGated", "0"),
])
def test_pod_ready_status_and_restarts(pod: Obj, ready: str, status: str, restarts: str) -> None:
    assert tables.cells("Pod", pod, NOW)[1:5] == [ready, status, restarts, "60s"]


def test_pod_init_containers() -> None:
    pod = _pod(phase="Pending", initContainerStatuses=[
        {"name": "i1", "state": {"terminated": {"exitCode": 0}}},
        {"name": "i2", "state": {"waiting": {"reason": "PodInitializing"}}}])
    pod["spec"]["initContainers"] = [{"name": "i1"}, {"name": "i2"}]
    assert tables.cells("Pod", pod, NOW)[2] == "Init:1/2"
    pod["status"]["initContainerStatuses"][1]["state"] = {"waiting": {"reason": "ErrImagePull"}}
    assert tables.cells("Pod", pod, NOW)[2] == "Init:ErrImagePull"
    pod["spec"]["initContainers"][1]["restartPolicy"] = "Always"  # a sidecar counts in READY
    pod["status"]["initContainerStatuses"][1] = {"name": "i2", "started": True, "ready": True,
                                                 "state": {"running": {}}}
    pod["status"]["containerStatuses"] = [_cs(ready=True, state={"running": {}})]
    assert tables.cells("Pod", pod, NOW)[1:3] == ["2/2", "Pending"]


def test_pod_terminating_and_wide_cells() -> None:
    terminating = _pod(phase="Running")
    terminating["metadata"]["deletionTimestamp"] = T0
    assert tables.cells("Pod", terminating, NOW)[2] == "Terminating"
    assert tables.cells("Pod", _pod(), NOW)[5:] == ["<none>", "<none>", "<none>", "<none>"]
    pod = _pod(phase="Running", podIPs=[{"ip": "10.0.0.5"}], nominatedNodeName="n2",
               conditions=[{"type": "G1", "status": "True"}])
    pod["spec"].update(nodeName="n1", readinessGates=[{"conditionType": "G1"},
                                                      {"conditionType": "G2"}])
    assert tables.cells("Pod", pod, NOW)[5:] == ["10.0.0.5", "n1", "n2", "1/2"]


def test_node_cells() -> None:
    node: Obj = {"metadata": {"name": "n1", "creationTimestamp": _at(7200), "labels": {
        "node-role.kubernetes.io/worker": "", "kubernetes.io/role": "infra"}},
        "spec": {"unschedulable": True},
        "status": {"conditions": [{"type": "Ready", "status": "True"}],
                   "addresses": [{"type": "InternalIP", "address": "10.1.0.1"}],
                   "nodeInfo": {"kubeletVersion": "v1.32.0", "osImage": "Debian"}}}
    assert tables.cells("Node", node, NOW) == [
        "n1", "Ready,SchedulingDisabled", "infra,worker", "120m", "v1.32.0", "10.1.0.1",
        "<none>", "Debian", "<unknown>", "<unknown>"]
    assert tables.cells("Node", {"metadata": {"name": "x"}}, NOW)[1:3] == ["Unknown", "<none>"]


def test_event_cells() -> None:
    ev: Obj = {"metadata": {"name": "ds.1"}, "type": "Normal", "reason": "SuccessfulCreate",
               "involvedObject": {"kind": "DaemonSet", "name": "ds", "fieldPath": "spec"},
               "source": {"component": "daemonset-controller"}, "message": " Created pod \n",
               "firstTimestamp": _at(600), "lastTimestamp": _at(30), "count": 3}
    assert tables.cells("Event", ev, NOW) == [
        "30s", "Normal", "SuccessfulCreate", "daemonset/ds", "spec", "daemonset-controller",
        "Created pod", "10m", 3, "ds.1"]
    newer: Obj = {"metadata": {"name": "e"}, "eventTime": _at(90), "reportingComponent": "c",
                  "reportingInstance": "i", "involvedObject": {"kind": "Node"}}
    cells = tables.cells("Event", newer, NOW)
    assert (cells[0], cells[3], cells[5], cells[7], cells[8]) == ("90s", "node", "c, i", "90s", 1)
    newer["series"] = {"count": 7, "lastObservedTime": _at(5)}
    assert tables.cells("Event", newer, NOW)[0::8] == ["5s", 7]


def test_namespace_and_controller_revision_cells() -> None:
    ns = {"metadata": {"name": "kube-system", "creationTimestamp": _at(10)},
          "status": {"phase": "Active"}}
    assert tables.cells("Namespace", ns, NOW) == ["kube-system", "Active", "10s"]
    cr = {"metadata": {"name": "ds-5d8f", "creationTimestamp": _at(10), "ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "u",
         "controller": True}]}, "revision": 2}
    assert tables.cells("ControllerRevision", cr, NOW) == ["ds-5d8f", "daemonset.apps/ds", 2,
                                                           "10s"]
    assert tables.cells("ControllerRevision", {"metadata": {"name": "x"}}, NOW)[1] == "<none>"


def test_table_document() -> None:
    doc = tables.table("DaemonSet", [_ds()], NOW, list_meta={"resourceVersion": "7-0"})
    assert (doc["kind"], doc["apiVersion"], doc["metadata"]) == (
        "Table", "meta.k8s.io/v1", {"resourceVersion": "7-0"})
    assert [c["name"] for c in doc["columnDefinitions"]][:2] == ["Name", "Desired"]
    (row,) = doc["rows"]
    assert len(row["cells"]) == len(doc["columnDefinitions"])
    assert row["object"] == {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": _ds()["metadata"]}
    assert "conditions" not in row
    assert tables.table("DaemonSet", [_ds()], NOW, include_object="Object")["rows"][0][
        "object"] == _ds()
    assert tables.table("DaemonSet", [_ds()], NOW, include_object="None")["rows"][0][
        "object"] is None
    assert tables.table("DaemonSet", [], NOW, headers=False)["columnDefinitions"] == []
    with pytest.raises(ValueError, match="includeObject: Unsupported value"):
        tables.table("DaemonSet", [], NOW, include_object="All")


def test_completed_pods_carry_upstreams_row_conditions() -> None:
    row = tables.row("Pod", _pod(phase="Succeeded"), NOW)
    assert row["conditions"] == [{"type": "Completed", "status": "True", "reason": "Succeeded",
                                  "message": "The pod has completed successfully."}]
    assert tables.row("Pod", _pod(phase="Failed"), NOW)["conditions"][0]["reason"] == "Failed"


def test_cli_get_table_prints_the_tables_visible_columns() -> None:
    ds = _ds()
    assert printers.get_table(kinds.DAEMONSET, [ds], NOW) == (
        "NAME      DESIRED   CURRENT   READY   UP-TO-DATE   AVAILABLE   NODE SELECTOR       AGE\n"
        "fluentd   3         3         2       1            2           disk=ssd,os=linux   5m\n")
    wide = printers.get_table(kinds.DAEMONSET, [ds], NOW, wide=True, all_namespaces=True,
                              show_kind=True, show_labels=True).splitlines()
    assert wide[0].split() == ["NAMESPACE", "NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE",
                               "AVAILABLE", "NODE", "SELECTOR", "AGE", "CONTAINERS", "IMAGES",
                               "SELECTOR", "LABELS"]
    assert wide[1].split() == ["kube-system", "daemonset.apps/fluentd", "3", "3", "2", "1", "2",
                               "disk=ssd,os=linux", "5m", "a,b", "a:1,b:2", "app=f", "app=f"]
    ev = {"metadata": {"name": "e1"}, "type": "Normal", "reason": "R", "message": "m",
          "involvedObject": {"kind": "Pod", "name": "p"}, "lastTimestamp": _at(3)}
    assert printers.get_table(kinds.EVENT, [ev], NOW).splitlines()[0].split() == [
        "LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
