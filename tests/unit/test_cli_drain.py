"""drain's pod filters, as kubectl's (k8s.io/kubectl/pkg/drain/filters.go: daemonSetFilter,
mirrorPodFilter, localStorageFilter, unreplicatedFilter, run in that order)."""

from __future__ import annotations

from typing import Any

import pytest

from services.cli import drain

Obj = dict[str, Any]


def pod(owner: str | None = None, phase: str = "Running", mirror: bool = False,
        empty_dir: bool = False) -> Obj:
    md: Obj = {"name": "p", "namespace": "default"}
    if owner:
        md["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": "own",
                                  "uid": "u", "controller": True}]
    if mirror:
        md["annotations"] = {drain.MIRROR_POD_ANNOTATION: "x"}
    spec: Obj = {"containers": [{"name": "c", "image": "i"}]}
    if empty_dir:
        spec["volumes"] = [{"name": "v", "emptyDir": {}}]
    return {"metadata": md, "spec": spec, "status": {"phase": phase}}


GONE = 'daemonsets.apps "own" not found'


@pytest.mark.parametrize(("the_pod", "opts", "ds_exists", "expected"), [
    (pod("DaemonSet"), drain.Options(), True, drain.Verdict(False, "error", drain.DAEMONSET_FATAL)),
    (pod("DaemonSet"), drain.Options(ignore_daemonsets=True), True,
     drain.Verdict(False, "warning", drain.DAEMONSET_WARNING)),
    (pod("DaemonSet", phase="Failed"), drain.Options(), True, drain.OKAY),  # finished: goes
    (pod("DaemonSet"), drain.Options(), False, drain.Verdict(False, "error", GONE)),
    (pod("DaemonSet"), drain.Options(force=True), False, drain.Verdict(True, "warning", GONE)),
    (pod(mirror=True), drain.Options(), True, drain.Verdict(False, "skip")),
    (pod("ReplicaSet", empty_dir=True), drain.Options(), True,
     drain.Verdict(False, "error", drain.LOCAL_STORAGE_FATAL)),
    # the localStorage warning is replaced by unreplicatedFilter's okay (upstream's TODO)
    (pod("ReplicaSet", empty_dir=True), drain.Options(delete_emptydir_data=True), True,
     drain.OKAY),
    (pod(), drain.Options(), True, drain.Verdict(False, "error", drain.UNMANAGED_FATAL)),
    (pod(), drain.Options(force=True), True,
     drain.Verdict(True, "warning", drain.UNMANAGED_WARNING)),
    (pod(phase="Succeeded"), drain.Options(), True, drain.OKAY),
    (pod("ReplicaSet"), drain.Options(), True, drain.OKAY),
])
def test_verdict_follows_kubectls_filters(the_pod: Obj, opts: drain.Options, ds_exists: bool,
                                          expected: drain.Verdict) -> None:
    assert drain.verdict(the_pod, opts, lambda ns, name: None if ds_exists else GONE) == expected


def test_aggregate_reads_as_utilerrors_aggregate() -> None:
    assert drain.aggregate(["a"]) == "a"
    assert drain.aggregate(["a", "b"]) == "[a, b]"
