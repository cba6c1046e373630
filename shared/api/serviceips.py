"""A Service's cluster IP and node ports, as upstream's Service registry allocates them
(pkg/registry/core/service/storage): from the service range ``10.96.0.0/12`` (its first
address kept back, as upstream keeps it for the ``kubernetes`` Service) and the node port
range 30000-32767, single stack. Pure: the addresses and ports other Services hold are the
caller's (``shared.store.client`` reads them from the view as it writes), and so is the
random source.

An address or port is free when no stored Service holds it. Two API servers creating
Services in the same instant may each pick a free one without seeing the other's write: a
random pick from a million addresses makes it unlikely that both pick the same, and nothing
routes a Service's traffic in daemonbus, so a shared address breaks nothing but its
uniqueness.
"""

from __future__ import annotations

import ipaddress
import random
from collections.abc import Iterable
from typing import Any

from shared.model import errors, meta
from shared.model import servicevalidation as sv

Obj = dict[str, Any]
SERVICE_RANGE = ipaddress.ip_network("10.96.0.0/12")
NODE_PORTS = range(30000, 32768)
_FIRST = int(SERVICE_RANGE.network_address) + 2  # (the network's address; the first is kept)
_LAST = int(SERVICE_RANGE.broadcast_address) - 1


def taken(services: Iterable[Obj], but: Obj) -> tuple[set[str], set[int]]:
    """The cluster IPs and node ports (health check ports too) that ``services`` hold, but
    the Service ``but`` (the one being written: its own are its to keep)."""
    ips: set[str] = set()
    ports: set[int] = set()
    for svc in services:
        if meta.namespace(svc) == meta.namespace(but) and meta.name(svc) == meta.name(but):
            continue
        spec = sv.spec_of(svc)
        ips.update(ip for ip in spec.get("clusterIPs") or [] if ip != sv.NONE)
        ports.update(p["nodePort"] for p in spec.get("ports") or []
                     if isinstance(p, dict) and isinstance(p.get("nodePort"), int))
        if isinstance(spec.get("healthCheckNodePort"), int):
            ports.add(spec["healthCheckNodePort"])
    ports.discard(0)
    return ips, ports


def _invalid(svc: Obj, causes: list[str]) -> errors.InvalidError:
    return errors.InvalidError("Service", meta.name(svc), causes)


def _free_ip(ips: set[str], rng: random.Random) -> str:
    for _ in range(64):
        ip = str(ipaddress.ip_address(rng.randint(_FIRST, _LAST)))
        if ip not in ips:
            return ip
    for n in range(_FIRST, _LAST + 1):  # (a range nearly full: the first free one)
        if str(ipaddress.ip_address(n)) not in ips:
            return str(ipaddress.ip_address(n))
    raise RuntimeError("failed to allocate a serviceIP: range is full")  # (a 500, as upstream)


def _free_port(ports: set[int], rng: random.Random) -> int:
    free = [p for p in NODE_PORTS if p not in ports]
    if not free:
        raise RuntimeError("failed to allocate a nodePort: range is full")
    return rng.choice(free)


def _needs_cluster_ip(spec: Obj) -> bool:
    return spec.get("type") != sv.EXTERNAL_NAME


def _needs_node_ports(spec: Obj) -> bool:
    return spec.get("type") in (sv.NODE_PORT, sv.LOAD_BALANCER)


def _node_port_numbers(spec: Obj) -> list[Any]:
    return [p.get("nodePort") or 0 for p in spec.get("ports") or [] if isinstance(p, dict)]


def _patch_allocated(spec: Obj, old: Obj) -> None:
    """``patchAllocatedValues``: what an update leaves out of what was allocated stays (a
    replace of a manifest without its cluster IP keeps it; a port without its node port
    keeps the one of the port of its name, unless another port took it)."""
    if _needs_cluster_ip(old) and _needs_cluster_ip(spec):
        if not spec.get("clusterIP"):
            spec["clusterIP"] = old.get("clusterIP", "")
        if not spec.get("clusterIPs") and old.get("clusterIPs"):
            spec["clusterIPs"] = list(old["clusterIPs"])
        for f in ("ipFamilies", "ipFamilyPolicy"):
            if not spec.get(f) and old.get(f):
                spec[f] = old[f]
    if _needs_node_ports(old) and _needs_node_ports(spec):
        used = set(_node_port_numbers(old)) & set(_node_port_numbers(spec))
        by_name = {p.get("name"): p.get("nodePort") or 0
                   for p in old.get("ports") or [] if isinstance(p, dict)}
        for port in spec.get("ports") or []:
            if not port.get("nodePort") and by_name.get(port.get("name")) not in used:
                port["nodePort"] = by_name.get(port.get("name")) or 0
                if not port["nodePort"]:
                    del port["nodePort"]
    if sv.needs_health_check({"spec": old}) and sv.needs_health_check({"spec": spec}):
        if not spec.get("healthCheckNodePort") and old.get("healthCheckNodePort"):
            spec["healthCheckNodePort"] = old["healthCheckNodePort"]


