"""Claiming pods (§c.3, ControllerRefManager): adopt orphans, release non-matching, ignore others."""

from __future__ import annotations

from shared.daemonset import claim
from tests.unit.daemonset_fixtures import DS_UID, make_ds, make_pod

OTHER = {"app": "other"}


def test_adoption_of_orphans() -> None:
    ds = make_ds()
    orphan = make_pod("orphan", "n")
    claimed, actions = claim.claim(ds, [orphan])
    assert claimed == [orphan]
    assert [(a.kind, a.name, a.uid, a.adopt, a.owner_ref["uid"]) for a in actions] == [
        ("Pod", "orphan", "uid-orphan", True, DS_UID)
    ]


def test_orphan_not_adopted_when_terminating_non_matching_or_other_namespace() -> None:
    ds = make_ds()
    elsewhere = make_pod("elsewhere", "n")
    elsewhere["metadata"]["namespace"] = "other-ns"
    pods = [make_pod("t", "n", deleting=True), make_pod("o", "n", labels=OTHER), elsewhere]
    assert claim.claim(ds, pods) == ([], [])


def test_release_of_owned_non_matching() -> None:
    ds = make_ds()
    owned = make_pod("p", "n", ds=ds, labels=OTHER)
    claimed, actions = claim.claim(ds, [owned])
    assert claimed == []
    assert [(a.name, a.adopt, a.owner_ref["uid"]) for a in actions] == [("p", False, DS_UID)]


def test_owned_matching_claimed_even_when_terminating() -> None:
    ds = make_ds()
    pod = make_pod("p", "n", ds=ds, deleting=True)
    assert claim.claim(ds, [pod]) == ([pod], [])


def test_daemonset_being_deleted_neither_adopts_nor_releases() -> None:
    ds = make_ds()
    ds["metadata"]["deletionTimestamp"] = "2023-01-01T00:00:00Z"
    pods = [make_pod("orphan", "n"), make_pod("p", "n", ds=ds, labels=OTHER)]
    assert claim.claim(ds, pods) == ([], [])


def test_pods_of_another_controller_ignored() -> None:
    ds = make_ds()
    foreign = make_pod("f", "n", ds=make_ds("bar", uid="x"))
    assert claim.claim(ds, [foreign]) == ([], [])


def test_nodes_to_daemon_pods_groups_by_target_node() -> None:
    ds = make_ds()
    bound = make_pod("a", "n1", ds=ds)
    unbound = make_pod("b", None, ds=ds, affinity_node="n2")
    nowhere = make_pod("c", None, ds=ds)
    deleted_terminal = make_pod("d", "n1", ds=ds, phase="Failed", deleting=True)
    pods = [bound, unbound, nowhere, deleted_terminal]
    assert claim.nodes_to_daemon_pods(pods) == {"n1": [bound], "n2": [unbound]}
    assert claim.nodes_to_daemon_pods(pods, include_deleted_terminal=True) == {
        "n1": [bound, deleted_terminal],
        "n2": [unbound],
    }
