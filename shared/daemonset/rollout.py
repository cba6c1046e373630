"""The RollingUpdate strategy (spec §d): budget, the maxSurge == 0 path (delete, then manage
creates) and the maxSurge > 0 path (create, then delete). Pure: decides.

Upstream iterates a Go map; here nodes are visited in name order so plans are reproducible.
Only *which* candidates are chosen depends on the order, never how many.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shared.daemonset import dsutil, podfacts, status
from shared.daemonset.placement import Decision
from shared.daemonset.podfacts import PodFacts

Obj = dict[str, Any]

REASON_BUDGET = "rolling update budget exhausted"

_PERCENT_RE = re.compile(r"^[+-]?[0-9]+$")


def _scaled(value: Any, total: int) -> int:
    """``GetScaledValueFromIntOrPercent(value, total, roundUp=true)``: an int as is, ``"N%"`` →
    ceil(N·total/100). Raises ValueError for None, a string without ``%`` or a bad number."""
    if value is None:
        raise ValueError("nil value for IntOrString")
    if isinstance(value, bool):
        raise ValueError("invalid type: neither int nor percentage")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        if not value.endswith("%"):
            raise ValueError("invalid type: string is not a percentage")
        number = value[:-1]
        if not _PERCENT_RE.match(number):
            raise ValueError(f"invalid value {value!r}")
        return -(-int(number) * total // 100)  # ceil
    raise ValueError("invalid type: neither int nor percentage")


def allows_surge(ds: Obj) -> bool:
    """``AllowsSurge``: RollingUpdate with a maxSurge that scales to > 0 against 1."""
    strategy = dsutil.update_strategy(ds)
    if strategy.type != dsutil.ROLLING_UPDATE or not strategy.rolling_update:
        return False
    if strategy.max_surge is None:
        return False
    try:
        return _scaled(strategy.max_surge, 1) > 0
    except ValueError:
        return False


def budget(ds: Obj, desired: int) -> tuple[int, int]:
    """``updatedDesiredNodeCounts`` (§d.1) → (maxSurge, maxUnavailable) scaled against
    ``desired``; both 0 with desired > 0 falls back to maxUnavailable 1.
    Raises ValueError("invalid value for MaxUnavailable/MaxSurge: …")."""
    strategy = dsutil.update_strategy(ds)
    max_unavailable = max_surge = 0
    if strategy.type == dsutil.ROLLING_UPDATE and strategy.rolling_update:
        try:
            max_unavailable = _scaled(strategy.max_unavailable, desired)
        except ValueError as err:
            raise ValueError(f"invalid value for MaxUnavailable: {err}") from err
        if strategy.max_surge is not None:
            try:
                max_surge = _scaled(strategy.max_surge, desired)
            except ValueError as err:
                raise ValueError(f"invalid value for MaxSurge: {err}") from err
    if desired > 0 and max_unavailable == 0 and max_surge == 0:
        max_unavailable = 1
    return max_surge, max_unavailable


def find_updated_pods_on_node(
    pods: list[Obj], hash: str, template_generation: int | None
) -> tuple[Obj | None, Obj | None, bool]:
    """``findUpdatedPodsOnNode`` → (newPod, oldPod, ok); terminating pods are ignored, and more
    than one new or more than one old pod is not ok."""
    is_updated = status.labels_updated_check(hash, template_generation)
    new, old, ok = _find_updated([podfacts.read(pod, is_updated) for pod in pods])
    return (None if new is None else new.pod), (None if old is None else old.pod), ok


def _find_updated(
    pods: Sequence[PodFacts],
) -> tuple[PodFacts | None, PodFacts | None, bool]:
    if len(pods) == 1:  # the common case, without the loop
        pod = pods[0]
        if pod.deleting:
            return None, None, True
        return (pod, None, True) if pod.updated else (None, pod, True)
    new: PodFacts | None = None
    old: PodFacts | None = None
    for pod in pods:
        if pod.deleting:
            continue
        if pod.updated:
            if new is not None:
                return None, None, False
            new = pod
        else:
            if old is not None:
                return None, None, False
            old = pod
    return new, old, True


@dataclass(frozen=True)
class Rest:
    """What the nodes a rolling update does not visit add to it (a DaemonSet index's
    split, ``planner``): ``desired`` counts every listed node that should run; the others
    are each a node whose pod is steady (one running pod of the current revision), has no
    pod, or whose one old pod is running and available and past the budget."""

    desired: int
    unavailable: int  # of them, those maxSurge 0 counts as unavailable
    available: int  # of them, those surge counts as available
    waiting: Sequence[str] = ()  # of them, those with an old pod left for later


@dataclass
class Rollout:
    """What one ``rollingUpdate`` pass decided (one ``syncNodes`` call)."""

    creates: list[str] = field(default_factory=list)  # node names
    deletes: list[Obj] = field(default_factory=list)  # pods
    waiting: list[str] = field(default_factory=list)  # nodes with an old pod, out of budget
    max_surge: int = 0
    max_unavailable: int = 0
    error: str = ""  # the sync fails with this (no actions)


def rolling_update(
    ds: Obj,
    node_names: Sequence[str],
    decisions: Mapping[str, Decision],
    node_pods: Mapping[str, list[PodFacts]],
    now: float,
    held: Collection[str] = (),
    rest: Rest | None = None,
) -> Rollout:
    """``rollingUpdate`` (§d.2/§d.3). ``node_names`` is the node list, ``decisions`` the
    placement of each listed node, ``node_pods`` the facts of the claimed pods by target node
    (``podfacts.by_node``: deleted terminal pods left out, updated against the current hash;
    may include nodes missing from the node list). ``held`` names the nodes the rollout
    gates keep at the old revision (``gates.held_nodes``): their old pods are neither deleted
    nor surged over, an unavailable one still counts against the budget; empty, this is
    exactly upstream's pass.

    ``rest``: ``node_names`` are then the nodes to visit (in name order: listed or not, with
    pods or not), and ``rest`` what the others add. A node's fate depends on how many
    unavailable (surging) nodes come before it only in which of the candidates past the
    budget wait, never in how many are taken nor which: counting the others first gives the
    same creates, deletes and waiting nodes."""
    entries: dict[str, list[PodFacts]] = {}
    if rest is None:
        # The nodes that should run first, in name order: the sort below then finds its
        # keys nearly sorted (cheap at thousands of nodes).
        desired = 0
        for name in node_names:
            if decisions[name].should_run:
                desired += 1
                entries[name] = node_pods.get(name, [])
        for name, pods in node_pods.items():
            entries.setdefault(name, pods)
        order: Sequence[str] = sorted(entries)
        rest = Rest(desired, 0, 0)
    else:
        desired = rest.desired
        entries = {name: node_pods.get(name, []) for name in node_names}
        order = node_names
    try:
        max_surge, max_unavailable = budget(ds, desired)
    except ValueError as err:
        return Rollout(error=f"couldn't get unavailable numbers: {err}")
    available = podfacts.availability(dsutil.min_ready_seconds(ds), now)

    result = Rollout(max_surge=max_surge, max_unavailable=max_unavailable)
    if max_surge == 0:
        num_unavailable = rest.unavailable
        allowed: list[Obj] = []
        candidates: list[Obj] = []
        candidate_nodes: list[str] = []
        for name in order:
            new, old, ok = _find_updated(entries[name])
            if not ok or (new is None) == (old is None):
                num_unavailable += 1
            elif new is not None:
                if not available(new):
                    num_unavailable += 1
            elif old is not None:
                if name in held:
                    num_unavailable += not available(old)
                elif not available(old):
                    allowed.append(old.pod)
                    num_unavailable += 1
                elif num_unavailable >= max_unavailable:
                    result.waiting.append(name)
                else:
                    candidates.append(old.pod)
                    candidate_nodes.append(name)
        remaining = max(0, min(max_unavailable - num_unavailable, len(candidates)))
        result.deletes = allowed + candidates[:remaining]
        result.waiting.extend(candidate_nodes[remaining:])
        result.waiting.extend(rest.waiting)
        return result

    old_to_delete: list[Obj] = []
    should_not_run_to_delete: list[Obj] = []
    candidate_new: list[str] = []
    allowed_new: list[str] = []
    num_surge, num_available = 0, rest.available
    for name in order:
        new, old, ok = _find_updated(entries[name])
        if not ok:
            num_surge += 1
            continue
        if old is None:
            if new is not None and available(new):
                num_available += 1
            continue
        old_available = available(old)
        num_available += old_available
        if name in held:
            num_surge += new is not None and not available(new)
        elif new is None:
            decision = decisions.get(name)
            if decision is None:
                return Rollout(
                    error=f'couldn\'t get node for nodeName "{name}": node "{name}" not found'
                )
            if not old_available:
                if not decision.should_run:
                    old_to_delete.append(old.pod)
                else:
                    allowed_new.append(name)
            elif not decision.should_run:
                should_not_run_to_delete.append(old.pod)
            elif num_surge >= max_surge:
                result.waiting.append(name)
            else:
                candidate_new.append(name)
        elif not available(new):
            num_surge += 1
        else:
            old_to_delete.append(old.pod)
    extra = num_available - desired
    if extra > 0:
        old_to_delete.extend(should_not_run_to_delete[:extra])
    remaining = max(0, min(max_surge - num_surge, len(candidate_new)))
    result.creates = allowed_new + candidate_new[:remaining]
    result.deletes = old_to_delete
    result.waiting.extend(candidate_new[remaining:])
    result.waiting.extend(rest.waiting)
    return result
