"""A pod's DNS, as kubelet's DNS configurer gives it (``GetPodDNS``). Decides (pure).

The pod's ``dnsPolicy`` picks the base: ``ClusterFirst`` (a pod off the host's network) and
``ClusterFirstWithHostNet`` the cluster's DNS servers (the agent's ``--cluster-dns``) with the
searches ``<namespace>.svc.<domain>``, ``svc.<domain>``, ``<domain>`` (``--cluster-domain``)
before the host's, and ``ndots:5``; ``Default`` (and ``ClusterFirst`` on the host's network)
the host's resolv.conf; ``None`` nothing. Then ``dnsConfig`` adds its nameservers and
searches (without repeats) and its options (replacing those of the same name). Without
cluster DNS servers a cluster policy falls back to the host's, as kubelet's, which warns of
it with a ``MissingClusterDNS`` Event (``fallback``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]
NDOTS = ("ndots:5",)  # kubelet's options for the cluster's DNS


@dataclass(frozen=True)
class PodDNS:
    """What a resolv.conf says: nameservers, search domains, options (``name[:value]``)."""

    nameservers: tuple[str, ...] = ()
    searches: tuple[str, ...] = ()
    options: tuple[str, ...] = ()


def parse_resolv_conf(text: str) -> PodDNS:
    """The nameservers, searches (the last ``search`` or ``domain`` line) and options of a
    resolv.conf."""
    servers: list[str] = []
    searches: list[str] = []
    options: list[str] = []
    for line in text.splitlines():
        words = line.split("#", 1)[0].split(";", 1)[0].split()
        if not words:
            continue
        if words[0] == "nameserver" and len(words) > 1:
            servers.append(words[1])
        elif words[0] in ("search", "domain"):
            searches = words[1:]
        elif words[0] == "options":
            options += words[1:]
    return PodDNS(tuple(servers), tuple(searches), tuple(options))


def _cluster_policy(pod: Obj) -> bool | None:
    """True: the cluster's DNS; False: the host's; None: nothing (``None``)."""
    spec = pod.get("spec") or {}
    policy = spec.get("dnsPolicy") or "ClusterFirst"
    if policy == "None":
        return None
    if policy == "ClusterFirstWithHostNet":
        return True
    return policy == "ClusterFirst" and not spec.get("hostNetwork")


MISSING = ('kubelet does not have ClusterDNS IP configured and cannot create Pod using '
           '"ClusterFirst" policy. Falling back to "Default" policy.')


def fallback(pod: Obj, cluster_dns: Sequence[str]) -> bool:
    """Whether ``pod``'s policy asks for the cluster's DNS and there is none to give (it
    gets the host's, and kubelet tells of it: ``MISSING``, about the node and, after
    ``pod: "<name>_<namespace>(<uid>)". ``, about the pod)."""
    return bool(_cluster_policy(pod)) and not cluster_dns


def pod_dns(pod: Obj, cluster_dns: Sequence[str], domain: str, host: PodDNS) -> PodDNS | None:
    """The DNS of ``pod`` (``host``: the node's resolv.conf); None when it is the host's as
    it is (the runtime's own default)."""
    spec = pod.get("spec") or {}
    cluster = _cluster_policy(pod)
    given = spec.get("dnsConfig")
    if cluster and cluster_dns:
        ns = (pod.get("metadata") or {}).get("namespace") or "default"
        searches = (f"{ns}.svc.{domain}", f"svc.{domain}", domain) if domain else ()
        base = PodDNS(tuple(cluster_dns), _once(searches + host.searches), NDOTS)
    elif cluster is None:
        base = PodDNS()
    elif not given:
        return None
    else:
        base = host
    if not given:
        return base
    options = {o.split(":", 1)[0]: o for o in base.options}
    for o in given.get("options") or []:
        name = str(o.get("name") or "")
        options[name] = f"{name}:{o['value']}" if o.get("value") else name
    return PodDNS(_once(base.nameservers + tuple(map(str, given.get("nameservers") or []))),
                  _once(base.searches + tuple(map(str, given.get("searches") or []))),
                  tuple(options.values()))


def _once(items: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))