def _drop_type_dependent(spec: Obj, old: Obj, status: Obj) -> None:
    """``dropTypeDependentFields``: a change to a type that has no use for a field drops
    it, when the user left it as it was (the cluster IPs and IP families, node ports, the
    health check port, allocateLoadBalancerNodePorts, loadBalancerClass, the external
    traffic policy, a load balancer's status)."""
    if _needs_cluster_ip(old) and not _needs_cluster_ip(spec):
        if spec.get("clusterIP") == old.get("clusterIP") and \
                spec.get("clusterIPs") == old.get("clusterIPs"):
            spec.pop("clusterIP", None)
            spec.pop("clusterIPs", None)
        for f in ("ipFamilies", "ipFamilyPolicy"):
            if spec.get(f) == old.get(f):
                spec.pop(f, None)
    if _needs_node_ports(old) and not _needs_node_ports(spec):
        if _node_port_numbers(spec) == _node_port_numbers(old):
            for port in spec.get("ports") or []:
                port.pop("nodePort", None)
    if sv.needs_health_check({"spec": old}) and not sv.needs_health_check({"spec": spec}):
        if spec.get("healthCheckNodePort") == old.get("healthCheckNodePort"):
            spec.pop("healthCheckNodePort", None)
    if old.get("type") == sv.LOAD_BALANCER and spec.get("type") != sv.LOAD_BALANCER:
        for f in ("allocateLoadBalancerNodePorts", "loadBalancerClass"):
            if spec.get(f) == old.get(f):
                spec.pop(f, None)
        status["loadBalancer"] = {}
    if sv.externally_accessible({"spec": old}) and not sv.externally_accessible({"spec": spec}):
        if spec.get("externalTrafficPolicy") == old.get("externalTrafficPolicy"):
            spec.pop("externalTrafficPolicy", None)


def _cluster_ips(svc: Obj, spec: Obj, old: Obj | None, ips: set[str],
                 rng: random.Random) -> None:
    if spec.get("clusterIP") and not spec.get("clusterIPs"):
        spec["clusterIPs"] = [spec["clusterIP"]]
    elif spec.get("clusterIPs") and not spec.get("clusterIP"):
        spec["clusterIP"] = spec["clusterIPs"][0]
    if spec.get("ipFamilyPolicy") == "RequireDualStack":
        raise _invalid(svc, ['spec.ipFamilyPolicy: Invalid value: "RequireDualStack": this '
                             "cluster is not configured for dual-stack services"])
    given = spec.get("clusterIP")
    families = spec.get("ipFamilies") or []
    if not given:
        if families and families[0] == "IPv6":
            raise _invalid(svc, ['spec.ipFamilies[0]: Invalid value: "IPv6": not configured '
                                 "on this cluster"])
        ip = _free_ip(ips, rng)
        spec["clusterIP"], spec["clusterIPs"] = ip, [ip]
    elif given != sv.NONE and (old is None or sv.spec_of(old).get("clusterIP") != given):
        problem = None
        if ipaddress.ip_address(given) not in SERVICE_RANGE:
            problem = (f"the provided IP ({given}) is not in the valid range. The range of "
                       f"valid IPs is {SERVICE_RANGE}")
        elif given in ips:
            problem = "provided IP is already allocated"
        if problem:
            literal = '[]string{"' + given + '"}'
            raise _invalid(svc, [f"spec.clusterIPs: Invalid value: {literal}: failed to "
                                 f"allocate IP {given}: {problem}"])
    if not spec.get("ipFamilies"):
        ip = spec["clusterIP"]
        spec["ipFamilies"] = ["IPv6" if ip != sv.NONE and ":" in ip else "IPv4"]
    spec.setdefault("ipFamilyPolicy", "SingleStack")


def _node_ports(svc: Obj, spec: Obj, old: Obj | None, ports: set[int],
                rng: random.Random) -> None:
    old_ports = {p.get("nodePort") for p in sv.spec_of(old).get("ports") or []
                 if isinstance(p, dict)} if old is not None else set()
    wanted = spec.get("type") == sv.NODE_PORT or (
        spec.get("type") == sv.LOAD_BALANCER and spec.get("allocateLoadBalancerNodePorts"))
    mine: set[int] = set()
    for i, port in enumerate(spec.get("ports") or []):
        given = port.get("nodePort") or 0
        if given and given not in old_ports:
            path = f"spec.ports[{i}].nodePort"
            if given not in NODE_PORTS:
                raise _invalid(svc, [f"{path}: Invalid value: {given}: provided port is not in "
                                     f"the valid range. The range of valid ports is "
                                     f"{NODE_PORTS.start}-{NODE_PORTS.stop - 1}"])
            if given in ports:
                raise _invalid(svc, [f"{path}: Invalid value: {given}: provided port is "
                                     "already allocated"])
        if given:
            mine.add(given)
    if wanted:
        for port in spec.get("ports") or []:
            if not port.get("nodePort"):
                port["nodePort"] = _free_port(ports | mine, rng)
                mine.add(port["nodePort"])
    if sv.needs_health_check({"spec": spec}) and not spec.get("healthCheckNodePort"):
        spec["healthCheckNodePort"] = _free_port(ports | mine, rng)


def allocate(svc: Obj, old: Obj | None, ips: set[str], ports: set[int],
             rng: random.Random | None = None) -> Obj:
    """``svc`` (a Service being created, or updated over ``old``: defaulted, validated after)
    with its cluster IP, IP families and node ports (the given ones checked against ``ips``
    and ``ports``, those others hold; the missing ones picked from what is free), changed in
    place and returned. Raises InvalidError as upstream's allocators refuse. A Service whose
    fields are not of their types is left as it is, for its validation to say what is
    wrong."""
    rng = rng or random.Random()
    spec = svc.get("spec")
    if not isinstance(spec, dict):
        return svc
    try:
        if old is not None:
            _patch_allocated(spec, sv.spec_of(old))
            _drop_type_dependent(spec, sv.spec_of(old), svc.setdefault("status", {}))
        if spec.get("type") != sv.EXTERNAL_NAME:
            _cluster_ips(svc, spec, old, ips, rng)
        _node_ports(svc, spec, old, ports, rng)
    except (AttributeError, IndexError, KeyError, TypeError, ValueError):
        pass  # (its validation, next, refuses it)
    return svc
