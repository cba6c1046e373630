"""Node leases as the API serves them: a Lease made of a node and its agent's renew time."""

from __future__ import annotations

from services.apiserver import leases

NODE = {"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n1", "uid": "11111111-2222-3333-4444-555555555555",
                     "creationTimestamp": "2026-12-06T08:00:00Z"}}


def test_a_lease_is_held_and_owned_by_its_node_renewed_at_its_keys_time() -> None:
    lease = leases.lease_object(NODE, 1796546048060)
    assert lease["apiVersion"] == "coordination.k8s.io/v1" and lease["kind"] == "Lease"
    md = lease["metadata"]
    assert (md["name"], md["namespace"]) == ("n1", "kube-node-lease")
    assert md["resourceVersion"] == "1796546048060"
    assert md["creationTimestamp"] == "2026-12-06T08:00:00Z"
    assert md["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node", "name": "n1",
                                      "uid": NODE["metadata"]["uid"]}]
    assert lease["spec"] == {"holderIdentity": "n1", "renewTime": "2026-12-06T08:34:08.060000Z"}
    assert md["uid"] == leases.lease_object(NODE, 5)["metadata"]["uid"] != NODE["metadata"]["uid"]


def test_unreadable_renew_times_are_no_lease() -> None:
    assert leases._renewed(b"1796546048060") == 1796546048060
    assert leases._renewed(None) is None
    assert leases._renewed(b"2:whatever") is None and leases._renewed(b"\xff\xfe") is None


def test_a_request_names_the_nodes_of_kube_node_lease_only() -> None:
    nodes = {"/b": {"metadata": {"name": "b"}}, "/a": {"metadata": {"name": "a"}}}

    def pick(ns: str | None, name: str | None) -> list[str]:
        found = leases.nodes_for(ns, name, nodes)
        return [n["metadata"]["name"] for n in found]
    assert pick(None, None) == ["a", "b"] and pick("kube-node-lease", None) == ["a", "b"]
    assert pick("kube-node-lease", "b") == ["b"] and pick("kube-node-lease", "c") == []
    assert pick("default", None) == [] and pick("default", "a") == []
