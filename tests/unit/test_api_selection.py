"""shared.api.selection: field selectors as k8s.io/apimachinery's fields package parses them,
each kind's selectable fields as the API server converts them, and label selectors with every
operator."""

from __future__ import annotations

from typing import Any

import pytest

from shared.api import selection
from shared.api.selection import SelectorError

Obj = dict[str, Any]


def _pod(name: str, node: str = "", phase: str = "Running", **labels: str) -> Obj:
    return {"metadata": {"name": name, "namespace": "kube-system", "labels": labels},
            "spec": {"nodeName": node, "restartPolicy": "Always"},
            "status": {"phase": phase, "podIP": "10.0.0.1"}}


PODS = [_pod("a", "n1", app="x", tier="web"), _pod("b", "n2", app="y"),
        _pod("c", "", "Pending", app="x"), _pod("d", "n1", "Failed")]


def _names(kind: str, objs: list[Obj], labels: str | None = None,
           fields: str | None = None) -> list[str]:
    sel = selection.selection(kind, labels, fields)
    return [o["metadata"]["name"] for o in objs if sel.matches(o)]


@pytest.mark.parametrize(("fields", "names"), [
    ("spec.nodeName=n1", ["a", "d"]),
    ("spec.nodeName==n1", ["a", "d"]),
    ("spec.nodeName!=n1", ["b", "c"]),
    ("spec.nodeName=", ["c"]),
    ("spec.host=n2", ["b"]),  # old clients' name for spec.nodeName
    ("status.phase=Running,spec.nodeName=n1", ["a"]),
    ("status.phase!=Running,status.phase!=Pending", ["d"]),
    ("metadata.name=b", ["b"]),
    ("metadata.namespace=kube-system", ["a", "b", "c", "d"]),
    ("metadata.namespace=default", []),
    ("spec.restartPolicy=Always,spec.hostNetwork=false,status.podIP=10.0.0.1", [
        "a", "b", "c", "d"]),
    ("status.podIPs=", ["a", "b", "c", "d"]),
    ("", ["a", "b", "c", "d"]),
])
def test_pod_field_selectors(fields: str, names: list[str]) -> None:
    assert _names("Pod", PODS, fields=fields) == names


@pytest.mark.parametrize(("labels", "names"), [
    ("app=x", ["a", "c"]), ("app==x", ["a", "c"]), ("app!=x", ["b", "d"]),
    ("app in (x,y)", ["a", "b", "c"]), ("app notin (x)", ["b", "d"]), ("tier", ["a"]),
    ("!tier", ["b", "c", "d"]), ("app=x,!tier", ["c"]), ("", ["a", "b", "c", "d"]),
])
def test_label_selectors_with_every_operator(labels: str, names: list[str]) -> None:
    assert _names("Pod", PODS, labels=labels) == names


def test_labels_and_fields_together() -> None:
    assert _names("Pod", PODS, "app=x", "spec.nodeName=n1") == ["a"]
    assert selection.selection("Pod").everything()
    assert not selection.selection("Pod", "app=x").everything()


def test_event_involved_object_fields() -> None:
    events = [
        {"metadata": {"name": "e1", "namespace": "default"}, "type": "Warning",
         "reason": "FailedDaemonPod", "source": {"component": "daemonset-controller"},
         "involvedObject": {"kind": "DaemonSet", "name": "ds", "namespace": "default",
                            "uid": "u1", "apiVersion": "apps/v1"}},
        {"metadata": {"name": "e2", "namespace": "default"}, "type": "Normal",
         "reason": "SuccessfulCreate", "reportingComponent": "kubelet",
         "involvedObject": {"kind": "Pod", "name": "p", "fieldPath": "spec.containers{c}"}},
    ]
    assert _names("Event", events, fields="involvedObject.kind=DaemonSet") == ["e1"]
    assert _names("Event", events, fields="involvedObject.name=p,type=Normal") == ["e2"]
    assert _names("Event", events, fields="involvedObject.uid=u1") == ["e1"]
    assert _names("Event", events, fields="involvedObject.apiVersion=apps/v1") == ["e1"]
    assert _names("Event", events, fields="involvedObject.fieldPath=spec.containers{c}") == [
        "e2"]
    assert _names("Event", events, fields="source=kubelet") == ["e2"]
    assert _names("Event", events, fields="reason=FailedDaemonPod") == ["e1"]
    assert _names("Event", events, fields="reportingComponent=") == ["e1"]


