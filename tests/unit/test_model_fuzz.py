"""Property tests: validation and defaulting never raise, whatever they are given.

Thousands of malformed objects: random JSON-like trees, objects of each kind with random
contents, and mutations of a valid DaemonSet and Pod (random fields deleted or replaced by
random values of random types, at any depth). Every result must be a list of strings in
``field.Error`` shape, and never the validator's own "internal error" safety net.

Each test runs 300 examples (the file takes ~12 s); set ``DAEMONBUS_FUZZ_EXAMPLES`` to dig
deeper.
"""

from __future__ import annotations

import copy
import os
import re
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.model import defaults, labels, validation

FUZZ = settings(
    max_examples=int(os.environ.get("DAEMONBUS_FUZZ_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

_ERROR_SHAPE = re.compile(
    r"(Invalid value|Required value|Unsupported value|Forbidden|Duplicate value|Not found|"
    r"Too long)|^no matches for kind "
)

_FIELD_NAMES = [
    "metadata",
    "spec",
    "status",
    "name",
    "namespace",
    "labels",
    "annotations",
    "selector",
    "matchLabels",
    "matchExpressions",
    "key",
    "operator",
    "values",
    "template",
    "containers",
    "initContainers",
    "image",
    "ports",
    "containerPort",
    "hostPort",
    "protocol",
    "updateStrategy",
    "type",
    "rollingUpdate",
    "maxUnavailable",
    "maxSurge",
    "tolerations",
    "effect",
    "value",
    "volumes",
    "volumeMounts",
    "mountPath",
    "affinity",
    "nodeAffinity",
    "restartPolicy",
    "hostNetwork",
    "taints",
    "revision",
    "data",
    "involvedObject",
    "phase",
    "collisionCount",
    "ownerReferences",
    "finalizers",
    "generateName",
    "env",
    "resources",
]

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | st.sampled_from(
        [
            "",
            "x",
            "In",
            "Exists",
            "RollingUpdate",
            "OnDelete",
            "10%",
            "101%",
            "NoSchedule",
            "Always",
            "app",
            "a/b",
            "-",
            "\ud800",
            "kube-system",
        ]
    )
)
keys = st.text(max_size=10) | st.sampled_from(_FIELD_NAMES)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=5),
    max_leaves=25,
)
# without NaN, so that results can be compared for equality (idempotence)
comparable_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=5),
    max_leaves=25,
)

KINDS = [
    ("apps/v1", "DaemonSet"),
    ("v1", "Pod"),
    ("v1", "Node"),
    ("apps/v1", "ControllerRevision"),
    ("v1", "Event"),
]


def _typed_object(pair: tuple[str, str], body: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": pair[0], "kind": pair[1], **body}


kinded_objects = st.builds(
    _typed_object,
    st.sampled_from(KINDS),
    st.dictionaries(st.sampled_from(_FIELD_NAMES), json_values, max_size=6),
)


def valid_daemonset() -> dict[str, Any]:
    out: dict[str, Any] = defaults.default_daemonset(
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {
                "name": "ds",
                "namespace": "d",
                "labels": {"app": "x"},
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "X", "name": "o", "uid": "u", "controller": True}
                ],
            },
            "spec": {
                "selector": {
                    "matchLabels": {"app": "x"},
                    "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}],
                },
                "minReadySeconds": 5,
                "template": {
                    "metadata": {"labels": {"app": "x"}, "annotations": {"a": "b"}},
                    "spec": {
                        "containers": [
                            {
                                "name": "c",
                                "image": "x:1",
                                "ports": [{"containerPort": 80, "name": "http"}],
                                "env": [{"name": "A", "value": "b"}],
                                "volumeMounts": [{"name": "v", "mountPath": "/v"}],
                            }
                        ],
                        "initContainers": [{"name": "i", "image": "x:1"}],
                        "volumes": [{"name": "v", "hostPath": {"path": "/v"}}],
                        "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
                        "nodeSelector": {"kubernetes.io/os": "linux"},
                        "affinity": {
                            "nodeAffinity": {
                                "requiredDuringSchedulingIgnoredDuringExecution": {
                                    "nodeSelectorTerms": [
                                        {
                                            "matchExpressions": [
                                                {"key": "a", "operator": "In", "values": ["b"]}
                                            ]
                                        }
                                    ]
                                }
                            }
                        },
                    },
                },
                "updateStrategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxUnavailable": "10%", "maxSurge": 0},
                },
            },
            "status": {"numberReady": 1, "collisionCount": 1},
        }
    )
    return out


