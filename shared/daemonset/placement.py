"""Where a daemon pod should run: ``NodeShouldRunDaemonPod`` (spec §c.5) and the default
daemon-pod tolerations (§c.7). Pure: decides, no effects.

For many nodes, build a :class:`Placement` once per DaemonSet and call :meth:`Placement.decide`
per node; :func:`node_should_run` is the one-shot form.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.daemonset import dsutil
from shared.model import meta, nodeaffinity, taints

Obj = dict[str, Any]


def _toleration(key: str, effect: str) -> Obj:
    return {"key": key, "operator": "Exists", "effect": effect}


DEFAULT_TOLERATIONS: tuple[Obj, ...] = (
    _toleration("node.kubernetes.io/not-ready", taints.NO_EXECUTE),
    _toleration("node.kubernetes.io/unreachable", taints.NO_EXECUTE),
    _toleration("node.kubernetes.io/disk-pressure", taints.NO_SCHEDULE),
    _toleration("node.kubernetes.io/memory-pressure", taints.NO_SCHEDULE),
    _toleration("node.kubernetes.io/pid-pressure", taints.NO_SCHEDULE),
    _toleration("node.kubernetes.io/unschedulable", taints.NO_SCHEDULE),
)
HOST_NETWORK_TOLERATION: Obj = _toleration(
    "node.kubernetes.io/network-unavailable", taints.NO_SCHEDULE
)

REASON_NODE_NAME = "spec.nodeName names another node"
REASON_NODE_SELECTOR = "node selector does not match"
REASON_NODE_AFFINITY = "required node affinity does not match"


def _s(obj: Obj, key: str) -> str:
    value = obj.get(key)
    return "" if value is None else str(value)


def _identity(t: Obj) -> tuple[str, str, str, str]:
    """What ``Toleration.MatchToleration`` compares."""
    return (_s(t, "key"), _s(t, "operator"), _s(t, "value"), _s(t, "effect"))


def _semantic(t: Obj) -> tuple[tuple[str, str, str, str], Any]:
    return (_identity(t), t.get("tolerationSeconds"))


def add_or_update_toleration(tolerations: list[Obj], toleration: Obj) -> list[Obj]:
    """``AddOrUpdateTolerationInPodSpec``, returning the new list (the input is not modified).

    Every toleration with the same key, operator, value and effect is replaced by
    ``toleration`` (dropping its tolerationSeconds); if one of them already equals it exactly,
    the list is returned unchanged. Without a match, ``toleration`` is appended.
    """
    wanted = _identity(toleration)
    result: list[Obj] = []
    updated = False
    for existing in tolerations:
        if _identity(existing) == wanted:
            if _semantic(existing) == _semantic(toleration):
                return list(tolerations)
            result.append(dict(toleration))
            updated = True
        else:
            result.append(existing)
    if not updated:
        result.append(dict(toleration))
    return result


def daemon_tolerations(pod_spec: Obj) -> list[Obj]:
    """The pod spec's tolerations with the default daemon tolerations added or updated, in
    order (``AddOrUpdateDaemonPodTolerations``); network-unavailable only with hostNetwork."""
    raw = pod_spec.get("tolerations")
    result = [t for t in raw if isinstance(t, dict)] if isinstance(raw, list) else []
    defaults = list(DEFAULT_TOLERATIONS)
    if pod_spec.get("hostNetwork") is True:
        defaults.append(HOST_NETWORK_TOLERATION)
    for toleration in defaults:
        result = add_or_update_toleration(result, toleration)
    return result


@dataclass(frozen=True)
class Decision:
    """``(shouldRun, shouldContinueRunning)`` and, when not shouldRun, why."""

    should_run: bool
    should_continue_running: bool
    reason: str = ""

    def pair(self) -> tuple[bool, bool]:
        return (self.should_run, self.should_continue_running)


_RUN = Decision(True, True)
TAINT_LISTS = 256  # distinct node taint lists a Placement remembers its verdict for
_SCHEDULE_EFFECTS = frozenset({taints.NO_SCHEDULE, taints.NO_EXECUTE})
_EXECUTE_EFFECTS = frozenset({taints.NO_EXECUTE})


class Placement:
    """The placement rules of one DaemonSet, parsed once (§c.5)."""

    def __init__(self, ds: Obj) -> None:
        pod_spec = dsutil.template_spec(ds)
        self.node_name = _s(pod_spec, "nodeName")
        self.affinity = nodeaffinity.required_node_affinity(pod_spec)
        self.tolerations = daemon_tolerations(pod_spec)
        self._by_taints: dict[tuple[tuple[str, str, str], ...], Decision] = {}

    def decide(self, node: Obj, name: str | None = None) -> Decision:
        """Decide (shouldRun, shouldContinueRunning) for ``node``, with the reason. ``name``
        may pass the node's name when the caller has already read it."""
        if self.node_name and self.node_name != (meta.name(node) if name is None else name):
            return Decision(False, False, REASON_NODE_NAME)
        if not self.affinity.matches_node_selector(node):
            return Decision(False, False, REASON_NODE_SELECTOR)
        if not self.affinity.matches_affinity(node):
            return Decision(False, False, REASON_NODE_AFFINITY)
        node_taints = taints.node_taints(node)
        if not node_taints:
            return _RUN
        # The verdict reads each taint's key, value and effect only, in order: nodes share a
        # handful of taint lists, so each list is matched against the tolerations once.
        seen = tuple((_s(t, "key"), _s(t, "value"), _s(t, "effect")) for t in node_taints)
        got = self._by_taints.get(seen)
        if got is None:
            if len(self._by_taints) >= TAINT_LISTS:
                self._by_taints.clear()  # a long-lived Placement (an index) stays bounded
            got = self._by_taints[seen] = self._tainted(node_taints)
        return got

    def _tainted(self, node_taints: list[Obj]) -> Decision:
        """The decision for a node with these taints (whose selector and affinity match)."""
        blocking = taints.find_untolerated(node_taints, self.tolerations, _SCHEDULE_EFFECTS)
        if blocking is None:
            return _RUN
        evicting = taints.find_untolerated(node_taints, self.tolerations, _EXECUTE_EFFECTS)
        shown = evicting if evicting is not None else blocking
        return Decision(False, evicting is None, f"untolerated taint {taints.taint_string(shown)}")


def node_should_run(node: Obj, ds: Obj) -> tuple[bool, bool]:
    """``NodeShouldRunDaemonPod(node, ds)`` → (shouldRun, shouldContinueRunning)."""
    return Placement(ds).decide(node).pair()


def node_should_run_with_reason(node: Obj, ds: Obj) -> Decision:
    """Like :func:`node_should_run`, with the reason when the daemon should not run there
    (e.g. ``node selector does not match``, ``untolerated taint key=value:NoSchedule``)."""
    return Placement(ds).decide(node)


def why_not_run(node: Obj, ds: Obj) -> str:
    """Why the daemon should not run on ``node`` ("" when it should)."""
    return Placement(ds).decide(node).reason
