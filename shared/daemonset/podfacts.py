"""What one plan reads of each claimed pod, read once (``getNodesToDaemonPods`` plus facts).
Pure.

At thousands of nodes the steady state (one Ready pod per node, nothing to do) is all dict
look-ups: manage, rollingUpdate, status and the reasons each re-read the same deletion
timestamp, phase, Ready condition and revision labels of every pod. :func:`by_node` reads
them once per pod into a :class:`PodFacts`; the passes read the facts, and keep the pod itself
for the rare paths that act on it (deletes, ordering duplicates, the surge rules).

Only exception-free reads are done eagerly. Availability under minReadySeconds parses a
timestamp, so it is left to :func:`availability`, evaluated where the passes ask for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from shared.model import meta, podutil

Obj = dict[str, Any]

_TERMINAL = (podutil.SUCCEEDED, podutil.FAILED)


class PodFacts(NamedTuple):
    """One claimed pod as the passes of one plan see it (a tuple: cheap to build by the
    thousand)."""

    pod: Obj
    node: str | None  # podutil.target_node
    deleting: bool  # meta.is_being_deleted
    terminal: bool  # podutil.is_terminal
    ready: bool  # podutil.is_ready
    updated: bool  # status.is_pod_updated against the plan's hash and template generation

    @property
    def running(self) -> bool:
        """Neither being deleted nor terminal: a pod ``manage`` leaves alone on its own."""
        return not self.deleting and not self.terminal


def read(pod: Obj, is_updated: Callable[[dict[str, str]], bool]) -> PodFacts:
    """The facts of ``pod``; ``is_updated`` decides on its labels
    (``status.labels_updated_check``).

    The accessors of ``meta`` and ``podutil`` are inlined here, each dict fetched once: this
    runs for every pod of every plan, and a call costs about as much as a read. The unit tests
    hold it equal to those accessors.
    """
    md = pod.get("metadata")
    if not isinstance(md, dict):
        md = {}
    pod_status = pod.get("status")
    if not isinstance(pod_status, dict):
        pod_status = {}
    pod_spec = pod.get("spec")
    node_name = str(pod_spec.get("nodeName") or "") if isinstance(pod_spec, dict) else ""
    ready = False
    conditions = pod_status.get("conditions")
    if isinstance(conditions, list):
        for cond in conditions:  # the first Ready condition decides
            if isinstance(cond, dict) and cond.get("type") == "Ready":
                ready = cond.get("status") == "True"
                break
    labels = md.get("labels")
    # _make: the generated keyword-capable constructor costs half again as much.
    return PodFacts._make(
        (
            pod,
            node_name or podutil.target_node(pod),
            bool(md.get("deletionTimestamp")),
            str(pod_status.get("phase") or "") in _TERMINAL,
            ready,
            is_updated(labels if isinstance(labels, dict) else {}),
        )
    )


def by_node(
    claimed: Iterable[Obj], is_updated: Callable[[dict[str, str]], bool]
) -> dict[str, list[PodFacts]]:
    """``claim.nodes_to_daemon_pods`` as facts: grouped by target node, deleted terminal pods
    and pods with no target node left out, each node's pods in name order (stable).

    Pods are read in the order given, which need not be by name: only nodes with more than
    one pod need sorting, and that gives what grouping pods taken by name would.
    """
    result: dict[str, list[PodFacts]] = {}
    crowded: list[list[PodFacts]] = []
    for pod in claimed:
        facts = read(pod, is_updated)
        node = facts.node
        if node is None or not kept(facts):
            continue
        bucket = result.get(node)
        if bucket is None:
            result[node] = [facts]
        else:
            if len(bucket) == 1:
                crowded.append(bucket)
            bucket.append(facts)
    for bucket in crowded:
        bucket.sort(key=name_key)
    return result


def kept(facts: PodFacts) -> bool:
    """Whether :func:`by_node` keeps a pod: it has a target node and is not a deleted
    terminal pod."""
    return facts.node is not None and not (facts.deleting and facts.terminal)


def name_key(facts: PodFacts) -> str:
    """The order of one node's pods in :func:`by_node`: by name."""
    return meta.name(facts.pod)


def availability(min_ready_seconds: int, now: float) -> Callable[[PodFacts], bool]:
    """``podutil.is_available`` on facts: without minReadySeconds, available is ready."""
    if not min_ready_seconds:
        return _ready

    def available(facts: PodFacts) -> bool:
        return podutil.is_available(facts.pod, min_ready_seconds, now)

    return available


def _ready(facts: PodFacts) -> bool:
    return facts.ready
