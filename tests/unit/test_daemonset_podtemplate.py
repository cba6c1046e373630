"""Daemon pods as created by syncNodes (§c.6.3/4): template, labels, affinity, deterministic name."""

from __future__ import annotations

from typing import Any

import pytest

from shared.daemonset import dsutil, podtemplate
from shared.model import meta
from tests.unit.daemonset_fixtures import NS, make_ds


def test_create_pod_template_adds_tolerations_and_labels() -> None:
    ds = make_ds(template_generation=7)
    tmpl = podtemplate.create_pod_template(ds, "abc123")
    labels = tmpl["metadata"]["labels"]
    assert labels[dsutil.GENERATION_LABEL] == "7"
    assert labels[dsutil.HASH_LABEL] == "abc123"
    assert len(tmpl["spec"]["tolerations"]) == 6
    # the DaemonSet itself is untouched
    assert dsutil.HASH_LABEL not in ds["spec"]["template"]["metadata"]["labels"]
    assert "tolerations" not in ds["spec"]["template"]["spec"]


def test_create_pod_template_without_parseable_generation_or_hash() -> None:
    ds = make_ds(template_generation=None)
    ds["metadata"]["annotations"] = {dsutil.GENERATION_ANNOTATION: "x1"}
    labels = podtemplate.create_pod_template(ds, "")["metadata"]["labels"]
    assert dsutil.GENERATION_LABEL not in labels
    assert dsutil.HASH_LABEL not in labels


def test_new_pod_replaces_required_affinity_and_keeps_the_rest() -> None:
    affinity: dict[str, Any] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "a", "operator": "Exists"}]},
                    {"matchExpressions": [{"key": "b", "operator": "Exists"}]},
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {}}],
        },
        "podAntiAffinity": {"x": 1},
    }
    ds = make_ds(pod_spec={"containers": [], "affinity": affinity})
    ds["spec"]["template"]["metadata"]["annotations"] = {"note": "n"}
    ds["spec"]["template"]["metadata"]["finalizers"] = ["f"]
    pod = podtemplate.new_pod(ds, podtemplate.create_pod_template(ds, "h"), "node-1", "h")
    got = pod["spec"]["affinity"]
    assert got["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
        ]
    }
    assert got["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert got["podAntiAffinity"] == {"x": 1}
    assert "nodeName" not in pod["spec"]
    md = pod["metadata"]
    assert md["namespace"] == NS
    assert md["annotations"] == {"note": "n"}
    assert md["finalizers"] == ["f"]
    assert md["ownerReferences"] == [
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "name": "foo",
            "uid": ds["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert not {"uid", "creationTimestamp", "resourceVersion"} & set(md)
    # the DaemonSet's affinity is untouched
    assert (
        len(
            affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
                "nodeSelectorTerms"
            ]
        )
        == 2
    )


def test_new_pod_creates_missing_affinity() -> None:
    ds = make_ds()
    pod = podtemplate.new_pod(ds, podtemplate.create_pod_template(ds, "h"), "n", "h")
    terms = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert terms["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["n"]


def test_pod_is_a_pure_function_of_its_inputs() -> None:
    ds = make_ds()
    a = podtemplate.new_pod(ds, podtemplate.create_pod_template(ds, "h"), "n", "h")
    b = podtemplate.new_pod(ds, podtemplate.create_pod_template(ds, "h"), "n", "h")
    assert a == b


def test_pod_name_deterministic_alphabet_and_salt() -> None:
    ds = make_ds()
    name = podtemplate.pod_name(ds, "node-1", "h", 0)
    assert name == podtemplate.pod_name(ds, "node-1", "h", 0)
    assert name.startswith("foo-") and len(name) == len("foo-") + 5
    assert set(name[4:]) <= set(meta.NAME_ALPHABET)
    assert podtemplate.pod_name(ds, "node-1", "h", 1) != name
    assert podtemplate.pod_name(ds, "node-2", "h", 0) != name
    assert podtemplate.pod_name(ds, "node-1", "h2", 0) != name


# Upstream names a daemon pod with generateName "<ds-name>-" (getPodsPrefix) and the API
# server appends utilrand.String(5) from "bcdfghjklmnpqrstvwxz2456789"
# (apimachinery pkg/storage/names/generate.go, pkg/util/rand/rand.go): each creation gets a
# new name. Ours: one name per (DaemonSet uid, node, revision, decision, salt).
@pytest.mark.parametrize(
    ("other", "same"),
    [
        (("node-1", "h", 0, "1700000000000-0"), True),  # the same decision, retried/replayed
        (("node-1", "h", 0, "1700000000123-0"), False),  # a later decision (pod recreated)
        (("node-1", "h", 0, "1700000000000-1"), False),
        (("node-1", "h", 1, "1700000000000-0"), False),  # the next salt (a collision)
        (("node-2", "h", 0, "1700000000000-0"), False),
        (("node-1", "h2", 0, "1700000000000-0"), False),
    ],
)
def test_pod_name_is_one_per_decision(other: tuple[str, str, int, str], same: bool) -> None:
    ds = make_ds()
    name = podtemplate.pod_name(ds, "node-1", "h", 0, "1700000000000-0")
    assert name.startswith("foo-") and len(name) == len("foo-") + 5
    assert set(name[4:]) <= set(meta.NAME_ALPHABET)
    assert (podtemplate.pod_name(ds, *other) == name) is same


def test_pod_name_base_truncated_to_58() -> None:
    ds = make_ds(name="d" * 70)
    name = podtemplate.pod_name(ds, "n", "h")
    assert len(name) == 63 and name.startswith("d" * 58)


def test_template_without_labels_cannot_create_pods() -> None:
    ds = make_ds(template_generation=None)
    tmpl = podtemplate.create_pod_template(ds, "")
    tmpl["metadata"]["labels"] = {}
    with pytest.raises(podtemplate.NoLabelsError, match="unable to create pods, no labels"):
        podtemplate.new_pod(ds, tmpl, "n", "")


def test_pods_of_one_template_share_its_values_but_not_their_affinity_or_metadata() -> None:
    """The pods of one template share its spec's values (no deep copy per pod) and each has
    its own spec map, affinity and metadata; the template itself is left as it was."""
    ds = make_ds(pod_spec={"containers": [{"name": "c", "image": "i"}],
                           "affinity": {"podAntiAffinity": {"x": 1}}})
    tmpl = podtemplate.create_pod_template(ds, "h")
    before = podtemplate.clone(tmpl)
    a = podtemplate.new_pod(ds, tmpl, "n1", "h")
    b = podtemplate.new_pod(ds, tmpl, "n2", "h")
    assert a["spec"]["containers"] is b["spec"]["containers"] is tmpl["spec"]["containers"]
    assert a["spec"] is not b["spec"] and a["metadata"] is not b["metadata"]
    assert a["spec"]["affinity"] is not b["spec"]["affinity"]
    assert a["metadata"]["labels"] is not b["metadata"]["labels"]
    assert tmpl == before  # the affinity went into each pod's own spec, not the template's
    assert a["spec"]["affinity"]["podAntiAffinity"] == {"x": 1}
