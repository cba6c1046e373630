"""Services: upstream's defaults and validation messages, the registry's allocation of
cluster IPs and node ports (and what an update keeps or drops of them), and the table's
columns."""

from __future__ import annotations

import random
from typing import Any

import pytest

from services.apiserver import protobuf
from shared.api import serviceips, tables, writes
from shared.model import defaults, errors, validation


def service(name: str = "web", **spec: Any) -> dict[str, Any]:
    spec.setdefault("ports", [{"port": 80}])
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def created(obj: dict[str, Any], ips: set[str] | None = None, ports: set[int] | None = None,
            seed: int = 1) -> dict[str, Any]:
    """What the API server stores of ``obj``: defaulted, allocated, validated."""
    def allocate(svc: dict[str, Any], old: dict[str, Any] | None) -> None:
        serviceips.allocate(svc, old, ips or set(), ports or set(), random.Random(seed))
    return writes.prepare_create(obj, 1_700_000_000.0, allocate=allocate)


def updated(new: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
    def allocate(svc: dict[str, Any], before: dict[str, Any] | None) -> None:
        serviceips.allocate(svc, before, set(), set(), random.Random(2))
    return writes.prepare_update(new, old, allocate)


def test_defaults_as_set_defaults_service() -> None:
    got = defaults.default(service(ports=[{"port": 80}, {"port": 53, "protocol": "UDP",
                                                         "targetPort": "dns"}]))
    spec = got["spec"]
    assert spec["type"] == "ClusterIP" and spec["sessionAffinity"] == "None"
    assert spec["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 80},
                             {"port": 53, "protocol": "UDP", "targetPort": "dns"}]
    assert spec["internalTrafficPolicy"] == "Cluster"
    assert "externalTrafficPolicy" not in spec
    lb = defaults.default(service(type="LoadBalancer", sessionAffinity="ClientIP"))["spec"]
    assert lb["externalTrafficPolicy"] == "Cluster"
    assert lb["allocateLoadBalancerNodePorts"] is True
    assert lb["sessionAffinityConfig"] == {"clientIP": {"timeoutSeconds": 10800}}


def test_a_new_service_gets_a_free_cluster_ip_of_the_range_and_one_family() -> None:
    got = created(service())
    spec = got["spec"]
    assert spec["clusterIPs"] == [spec["clusterIP"]]
    assert serviceips.ipaddress.ip_address(spec["clusterIP"]) in serviceips.SERVICE_RANGE
    assert spec["clusterIP"] not in ("10.96.0.0", "10.96.0.1")
    assert (spec["ipFamilies"], spec["ipFamilyPolicy"]) == (["IPv4"], "SingleStack")
    assert got["status"] == {"loadBalancer": {}}
    # never one another Service holds
    again = created(service("other"), ips={spec["clusterIP"]})
    assert again["spec"]["clusterIP"] != spec["clusterIP"]
    headless = created(service(clusterIP="None"))["spec"]
    assert (headless["clusterIPs"], headless["ipFamilies"]) == (["None"], ["IPv4"])


def test_node_ports_are_allocated_for_node_port_and_load_balancer_services() -> None:
    np = created(service(type="NodePort", ports=[{"name": "a", "port": 80},
                                                 {"name": "b", "port": 81, "nodePort": 30001}]),
                 ports={30002})["spec"]["ports"]
    assert np[1]["nodePort"] == 30001
    assert np[0]["nodePort"] in serviceips.NODE_PORTS and np[0]["nodePort"] not in (30001,
                                                                                  30002)
    local = created(service(type="LoadBalancer", externalTrafficPolicy="Local"))["spec"]
    assert local["healthCheckNodePort"] in serviceips.NODE_PORTS
    assert local["ports"][0]["nodePort"] != local["healthCheckNodePort"]
    assert "nodePort" not in created(service())["spec"]["ports"][0]


@pytest.mark.parametrize(("spec", "taken_ips", "taken_ports", "cause"), [
    ({"clusterIP": "10.96.5.5"}, {"10.96.5.5"}, set(),
     'spec.clusterIPs: Invalid value: []string{"10.96.5.5"}: failed to allocate IP 10.96.5.5: '
     "provided IP is already allocated"),
    ({"clusterIP": "192.168.1.1"}, set(), set(),
     'spec.clusterIPs: Invalid value: []string{"192.168.1.1"}: failed to allocate IP '
     "192.168.1.1: the provided IP (192.168.1.1) is not in the valid range. The range of "
     "valid IPs is 10.96.0.0/12"),
    ({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30500}]}, set(), {30500},
     "spec.ports[0].nodePort: Invalid value: 30500: provided port is already allocated"),
    ({"type": "NodePort", "ports": [{"port": 80, "nodePort": 8080}]}, set(), set(),
     "spec.ports[0].nodePort: Invalid value: 8080: provided port is not in the valid range. "
     "The range of valid ports is 30000-32767"),
    ({"ipFamilyPolicy": "RequireDualStack"}, set(), set(),
     'spec.ipFamilyPolicy: Invalid value: "RequireDualStack": this cluster is not configured '
     "for dual-stack services"),
])
def test_the_allocators_refusals(spec: dict[str, Any], taken_ips: set[str],
                                 taken_ports: set[int], cause: str) -> None:
    with pytest.raises(errors.InvalidError) as err:
        created(service(**spec), taken_ips, taken_ports)
    assert err.value.causes == [cause]


