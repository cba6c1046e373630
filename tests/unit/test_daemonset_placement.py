"""Placement: taints/tolerations, node affinity, default daemon tolerations (§c.5, §c.7)."""

from __future__ import annotations

from typing import Any

import pytest

from shared.daemonset import placement
from shared.model import nodeaffinity, taints
from tests.unit.daemonset_fixtures import make_ds, make_node

Obj = dict[str, Any]


def taint(key: str, effect: str, value: str = "") -> Obj:
    t: Obj = {"key": key, "effect": effect}
    if value:
        t["value"] = value
    return t


# ---- taints ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("toleration", "taint_", "expected"),
    [
        ({"key": "k", "operator": "Exists"}, taint("k", "NoSchedule", "v"), True),
        ({"key": "k", "operator": "Equal", "value": "v"}, taint("k", "NoSchedule", "v"), True),
        ({"key": "k", "value": "v"}, taint("k", "NoSchedule", "v"), True),  # empty op = Equal
        ({"key": "k", "value": "w"}, taint("k", "NoSchedule", "v"), False),
        ({"key": "k"}, taint("k", "NoSchedule"), True),  # no value equals empty value
        ({"key": "other", "operator": "Exists"}, taint("k", "NoSchedule"), False),
        ({"operator": "Exists"}, taint("k", "NoExecute", "v"), True),  # wildcard key
        ({"operator": "Exists", "effect": "NoSchedule"}, taint("k", "NoExecute"), False),
        ({"key": "k", "operator": "Exists", "effect": "NoExecute"}, taint("k", "NoExecute"), True),
        ({"key": "k", "operator": "Lt", "value": "3"}, taint("k", "NoSchedule", "1"), False),
        (
            {"key": "k", "operator": "Exists", "tolerationSeconds": 5},
            taint("k", "NoExecute"),
            True,
        ),
    ],
)
def test_tolerates(toleration: Obj, taint_: Obj, expected: bool) -> None:
    assert taints.tolerates(toleration, taint_) is expected


def test_find_untolerated_filters_effects_and_returns_first() -> None:
    node_taints = [
        taint("soft", "PreferNoSchedule"),
        taint("a", "NoSchedule"),
        taint("b", "NoExecute"),
    ]
    effects = {"NoSchedule", "NoExecute"}
    assert taints.find_untolerated(node_taints, [], effects) == taint("a", "NoSchedule")
    tol = [{"key": "a", "operator": "Exists"}]
    assert taints.find_untolerated(node_taints, tol, effects) == taint("b", "NoExecute")
    assert taints.find_untolerated(node_taints, [{"operator": "Exists"}], effects) is None
    assert taints.find_untolerated(node_taints, [], {"NoExecute"}) == taint("b", "NoExecute")
    assert taints.find_untolerated(None, None, effects) is None


def test_taint_string() -> None:
    assert taints.taint_string(taint("k", "NoSchedule", "v")) == "k=v:NoSchedule"
    assert taints.taint_string(taint("k", "NoExecute")) == "k:NoExecute"


# ---- node affinity --------------------------------------------------------------------------


def spec_with_terms(*terms: Obj, node_selector: dict[str, str] | None = None) -> Obj:
    spec: Obj = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
            }
        }
    }
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    return spec


def expr(key: str, op: str, *values: str) -> Obj:
    e: Obj = {"key": key, "operator": op}
    if values:
        e["values"] = list(values)
    return e


NODE = make_node("node-1", {"color": "blue", "zone": "a", "cpus": "8", "weird": "x1"})


