"""Validators remembered by value (shared.model.memo): the same errors as the validator
itself, for values that look alike but differ in type, and each value validated once."""

from __future__ import annotations

import functools
import math
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from shared.model import memo, metavalidation, podvalidation, schedvalidation, validation


def test_a_remembered_validator_gives_the_validators_own_errors() -> None:
    values: list[Any] = [
        None, [], [{"key": "a", "operator": "Exists"}], [{"key": 1}], [{"key": True}],
        [{"tolerationSeconds": 1}], [{"tolerationSeconds": 1.0}],
        [{"tolerationSeconds": math.nan}], [{"tolerationSeconds": None}],
        [{"key": b"a"}], [{"key": "a"}], ({"key": "a"},), [{"key": "bad key!"}],
        [{"tolerationSeconds": 2 ** 70}], "not a list",
    ]
    plain = schedvalidation.validate_tolerations.__wrapped__  # type: ignore[attr-defined]
    for _ in range(2):  # the second round from the cache
        for value in values:
            for path in ("spec.tolerations", "spec.template.spec.tolerations"):
                want: list[str] = []
                plain(value, path, want)
                got: list[str] = []
                schedvalidation.validate_tolerations(value, path, got)
                assert got == want, (value, path)


def test_a_value_is_validated_once_per_path() -> None:
    calls: list[tuple[Any, str]] = []

    @memo.by_value
    def check(value: Any, path: str, errs: list[str]) -> None:
        calls.append((value, path))
        if value != {"app": "x"}:
            errs.append(f"{path}: Invalid value")

    for _ in range(3):
        for value in ({"app": "x"}, {"app": "y"}, {"app": 1}, {"app": True}):
            errs: list[str] = ["before"]
            check(value, "metadata.labels", errs)
            bad = [] if value == {"app": "x"} else ["metadata.labels: Invalid value"]
            assert errs == ["before", *bad]
    check({"app": "x"}, "spec.template.metadata.labels", [])
    assert len(calls) == 5


def test_remembered_labels_and_owner_references_give_their_validators_errors() -> None:
    ref = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "u1",
           "controller": True}
    cases = [
        (metavalidation.validate_labels,
         [{"app": "x"}, {"app": "x y"}, {"-bad": "x"}, {"app": 1}, ["app"], None]),
        (metavalidation.validate_owner_references,
         [[ref], [ref, {**ref, "uid": "u2"}], [{**ref, "controller": "yes"}], [{}], {}]),
    ]
    for fn, values in cases:
        plain = fn.__wrapped__  # type: ignore[attr-defined]
        for value in values * 2:
            want: list[str] = []
            plain(value, "metadata.x", want)
            got: list[str] = []
            fn(value, "metadata.x", got)
            assert got == want, (fn.__name__, value)


def test_remembered_pod_specs_and_metadata_give_their_validators_errors() -> None:
    ctr = {"name": "c", "image": "img:1", "volumeMounts": [{"name": "data", "mountPath": "/d"}]}
    spec = {"containers": [ctr], "volumes": [{"name": "data", "emptyDir": {}}],
            "nodeName": "node-1"}
    specs: list[Any] = [
        spec, {**spec, "nodeName": "node-2"}, {**spec, "volumes": []},  # the mount's volume gone
        {**spec, "containers": [{**ctr, "name": 1}]}, {**spec, "containers": [ctr, ctr]},
        {**spec, "containers": [{**ctr, "image": True}]}, {**spec, "nodeName": "Bad_Name"},
        {**spec, "restartPolicy": "Sometimes"}, {"containers": []}, None, "not a map",
    ]
    md = {"name": "p", "namespace": "ns", "labels": {"app": "x"}, "generation": 1}
    own = {"uid": "u1", "creationTimestamp": "2026-01-01T00:00:00Z", "resourceVersion": "1-0"}
    metas: list[Any] = [md, {**md, "name": "Bad_Name"}, {**md, "labels": ["app"]},
                        {**md, "generation": "1"}, {**md, "namespace": None}, {"name": "p"},
                        None, {**md, **own}, {**md, **own, "uid": 1},
                        {**md, **own, "creationTimestamp": 2}, {**md, "resourceVersion": b"1"},
                        {**md, "name": ""}, {**md, "name": None, "generateName": "p-"},
                        {**md, "name": 7}, {**md, **own, "labels": {"app": "x y"}},
                        {**md, "namespace": "Bad_NS"}, {**md, "finalizers": "f"}]
    cases = [(podvalidation.validate_pod_spec, specs, ("spec", "spec.template.spec")),
             (metavalidation.validate_namespaced_meta, metas, ("metadata",)),
             (metavalidation.validate_cluster_meta, metas, ("metadata",))]
    plain_spec = functools.partial(
        podvalidation._pod_spec,
        rest_of=podvalidation._spec_rest.__wrapped__)  # type: ignore[attr-defined]
    plain_meta = {
        metavalidation.validate_namespaced_meta:
            functools.partial(metavalidation.validate_object_meta, namespaced=True),
        metavalidation.validate_cluster_meta:
            functools.partial(metavalidation.validate_object_meta, namespaced=False)}
    for fn, values, paths in cases:
        plain = plain_spec if fn is podvalidation.validate_pod_spec else plain_meta[fn]
        for value in values * 2:  # the second round from the cache
            for path in paths:
                want: list[str] = []
                plain(value, path, want)
                got: list[str] = []
                fn(value, path, got)
                assert got == want, (fn.__name__, value, path)
    # what the remembered functions stand for: the full validators' own errors
    for value in metas:
        for namespaced, fn in ((True, metavalidation.validate_namespaced_meta),
                               (False, metavalidation.validate_cluster_meta)):
            want = []
            metavalidation.validate_object_meta(value, "metadata", want, namespaced=namespaced)
            got = []
            fn(value, "metadata", got)
            assert got == want, value
    bad: list[str] = []
    podvalidation.validate_pod_spec({**spec, "volumes": []}, "spec", bad)
    assert any("volumeMounts[0].name" in e for e in bad), bad  # the volumes reach the containers


