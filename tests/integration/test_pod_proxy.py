"""``pods/proxy`` with the real kubectl (``get --raw``, ``kubectl proxy``) and the official
Python client, through the API server and the port-forward endpoint of a process runtime's
node agent: a request's method, path, query, headers and body reach the pod's server, its
answer's status, headers and body come back; the caller's token stays behind; the default
port; a port nothing listens on; who may."""

from __future__ import annotations

import json
import socket
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

from kubernetes import client, config

from shared.model import meta
from shared.model.podutil import is_ready
from shared.store.server import free_port
from tests.integration.controller_kit import daemonset as daemonset_of
from tests.integration.stack import wait_for
from tests.integration.test_node_agent_process import Machine, machine
from tests.integration.test_pod_logs import running_pod

__all__ = ["machine"]  # the fixture, shared with the process runtime's tests

# a server that answers each request with what it got, as JSON, and a header of its own
ECHO = '''
import http.server, json, sys

class Echo(http.server.BaseHTTPRequestHandler):
    def answer(self):
        size = int(self.headers.get("Content-Length") or 0)
        body = json.dumps({"method": self.command, "path": self.path,
                           "headers": {k.lower(): v for k, v in self.headers.items()},
                           "body": self.rfile.read(size).decode()}).encode()
        self.send_response(201 if self.command == "POST" else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Echo", "yes")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = answer

    def log_message(self, *args):
        pass

http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Echo).serve_forever()
'''


def daemonset(m: Machine, port: int) -> dict[str, Any]:
    (m.dir / "echo.py").write_text(ECHO)
    (m.dir / "echo.py").chmod(0o644)
    return daemonset_of("echo", pod={
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "app", "image": "python:3",
                        "command": ["python3", str(m.dir / "echo.py"), str(port)],
                        "ports": [{"containerPort": port, "name": "http"}]}]})


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_a_request_through_the_pods_proxy_reaches_its_server_and_its_answer_returns(
        machine: Machine, tmp_path: Path) -> None:
    port = free_port()
    api, _node, pod = running_pod(machine, tmp_path, daemonset(machine, port))
    name = meta.name(pod)
    wait_for(lambda: listening(port), timeout=30, what="the pod's server listening")
    base = f"/api/v1/namespaces/default/pods/{name}"

    got = json.loads(api.kubectl("get", "--raw", f"{base}:{port}/proxy/some/path?a=1&b=2")
                     .stdout)
    assert (got["method"], got["path"]) == ("GET", "/some/path?a=1&b=2")
    # the path decoded and encoded again, the query as it came (upstream's Path, RawQuery)
    code, raw = api.request("GET", f"{base}:{port}/proxy/a%2Fb/x%20y?q=%26%20")
    assert (code, raw["path"]) == (200, "/a/b/x%20y?q=%26%20")
    assert got["headers"]["host"] == f"{pod['status']['podIP']}:{port}"  # (upstream's)
    assert "authorization" not in got["headers"]  # the caller's token is the API server's
    # no port: the pod's first container port
    assert json.loads(api.kubectl("get", "--raw", f"{base}/proxy").stdout)["path"] == "/"

    # a POST with a body and a header of the caller's; the answer's status and headers
    code, answer = api.request("POST", f"{base}/proxy/items", {"n": 1},
                               headers={"X-Caller": "me"})
    assert code == 201
    assert (answer["method"], answer["path"], json.loads(answer["body"])) == (
        "POST", "/items", {"n": 1})
    assert answer["headers"]["x-caller"] == "me"
    assert answer["headers"]["content-type"] == "application/json"

    # kubectl proxy in front of it, as a browser or curl would use it
    local = free_port()
    proc = api.popen("proxy", f"--port={local}", stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert "Starting to serve" in proc.stdout.readline()
        with urllib.request.urlopen(f"http://127.0.0.1:{local}{base}:{port}/proxy/x",
                                    timeout=30) as resp:
            assert resp.headers["X-Echo"] == "yes"
            body = resp.read()
            assert json.loads(body)["path"] == "/x"
            assert resp.headers["Content-Length"] == str(len(body))  # the pod's, passed on
    finally:
        proc.kill()
        proc.wait(10)

    # the official Python client
    core = client.CoreV1Api(config.new_client_from_config(config_file=str(api.kubeconfig())))
    text = core.connect_get_namespaced_pod_proxy_with_path(f"{name}:{port}", "default",
                                                           "from/python")
    assert "'path': '/from/python'" in text  # (it sends the path's / as %2F)

    # nothing listening there; a viewer may not reach into a pod, an editor may
    code, refused = api.request("GET", f"{base}:1/proxy/")
    assert (code, refused["reason"]) == (503, "ServiceUnavailable")
    assert refused["message"].startswith("error trying to reach service: ")
    assert "connection refused" in refused["message"], refused
    code, refused = api.request("GET", f"{base}:{port}/proxy/", token="viewer")
    assert (code, refused["message"]) == (403, (
        f'pods "{name}:{port}" is forbidden: User "viewer" cannot get resource "pods/proxy" '
        'in API group "" in the namespace "default"'))
    code, _ = api.request("GET", f"{base}:{port}/proxy/", token="editor")
    assert code == 200
    code, missing = api.request("GET", "/api/v1/namespaces/default/pods/nope:80/proxy/")
    assert (code, missing["reason"]) == (404, "NotFound")


def test_a_request_through_a_services_proxy_reaches_one_of_its_ready_pods(
        machine: Machine, tmp_path: Path) -> None:
    """``services/NAME:PORT/proxy``: the service's port (by number or name) and its
    targetPort (here a container port's name) lead to a Ready pod its selector selects;
    none there, or no such port, is upstream's 503."""
    port = free_port()
    api, _node, pod = running_pod(machine, tmp_path, daemonset(machine, port))
    wait_for(lambda: listening(port), timeout=30, what="the pod's server listening")

    def service(name: str, selector: dict[str, str]) -> None:
        code, made = api.request("POST", "/api/v1/namespaces/default/services", {
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": selector, "ports": [
                {"name": "web", "port": 80, "targetPort": "http"}]}})
        assert code == 201, made

    service("echo", {"app": "echo"})
    service("nobody", {"app": "nothing"})
    wait_for(lambda: is_ready(machine.stack.store.get("Pod", meta.key(pod))),
             what="the pod Ready (an endpoint of its service)")
    base = "/api/v1/namespaces/default/services"
    got = json.loads(api.kubectl("get", "--raw", f"{base}/echo:80/proxy/by/number").stdout)
    assert (got["path"], got["headers"]["host"]) == ("/by/number",
                                                     f"{pod['status']['podIP']}:{port}")
    assert json.loads(api.kubectl("get", "--raw", f"{base}/echo:web/proxy/by/name")
                      .stdout)["path"] == "/by/name"
    code, refused = api.request("GET", f"{base}/echo:81/proxy/")
    assert (code, refused["message"]) == (503, 'no service port 81 found for service "echo"')
    code, refused = api.request("GET", f"{base}/nobody:80/proxy/")
    assert (code, refused["message"]) == (503, 'no endpoints available for service "nobody"')
    code, refused = api.request("GET", f"{base}/echo:80/proxy/", token="viewer")
    assert code == 403 and 'cannot get resource "services/proxy"' in refused["message"]

