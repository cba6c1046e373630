"""The Metrics API's pure parts (``shared.api.metrics``): the rate of a window, the
quantities and the window as metrics-server writes them, the usage document an agent serves
and its checks, the objects made of it; the sampler's bookkeeping (``usage.Sampler``) with a
fake clock and fake measurements; discovery of the group."""

from __future__ import annotations

import json
from typing import Any

import pytest

from services.apiserver import auth, discovery
from services.node_agent import usage
from services.node_agent.podstatus import ContainerState
from shared.api import metrics, served, tables

Obj = dict[str, Any]


def test_the_cpu_rate_is_the_time_used_over_the_window_in_nanocores() -> None:
    got = metrics.rate(metrics.Sample(10.0, 1), metrics.Sample(17.5, 2048), 15.0)
    assert got == metrics.Usage(500_000_000, 2048)


def test_no_rate_without_a_window_or_when_the_cpu_time_went_back() -> None:
    assert metrics.rate(metrics.Sample(1.0, 0), metrics.Sample(2.0, 0), 0.0) is None
    assert metrics.rate(metrics.Sample(5.0, 0), metrics.Sample(4.0, 0), 15.0) is None


def test_rates_need_two_samples_and_forget_what_was_not_sampled_again() -> None:
    rates = metrics.Rates()
    window, got = rates.observe(100.0, {"a": metrics.Sample(1.0, 10), "b": metrics.Sample(0, 1)})
    assert (window, got) == (0.0, {})
    window, got = rates.observe(115.0, {"a": metrics.Sample(4.0, 20),
                                        "c": metrics.Sample(9.0, 5)})
    assert window == 15.0
    assert got == {"a": metrics.Usage(200_000_000, 20)}  # c is new: no window of its own yet
    _, got = rates.observe(130.0, {"b": metrics.Sample(3.0, 1)})
    assert got == {}  # b was forgotten when it was not sampled: measured afresh


@pytest.mark.parametrize(("nanocores", "text"), [
    (0, "0"), (12345, "12345n"), (12_345_000, "12345u"), (250_000_000, "250m"),
    (1_000_000_000, "1"), (1_500_000_001, "1500000001n")])
def test_cpu_is_written_as_a_quantity_scaled_to_nano(nanocores: int, text: str) -> None:
    assert metrics.cpu_text(nanocores) == text


@pytest.mark.parametrize(("size", "text"), [
    (0, "0"), (1000, "1k"), (6789 * 1024, "6789Ki"), (64 << 20, "64Mi"), (1025, "1025")])
def test_memory_is_written_as_a_binary_quantity(size: int, text: str) -> None:
    assert metrics.memory_text(size) == text


@pytest.mark.parametrize(("seconds", "text"), [
    (15.0, "15s"), (15.0034, "15.003s"), (0.5, "500ms"), (2.25, "2.25s"),
    (60.5, "1m0.5s"), (3600, "1h0m0s"), (0, "0s")])
def test_the_window_is_written_as_go_prints_a_duration(seconds: float, text: str) -> None:
    assert metrics.duration_text(seconds) == text


def _usage() -> metrics.NodeUsage:
    return metrics.NodeUsage(1_700_000_000.4, 15.012, metrics.Usage(1_234_567, 3 << 30), (
        metrics.PodUsage("default", "web-x", "u1", (
            ("app", metrics.Usage(250_000_000, 64 << 20)),
            ("side", metrics.Usage(1000, 1 << 20)))),))


def test_the_document_reads_back_as_written() -> None:
    assert metrics.parse_document(metrics.document(_usage())) == _usage()


def _doc(**changes: Any) -> bytes:
    doc = json.loads(metrics.document(_usage()))
    doc.update(changes)
    return json.dumps(doc).encode()


@pytest.mark.parametrize("raw", [
    b"not json", b"[]", _doc(version=2), _doc(window=0), _doc(timestamp="now"),
    _doc(usage={"cpu": -1, "memory": 0}), _doc(usage={"cpu": True, "memory": 0}),
    _doc(pods={}), _doc(pods=[{"namespace": "default", "name": "", "uid": "u",
                               "containers": []}]),
    _doc(pods=[{"namespace": "default", "name": "p", "uid": "u",
                "containers": [{"name": "c", "cpu": 1.5, "memory": 0}]}]),
    _doc(pods=[{"namespace": "default", "name": "p", "uid": "u", "containers": ["c"]}])])
def test_a_document_that_is_not_one_is_refused(raw: bytes) -> None:
    with pytest.raises(metrics.MetricsError):
        metrics.parse_document(raw)