def test_validation_as_upstream_validates_a_service() -> None:
    def causes(**spec: Any) -> list[str]:
        return validation.validate(defaults.default(service(**spec)))
    assert causes(ports=[]) == ["spec.ports: Required value"]
    assert causes(clusterIP="None", clusterIPs=["None"], ports=[]) == []
    assert causes(ports=[{"port": 80}, {"port": 80, "name": "b"}]) == [
        "spec.ports[0].name: Required value",
        'spec.ports[1]: Duplicate value: core.ServicePort{Name:"", Protocol:"TCP", '
        "AppProtocol:(*string)(nil), Port:80, TargetPort:intstr.IntOrString{Type:0, "
        'IntVal:0, StrVal:""}, NodePort:0}']
    assert causes(ports=[{"port": 70000, "protocol": "HTTP"}]) == [
        "spec.ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive",
        'spec.ports[0].protocol: Unsupported value: "HTTP": supported values: "SCTP", "TCP", '
        '"UDP"',
        "spec.ports[0].targetPort: Invalid value: 70000: must be between 1 and 65535, "
        "inclusive"]
    assert causes(type="Magic") == [
        'spec.type: Unsupported value: "Magic": supported values: "ClusterIP", "ExternalName", '
        '"LoadBalancer", "NodePort"']
    assert causes(type="ExternalName") == ["spec.externalName: Required value"]
    assert causes(type="ExternalName", externalName="db.example.com.", clusterIP="10.96.0.5",
                  clusterIPs=["10.96.0.5"]) == [
        "spec.clusterIPs: Forbidden: may not be set for ExternalName services"]
    assert causes(type="NodePort", clusterIP="None", clusterIPs=["None"]) == [
        'spec.clusterIPs[0]: Invalid value: "None": may not be set to \'None\' for NodePort '
        "services"]
    assert causes(ports=[{"port": 80, "nodePort": 30001}]) == [
        "spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"]
    assert causes(clusterIP="10.96.0.300", clusterIPs=["10.96.0.300"]) == [
        'spec.clusterIPs[0]: Invalid value: "10.96.0.300": must be a valid IP address, (e.g. '
        "10.9.8.7 or 2001:db8::ffff)"]
    assert causes(externalIPs=["127.0.0.1"]) == [
        'spec.externalIPs[0]: Invalid value: "127.0.0.1": may not be in the loopback range '
        "(127.0.0.0/8, ::1/128)"]
    assert causes(externalTrafficPolicy="Local") == [
        'spec.externalTrafficPolicy: Invalid value: "Local": may only be set for '
        "externally-accessible services"]
    assert causes(sessionAffinity="ClientIP",
                  sessionAffinityConfig={"clientIP": {"timeoutSeconds": 86401}}) == [
        "spec.sessionAffinityConfig.clientIP.timeoutSeconds: Invalid value: 86401: must be "
        "greater than 0 and less than 86400"]
    named = service("Web")
    assert validation.validate(defaults.default(named))[0].startswith(
        'metadata.name: Invalid value: "Web": a DNS-1035 label must consist of lower case '
        "alphanumeric characters or '-', start with an alphabetic character")


