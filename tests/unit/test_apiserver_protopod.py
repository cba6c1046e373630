"""A Pod posted as Kubernetes protobuf (``kubectl debug node/...``, ``debug --copy-to``,
``run``) decodes to the JSON shape of the same Pod: upstream's field numbers, Go's plain
fields' zeros unset and its pointers' kept, and a field the tables do not know refused."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml

from services.apiserver import protobuf as pb
from services.apiserver import protopod
from tests import testdata

Obj = dict[str, Any]


def _pod(raw: bytes) -> bytes:
    return pb.MAGIC + pb.message(1, pb.text(1, "v1") + pb.text(2, "Pod")) + pb.message(2, raw)


def _int(number: int, value: int) -> bytes:
    """An int32/int64 field as Go writes it (a negative one as 64-bit two's complement)."""
    return pb.integer(number, value % (1 << 64))


def _flag(number: int, value: bool) -> bytes:
    return pb.integer(number, int(value))  # (Go writes a plain bool false too)


def test_kubectl_debug_nodes_legacy_pod_decodes_to_its_json_shape() -> None:
    # what kubectl v1.32 writes for `debug node/n1 --image=busybox -- sh`: every plain field,
    # set or not, the zero Time of a new object, and an empty status
    meta = pb.text(1, "") + pb.text(2, "node-debugger-n1-") + pb.text(3, "default") + \
        pb.text(4, "") + pb.text(5, "") + pb.text(6, "") + _int(7, 0) + pb.message(8, b"") + \
        pb.message(11, pb.text(1, "app.kubernetes.io/managed-by") + pb.text(2, "kubectl-debug"))
    mount = pb.text(1, "host-root") + _flag(2, False) + pb.text(3, "/host") + pb.text(4, "") + \
        pb.text(6, "")
    container = pb.text(1, "debugger") + pb.text(2, "busybox") + pb.texts(3, ["sh"]) + \
        pb.text(5, "") + pb.message(8, b"") + pb.message(9, mount) + pb.text(13, "") + \
        pb.text(14, "") + _flag(16, True) + _flag(17, False) + _flag(18, True) + \
        pb.text(20, "")
    volume = pb.text(1, "host-root") + pb.message(2, pb.message(1, pb.text(1, "/")))
    spec = pb.message(1, volume) + pb.message(2, container) + pb.text(3, "Never") + \
        pb.text(6, "") + pb.text(8, "") + pb.text(9, "") + pb.text(10, "n1") + \
        _flag(11, True) + _flag(12, True) + _flag(13, True) + pb.text(16, "") + \
        pb.text(17, "") + pb.text(19, "") + pb.message(22, pb.text(2, "Exists")) + \
        pb.text(24, "")
    status = pb.text(1, "") + pb.text(3, "") + pb.text(4, "") + pb.text(5, "") + \
        pb.text(6, "") + pb.text(9, "") + pb.text(11, "") + pb.text(14, "")
    body = _pod(pb.message(1, meta) + pb.message(2, spec) + pb.message(3, status))
    assert pb.decode(body) == {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "node-debugger-n1-", "namespace": "default",
                     "creationTimestamp": None,
                     "labels": {"app.kubernetes.io/managed-by": "kubectl-debug"}},
        "spec": {
            "volumes": [{"name": "host-root", "hostPath": {"path": "/"}}],
            "containers": [{"name": "debugger", "image": "busybox", "command": ["sh"],
                            "resources": {},
                            "volumeMounts": [{"name": "host-root", "mountPath": "/host"}],
                            "stdin": True, "tty": True}],
            "restartPolicy": "Never", "nodeName": "n1", "hostNetwork": True, "hostPID": True,
            "hostIPC": True, "tolerations": [{"operator": "Exists"}]},
        "status": {}}


