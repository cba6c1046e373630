"""Upstream fidelity end to end: real daemonbus processes on a real Redis, driven through the
CLI as a user would (click's CliRunner on the stack's Redis and key prefix). Each test names
the upstream code its expected values come from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from services.cli import context
from services.cli.main import cli
from shared.daemonset import dsutil
from shared.model import meta, podutil
from shared.store.log import redis_reader
from tests.integration.stack import Stack, wait_for
from tests.integration.test_rollout import daemonset, rolling, run, start

Obj = dict[str, Any]

V1, V2 = "registry.example/app:v1", "registry.example/app:v2"


def app_pods(stack: Stack, name: str) -> list[Obj]:
    """The live pods of app ``name``, owned or orphaned."""
    return [p for p in stack.pods("default") if meta.labels(p).get("app") == name
            and not meta.is_being_deleted(p)]


def image(pod: Obj) -> str:
    return str(pod["spec"]["containers"][0]["image"])


def apply_file(stack: Stack, tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    result = run(stack, "apply", "-f", str(path))
    assert result.exit_code == 0, result.output
    return result.stdout


# ---- templateGeneration on create (issue point 1) -------------------------------------------


def test_restored_daemonset_keeps_its_template_generation_and_replaces_stale_pods(
        stack: Stack, tmp_path: Path) -> None:
    # pkg/apis/apps/v1/conversion.go (Convert_v1_DaemonSet_To_apps_DaemonSet) reads the
    # deprecated.daemonset.template.generation annotation into TemplateGeneration and
    # pkg/registry/apps/daemonset/strategy.go (PrepareForCreate) keeps it (raised to 1 only
    # when lower), so a DaemonSet restored from `get -o json` keeps generation 2; the
    # controller's IsPodUpdated then finds a pod labelled pod-template-generation=1 with a
    # stale hash out of date, and RollingUpdate replaces it.
    start(stack, 3, "--ready-delay", "3")
    apply_file(stack, tmp_path, "v1.yaml", yaml.safe_dump(
        daemonset("restore", image=V1, strategy=rolling(1, 0))))
    wait_for(lambda: sorted(image(p) for p in app_pods(stack, "restore")) == [V1] * 3
             and dsutil.status(stack.store.get("DaemonSet", "default/restore"))
             .get("numberAvailable") == 3, timeout=60, what="v1 on 3 nodes")
    assert run(stack, "set", "image", "ds/restore", f"app={V2}").exit_code == 0
    # mid-rollout (a v2 pod is 3 s from Ready, the other nodes still run v1): save, orphan
    wait_for(lambda: any(image(p) == V2 for p in app_pods(stack, "restore")), timeout=30,
             what="the first v2 pod")
    saved = run(stack, "get", "ds", "restore", "-o", "json").stdout
    deleted = run(stack, "delete", "ds/restore", "--cascade=orphan")
    assert deleted.stdout == 'daemonset.apps "restore" deleted\n', deleted.output
    wait_for(lambda: stack.store.try_get("DaemonSet", "default/restore") is None,
             what="the DaemonSet gone")
    stale = {meta.name(p) for p in app_pods(stack, "restore")
             if meta.labels(p).get(dsutil.GENERATION_LABEL) == "1" and image(p) == V1}
    assert stale, "the scenario needs a leftover pod-template-generation=1 pod"
    assert json.loads(saved)["metadata"]["annotations"][dsutil.GENERATION_ANNOTATION] == "2"

    created = apply_file(stack, tmp_path, "saved.json", saved)

    assert created == "daemonset.apps/restore created\n"
    restored = stack.store.get("DaemonSet", "default/restore")
    assert meta.annotations(restored)[dsutil.GENERATION_ANNOTATION] == "2"
    lines: list[str] = []

    def honest_rollout_status() -> bool:
        result = run(stack, "rollout", "status", "ds/restore", "--watch=false")
        lines.append(result.stdout)
        if result.stdout != 'daemon set "restore" successfully rolled out\n':
            return False
        # said done: then no node may run the old image any more
        pods = app_pods(stack, "restore")
        assert sorted(image(p) for p in pods) == [V2] * 3, (lines[-3:], pods)
        return True

    wait_for(honest_rollout_status, timeout=90, interval=0.2, what="the rollout")
    pods = app_pods(stack, "restore")
    assert not stale & {meta.name(p) for p in pods}, "the stale pods were replaced"
    assert {meta.labels(p).get(dsutil.GENERATION_LABEL) for p in pods} == {"2"}
    assert all(podutil.is_ready(p) for p in pods)
    assert any(line.startswith('Waiting for daemon set "restore" rollout to finish')
               for line in lines), lines


# ---- status JSON shape (issue point 3) ------------------------------------------------------

OMITEMPTY = ("observedGeneration", "updatedNumberScheduled", "numberAvailable",
             "numberUnavailable")


def test_zero_omitempty_status_fields_are_left_out_of_storage_and_every_output(
        stack: Stack, tmp_path: Path) -> None:
    # k8s.io/api/apps/v1 types.go DaemonSetStatus: observedGeneration, updatedNumberScheduled,
    # numberAvailable and numberUnavailable are `json:",omitempty"`. numberUnavailable is 2
    # while the pods start and 0 once they are Ready: the 0 must then be left out, not kept
    # from the earlier status.
    start(stack, 2, "--ready-delay", "1")
    apply_file(stack, tmp_path, "ds.yaml", yaml.safe_dump(daemonset("shape", image=V1)))
    want = {"currentNumberScheduled": 2, "desiredNumberScheduled": 2, "numberMisscheduled": 0,
            "numberReady": 2, "observedGeneration": 1, "updatedNumberScheduled": 2,
            "numberAvailable": 2}
    wait_for(lambda: stack.status("default/shape") == want, timeout=60, what=f"status {want}")

    as_json = json.loads(run(stack, "get", "ds", "shape", "-o", "json").stdout)
    assert as_json["status"] == want
    as_yaml = yaml.safe_load(run(stack, "get", "ds/shape", "-o", "yaml").stdout)
    assert as_yaml["status"] == want
    described = run(stack, "describe", "ds", "shape").stdout  # describe prints every counter
    assert "Desired Number of Nodes Scheduled: 2\n" in described
    assert "Number of Nodes Scheduled with Available Pods: 2\n" in described
    assert "Number of Nodes Misscheduled: 0\n" in described

    statuses: list[Obj] = []  # every status the log holds: stored objects and decisions
    reader = redis_reader(stack.store.r, stack.store.keys)
    while batch := reader.read():
        for e in batch:
            if e.kind == "DaemonSet" and e.type in ("ADDED", "MODIFIED"):
                statuses.append(e.obj.get("status") or {})
            elif e.kind == "DaemonSet" and e.type == "DECISION":
                statuses.append((e.obj.get("actions") or {}).get("status") or {})
    assert any(s.get("numberUnavailable") == 2 for s in statuses), statuses
    zeros = [s for s in statuses if any(s.get(f) == 0 for f in OMITEMPTY)]
    assert zeros == [], zeros
    assert all(s.keys() >= {"currentNumberScheduled", "desiredNumberScheduled",
                            "numberMisscheduled", "numberReady"} for s in statuses), statuses


# ---- kubectl's argument habits (issue point 7) ----------------------------------------------


def cli_after(stack: Stack, *args: str) -> Any:
    """The CLI with the global flags after the verb and its arguments."""
    return CliRunner().invoke(
        cli, [*args, "--redis-url", stack.redis_url, "--prefix", stack.prefix],
        obj=context.CliEnv(), catch_exceptions=False)


def test_drain_cordon_uncordon_take_node_slash_name_or_name_and_global_flags_anywhere(
        stack: Stack, tmp_path: Path) -> None:
    # kubectl cordon/uncordon/drain: ResourceNames("nodes", args...) takes NAME or node/NAME;
    # drain's messages from kubectl pkg/cmd/drain/drain.go (RunDrain) and pkg/drain/filters.go
    start(stack, 2)
    listed = cli_after(stack, "get", "nodes", "--no-headers")
    assert listed.exit_code == 0, listed.output
    assert [line.split()[0] for line in listed.stdout.splitlines()] == ["node-00001",
                                                                       "node-00002"]
    apply_file(stack, tmp_path, "ds.yaml", yaml.safe_dump(daemonset("agent", image=V1)))
    lone = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "lone", "namespace": "default"},
            "spec": {"nodeName": "node-00001", "containers": [{"name": "c", "image": V1}]}}
    apply_file(stack, tmp_path, "pod.yaml", yaml.safe_dump(lone))
    # a daemon pod may exist a moment before it is bound to its node: wait for both bound
    wait_for(lambda: sorted(p["spec"].get("nodeName") or "" for p in app_pods(stack, "agent"))
             == ["node-00001", "node-00002"], timeout=30, what="2 daemon pods bound")
    agent = next(p for p in app_pods(stack, "agent")
                 if p["spec"].get("nodeName") == "node-00001")
    agent_ref = f"default/{meta.name(agent)}"

    refused = cli_after(stack, "drain", "node/node-00001")

    assert refused.exit_code == 1
    assert refused.stdout == "node/node-00001 cordoned\n"
    assert refused.stderr == (
        'error: unable to drain node "node-00001" due to error:[cannot delete DaemonSet-managed '
        f"Pods (use --ignore-daemonsets to ignore): {agent_ref}, cannot delete Pods declare no "
        "controller (use --force to override): default/lone], continuing command...\n"
        "There are pending nodes to be drained:\n node-00001\n"
        "[cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): "
        f"{agent_ref}, cannot delete Pods declare no controller (use --force to override): "
        "default/lone]\n")
    assert stack.store.get("Node", "/node-00001")["spec"]["unschedulable"] is True

    drained = cli_after(stack, "drain", "node-00001", "--ignore-daemonsets", "--force")

    assert drained.exit_code == 0, drained.output
    assert drained.stdout == ("node/node-00001 already cordoned\nevicting pod default/lone\n"
                              "pod/lone evicted\nnode/node-00001 drained\n")
    assert drained.stderr == (f"Warning: ignoring DaemonSet-managed Pods: {agent_ref}; "
                              "deleting Pods that declare no controller: default/lone\n")
    assert stack.store.try_get("Pod", "default/lone") is None
    assert stack.store.try_get("Pod", meta.key(agent)) is not None  # daemon pods stay

    assert cli_after(stack, "uncordon", "node/node-00001").stdout == "node/node-00001 uncordoned\n"
    assert cli_after(stack, "cordon", "node-00002").stdout == "node/node-00002 cordoned\n"
    assert cli_after(stack, "uncordon", "node-00002").stdout == "node/node-00002 uncordoned\n"
    assert cli_after(stack, "cordon", "pod/lone").stderr == (
        "error: invalid resource type pods, only node types are supported\n")
    # a group's subcommand takes them too; a command's own --prefix stays its own
    status = cli_after(stack, "rollout", "status", "ds/agent", "--watch=false")
    assert status.exit_code == 0 and status.stdout.startswith(('daemon set "agent"',
                                                               "Waiting for daemon set")), \
        status.output
