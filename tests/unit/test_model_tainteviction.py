"""NoExecute eviction with tolerationSeconds (upstream's taint manager,
pkg/controller/tainteviction/taint_eviction.go), decided from state with a fake clock.

Expected values follow upstream: processPodOnNode evicts at once when GetMatchingTolerations
finds a taint no toleration tolerates; getMinTolerationTime gives -1 (tolerate forever) when no
used toleration has tolerationSeconds and 0 for tolerationSeconds <= 0; otherwise the pod is
deleted tolerationSeconds after the taint reached it, and a taint removed first cancels it."""

from __future__ import annotations

from typing import Any

import pytest

from shared.daemonset import placement
from shared.model import meta, tainteviction

Obj = dict[str, Any]
NOW = 1_700_000_000.0
TAINT = {"key": "dedicated", "value": "infra", "effect": "NoExecute"}


def _node(*taints: Obj, created: float = NOW - 86400) -> Obj:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "creationTimestamp": meta.format_time(created)},
            "spec": {"taints": list(taints)}}


def _taint(added: float | None, **fields: str) -> Obj:
    taint = {**TAINT, **fields}
    if added is not None:
        taint["timeAdded"] = meta.format_time(added)
    return taint


def _pod(*tolerations: Obj, name: str = "p", node: str = "n1", created: float = NOW - 3600,
         deleting: bool = False) -> Obj:
    md: Obj = {"name": name, "namespace": "default", "uid": f"uid-{name}",
               "creationTimestamp": meta.format_time(created)}
    if deleting:
        md["deletionTimestamp"] = meta.format_time(NOW - 1)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md,
            "spec": {"nodeName": node, "tolerations": list(tolerations),
                     "containers": [{"name": "c", "image": "i"}]}}


def _tolerate(seconds: int | None = None, key: str = "dedicated") -> Obj:
    t: Obj = {"key": key, "operator": "Exists", "effect": "NoExecute"}
    if seconds is not None:
        t["tolerationSeconds"] = seconds
    return t


def _outcome(node: Obj, pods: list[Obj], now: float = NOW) -> tuple[list[str], float | None]:
    decision = tainteviction.decide(node, pods, now)
    return [e.name for e in decision.evictions], decision.next_at


@pytest.mark.parametrize(
    ("node", "pod", "evicted", "next_at"),
    [
        # no NoExecute taint: nothing to do (getNoExecuteTaints empty → cancel)
        (_node({"key": "dedicated", "effect": "NoSchedule"}), _pod(), [], None),
        # not tolerated: deleted at once (GetMatchingTolerations false)
        (_node(_taint(NOW - 10)), _pod(), ["p"], None),
        # tolerated without tolerationSeconds: forever (getMinTolerationTime -1)
        (_node(_taint(NOW - 10)), _pod(_tolerate()), [], None),
        # tolerated 30 s, added 10 s ago: 20 s to go
        (_node(_taint(NOW - 10)), _pod(_tolerate(30)), [], NOW + 20),
        # tolerated 5 s, added 10 s ago: due 5 s ago
        (_node(_taint(NOW - 10)), _pod(_tolerate(5)), ["p"], None),
        # tolerationSeconds <= 0 counts as 0 (getMinTolerationTime)
        (_node(_taint(NOW)), _pod(_tolerate(0)), ["p"], None),
        (_node(_taint(NOW)), _pod(_tolerate(-5)), ["p"], None),
        # a pod created after the taint: timed from its creation
        (_node(_taint(NOW - 100)), _pod(_tolerate(5), created=NOW - 2), [], NOW + 3),
        # no timeAdded: timed from the node's creation
        (_node(_taint(None), created=NOW - 4), _pod(_tolerate(10)), [], NOW + 6),
        # one taint tolerated forever, another for 60 s: the finite one counts
        (_node(_taint(NOW - 10, key="a"), _taint(NOW - 10, key="b")),
         _pod(_tolerate(key="a"), _tolerate(60, key="b")), [], NOW + 50),
        # the earliest deadline over the taints
        (_node(_taint(NOW - 100, key="a"), _taint(NOW - 5, key="b")),
         _pod(_tolerate(60, key="a"), _tolerate(10, key="b")), ["p"], None),
        # already terminating, or bound to another node: left alone
        (_node(_taint(NOW - 10)), _pod(deleting=True), [], None),
        (_node(_taint(NOW - 10)), _pod(node="n2"), [], None),
    ],
)
def test_no_execute_eviction_table(node: Obj, pod: Obj, evicted: list[str],
                                   next_at: float | None) -> None:
    assert _outcome(node, [pod]) == (evicted, next_at)


