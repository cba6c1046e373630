"""ConfigMap validation (upstream's ValidateConfigMap / ValidateConfigMapUpdate and
IsConfigMapKey) and its content as bytes."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest

from shared.model import configmap, validation

Obj = dict[str, Any]

KEY_MSG = (
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. "
    "'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is "
    "'[-._a-zA-Z0-9]+')"
)
IMMUTABLE = "Forbidden: field is immutable when `immutable` is set"


def cm(**fields: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "fluent-bit-config", "namespace": "logging"}, **fields}


def test_valid_config_map_with_data_and_binary_data() -> None:
    obj = cm(data={"fluent-bit.conf": "[SERVICE]\n", "a.b_c-d": ""},
             binaryData={"logo.png": base64.b64encode(b"\x89PNG\x00\xff").decode()})
    assert validation.validate(obj) == []


def test_name_must_be_a_dns_subdomain() -> None:
    obj = cm()
    obj["metadata"]["name"] = "Bad_Name"
    assert [e.split(":")[0] for e in validation.validate(obj)] == ["metadata.name"]


@pytest.mark.parametrize("key, messages", [
    ("a b", [KEY_MSG]),
    (".", ["must not be '.'"]),
    ("..", ["must not be '..'"]),
    ("..data", ["must not start with '..'"]),
    ("k" * 254, ["must be no more than 253 characters"]),
])
def test_keys_must_be_config_keys(key: str, messages: list[str]) -> None:
    assert validation.validate(cm(data={key: "x"})) == [
        f'data[{key}]: Invalid value: "{key}": {m}' for m in messages]
    assert validation.validate(cm(binaryData={key: "eA=="})) == [
        f'binaryData[{key}]: Invalid value: "{key}": {m}' for m in messages]


def test_a_key_may_not_be_in_both_data_and_binary_data() -> None:
    assert validation.validate(cm(data={"k": "x"}, binaryData={"k": "eA=="})) == [
        'data[k]: Invalid value: "k": duplicate of key present in binaryData']


def test_binary_data_must_be_base64() -> None:
    assert validation.validate(cm(binaryData={"k": "no*pe"})) == [
        'binaryData[k]: Invalid value: "no*pe": illegal base64 data at input byte 2']


def test_total_size_is_at_most_one_mebibyte() -> None:
    half = "x" * (configmap.MAX_SIZE // 2)
    binary = base64.b64encode(b"y" * (configmap.MAX_SIZE // 2)).decode()
    assert validation.validate(cm(data={"a": half}, binaryData={"b": binary})) == []
    assert validation.validate(cm(data={"a": half + "x"}, binaryData={"b": binary})) == [
        ": Too long: must have at most 1048576 bytes"]


def test_immutable_config_map_keeps_data_binary_data_and_immutable() -> None:
    old = cm(data={"a": "1"}, binaryData={"b": "eA=="}, immutable=True)
    new = copy.deepcopy(old)
    new["metadata"]["labels"] = {"tier": "logging"}  # metadata may change
    assert validation.validate(new, old) == []
    new.update(data={"a": "2"}, binaryData={}, immutable=False)
    assert validation.validate(new, old) == [
        f"immutable: {IMMUTABLE}", f"data: {IMMUTABLE}", f"binaryData: {IMMUTABLE}"]


def test_a_mutable_config_map_may_become_immutable_and_change_data() -> None:
    old = cm(data={"a": "1"})
    assert validation.validate(cm(data={"a": "2"}, immutable=True), old) == []


def test_contents_decodes_binary_data() -> None:
    obj = cm(data={"t": "é"}, binaryData={"b": base64.b64encode(b"\x00\xff").decode()})
    assert configmap.contents(obj) == {"t": "é".encode(), "b": b"\x00\xff"}