def test_an_update_keeps_what_was_allocated_and_drops_what_its_new_type_has_no_use_for(
        ) -> None:
    old = created(service(type="NodePort", ports=[{"name": "web", "port": 80}]))
    old["metadata"]["resourceVersion"] = "1-0"
    ip, node_port = old["spec"]["clusterIP"], old["spec"]["ports"][0]["nodePort"]
    # a replace of the manifest as written: the allocated values stay
    kept = updated(service(type="NodePort", ports=[{"name": "web", "port": 80}]), old)
    assert (kept["spec"]["clusterIP"], kept["spec"]["ports"][0]["nodePort"]) == (ip, node_port)
    # to ClusterIP: the node port and the external traffic policy go; the cluster IP stays
    as_cluster_ip = updated({**old, "spec": {**old["spec"], "type": "ClusterIP"}}, old)
    assert "nodePort" not in as_cluster_ip["spec"]["ports"][0]
    assert "externalTrafficPolicy" not in as_cluster_ip["spec"]
    assert as_cluster_ip["spec"]["clusterIP"] == ip
    # to ExternalName: the cluster IPs and families go
    external = updated({**old, "spec": {**old["spec"], "type": "ExternalName",
                                        "externalName": "db.example.com"}}, old)
    assert not {"clusterIP", "clusterIPs", "ipFamilies"} & set(external["spec"])
    # a new cluster IP is refused
    with pytest.raises(errors.InvalidError) as err:
        updated({**old, "spec": {**old["spec"], "clusterIP": "10.96.9.9",
                                 "clusterIPs": ["10.96.9.9"]}}, old)
    assert err.value.causes == [
        'spec.clusterIPs[0]: Invalid value: []string{"10.96.9.9"}: may not change once set']
    assert str(err.value).startswith('Service "web" is invalid: ')


def test_the_table_has_upstreams_columns() -> None:
    assert [(c.header, c.priority) for c in tables.columns("Service")] == [
        ("NAME", 0), ("TYPE", 0), ("CLUSTER-IP", 0), ("EXTERNAL-IP", 0), ("PORT(S)", 0),
        ("AGE", 0), ("SELECTOR", 1)]
    now = 1_700_000_040.0
    lb = created(service("lb", type="LoadBalancer", selector={"app": "x"},
                         ports=[{"name": "a", "port": 443}, {"name": "b", "port": 53,
                                                              "protocol": "UDP"}]))
    cells = tables.cells("Service", lb, now)
    ports = lb["spec"]["ports"]
    assert cells == ["lb", "LoadBalancer", lb["spec"]["clusterIP"], "<pending>",
                     f"443:{ports[0]['nodePort']}/TCP,53:{ports[1]['nodePort']}/UDP", "40s",
                     "app=x"]
    ext = created(service("ext", type="ExternalName", externalName="db.example.com",
                          ports=[]))
    assert tables.cells("Service", ext, now)[1:5] == ["ExternalName", "<none>",
                                                      "db.example.com", "<none>"]
    headless = created(service("h", clusterIP="None", ports=[]))
    assert tables.cells("Service", headless, now)[2:5] == ["None", "<none>", "<none>"]


def test_kubectl_create_services_protobuf_body_decodes_whole() -> None:
    port = (protobuf.text(1, "80-8080") + protobuf.text(2, "TCP") + protobuf.integer(3, 80)
            + protobuf.message(4, protobuf.integer(1, 0) + protobuf.integer(2, 8080)))
    spec = (protobuf.message(1, port)
            + protobuf.message(2, protobuf.text(1, "app") + protobuf.text(2, "web"))
            + protobuf.text(4, "ClusterIP"))
    body = (protobuf.message(1, protobuf.text(1, "web")) + protobuf.message(2, spec)
            + protobuf.message(3, protobuf.message(1, b"")))
    type_meta = protobuf.text(1, "v1") + protobuf.text(2, "Service")
    raw = protobuf.MAGIC + protobuf.message(1, type_meta) + protobuf.message(2, body)
    assert protobuf.decode(raw) == {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"ports": [{"name": "80-8080", "protocol": "TCP", "port": 80,
                            "targetPort": 8080}],
                 "selector": {"app": "web"}, "type": "ClusterIP"},
        "status": {"loadBalancer": {}}}
