"""Pod helpers: readiness, availability boundary, target node, ordering (§c.3.4, §c.4, §d.4)."""

from __future__ import annotations

import pytest

from shared.model import podutil
from tests.unit.daemonset_fixtures import NOW, make_pod, ts


def test_is_ready_needs_ready_condition_true() -> None:
    assert podutil.is_ready(make_pod("p", "n"))
    assert not podutil.is_ready(make_pod("p", "n", ready=False))
    pod = make_pod("p", "n")
    pod["status"]["conditions"][0]["status"] = "False"
    assert not podutil.is_ready(pod)


def test_is_available_strict_boundary() -> None:
    pod = make_pod("p", "n", ready_since=NOW - 10)
    assert podutil.is_available(pod, 0, NOW)
    assert podutil.is_available(pod, 9, NOW)
    assert not podutil.is_available(pod, 10, NOW)  # LTT + 10 == now: not yet (strict <)
    assert not podutil.is_available(make_pod("p", "n", ready=False), 0, NOW)


def test_is_available_without_transition_time_needs_zero_min_ready() -> None:
    pod = make_pod("p", "n")
    del pod["status"]["conditions"][0]["lastTransitionTime"]
    assert podutil.is_available(pod, 0, NOW)
    assert not podutil.is_available(pod, 1, NOW)


def test_target_node_prefers_node_name_then_first_match_fields() -> None:
    assert podutil.target_node(make_pod("p", "n1", affinity_node="n2")) == "n1"
    assert podutil.target_node(make_pod("p", None, affinity_node="n2")) == "n2"
    assert podutil.target_node(make_pod("p", None)) is None
    pod = make_pod("p", None, affinity_node="n2")
    terms = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    terms["nodeSelectorTerms"][0]["matchFields"][0]["values"] = ["a", "b"]
    assert podutil.target_node(pod) is None  # not unique


def test_sort_key_scheduled_first_then_oldest_then_name() -> None:
    unscheduled_old = make_pod("a", None, affinity_node="n", created=NOW - 100)
    scheduled_new = make_pod("z", "n", created=NOW - 10)
    scheduled_old_b = make_pod("b", "n", created=NOW - 50)
    scheduled_old_a = make_pod("a", "n", created=NOW - 50)
    ordered = podutil.sorted_pods(
        [unscheduled_old, scheduled_new, scheduled_old_b, scheduled_old_a]
    )
    assert ordered == [scheduled_old_a, scheduled_old_b, scheduled_new, unscheduled_old]


def test_phase_helpers() -> None:
    assert podutil.is_terminal(make_pod("p", "n", phase="Failed"))
    assert podutil.is_terminal(make_pod("p", "n", phase="Succeeded"))
    assert not podutil.is_terminal(make_pod("p", "n", phase="Running"))
    assert ts(0) == "1970-01-01T00:00:00Z"


def _spec(*containers: dict, inits: tuple[dict, ...] = ()) -> dict:
    return {"containers": [{"name": f"c{i}", "resources": r} for i, r in enumerate(containers)],
            "initContainers": [{"name": f"i{i}", "resources": r} for i, r in enumerate(inits)]}


BOTH = {"cpu": "100m", "memory": "64Mi"}


@pytest.mark.parametrize(("spec", "qos"), [
    (_spec({}), "BestEffort"),
    (_spec({"requests": {"cpu": "0", "memory": "0"}}), "BestEffort"),  # zeros do not count
    (_spec({"requests": {"nvidia.com/gpu": "1"}}), "BestEffort"),  # nor other resources
    (_spec({"requests": BOTH, "limits": BOTH}), "Guaranteed"),
    (_spec({"requests": {"cpu": "0.1", "memory": "67108864"}, "limits": BOTH}),
     "Guaranteed"),  # equal quantities in other words
    (_spec({"requests": BOTH, "limits": BOTH}, inits=({"requests": BOTH, "limits": BOTH},)),
     "Guaranteed"),
    (_spec({"requests": BOTH, "limits": BOTH}, {}), "Burstable"),  # one container without
    (_spec({"requests": BOTH, "limits": {"memory": "64Mi"}}), "Burstable"),
    (_spec({"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": BOTH}), "Burstable"),
    (_spec({"limits": BOTH}), "Burstable"),  # (requests not defaulted from limits here)
])
def test_qos_class_is_upstreams(spec: dict, qos: str) -> None:
    assert podutil.qos_class(spec) == qos


def test_qos_class_of_a_malformed_spec_is_best_effort_not_an_error() -> None:
    # (the defaulters run it on any object: they must never raise)
    for spec in ({"containers": {"": None}}, {"containers": [None, "x"]},
                 {"initContainers": 3, "containers": [{"resources": []}]},
                 {"containers": [{"resources": {"limits": ["cpu"]}}]}):
        assert podutil.qos_class(spec) == "BestEffort"
