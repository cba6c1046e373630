"""Validation of a Service (``ValidateService``, ``ValidateServiceUpdate``), with
Kubernetes' rendered messages. Pure.

daemonbus keeps Services so that a bundle that carries one applies and ``kubectl cluster-info``
and ``get svc`` work; nothing routes their traffic (there is no kube-proxy). Every function
returns a list of error strings (empty when valid) and never raises.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from shared.model import fielderr, meta, metavalidation, syntax, typed

C = fielderr.child
CLUSTER_IP, NODE_PORT, LOAD_BALANCER, EXTERNAL_NAME = (
    "ClusterIP", "NodePort", "LoadBalancer", "ExternalName")
TYPES = (CLUSTER_IP, EXTERNAL_NAME, LOAD_BALANCER, NODE_PORT)  # sorted, as upstream lists them
NONE = "None"  # the clusterIP of a headless Service
PROTOCOLS = ("SCTP", "TCP", "UDP")
MAX_AFFINITY_SECONDS = 86400
LB_SOURCE_RANGES_ANNOTATION = "service.beta.kubernetes.io/load-balancer-source-ranges"


def spec_of(svc: Any) -> dict[Any, Any]:
    spec = svc.get("spec") if isinstance(svc, dict) else None
    return spec if isinstance(spec, dict) else {}


def headless(svc: Any) -> bool:
    """``isHeadlessService``: ``clusterIPs`` is ``["None"]``."""
    return spec_of(svc).get("clusterIPs") == [NONE]


def externally_accessible(svc: Any) -> bool:
    """``ExternallyAccessible``: a NodePort or LoadBalancer Service, or one with externalIPs."""
    spec = spec_of(svc)
    kind = spec.get("type")
    return kind in (LOAD_BALANCER, NODE_PORT) or (kind == CLUSTER_IP
                                                  and bool(spec.get("externalIPs")))


def needs_health_check(svc: Any) -> bool:
    """``NeedsHealthCheck``: a LoadBalancer whose external traffic stays on its node."""
    spec = spec_of(svc)
    return spec.get("type") == LOAD_BALANCER and spec.get("externalTrafficPolicy") == "Local"


def _port_num_or_name(value: Any, path: str, errs: list[str]) -> None:
    """``ValidatePortNumOrName``."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        errs.append(fielderr.type_error(path, value, "integer or string"))
    elif isinstance(value, int):
        errs.extend(fielderr.invalid(path, value, m) for m in syntax.is_valid_port_num(value))
    else:
        errs.extend(fielderr.invalid(path, value, m) for m in syntax.is_valid_port_name(value))


def _port_literal(protocol: str, port: int) -> fielderr.GoLiteral:
    """``%#v`` of the ``core.ServicePort`` key of a duplicate port."""
    return fielderr.GoLiteral(
        'core.ServicePort{Name:"", Protocol:' + fielderr.go_quote(protocol)
        + ", AppProtocol:(*string)(nil), Port:" + str(port)
        + ', TargetPort:intstr.IntOrString{Type:0, IntVal:0, StrVal:""}, NodePort:0}')


def _ports(spec: dict[Any, Any], errs: list[str]) -> list[dict[Any, Any]]:
    """``validateServicePort`` of each port (upstream tolerates any targetPort of a
    headless Service); the ports as read."""
    ports = [p for _i, p in typed.maps(spec.get("ports"), C("spec", "ports"), errs)]
    names: set[str] = set()
    for i, port in enumerate(ports):
        path = fielderr.index(C("spec", "ports"), i)
        name = typed.as_str(port.get("name"), C(path, "name"), errs) or ""
        if len(ports) > 1 and not name:
            errs.append(fielderr.required(C(path, "name")))
        elif name:
            errs.extend(fielderr.invalid(C(path, "name"), name, m)
                        for m in syntax.is_dns1123_label(name))
            if name in names:
                errs.append(fielderr.duplicate(C(path, "name"), name))
            names.add(name)
        number = typed.as_int(port.get("port"), C(path, "port"), errs) or 0
        errs.extend(fielderr.invalid(C(path, "port"), number, m)
                    for m in syntax.is_valid_port_num(number))
        protocol = typed.as_str(port.get("protocol"), C(path, "protocol"), errs) or ""
        if not protocol:
            errs.append(fielderr.required(C(path, "protocol")))
        elif protocol not in PROTOCOLS:
            errs.append(fielderr.not_supported(C(path, "protocol"), protocol, PROTOCOLS))
        _port_num_or_name(port.get("targetPort", 0), C(path, "targetPort"), errs)
        typed.as_int(port.get("nodePort"), C(path, "nodePort"), errs)
        app = typed.as_str(port.get("appProtocol"), C(path, "appProtocol"), errs)
        if app is not None:
            errs.extend(fielderr.invalid(C(path, "appProtocol"), app, m)
                        for m in syntax.is_qualified_name(app))
    return ports


