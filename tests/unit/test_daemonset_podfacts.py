"""``podfacts``: the inlined per-pod reads equal the ``meta`` / ``podutil`` accessors, and the
grouping of pods in any order equals ``claim.nodes_to_daemon_pods`` over them taken by name."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from shared.daemonset import claim, dsutil, podfacts, rollout, status
from shared.model import meta, podutil
from tests.unit.daemonset_fixtures import NOW, make_pod

Obj = dict[str, Any]

# Values of the wrong type as well as the right one: the accessors tolerate both.
odd = st.sampled_from([None, "", 0, 1, [], {}, True])
text = st.sampled_from(["", "n0", "n1", "True", "False", "Ready", "Running"])


def _maybe(value: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(value, odd)


condition_st = _maybe(
    st.fixed_dictionaries(
        {
            "type": _maybe(st.sampled_from(["Ready", "PodScheduled", "Initialized"])),
            "status": _maybe(st.sampled_from(["True", "False", "Unknown"])),
        }
    )
)
affinity_st = st.builds(
    lambda values: {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": values}]}
                ]
            }
        }
    },
    st.lists(st.sampled_from(["n0", "n1", "n2"]), max_size=2),
)
pod_st = st.fixed_dictionaries(
    {
        "metadata": _maybe(
            st.fixed_dictionaries(
                {
                    "name": _maybe(st.sampled_from(["a", "b", "c"])),
                    "labels": _maybe(
                        st.dictionaries(
                            st.sampled_from([dsutil.HASH_LABEL, dsutil.GENERATION_LABEL, "x"]),
                            st.sampled_from(["h1", "h2", "1", "2", ""]),
                        )
                    ),
                    "deletionTimestamp": _maybe(st.just("2023-11-14T22:13:19Z")),
                }
            )
        ),
        "spec": _maybe(
            st.fixed_dictionaries({"nodeName": _maybe(text), "affinity": _maybe(affinity_st)})
        ),
        "status": _maybe(
            st.fixed_dictionaries(
                {
                    "phase": _maybe(st.sampled_from(["Running", "Pending", "Failed", "Succeeded"])),
                    "conditions": _maybe(st.lists(condition_st, max_size=3)),
                }
            )
        ),
    }
)


@settings(max_examples=300, deadline=None)
@given(pod_st, st.sampled_from(["", "h1", "h2"]), st.sampled_from([None, 1, 2]))
def test_read_equals_the_accessors(pod: Obj, hash: str, generation: int | None) -> None:
    facts = podfacts.read(pod, status.labels_updated_check(hash, generation))
    assert facts == (
        pod,
        podutil.target_node(pod),
        meta.is_being_deleted(pod),
        podutil.is_terminal(pod),
        podutil.is_ready(pod),
        status.is_pod_updated(pod, hash, generation),
    )
    assert facts.running == (not meta.is_being_deleted(pod) and not podutil.is_terminal(pod))


@settings(max_examples=200, deadline=None)
@given(st.lists(pod_st, max_size=8), st.randoms(use_true_random=False))
def test_by_node_equals_grouping_pods_taken_by_name(pods: list[Obj], rnd: Any) -> None:
    check = status.labels_updated_check("h1", 1)
    rnd.shuffle(pods)
    expected = claim.nodes_to_daemon_pods(sorted(pods, key=meta.name))  # stable: ties kept
    grouped = podfacts.by_node(pods, check)
    assert {node: [f.pod for f in facts] for node, facts in grouped.items()} == expected
    for facts in grouped.values():
        assert all(f == podfacts.read(f.pod, check) for f in facts)


def test_availability_is_podutil_is_available() -> None:
    check = status.labels_updated_check("h", None)
    pods = [
        make_pod("fresh", "n0", ready_since=NOW - 5),
        make_pod("old", "n0", ready_since=NOW - 3600),
        make_pod("unready", "n0", ready=False),
    ]
    for min_ready in (0, 30):
        available = podfacts.availability(min_ready, NOW)
        for pod in pods:
            facts = podfacts.read(pod, check)
            assert available(facts) == podutil.is_available(pod, min_ready, NOW)


def test_find_updated_pods_on_node_still_takes_pods() -> None:
    new = make_pod("new", "n0", hash="h")
    old = make_pod("old", "n0", hash="old")
    gone = make_pod("gone", "n0", hash="h", deleting=True)
    assert rollout.find_updated_pods_on_node([old, gone, new], "h", None) == (new, old, True)
    assert rollout.find_updated_pods_on_node([new, new], "h", None) == (None, None, False)