@pytest.mark.parametrize(
    ("term", "expected"),
    [
        ({"matchExpressions": [expr("color", "In", "blue", "red")]}, True),
        ({"matchExpressions": [expr("color", "In", "red")]}, False),
        ({"matchExpressions": [expr("color", "NotIn", "red")]}, True),
        ({"matchExpressions": [expr("absent", "NotIn", "red")]}, True),
        ({"matchExpressions": [expr("color", "Exists")]}, True),
        ({"matchExpressions": [expr("absent", "DoesNotExist")]}, True),
        ({"matchExpressions": [expr("color", "DoesNotExist")]}, False),
        ({"matchExpressions": [expr("cpus", "Gt", "4")]}, True),
        ({"matchExpressions": [expr("cpus", "Lt", "4")]}, False),
        ({"matchExpressions": [expr("weird", "Gt", "0")]}, False),  # label not an integer
        ({"matchExpressions": [expr("absent", "Lt", "4")]}, False),
        # requirements inside one term are ANDed
        ({"matchExpressions": [expr("color", "In", "blue"), expr("zone", "In", "b")]}, False),
        ({"matchFields": [expr("metadata.name", "In", "node-1")]}, True),
        ({"matchFields": [expr("metadata.name", "In", "node-2")]}, False),
        ({"matchFields": [expr("metadata.name", "NotIn", "node-2")]}, True),
        (
            {
                "matchExpressions": [expr("color", "In", "blue")],
                "matchFields": [expr("metadata.name", "In", "node-2")],
            },
            False,
        ),
        # parse errors: no match
        ({"matchExpressions": [expr("color", "Bogus", "blue")]}, False),
        ({"matchExpressions": [expr("color", "In")]}, False),  # In needs values
        ({"matchExpressions": [expr("color", "Exists", "blue")]}, False),
        ({"matchExpressions": [expr("cpus", "Gt", "4", "5")]}, False),
        ({"matchExpressions": [expr("cpus", "Gt", "four")]}, False),
        ({"matchExpressions": [expr("bad key!", "Exists")]}, False),
        ({"matchFields": [expr("metadata.name", "In", "node-1", "node-2")]}, False),
        ({"matchFields": [expr("metadata.name", "Exists")]}, False),
        # an empty term matches nothing
        ({}, False),
        ({"matchExpressions": [], "matchFields": []}, False),
    ],
)
def test_required_node_affinity_term(term: Obj, expected: bool) -> None:
    assert nodeaffinity.matches(spec_with_terms(term), NODE) is expected


def test_node_affinity_terms_are_ored_and_a_bad_term_does_not_spoil_others() -> None:
    bad = {"matchExpressions": [expr("color", "Bogus")]}
    miss = {"matchExpressions": [expr("color", "In", "red")]}
    hit = {"matchExpressions": [expr("zone", "In", "a")]}
    assert nodeaffinity.matches(spec_with_terms(bad, miss, hit), NODE)
    assert not nodeaffinity.matches(spec_with_terms(bad, miss), NODE)


def test_empty_term_list_matches_nothing_but_no_affinity_matches_everything() -> None:
    assert not nodeaffinity.matches(spec_with_terms(), NODE)
    assert nodeaffinity.matches({}, NODE)
    assert nodeaffinity.matches({"affinity": {"nodeAffinity": {}}}, NODE)


def test_node_selector_and_affinity_are_both_required() -> None:
    hit = {"matchExpressions": [expr("zone", "In", "a")]}
    assert nodeaffinity.matches(spec_with_terms(hit, node_selector={"color": "blue"}), NODE)
    assert not nodeaffinity.matches(spec_with_terms(hit, node_selector={"color": "red"}), NODE)
    assert not nodeaffinity.matches({"nodeSelector": {"missing": ""}}, NODE)
    assert nodeaffinity.matches({"nodeSelector": {}}, NODE)


# ---- default tolerations --------------------------------------------------------------------


def test_default_daemon_tolerations_in_order() -> None:
    tols = placement.daemon_tolerations({})
    assert [(t["key"], t["effect"]) for t in tols] == [
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),
    ]
    assert all(t["operator"] == "Exists" and set(t) == {"key", "operator", "effect"} for t in tols)


def test_host_network_adds_network_unavailable_toleration() -> None:
    tols = placement.daemon_tolerations({"hostNetwork": True})
    assert tols[-1] == {
        "key": "node.kubernetes.io/network-unavailable",
        "operator": "Exists",
        "effect": "NoSchedule",
    }
    assert len(tols) == 7


def test_add_or_update_replaces_same_toleration_dropping_toleration_seconds() -> None:
    own: list[Obj] = [
        {"key": "mine", "operator": "Exists"},
        {
            "key": "node.kubernetes.io/not-ready",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        },
    ]
    tols = placement.daemon_tolerations({"tolerations": own})
    assert tols[0] == {"key": "mine", "operator": "Exists"}
    assert tols[1] == {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
    }
    assert len(tols) == 7  # six defaults, one of them updated in place, plus "mine"
    assert own[1]["tolerationSeconds"] == 300  # input untouched


def test_add_or_update_keeps_exact_duplicate_and_appends_otherwise() -> None:
    exact = {"key": "k", "operator": "Exists", "effect": "NoSchedule"}
    assert placement.add_or_update_toleration([exact], dict(exact)) == [exact]
    other_op = {"key": "k", "operator": "Equal", "effect": "NoSchedule"}
    assert placement.add_or_update_toleration([other_op], exact) == [other_op, exact]


# ---- NodeShouldRunDaemonPod -----------------------------------------------------------------


def test_node_should_run_plain_node() -> None:
    assert placement.node_should_run(make_node("n"), make_ds()) == (True, True)


def test_node_should_run_template_node_name() -> None:
    ds = make_ds(pod_spec={"containers": [], "nodeName": "other"})
    decision = placement.node_should_run_with_reason(make_node("n"), ds)
    assert decision.pair() == (False, False)
    assert decision.reason == "spec.nodeName names another node"
    assert placement.node_should_run(make_node("other"), ds) == (True, True)


