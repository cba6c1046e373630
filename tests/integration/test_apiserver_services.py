"""Services through the real kubectl and the official Python client against a live stack:
``cluster-info``, ``create service`` of each type (protobuf bodies), the table, describe,
apply and replace keeping what was allocated, a change of type, the allocators' refusals,
field selectors, ``get all``, and a namespace's deletion taking its Services with it."""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path

import pytest
from kubernetes import client, config

from tests.integration import apiserver_kit
from tests.integration.apiserver_kit import ApiServer
from tests.integration.stack import Stack

HEADLESS = {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "node-exporter", "namespace": "monitoring"},
            "spec": {"clusterIP": "None", "selector": {"app": "node-exporter"},
                     "ports": [{"name": "metrics", "port": 9100,
                                "targetPort": "metrics"}]}}


@pytest.fixture
def api(stack: Stack, tmp_path: Path) -> ApiServer:
    return apiserver_kit.in_front(stack, tmp_path, nodes=1)


def test_kubectl_cluster_info_names_the_control_plane(api: ApiServer) -> None:
    out = api.kubectl("cluster-info").stdout
    assert out.startswith(f"Kubernetes control plane is running at {api.url}\n"), out
    rows = [line.split() for line in api.kubectl("api-resources", "--no-headers").stdout
            .splitlines()]
    assert ["services", "svc", "v1", "true", "Service"] in rows
    assert "services" in api.kubectl("api-resources", "--categories=all", "-o",
                                     "name").stdout.split()


def test_kubectl_creates_each_type_and_gets_them_as_upstream_prints_them(
        api: ApiServer) -> None:
    for args in (("clusterip", "web", "--tcp=80:8080"), ("nodeport", "np", "--tcp=80"),
                 ("loadbalancer", "lb", "--tcp=443:8443"),
                 ("externalname", "ext", "--external-name=db.example.com"),
                 ("clusterip", "headless", "--clusterip=None")):
        assert api.kubectl("create", "service", *args).stdout == f"service/{args[1]} created\n"
    got = {s["metadata"]["name"]: s["spec"] for s in api.json("get", "svc")["items"]}
    ips = [got[n]["clusterIP"] for n in ("web", "np", "lb")]
    assert len(set(ips)) == 3
    assert all(ipaddress.ip_address(ip) in ipaddress.ip_network("10.96.0.0/12") for ip in ips)
    node_port = got["np"]["ports"][0]["nodePort"]
    assert 30000 <= node_port <= 32767
    rows = {line.split()[0]: line.split()
            for line in api.kubectl("get", "svc", "-o", "wide").stdout.splitlines()}
    assert rows["NAME"] == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE",
                            "SELECTOR"]
    assert rows["web"][1:5] == ["ClusterIP", ips[0], "<none>", "80/TCP"]
    assert rows["np"][1:5] == ["NodePort", ips[1], "<none>", f"80:{node_port}/TCP"]
    assert rows["lb"][3] == "<pending>"
    assert rows["ext"][1:5] == ["ExternalName", "<none>", "db.example.com", "<none>"]
    assert rows["headless"][2] == "None" and rows["web"][-1] == "app=web"
    described = api.kubectl("describe", "svc", "np").stdout
    assert f"IP:                       {ips[1]}\n" in described, described
    assert f"NodePort:                 80  {node_port}/TCP\n" in described, described
    assert api.kubectl("get", "svc", "--field-selector", "spec.type=NodePort", "-o",
                       "name").stdout == "service/np\n"
    assert "service/web" in api.kubectl("get", "all", "-o", "name").stdout.split()


