"""Rollout gates and the progress deadline end to end: real daemonbus processes on a real
Redis, driven through the CLI (``apply -f``, ``set image``, ``rollout pause|resume|promote|
status``, ``describe``, ``log export`` and ``replay --verify``) as a user would. Nothing sleeps
to wait for logic: every wait polls with a deadline."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from services.reconciler.executor import CONTROLLER_USER
from shared.daemonset import conditions, dsutil, history
from shared.model import meta, rolloutopts
from shared.store import codec
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


def refused_with_nothing_written(stack: Stack, tmp_path: Path, bad: Obj, message: str,
                                 annotation: str, kept: str) -> None:
    """``daemonbus apply`` of ``bad`` fails naming the field with ``message``, and the stored
    DaemonSet's ``annotation`` is still ``kept``."""
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    refused = run(stack, "apply", "-f", str(path))
    assert refused.exit_code == 1
    assert message in refused.stderr
    stored = stack.store.get("DaemonSet", f"default/{meta.name(bad)}")
    assert meta.annotations(stored)[annotation] == kept  # nothing written


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
    refused_with_nothing_written(
        stack, tmp_path, annotated(daemonset("web", strategy=rolling(4, 0)), partition="x"),
        'metadata.annotations[rollout.daemonbus.io/partition]: Invalid value: "x": must be '
        "a non-negative integer or a percentage (e.g. '10%')", rolloutopts.PARTITION, "2")

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


def failure_decisions(stack: Stack, name: str) -> list[Obj]:
    """The recorded decisions of DaemonSet ``name`` that took a failure action."""
    out = []
    for entry_id, fields in stack.store.r.xrange(stack.store.keys.log):
        entry = codec.decode_entry(entry_id, fields)
        if (entry.type == "DECISION" and entry.key == f"default/{name}"
                and "failure" in (entry.obj.get("actions") or {})):
            out.append(entry.obj)
    return out


def controller_writes(stack: Stack, name: str) -> int:
    """How often the controller wrote DaemonSet ``name`` (its failure action)."""
    count = 0
    for entry_id, fields in stack.store.r.xrange(stack.store.keys.log):
        entry = codec.decode_entry(entry_id, fields)
        count += (entry.kind == "DaemonSet" and entry.key == f"default/{name}"
                  and entry.type == "MODIFIED" and entry.user == CONTROLLER_USER)
    return count


def failure_events(stack: Stack) -> int:
    return sum(1 for e in stack.store.list("Event", "default")
               if e.get("reason") == "FailureRatioExceeded")


def failure_record(stack: Stack, name: str) -> Obj:
    ds = stack.store.get("DaemonSet", f"default/{name}")
    raw = meta.annotations(ds).get(rolloutopts.FAILURE_RECORD)
    return json.loads(raw) if raw else {}


def verify_replay(stack: Stack, tmp_path: Path) -> None:
    path = tmp_path / "run.dblog"
    assert run(stack, "log", "export", str(path)).exit_code == 0
    verified = run(stack, "replay", str(path), "--verify")
    assert verified.exit_code == 0, verified.output
    assert "no divergence" in verified.output


@pytest.mark.parametrize(("knob", "cause"), [("--fail-image", "PodFailed"),
                                             ("--crash-image", "CrashLoopBackOff")])
