"""``GET /api/v1/namespaces/{namespace}/pods/{name}/log`` (``kubectl logs``): the API server
picks the container and its run from the pod (``shared.api.podlog``, upstream's texts), and
proxies to the log endpoint of the node agent running it (``shared.store.nodeserver``: its
address from the Node, its certificate pinned, its token), streaming what it sends, with ``follow``,
``tailLines``, ``limitBytes``, ``previous``, ``container``, ``timestamps``, ``sinceSeconds``
and ``sinceTime`` (their values checked here; whether the node's runtime can serve them is
its agent's answer, relayed). Acts.

Registered by ``app.make_app`` before the generic resource routes.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import socket
import ssl
import struct
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import aiohttp
from aiohttp import web

from services.apiserver import auth
from services.apiserver import status as st
from shared.api import podlog as rules
from shared.api import rbac
from shared.model import kinds
from shared.store import nodeserver
from shared.store.client import Store

PATH = "/api/v1/namespaces/{namespace}/pods/{name}/log"
CONNECT_TIMEOUT = 10.0


class State(Protocol):
    store: Store

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any: ...

    def decide(self, user: auth.User, req: rbac.Request, namespaced: bool) -> str | None: ...


def checked(request: web.Request, state: State, user: auth.User, methods: tuple[str, ...],
            verb: str, subresource: str, resource: str = "pods") -> tuple[str, str]:
    """The namespace and name of the pod (or of the ``resource``) of a request for
    ``<resource>/<subresource>`` by one of ``methods``, which ``user`` may ``verb``
    (``state.decide``); MethodNotAllowed or Forbidden otherwise."""
    ns, name = request.match_info["namespace"], request.match_info["name"]
    if request.method not in methods:
        raise st.ApiError("MethodNotAllowed", "the server does not allow this method on "
                          "the requested resource")
    if state.decide(user, rbac.Request(verb, "", resource, subresource, ns, name),
                    True) is None:
        raise st.denied(user.name, verb, kinds.SERVICE if resource == "services" else kinds.POD,
                        ns, name, subresource)
    return ns, name


async def node_endpoint(state: State, pod: dict[str, Any],
                        serves: str = "logs") -> rules.Endpoint:
    """The endpoint of the node agent running ``pod`` (``nodeserver.endpoint``, which says
    what the node ``serves`` none of); BadRequest in its words when there is none."""
    try:
        ep: rules.Endpoint = await state.run(nodeserver.endpoint, state.store,
                                             str(pod["spec"]["nodeName"]), serves)
    except rules.LogError as err:
        raise st.bad_request(str(err)) from err
    return ep


async def read_pod(state: State, ns: str, name: str) -> dict[str, Any]:
    pod = await state.run(state.store.try_get, "Pod", f"{ns}/{name}")
    if pod is None:
        raise st.not_found("Pod", name)
    assert isinstance(pod, dict)
    return pod


def handler(state: State, user_of: Callable[[web.Request], auth.User],
            ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def serve(request: web.Request) -> web.StreamResponse:
        ns, name = checked(request, state, user_of(request), ("GET",), "get", "log")
        try:
            opts = rules.options(request.query)
        except rules.LogError as err:
            raise st.bad_request(str(err)) from err
        pod = await read_pod(state, ns, name)
        try:
            container = rules.pick_container(pod, opts.container)
            run = rules.pick_run(pod, container, opts.previous)
        except rules.LogError as err:
            raise st.bad_request(str(err)) from err
        ep = await node_endpoint(state, pod)
        return await _proxy(request, ep, rules.request_path(pod, container, run, opts))

    return serve


async def _proxy(request: web.Request, ep: rules.Endpoint, path: str) -> web.StreamResponse:
    """Acts: stream the agent's answer to the caller as it comes."""
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT)
    pin = aiohttp.Fingerprint(bytes.fromhex(ep.sha256))
    headers = {"Authorization": f"Bearer {ep.token}"}
    resp: web.StreamResponse | None = None
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session, \
                session.get(ep.base + path, headers=headers, ssl=pin) as upstream:
            if upstream.status != 200:
                text = (await upstream.content.read(4096)).decode(errors="replace")
                raise st.bad_request(text or f"the node's log endpoint answered "
                                     f"{upstream.status}")
            resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
            await resp.prepare(request)
            async for chunk in upstream.content.iter_any():
                await resp.write(chunk)
            await resp.write_eof()
            return resp
    except aiohttp.ServerFingerprintMismatch as err:
        raise st.ApiError("InternalError", f"Internal error occurred: the log endpoint "
                          f"{ep.base} is not the one its node agent published") from err
    except (aiohttp.ClientError, OSError) as err:
        if resp is not None:
            return resp  # mid-stream: the agent or the caller went away; the stream ends
        raise st.ApiError("InternalError", f"Internal error occurred: the log endpoint "
                          f"{ep.base} cannot be reached: {err}") from err


async def open_stream(ep: rules.Endpoint, path: str, serves: str,
                      ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Acts: a connection to the agent's endpoint for ``path`` (its ``serves``: exec,
    port-forward), answered 200 (its certificate pinned), whose bytes are then the
    session's; ApiError otherwise, in the agent's words where it gave some."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # the certificate is pinned below
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(ep.host, ep.port, ssl=ctx), CONNECT_TIMEOUT)
    except (TimeoutError, OSError) as err:
        raise st.ApiError("InternalError", f"Internal error occurred: the {serves} endpoint "
                          f"{ep.base} cannot be reached: {str(err) or 'timed out'}") from err
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        if hashlib.sha256(der or b"").hexdigest() != ep.sha256:
            raise st.ApiError("InternalError", f"Internal error occurred: the {serves} endpoint "
                              f"{ep.base} is not the one its node agent published")
        writer.write(f"POST {path} HTTP/1.0\r\nAuthorization: Bearer {ep.token}\r\n\r\n"
                     .encode())
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), CONNECT_TIMEOUT)
        code = head.split(b" ", 2)[1] if head.count(b" ") >= 2 else b""
        if code != b"200":
            text = (await reader.read(4096)).decode(errors="replace")
            raise st.bad_request(text or f"the node's {serves} endpoint answered "
                                 f"{code.decode(errors='replace')}")
    except BaseException as err:
        writer.close()
        if isinstance(err, (OSError, TimeoutError, asyncio.IncompleteReadError,
                            asyncio.LimitOverrunError)):
            raise st.ApiError("InternalError", f"Internal error occurred: the {serves} endpoint "
                              f"{ep.base} went away: {str(err) or 'timed out'}") from err
        raise
    return reader, writer


def cut(writer: asyncio.StreamWriter) -> None:
    """Acts: end an agent's leg (``open_stream``'s) at once, with a reset: what it was given
    and has not sent is dropped. (Closed with bytes still to send, a connection waits to
    send them first, and an agent that is not reading them, a command that reads no input,
    a pod's port that takes none, would not see its end.)"""
    sock = writer.transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def upgrade_required(protocols: tuple[str, ...]) -> st.ApiError:
    """The refusal of a request for a stream (exec, port-forward) that is not a WebSocket
    with one of ``protocols``."""
    return st.bad_request(f"Upgrade request required: a WebSocket with the "
                          f"{' or '.join(protocols)} subprotocol")
