"""Secrets: stringData as the v1 conversion reads it, upstream's validation messages of each
type, the table, kubectl's protobuf body, and the view role that may not read them."""

from __future__ import annotations

import base64
from typing import Any

from services.apiserver import auth, protobuf
from shared.api import tables
from shared.model import defaults, validation


def secret(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "creds", "namespace": "logging"}, **fields}


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def test_string_data_goes_into_data_and_the_type_defaults_to_opaque() -> None:
    got = defaults.default(secret(data={"a": b64(b"1"), "b": b64(b"2")},
                                  stringData={"b": "two", "c": "thrée"}))
    assert got["type"] == "Opaque" and "stringData" not in got
    assert got["data"] == {"a": b64(b"1"), "b": b64(b"two"), "c": b64("thrée".encode())}
    assert validation.validate(got) == []


def test_validation_of_each_type_as_upstream() -> None:
    def causes(**fields: Any) -> list[str]:
        return validation.validate(defaults.default(secret(**fields)))
    assert causes(data={"..x": b64(b"1")}) == [
        "data[..x]: Invalid value: \"..x\": must not start with '..'"]
    assert causes(data={"k": "not base64!"}) == [
        'data[k]: Invalid value: "<secret contents redacted>": illegal base64 data at input '
        "byte 3"]
    assert causes(data={"k": b64(b"x" * (1024 * 1024 + 1))}) == [
        "data: Too long: must have at most 1048576 bytes"]
    assert causes(type="kubernetes.io/tls", data={"tls.crt": b64(b"c")}) == [
        "data[tls.key]: Required value"]
    assert causes(type="kubernetes.io/basic-auth") == [
        "data[username]: Required value", "data[password]: Required value"]
    assert causes(type="kubernetes.io/basic-auth", data={"password": ""}) == []
    assert causes(type="kubernetes.io/ssh-auth") == ["data[ssh-privatekey]: Required value"]
    assert causes(type="kubernetes.io/service-account-token") == [
        "metadata.annotations[kubernetes.io/service-account.name]: Required value"]
    assert causes(type="kubernetes.io/dockerconfigjson",
                  data={".dockerconfigjson": b64(b"{}")}) == []
    assert causes(type="kubernetes.io/dockerconfigjson",
                  data={".dockerconfigjson": b64(b"[1]")})[0].startswith(
        'data[.dockerconfigjson]: Invalid value: "<secret contents redacted>": ')
    assert causes(type="example.com/anything") == []


def test_its_type_never_changes_and_an_immutable_one_keeps_its_data() -> None:
    old = defaults.default(secret(data={"k": b64(b"1")}, immutable=True))
    assert validation.validate(defaults.default(secret(type="kubernetes.io/tls",
                                                       data={"k": b64(b"1")},
                                                       immutable=True)), old)[0] == \
        'type: Invalid value: "kubernetes.io/tls": field is immutable'
    assert validation.validate(defaults.default(secret(data={"k": b64(b"2")},
                                                       immutable=True)), old) == [
        "data: Forbidden: field is immutable when `immutable` is set"]


def test_the_table_and_the_protobuf_body() -> None:
    assert [c.header for c in tables.columns("Secret")] == ["NAME", "TYPE", "DATA", "AGE"]
    got = defaults.default(secret(data={"a": b64(b"1"), "b": b64(b"2")}))
    got["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    assert tables.cells("Secret", got, 1767225640.0) == ["creds", "Opaque", 2, "40s"]
    entry = protobuf.text(1, "k") + protobuf.message(2, b"\x00\xff")
    body = (protobuf.message(1, protobuf.text(1, "creds")) + protobuf.message(2, entry)
            + protobuf.text(3, "Opaque")
            + protobuf.message(4, protobuf.text(1, "s") + protobuf.text(2, "v")))
    type_meta = protobuf.text(1, "v1") + protobuf.text(2, "Secret")
    assert protobuf.decode(protobuf.MAGIC + protobuf.message(1, type_meta)
                           + protobuf.message(2, body)) == {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"},
        "data": {"k": b64(b"\x00\xff")}, "type": "Opaque", "stringData": {"s": "v"}}


def test_view_reads_everything_but_secrets_and_edit_reads_them() -> None:
    viewer, editor = auth.User("v", "view"), auth.User("e", "edit")
    assert auth.authorize(viewer, "list", "pods", True)
    assert auth.authorize(viewer, "get", "configmaps", True)
    assert not auth.authorize(viewer, "get", "secrets", True)
    assert not auth.authorize(viewer, "watch", "secrets", False)
    assert auth.authorize(editor, "get", "secrets", True)
    assert not auth.authorize(editor, "create", "secrets", True)