def _affinity(spec: dict[Any, Any], errs: list[str]) -> None:
    affinity = typed.as_str(spec.get("sessionAffinity"), C("spec", "sessionAffinity"), errs)
    path = C("spec", "sessionAffinityConfig")
    config = typed.as_map(spec.get("sessionAffinityConfig"), path, errs)
    if not affinity:
        errs.append(fielderr.required(C("spec", "sessionAffinity")))
    elif affinity not in ("ClientIP", "None"):
        errs.append(fielderr.not_supported(C("spec", "sessionAffinity"), affinity,
                                           ("ClientIP", "None")))
    when = "when session affinity type is ClientIP"
    if affinity == "ClientIP":
        client = typed.as_map((config or {}).get("clientIP"), C(path, "clientIP"), errs)
        timeout = typed.as_int((client or {}).get("timeoutSeconds"),
                               C(path, "clientIP", "timeoutSeconds"), errs)
        if config is None:
            errs.append(fielderr.required(path, when))
        elif client is None:
            errs.append(fielderr.required(C(path, "clientIP"), when))
        elif timeout is None:
            errs.append(fielderr.required(C(path, "clientIP", "timeoutSeconds"), when))
        elif not 0 < timeout <= MAX_AFFINITY_SECONDS:
            errs.append(fielderr.invalid(
                C(path, "clientIP", "timeoutSeconds"), timeout,
                f"must be greater than 0 and less than {MAX_AFFINITY_SECONDS}"))
    elif affinity == "None" and config is not None:
        errs.append(fielderr.forbidden(path, "must not be set when session affinity is None"))


def _cluster_ips(spec: dict[Any, Any], errs: list[str]) -> None:
    """``ValidateServiceClusterIPsRelatedFields`` (not for ExternalName)."""
    path = C("spec", "clusterIPs")
    cluster_ip = typed.as_str(spec.get("clusterIP"), C("spec", "clusterIP"), errs) or ""
    ips = typed.as_str_list(spec.get("clusterIPs"), path, errs) or []
    literal = fielderr.str_list_literal(ips)
    if cluster_ip:
        if not ips:
            errs.append(fielderr.required(path))
        elif ips[0] != cluster_ip:
            errs.append(fielderr.invalid(path, literal, "first value must match `clusterIP`"))
    elif ips:
        errs.append(fielderr.invalid(path, literal,
                                     "must be empty when `clusterIP` is not specified"))
    families = typed.as_str_list(spec.get("ipFamilies"), C("spec", "ipFamilies"), errs) or []
    seen: set[str] = set()
    for i, family in enumerate(families):
        fpath = fielderr.index(C("spec", "ipFamilies"), i)
        if family not in ("IPv4", "IPv6"):
            errs.append(fielderr.not_supported(fpath, family, ("IPv4", "IPv6")))
        if family in seen:
            errs.append(fielderr.duplicate(fpath, family))
        seen.add(family)
    policy = typed.as_str(spec.get("ipFamilyPolicy"), C("spec", "ipFamilyPolicy"), errs)
    policies = ("PreferDualStack", "RequireDualStack", "SingleStack")
    if policy is not None and policy not in policies:
        errs.append(fielderr.not_supported(C("spec", "ipFamilyPolicy"), policy, policies))
    bad = False
    for i, ip in enumerate(ips):
        if i == 0 and ip == NONE:
            if len(ips) > 1:
                bad = True
                errs.append(fielderr.invalid(path, literal,
                                             "'None' must be the first and only value"))
            continue
        problems = syntax.is_valid_ip(ip)
        bad = bad or bool(problems)
        errs.extend(fielderr.invalid(fielderr.index(path, i), ip, m) for m in problems)
    if len(ips) > 2:
        errs.append(fielderr.invalid(path, literal, "may only hold up to 2 values"))
    if bad:
        return
    if len(ips) > 1 and len({ipaddress.ip_address(ip).version for ip in ips}) != len(ips):
        errs.append(fielderr.invalid(path, literal,
                                     "may specify no more than one IP for each IP family"))
    if ips != [NONE]:
        for i, (ip, family) in enumerate(zip(ips, families, strict=False)):
            six = ipaddress.ip_address(ip).version == 6
            if (family == "IPv4" and six) or (family == "IPv6" and not six):
                errs.append(fielderr.invalid(
                    fielderr.index(path, i), ip,
                    f"expected an {family} value as indicated by `ipFamilies[{i}]`"))