def valid_pod() -> dict[str, Any]:
    ds = valid_daemonset()
    out: dict[str, Any] = defaults.default_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "ds-abcde", "namespace": "d", "labels": {"app": "x"}},
            "spec": copy.deepcopy(ds["spec"]["template"]["spec"]),
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        }
    )
    return out


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a dict entry or list item in ``value``."""
    out: list[tuple[Any, ...]] = []
    if isinstance(value, dict):
        for k, v in value.items():
            out.append((*prefix, k))
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.append((*prefix, i))
            out.extend(_paths(v, (*prefix, i)))
    return out


def _mutate(obj: Any, path: tuple[Any, ...], replacement: Any, delete: bool) -> None:
    parent = obj
    for step in path[:-1]:
        if not isinstance(parent, dict | list):
            return
        try:
            parent = parent[step]
        except (KeyError, IndexError, TypeError):
            return
    last = path[-1]
    if isinstance(parent, dict):
        if delete:
            parent.pop(last, None)
        else:
            parent[last] = replacement
    elif isinstance(parent, list) and isinstance(last, int) and last < len(parent):
        if delete:
            del parent[last]
        else:
            parent[last] = replacement


@st.composite
def mutated(draw: st.DrawFn, base: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(base)
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        paths = _paths(obj)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        _mutate(obj, path, draw(json_values), draw(st.booleans()))
    return obj


def _check(errors: Any) -> None:
    assert isinstance(errors, list)
    for e in errors:
        assert isinstance(e, str)
        assert not e.startswith("internal error"), e
        assert _ERROR_SHAPE.search(e), e


@FUZZ
@given(json_values)
def test_validate_never_raises_on_random_values(value: Any) -> None:
    _check(validation.validate(value))
    _check(validation.validate(value, old=value))
    _check(validation.validate_daemonset(value))
    _check(validation.validate_daemonset_status(value, value))


@FUZZ
@given(kinded_objects, json_values)
def test_validate_never_raises_on_random_objects_of_each_kind(obj: Any, old: Any) -> None:
    _check(validation.validate(obj))
    _check(validation.validate(obj, old=old))
    _check(validation.validate(defaults.default(obj)))


@FUZZ
@given(mutated(valid_daemonset()))
def test_validate_never_raises_on_mutated_daemonsets(obj: dict[str, Any]) -> None:
    base = valid_daemonset()
    for fn in (validation.validate, validation.validate_daemonset):
        _check(fn(obj))
        _check(fn(obj, base))
        _check(fn(base, obj))
    _check(validation.validate(defaults.default_daemonset(obj)))
    _check(validation.validate_daemonset_status(obj.get("status"), base["status"]))
    spec = obj.get("spec")
    assert isinstance(
        labels.format_selector(spec.get("selector") if isinstance(spec, dict) else None), str
    )


@FUZZ
@given(mutated(valid_pod()))
def test_validate_never_raises_on_mutated_pods(obj: dict[str, Any]) -> None:
    _check(validation.validate(obj))
    _check(validation.validate(obj, valid_pod()))
    _check(validation.validate(defaults.default_pod(obj)))


@FUZZ
@given(json_values | kinded_objects | mutated(valid_daemonset()))
def test_defaulters_never_raise_and_leave_their_input_alone(value: Any) -> None:
    before = repr(value)
    for fn in (
        defaults.default,
        defaults.default_daemonset,
        defaults.default_pod,
        defaults.default_node,
    ):
        fn(value)
    assert repr(value) == before


@FUZZ
@given(
    comparable_values
    | st.builds(
        _typed_object,
        st.sampled_from(KINDS),
        st.dictionaries(st.sampled_from(_FIELD_NAMES), comparable_values, max_size=6),
    )
    | mutated(valid_daemonset())
)
def test_defaulting_is_idempotent(value: Any) -> None:
    for fn in (
        defaults.default,
        defaults.default_daemonset,
        defaults.default_pod,
        defaults.default_node,
    ):
        once = fn(value)
        assert fn(once) == once


@FUZZ
@given(st.text(alphabet="ab=!(), inotx<>1-/.", max_size=20) | st.text(max_size=20))
def test_parse_selector_raises_only_value_error(text: str) -> None:
    try:
        sel = labels.parse_selector(text)
    except ValueError:
        return
    assert labels.parse_selector(str(sel)) == sel
