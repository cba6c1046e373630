"""The garbage collector and claiming on a running stack (spec §h, §c.3): dependents are found
by owner uid, never by name alone; orphans are adopted by a matching DaemonSet without new
pods; a pod whose labels stop matching is released and replaced; a finalizer holds a pod.
Node removal and pod GC: test_gc_nodes.py; large DaemonSets: test_gc_large.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.model import meta
from shared.store.server import RedisServer
from tests.integration.gcstack import (
    NODES,
    NS,
    apply,
    gone,
    hold,
    log_entries_after,
    owned,
    ready_pods,
    release,
    run,
    shared_stack,
)
from tests.integration.stack import Stack, wait_for


@pytest.fixture(scope="module")
def stack(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """One running stack for the module (named ``stack`` so failures print its logs)."""
    yield from shared_stack(redis_server.url, Path(tmp_path_factory.mktemp("gc")))


# ---- owner by uid --------------------------------------------------------------------------


def test_recreated_daemonset_keeps_its_pods_and_the_old_ones_go(stack: Stack) -> None:
    """Delete and at once re-create a DaemonSet of the same name: the collector tells the two
    apart by uid, so only the old one's pods are deleted."""
    old = apply(stack, "same")
    old_pods = {meta.name(p) for p in ready_pods(stack, meta.uid(old))}

    assert run(stack, "delete", "ds/same").exit_code == 0
    new = apply(stack, "same")
    assert meta.uid(new) != meta.uid(old)

    new_pods = {meta.name(p) for p in ready_pods(stack, meta.uid(new))}
    wait_for(lambda: not owned(stack, "Pod", meta.uid(old))
             and not owned(stack, "ControllerRevision", meta.uid(old)),
             what="the old DaemonSet's pods and revisions collected")
    left = {meta.name(p) for p in stack.store.list("Pod", NS)
            if meta.labels(p).get("app") == "same"}
    assert left == new_pods and not left & old_pods
    assert all(not meta.is_being_deleted(p) for p in owned(stack, "Pod", meta.uid(new)))


# ---- adoption and release (§c.3) -----------------------------------------------------------


def test_orphaned_pods_are_adopted_by_a_new_daemonset_without_new_pods(stack: Stack) -> None:
    old = apply(stack, "adoptee")
    pods = {meta.uid(p): meta.name(p) for p in ready_pods(stack, meta.uid(old))}
    assert run(stack, "delete", "ds/adoptee", "--cascade=orphan").exit_code == 0
    wait_for(lambda: stack.store.try_get("DaemonSet", f"{NS}/adoptee") is None,
             what="orphan delete finished")
    position = stack.store.log_tip()

    new = apply(stack, "adoptee")

    wait_for(lambda: len(owned(stack, "Pod", meta.uid(new))) == NODES,
             what="all orphans adopted")
    wait_for(lambda: stack.status(f"{NS}/adoptee").get("numberReady") == NODES
             and stack.status(f"{NS}/adoptee").get("updatedNumberScheduled") == NODES,
             what="status counts the adopted pods")
    adopted = {meta.uid(p): meta.name(p) for p in owned(stack, "Pod", meta.uid(new))}
    assert adopted == pods
    added = [e for e in log_entries_after(stack, position)
             if e.kind == "Pod" and e.type == "ADDED"]
    assert added == []
    assert owned(stack, "ControllerRevision", meta.uid(new)), "the revision is adopted too"


def test_pod_whose_labels_stop_matching_is_released_and_replaced(stack: Stack) -> None:
    ds = apply(stack, "rel")
    victim = sorted(ready_pods(stack, meta.uid(ds)), key=meta.name)[0]
    node = victim["spec"]["nodeName"]

    result = run(stack, "label", "pod", meta.name(victim), "app=elsewhere", "--overwrite")
    assert result.exit_code == 0, result.output

    def released() -> bool:
        pod = stack.store.get("Pod", meta.key(victim))
        return not meta.owner_references(pod)

    wait_for(released, what="the relabelled pod released")
    replacement = wait_for(lambda: [p for p in owned(stack, "Pod", meta.uid(ds))
                                    if p["spec"].get("nodeName") == node],
                           what=f"a replacement on {node}")
    assert meta.name(replacement[0]) != meta.name(victim)
    kept = stack.store.get("Pod", meta.key(victim))
    assert not meta.is_being_deleted(kept), "a released pod is left running"


# ---- finalizers ----------------------------------------------------------------------------


def test_pod_with_finalizer_stays_terminating_until_it_is_removed(stack: Stack) -> None:
    ds = apply(stack, "fin")
    held, plain = sorted(ready_pods(stack, meta.uid(ds)), key=meta.name)[:2]
    stack.store.mutate("Pod", meta.key(held), hold)

    # both terminate with the same grace period; the held pod's started first
    result = run(stack, "delete", "pod", meta.name(held), meta.name(plain), "--now")
    assert result.exit_code == 0, result.output

    wait_for(lambda: gone(stack, plain),
             what="the pod without a finalizer removed after its grace period")
    assert meta.is_being_deleted(stack.store.get("Pod", meta.key(held)))
    assert "Terminating" in run(stack, "get", "pod", meta.name(held)).stdout
    stack.store.mutate("Pod", meta.key(held), release)
    wait_for(lambda: gone(stack, held),
             what="the held pod removed once its finalizer is")