def test_pointer_fields_keep_a_zero_and_special_types_take_their_json_form() -> None:
    security = pb.message(1, pb.texts(1, ["NET_ADMIN"]) + pb.texts(2, ["ALL"])) + \
        _flag(2, False) + _int(4, 0) + _flag(5, True) + _flag(7, False) + \
        pb.message(11, pb.text(1, "RuntimeDefault"))
    probe = pb.message(1, pb.message(2, pb.text(1, "/healthz") + pb.message(
        2, _int(1, 1) + _int(2, 0) + pb.text(3, "http")) + pb.text(4, "HTTP"))) + \
        _int(2, 0) + _int(4, 5) + _int(7, 0)
    tcp = pb.message(1, pb.message(3, pb.message(1, _int(1, 0) + _int(2, 8080))))
    resources = pb.message(1, pb.text(1, "memory") + pb.message(2, pb.text(1, "64Mi"))) + \
        pb.message(2, pb.text(1, "cpu") + pb.message(2, pb.text(1, "250m")))
    env = pb.text(1, "NODE") + pb.text(2, "") + pb.message(3, pb.message(
        1, pb.text(1, "v1") + pb.text(2, "spec.nodeName")))
    secret_env = pb.text(1, "TOKEN") + pb.message(3, pb.message(4, pb.message(
        1, pb.text(1, "creds")) + pb.text(2, "token") + _flag(3, False)))
    container = pb.text(1, "app") + pb.message(6, pb.text(1, "http") + _int(2, 0) +
                                               _int(3, 8080) + pb.text(4, "TCP")) + \
        pb.message(7, env) + pb.message(7, secret_env) + pb.message(8, resources) + \
        pb.message(10, probe) + pb.message(11, tcp) + pb.message(15, security) + \
        pb.text(24, "Always")
    pod_security = _int(2, 1000) + _flag(3, True) + pb.integer(4, 5) + pb.integer(4, 6) + \
        pb.message(4, pb.varint(7) + pb.varint(8)) + _int(5, 0)  # unpacked, then packed
    created = int(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC).timestamp())
    meta = pb.text(1, "web") + pb.message(8, _int(1, created) + _int(2, 500)) + \
        _int(10, 0) + pb.message(13, pb.text(1, "DaemonSet") + pb.text(3, "web") +
                                 pb.text(4, "u-1") + pb.text(5, "apps/v1") + _flag(6, True))
    spec = pb.message(2, container) + _int(4, 0) + _flag(11, False) + \
        pb.message(14, pod_security) + _flag(21, False) + _int(25, -5) + \
        pb.message(22, pb.text(1, "k") + pb.text(2, "Equal") + pb.text(3, "v") +
                   pb.text(4, "NoExecute") + _int(5, 0)) + \
        pb.message(1, pb.text(1, "cfg") + pb.message(2, pb.message(19, pb.message(
            1, pb.text(1, "app-config")) + pb.message(2, pb.text(1, "k") + pb.text(2, "p")) +
            _int(3, 0o644))))
    doc = pb.decode(_pod(pb.message(1, meta) + pb.message(2, spec)))
    assert doc["metadata"] == {
        "name": "web", "creationTimestamp": "2026-01-02T03:04:05Z",
        "deletionGracePeriodSeconds": 0,
        "ownerReferences": [{"kind": "DaemonSet", "name": "web", "uid": "u-1",
                             "apiVersion": "apps/v1", "controller": True}]}
    spec_doc = doc["spec"]
    assert spec_doc["terminationGracePeriodSeconds"] == 0 and "hostNetwork" not in spec_doc
    assert spec_doc["automountServiceAccountToken"] is False and spec_doc["priority"] == -5
    assert spec_doc["securityContext"] == {"runAsUser": 1000, "runAsNonRoot": True,
                                           "supplementalGroups": [5, 6, 7, 8], "fsGroup": 0}
    assert spec_doc["tolerations"] == [{"key": "k", "operator": "Equal", "value": "v",
                                        "effect": "NoExecute", "tolerationSeconds": 0}]
    assert spec_doc["volumes"] == [{"name": "cfg", "configMap": {
        "name": "app-config", "items": [{"key": "k", "path": "p"}], "defaultMode": 420}}]
    (c,) = spec_doc["containers"]
    assert c["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    assert c["env"] == [
        {"name": "NODE", "valueFrom": {"fieldRef": {"apiVersion": "v1",
                                                    "fieldPath": "spec.nodeName"}}},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token",
                                                         "optional": False}}}]
    assert c["resources"] == {"limits": {"memory": "64Mi"}, "requests": {"cpu": "250m"}}
    assert c["livenessProbe"] == {"httpGet": {"path": "/healthz", "port": "http",
                                              "scheme": "HTTP"},
                                  "periodSeconds": 5, "terminationGracePeriodSeconds": 0}
    assert c["readinessProbe"] == {"tcpSocket": {"port": 8080}}
    assert c["securityContext"] == {
        "capabilities": {"add": ["NET_ADMIN"], "drop": ["ALL"]}, "privileged": False,
        "runAsUser": 0, "runAsNonRoot": True, "allowPrivilegeEscalation": False,
        "seccompProfile": {"type": "RuntimeDefault"}}
    assert c["restartPolicy"] == "Always"


@pytest.mark.parametrize(("raw", "said"), [
    # Container.restartPolicyRules (25): newer than the tables
    (pb.message(2, pb.message(2, pb.text(1, "c") + pb.message(25, b""))), "field 25 of Container"),
    # a gcePersistentDisk volume (VolumeSource 3), which the tables leave out
    (pb.message(2, pb.message(1, pb.text(1, "v") + pb.message(2, pb.message(3, b"")))),
     "field 3 of VolumeSource"),
    # ObjectMeta.clusterName (15), gone upstream
    (pb.message(1, pb.text(15, "c1")), "field 15 of ObjectMeta"),
    # a string where an int is
    (pb.message(2, pb.text(4, "30")), "field 4 (terminationGracePeriodSeconds) of PodSpec "
                                      "has wire type 2, not 0"),
])
def test_a_field_the_tables_do_not_read_is_refused_not_dropped(raw: bytes, said: str) -> None:
    with pytest.raises(pb.ProtobufError) as err:
        pb.decode(_pod(raw))
    assert said in str(err.value)


