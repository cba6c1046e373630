"""The real kubectl against the OpenAPI v3 documents of shared.api.openapi, served by a
throwaway HTTP server that also answers legacy discovery and records the writes kubectl sends:
``explain`` reads the components, ``apply`` leaves field validation to the server
(``fieldValidation=Strict``) instead of refusing an unknown field itself."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from shared.api import openapi
from shared.model import kinds


def _resource_list(api_version: str) -> dict[str, Any]:
    resources = [{"name": k.plural, "singularName": k.singular, "namespaced": k.namespaced,
                  "kind": k.kind, "shortNames": list(k.short_names),
                  "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]}
                 for k in kinds.ALL if k.api_version == api_version]
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": api_version,
            "resources": resources}


class _Server(ThreadingHTTPServer):
    writes: list[tuple[str, str, dict[str, list[str]], Any]]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        path = urlsplit(self.path).path.rstrip("/")
        docs = openapi.documents()
        if path == "/api":
            self._send(200, {"kind": "APIVersions", "versions": ["v1"],
                             "serverAddressByClientCIDRs": []})
        elif path == "/apis":
            gv = {"groupVersion": "apps/v1", "version": "v1"}
            self._send(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                {"name": "apps", "versions": [gv], "preferredVersion": gv}]})
        elif path in ("/api/v1", "/apis/apps/v1"):
            self._send(200, _resource_list(path.split("/", 2)[2]))
        elif path == "/openapi/v3":
            self._send(200, openapi.root(docs))
        elif path.startswith("/openapi/v3/") and path[len("/openapi/v3/"):] in docs:
            self._send(200, docs[path[len("/openapi/v3/"):]])
        else:
            self._send(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                             "reason": "NotFound", "code": 404, "message": "not found"})

    def do_POST(self) -> None:
        url = urlsplit(self.path)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.writes.append(("POST", url.path, parse_qs(url.query), body))
        self._send(201, body)


@pytest.fixture
def server() -> Iterator[_Server]:
    srv = _Server(("127.0.0.1", 0), _Handler)
    srv.writes = []
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _kubectl(srv: _Server, home: Path, *args: str, stdin: str | None = None
             ) -> subprocess.CompletedProcess[str]:
    kubectl = shutil.which("kubectl")
    assert kubectl, "the real kubectl must be on PATH (kubectl version --client)"
    host, port = srv.server_address[:2]
    config = home / "kubeconfig"
    config.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "t",
        "clusters": [{"name": "t", "cluster": {"server": f"http://{host!s}:{port}"}}],
        "users": [{"name": "t", "user": {"token": "x"}}],
        "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}]}))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "KUBECONFIG": str(config)}
    return subprocess.run([kubectl, *args], input=stdin, capture_output=True, text=True,
                          env=env, timeout=60)


def test_kubectl_explain_reads_daemonset_update_strategy(server: _Server, tmp_path: Path) -> None:
    out = _kubectl(server, tmp_path, "explain", "daemonset.spec.updateStrategy")
    assert out.returncode == 0, out.stderr
    assert "KIND:       DaemonSet" in out.stdout
    assert "DaemonSetUpdateStrategy" in out.stdout
    assert "rollingUpdate" in out.stdout and "<RollingUpdateDaemonSet>" in out.stdout


def test_kubectl_explain_reads_pod_container_fields(server: _Server, tmp_path: Path) -> None:
    out = _kubectl(server, tmp_path, "explain", "pods.spec.containers.imagePullPolicy")
    assert out.returncode == 0, out.stderr
    assert "FIELD: imagePullPolicy <string>" in out.stdout


_UNKNOWN_FIELD_DS = """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: default}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers:
      - {name: agent, image: agent:1, imagePullPolicyy: Always}
"""


def test_kubectl_apply_leaves_field_validation_to_the_server(server: _Server,
                                                             tmp_path: Path) -> None:
    out = _kubectl(server, tmp_path, "apply", "-f", "-", stdin=_UNKNOWN_FIELD_DS)
    assert out.returncode == 0, out.stderr
    assert [(m, p) for m, p, _, _ in server.writes] == [
        ("POST", "/apis/apps/v1/namespaces/default/daemonsets")]
    _, _, query, body = server.writes[0]
    assert query["fieldValidation"] == ["Strict"]
    assert body["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] == "Always"
