"""ConfigMaps through the real kubectl against a live stack: create (literals, files,
binary files), get, describe, explain, apply (client-side and server-side), diff, edit,
delete, immutability, a manifest of a ConfigMap beside its DaemonSet, and a namespace's
deletion taking its ConfigMaps with it."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest
import yaml

from tests.integration import apiserver_kit
from tests.integration.apiserver_kit import TESTDATA, ApiServer
from tests.integration.stack import Stack

FLUENTD = TESTDATA / "kubernetes-website-fluentd-elasticsearch.yaml"
BINARY = bytes(range(256))


@pytest.fixture
def api(stack: Stack, tmp_path: Path) -> ApiServer:
    return apiserver_kit.in_front(stack, tmp_path, nodes=1)


def config_map(name: str, ns: str = "default", **data: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns}, "data": data}


def test_kubectl_lists_configmaps_as_upstream(api: ApiServer) -> None:
    rows = [line.split() for line in api.kubectl("api-resources", "--no-headers").stdout
            .splitlines()]
    assert ["configmaps", "cm", "v1", "true", "ConfigMap"] in rows
    cats = api.kubectl("api-resources", "--categories=all", "-o", "name").stdout.split()
    assert "configmaps" not in cats
    assert "Data contains the configuration data" in api.kubectl(
        "explain", "configmap.data").stdout


def test_kubectl_create_get_describe_and_delete_a_configmap(api: ApiServer,
                                                            tmp_path: Path) -> None:
    conf = tmp_path / "fluent-bit.conf"
    conf.write_text("[SERVICE]\n    Flush 1\n")
    blob = tmp_path / "blob.bin"
    blob.write_bytes(BINARY)
    out = api.kubectl("create", "configmap", "fb", "--from-literal=level=info",
                      f"--from-file={conf}", f"--from-file={blob}").stdout
    assert out == "configmap/fb created\n"
    got = api.json("get", "cm", "fb")
    assert got["data"] == {"level": "info", "fluent-bit.conf": "[SERVICE]\n    Flush 1\n"}
    assert base64.b64decode(got["binaryData"]["blob.bin"]) == BINARY  # base64, as upstream
    assert "binaryData:\n  blob.bin: " in api.kubectl("get", "cm", "fb", "-o", "yaml").stdout
    table = api.kubectl("get", "cm").stdout.splitlines()
    assert table[0].split() == ["NAME", "DATA", "AGE"]
    assert table[1].split()[:2] == ["fb", "3"]
    assert api.kubectl("get", "cm", "--field-selector", "metadata.name=fb", "-o",
                       "name").stdout == "configmap/fb\n"
    described = api.kubectl("describe", "cm", "fb").stdout
    # (kubectl describes the keys in its map's order, which differs from one run to the next)
    assert re.search(r"^Data\n====\n", described, re.M), described
    assert re.search(r"^fluent-bit.conf:\n----\n\[SERVICE\]\n    Flush 1\n", described,
                     re.M), described
    assert re.search(r"^level:\n----\ninfo\n", described, re.M), described
    assert re.search(r"^BinaryData\n====\nblob.bin: 256 bytes$", described, re.M), described
    # the binary file round trip: the yaml kubectl writes applies back unchanged
    dumped = api.kubectl("get", "cm", "fb", "-o", "yaml").stdout
    assert api.kubectl("apply", "-f", "-", input=dumped).stdout == "configmap/fb configured\n"
    assert base64.b64decode(api.json("get", "cm", "fb")["binaryData"]["blob.bin"]) == BINARY
    assert api.kubectl("delete", "cm", "fb").stdout == 'configmap "fb" deleted\n'
    gone = api.kubectl("get", "cm", "fb", check=False)
    assert gone.stderr == 'Error from server (NotFound): configmaps "fb" not found\n'


def test_kubectl_apply_diff_edit_of_a_configmap(api: ApiServer) -> None:
    doc = config_map("app", level="info")
    assert api.kubectl("apply", "-f", "-", input=json.dumps(doc)).stdout == \
        "configmap/app created\n"
    assert api.kubectl("apply", "-f", "-", input=json.dumps(doc)).stdout == \
        "configmap/app unchanged\n"
    changed = config_map("app", level="debug")
    diff = api.kubectl("diff", "-f", "-", input=json.dumps(changed), check=False)
    assert diff.returncode == 1 and "-  level: info\n+  level: debug" in diff.stdout, diff
    assert api.kubectl("apply", "-f", "-", input=json.dumps(changed)).stdout == \
        "configmap/app configured\n"
    assert api.json("get", "cm", "app")["data"] == {"level": "debug"}
    # server-side apply, by another manager
    ssa = config_map("app", level="debug", extra="1")
    assert api.kubectl("apply", "--server-side", "--field-manager=ssa", "-f", "-",
                       input=json.dumps(ssa)).stdout == "configmap/app serverside-applied\n"
    assert api.json("get", "cm", "app")["data"] == {"level": "debug", "extra": "1"}
    # kubectl edit: the editor rewrites a value
    edited = api.kubectl("edit", "cm", "app", env={
        "KUBE_EDITOR": "sed -i s/level:\\ debug/level:\\ warn/"}).stdout
    assert edited == "configmap/app edited\n"
    assert api.json("get", "cm", "app")["data"]["level"] == "warn"


def test_an_invalid_or_immutable_configmap_is_refused_with_upstreams_message(
        api: ApiServer) -> None:
    bad = api.kubectl("apply", "-f", "-", input=json.dumps(config_map("bad", **{"..x": "1"})),
                      check=False)
    assert bad.returncode == 1
    assert ('The ConfigMap "bad" is invalid: data[..x]: Invalid value: "..x": must not start '
            "with '..'") in bad.stderr, bad.stderr
    frozen = {**config_map("frozen", a="1"), "immutable": True}
    api.kubectl("apply", "-f", "-", input=json.dumps(frozen))
    refused = api.kubectl("apply", "-f", "-", input=json.dumps(
        {**config_map("frozen", a="2"), "immutable": True}), check=False)
    assert refused.returncode == 1
    assert ('The ConfigMap "frozen" is invalid: data: Forbidden: field is immutable when '
            '`immutable` is set') in refused.stderr, refused.stderr
    api.kubectl("label", "cm", "frozen", "tier=x")  # its metadata may change
    assert api.json("get", "cm", "frozen")["data"] == {"a": "1"}


def test_a_configmap_and_its_daemonset_in_one_manifest_and_the_namespace_deletion(
        api: ApiServer, tmp_path: Path) -> None:
    ds = yaml.safe_load(FLUENTD.read_text())
    ds["metadata"]["namespace"] = "logging"
    bundle = tmp_path / "bundle.yaml"
    bundle.write_text(yaml.safe_dump_all([config_map("fluentd-config", "logging",
                                                     level="info"), ds]))
    assert api.kubectl("apply", "-f", str(bundle)).stdout == (
        "configmap/fluentd-config created\ndaemonset.apps/fluentd-elasticsearch created\n")
    assert api.kubectl("apply", "-f", str(bundle)).stdout == (
        "configmap/fluentd-config unchanged\ndaemonset.apps/fluentd-elasticsearch unchanged\n")
    assert "configmap" not in api.kubectl("get", "all", "-n", "logging").stdout
    api.kubectl("delete", "ns", "logging", "--wait=false")
    api.kubectl("wait", "--for=delete", "namespace/logging", "--timeout=60s")
    assert api.stack.store.list("ConfigMap", "logging") == []
