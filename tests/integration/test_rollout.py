"""Rolling updates, OnDelete, revision history and rollback end to end (spec §d, §e): real
daemonbus processes on a real Redis, driven through the CLI (click's CliRunner on the test's
Redis and key prefix), as a user would.

The budget tests follow the event log in a thread (``BudgetWatch``) and check, after every
single pod change, how many nodes have no available daemon pod — so a moment over budget is
caught even when it lasts one log entry. Time rules use the node agent's ``--ready-delay`` and
small minReadySeconds; nothing sleeps, every wait polls a condition with a deadline.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from services.cli import context
from services.cli.main import cli
from shared.daemonset import dsutil, history
from shared.model import meta, podutil
from shared.store import codec
from shared.store.cache import Cache
from tests.integration.stack import Stack, wait_for

Obj = dict[str, Any]

STATUS_LINE = re.compile(
    r'^(Waiting for daemon set "[a-z0-9-]+" rollout to finish: \d+ out of \d+ new pods have '
    r'been updated\.\.\.|Waiting for daemon set "[a-z0-9-]+" rollout to finish: \d+ of \d+ '
    r'updated pods are available\.\.\.|Waiting for daemon set spec update to be observed\.\.\.'
    r'|daemon set "[a-z0-9-]+" successfully rolled out)$')


def daemonset(name: str, *, image: str = "registry.example/app:v1", strategy: Obj | None = None,
              min_ready_seconds: int | None = None, history_limit: int | None = None) -> Obj:
    spec: Obj = {
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}},
                     "spec": {"containers": [{"name": "app", "image": image}]}},
    }
    if strategy is not None:
        spec["updateStrategy"] = strategy
    if min_ready_seconds is not None:
        spec["minReadySeconds"] = min_ready_seconds
    if history_limit is not None:
        spec["revisionHistoryLimit"] = history_limit
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def rolling(max_unavailable: Any = 1, max_surge: Any = 0) -> Obj:
    return {"type": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": max_unavailable, "maxSurge": max_surge}}


def run(stack: Stack, *args: str) -> Result:
    """The CLI, in-process, on the stack's Redis and prefix."""
    return CliRunner().invoke(
        cli, ["--redis-url", stack.redis_url, "--prefix", stack.prefix, *args],
        obj=context.CliEnv(), catch_exceptions=False)


# ---- reading the cluster --------------------------------------------------------------------


def daemon_pods(stack: Stack, name: str) -> list[Obj]:
    ds = stack.store.get("DaemonSet", f"default/{name}")
    return [p for p in stack.pods("default")
            if (meta.controller_ref(p) or {}).get("uid") == meta.uid(ds)]


def revisions(stack: Stack, name: str) -> list[Obj]:
    ds = stack.store.get("DaemonSet", f"default/{name}")
    return sorted((cr for cr in stack.store.list("ControllerRevision", "default")
                   if (meta.controller_ref(cr) or {}).get("uid") == meta.uid(ds)),
                  key=history.revision_number)


def current_revision(stack: Stack, name: str) -> Obj | None:
    ds = stack.store.get("DaemonSet", f"default/{name}")
    return next((cr for cr in revisions(stack, name) if history.matches(ds, cr)), None)


def rolled_out(stack: Stack, name: str, nodes: int) -> bool:
    """Every node runs exactly one pod of the current revision, Ready, nothing terminating,
    and the status says so for the current generation."""
    ds = stack.store.get("DaemonSet", f"default/{name}")
    cr = current_revision(stack, name)
    if cr is None:
        return False
    pods = daemon_pods(stack, name)
    st = dsutil.status(ds)
    return (len(pods) == nodes
            and len({podutil.target_node(p) for p in pods}) == nodes
            and all(meta.labels(p).get(dsutil.HASH_LABEL) == history.revision_hash(cr)
                    and podutil.is_ready(p) and not meta.is_being_deleted(p) for p in pods)
            and dsutil.observed_generation(ds) == dsutil.generation(ds)
            and st.get("updatedNumberScheduled") == st.get("numberAvailable") == nodes)


def start(stack: Stack, nodes: int, *agent_args: str, workers: int = 2) -> None:
    stack.start_all(workers=workers, nodes=nodes, agent_args=("--grace", "0.2", *agent_args))
    wait_for(lambda: len(stack.store.list("Node")) == nodes, what=f"{nodes} nodes")