def test_a_failing_image_past_the_failure_ratio_pauses_the_rollout_and_replay_verifies_it(
        stack: Stack, tmp_path: Path, knob: str, cause: str) -> None:
    # the simulated node agent's images that fail: phase Failed, or a crash loop
    start(stack, 4, "--ready-delay", "0.1", knob, "*:crash")
    v1 = "registry.example/app:v1"
    apply(stack, tmp_path, annotated(daemonset("app", strategy=rolling(1, 0)),
                                     failure_action="pause", max_failure_ratio="0.5"))
    wait_for(lambda: rolled_out(stack, "app", 4), timeout=60, what="app rolled out")
    refused_with_nothing_written(
        stack, tmp_path,
        annotated(daemonset("app", strategy=rolling(1, 0)), failure_action="stop"),
        'metadata.annotations[rollout.daemonbus.io/failure-action]: Unsupported value: '
        '"stop": supported values: "pause", "rollback"', rolloutopts.FAILURE_ACTION, "pause")

    set_image(stack, "app", "registry.example/app:crash")
    record = wait_for(lambda: failure_record(stack, "app"), timeout=60, what="the pause")
    ds = stack.store.get("DaemonSet", "default/app")
    assert meta.annotations(ds)[rolloutopts.PAUSED] == "true"
    # maxUnavailable 1: the first node's pod failed, 1 of 1 is more than 0.5
    assert (record["action"], record["failed"], record["attempted"]) == ("pause", 1, 1)
    assert record["nodes"] == {"node-00001": cause}
    status = run(stack, "rollout", "status", "ds/app", "--timeout", "60s")
    assert status.exit_code == 0, status.output
    # the failed pod counts as updated until it is replaced (failed-pod backoff): 0 or 1
    assert re.fullmatch(r'daemon set "app" rollout is paused: [01] out of 4 new pods have been '
                        "updated", status.output.splitlines()[-1]), status.output
    # no further old pod replaced: the three others still run v1
    images = images_by_node(stack, "app")
    assert {images[n] for n in ("node-00002", "node-00003", "node-00004")} == {v1}
    wait_for(lambda: conditions.find(conditions.conditions_of(stack.status("default/app")),
                                     conditions.ROLLOUT_FAILED), what="RolloutFailed")
    described = run(stack, "describe", "ds", "app").output
    assert "RolloutFailed" in described and "PausedOnFailure" in described
    assert "FailureRatioExceeded" in described  # the Warning Event
    why = run(stack, "why", "ds/app").output
    assert "by user system:serviceaccount:kube-system:daemon-set-controller" in why, why
    # decided (a sync that read the DaemonSet before the pause decides it again, and its
    # write is refused by the precondition), written once, with one Event
    assert {d["actions"]["failure"][0] for d in failure_decisions(stack, "app")} == {"pause"}
    assert controller_writes(stack, "app") == 1
    assert failure_events(stack) == 1
    verify_replay(stack, tmp_path)


def test_a_never_ready_image_rolls_back_to_the_previous_revision_on_every_node(
        stack: Stack, tmp_path: Path) -> None:
    start(stack, 4, "--ready-delay", "0.1", "--never-ready", "*:broken")
    v1 = "registry.example/app:v1"
    apply(stack, tmp_path, annotated(daemonset("app", strategy=rolling(2, 0)),
                                     failure_action="rollback", failure_window_seconds="2"))
    wait_for(lambda: rolled_out(stack, "app", 4), timeout=60, what="app rolled out")
    first = current_revision(stack, "app")
    assert first is not None

    set_image(stack, "app", "registry.example/app:broken")
    record = wait_for(lambda: failure_record(stack, "app"), timeout=60, what="the rollback")
    assert (record["action"], record["revision"], record["toRevision"]) == ("rollback", 2, 1)
    assert record["toHash"] == history.revision_hash(first)
    # maxUnavailable 2: two tried; the second's window may end a second after the first's
    # (creation times are whole seconds), and 1 of 2 is past the ratio 0 already
    assert 1 <= record["failed"] <= record["attempted"] == 2, record
    assert set(record["nodes"].values()) == {"NotAvailableInWindow"}
    ds = stack.store.get("DaemonSet", "default/app")
    assert ds["spec"]["template"]["spec"]["containers"][0]["image"] == v1
    assert rolloutopts.PAUSED not in meta.annotations(ds)
    # the previous revision on every node, renumbered as rollout undo's is
    wait_for(lambda: rolled_out(stack, "app", 4), timeout=60, what="rolled back everywhere")
    assert set(images_by_node(stack, "app").values()) == {v1}
    cr = current_revision(stack, "app")
    assert cr is not None and history.revision_hash(cr) == history.revision_hash(first)
    assert history.revision_number(cr) == 3
    wait_for(lambda: (conditions.find(conditions.conditions_of(stack.status("default/app")),
                                      conditions.ROLLOUT_FAILED) or {}).get("reason")
             == "RolledBack", what="RolloutFailed/RolledBack")
    wait_for(lambda: progressing(stack, "app").get("reason") == "NewRevisionAvailable",
             what="Progressing True on the rolled-back revision")
    # taken once: the revision rolled back to is not judged by the same record
    assert {d["actions"]["failure"][0] for d in failure_decisions(stack, "app")} == {"rollback"}
    assert controller_writes(stack, "app") == 1 and failure_events(stack) == 1
    assert failure_record(stack, "app") == record
    verify_replay(stack, tmp_path)