_LINK_LOCAL_MULTICAST = ipaddress.ip_network("224.0.0.0/24")


def _special_ip(ip: str, path: str, errs: list[str]) -> None:
    """``ValidateNonSpecialIP``."""
    addr = ipaddress.ip_address(ip)
    for bad, why in ((addr.is_unspecified, "may not be unspecified (0.0.0.0, ::)"),
                     (addr.is_loopback, "may not be in the loopback range (127.0.0.0/8, ::1/128)"),
                     (addr.is_link_local,
                      "may not be in the link-local range (169.254.0.0/16, fe80::/10)"),
                     (addr in _LINK_LOCAL_MULTICAST if addr.version == 4
                      else addr.packed[0] == 0xFF and addr.packed[1] & 0x0F == 0x02,
                      "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)")):
        if bad:
            errs.append(fielderr.invalid(path, ip, why))


def _cidr(value: str, path: str, errs: list[str]) -> None:
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        errs.append(fielderr.invalid(path, value, "must be a valid CIDR value, (e.g. "
                                     "10.9.8.0/24 or 2001:db8::/64)"))


def _by_type(spec: dict[Any, Any], kind: str, is_headless: bool, errs: list[str]) -> None:
    ips = spec.get("clusterIPs")
    first = ips[0] if isinstance(ips, list) and ips else ""
    if kind in (LOAD_BALANCER, NODE_PORT) and is_headless:
        errs.append(fielderr.invalid(fielderr.index(C("spec", "clusterIPs"), 0), first,
                                     f"may not be set to 'None' for {kind} services"))
    if kind != EXTERNAL_NAME:
        return
    if ips:
        errs.append(fielderr.forbidden(C("spec", "clusterIPs"),
                                       "may not be set for ExternalName services"))
    for f in ("ipFamilies", "ipFamilyPolicy"):
        if spec.get(f) not in (None, []) if f == "ipFamilies" else spec.get(f) is not None:
            errs.append(fielderr.forbidden(C("spec", f),
                                           "may not be set for ExternalName services"))
    name = typed.as_str(spec.get("externalName"), C("spec", "externalName"), errs) or ""
    cname = name.removesuffix(".")
    if cname:
        errs.extend(fielderr.invalid(C("spec", "externalName"), cname, m)
                    for m in syntax.is_dns1123_subdomain(cname))
    else:
        errs.append(fielderr.required(C("spec", "externalName")))