def create(stack: Stack, ds: Obj, nodes: int) -> None:
    stack.store.apply(ds)
    name = meta.name(ds)
    wait_for(lambda: rolled_out(stack, name, nodes), timeout=60, what=f"{name} rolled out")


def set_image(stack: Stack, name: str, image: str) -> None:
    result = run(stack, "set", "image", f"ds/{name}", f"app={image}")
    assert (result.exit_code, result.output) == (0, f"daemonset.apps/{name} image updated\n")


class BudgetWatch:
    """Follows the log in a thread; after every pod change, counts the nodes without an
    available (Ready for minReadySeconds, not terminating) pod of the DaemonSet, and the
    nodes running two such pods, at the time of that log entry."""

    def __init__(self, stack: Stack, name: str) -> None:
        self.store = stack.store
        self.ds = stack.store.get("DaemonSet", f"default/{name}")
        self.cache = Cache(stack.store, ["Pod", "Node"], name="budget-watch", indexes={
            "node": ("Pod", lambda p: [podutil.target_node(p) or ""])})
        self.cache.sync()
        self.nodes = sorted(meta.name(n) for n in self.cache.list("Node"))
        self.min_ready = dsutil.min_ready_seconds(self.ds)
        self.max_unavailable = self.max_surged = 0
        self.changes = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._check(None)
        self._thread.start()

    def _pods(self, node: str) -> list[Obj]:
        return [p for p in self.cache.by_index("node", node)
                if (meta.controller_ref(p) or {}).get("uid") == meta.uid(self.ds)
                and not meta.is_being_deleted(p)]

    def _check(self, entry_id: str | None) -> None:
        at = codec.id_tuple(entry_id or self.store.log_tip())[0] / 1000.0
        unavailable = surged = 0
        for node in self.nodes:
            pods = self._pods(node)
            unavailable += not any(podutil.is_available(p, self.min_ready, at) for p in pods)
            surged += len(pods) > 1
        self.max_unavailable = max(self.max_unavailable, unavailable)
        self.max_surged = max(self.max_surged, surged)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                for change in self.cache.poll(count=1000, block_ms=100):
                    if change.kind == "Pod":
                        self.changes += 1
                        self._check(change.id)
        except BaseException as err:  # surfaced by finish()
            self.error = err

    def finish(self) -> BudgetWatch:
        """Stop once everything written so far has been checked."""
        tip = self.store.log_tip()
        wait_for(lambda: self.error is not None or codec.id_ge(self.cache.position, tip),
                 what="budget watch caught up")
        self._stop.set()
        self._thread.join(10)
        if self.error is not None:
            raise self.error
        return self


# ---- rolling updates ------------------------------------------------------------------------


@pytest.mark.parametrize(("strategy", "unavailable", "surged"), [
    (rolling("10%", 0), 5, 0),  # 10% of 50 nodes
    (rolling(0, "10%"), 0, 5),
], ids=["maxUnavailable", "maxSurge"])
def test_rolling_update_never_exceeds_budget_at_any_moment(
        stack: Stack, strategy: Obj, unavailable: int, surged: int) -> None:
    start(stack, 50, workers=2)
    create(stack, daemonset("big", strategy=strategy), 50)
    watch = BudgetWatch(stack, "big")
    set_image(stack, "big", "registry.example/app:v2")
    wait_for(lambda: rolled_out(stack, "big", 50), timeout=60, what="50-node rollout")
    watch.finish()
    assert watch.changes > 100
    # the budget is used and never exceeded, at every one of the log entries
    assert (watch.max_unavailable, watch.max_surged) == (unavailable, surged)


