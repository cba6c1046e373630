"""Secrets through the real kubectl and the official Python client against a live stack:
``create secret generic|tls|docker-registry`` (protobuf bodies), ``stringData`` in a
manifest, the table and describe, upstream's refusals, who may read and write them, and a
namespace's deletion taking its Secrets with it."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from kubernetes import client, config

from services.apiserver import tls
from tests.integration import apiserver_kit
from tests.integration.apiserver_kit import ApiServer
from tests.integration.stack import Stack


@pytest.fixture
def api(stack: Stack, tmp_path: Path) -> ApiServer:
    return apiserver_kit.in_front(stack, tmp_path, nodes=1)


def test_kubectl_creates_reads_and_describes_secrets(api: ApiServer, tmp_path: Path) -> None:
    (tmp_path / "pw").write_bytes(b"elastic\n")
    assert api.kubectl("create", "secret", "generic", "es", "--from-literal=user=fluent",
                       f"--from-file=password={tmp_path / 'pw'}").stdout == \
        "secret/es created\n"
    assert api.kubectl("create", "secret", "docker-registry", "reg",
                       "--docker-server=registry.example.com", "--docker-username=u",
                       "--docker-password=p").stdout == "secret/reg created\n"
    _ca, cert, key = tls.ensure_serving(tmp_path / "web-pki", "127.0.0.1")
    assert api.kubectl("create", "secret", "tls", "web", f"--cert={cert}",
                       f"--key={key}").stdout == "secret/web created\n"
    got = api.json("get", "secret", "es")
    assert base64.b64decode(got["data"]["password"]) == b"elastic\n"
    assert got["type"] == "Opaque"
    rows = [line.split() for line in api.kubectl("get", "secrets").stdout.splitlines()]
    assert rows[0] == ["NAME", "TYPE", "DATA", "AGE"]
    assert [r[:3] for r in rows[1:]] == [["es", "Opaque", "2"],
                                         ["reg", "kubernetes.io/dockerconfigjson", "1"],
                                         ["web", "kubernetes.io/tls", "2"]]
    described = api.kubectl("describe", "secret", "es").stdout
    # (kubectl describes the keys in its map's order, which differs from one run to the next)
    data = described.split("Data\n====\n", 1)[1].splitlines()
    assert sorted(data) == ["password:  8 bytes", "user:      6 bytes"], described
    assert api.kubectl("get", "secrets", "--field-selector", "type=kubernetes.io/tls", "-o",
                       "name").stdout == "secret/web\n"


def test_string_data_is_written_into_data_and_immutability_holds(api: ApiServer) -> None:
    manifest = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "app"},
                "stringData": {"token": "t0ken"}, "immutable": True}
    assert api.kubectl("apply", "-f", "-", input=json.dumps(manifest)).stdout == \
        "secret/app created\n"
    stored = api.json("get", "secret", "app")
    assert stored["data"] == {"token": base64.b64encode(b"t0ken").decode()}
    assert "stringData" not in stored
    changed = api.kubectl("apply", "-f", "-", input=json.dumps(
        {**manifest, "stringData": {"token": "other"}}), check=False)
    assert changed.returncode == 1
    assert ('The Secret "app" is invalid: data: Forbidden: field is immutable when '
            "`immutable` is set") in changed.stderr, changed.stderr
    bad = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tls"},
           "type": "kubernetes.io/tls", "stringData": {"tls.crt": "x"}}
    refused = api.kubectl("apply", "-f", "-", input=json.dumps(bad), check=False)
    assert 'The Secret "tls" is invalid: data[tls.key]: Required value' in refused.stderr


def test_view_may_not_read_secrets_edit_may_read_and_only_admin_writes(
        api: ApiServer) -> None:
    api.kubectl("create", "secret", "generic", "es", "--from-literal=user=fluent")
    denied = api.kubectl("get", "secrets", user="viewer", check=False)
    assert denied.returncode == 1
    assert ('secrets is forbidden: User "viewer" cannot list resource "secrets" in API group '
            '"" in the namespace "default"') in denied.stderr, denied.stderr
    assert api.kubectl("auth", "can-i", "get", "secrets", user="viewer",
                       check=False).stdout == "no\n"
    assert api.kubectl("auth", "can-i", "get", "configmaps", user="viewer").stdout == "yes\n"
    listed = api.kubectl("auth", "can-i", "--list", user="viewer").stdout
    assert "secrets" not in listed and "configmaps " in listed, listed
    assert api.kubectl("get", "secret", "es", "-o", "name", user="editor").stdout == \
        "secret/es\n"
    written = api.kubectl("create", "secret", "generic", "x", "--from-literal=a=b",
                          user="editor", check=False)
    assert 'User "editor" cannot create resource "secrets"' in written.stderr


def test_the_python_client_and_a_namespaces_deletion(api: ApiServer) -> None:
    core = client.CoreV1Api(config.new_client_from_config(
        config_file=str(api.kubeconfig())))
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="logging")))
    core.create_namespaced_secret("logging", client.V1Secret(
        metadata=client.V1ObjectMeta(name="es"), string_data={"password": "pw"}))
    read = core.read_namespaced_secret("es", "logging")
    assert read.type == "Opaque" and base64.b64decode(read.data["password"]) == b"pw"
    api.kubectl("delete", "ns", "logging", "--wait=false")
    api.kubectl("wait", "--for=delete", "namespace/logging", "--timeout=60s")
    assert api.stack.store.list("Secret", "logging") == []