def test_node_should_run_node_selector_and_affinity_reasons() -> None:
    ds = make_ds(pod_spec={"containers": [], "nodeSelector": {"color": "red"}})
    decision = placement.node_should_run_with_reason(make_node("n"), ds)
    assert decision.pair() == (False, False)
    assert decision.reason == "node selector does not match"
    ds = make_ds(pod_spec=spec_with_terms({"matchExpressions": [expr("color", "In", "red")]}))
    decision = placement.node_should_run_with_reason(make_node("n"), ds)
    assert decision.reason == "required node affinity does not match"


def test_untolerated_no_schedule_taint_keeps_running_pods() -> None:
    node = make_node("n", taints=[taint("dedicated", "NoSchedule", "gpu")])
    decision = placement.node_should_run_with_reason(node, make_ds())
    assert decision.pair() == (False, True)
    assert decision.reason == "untolerated taint dedicated=gpu:NoSchedule"


def test_untolerated_no_execute_taint_evicts() -> None:
    node = make_node("n", taints=[taint("a", "NoSchedule"), taint("b", "NoExecute")])
    decision = placement.node_should_run_with_reason(node, make_ds())
    assert decision.pair() == (False, False)
    assert decision.reason == "untolerated taint b:NoExecute"


def test_one_placement_decides_each_node_by_its_own_taints() -> None:
    # A Placement remembers the verdict per taint list (key, value, effect, in order): nodes
    # with the same list share it, any difference (order, value, timeAdded aside) does not
    judge = placement.Placement(make_ds())
    a, b = taint("a", "NoSchedule"), taint("b", "NoExecute")
    cases = [
        ([a, b], (False, False), "b:NoExecute"),
        ([b, a], (False, False), "b:NoExecute"),
        ([a], (False, True), "a:NoSchedule"),
        ([{**a, "timeAdded": "2026-01-01T00:00:00Z"}], (False, True), "a:NoSchedule"),
        ([taint("a", "NoSchedule", "v")], (False, True), "a=v:NoSchedule"),
        ([taint("node.kubernetes.io/not-ready", "NoExecute")], (True, True), ""),
    ]
    for round_ in range(2):  # the second round is answered from what the first remembered
        for i, (node_taints, pair, shown) in enumerate(cases):
            decision = judge.decide(make_node(f"n{round_}-{i}", taints=node_taints))
            assert decision.pair() == pair
            assert decision.reason == (f"untolerated taint {shown}" if shown else "")
    for i in range(placement.TAINT_LISTS + 5):  # more lists than it keeps: still each its own
        decision = judge.decide(make_node(f"m{i}", taints=[taint("k", "NoSchedule", str(i))]))
        assert decision.reason == f"untolerated taint k={i}:NoSchedule"
    assert judge.decide(make_node("last", taints=[a, b])).reason == "untolerated taint b:NoExecute"


def test_prefer_no_schedule_taint_is_ignored() -> None:
    node = make_node("n", taints=[taint("a", "PreferNoSchedule")])
    assert placement.node_should_run(node, make_ds()) == (True, True)


@pytest.mark.parametrize(
    "key",
    [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/disk-pressure",
        "node.kubernetes.io/memory-pressure",
        "node.kubernetes.io/pid-pressure",
        "node.kubernetes.io/unschedulable",
    ],
)
def test_taint_pressure_node_daemon_launches_pod(key: str) -> None:
    effect = "NoExecute" if key.endswith(("not-ready", "unreachable")) else "NoSchedule"
    node = make_node("n", taints=[taint(key, effect)])
    assert placement.node_should_run(node, make_ds()) == (True, True)


def test_network_unavailable_node_needs_host_network() -> None:
    node = make_node("n", taints=[taint("node.kubernetes.io/network-unavailable", "NoSchedule")])
    assert placement.node_should_run(node, make_ds()) == (False, True)
    host = make_ds(pod_spec={"containers": [], "hostNetwork": True})
    assert placement.node_should_run(node, host) == (True, True)


def test_node_conditions_and_unschedulable_are_not_considered() -> None:
    node = make_node("n")
    node["spec"]["unschedulable"] = True
    node["status"] = {"conditions": [{"type": "Ready", "status": "False"}]}
    assert placement.node_should_run(node, make_ds()) == (True, True)


def test_why_not_run() -> None:
    assert placement.why_not_run(make_node("n"), make_ds()) == ""
    node = make_node("n", taints=[taint("k", "NoSchedule", "v")])
    assert placement.why_not_run(node, make_ds()) == "untolerated taint k=v:NoSchedule"