def test_node_and_namespace_fields() -> None:
    nodes = [{"metadata": {"name": "n1"}, "spec": {"unschedulable": True}},
             {"metadata": {"name": "n2"}}]
    assert _names("Node", nodes, fields="spec.unschedulable=true") == ["n1"]
    assert _names("Node", nodes, fields="spec.unschedulable=false") == ["n2"]
    assert _names("Node", nodes, fields="metadata.name=n2") == ["n2"]
    namespaces = [{"metadata": {"name": "a"}, "status": {"phase": "Active"}},
                  {"metadata": {"name": "b"}, "status": {"phase": "Terminating"}}]
    assert _names("Namespace", namespaces, fields="status.phase=Active") == ["a"]


@pytest.mark.parametrize(("kind", "fields", "message"), [
    ("Pod", "spec.foo=x", "field label not supported: spec.foo"),
    ("Node", "metadata.namespace=x", "field label not supported: metadata.namespace"),
    ("Node", "spec.nodeName=x", "field label not supported: spec.nodeName"),
    ("Event", "involvedObject.bogus=x", "field label not supported: involvedObject.bogus"),
    ("Namespace", "metadata.namespace=x", "field label not supported: metadata.namespace"),
    ("DaemonSet", "spec.nodeName=x",
     '"spec.nodeName" is not a known field selector: only "metadata.name", "metadata.namespace"'),
    ("ControllerRevision", "revision=1",
     '"revision" is not a known field selector: only "metadata.name", "metadata.namespace"'),
])
def test_unsupported_field_labels(kind: str, fields: str, message: str) -> None:
    with pytest.raises(SelectorError) as err:
        selection.field_selector(kind, fields)
    assert str(err.value) == message


def test_daemonsets_and_revisions_select_by_name_and_namespace() -> None:
    ds = [{"metadata": {"name": "a", "namespace": "x"}}, {"metadata": {"name": "b",
                                                                       "namespace": "y"}}]
    assert _names("DaemonSet", ds, fields="metadata.namespace=y") == ["b"]
    assert _names("ControllerRevision", ds, fields="metadata.name!=b") == ["a"]


@pytest.mark.parametrize(("text", "message"), [
    ("spec.nodeName", "invalid selector: 'spec.nodeName'; can't understand 'spec.nodeName'"),
    ("a=b,c", "invalid selector: 'a=b,c'; can't understand 'c'"),
    ("a=b=c", "invalid field selector: unescaped character in value: 61"),
    ("a=b\\x", "invalid field selector: invalid escape sequence: \\x"),
    ("a=b\\", "invalid field selector: invalid escape sequence: \\"),
])
def test_field_selector_syntax_errors(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as err:
        selection.parse_field_selector(text)
    assert str(err.value) == message


def test_field_selector_escapes_terms_order_and_exact_values() -> None:
    sel = selection.parse_field_selector("z!=1,a=x\\,y\\=z\\\\")
    assert [(r.field, r.operator, r.value) for r in sel.requirements] == [
        ("a", "=", "x,y=z\\"), ("z", "!=", "1")]
    assert str(sel) == "a=x\\,y\\=z\\\\,z!=1"
    assert selection.parse_field_selector("a==b").exact("a") == "b"
    assert selection.parse_field_selector("a!=b").exact("a") is None


def test_label_selector_errors_carry_upstreams_message() -> None:
    with pytest.raises(SelectorError, match="unable to parse requirement"):
        selection.label_selector("app in x")
    with pytest.raises(SelectorError):
        selection.selection("Pod", "app=", "spec.bogus=1")
