"""HTTP requests proxied to a pod's port (``pods/proxy``: ``kubectl get --raw
/api/v1/namespaces/NS/pods/NAME:PORT/proxy/PATH``, ``kubectl proxy``, the Python client's
``connect_*_namespaced_pod_proxy*``) or to a service's (``services/proxy``: one of its Ready
pods), the API's rules (pure): the pod and port the request names, the request sent on to
the pod, and the answer's head read back.

Upstream's API server proxies such a request to the pod's IP; daemonbus's reaches the pod
through the port-forward endpoint of the node agent running it (``shared.api.portforward``),
one connection per request. The request goes on as HTTP/1.0, so the pod's server answers
with a body that ends with its connection (no chunks, no keep-alive); the caller's
credentials (``Authorization``, cookies, impersonation) and the hop-by-hop headers stay
behind, as a proxy must not hand a user's token to a pod.
"""

from __future__ import annotations

import random
import urllib.parse
from collections.abc import Callable, Iterable
from typing import Any

from shared.api import portforward
from shared.model import meta, podutil

Obj = dict[str, Any]

VERBS = {"GET": "get", "HEAD": "get", "OPTIONS": "get", "POST": "create", "PUT": "update",
         "PATCH": "patch", "DELETE": "delete"}
"""The verb a request of each method is authorised as (upstream's request info for a
``connect`` of ``pods/proxy`` or ``services/proxy``)."""

DEFAULT_PORT = 80

HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
                        "te", "trailer", "transfer-encoding", "upgrade", "host",
                        "content-length"})
"""Headers that belong to one connection, not to the request or answer it carries (RFC 9110
§7.6.1; ``host`` and ``content-length`` are written anew for the pod's leg)."""

CREDENTIALS = frozenset({"authorization", "cookie"})
"""The caller's credentials: for the API server, never for the pod."""


class ProxyError(Exception):
    """A request that cannot be proxied (upstream answers 400 BadRequest)."""


class Unavailable(ProxyError):
    """A service with nowhere to send the request (upstream answers 503
    ServiceUnavailable)."""


def pod_port(port_text: str, pod: Obj) -> int:
    """Decides: the port of ``pod`` a proxy path's port text (``split_target``'s) names;
    none, the first port of the pod's first container that has one, else 80 (upstream's
    ``ResourceLocation``)."""
    if port_text:
        try:
            return portforward.parse_port(port_text)
        except portforward.ForwardError as err:
            raise ProxyError(str(err)) from err
    return default_port(pod)


def split_target(name_port: str) -> tuple[str, str]:
    """Decides: the name and the port's text of ``NAME[:PORT]`` or ``SCHEME:NAME:PORT``
    (upstream's ``SplitSchemeNamePort``); only ``http`` is served."""
    parts = name_port.split(":")
    if len(parts) == 3:
        scheme, name, port = parts
        if scheme not in ("", "http"):
            raise ProxyError(f"scheme {scheme!r} is not served by this proxy: only http")
    elif len(parts) <= 2:
        name, port = parts[0], parts[1] if len(parts) == 2 else ""
    else:
        raise ProxyError(f"invalid request {name_port!r}")
    if not name:
        raise ProxyError(f"invalid request {name_port!r}")
    return name, port


def service_backend(svc: Obj, port_text: str, pods: Iterable[Obj],
                    pick: Callable[[list[tuple[Obj, int]]], tuple[Obj, int]] = random.choice,
                    ) -> tuple[Obj, int]:
    """Decides: a pod of ``svc`` and its port for a request to the service's port
    ``port_text`` (its number or name; none: the port without a name), as upstream's
    service proxy picks one of its endpoints: the service's port, then a Ready pod its
    selector selects (not being deleted, on a node) whose ``targetPort`` resolves (a number,
    or a container port of that name; none: the port's own number); ``pick`` chooses among
    them. Unavailable when there is none, in upstream's words."""
    name = meta.name(svc)
    spec = svc.get("spec") or {}
    ports = [p for p in spec.get("ports") or [] if isinstance(p, dict)]
    if port_text.isdigit():
        found = next((p for p in ports if p.get("port") == int(port_text)), None)
        if found is None:
            raise Unavailable(f'no service port {port_text} found for service "{name}"')
    else:
        found = next((p for p in ports if (p.get("name") or "") == port_text), None)
    selector = spec.get("selector")
    candidates: list[tuple[Obj, int]] = []
    if found is not None and isinstance(selector, dict) and selector:
        for pod in pods:
            labels = meta.labels(pod)
            if any(labels.get(k) != v for k, v in selector.items()) \
                    or meta.is_being_deleted(pod) or not podutil.is_ready(pod) \
                    or not podutil.node_name(pod):
                continue
            port = _target_port(pod, found)
            if port is not None:
                candidates.append((pod, port))
    if not candidates:
        raise Unavailable(f'no endpoints available for service "{name}"')
    return pick(candidates)


