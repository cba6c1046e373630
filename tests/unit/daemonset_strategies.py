"""Random clusters for the hypothesis tests of the pure DaemonSet core: strategies that draw
nodes and pods as plain values, and the builders that turn a drawn value into the object.

Nodes are ``n0``, ``n1``, ...; a node is blue or red and carries one of ``TAINTS``. The
DaemonSet of ``blue_ds`` runs on blue nodes only, so every draw mixes nodes it should run on
with nodes it should not (and, through the NoExecute taint, pods it must evict)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

from tests.unit.daemonset_fixtures import NOW, current_hash, make_ds, make_node, make_pod

Obj = dict[str, Any]

TAINTS = [
    [],
    [{"key": "dedicated", "effect": "NoSchedule"}],
    [{"key": "dedicated", "effect": "NoExecute"}],
]
COLORS = st.sampled_from(["blue", "red"])
TAINTED = st.integers(0, len(TAINTS) - 1)  # an index into TAINTS
# pod owners that pod_of knows: this DaemonSet, none (an orphan it may adopt), another
# DaemonSet, this DaemonSet from another namespace, this DaemonSet with labels its selector
# does not match
OWNERS = ("ds", "orphan", "other", "elsewhere", "unmatched")


def node_ops(count: int, colors: st.SearchStrategy[str] = COLORS,
             tainted: st.SearchStrategy[int] = TAINTED) -> st.SearchStrategy[Any]:
    """``("node", i, color, taint)``: node ``n<i>`` (i < count) is added or changed (``node_of``
    of the rest)."""
    return st.tuples(st.just("node"), st.integers(0, count - 1), colors, tainted)


def pod_fields(max_node: int, owned: Sequence[str], age: st.SearchStrategy[int],
               **fields: st.SearchStrategy[Any]) -> st.SearchStrategy[Obj]:
    """The fields ``pod_of`` reads: the pod targets ``n0``..``n<max_node>``, its owner is one
    of ``owned`` (see OWNERS), it has been ready for ``age`` seconds; ``fields`` replaces the
    default strategy of any field (phase, ready, deleting, new, bound)."""
    assert set(owned) <= set(OWNERS), owned
    return st.fixed_dictionaries({
        "node": st.integers(0, max_node),
        "phase": st.sampled_from(["Running", "Running", "Pending", "Failed", "Succeeded"]),
        "ready": st.booleans(),
        "deleting": st.booleans(),
        "new": st.booleans(),
        "owned": st.sampled_from(list(owned)),
        "age": age,
        "bound": st.booleans(),
        **fields,
    })


def blue_ds(min_ready: int, strategy: Obj | None = None) -> Obj:
    """The DaemonSet of every draw: it runs on blue nodes."""
    return make_ds(strategy=strategy, min_ready_seconds=min_ready,
                   pod_spec={"containers": [], "nodeSelector": {"color": "blue"}})


def node_of(i: int, color: str, taint: int) -> Obj:
    return make_node(f"n{i}", {"color": color}, TAINTS[taint])


def pod_of(ds: Obj, j: int, p: Obj) -> Obj:
    """Pod ``p<j>`` of the drawn fields ``p`` (``pod_fields``), ``ds`` being this DaemonSet:
    bound to its node, or (``bound`` false) naming it by affinity only; of the current
    revision when ``new``."""
    node = f"n{p['node']}"
    other = make_ds("bar", uid="other-uid")
    owner = {"ds": ds, "orphan": None, "other": other, "elsewhere": ds, "unmatched": ds}
    pod = make_pod(
        f"p{j}",
        node if p["bound"] else None,
        affinity_node=None if p["bound"] else node,
        ds=owner[p["owned"]],
        labels={"app": "nothing"} if p["owned"] == "unmatched" else None,
        hash=current_hash(ds) if p["new"] else "old",
        phase=p["phase"],
        ready=p["ready"],
        ready_since=NOW - p["age"],
        created=NOW - 1000 + j,
        deleting=p["deleting"],
    )
    if p["owned"] == "elsewhere":
        pod["metadata"]["namespace"] = "elsewhere"
    return pod
