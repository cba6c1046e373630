"""Rollout gates: which nodes the rollout annotations (``shared.model.rolloutopts``) hold at
the old revision in this pass of the rolling update. Pure: decides.

A node is held when it should run the daemon and has a live pod of an old revision, and:

* ``paused``: always; no old pod is deleted (nor a surge pod created) for an update while the
  DaemonSet is paused, whether the old pod is available or not;
* ``node-selector``: its labels do not match the selector (only matching nodes are updated);
* ``partition``: it is among the last ``partition`` not-yet-updated eligible nodes in name
  order. Eligible nodes are those that should run and match the node selector; a node counts
  as updated (or updating) once it has a pod of the current revision. So the rollout walks
  the eligible nodes in name order (the order the rolling update already takes candidates
  in) and stops when ``partition`` of them still run an old pod; lowering it lets the next
  ones go; raising it never rolls an updated node back.

Nodes that newly need a pod are not gated: ``manage`` gives them the current revision (see
docs/rollouts.md for why), and they count as updated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shared.daemonset.placement import Decision
from shared.daemonset.podfacts import PodFacts
from shared.model import meta, rolloutopts

Obj = dict[str, Any]

REASON_PAUSED = f"rollout paused ({rolloutopts.PAUSED})"
REASON_SELECTOR = f"held at the old revision: node does not match {rolloutopts.NODE_SELECTOR}"


def partition_reason(partition: int) -> str:
    return f"held at the old revision by {rolloutopts.PARTITION}={partition}"


def held_nodes(
    options: rolloutopts.Options,
    nodes: Sequence[tuple[str, Obj]],
    decisions: Mapping[str, Decision],
    node_pods: Mapping[str, list[PodFacts]],
) -> dict[str, str]:
    """Node name → why it keeps its old pod in this pass (empty without gating options).
    ``nodes`` are (name, Node) pairs in name order."""
    if not options.gated:
        return {}
    held: dict[str, str] = {}
    selector = options.node_selector
    eligible = 0
    not_started: list[str] = []  # eligible, an old pod and no pod of the current revision
    for name, node in nodes:
        if not decisions[name].should_run:
            continue
        matches = selector is None or selector.matches(meta.labels(node))
        eligible += matches
        live = [p for p in node_pods.get(name, ()) if not p.deleting]
        if all(p.updated for p in live):
            continue  # no old pod: nothing to hold
        if options.paused:
            held[name] = REASON_PAUSED
        elif not matches:
            held[name] = REASON_SELECTOR
        elif not any(p.updated for p in live):
            not_started.append(name)
    keep = min(rolloutopts.scaled_partition(options.partition, eligible), len(not_started))
    if keep > 0:
        reason = partition_reason(rolloutopts.scaled_partition(options.partition, eligible))
        for name in not_started[len(not_started) - keep:]:
            held[name] = reason
    return held
