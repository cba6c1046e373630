"""Connections forwarded to a pod's ports (``kubectl port-forward``), the API's rules (pure):
the caller's protocols, the ports it names, the request to the node agent running the pod.

Three ways reach the API server, as upstream serves them:

* ``SPDY/3.1+portforward.k8s.io``, kubectl's since 1.31 (client-go tunnels a SPDY session in
  a WebSocket, ``shared.api.spdy``), or the same session on the connection itself, upgraded
  to ``SPDY/3.1`` (kubectl before 1.31, and after a refused WebSocket): for each local
  connection, two streams whose headers
  name the ``port``, a ``requestid`` pairing them and their ``streamtype``, ``error`` (what
  went wrong, as text; its end ends the connection for the caller) or ``data`` (the bytes).
* a WebSocket with ``v4.channel.k8s.io``, the official Python client's: the ports are in the query
  (``ports``, repeated or comma-separated); port i has channel 2i for its data and 2i+1 for
  its errors, each opened by the port number (2 bytes, little-endian); one connection per
  port for the WebSocket's life.

The node agent's leg (``services/node_agent/logserver.py``) is one TLS connection per
forwarded connection: ``POST /portforward/{namespace}/{pod}?uid=U&port=P`` answered 200,
then the connection's bytes both ways.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

from shared.model import meta

Obj = dict[str, Any]

STREAM_PROTOCOL = "portforward.k8s.io"  # of a SPDY upgrade (X-Stream-Protocol-Version)
TUNNEL = "SPDY/3.1+" + STREAM_PROTOCOL
CHANNELS = "v4.channel.k8s.io"
PROTOCOLS = (TUNNEL, CHANNELS)
# the stream headers of the tunnel (SPDY/3 names are lowercase)
STREAM_TYPE, PORT, REQUEST_ID = "streamtype", "port", "requestid"
ERROR_STREAM, DATA_STREAM = "error", "data"


class ForwardError(Exception):
    """A request to forward that cannot be served (upstream answers 400 BadRequest)."""


def parse_port(text: str) -> int:
    """Decides: the port ``text`` names, in kubelet's words when it names none."""
    if not text.isascii() or not text.isdigit():
        raise ForwardError(f'unable to parse "{text}" as a port: strconv.ParseUint: parsing '
                           f'"{text}": invalid syntax')
    port = int(text)
    if port > 65535:
        raise ForwardError(f'unable to parse "{text}" as a port: strconv.ParseUint: parsing '
                           f'"{text}": value out of range')
    if port < 1:
        raise ForwardError(f'port "{text}" must be > 0')
    return port


def query_ports(q: Mapping[str, Sequence[str]]) -> list[int]:
    """Decides: the ports a channel protocol's query names (``ports``, each value a port or
    a comma-separated list), in order; ForwardError when none or one is not a port."""
    values = q.get("ports") or []
    if not values:
        raise ForwardError('query parameter "port" is required')
    ports: list[int] = []
    for value in values:
        if not value:
            raise ForwardError('query parameter "port" cannot be empty')
        ports += [parse_port(p) for p in value.split(",")]
    return ports


def check_pod(pod: Obj) -> None:
    """Decides: whether ``pod`` can have connections forwarded to it (it has a node);
    ForwardError otherwise, in upstream's words."""
    if not (pod.get("spec") or {}).get("nodeName"):
        raise ForwardError(f"pod {meta.name(pod)} does not have a host assigned")


def request_path(pod: Obj, port: int) -> str:
    """The node agent's path and query for a connection to ``port`` of ``pod``."""
    q = [("uid", meta.uid(pod)), ("port", str(port))]
    parts = [urllib.parse.quote(p, safe="") for p in (meta.namespace(pod), meta.name(pod))]
    return f"/portforward/{'/'.join(parts)}?{urllib.parse.urlencode(q)}"