def test_node_and_pod_metrics_are_metrics_servers_objects() -> None:
    u = _usage()
    node = {"metadata": {"name": "n1", "labels": {"disk": "ssd"}, "uid": "x"}}
    assert metrics.node_metrics(node, u, 1_700_000_100.0) == {
        "kind": "NodeMetrics", "apiVersion": "metrics.k8s.io/v1beta1",
        "metadata": {"name": "n1", "creationTimestamp": "2023-11-14T22:15:00Z",
                     "labels": {"disk": "ssd"}},
        "timestamp": "2023-11-14T22:13:20Z", "window": "15.012s",
        "usage": {"cpu": "1234567n", "memory": "3Gi"}}
    assert metrics.node_metrics(node, metrics.NodeUsage(1.0, 1.0, None, ()), 2.0) is None
    pod = {"metadata": {"name": "web-x", "namespace": "default", "uid": "u1"}}
    got = metrics.pod_metrics(pod, u.pods[0], u, 1_700_000_100.0)
    assert got["metadata"] == {"name": "web-x", "namespace": "default",
                               "creationTimestamp": "2023-11-14T22:15:00Z"}
    assert got["containers"] == [{"name": "app", "usage": {"cpu": "250m", "memory": "64Mi"}},
                                 {"name": "side", "usage": {"cpu": "1u", "memory": "1Mi"}}]
    assert metrics.not_found("PodMetrics", "default/web-x") == \
        'podmetrics.metrics.k8s.io "default/web-x" not found'


def test_a_pod_metrics_table_row_sums_its_containers() -> None:
    u = _usage()
    pod = metrics.pod_metrics({"metadata": {"name": "web-x", "namespace": "default"}},
                              u.pods[0], u, 0.0)
    assert tables.cells("PodMetrics", pod, 0.0) == ["web-x", "250001u", "65Mi", "15.012s"]
    assert [c.name for c in tables.columns("NodeMetrics")] == ["Name", "cpu", "memory",
                                                               "Window"]


def test_discovery_serves_the_metrics_group_in_v1beta1_read_only() -> None:
    groups = {g["name"]: g["preferredVersion"]["groupVersion"]
              for g in discovery.api_group_list()["groups"]}
    assert groups["metrics.k8s.io"] == "metrics.k8s.io/v1beta1"
    doc = discovery.resource_list("metrics.k8s.io/v1beta1")
    assert doc is not None
    assert [(r["name"], r["kind"], r["namespaced"], r["verbs"]) for r in doc["resources"]] == [
        ("nodes", "NodeMetrics", False, ["get", "list"]),
        ("pods", "PodMetrics", True, ["get", "list"])]


class _Runtime:
    """Measures each container as given (by container id)."""

    def __init__(self) -> None:
        self.samples: dict[str, metrics.Sample] = {}

    def usage(self, containers: list[ContainerState]) -> dict[str, metrics.Sample]:
        return {c.container_id: self.samples[c.container_id] for c in containers
                if c.container_id in self.samples}


def test_the_sampler_serves_the_last_window_of_what_runs() -> None:
    rt = _Runtime()
    now = [100.0]
    node_cpu = [50.0]
    c = ContainerState("app", pid=7, container_id="process://7")
    running: list[tuple[Obj, list[ContainerState]]] = [
        ({"namespace": "default", "name": "p", "uid": "u"}, [c])]
    s = usage.Sampler(rt, lambda: running, 15.0, clock=lambda: now[0],  # type: ignore[arg-type]
                      measure_node=lambda: metrics.Sample(node_cpu[0], 1 << 30))
    rt.samples["process://7"] = metrics.Sample(1.0, 1 << 20)
    s.sample()
    assert s.document() is None  # one sample: no window yet
    now[0], node_cpu[0] = 110.0, 60.0
    rt.samples["process://7"] = metrics.Sample(6.0, 2 << 20)
    s.sample()
    doc = s.document()
    assert doc is not None
    got = metrics.parse_document(doc)
    assert (got.timestamp, got.window) == (110.0, 10.0)
    assert got.node == metrics.Usage(1_000_000_000, 1 << 30)
    assert got.pods == (metrics.PodUsage("default", "p", "u", (
        ("app", metrics.Usage(500_000_000, 2 << 20)),)),)
    # restarted: another container id, measured afresh (no rate across two runs)
    c.container_id = "process://8"
    rt.samples["process://8"] = metrics.Sample(0.5, 1 << 20)
    now[0] = 120.0
    s.sample()
    doc = s.document()
    assert doc is not None and metrics.parse_document(doc).pods == ()



def test_every_role_reads_metrics_and_none_but_admin_may_write_them() -> None:
    name = served.rbac_name("metrics.k8s.io", "pods")
    assert name == "pods.metrics.k8s.io" and served.rbac_name("", "pods") == "pods"
    for role in ("view", "edit", "admin"):
        assert auth.authorize(auth.User("u", role), "list", name, True)
    assert not auth.authorize(auth.User("u", "edit"), "create", name, True)
    assert auth.authorize(auth.User("u", "edit"), "create", "pods", True)