def test_apply_and_replace_keep_what_was_allocated_and_a_type_change_drops_it(
        api: ApiServer) -> None:
    api.kubectl("create", "namespace", "monitoring")
    doc = json.dumps(HEADLESS)
    assert api.kubectl("apply", "-f", "-", input=doc).stdout == \
        "service/node-exporter created\n"
    assert api.kubectl("apply", "-f", "-", input=doc).stdout == \
        "service/node-exporter unchanged\n"
    api.kubectl("create", "service", "nodeport", "np", "--tcp=80")
    before = api.json("get", "svc", "np")["spec"]
    manifest = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "np"},
                "spec": {"type": "NodePort", "selector": {"app": "np"},
                         "ports": [{"name": "80", "port": 80}]}}
    assert api.kubectl("replace", "-f", "-", input=json.dumps(manifest)).stdout == \
        "service/np replaced\n"
    after = api.json("get", "svc", "np")["spec"]
    assert after["clusterIP"] == before["clusterIP"]
    assert after["ports"][0]["nodePort"] == before["ports"][0]["nodePort"]
    api.kubectl("patch", "svc", "np", "-p", json.dumps({"spec": {"type": "ClusterIP"}}))
    as_cluster_ip = api.json("get", "svc", "np")["spec"]
    assert "nodePort" not in as_cluster_ip["ports"][0]
    assert "externalTrafficPolicy" not in as_cluster_ip
    changed = api.kubectl("patch", "svc", "np", "-p", json.dumps(
        {"spec": {"clusterIP": "10.96.0.9", "clusterIPs": ["10.96.0.9"]}}), check=False)
    assert changed.returncode == 1
    assert ('The Service "np" is invalid: spec.clusterIPs[0]: Invalid value: '
            '[]string{"10.96.0.9"}: may not change once set') in changed.stderr, changed.stderr
    api.kubectl("delete", "ns", "monitoring", "--wait=false")
    api.kubectl("wait", "--for=delete", "namespace/monitoring", "--timeout=60s")
    assert api.stack.store.list("Service", "monitoring") == []


def test_the_allocators_refuse_what_is_taken_or_out_of_range(api: ApiServer) -> None:
    api.kubectl("create", "service", "nodeport", "np", "--tcp=80", "--node-port=30080")
    ip = api.json("get", "svc", "np")["spec"]["clusterIP"]
    taken = api.kubectl("create", "service", "clusterip", "twin", "--tcp=80",
                        f"--clusterip={ip}", check=False)
    assert taken.returncode == 1
    assert (f'Service "twin" is invalid: spec.clusterIPs: Invalid value: []string{{"{ip}"}}: '
            f"failed to allocate IP {ip}: provided IP is already allocated") in taken.stderr
    outside = api.kubectl("create", "service", "clusterip", "out", "--tcp=80",
                          "--clusterip=192.168.0.10", check=False)
    assert "The range of valid IPs is 10.96.0.0/12" in outside.stderr, outside.stderr
    port = api.kubectl("create", "service", "nodeport", "np2", "--tcp=80",
                       "--node-port=30080", check=False)
    assert ("spec.ports[0].nodePort: Invalid value: 30080: provided port is already "
            "allocated") in port.stderr, port.stderr
    assert api.kubectl("get", "svc", "-o", "name").stdout == "service/np\n"  # nothing written


def test_the_python_client_creates_reads_and_lists_services(api: ApiServer) -> None:
    core = client.CoreV1Api(config.new_client_from_config(
        config_file=str(api.kubeconfig())))
    made = core.create_namespaced_service("default", client.V1Service(
        metadata=client.V1ObjectMeta(name="metrics"),
        spec=client.V1ServiceSpec(type="NodePort", selector={"app": "agent"},
                                  ports=[client.V1ServicePort(port=9100)])))
    assert made.spec.cluster_ip and made.spec.ports[0].node_port
    assert made.spec.ports[0].target_port == 9100 and made.spec.ip_families == ["IPv4"]
    read = core.read_namespaced_service("metrics", "default")
    assert read.spec.cluster_ip == made.spec.cluster_ip
    assert [s.metadata.name for s in core.list_service_for_all_namespaces().items] == \
        ["metrics"]