def _traffic(svc: dict[Any, Any], spec: dict[Any, Any], kind: str, errs: list[str]) -> None:
    """The external and internal traffic policies and the traffic distribution."""
    etp = typed.as_str(spec.get("externalTrafficPolicy"), C("spec", "externalTrafficPolicy"),
                       errs) or ""
    if not externally_accessible(svc):
        if etp:
            errs.append(fielderr.invalid(C("spec", "externalTrafficPolicy"), etp,
                                         "may only be set for externally-accessible services"))
    elif not etp:
        errs.append(fielderr.required(C("spec", "externalTrafficPolicy")))
    elif etp not in ("Cluster", "Local"):
        errs.append(fielderr.not_supported(C("spec", "externalTrafficPolicy"), etp,
                                           ("Cluster", "Local")))
    hc_path = C("spec", "healthCheckNodePort")
    hc = typed.as_int(spec.get("healthCheckNodePort"), hc_path, errs) or 0
    if not needs_health_check(svc):
        if hc:
            errs.append(fielderr.invalid(hc_path, hc, "may only be set when `type` is "
                                         "'LoadBalancer' and `externalTrafficPolicy` is 'Local'"))
    elif not hc:
        errs.append(fielderr.required(hc_path))
    else:
        errs.extend(fielderr.invalid(hc_path, hc, m) for m in syntax.is_valid_port_num(hc))
    itp_path = C("spec", "internalTrafficPolicy")
    itp = typed.as_str(spec.get("internalTrafficPolicy"), itp_path, errs)
    if itp is None and kind in (NODE_PORT, LOAD_BALANCER, CLUSTER_IP):
        errs.append(fielderr.required(itp_path))
    if itp is not None and itp not in ("Cluster", "Local"):
        errs.append(fielderr.not_supported(itp_path, itp, ("Cluster", "Local")))
    td_path = C("spec", "trafficDistribution")
    td = typed.as_str(spec.get("trafficDistribution"), td_path, errs)
    if td is not None and td != "PreferClose":
        errs.append(fielderr.not_supported(td_path, td, ("PreferClose",)))


def _load_balancer_fields(svc: dict[Any, Any], spec: dict[Any, Any], kind: str,
                          errs: list[str]) -> None:
    only_lb = "may only be used when `type` is 'LoadBalancer'"
    ranges = typed.as_str_list(spec.get("loadBalancerSourceRanges"),
                               C("spec", "loadBalancerSourceRanges"), errs) or []
    annotation = meta.annotations(svc).get(LB_SOURCE_RANGES_ANNOTATION)
    if ranges:
        path = C("spec", "LoadBalancerSourceRanges")
        if kind != LOAD_BALANCER:
            errs.append(fielderr.forbidden(path, only_lb))
        for i, value in enumerate(ranges):
            _cidr(value.strip(), fielderr.index(path, i), errs)
    elif annotation is not None:
        path = fielderr.key(C("metadata", "annotations"), LB_SOURCE_RANGES_ANNOTATION)
        if kind != LOAD_BALANCER:
            errs.append(fielderr.forbidden(path, only_lb))
        if annotation.strip():
            for value in annotation.strip().split(","):
                _cidr(value.strip(), path, errs)
    allocate = typed.as_bool(spec.get("allocateLoadBalancerNodePorts"),
                             C("spec", "allocateLoadBalancerNodePorts"), errs)
    if allocate is not None and kind != LOAD_BALANCER:
        errs.append(fielderr.forbidden(C("spec", "allocateLoadBalancerNodePorts"), only_lb))
    if kind == LOAD_BALANCER and allocate is None:
        errs.append(fielderr.required("allocateLoadBalancerNodePorts"))  # (upstream's path)
    lb_class = typed.as_str(spec.get("loadBalancerClass"), C("spec", "loadBalancerClass"), errs)
    if lb_class is not None:
        if kind != LOAD_BALANCER:
            errs.append(fielderr.forbidden(C("spec", "loadBalancerClass"), only_lb))
        errs.extend(fielderr.invalid(C("spec", "loadBalancerClass"), lb_class, m)
                    for m in syntax.is_qualified_name(lb_class))


def _port_conflicts(ports: list[dict[Any, Any]], kind: str, errs: list[str]) -> None:
    """A ClusterIP Service's node ports; node ports, and ports, used twice (by protocol)."""
    node_ports: set[tuple[str, int]] = set()
    numbers: set[tuple[str, int]] = set()
    for i, port in enumerate(ports):
        if kind == CLUSTER_IP and port.get("nodePort"):
            errs.append(fielderr.forbidden(C(fielderr.index(C("spec", "ports"), i), "nodePort"),
                                           "may not be used when `type` is 'ClusterIP'"))
    for i, port in enumerate(ports):
        node_port, protocol = port.get("nodePort") or 0, str(port.get("protocol") or "")
        if isinstance(node_port, int) and node_port:
            if (protocol, node_port) in node_ports:
                errs.append(fielderr.duplicate(
                    C(fielderr.index(C("spec", "ports"), i), "nodePort"), node_port))
            node_ports.add((protocol, node_port))
    for i, port in enumerate(ports):
        number, protocol = port.get("port"), str(port.get("protocol") or "")
        if isinstance(number, int):
            if (protocol, number) in numbers:
                errs.append(fielderr.duplicate(fielderr.index(C("spec", "ports"), i),
                                               _port_literal(protocol, number)))
            numbers.add((protocol, number))


