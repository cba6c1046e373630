"""What ``rollout`` and ``set image`` print and change (kubectl's DaemonSet helpers), pure."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from services.cli import rollout_views as views
from shared.daemonset import history
from shared.model import meta
from tests.unit.daemonset_fixtures import NOW, make_ds, rolling

Obj = dict[str, Any]


def with_status(ds: Obj, generation: int = 2, observed: int = 2, **counts: int) -> Obj:
    ds["metadata"]["generation"] = generation
    ds["status"] = {"observedGeneration": observed, **counts}
    return ds


def revision(ds: Obj, number: int, image: str, cause: str | None = None) -> Obj:
    src = copy.deepcopy(ds)
    src["spec"]["template"]["spec"]["containers"][0]["image"] = image
    cr = history.new_revision(src, f"h{number}", number)
    if cause:
        cr["metadata"]["annotations"] = {views.CHANGE_CAUSE_ANNOTATION: cause}
    return cr


# ---- rollout status -------------------------------------------------------------------------


@pytest.mark.parametrize(("status", "expected"), [
    ({"generation": 3, "observed": 2},
     ("Waiting for daemon set spec update to be observed...\n", False)),
    ({"desiredNumberScheduled": 10, "updatedNumberScheduled": 3, "numberAvailable": 9},
     ('Waiting for daemon set "foo" rollout to finish: 3 out of 10 new pods have been '
      "updated...\n", False)),
    ({"desiredNumberScheduled": 10, "updatedNumberScheduled": 10, "numberAvailable": 7},
     ('Waiting for daemon set "foo" rollout to finish: 7 of 10 updated pods are '
      "available...\n", False)),
    ({"desiredNumberScheduled": 10, "updatedNumberScheduled": 10, "numberAvailable": 10},
     ('daemon set "foo" successfully rolled out\n', True)),
    ({}, ('daemon set "foo" successfully rolled out\n', True)),  # nothing to run anywhere
])
def test_daemon_set_status_viewer(status: dict[str, int], expected: tuple[str, bool]) -> None:
    assert views.status_message(with_status(make_ds(strategy=rolling()), **status)) == expected


def test_daemon_set_status_viewer_on_delete_is_an_error() -> None:
    with pytest.raises(views.RolloutError) as err:
        views.status_message(make_ds(strategy={"type": "OnDelete"}))
    assert str(err.value) == "rollout status is only available for RollingUpdate strategy type"


@pytest.mark.parametrize(("text", "seconds"), [
    ("0", 0.0), ("30s", 30.0), ("1m30s", 90.0), ("500ms", 0.5), ("1.5h", 5400.0), ("2m", 120.0),
])
def test_parse_duration(text: str, seconds: float) -> None:
    assert views.parse_duration(text) == seconds


@pytest.mark.parametrize(("text", "message"), [
    ("5", 'time: missing unit in duration "5"'),
    ("5x", 'time: invalid duration "5x"'),
    ("", 'time: invalid duration ""'),
])
def test_parse_duration_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        views.parse_duration(text)


# ---- history ----------------------------------------------------------------------------------


def test_owned_revisions_are_controlled_and_selected_in_revision_order() -> None:
    ds = make_ds()
    mine = [revision(ds, 3, "c"), revision(ds, 1, "a")]
    other = revision(make_ds(uid="other"), 2, "b")
    unselected = revision(ds, 4, "d")
    unselected["metadata"]["labels"] = {"name": "else"}
    owned = views.owned_revisions(ds, [*mine, other, unselected])
    assert [r["revision"] for r in owned] == [1, 3]


def test_history_table_like_kubectl() -> None:
    ds = make_ds()
    revs = [revision(ds, 1, "a"), revision(ds, 12, "b", cause="kubectl set image ds/foo")]
    assert views.history_output("daemonset.apps/foo", revs) == (
        "daemonset.apps/foo \n"
        "REVISION  CHANGE-CAUSE\n"
        "1         <none>\n"
        "12        kubectl set image ds/foo\n"
        "\n")


def test_history_empty_and_missing_revision() -> None:
    assert views.history_output("daemonset.apps/foo", []) == (
        "daemonset.apps/foo \nNo rollout history found.\n")
    with pytest.raises(views.RolloutError, match=r"^unable to find the specified revision$"):
        views.history_text([revision(make_ds(), 1, "a")], 2)


def test_history_revision_shows_its_pod_template() -> None:
    text = views.history_output("daemonset.apps/foo", [revision(make_ds(), 2, "img:2")], 2)
    assert text == (
        "daemonset.apps/foo with revision #2\n"
        "Pod Template:\n"
        "  Labels:\tname=simple-daemon\n"
        "\ttype=production\n"
        "  Containers:\n"
        "   foo:\n"
        "    Image:\timg:2\n"
        "    Port:\t<none>\n"
        "    Host Port:\t<none>\n"
        "    Environment:\t<none>\n"
        "    Mounts:\t<none>\n"
        "  Volumes:\t<none>\n"
        "  Node-Selectors:\t<none>\n"
        "  Tolerations:\t<none>\n"
        "\n")


def test_revision_template_drops_the_patch_directive_and_reads_json_data() -> None:
    cr = revision(make_ds(), 1, "img:1")
    as_text = {**cr, "data": history.canonical_json(cr["data"])}
    for r in (cr, as_text):
        template = views.revision_template(r)
        assert "$patch" not in template
        assert template["spec"]["containers"][0]["image"] == "img:1"


# ---- undo -------------------------------------------------------------------------------------


def test_rollback_to_previous_revision_by_default() -> None:
    ds = make_ds()
    revs = [revision(ds, 3, "c"), revision(ds, 1, "a"), revision(ds, 2, "b")]
    target, same = views.find_rollback(ds, revs, 0)
    assert (target["revision"], same) == (2, False)
    rolled = views.rolled_back(ds, target)
    assert rolled["spec"]["template"]["spec"]["containers"][0]["image"] == "b"
    assert ds["spec"]["template"]["spec"]["containers"][0]["image"] == "foo/bar"  # untouched


def test_rollback_skipped_when_template_matches() -> None:
    ds = make_ds()
    current = history.new_revision(ds, "cur", 5)
    assert views.find_rollback(ds, [revision(ds, 4, "x"), current], 5) == (current, True)


@pytest.mark.parametrize(("count", "to", "message"), [
    (1, 0, "no last revision to roll back to"),
    (0, 0, "no last revision to roll back to"),
    (2, 7, "unable to find specified revision 7 in history"),
    (2, -1, "unable to find specified revision -1 in history"),
])
def test_rollback_errors(count: int, to: int, message: str) -> None:
    ds = make_ds()
    revs = [revision(ds, n + 1, f"i{n}") for n in range(count)]
    with pytest.raises(views.RolloutError) as err:
        views.find_rollback(ds, revs, to)
    assert str(err.value) == message


# ---- set image, restart -----------------------------------------------------------------------


def test_split_image_args() -> None:
    assert views.split_image_args(["ds/foo", "a=x:1", "b=y:2"]) == (
        ["ds/foo"], {"a": "x:1", "b": "y:2"})
    assert views.split_image_args(["ds", "foo", "*=x"]) == (["ds", "foo"], {"*": "x"})


@pytest.mark.parametrize(("args", "message"), [
    (["ds/foo"], "at least one image update is required"),
    (["a=b"], "one or more resources must be specified as <resource> <name> or "
              "<resource>/<name>"),
    (["ds/foo", "a=b", "ds/bar"], "all resources must be specified before image changes: "
                                  "ds/bar"),
    (["ds/foo", "*=x", "a=y"], "all containers are already specified by *, but saw more than "
                               "one container_name=container_image pairs"),
    (["ds/foo", "a-"], 'invalid image format: "a-"'),
])
def test_split_image_args_errors(args: list[str], message: str) -> None:
    with pytest.raises(views.RolloutError) as err:
        views.split_image_args(args)
    assert str(err.value) == message


def test_set_images_named_all_and_missing() -> None:
    spec: Obj = {"initContainers": [{"name": "init", "image": "i:1"}],
                 "containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]}
    assert views.set_images(spec, {"b": "b:2"}) == []
    assert [c["image"] for c in spec["containers"]] == ["a:1", "b:2"]
    assert views.set_images(spec, {"*": "all:3"}) == []
    assert [c["image"] for c in spec["initContainers"] + spec["containers"]] == ["all:3"] * 3
    assert views.set_images(spec, {"zz": "z"}) == ['error: unable to find container named "zz"']


def test_restart_sets_restarted_at_on_the_template_only() -> None:
    ds = make_ds()
    new = views.restarted(ds, NOW)
    stamp = meta.annotations(new["spec"]["template"])[views.RESTARTED_AT_ANNOTATION]
    assert stamp[:4] == "2023" and "T" in stamp
    assert "annotations" not in ds["spec"]["template"].get("metadata", {})
    assert views.restarted(new, NOW) == new  # the same second: no change


def test_with_images_changes_a_daemonset_template_or_a_pod_and_reports_no_change() -> None:
    ds = make_ds()
    new, problems = views.with_images(ds, {"foo": "foo/bar:v2"})
    assert problems == [] and new is not None
    assert new["spec"]["template"]["spec"]["containers"][0]["image"] == "foo/bar:v2"
    assert views.with_images(new, {"foo": "foo/bar:v2"}) == (None, [])
    pod = {"kind": "Pod", "spec": {"containers": [{"name": "foo", "image": "a"}]}}
    changed, _ = views.with_images(pod, {"*": "b"})
    assert changed is not None and changed["spec"]["containers"][0]["image"] == "b"
    assert pod["spec"]["containers"][0]["image"] == "a"  # untouched
