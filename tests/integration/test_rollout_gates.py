"""Rollout gates and the progress deadline end to end: real daemonbus processes on a real
Redis, driven through the CLI (``apply -f``, ``set image``, ``rollout pause|resume|promote|
status``, ``describe``, ``log export`` and ``replay --verify``) as a user would. Nothing sleeps
to wait for logic: every wait polls with a deadline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from shared.daemonset import conditions, dsutil, history
from shared.model import meta, rolloutopts
from tests.integration import controller_kit as kit
from tests.integration.stack import Stack, wait_for
from tests.integration.test_rollout import (
    current_revision,
    daemon_pods,
    daemonset,
    rolled_out,
    rolling,
    run,
    set_image,
    start,
)

Obj = dict[str, Any]


def apply(stack: Stack, tmp_path: Path, ds: Obj) -> None:
    path = tmp_path / f"{meta.name(ds)}.yaml"
    path.write_text(yaml.safe_dump(ds))
    result = run(stack, "apply", "-f", str(path))
    assert result.exit_code == 0, result.output


def annotated(ds: Obj, **annotations: str) -> Obj:
    ds["metadata"]["annotations"] = {rolloutopts.PREFIX + k.replace("_", "-"): v
                                     for k, v in annotations.items()}
    return ds


def images_by_node(stack: Stack, name: str) -> dict[str, str]:
    return {p["spec"]["nodeName"]: p["spec"]["containers"][0]["image"]
            for p in daemon_pods(stack, name)
            if p["spec"].get("nodeName") and not meta.is_being_deleted(p)}


def progressing(stack: Stack, name: str) -> Obj:
    st = stack.status(f"default/{name}")
    return conditions.find(conditions.conditions_of(st), conditions.PROGRESSING) or {}


def test_partitioned_rollout_stops_at_the_partition_lowering_continues_promote_finishes(
        stack: Stack, tmp_path: Path) -> None:
    start(stack, 4, "--ready-delay", "0.1")
    v1, v2 = "registry.example/app:v1", "registry.example/app:v2"
    apply(stack, tmp_path, annotated(daemonset("web", strategy=rolling(4, 0)), partition="2"))
    wait_for(lambda: rolled_out(stack, "web", 4), timeout=60, what="web rolled out")
    bad = annotated(daemonset("web", strategy=rolling(4, 0)), partition="x")
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(bad))
    refused = run(stack, "apply", "-f", str(tmp_path / "bad.yaml"))
    assert refused.exit_code == 1
    assert ('metadata.annotations[rollout.daemonbus.io/partition]: Invalid value: "x": must be '
            "a non-negative integer or a percentage (e.g. '10%')") in refused.stderr
    assert meta.annotations(stack.store.get("DaemonSet", "default/web"))[
        rolloutopts.PARTITION] == "2"  # nothing written

    set_image(stack, "web", v2)
    status = run(stack, "rollout", "status", "ds/web", "--timeout", "60s")
    assert status.exit_code == 0, status.output
    assert status.output.splitlines()[-1] == (
        'daemon set "web" partitioned roll out complete: 2 out of 4 new pods have been '
        "updated...")
    # the first two nodes by name are updated, the last two keep the old revision
    assert images_by_node(stack, "web") == {"node-00001": v2, "node-00002": v2,
                                            "node-00003": v1, "node-00004": v1}
    described = run(stack, "describe", "ds", "web")
    assert "Conditions:" in described.output and "RolloutPartitioned" in described.output
    why = run(stack, "why", "ds/web").output
    assert ("held at the old revision by rollout.daemonbus.io/partition=2 (2): node-00003, "
            "node-00004") in why

    apply(stack, tmp_path, annotated(daemonset("web", image=v2, strategy=rolling(4, 0)),
                                     partition="1"))
    wait_for(lambda: images_by_node(stack, "web").get("node-00003") == v2
             and progressing(stack, "web").get("reason") == "RolloutPartitioned"
             and stack.status("default/web").get("updatedNumberScheduled") == 3,
             timeout=60, what="the partition lowered to 1")
    assert images_by_node(stack, "web")["node-00004"] == v1

    promote = run(stack, "rollout", "promote", "ds/web")
    assert (promote.exit_code, promote.output) == (0, "daemonset.apps/web promoted\n")
    done = run(stack, "rollout", "status", "ds/web", "--timeout", "60s")
    assert done.exit_code == 0, done.output
    wait_for(lambda: rolled_out(stack, "web", 4), timeout=60, what="promoted to every node")
    assert set(images_by_node(stack, "web").values()) == {v2}
    again = run(stack, "rollout", "promote", "ds/web")
    assert again.output == "daemonset.apps/web already promoted\n"


def test_pause_holds_old_pods_new_nodes_get_the_new_revision_resume_finishes(
        stack: Stack) -> None:
    start(stack, 3, "--ready-delay", "0.1")
    stack.store.apply(daemonset("app", strategy=rolling(1, 0)))
    wait_for(lambda: rolled_out(stack, "app", 3), timeout=60, what="app rolled out")
    old = {meta.uid(p) for p in daemon_pods(stack, "app")}
    pause = run(stack, "rollout", "pause", "ds/app")
    assert (pause.exit_code, pause.output) == (0, "daemonset.apps/app paused\n")
    assert run(stack, "rollout", "pause", "ds/app").output == "daemonset.apps/app already paused\n"

    set_image(stack, "app", "registry.example/app:v2")
    status = run(stack, "rollout", "status", "ds/app", "--timeout", "60s")
    assert (status.exit_code, status.output.splitlines()[-1]) == (
        0, 'daemon set "app" rollout is paused: 0 out of 3 new pods have been updated')
    wait_for(lambda: progressing(stack, "app").get("reason") == "RolloutPaused",
             what="Progressing Unknown/RolloutPaused")
    assert {meta.uid(p) for p in daemon_pods(stack, "app")} == old  # no old pod replaced
    assert not any(meta.is_being_deleted(p) for p in daemon_pods(stack, "app"))
    described = run(stack, "describe", "ds", "app").output
    assert "Conditions:" in described and "RolloutPaused" in described

    assert run(stack, "node", "add", "node-00009").exit_code == 0
    cr = wait_for(lambda: current_revision(stack, "app"), what="revision 2")
    wait_for(lambda: any(p["spec"].get("nodeName") == "node-00009"
                         for p in daemon_pods(stack, "app")), what="a pod on the new node")
    new_pod = next(p for p in daemon_pods(stack, "app") if p["spec"].get("nodeName") == "node-00009")
    assert meta.labels(new_pod)[dsutil.HASH_LABEL] == history.revision_hash(cr)
    assert {meta.uid(p) for p in daemon_pods(stack, "app")} >= old

    resume = run(stack, "rollout", "resume", "ds/app")
    assert (resume.exit_code, resume.output) == (0, "daemonset.apps/app resumed\n")
    done = run(stack, "rollout", "status", "ds/app", "--timeout", "60s")
    assert done.exit_code == 0, done.output
    assert done.output.splitlines()[-1] == 'daemon set "app" successfully rolled out'
    wait_for(lambda: rolled_out(stack, "app", 4), timeout=60, what="resumed to every node")


def test_progress_deadline_fires_on_a_never_ready_image_and_replay_verifies_it(
        stack: Stack, tmp_path: Path) -> None:
    start(stack, 3, "--never-ready", "*:broken")
    stack.kill("status-writer")
    port = kit.free_port()
    stack.start("status-writer", "status-writer", "--metrics-port", str(port))
    apply(stack, tmp_path, annotated(daemonset("app", strategy=rolling(1, 0)),
                                     progress_deadline_seconds="2"))
    wait_for(lambda: rolled_out(stack, "app", 3), timeout=60, what="app rolled out")
    set_image(stack, "app", "registry.example/app:broken")
    cond = wait_for(lambda: progressing(stack, "app").get("reason") == "ProgressDeadlineExceeded"
                    and progressing(stack, "app"), timeout=60, what="the deadline")
    assert (cond["status"], cond["message"]) == ("False", 'daemon set "app" has timed out '
                                                          "progressing.")
    status = run(stack, "rollout", "status", "ds/app", "--timeout", "30s")
    assert (status.exit_code, status.stderr) == (
        1, 'error: daemon set "app" exceeded its progress deadline\n')
    described = run(stack, "describe", "ds", "app").output
    assert "ProgressDeadlineExceeded" in described
    assert 'has timed out progressing.' in described  # the Warning Event
    why = run(stack, "why", "ds/app").output
    assert "PodNotReady (1): node-00001" in why, why  # the first node by name, never ready
    assert "condition Progressing=False ProgressDeadlineExceeded" in why
    labels = {"namespace": "default", "daemonset": "app"}
    wait_for(lambda: kit.metric_value(kit.scrape(port),
                                      "daemonbus_daemonset_progress_deadline_exceeded",
                                      **labels) == 1
             and kit.metric_value(kit.scrape(port), "daemonbus_daemonset_unavailable_pods",
                                  reason="PodNotReady", **labels) == 1,
             what="the deadline and unavailable-pods gauges")

    undo = run(stack, "rollout", "undo", "ds/app")
    assert undo.exit_code == 0, undo.output
    wait_for(lambda: rolled_out(stack, "app", 3), timeout=60, what="rolled back")
    wait_for(lambda: progressing(stack, "app").get("reason") == "NewRevisionAvailable",
             what="Progressing True again")

    path = tmp_path / "run.dblog"
    assert run(stack, "log", "export", str(path)).exit_code == 0
    verified = run(stack, "replay", str(path), "--verify")
    assert verified.exit_code == 0, verified.output
    assert "no divergence" in verified.output
