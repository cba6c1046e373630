"""The real kubectl against shared.api's pure rules, served by a throwaway in-memory HTTP
server (legacy discovery, the OpenAPI v3 documents, GET/LIST as JSON or Table, POST, PATCH
through apply_patch with strict field validation): ``explain`` reads the components,
``apply`` leaves field validation to the server, and the patches kubectl computes itself
(apply's three-way strategic merge with $setElementOrder, set image, label, patch of all
three types) come out right; ``get`` prints the same table as ``daemonbus get``."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from services.cli import printers
from shared.api import openapi, patch, schema, tables
from shared.model import kinds, meta

Obj = dict[str, Any]
# ten and a half days ago: AGE reads "10d" for half a day either way, however slow a run
CREATED = meta.format_time(time.time() - 10.5 * 86400)


def _resource_list(api_version: str) -> Obj:
    resources = [{"name": k.plural, "singularName": k.singular, "namespaced": k.namespaced,
                  "kind": k.kind, "shortNames": list(k.short_names),
                  "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]}
                 for k in kinds.ALL if k.api_version == api_version]
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": api_version,
            "resources": resources}


def _status(code: int, reason: str, message: str) -> Obj:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "reason": reason, "code": code, "message": message}


class _Server(ThreadingHTTPServer):
    writes: list[tuple[str, str, dict[str, list[str]], str, Any]]
    objects: dict[tuple[str, str, str], Obj]  # (kind, namespace, name) -> object
    rv: int


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

    def _route(self) -> tuple[kinds.KindInfo, str, str] | None:
        """(kind, namespace, name) of a resource URL; name may be ''."""
        parts = urlsplit(self.path).path.strip("/").split("/")
        base = 2 if parts[0] == "api" else 3
        api_version = "/".join(parts[1:base])
        rest = parts[base:]
        namespace = ""
        if len(rest) >= 2 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        for info in kinds.ALL:
            if info.api_version == api_version and rest and rest[0] == info.plural:
                return info, namespace, rest[1] if len(rest) > 1 else ""
        return None

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers["Content-Length"]))

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
        elif (route := self._route()) is not None:
            self._get(*route)
        else:
            self._send(404, _status(404, "NotFound", "the server could not find the requested "
                                    "resource"))

    def _get(self, info: kinds.KindInfo, namespace: str, name: str) -> None:
        objs = sorted((o for (k, ns, _), o in self.server.objects.items()
                       if k == info.kind and (not namespace or ns == namespace)
                       and (not name or meta.name(o) == name)), key=meta.name)
        if name and not objs:
            self._send(404, _status(404, "NotFound",
                                    f'{info.plural}.{info.group or ""} "{name}" not found'))
        elif "as=Table" in self.headers.get("Accept", ""):
            self._send(200, tables.table(info.kind, objs, time.time(),
                                         list_meta={"resourceVersion": str(self.server.rv)}))
        elif name:
            self._send(200, objs[0])
        else:
            self._send(200, {"kind": info.kind + "List", "apiVersion": info.api_version,
                             "metadata": {"resourceVersion": str(self.server.rv)},
                             "items": objs})

    def _store(self, info: kinds.KindInfo, namespace: str, obj: Obj,
               query: dict[str, list[str]]) -> bool:
        unknown = schema.unknown_fields(obj)
        if unknown and query.get("fieldValidation") == ["Strict"]:
            self._send(400, _status(400, "BadRequest", schema.strict_decoding_message(unknown)))
            return False
        self.server.rv += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.server.rv)
        obj["metadata"].setdefault("creationTimestamp", CREATED)
        if namespace:
            obj["metadata"]["namespace"] = namespace
        self.server.objects[(info.kind, namespace, meta.name(obj))] = obj
        return True

    def do_POST(self) -> None:
        url, route = urlsplit(self.path), self._route()
        assert route is not None
        info, namespace, _ = route
        body = json.loads(self._body())
        query = parse_qs(url.query)
        self.server.writes.append(("POST", url.path, query, "", body))
        if self._store(info, namespace, body, query):
            self._send(201, body)

    def do_PATCH(self) -> None:
        url, route = urlsplit(self.path), self._route()
        assert route is not None
        info, namespace, name = route
        raw = self._body()
        ctype = self.headers["Content-Type"]
        query = parse_qs(url.query)
        self.server.writes.append(("PATCH", url.path, query, ctype, yaml.safe_load(raw)))
        current = self.server.objects.get((info.kind, namespace, name))
        if current is None:
            self._send(404, _status(404, "NotFound", f'"{name}" not found'))
            return
        try:
            new = patch.apply_patch(current, raw, ctype, info.kind)
        except patch.PatchError as err:
            self._send(err.code, _status(err.code, err.reason, str(err)))
            return
        if self._store(info, namespace, new, query):
            self._send(200, new)


@pytest.fixture
def server() -> Iterator[_Server]:
    srv = _Server(("127.0.0.1", 0), _Handler)
    srv.writes, srv.objects, srv.rv = [], {}, 1
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
        "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t",
                                                "namespace": "default"}}]}))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "KUBECONFIG": str(config)}
    return subprocess.run([kubectl, *args], input=stdin, capture_output=True, text=True,
                          env=env, timeout=60)


def _ok(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 0, out.stderr
    return out.stdout


def _ds(image: str = "agent:1", **container: Any) -> str:
    return yaml.safe_dump({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "default", "labels": {"app": "agent"}},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
                 "template": {"metadata": {"labels": {"app": "agent"}}, "spec": {
                     "nodeSelector": {"disk": "ssd"},
                     "containers": [{"name": "agent", "image": image, **container},
                                    {"name": "sidecar", "image": "sidecar:1",
                                     "env": [{"name": "A", "value": "1"}]}]}}}})


def _stored(srv: _Server, name: str = "agent") -> Obj:
    return srv.objects[("DaemonSet", "default", name)]


def _containers(srv: _Server) -> list[Obj]:
    spec: Obj = _stored(srv)["spec"]["template"]["spec"]
    return list(spec["containers"])


# ---- OpenAPI ------------------------------------------------------------------------------


def test_kubectl_explain_reads_daemonset_update_strategy(server: _Server, tmp_path: Path) -> None:
    out = _ok(_kubectl(server, tmp_path, "explain", "daemonset.spec.updateStrategy"))
    assert "KIND:       DaemonSet" in out
    assert "DaemonSetUpdateStrategy" in out
    assert "rollingUpdate" in out and "<RollingUpdateDaemonSet>" in out


def test_kubectl_explain_reads_pod_container_fields(server: _Server, tmp_path: Path) -> None:
    out = _ok(_kubectl(server, tmp_path, "explain", "pods.spec.containers.imagePullPolicy"))
    assert "FIELD: imagePullPolicy <string>" in out


def test_kubectl_apply_leaves_field_validation_to_the_server(server: _Server,
                                                             tmp_path: Path) -> None:
    out = _kubectl(server, tmp_path, "apply", "-f", "-", stdin=_ds(imagePullPolicyy="Always"))
    assert out.returncode == 1
    assert out.stderr.strip() == (
        'Error from server (BadRequest): error when creating "STDIN": strict decoding error: '
        'unknown field "spec.template.spec.containers[0].imagePullPolicyy"')
    assert [(m, p) for m, p, _, _, _ in server.writes] == [
        ("POST", "/apis/apps/v1/namespaces/default/daemonsets")]
    query = server.writes[0][2]
    assert query["fieldValidation"] == ["Strict"]


# ---- patches kubectl computes -------------------------------------------------------------


def test_kubectl_apply_twice_then_an_edit(server: _Server, tmp_path: Path) -> None:
    assert _ok(_kubectl(server, tmp_path, "apply", "-f", "-", stdin=_ds())) == (
        "daemonset.apps/agent created\n")
    assert _ok(_kubectl(server, tmp_path, "apply", "-f", "-", stdin=_ds())) == (
        "daemonset.apps/agent unchanged\n")
    edited = _ds("agent:2").replace("disk: ssd", "disk: nvme")
    assert _ok(_kubectl(server, tmp_path, "apply", "-f", "-", stdin=edited)) == (
        "daemonset.apps/agent configured\n")
    method, _, query, ctype, body = server.writes[-1]
    assert (method, ctype) == ("PATCH", patch.STRATEGIC_MERGE_PATCH)
    assert query["fieldValidation"] == ["Strict"]
    assert "$setElementOrder/containers" in body["spec"]["template"]["spec"]
    assert [(c["name"], c["image"]) for c in _containers(server)] == [
        ("agent", "agent:2"), ("sidecar", "sidecar:1")]
    assert _stored(server)["spec"]["template"]["spec"]["nodeSelector"] == {"disk": "nvme"}
    assert schema.unknown_fields(_stored(server)) == []

    # dropping a container and an env var from the manifest removes them ($patch: delete)
    fewer = yaml.safe_load(_ds("agent:2"))
    fewer["spec"]["template"]["spec"]["containers"] = [
        {"name": "sidecar", "image": "sidecar:1"}]
    _ok(_kubectl(server, tmp_path, "apply", "-f", "-", stdin=yaml.safe_dump(fewer)))
    assert _containers(server) == [{"name": "sidecar", "image": "sidecar:1"}]


def test_kubectl_set_image_label_and_patch_types(server: _Server, tmp_path: Path) -> None:
    _ok(_kubectl(server, tmp_path, "apply", "-f", "-", stdin=_ds()))
    _ok(_kubectl(server, tmp_path, "set", "image", "ds/agent", "sidecar=sidecar:9"))
    assert [c["image"] for c in _containers(server)] == ["agent:1", "sidecar:9"]
    assert server.writes[-1][3] == patch.STRATEGIC_MERGE_PATCH

    _ok(_kubectl(server, tmp_path, "label", "ds", "agent", "tier=infra"))
    assert meta.labels(_stored(server)) == {"app": "agent", "tier": "infra"}
    _ok(_kubectl(server, tmp_path, "label", "ds", "agent", "tier-"))
    assert meta.labels(_stored(server)) == {"app": "agent"}

    _ok(_kubectl(server, tmp_path, "patch", "ds", "agent", "--type=json", "-p", json.dumps(
        [{"op": "replace", "path": "/spec/template/spec/containers/0/image",
          "value": "agent:3"}])))
    _ok(_kubectl(server, tmp_path, "patch", "ds", "agent", "--type=merge", "-p",
                 '{"spec":{"template":{"spec":{"nodeSelector":null}}}}'))
    _ok(_kubectl(server, tmp_path, "patch", "ds", "agent", "-p", json.dumps(
        {"spec": {"template": {"spec": {"containers": [{"name": "sidecar", "env": [
            {"name": "B", "value": "2"}]}]}}}})))
    spec = _stored(server)["spec"]["template"]["spec"]
    assert "nodeSelector" not in spec
    assert [c["image"] for c in spec["containers"]] == ["agent:3", "sidecar:9"]
    assert spec["containers"][1]["env"] == [{"name": "B", "value": "2"},
                                            {"name": "A", "value": "1"}]

    bad = _kubectl(server, tmp_path, "patch", "ds", "agent", "--type=json", "-p",
                   '[{"op":"test","path":"/metadata/name","value":"other"}]')
    assert bad.returncode == 1
    assert "the server rejected our request due to an error in our request" in bad.stderr


def test_kubectl_server_side_apply_merges_the_applied_fields(server: _Server,
                                                              tmp_path: Path) -> None:
    _ok(_kubectl(server, tmp_path, "apply", "-f", "-", stdin=_ds()))
    out = _ok(_kubectl(server, tmp_path, "apply", "--server-side", "-f", "-",
                       stdin=_ds("agent:5")))
    assert out == "daemonset.apps/agent serverside-applied\n"
    assert ("PATCH", patch.APPLY_PATCH, ["kubectl"]) in [
        (m, c, q.get("fieldManager")) for m, _, q, c, _ in server.writes]
    assert [c["image"] for c in _containers(server)] == ["agent:5", "sidecar:1"]


# ---- tables ---------------------------------------------------------------------------------


def test_kubectl_get_prints_the_cli_table(server: _Server, tmp_path: Path) -> None:
    _ok(_kubectl(server, tmp_path, "apply", "-f", "-", stdin=_ds()))
    stored = _stored(server)
    stored["status"] = {"desiredNumberScheduled": 3, "currentNumberScheduled": 3,
                        "numberReady": 2, "updatedNumberScheduled": 3, "numberAvailable": 2}
    for wide in (False, True):
        args = ("-o", "wide") if wide else ()
        got = _ok(_kubectl(server, tmp_path, "get", "ds", *args))
        assert got == printers.get_table(kinds.DAEMONSET, [stored], time.time(), wide=wide)
    got = _ok(_kubectl(server, tmp_path, "get", "ds", "-A", "--show-labels"))
    assert got == printers.get_table(kinds.DAEMONSET, [stored], time.time(),
                                     all_namespaces=True, show_labels=True)
    assert got.startswith("NAMESPACE   NAME    DESIRED")
