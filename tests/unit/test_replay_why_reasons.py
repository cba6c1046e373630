"""Why a decision deleted a pod, from the record and the pod's last state (pure)."""

from __future__ import annotations

from services.replay import why
from shared.daemonset.record import DecisionRecord
from tests.unit.daemonset_fixtures import make_pod


def _rec(reasons: dict[str, str] | None = None, hash_: str = "h2") -> DecisionRecord:
    return DecisionRecord(reasons=reasons or {}, actions={"hash": hash_})


def test_delete_reason_is_the_node_reason_when_the_daemon_should_not_run_there() -> None:
    pod = make_pod("p", "n1", hash="h2")
    rec = _rec({"n1": "untolerated taint dedicated=db:NoExecute"})
    assert why.delete_reason(rec, pod, "n1") == (
        "the daemon should not run on n1: untolerated taint dedicated=db:NoExecute")


def test_delete_reason_of_a_failed_pod() -> None:
    pod = make_pod("p", "n1", hash="h2", phase="Failed", ready=False)
    assert why.delete_reason(_rec({"n1": "pod creation planned"}), pod, "n1").startswith(
        "the pod failed (phase Failed)")


def test_delete_reason_of_an_old_revision_is_the_rolling_update() -> None:
    pod = make_pod("p", "n1", hash="h1")
    assert why.delete_reason(_rec(), pod, "n1") == (
        "rolling update: the pod runs revision h1, the DaemonSet's is h2")


def test_delete_reason_of_a_duplicate() -> None:
    pod = make_pod("p", "n1", hash="h2")
    assert why.delete_reason(_rec(), pod, "n1") == (
        "more than one daemon pod on n1: the extra one is deleted")
