"""The rules of ``pods/proxy`` (``shared.api.podproxy``): the target a path names, the
request sent on to the pod (no credentials, no hop-by-hop headers), its answer's head."""

from __future__ import annotations

import pytest

from shared.api import podproxy


def target(text: str, pod: dict[str, object]) -> tuple[str, int]:
    """The pod's name and port a proxy path names, as the handler reads them."""
    name, port = podproxy.split_target(text)
    return name, podproxy.pod_port(port, pod)


POD = {"metadata": {"name": "web-x"}, "spec": {"nodeName": "n1", "containers": [
    {"name": "a"}, {"name": "b", "ports": [{"containerPort": 9100}, {"containerPort": 1}]}]}}


@pytest.mark.parametrize(("text", "expected"), [
    ("web-x", ("web-x", 9100)),  # the first port of the first container with one
    ("web-x:8080", ("web-x", 8080)),
    ("http:web-x:81", ("web-x", 81)),
    (":web-x:82", ("web-x", 82)),
])
def test_the_target_is_the_pod_and_its_port(text: str, expected: tuple[str, int]) -> None:
    assert target(text, POD) == expected


def test_a_pod_without_ports_is_reached_on_80_and_a_bad_target_is_refused() -> None:
    assert target("p", {"spec": {"containers": [{"name": "a"}]}}) == ("p", 80)
    assert target("p", {}) == ("p", 80)
    for bad, why in (("https:p:443", "only http"), ("p:http", 'unable to parse "http"'),
                     ("p:0", 'port "0" must be > 0'), (":80", "invalid request"),
                     ("a:b:c:d", "invalid request")):
        with pytest.raises(podproxy.ProxyError, match=why):
            target(bad, POD)


def test_only_a_running_pod_on_a_node_is_proxied_to() -> None:
    podproxy.check_pod(POD)
    with pytest.raises(podproxy.ProxyError, match="does not have a host assigned"):
        podproxy.check_pod({"metadata": {"name": "p"}, "spec": {}})
    with pytest.raises(podproxy.ProxyError, match="is not running"):
        podproxy.check_pod({**POD, "status": {"phase": "Succeeded"}})


@pytest.mark.parametrize(("raw", "rest"), [
    ("/api/v1/namespaces/d/pods/p/proxy", "/"),
    ("/api/v1/namespaces/d/pods/p:80/proxy/", "/"),
    ("/api/v1/namespaces/d/pods/p/proxy?x=%20", "/?x=%20"),
    ("/api/v1/namespaces/d/pods/p/proxy/a%2Fb/c%20d/e+f?q=1&r=%26", "/a/b/c%20d/e+f?q=1&r=%26"),
])
def test_the_rest_of_the_path_is_encoded_as_go_encodes_it(raw: str, rest: str) -> None:
    assert podproxy.rest_of(raw) == rest


def test_the_request_keeps_the_callers_headers_but_its_credentials_and_hop_by_hop_ones() -> None:
    head = podproxy.request_head("POST", "/x?y=1", [
        ("Accept", "application/json"), ("Authorization", "Bearer secret"),
        ("Cookie", "c=1"), ("Impersonate-User", "bob"), ("Connection", "keep-alive"),
        ("Transfer-Encoding", "chunked"), ("Host", "api:6443"), ("X-Mine", "yes"),
        ("X-Bad", "a\r\nInjected: 1")], "web-x:80", 3)
    assert head == (b"POST /x?y=1 HTTP/1.0\r\nHost: web-x:80\r\nAccept: application/json\r\n"
                    b"X-Mine: yes\r\nContent-Length: 3\r\nConnection: close\r\n\r\n")
    assert b"Content-Length" not in podproxy.request_head("GET", "/", [], "h", 0)
    with pytest.raises(podproxy.ProxyError):
        podproxy.request_head("GET", "/a b", [], "h", 0)


def test_the_answers_head_gives_its_status_and_headers_but_the_hop_by_hop_ones() -> None:
    status, headers = podproxy.parse_head(
        b"HTTP/1.0 404 Not Found\r\nContent-Type: text/plain\r\nConnection: close\r\n"
        b"Content-Length: 9\r\nX-A:  1 \r\nX-A: 2")
    assert (status, headers) == (404, [("Content-Type", "text/plain"), ("Content-Length", "9"),
                                       ("X-A", "1"), ("X-A", "2")])
    for bad in (b"SSH-2.0-OpenSSH", b"HTTP/1.1 99 Nope", b"HTTP/1.1 200 OK\r\nno colon",
                b"HTTP/1.1 200 OK\r\n spaced: x", b"HTTP/1.1 200 OK\r\nContent-Length: -1"):
        with pytest.raises(podproxy.ProxyError):
            podproxy.parse_head(bad)


def service(selector: dict[str, str] | None, *ports: dict[str, object]) -> dict[str, object]:
    return {"metadata": {"name": "svc", "namespace": "d"},
            "spec": {"selector": selector, "ports": list(ports)}}


def endpoint_pod(name: str, ready: bool = True, **extra: object) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "d", "labels": {"app": "x"}, **extra},
            "spec": {"nodeName": "n1", "containers": [
                {"name": "c", "ports": [{"name": "http", "containerPort": 8080}]}]},
            "status": {"conditions": [{"type": "Ready",
                                       "status": "True" if ready else "False"}]}}


def test_a_services_backend_is_a_ready_pod_it_selects_on_its_target_port() -> None:
    svc = service({"app": "x"}, {"name": "web", "port": 80, "targetPort": "http"},
                  {"name": "raw", "port": 81, "targetPort": 9000}, {"name": "same", "port": 82})
    pods = [endpoint_pod("a", ready=False), endpoint_pod("b"),
            endpoint_pod("gone", deletionTimestamp="2026-01-01T00:00:00Z"),
            {**endpoint_pod("other"), "metadata": {"name": "other", "labels": {"app": "y"}}}]

    def only(options: list[tuple[dict[str, object], int]]) -> tuple[dict[str, object], int]:
        assert len(options) == 1
        return options[0]

    for text, port in (("80", 8080), ("web", 8080), ("81", 9000), ("raw", 9000), ("82", 82)):
        pod, got = podproxy.service_backend(svc, text, pods, only)
        assert (pod["metadata"]["name"], got) == ("b", port)  # type: ignore[index]
    with pytest.raises(podproxy.Unavailable, match='no service port 83 found for service "svc"'):
        podproxy.service_backend(svc, "83", pods, only)
    for no_endpoint in ((svc, "", pods),  # no port without a name
                        (svc, "80", pods[:1]),  # none Ready
                        (service(None, {"port": 80}), "80", pods),  # no selector
                        (service({"app": "x"}, {"port": 80, "targetPort": "nope"}), "80",
                         pods)):  # no container port of that name
        with pytest.raises(podproxy.Unavailable, match='no endpoints available for service'):
            podproxy.service_backend(*no_endpoint, only)
