"""configMap, secret and downwardAPI volumes (kubelet's volume plugins' MakePayload)
and the atomic writer's layout and updates (on a temporary directory)."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest

from services.node_agent import atomicwriter, configvolumes, podstatus

CM: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "cfg", "namespace": "ns"},
                      "data": {"a.conf": "A", "b.conf": "B"},
                      "binaryData": {"blob": base64.b64encode(b"\x00\xff").decode()}}
SECRET: dict[str, Any] = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                          "metadata": {"name": "creds", "namespace": "ns"},
                          "data": {"token": base64.b64encode(b"s3cret\n").decode()}}
POD: dict[str, Any] = {"metadata": {"name": "p", "namespace": "ns"}, "spec": {
    "volumes": [{"name": "config", "configMap": {"name": "cfg"}},
                {"name": "creds", "secret": {"secretName": "creds", "defaultMode": 0o400}},
                {"name": "scratch", "emptyDir": {}}],
    "containers": [{"name": "c", "volumeMounts": [
        {"name": "config", "mountPath": "/etc/x"}, {"name": "creds", "mountPath": "/etc/c"},
        {"name": "scratch", "mountPath": "/s"}]}]}}
CM_VOL = configvolumes.CONFIG_MAP


def test_every_key_with_the_default_mode_or_the_items_with_their_own() -> None:
    assert configvolumes.payload(CM_VOL, {"name": "cfg"}, CM) == {
        "a.conf": (b"A", 0o644), "b.conf": (b"B", 0o644), "blob": (b"\x00\xff", 0o644)}
    source = {"name": "cfg", "defaultMode": 0o400,
              "items": [{"key": "a.conf", "path": "etc/a"}, {"key": "blob", "path": "b",
                                                             "mode": 0o600}]}
    assert configvolumes.payload(CM_VOL, source, CM) == {"etc/a": (b"A", 0o400),
                                                 "b": (b"\x00\xff", 0o600)}


def test_missing_config_map_or_key_is_kubelets_error_unless_optional() -> None:
    with pytest.raises(podstatus.ConfigError, match='configmap "gone" not found'):
        configvolumes.payload(CM_VOL, {"name": "gone"}, None)
    assert configvolumes.payload(CM_VOL, {"name": "gone", "optional": True}, None) == {}
    items = {"name": "cfg", "items": [{"key": "nope", "path": "n"}]}
    with pytest.raises(podstatus.ConfigError,
                       match="configmap references non-existent config key: nope"):
        configvolumes.payload(CM_VOL, items, CM)
    assert configvolumes.payload(CM_VOL, {**items, "optional": True}, CM) == {}
    with pytest.raises(podstatus.ConfigError, match="invalid path"):
        configvolumes.payload(CM_VOL, {"name": "cfg", "items": [{"key": "a.conf", "path": "../x"}]},
                              CM)


def test_a_secret_volume_holds_its_decoded_data_in_kubelets_words() -> None:
    secret = configvolumes.object_volumes(POD)["creds"]
    assert secret == (configvolumes.SECRET, {"secretName": "creds", "defaultMode": 0o400})
    assert configvolumes.payload(*secret, SECRET) == {"token": (b"s3cret\n", 0o400)}
    with pytest.raises(podstatus.ConfigError, match=r'^secret "creds" not found$'):
        configvolumes.payload(*secret, None)
    with pytest.raises(podstatus.ConfigError,
                       match=r"^references non-existent secret key: nope$"):
        configvolumes.payload(configvolumes.SECRET, {"secretName": "creds",
                                                     "items": [{"key": "nope", "path": "n"}]},
                              SECRET)
    assert configvolumes.volume_dir(Path("/p"), configvolumes.SECRET, "creds") == \
        Path("/p/volumes/kubernetes.io~secret/creds")


def test_the_process_runtime_refuses_a_configmap_mount() -> None:
    container = POD["spec"]["containers"][0]
    assert configvolumes.mounted(POD, container) == [("config", "/etc/x"), ("creds", "/etc/c")]
    with pytest.raises(podstatus.ConfigError,
                       match="cannot mount configMap, secret or downwardAPI volumes"):
        configvolumes.check_mounts(POD, container, False)
    configvolumes.check_mounts(POD, container, True)


def test_the_atomic_writer_swaps_data_and_keeps_links_to_what_is_there(tmp_path: Path) -> None:
    target = tmp_path / "config"
    assert atomicwriter.write(target, {"a": (b"1", 0o644), "d/b": (b"2", 0o600)})
    assert os.readlink(target / "a") == "..data/a" and os.readlink(target / "d") == "..data/d"
    assert (target / "d" / "b").read_bytes() == b"2"
    assert ((target / "d" / "b").stat().st_mode & 0o777) == 0o600
    first = os.readlink(target / "..data")
    assert not atomicwriter.write(target, {"a": (b"1", 0o644), "d/b": (b"2", 0o600)})
    assert atomicwriter.write(target, {"a": (b"3", 0o644)})
    assert (target / "a").read_bytes() == b"3"
    assert not (target / "d").exists() and not (target / first).exists()  # old version gone
    assert sorted(p.name for p in target.iterdir() if not p.name.startswith("..")) == ["a"]


def test_a_downward_api_volume_holds_the_pods_fields_as_kubelet_writes_them() -> None:
    pod = {"metadata": {"name": "agent-x", "namespace": "logging", "uid": "u-1",
                        "labels": {"app": "agent", "tier": "node"},
                        "annotations": {"note": 'say "hi"\n'}},
           "spec": {"containers": [{"name": "app", "resources": {"limits": {"cpu": "250m"}}}]}}
    source = {"defaultMode": 0o600, "items": [
        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
        {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}},
        {"path": "meta/name", "fieldRef": {"fieldPath": "metadata.name"}, "mode": 0o644},
        {"path": "app", "fieldRef": {"fieldPath": "metadata.labels['app']"}},
        {"path": "cpu_m", "resourceFieldRef": {"containerName": "app", "resource": "limits.cpu",
                                               "divisor": "1m"}},
        {"path": "mem", "resourceFieldRef": {"containerName": "app",
                                             "resource": "limits.memory", "divisor": "1Mi"}},
    ]}
    assert configvolumes.payload(configvolumes.DOWNWARD_API, source, pod,
                                 {"memory": "2Gi"}) == {
        "labels": (b'app="agent"\ntier="node"', 0o600),
        "annotations": (b'note="say \\"hi\\"\\n"', 0o600),
        "meta/name": (b"agent-x", 0o644), "app": (b"agent", 0o600),
        "cpu_m": (b"250", 0o600), "mem": (b"2048", 0o600)}
    # a volume has the pod's metadata alone (the node and the pod's IP are env's)
    with pytest.raises(podstatus.ConfigError, match=r"^unsupported fieldPath: spec\.nodeName$"):
        configvolumes.payload(configvolumes.DOWNWARD_API, {"items": [
            {"path": "n", "fieldRef": {"fieldPath": "spec.nodeName"}}]}, pod)
    assert configvolumes.downward_inputs(pod) == (pod["metadata"]["labels"],
                                                  pod["metadata"]["annotations"])