def test_the_pods_of_a_daemonset_share_one_remembered_metadata(monkeypatch: Any) -> None:
    """Each pod a DaemonSet creates has its own name, uid and creation time, the rest of its
    metadata the same: the rest is validated once, each pod's own fields by themselves."""
    calls: list[Any] = []
    whole = metavalidation.validate_object_meta

    def counted(value: Any, path: str, errs: list[str], **kw: Any) -> None:
        calls.append(value)
        whole(value, path, errs, **kw)

    monkeypatch.setattr(metavalidation, "validate_object_meta", counted)
    rest = {"generateName": "agent-", "namespace": "memo-shared", "labels": {"app": "agent"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent",
                                 "uid": "u0", "controller": True}]}
    for i in range(50):
        errs: list[str] = []
        metavalidation.validate_namespaced_meta(
            {"name": f"agent-{i:05d}", **rest, "uid": f"u{i}",
             "creationTimestamp": "2026-01-01T00:00:00Z"}, "metadata", errs)
        assert errs == []
    assert len(calls) == 1
    errs = []  # a pod whose own field is wrong: the whole of it, for its errors
    metavalidation.validate_namespaced_meta({"name": "Agent_1", **rest}, "metadata", errs)
    assert len(calls) == 2 and errs and errs[0].startswith("metadata.name: Invalid value")


def test_a_pod_specs_node_fields_keep_their_places_in_upstreams_order() -> None:
    """The rest of a spec is remembered apart from its node's fields (the affinity and
    nodeName, which differ between the pods of a DaemonSet): each error still comes where
    ValidatePodSpec reports it, for the pods of several nodes in turn."""
    for node in ("node-1", "node-2", "Bad_Node"):
        spec = {"containers": [{"name": "c", "image": "i"}], "imagePullSecrets": "x",
                "affinity": {"nodeAffinity": 1}, "serviceAccountName": "Bad_SA",
                "nodeName": node, "activeDeadlineSeconds": 0, "tolerations": "x"}
        errs: list[str] = []
        podvalidation.validate_pod_spec(spec, "spec", errs)
        fields = [e.split(":")[0] for e in errs]
        want = ["spec.imagePullSecrets", "spec.affinity.nodeAffinity",
                "spec.serviceAccountName", "spec.activeDeadlineSeconds", "spec.tolerations"]
        if node == "Bad_Node":
            want.insert(3, "spec.nodeName")
        assert fields == want, errs


def test_a_daemon_pods_affinity_gives_the_full_walks_errors() -> None:
    """A daemon pod's affinity (metadata.name In [its node]) is checked by its node's name
    alone: the same errors as every rule of validate_affinity, and anything that only looks
    like it goes the whole way."""
    def daemon(node: Any) -> dict[str, Any]:
        return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}

    term = daemon("n")["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    values: list[Any] = [
        daemon("node-1"), daemon("Bad_Node"), daemon(""), daemon("a" * 300), daemon(1),
        daemon(None), daemon(["n"]),
        {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [term["nodeSelectorTerms"][0]] * 2}}},
        {**daemon("n"), "podAffinity": 1},
        {"nodeAffinity": {**daemon("n")["nodeAffinity"],
                          "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0}]}},
        {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "NotIn", "values": ["n"]}]}]}}},
        {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["n", "m"]}]}]}}},
        {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": ({"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["n"]}]},)}}},
        {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": {"matchFields": 1}}}},
        {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ("n",)}]}]}}},
        {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["n"], "x": 1}]}]}}},
        {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.labels", "operator": "In", "values": ["n"]}]}]}}},
        {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["n"]}],
                "matchExpressions": []}]}}},
        None, "x", {}, [], ["nodeAffinity"], {"nodeAffinity": None},
    ]
    bad = 0
    for value in values:
        for path in ("spec.affinity", "spec.template.spec.affinity"):
            want: list[str] = []
            schedvalidation._walk_affinity(value, path, want)
            got: list[str] = []
            schedvalidation.validate_affinity(value, path, got)
            assert got == want, (value, path)
            bad += bool(want)
    assert bad > 10  # most of them fail some rule


_status_value = st.one_of(
    st.none(), st.booleans(), st.integers(), st.text(max_size=3),
    st.sampled_from(["Running", "Pending", "", "Weird"]),
    st.lists(st.one_of(st.none(), st.integers(), st.text(max_size=2),
                       st.dictionaries(st.text(max_size=2), st.integers(), max_size=2)),
             max_size=3),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2))


@given(st.one_of(
    st.dictionaries(st.sampled_from(["phase", "hostIP", "podIP", "startTime", "reason",
                                     "message", "conditions", "containerStatuses",
                                     "initContainerStatuses", "podIPs", "other"]),
                    _status_value, max_size=6),
    _status_value))
@example({"conditions": ""})
@example({"phase": "", "podIP": None, "containerStatuses": [None, {}]})
@example({"phase": "Weird"})
@example({"hostIP": 1})
@example("Running")
def test_a_pod_status_checked_at_once_gives_the_full_walks_errors(status: Any) -> None:
    """Every reader checks the status of each pod's every update: all at once when nothing
    is wrong, else the walk that names each error in order; the same errors either way."""
    want: list[str] = []
    validation._walk_pod_status(status, want)
    got: list[str] = []
    validation._validate_pod_status(status, got)
    assert got == want
