"""``/api/v1/namespaces/{namespace}/pods/{name}[:{port}]/proxy[/{path}]`` (``kubectl get
--raw``, ``kubectl proxy``, the Python client's ``connect_*_namespaced_pod_proxy*``): an
HTTP request to a port of a pod, sent on through the port-forward endpoint of the node agent
running it (one connection per request, ``podlog.open_stream``) and its answer relayed back
as it comes; ``.../services/{name}[:{port}]/proxy[/{path}]`` the same to one of a Service's
Ready pods. The rules (the target, the request sent on, the answer's head) are
``shared.api.podproxy``'s. Acts.

Registered by ``app.make_app`` before the generic resource routes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from services.apiserver import auth, podlog
from services.apiserver import status as st
from shared.api import podproxy as rules
from shared.api import portforward
from shared.model import meta

log = logging.getLogger(__name__)
PATH = "/api/v1/namespaces/{namespace}/pods/{name}/proxy"
PATH_WITH_REST = PATH + "/{rest:.*}"
ANSWER_TIMEOUT = 60.0  # for the head of the pod's answer
CHUNK = 64 * 1024
SERVICE_PATH = "/api/v1/namespaces/{namespace}/services/{name}/proxy"
SERVICE_PATH_WITH_REST = SERVICE_PATH + "/{rest:.*}"
Obj = dict[str, Any]


def handler(state: podlog.State, user_of: Callable[[web.Request], auth.User],
            ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """``pods/proxy``: the request to the pod's port it names."""
    async def serve(request: web.Request) -> web.StreamResponse:
        verb = rules.VERBS.get(request.method)
        ns, name_port = podlog.checked(request, state, user_of(request), tuple(rules.VERBS),
                                       verb or "get", "proxy")
        try:
            name, port_text = rules.split_target(name_port)
        except rules.ProxyError as err:
            raise st.bad_request(str(err)) from err
        pod = await podlog.read_pod(state, ns, name)
        try:
            port = rules.pod_port(port_text, pod)
        except rules.ProxyError as err:
            raise st.bad_request(str(err)) from err
        return await _relay(request, state, pod, port)

    return serve


def service_handler(state: podlog.State, user_of: Callable[[web.Request], auth.User],
                    pods_of: Callable[[str], list[Obj]],
                    ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """``services/proxy``: the request to one of the service's Ready pods (among
    ``pods_of(namespace)``: the watch cache's, not a read of every pod from the store), on
    the port its service port's targetPort names."""
    async def serve(request: web.Request) -> web.StreamResponse:
        verb = rules.VERBS.get(request.method)
        ns, name_port = podlog.checked(request, state, user_of(request), tuple(rules.VERBS),
                                       verb or "get", "proxy", "services")
        try:
            name, port_text = rules.split_target(name_port)
        except rules.ProxyError as err:
            raise st.bad_request(str(err)) from err
        svc = await state.run(state.store.try_get, "Service", f"{ns}/{name}")
        if svc is None:
            raise st.not_found("Service", name)
        try:
            pod, port = rules.service_backend(svc, port_text, pods_of(ns))
        except rules.Unavailable as err:
            raise st.ApiError("ServiceUnavailable", str(err)) from err
        return await _relay(request, state, pod, port)

    return serve


async def _relay(request: web.Request, state: podlog.State, pod: Obj,
                 port: int) -> web.StreamResponse:
    """Acts: ``request`` sent on to ``port`` of ``pod`` through its node agent, and the
    pod's answer relayed back as it comes."""
    ns, name = meta.namespace(pod), meta.name(pod)
    try:
        rules.check_pod(pod)
    except rules.ProxyError as err:
        raise st.bad_request(str(err)) from err
    ep = await podlog.node_endpoint(state, pod, "proxy")
    body = await request.read()  # (within the application's request-body limit)
    try:
        host = str((pod.get("status") or {}).get("podIP") or name)  # (upstream's: the pod's)
        head = rules.request_head(request.method, rules.rest_of(request.raw_path),
                                  request.headers.items(), f"{host}:{port}", len(body))
    except rules.ProxyError as err:
        raise st.bad_request(str(err)) from err
    try:
        reader, writer = await podlog.open_stream(
            ep, portforward.request_path(pod, port), "proxy")
    except st.ApiError as err:  # (the agent's words: nothing listens there, ...)
        raise st.ApiError("ServiceUnavailable",
                          f"error trying to reach service: {err}") from err
    resp: web.StreamResponse | None = None
    try:
        writer.write(head + body)
        await writer.drain()
        status, headers = await _answer_head(reader, name, port)
        resp = web.StreamResponse(status=status)
        for key, value in headers:
            resp.headers.add(key, value)
        await resp.prepare(request)
        if request.method != "HEAD":
            while chunk := await reader.read(CHUNK):
                await resp.write(chunk)
        await resp.write_eof()
        return resp
    except (ConnectionResetError, OSError, ssl.SSLError) as err:
        log.info("proxy to pod %s/%s port %d ended: %s", ns, name, port, err)
        if resp is not None:
            return resp  # (the answer was under way: it ends short, as the pod's did)
        raise st.ApiError("ServiceUnavailable",
                          f"error trying to reach service: {err}") from err
    finally:
        with contextlib.suppress(OSError, ssl.SSLError, RuntimeError):
            podlog.cut(writer)


async def _answer_head(reader: asyncio.StreamReader, name: str,
                       port: int) -> tuple[int, list[tuple[str, str]]]:
    """The status and headers of the pod's answer (its head within the reader's limit, 64
    KiB); ServiceUnavailable when there is none, as upstream's proxy says it."""
    try:
        answer = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), ANSWER_TIMEOUT)
        return rules.parse_head(answer[:-4])
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError) as err:
        raise st.ApiError("ServiceUnavailable", f"error trying to reach service: pod {name} "
                          f"port {port} gave no HTTP answer") from err
    except rules.ProxyError as err:
        raise st.ApiError("ServiceUnavailable", f"error trying to reach service: {err}") from err
