"""Small object builders for the pure DaemonSet core tests (no IO, explicit ``now``)."""

from __future__ import annotations

from typing import Any

from shared.daemonset import dsutil, history
from shared.daemonset.types import BackoffEntry, Snapshot
from shared.model import meta

Obj = dict[str, Any]

NOW = 1_700_000_000.0  # the fake clock of every test
NS = "default"
DS_UID = "ds-uid-1"
SIMPLE_LABELS = {"name": "simple-daemon", "type": "production"}
NODE_LABELS = {"color": "blue"}


def ts(epoch: float) -> str:
    return meta.format_time(epoch)


def make_node(
    name: str, labels: dict[str, str] | None = None, taints: list[Obj] | None = None
) -> Obj:
    node: Obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels if labels is not None else NODE_LABELS)},
        "spec": {},
    }
    if taints:
        node["spec"]["taints"] = taints
    return node


def make_nodes(count: int, labels: dict[str, str] | None = None, start: int = 0) -> list[Obj]:
    return [make_node(f"node-{i}", labels) for i in range(start, start + count)]


def make_ds(
    name: str = "foo",
    *,
    labels: dict[str, str] | None = None,
    selector: Obj | None = None,
    pod_spec: Obj | None = None,
    strategy: Obj | None = None,
    min_ready_seconds: int | None = None,
    revision_history_limit: int | None = None,
    generation: int = 1,
    template_generation: int | None = 1,
    status: Obj | None = None,
    uid: str = DS_UID,
) -> Obj:
    lb = dict(labels if labels is not None else SIMPLE_LABELS)
    spec: Obj = {
        "selector": selector if selector is not None else {"matchLabels": dict(lb)},
        "template": {
            "metadata": {"labels": dict(lb)},
            "spec": pod_spec
            if pod_spec is not None
            else {"containers": [{"name": "foo", "image": "foo/bar"}]},
        },
    }
    if strategy is not None:
        spec["updateStrategy"] = strategy
    if min_ready_seconds is not None:
        spec["minReadySeconds"] = min_ready_seconds
    if revision_history_limit is not None:
        spec["revisionHistoryLimit"] = revision_history_limit
    md: Obj = {"name": name, "namespace": NS, "uid": uid, "generation": generation}
    if template_generation is not None:
        md["annotations"] = {dsutil.GENERATION_ANNOTATION: str(template_generation)}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": md,
        "spec": spec,
        "status": status if status is not None else {},
    }


def rolling(max_unavailable: Any = 1, max_surge: Any = 0) -> Obj:
    return {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": max_unavailable, "maxSurge": max_surge},
    }


def current_hash(ds: Obj) -> str:
    """The hash a DaemonSet's first revision gets (no revisions exist yet)."""
    return history.compute_hash(dsutil.template(ds), dsutil.collision_count(ds))


def make_pod(
    name: str,
    node: str | None,
    *,
    ds: Obj | None = None,
    labels: dict[str, str] | None = None,
    hash: str | None = None,
    phase: str = "Running",
    ready: bool = True,
    ready_since: float | None = None,
    created: float = NOW - 3600,
    deleting: bool = False,
    affinity_node: str | None = None,
    uid: str | None = None,
) -> Obj:
    """A pod bound to ``node`` (spec.nodeName) or, with ``affinity_node``, only targeted there.
    Owned by ``ds`` when given; labelled with the DaemonSet labels and ``hash`` when given."""
    lb = dict(labels if labels is not None else SIMPLE_LABELS)
    if hash is not None:
        lb[dsutil.HASH_LABEL] = hash
    md: Obj = {
        "name": name,
        "namespace": NS,
        "uid": uid or f"uid-{name}",
        "labels": lb,
        "creationTimestamp": ts(created),
    }
    if ds is not None:
        md["ownerReferences"] = [meta.controller_owner_ref(ds)]
    if deleting:
        md["deletionTimestamp"] = ts(NOW - 1)
    spec: Obj = {"containers": [{"name": "foo", "image": "foo/bar"}]}
    if node:
        spec["nodeName"] = node
    if affinity_node:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {
                                    "key": "metadata.name",
                                    "operator": "In",
                                    "values": [affinity_node],
                                }
                            ]
                        }
                    ]
                }
            }
        }
    status: Obj = {"phase": phase}
    if ready:
        status["conditions"] = [
            {
                "type": "Ready",
                "status": "True",
                "lastTransitionTime": ts(ready_since if ready_since is not None else NOW - 3600),
            }
        ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec, "status": status}


def daemon_pod(ds: Obj, node: str | None, name: str | None = None, **kwargs: Any) -> Obj:
    """A current (updated) daemon pod of ``ds`` on ``node``."""
    kwargs.setdefault("hash", current_hash(ds))
    return make_pod(name or f"{meta.name(ds)}-{node}", node, ds=ds, **kwargs)


def snapshot(
    ds: Obj | None,
    nodes: list[Obj] | None = None,
    pods: list[Obj] | None = None,
    *,
    revisions: list[Obj] | None = None,
    backoff: dict[str, BackoffEntry] | None = None,
    expectations_satisfied: bool = True,
    now: float = NOW,
) -> Snapshot:
    return Snapshot(
        key=f"{NS}/{meta.name(ds) if ds else 'foo'}",
        ds=ds,
        nodes=list(nodes or []),
        pods=list(pods or []),
        revisions=list(revisions or []),
        backoff=dict(backoff or {}),
        expectations_satisfied=expectations_satisfied,
        now=now,
    )