def _target_port(pod: Obj, service_port: Obj) -> int | None:
    """The pod's port a service port's ``targetPort`` names (the endpoints controller's
    ``FindPort``): a number as it is, a name a container port's; none: the port's own."""
    target = service_port.get("targetPort")
    if target is None or target == "":
        target = service_port.get("port")
    if isinstance(target, int):
        return target if 0 < target < 65536 else None
    for c in (pod.get("spec") or {}).get("containers") or []:
        for p in c.get("ports") or []:
            if isinstance(p, dict) and p.get("name") == target \
                    and isinstance(p.get("containerPort"), int):
                return int(p["containerPort"])
    return None


def default_port(pod: Obj) -> int:
    """The first port of the pod's first container that declares one, else 80."""
    for c in (pod.get("spec") or {}).get("containers") or []:
        for p in c.get("ports") or []:
            if isinstance(p, dict) and isinstance(p.get("containerPort"), int):
                return int(p["containerPort"])
    return DEFAULT_PORT


def check_pod(pod: Obj) -> None:
    """Decides: whether ``pod`` can be proxied to (it runs on a node, as port-forward's
    ``check_pod`` says in upstream's words, and has not ended); ProxyError otherwise."""
    try:
        portforward.check_pod(pod)
    except portforward.ForwardError as err:
        raise ProxyError(str(err)) from err
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        raise ProxyError(f"pod {meta.name(pod)} is not running (phase {phase})")


def rest_of(raw_path: str) -> str:
    """The path and query a proxy request's raw path names after
    ``/api/v1/namespaces/NS/pods/NAME/proxy`` (or ``services``), as the pod is to get them:
    the path decoded and encoded again as Go encodes a URL's path (an encoded ``/`` is one;
    ``/`` when none), the query as it came (upstream's proxy sets the location's Path and
    RawQuery)."""
    parts = raw_path.split("/", 7)
    rest = parts[7][len("proxy"):] if len(parts) == 8 else ""
    path, sep, query = rest.partition("?")
    path = urllib.parse.quote(urllib.parse.unquote(path), safe=GO_PATH_SAFE)
    if not path.startswith("/"):
        path = "/" + path
    return path + sep + query


GO_PATH_SAFE = "/$&+,:;=@-_.~"
"""What Go's ``url.URL.EscapedPath`` leaves unescaped besides letters and digits."""


def request_head(method: str, target_path: str, headers: Iterable[tuple[str, str]],
                 host: str, length: int) -> bytes:
    """The request for the pod: ``method`` on ``target_path`` (``rest_of``'s), the caller's
    headers but its credentials and the hop-by-hop ones, ``Host`` the pod's, the body's
    ``length``; HTTP/1.0 and closed after the answer."""
    if any(ch in target_path for ch in " \r\n\t"):
        raise ProxyError(f"invalid request path {target_path!r}")
    lines = [f"{method} {target_path} HTTP/1.0", f"Host: {host}"]
    for name, value in headers:
        low = name.lower()
        if low in HOP_BY_HOP or low in CREDENTIALS or low.startswith("impersonate-") \
                or "\r" in value or "\n" in value:
            continue
        lines.append(f"{name}: {value}")
    if length or method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {length}")
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", errors="replace")


def parse_head(head: bytes) -> tuple[int, list[tuple[str, str]]]:
    """Decides: the status and headers of the pod's answer (its head, up to the blank
    line), the hop-by-hop ones left out but its length; ProxyError when it is not an HTTP
    answer."""
    lines = head.decode("latin-1").split("\r\n")
    status = lines[0].split(" ", 2)
    if len(status) < 2 or not status[0].startswith("HTTP/") or not status[1].isdigit() \
            or not 100 <= int(status[1]) <= 599:
        raise ProxyError(f"the pod's answer is not HTTP: {lines[0][:80]!r}")
    out: list[tuple[str, str]] = []
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise ProxyError(f"the pod's answer has a malformed header: {line[:80]!r}")
        low, value = name.lower(), value.strip()
        if low == "content-length" and not value.isdigit():
            raise ProxyError(f"the pod's answer has a malformed header: {line[:80]!r}")
        if low not in HOP_BY_HOP or low == "content-length":  # (its length goes on)
            out.append((name, value))
    return int(status[1]), out
