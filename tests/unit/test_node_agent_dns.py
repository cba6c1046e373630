"""A pod's DNS as kubelet's DNS configurer gives it, from its dnsPolicy and dnsConfig."""

from __future__ import annotations

from typing import Any

from services.node_agent import dns

HOST = dns.parse_resolv_conf("# made by hand\nnameserver 192.168.1.1\nnameserver 192.168.1.2"
                             "\nsearch corp.example lab.example\noptions edns0 ndots:2\n")


def pod(policy: str | None = None, host_network: bool = False,
        config: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"hostNetwork": host_network}
    if policy is not None:
        spec["dnsPolicy"] = policy
    if config is not None:
        spec["dnsConfig"] = config
    return {"metadata": {"name": "agent-x", "namespace": "logging", "uid": "u1"}, "spec": spec}


def test_resolv_conf_is_read_as_the_resolver_reads_it() -> None:
    assert HOST == dns.PodDNS(("192.168.1.1", "192.168.1.2"), ("corp.example", "lab.example"),
                              ("edns0", "ndots:2"))


def test_cluster_first_gets_the_clusters_servers_and_searches_before_the_hosts() -> None:
    got = dns.pod_dns(pod("ClusterFirst"), ["10.96.0.10"], "cluster.local", HOST)
    assert got == dns.PodDNS(("10.96.0.10",), (
        "logging.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example",
        "lab.example"), ("ndots:5",))
    # on the host's network only ClusterFirstWithHostNet does
    assert dns.pod_dns(pod("ClusterFirst", True), ["10.96.0.10"], "cluster.local", HOST) is None
    assert dns.pod_dns(pod("ClusterFirstWithHostNet", True), ["10.96.0.10"], "", HOST) == \
        dns.PodDNS(("10.96.0.10",), HOST.searches, ("ndots:5",))
    assert not dns.fallback(pod("ClusterFirst"), ["10.96.0.10"])


def test_without_cluster_dns_a_cluster_policy_falls_back_to_the_hosts() -> None:
    assert dns.pod_dns(pod(), [], "cluster.local", HOST) is None  # the engine's own copy
    assert dns.fallback(pod(), []) and dns.fallback(pod("ClusterFirstWithHostNet", True), [])
    assert not dns.fallback(pod("ClusterFirst", True), [])  # its policy is the host's anyway
    assert not dns.fallback(pod("Default"), []) and not dns.fallback(pod("None"), [])


def test_dns_config_adds_to_the_policys_base_without_repeats() -> None:
    config = {"nameservers": ["192.168.1.2", "9.9.9.9"], "searches": ["corp.example", "x.io"],
              "options": [{"name": "ndots", "value": "1"}, {"name": "single-request"}]}
    assert dns.pod_dns(pod("Default", config=config), [], "", HOST) == dns.PodDNS(
        ("192.168.1.1", "192.168.1.2", "9.9.9.9"), ("corp.example", "lab.example", "x.io"),
        ("edns0", "ndots:1", "single-request"))
    assert dns.pod_dns(pod("None", config=config), ["10.96.0.10"], "cluster.local", HOST) == \
        dns.PodDNS(("192.168.1.2", "9.9.9.9"), ("corp.example", "x.io"),
                   ("ndots:1", "single-request"))
