"""ControllerRevisions (§e): data, hash, constructHistory, rollback, dedup, cleanupHistory."""

from __future__ import annotations

import copy
from typing import Any

from shared.daemonset import dsutil, history, planner
from shared.daemonset.types import (
    CreateRevision,
    DeleteRevision,
    PatchOwner,
    RelabelPod,
    UpdateRevision,
)
from shared.model import meta
from tests.unit.daemonset_fixtures import (
    DS_UID,
    NS,
    current_hash,
    daemon_pod,
    make_ds,
    make_nodes,
    make_pod,
    snapshot,
)

Obj = dict[str, Any]


def with_image(ds: Obj, image: str) -> Obj:
    changed = copy.deepcopy(ds)
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = image
    return changed


def stored(revision: Obj, uid: str | None = None) -> Obj:
    """A revision as the store holds it (with a uid)."""
    cr = copy.deepcopy(revision)
    cr["metadata"]["uid"] = uid or f"uid-{meta.name(cr)}"
    return cr


def revision_for(ds: Obj, number: int, hash: str | None = None) -> Obj:
    return stored(history.new_revision(ds, hash or current_hash(ds), number))


def test_history_revision_data_is_go_canonical_json() -> None:
    ds = make_ds()
    text = history.canonical_json(history.revision_data(ds))
    assert text == (
        '{"spec":{"template":{"$patch":"replace","metadata":{"labels":{"name":"simple-daemon",'
        '"type":"production"}},"spec":{"containers":[{"image":"foo/bar","name":"foo"}]}}}}'
    )
    assert "$patch" not in ds["spec"]["template"]  # the DaemonSet is untouched


def test_history_canonical_json_escapes_like_go() -> None:
    assert history.canonical_json({"b": "<&>", "a": "é\u2028", "n": 2.0}) == (
        '{"a":"é\\u2028","b":"\\u003c\\u0026\\u003e","n":2}'
    )


def test_history_fnv32a_reference_vectors() -> None:
    assert history._fnv32a(b"") == 0x811C9DC5
    assert history._fnv32a(b"a") == 0xE40C292C
    assert history._fnv32a(b"foobar") == 0xBF9CF968


def test_history_compute_hash_properties() -> None:
    tmpl = dsutil.template(make_ds())
    h = history.compute_hash(tmpl, None)
    assert h == history.compute_hash(copy.deepcopy(tmpl), None)
    assert 0 < len(h) <= 10 and set(h) <= set(meta.NAME_ALPHABET)
    assert history.compute_hash(tmpl, 0) != h  # nil and 0 differ
    assert history.compute_hash(tmpl, 1) != history.compute_hash(tmpl, 0)
    assert history.compute_hash(dsutil.template(with_image(make_ds(), "x")), None) != h


def test_history_first_sync_creates_revision() -> None:
    ds = make_ds()
    plan = planner.plan(snapshot(ds, make_nodes(1)))
    creates = [a for a in plan.history if isinstance(a, CreateRevision)]
    assert len(creates) == 1
    cr = creates[0].revision
    h = current_hash(ds)
    assert plan.hash == h
    assert cr["metadata"]["name"] == f"foo-{h}"
    assert cr["metadata"]["namespace"] == NS
    assert cr["metadata"]["labels"] == {
        "name": "simple-daemon",
        "type": "production",
        dsutil.HASH_LABEL: h,
    }
    assert cr["metadata"]["annotations"] == {dsutil.GENERATION_ANNOTATION: "1"}
    assert cr["metadata"]["ownerReferences"][0]["uid"] == DS_UID
    assert cr["revision"] == 1
    assert history.matches(ds, cr)


def test_history_current_revision_found_nothing_to_do() -> None:
    ds = make_ds()
    cr = revision_for(ds, 1)
    plan = planner.plan(snapshot(ds, make_nodes(1), revisions=[cr]))
    assert plan.history == []
    assert plan.hash == current_hash(ds)


def test_history_match_compares_data_only() -> None:
    ds = make_ds()
    cr = revision_for(ds, 1)
    assert history.matches(ds, cr)
    assert not history.matches(with_image(ds, "other"), cr)
    as_text = dict(cr, data=history.canonical_json(history.revision_data(ds)))
    assert history.matches(ds, as_text)