def test_rolling_update_waits_min_ready_seconds(stack: Stack, tmp_path: Path) -> None:
    start(stack, 4, "--ready-delay", "0.3")
    manifest = daemonset("slow", strategy=rolling(2, 0), min_ready_seconds=2)
    create(stack, manifest, 4)
    watch = BudgetWatch(stack, "slow")
    manifest["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.example/app:v2"
    (tmp_path / "slow.yaml").write_text(yaml.safe_dump(manifest))
    applied = run(stack, "apply", "-f", str(tmp_path / "slow.yaml"))
    assert applied.output == "daemonset.apps/slow configured\n"  # a template change: a rollout
    # no event arrives when a pod becomes available: only the requeues finish the rollout
    wait_for(lambda: rolled_out(stack, "slow", 4), timeout=30, what="rollout")
    watch.finish()
    # two nodes at a time: the second pair goes only once the first is available (Ready
    # for more than minReadySeconds)
    assert watch.max_unavailable == 2
    status = stack.status("default/slow")
    assert status["numberAvailable"] == status["numberReady"] == 4


def test_rollout_to_never_ready_image_stalls_within_budget_and_undo_recovers(
        stack: Stack) -> None:
    start(stack, 10, "--never-ready", "*:broken")
    create(stack, daemonset("app", strategy=rolling(2, 0)), 10)
    watch = BudgetWatch(stack, "app")
    set_image(stack, "app", "registry.example/app:broken")
    broken = wait_for(lambda: current_revision(stack, "app"), what="revision 2")

    def updated() -> list[Obj]:
        return [p for p in daemon_pods(stack, "app") if not meta.is_being_deleted(p)
                and meta.labels(p).get(dsutil.HASH_LABEL) == history.revision_hash(broken)]

    wait_for(lambda: len(updated()) == 2 and stack.status("default/app").get(
        "updatedNumberScheduled") == 2, what="two pods of the broken revision")
    stalled = run(stack, "rollout", "status", "ds/app", "--timeout", "1500ms")
    assert stalled.exit_code == 1
    assert stalled.stdout.splitlines()[-1] == (
        'Waiting for daemon set "app" rollout to finish: 2 out of 10 new pods have been '
        "updated...")
    assert stalled.stderr == "error: timed out waiting for the condition\n"
    assert len(updated()) == 2  # stalled: nothing more was replaced

    undo = run(stack, "rollout", "undo", "ds/app")
    assert (undo.exit_code, undo.output) == (0, "daemonset.apps/app rolled back\n")
    done = run(stack, "rollout", "status", "ds/app", "--timeout", "30s")
    assert done.exit_code == 0, done.output
    assert done.output.splitlines()[-1] == 'daemon set "app" successfully rolled out'
    wait_for(lambda: rolled_out(stack, "app", 10), what="back on the first revision")
    watch.finish()
    assert watch.max_unavailable == 2


def test_set_image_and_rollout_status_report_progress_like_kubectl(stack: Stack) -> None:
    start(stack, 5, "--ready-delay", "0.2")
    create(stack, daemonset("web", strategy=rolling(1, 0)), 5)
    first = run(stack, "rollout", "undo", "ds/web")
    assert (first.exit_code, first.stderr) == (1, "error: no last revision to roll back to\n")
    assert run(stack, "set", "image", "ds/web", "app=registry.example/app:v1").output == ""
    set_image(stack, "web", "registry.example/app:v2")
    result = run(stack, "rollout", "status", "ds/web", "--timeout", "60s")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert all(STATUS_LINE.match(line) for line in lines), lines
    assert lines[-1] == 'daemon set "web" successfully rolled out'
    assert rolled_out(stack, "web", 5)
    pods = daemon_pods(stack, "web")
    assert {meta.labels(p)[dsutil.GENERATION_LABEL] for p in pods} == {"2"}
    assert {p["spec"]["containers"][0]["image"] for p in pods} == {"registry.example/app:v2"}
    again = run(stack, "rollout", "status", "daemonset", "web", "--watch=false")
    assert (again.exit_code, again.output) == (0, 'daemon set "web" successfully rolled out\n')


def test_rollout_restart_replaces_every_pod(stack: Stack) -> None:
    start(stack, 3)
    create(stack, daemonset("web", strategy=rolling(0, 1)), 3)
    before = {meta.uid(p) for p in daemon_pods(stack, "web")}
    result = run(stack, "rollout", "restart", "ds/web")
    assert (result.exit_code, result.output) == (0, "daemonset.apps/web restarted\n")
    template = stack.store.get("DaemonSet", "default/web")["spec"]["template"]
    assert "kubectl.kubernetes.io/restartedAt" in template["metadata"]["annotations"]
    wait_for(lambda: rolled_out(stack, "web", 3)
             and not before & {meta.uid(p) for p in daemon_pods(stack, "web")},
             timeout=30, what="every pod replaced")


# ---- OnDelete -------------------------------------------------------------------------------


def test_on_delete_replaces_a_pod_only_when_it_is_deleted(stack: Stack) -> None:
    start(stack, 3)
    create(stack, daemonset("od", strategy={"type": "OnDelete"}), 3)
    old_hash = history.revision_hash(current_revision(stack, "od") or {})
    set_image(stack, "od", "registry.example/app:v2")
    new = wait_for(lambda: current_revision(stack, "od"), what="revision 2")
    wait_for(lambda: stack.status("default/od").get("observedGeneration") == 2,
             what="template change observed")
    pods = daemon_pods(stack, "od")
    assert {meta.labels(p)[dsutil.HASH_LABEL] for p in pods} == {old_hash}
    status = run(stack, "rollout", "status", "ds/od")
    assert (status.exit_code, status.stderr) == (
        1, "error: rollout status is only available for RollingUpdate strategy type\n")

    victim = pods[0]
    deleted = run(stack, "delete", "pod", meta.name(victim))
    assert deleted.exit_code == 0, deleted.output

    def hashes() -> dict[str, str]:
        return {podutil.target_node(p) or "": meta.labels(p)[dsutil.HASH_LABEL]
                for p in daemon_pods(stack, "od") if not meta.is_being_deleted(p)}

    node = podutil.target_node(victim)
    wait_for(lambda: hashes().get(node) == history.revision_hash(new), what="replacement")
    assert sorted(hashes().values()) == sorted([history.revision_hash(new), old_hash, old_hash])
    wait_for(lambda: stack.status("default/od").get("updatedNumberScheduled") == 1,
             what="one updated pod counted")


# ---- history ----------------------------------------------------------------------------------


def test_rollback_from_revision_3_to_1_renumbers_revision_1(stack: Stack) -> None:
    start(stack, 4)
    create(stack, daemonset("web", strategy=rolling(2, 0)), 4)
    first = current_revision(stack, "web")
    assert first is not None and first["revision"] == 1
    for image in ("registry.example/app:v2", "registry.example/app:v3"):
        set_image(stack, "web", image)
        wait_for(lambda: rolled_out(stack, "web", 4), timeout=30, what=f"rolled to {image}")
    assert [cr["revision"] for cr in revisions(stack, "web")] == [1, 2, 3]

    result = run(stack, "rollout", "undo", "ds/web", "--to-revision=1")
    assert (result.exit_code, result.output) == (0, "daemonset.apps/web rolled back\n")
    wait_for(lambda: rolled_out(stack, "web", 4), timeout=30, what="rolled back")
    crs = revisions(stack, "web")
    # no new revision: revision 1's ControllerRevision is the current one, renumbered to 4
    assert [(meta.name(cr), cr["revision"]) for cr in crs][-1] == (meta.name(first), 4)
    assert len(crs) == 3
    pods = daemon_pods(stack, "web")
    assert {meta.labels(p)[dsutil.HASH_LABEL] for p in pods} == {history.revision_hash(first)}
    assert {meta.labels(p)[dsutil.GENERATION_LABEL] for p in pods} == {"4"}
    assert {p["spec"]["containers"][0]["image"] for p in pods} == {"registry.example/app:v1"}

    table = run(stack, "rollout", "history", "ds/web")
    assert table.output == ("daemonset.apps/web \nREVISION  CHANGE-CAUSE\n2         <none>\n"
                            "3         <none>\n4         <none>\n\n")
    shown = run(stack, "rollout", "history", "ds/web", "--revision", "4")
    assert shown.output.startswith("daemonset.apps/web with revision #4\nPod Template:\n"
                                   "  Labels:\tapp=web\n  Containers:\n   app:\n"
                                   "    Image:\tregistry.example/app:v1\n")
    skipped = run(stack, "rollout", "undo", "ds/web", "--to-revision", "4")
    assert skipped.output == ("daemonset.apps/web skipped rollback (current template already "
                              "matches revision 4)\n")
    missing = run(stack, "rollout", "undo", "ds/web", "--to-revision", "1")
    assert (missing.exit_code, missing.stderr) == (
        1, "error: unable to find specified revision 1 in history\n")


def test_revision_history_limit_never_deletes_a_revision_live_pods_use(stack: Stack) -> None:
    start(stack, 2)
    create(stack, daemonset("od", strategy={"type": "OnDelete"}, history_limit=2), 2)
    first = current_revision(stack, "od")
    assert first is not None
    for n in range(2, 6):  # four template changes: revisions 2..5
        set_image(stack, "od", f"registry.example/app:v{n}")
        wait_for(lambda n=n: (current_revision(stack, "od") or {}).get("revision") == n,
                 what=f"revision {n}")
    # revisions 2 and 3 are gone; revision 1 stays beyond the limit: the pods still use it
    wait_for(lambda: [cr["revision"] for cr in revisions(stack, "od")] == [1, 4, 5],
             what="history cleaned up to the limit")
    assert history.revision_hash(revisions(stack, "od")[0]) == history.revision_hash(first)
    assert run(stack, "rollout", "history", "ds/od").output == (
        "daemonset.apps/od \nREVISION  CHANGE-CAUSE\n1         <none>\n4         <none>\n"
        "5         <none>\n\n")

    # once no pod uses revision 1 (both pods deleted and replaced by revision 5), the next
    # cleanup beyond the limit removes it
    for pod in daemon_pods(stack, "od"):
        assert run(stack, "delete", "pod", meta.name(pod)).exit_code == 0
    wait_for(lambda: rolled_out(stack, "od", 2), what="pods replaced by revision 5")
    set_image(stack, "od", "registry.example/app:v6")
    wait_for(lambda: [cr["revision"] for cr in revisions(stack, "od")] == [4, 5, 6],
             what="revision 1 removed")


def test_revision_name_collision_bumps_collision_count(stack: Stack) -> None:
    ds = stack.store.create(daemonset("web"))
    template = dsutil.template(ds)
    taken = history.compute_hash(template, None)
    # a revision of somebody else already holds the name the first revision would get
    stack.store.create({
        "apiVersion": "apps/v1", "kind": "ControllerRevision",
        "metadata": {"name": f"web-{taken}", "namespace": "default",
                     "labels": {"app": "other"}},
        "data": {"spec": {"template": {"$patch": "replace"}}}, "revision": 1})
    start(stack, 2)
    wait_for(lambda: rolled_out(stack, "web", 2), what="rolled out")
    assert stack.status("default/web").get("collisionCount") == 1
    cr = current_revision(stack, "web")
    assert cr is not None and history.revision_hash(cr) == history.compute_hash(template, 1)
    assert meta.name(cr) == f"web-{history.compute_hash(template, 1)}"


def test_orphaned_revision_is_adopted_and_numbered_below_the_current(stack: Stack) -> None:
    stack.store.create(daemonset("web"))
    orphan = history.new_revision(daemonset("web", image="registry.example/app:v0"),
                                  "oldhash", 7)
    orphan["metadata"].pop("ownerReferences")
    stack.store.create(orphan)
    start(stack, 2)
    wait_for(lambda: rolled_out(stack, "web", 2), what="rolled out")
    crs = revisions(stack, "web")  # owned ones only: the orphan was adopted
    assert [(meta.name(cr), cr["revision"]) for cr in crs] == [
        ("web-oldhash", 7), (meta.name(current_revision(stack, "web") or {}), 8)]
    undo = run(stack, "rollout", "undo", "ds/web")
    assert undo.output == "daemonset.apps/web rolled back\n"
    assert stack.store.get("DaemonSet", "default/web")["spec"]["template"]["spec"][
        "containers"][0]["image"] == "registry.example/app:v0"


# ---- what the CLI refuses, as kubectl does ------------------------------------------------------


def test_rollout_refuses_what_kubectl_refuses(stack: Stack) -> None:
    stack.store.create(daemonset("web"))
    missing = run(stack, "rollout", "history", "ds/nope")
    assert (missing.exit_code, missing.stderr) == (
        1, 'Error from server (NotFound): daemonsets.apps "nope" not found\n')
    no_history = run(stack, "rollout", "history", "ds/web")
    assert no_history.output == "daemonset.apps/web \nNo rollout history found.\n"
    bad = run(stack, "set", "image", "ds/web", "nope=x:1")
    assert (bad.exit_code, bad.stderr) == (1, 'error: unable to find container named "nope"\n')
    every = run(stack, "set", "image", "daemonset", "web", "*=x:2")
    assert every.output == "daemonset.apps/web image updated\n"
    timeout = run(stack, "rollout", "status", "ds/web", "--timeout", "5")
    assert (timeout.exit_code, timeout.stderr) == (
        1, 'error: invalid argument "5" for "--timeout" flag: time: missing unit in duration '
           '"5"\n')
