"""Helpers of the deletion and garbage-collection tests (test_delete*.py, test_gc*.py): the
CLI in-process against a running stack, DaemonSet manifests, and reads by owner uid."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner, Result

from services.cli import context
from services.cli.main import cli
from shared.model import meta
from shared.store import codec
from shared.store.log import redis_reader
from tests.integration.stack import Stack, wait_for

Obj = dict[str, Any]
NS = "default"
NODES = 3
_stacks = itertools.count()


def shared_stack(redis_url: str, log_dir: Path, nodes: int = NODES) -> Iterator[Stack]:
    """A running stack for every test of one module (its own prefix): starting five
    processes costs seconds, and tests that only create and delete DaemonSets of their own
    names do not disturb each other."""
    s = Stack(redis_url, f"gc{os.getpid()}m{next(_stacks)}", log_dir)
    try:
        s.start_all(workers=1, nodes=nodes)
        wait_for(lambda: len(s.store.list("Node")) == nodes, what=f"{nodes} nodes")
        yield s
    finally:
        s.stop()


def manifest(name: str, app: str | None = None, image: str = "registry.k8s.io/pause:3.9") -> str:
    """A DaemonSet manifest; its pods carry ``app=<app>`` (default: the name)."""
    app = app or name
    return yaml.safe_dump({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "selector": {"matchLabels": {"app": app}},
            "template": {"metadata": {"labels": {"app": app}},
                         "spec": {"containers": [{"name": "c", "image": image}],
                                  "terminationGracePeriodSeconds": 5}},
        },
    })


def run(stack: Stack, *args: str, input: str | None = None) -> Result:
    """The CLI in-process (click's CliRunner), pointed at the stack's Redis and prefix."""
    return CliRunner().invoke(
        cli, ["--redis-url", stack.redis_url, "--prefix", stack.prefix, *args],
        obj=context.CliEnv(), input=input, catch_exceptions=False)


def apply(stack: Stack, name: str, app: str | None = None) -> Obj:
    """``daemonbus apply -f -`` of ``manifest(name, app)``; returns the stored DaemonSet."""
    result = run(stack, "apply", "-f", "-", input=manifest(name, app))
    assert result.exit_code == 0, result.output
    return stack.store.get("DaemonSet", f"{NS}/{name}")


def owned(stack: Stack, kind: str, uid: str) -> list[Obj]:
    """Objects of ``kind`` whose controller reference names ``uid``."""
    return [o for o in stack.store.list(kind)
            if (meta.controller_ref(o) or {}).get("uid") == uid]


def ready_pods(stack: Stack, uid: str, count: int = NODES) -> list[Obj]:
    """Wait for ``count`` running pods owned by ``uid``; returns them."""
    def ready() -> list[Obj] | None:
        pods = owned(stack, "Pod", uid)
        return pods if len(pods) == count and all(
            (p.get("status") or {}).get("phase") == "Running" for p in pods) else None

    pods: list[Obj] = wait_for(ready, what=f"{count} running pods of {uid}")
    return pods


def running_ds(stack: Stack, name: str, nodes: int = NODES) -> Obj:
    """Apply a DaemonSet and wait for a running pod per node and its revision."""
    ds = apply(stack, name)
    ready_pods(stack, meta.uid(ds), nodes)
    wait_for(lambda: owned(stack, "ControllerRevision", meta.uid(ds)), what="a revision")
    return ds


def gone(stack: Stack, obj: Obj) -> bool:
    """``obj`` (this very object: a replacement may reuse its name) no longer exists."""
    now = stack.store.try_get(str(obj["kind"]), meta.key(obj))
    return now is None or meta.uid(now) != meta.uid(obj)


def hold(obj: Obj) -> Obj:
    """A ``Store.mutate`` edit adding a finalizer of some other controller."""
    obj["metadata"]["finalizers"] = ["example.com/hold"]
    return obj


def release(obj: Obj) -> Obj:
    """A ``Store.mutate`` edit removing every finalizer."""
    obj["metadata"]["finalizers"] = []
    return obj


def log_entries_after(stack: Stack, position: str) -> list[codec.Entry]:
    """Every log entry after ``position``."""
    reader = redis_reader(stack.store.r, stack.store.keys, position)
    out: list[codec.Entry] = []
    while batch := reader.read(count=5000):
        out += batch
    return out