def test_history_template_change_creates_next_revision() -> None:
    v1 = make_ds()
    v2 = with_image(v1, "foo/bar:2")
    plan = planner.plan(snapshot(v2, make_nodes(1), revisions=[revision_for(v1, 1)]))
    creates = [a for a in plan.history if isinstance(a, CreateRevision)]
    assert [c.revision["revision"] for c in creates] == [2]
    assert plan.hash == current_hash(v2) != current_hash(v1)


def test_history_rollback_bumps_old_revision() -> None:
    v1 = make_ds()
    v2 = with_image(v1, "foo/bar:2")
    revisions = [revision_for(v1, 1), revision_for(v2, 2)]
    rolled_back = copy.deepcopy(v1)
    plan = planner.plan(snapshot(rolled_back, make_nodes(1), revisions=revisions))
    assert plan.history == [
        UpdateRevision(
            namespace=NS,
            name=f"foo-{current_hash(v1)}",
            uid=f"uid-foo-{current_hash(v1)}",
            revision=3,
        )
    ]
    assert plan.hash == current_hash(v1)


def test_history_missing_hash_label_added_with_name() -> None:
    ds = make_ds()
    cr = revision_for(ds, 1)
    del cr["metadata"]["labels"][dsutil.HASH_LABEL]
    plan = planner.plan(snapshot(ds, make_nodes(1), revisions=[cr]))
    name = meta.name(cr)
    assert plan.history == [
        UpdateRevision(
            namespace=NS,
            name=name,
            uid=meta.uid(cr),
            labels={"name": "simple-daemon", "type": "production", dsutil.HASH_LABEL: name},
        )
    ]
    assert plan.hash == name  # the label, not a computed hash


def test_history_duplicates_deduped_and_pods_relabelled() -> None:
    ds = make_ds()
    low = revision_for(ds, 1, hash="aaaa")
    high = revision_for(ds, 2, hash="bbbb")
    pods = [
        make_pod("p-a", "node-0", ds=ds, hash="aaaa"),
        make_pod("p-b", "node-1", ds=ds, hash="bbbb"),
        make_pod("p-none", "node-2", ds=ds),
    ]
    plan = planner.plan(snapshot(ds, make_nodes(3), pods, revisions=[high, low]))
    assert plan.hash == "bbbb"
    assert plan.history == [
        RelabelPod(namespace=NS, name="p-a", uid="uid-p-a", labels={dsutil.HASH_LABEL: "bbbb"}),
        RelabelPod(
            namespace=NS, name="p-none", uid="uid-p-none", labels={dsutil.HASH_LABEL: "bbbb"}
        ),
        DeleteRevision(namespace=NS, name=meta.name(low), uid=meta.uid(low)),
    ]


def test_history_dedup_tie_later_one_wins() -> None:
    ds = make_ds()
    first = revision_for(ds, 1, hash="aaaa")
    second = revision_for(ds, 1, hash="bbbb")
    result = history.construct_history(ds, [first, second], [])
    assert result.hash == "bbbb"
    assert [a for a in result.actions if isinstance(a, DeleteRevision)] == [
        DeleteRevision(namespace=NS, name=meta.name(first), uid=meta.uid(first))
    ]


def test_history_adopts_orphans_and_releases_non_matching() -> None:
    ds = make_ds()
    orphan = revision_for(ds, 1)
    del orphan["metadata"]["ownerReferences"]
    stray = revision_for(with_image(ds, "x"), 1, hash="zzzz")
    stray["metadata"]["labels"] = {"app": "other"}
    foreign = revision_for(ds, 5, hash="ffff")
    foreign["metadata"]["ownerReferences"][0]["uid"] = "someone-else"
    result = history.construct_history(ds, [orphan, stray, foreign], [])
    patches = [a for a in result.actions if isinstance(a, PatchOwner)]
    assert [(p.kind, p.name, p.adopt) for p in patches] == [
        ("ControllerRevision", meta.name(orphan), True),
        ("ControllerRevision", meta.name(stray), False),
    ]
    assert result.hash == current_hash(ds)
    assert not any(isinstance(a, CreateRevision) for a in result.actions)
    assert result.old == []