def validate_service(obj: Any, old: Any = None) -> list[str]:
    """``ValidateService`` (and with ``old``, ``ValidateServiceUpdate``: its cluster IPs
    and IP families never change, but to or from ExternalName). Decides only."""
    if not isinstance(obj, dict):
        return fielderr.not_an_object(obj)
    errs: list[str] = []
    metavalidation.validate_update_of(obj, old, errs)
    if isinstance(old, dict):
        _kept(spec_of(obj), spec_of(old), headless(obj), headless(old), errs)
    metavalidation.validate_object_meta(obj.get("metadata"), "metadata", errs, namespaced=True,
                                        name_fn=syntax.name_is_dns1035_label)
    spec = typed.as_map(obj.get("spec"), "spec", errs) or {}
    kind = typed.as_str(spec.get("type"), C("spec", "type"), errs) or ""
    is_headless = headless(obj)
    if not spec.get("ports") and not is_headless and kind != EXTERNAL_NAME:
        errs.append(fielderr.required(C("spec", "ports")))
    _by_type(spec, kind, is_headless, errs)
    ports = _ports(spec, errs)
    metavalidation.validate_labels(spec.get("selector"), C("spec", "selector"), errs)
    _affinity(spec, errs)
    if kind != EXTERNAL_NAME:
        _cluster_ips(spec, errs)
    for i, ip in enumerate(typed.as_str_list(spec.get("externalIPs"), C("spec", "externalIPs"),
                                             errs) or []):
        path = fielderr.index(C("spec", "externalIPs"), i)
        problems = syntax.is_valid_ip(ip)
        errs.extend(fielderr.invalid(path, ip, m) for m in problems)
        if not problems:
            _special_ip(ip, path, errs)
    if not kind:
        errs.append(fielderr.required(C("spec", "type")))
    elif kind not in TYPES:
        errs.append(fielderr.not_supported(C("spec", "type"), kind, TYPES))
    _port_conflicts(ports, kind, errs)
    _load_balancer_fields(obj, spec, kind, errs)
    _traffic(obj, spec, kind, errs)
    return errs


def _kept(spec: dict[Any, Any], old: dict[Any, Any], is_headless: bool, was_headless: bool,
          errs: list[str]) -> None:
    """``validateUpgradeDowngradeClusterIPs`` and ``…IPFamilies`` of a single-stack
    Service: the first cluster IP and IP family stay, but to or from ExternalName."""
    if EXTERNAL_NAME in (spec.get("type"), old.get("type")):
        return
    path = C("spec", "clusterIPs")
    ips, old_ips = spec.get("clusterIPs") or [], old.get("clusterIPs") or []
    literal = fielderr.str_list_literal(ips if isinstance(ips, list) else [])
    if not (is_headless and was_headless) and isinstance(ips, list) and old_ips:
        if not ips:
            errs.append(fielderr.invalid(fielderr.index(path, 0), literal,
                                         "primary clusterIP can not be unset"))
        elif ips[0] != old_ips[0]:
            errs.append(fielderr.invalid(fielderr.index(path, 0), literal,
                                         "may not change once set"))
    families, old_families = spec.get("ipFamilies") or [], old.get("ipFamilies") or []
    if is_headless or was_headless or not isinstance(families, list):
        return
    if families and old_families and families[0] != old_families[0]:
        errs.append(fielderr.invalid(fielderr.index(C("spec", "ipFamilies"), 0),
                                     fielderr.str_list_literal(families),
                                     "may not change once set"))