def test_evicted_when_the_toleration_runs_out_unless_the_taint_goes_first() -> None:
    tainted = _node(_taint(NOW))
    pod = _pod(_tolerate(30))
    assert _outcome(tainted, [pod], NOW + 29) == ([], NOW + 30)
    assert _outcome(tainted, [pod], NOW + 30) == (["p"], None)
    untainted = _node()  # removed at NOW + 20, before the 30 s ran out
    assert _outcome(untainted, [pod], NOW + 30) == ([], None)


def test_daemon_pods_default_tolerations_keep_them_on_unreachable_and_not_ready_nodes() -> None:
    """AddOrUpdateDaemonPodTolerations: not-ready and unreachable NoExecute are tolerated
    without tolerationSeconds (replacing a template's toleration with seconds), so the taint
    manager never evicts daemon pods for them."""
    spec = {"tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                             "effect": "NoExecute", "tolerationSeconds": 300}]}
    tolerations = placement.daemon_tolerations(spec)
    node = _node(_taint(NOW - 3600, key="node.kubernetes.io/unreachable", value=""),
                 _taint(NOW - 3600, key="node.kubernetes.io/not-ready", value=""))
    assert _outcome(node, [_pod(*tolerations)], NOW + 86400) == ([], None)


def test_eviction_carries_the_pod_the_taint_and_the_due_time() -> None:
    decision = tainteviction.decide(_node(_taint(NOW - 10)), [_pod(_tolerate(5))], NOW)
    assert tainteviction.summarize(decision) == {
        "node": "n1", "evictions": [["default/p", "uid-p", "dedicated=infra:NoExecute",
                                     NOW - 5, True]], "next": None}
    untolerated = tainteviction.decide(_node(_taint(NOW - 10)), [_pod()], NOW)
    assert tainteviction.summarize(untolerated)["evictions"] == [
        ["default/p", "uid-p", "dedicated=infra:NoExecute", NOW, False]]
    # upstream's event and condition (emitPodDeletionEvent, addConditionAndDeletePod)
    assert tainteviction.event_message(_pod()) == "Marking for deletion Pod default/p"
    [cond] = tainteviction.with_disruption_condition(_pod(), NOW)["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"], cond["message"]) == (
        "DisruptionTarget", "True", "DeletionByTaintManager",
        "Taint manager: deleting due to NoExecute taint")


def test_malformed_pods_and_taints_are_decided_without_error() -> None:
    """Whatever a log entry holds, the decision neither raises nor evicts on garbage: a
    malformed toleration list tolerates nothing, a malformed taint list taints nothing."""
    pod = _pod(name="odd")
    pod["spec"]["tolerations"] = "NoExecute"
    pod["metadata"]["creationTimestamp"] = "yesterday"
    assert _outcome(_node(_taint(NOW - 10)), [pod]) == (["odd"], None)
    garbled = _node()
    garbled["spec"]["taints"] = "NoExecute"
    assert _outcome(garbled, [pod]) == ([], None)
    pod["status"] = "Running"
    [cond] = tainteviction.with_disruption_condition(pod, NOW)["status"]["conditions"]
    assert cond["reason"] == "DeletionByTaintManager"
