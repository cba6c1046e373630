"""``daemonbus delete ds/NAME --cascade=…`` end to end (spec §h): the CLI against a running
stack (watcher, reconciler, status-writer, gc, node agent) on a real Redis.

* background (the default): the DaemonSet goes at once, then the garbage collector deletes
  its pods and ControllerRevisions;
* foreground: the DaemonSet stays, with a deletionTimestamp and the ``foregroundDeletion``
  finalizer, until its dependents are gone, then it goes;
* orphan (and the deprecated ``--cascade=false``): the pods and revisions lose their owner
  reference and keep running;
* ``--wait`` returns once the objects are gone (kubectl's default; ours is not to wait).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shared.model import meta
from shared.store.client import Store, connect
from shared.store.keys import Keys
from shared.store.server import RedisServer
from tests.integration.gcstack import (
    NS,
    gone,
    hold,
    owned,
    release,
    run,
    running_ds,
    shared_stack,
)
from tests.integration.stack import Stack, wait_for

Obj = dict[str, Any]


@pytest.fixture(scope="module")
def stack(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """One running stack for the module (named ``stack`` so failures print its logs)."""
    yield from shared_stack(redis_server.url, Path(tmp_path_factory.mktemp("delete")))


def test_delete_background_removes_daemonset_then_pods_and_revisions(stack: Stack) -> None:
    ds = running_ds(stack, "bg")

    result = run(stack, "delete", "ds/bg")

    assert result.exit_code == 0, result.output
    assert result.stdout == 'daemonset.apps "bg" deleted\n'
    assert stack.store.try_get("DaemonSet", f"{NS}/bg") is None  # gone at once
    wait_for(lambda: not owned(stack, "Pod", meta.uid(ds))
             and not owned(stack, "ControllerRevision", meta.uid(ds)),
             what="pods and revisions of bg collected")


def test_delete_foreground_keeps_daemonset_until_dependents_are_gone(stack: Stack) -> None:
    ds = running_ds(stack, "fg")
    uid = meta.uid(ds)
    seen: list[tuple[bool, int]] = []  # (DaemonSet present, dependents left), while waiting

    result = run(stack, "delete", "ds", "fg", "--cascade=foreground")

    assert result.exit_code == 0, result.output
    left = stack.store.get("DaemonSet", f"{NS}/fg")
    assert meta.finalizers(left) == ["foregroundDeletion"]
    assert left["metadata"]["deletionTimestamp"]

    def ds_gone() -> bool:
        present = stack.store.try_get("DaemonSet", f"{NS}/fg") is not None
        seen.append((present, len(owned(stack, "Pod", uid))
                     + len(owned(stack, "ControllerRevision", uid))))
        return not present

    wait_for(ds_gone, interval=0.01, what="fg deleted after its dependents")
    assert not owned(stack, "Pod", uid) and not owned(stack, "ControllerRevision", uid)
    assert any(deps for _, deps in seen), "the DaemonSet waited for its dependents"
    assert all(present for present, deps in seen if deps), "never gone before its dependents"


@pytest.mark.parametrize("cascade", ["orphan", "false"])
def test_delete_orphan_leaves_pods_and_revisions_running_without_owner(
        stack: Stack, cascade: str) -> None:
    name = f"orph-{cascade}"
    ds = running_ds(stack, name)
    uid = meta.uid(ds)
    pods = {meta.uid(p): p for p in owned(stack, "Pod", uid)}
    revisions = {meta.uid(r): r for r in owned(stack, "ControllerRevision", uid)}

    result = run(stack, "delete", f"ds/{name}", f"--cascade={cascade}")

    assert result.exit_code == 0, result.output
    if cascade == "false":
        assert result.stderr == ("warning: --cascade=false is deprecated (boolean value) and "
                                 "can be replaced with --cascade=orphan.\n")
    wait_for(lambda: gone(stack, ds), what=f"{name} deleted after orphaning")
    for obj in [*pods.values(), *revisions.values()]:
        now = stack.store.get(str(obj["kind"]), meta.key(obj))
        assert meta.uid(now) == meta.uid(obj), "the very same object is left"
        assert not meta.owner_references(now), meta.name(obj)
        assert not meta.is_being_deleted(now), meta.name(obj)
        if obj["kind"] == "Pod":
            assert now["status"]["phase"] == "Running"


def test_delete_wait_returns_once_the_daemonset_and_its_pods_are_gone(stack: Stack) -> None:
    ds = running_ds(stack, "waited")

    result = run(stack, "delete", "ds/waited", "--cascade=foreground", "--wait",
                 "--timeout=60s")

    assert result.exit_code == 0, result.output
    assert gone(stack, ds)
    assert not owned(stack, "Pod", meta.uid(ds))


def test_delete_wait_times_out_on_a_finalizer_nobody_removes(stack: Stack) -> None:
    ds = running_ds(stack, "stuck")
    stack.store.mutate("DaemonSet", meta.key(ds), hold)

    result = run(stack, "delete", "ds/stuck", "--wait", "--timeout=200ms")

    assert result.exit_code == 1
    assert result.stdout == 'daemonset.apps "stuck" deleted\n'
    assert result.stderr == ("error: timed out waiting for the condition on "
                             "daemonsets.apps/stuck\n")
    assert meta.is_being_deleted(stack.store.get("DaemonSet", meta.key(ds)))


# ---- the store's delete semantics for pods with finalizers (no processes needed) -------------


@pytest.fixture
def store(redis_url: str, prefix: str) -> Store:
    return Store(connect(redis_url), Keys(prefix))


def bound_pod(store: Store, name: str) -> Obj:
    return store.create({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "finalizers": ["example.com/hold"]},
        "spec": {"nodeName": "node-1", "terminationGracePeriodSeconds": 30,
                 "containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": "Running"},
    })


def test_removing_the_finalizer_during_the_grace_period_leaves_the_pod_terminating(
        store: Store) -> None:
    """As the API server: a pod whose grace period still runs is removed by its kubelet (our
    node agent), not by the update that removes its last finalizer."""
    pod = bound_pod(store, "graceful")
    left = store.delete("Pod", meta.key(pod))
    assert left is not None and left["metadata"]["deletionGracePeriodSeconds"] == 30

    store.mutate("Pod", meta.key(pod), release)

    now = store.get("Pod", meta.key(pod))
    assert meta.is_being_deleted(now) and not meta.finalizers(now)


def test_force_deleted_pod_goes_with_its_last_finalizer(store: Store) -> None:
    pod = bound_pod(store, "forced")
    store.delete("Pod", meta.key(pod))
    left = store.delete("Pod", meta.key(pod), grace_seconds=0)
    assert left is not None and left["metadata"]["deletionGracePeriodSeconds"] == 0

    store.mutate("Pod", meta.key(pod), release)

    assert store.try_get("Pod", meta.key(pod)) is None