def _old_revisions(ds: Obj, count: int) -> list[Obj]:
    return [revision_for(with_image(ds, f"v{i}"), i, hash=f"h{i}") for i in range(1, count + 1)]


def test_history_cleanup_deletes_oldest_beyond_limit() -> None:
    ds = make_ds(revision_history_limit=2)
    olds = _old_revisions(ds, 5)
    pods = [make_pod("live", "node-0", ds=ds, hash="h1")]
    plan = planner.plan(snapshot(ds, make_nodes(1), pods, revisions=[*olds, revision_for(ds, 6)]))
    # 5 old, keep 2 → kill 3; h1 is live, so h2, h3, h4 go
    assert [d.name for d in plan.cleanup] == [meta.name(olds[i]) for i in (1, 2, 3)]


def test_history_cleanup_keeps_live_revisions_beyond_limit() -> None:
    ds = make_ds(revision_history_limit=0)
    olds = _old_revisions(ds, 2)
    pods = [
        make_pod("a", "node-0", ds=ds, hash="h1"),
        make_pod("b", "node-1", ds=ds, hash="h2", phase="Failed", deleting=True),
    ]
    plan = planner.plan(snapshot(ds, make_nodes(2), pods, revisions=[*olds, revision_for(ds, 3)]))
    assert plan.cleanup == []  # deleted terminal pods count as live here


def test_history_cleanup_default_limit_is_ten() -> None:
    ds = make_ds()
    olds = _old_revisions(ds, 11)
    pods = [daemon_pod(ds, "node-0")]
    plan = planner.plan(snapshot(ds, make_nodes(1), pods, revisions=[*olds, revision_for(ds, 12)]))
    assert [d.name for d in plan.cleanup] == [meta.name(olds[0])]


def test_history_collision_count_changes_name() -> None:
    ds = make_ds(status={"collisionCount": 1})
    plan = planner.plan(snapshot(ds, make_nodes(1)))
    h = history.compute_hash(dsutil.template(ds), 1)
    assert plan.hash == h
    assert [
        a.revision["metadata"]["name"] for a in plan.history if isinstance(a, CreateRevision)
    ] == [f"foo-{h}"]


def test_history_constructed_while_expectations_pending() -> None:
    ds = make_ds()
    plan = planner.plan(snapshot(ds, make_nodes(1), expectations_satisfied=False))
    assert any(isinstance(a, CreateRevision) for a in plan.history)
    assert plan.sync_nodes is None and plan.cleanup == []


def test_the_hash_known_before_a_plan_is_the_plans() -> None:
    """``planner.current_hash``, which the reconciler builds its index at before a full
    plan, is the plan's hash in every case of history, and none when the plan reads no
    node."""
    ds = make_ds()
    nodes = make_nodes(3)
    pods = [make_pod("p-a", "node-0", ds=ds, hash="aaaa"), make_pod("p-b", "node-1", ds=ds)]
    orphan = revision_for(ds, 1)
    del orphan["metadata"]["ownerReferences"]
    tie = [revision_for(ds, 1, hash="bbbb"), revision_for(ds, 1, hash="aaaa")]
    cases = [
        (ds, []),  # the first sync: a revision to create
        (ds, [revision_for(ds, 1)]),  # the current one exists
        (with_image(ds, "other"), [revision_for(ds, 1)]),  # a template change
        (ds, [revision_for(ds, 2, hash="bbbb"), revision_for(ds, 1, hash="aaaa")]),  # dups
        (ds, tie), (ds, tie[::-1]),  # a tie: the later by name wins, whatever the order
        (make_ds(status={"collisionCount": 1}), []),
        (ds, [orphan]),  # adopted
    ]
    for this, revisions in cases:
        snap = snapshot(this, nodes, pods, revisions=revisions)
        assert planner.current_hash(snap) == planner.plan(snap).hash != ""
    deleting = copy.deepcopy(ds)
    deleting["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    everything = copy.deepcopy(ds)
    everything["spec"]["selector"] = {}
    for this in (None, deleting, everything):
        snap = snapshot(this, nodes, pods)
        assert planner.current_hash(snap) == planner.plan(snap).hash == ""