def test_other_kinds_still_skip_the_fields_they_do_not_read() -> None:
    ns = pb.message(1, pb.text(1, "team") + pb.text(99, "x"))
    body = pb.MAGIC + pb.message(1, pb.text(1, "v1") + pb.text(2, "Namespace")) + \
        pb.message(2, ns)
    assert pb.decode(body)["metadata"] == {"name": "team"}


# ---- round trip: a JSON-shaped Pod written by the tables, as Go would, reads back the same


def _keys(name: str) -> dict[str, tuple[int, str, str | None, bool]]:
    """json name → (field number, type, the inline message it is in if any, kept as sent)."""
    out: dict[str, tuple[int, str, str | None, bool]] = {}
    for number, spec in protopod.SCHEMA[name].items():
        if spec.startswith("^"):
            out.update({k: (number, kind, spec[1:], kept)
                        for k, (_, kind, _, kept) in _keys(spec[1:]).items()})
            continue
        key, _, kind = spec.partition(":")
        out[key.rstrip("!")] = (number, kind.rstrip("!") or "str", None, "!" in spec)
    return out


def _as_go_writes(name: str, obj: Obj) -> Obj:
    """``obj`` as Go's JSON of it would be: a plain field's zero (``readOnly: false``) left
    out."""
    keys, out = _keys(name), {}
    for key, value in obj.items():
        _, kind, _, kept = keys[key]
        inner = kind.strip("[]")
        if inner in protopod.SCHEMA:
            value = [_as_go_writes(inner, v) for v in value] if isinstance(value, list) \
                else _as_go_writes(inner, value)
        elif not kept and value in ("", 0):
            continue
        out[key] = value
    return out


def _encode(name: str, obj: Obj) -> bytes:
    keys, out, inline = _keys(name), b"", dict[tuple[int, str], Obj]()
    for key, value in obj.items():
        number, kind, via, _ = keys[key]
        if via is not None:
            inline.setdefault((number, via), {})[key] = value
        else:
            out += _value(number, kind, value)
    return out + b"".join(pb.message(n, _encode(sub, part)) for (n, sub), part in inline.items())


def _value(number: int, kind: str, value: Any) -> bytes:
    if kind.startswith("["):
        return b"".join(_value(number, kind[1:-1], v) for v in value)
    if kind.startswith("{"):
        of = (lambda v: pb.message(2, pb.text(1, v))) if kind == "{qty}" else \
            (lambda v: pb.text(2, v))
        return b"".join(pb.message(number, pb.text(1, k) + of(v)) for k, v in value.items())
    if kind == "str":
        return pb.text(number, value)
    if kind in ("int", "bool"):
        return _int(number, int(value))
    if kind == "qty":
        return pb.message(number, pb.text(1, value))
    if kind == "intstr":
        return pb.message(number, _int(1, 1) + pb.text(3, value) if isinstance(value, str)
                          else _int(1, 0) + _int(2, value))
    if kind == "time":
        when = value and datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        return pb.message(number, _int(1, int(when.timestamp())) if when else b"")
    if kind == "rawjson":
        return pb.message(number, pb.text(1, json.dumps(value)))
    return pb.message(number, _encode(kind, value))


def _templates() -> list[Obj]:
    found = []
    for path in testdata.manifests():
        for doc in yaml.safe_load_all(path.read_text()):
            template = ((doc or {}).get("spec") or {}).get("template")
            if template:
                found.append({"metadata": template.get("metadata") or {},
                              "spec": template["spec"]})
    return found


def _json(value: Any) -> Any:
    """A manifest's value as its JSON would be: quantities are strings."""
    return json.loads(json.dumps(value, default=str))


def test_every_testdata_pod_template_round_trips_through_the_tables() -> None:
    templates = _templates()
    assert len(templates) >= 5
    for pod in templates:
        pod = _json(pod)
        for c in pod["spec"].get("containers", []) + pod["spec"].get("initContainers", []):
            for part in ("limits", "requests"):  # (a YAML 1 is a quantity's "1")
                quantities = (c.get("resources") or {}).get(part) or {}
                quantities.update({k: str(v) for k, v in quantities.items()})
        assert pb.decode(_pod(_encode("Pod", pod))) == {
            "apiVersion": "v1", "kind": "Pod", **_as_go_writes("Pod", pod)}, pod
