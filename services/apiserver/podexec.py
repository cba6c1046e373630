"""``/api/v1/namespaces/{namespace}/pods/{name}/exec`` (``kubectl exec``, ``kubectl cp``): the
API server checks the request (``shared.api.podexec``, upstream's texts), opens the exec
endpoint of the node agent running the pod (``shared.store.nodeserver``: its address from the
Node, its certificate pinned, its token), then upgrades the caller's request to a WebSocket
(``v5.channel.k8s.io``, kubectl's; or ``v4.channel.k8s.io``, which has no close of stdin)
and relays the channels both ways until the command's Status has come. The caller going
away closes the agent's connection, which ends the command. Acts.

Registered by ``app.make_app`` before the generic resource routes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable

from aiohttp import WSMsgType, web

from services.apiserver import auth, podlog
from services.apiserver import status as st
from shared.api import podexec as rules
from shared.api.podlog import LogError
from shared.store import nodeserver

log = logging.getLogger(__name__)
PATH = "/api/v1/namespaces/{namespace}/pods/{name}/exec"
MAX_MESSAGE = rules.MAX_FRAME + 1
CALLER_CHECK = 1.0  # seconds between looks at whether a caller whose input waits is there


def handler(state: podlog.State, user_of: Callable[[web.Request], auth.User],
            ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def serve(request: web.Request) -> web.StreamResponse:
        user = user_of(request)
        # a WebSocket's GET asks for what a POST would: create (upstream's
        # AuthorizePodWebsocketUpgradeCreatePermission)
        ns, name = podlog.checked(request, user, ("GET", "POST"), "create", "exec")
        try:
            opts = rules.options(rules.parse_query(request.query_string))
        except rules.ExecError as err:
            raise st.bad_request(str(err)) from err
        pod = await podlog.read_pod(state, ns, name)
        try:
            container = rules.pick_container(pod, opts.container)
            ep = await state.run(nodeserver.endpoint, state.store,
                                 str(pod["spec"]["nodeName"]), "exec")
        except (rules.ExecError, LogError) as err:
            raise st.bad_request(str(err)) from err
        ws = web.WebSocketResponse(protocols=rules.PROTOCOLS, max_msg_size=MAX_MESSAGE)
        ready = ws.can_prepare(request)
        if not ready.ok or ready.protocol not in rules.PROTOCOLS:
            # kubectl tries SPDY when its WebSocket is refused, and shows what that try is
            # told: the agent's refusal, if it refuses (asked to run nothing), is the one
            _, checked = await podlog.open_stream(
                ep, rules.request_path(pod, container, opts, check=True), "exec")
            checked.close()
            raise podlog.upgrade_required(rules.PROTOCOLS)
        reader, writer = await podlog.open_stream(
            ep, rules.request_path(pod, container, opts), "exec")
        try:
            await ws.prepare(request)
            log.info("user %s runs %r in pod %s/%s container %s", user.name,
                     " ".join(opts.command), ns, name, container)
            await _relay(ws, reader, writer, request)
        finally:
            writer.close()
            with contextlib.suppress(OSError, ssl.SSLError):
                await writer.wait_closed()
        return ws

    return serve


async def _relay(ws: web.WebSocketResponse, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter, request: web.Request) -> None:
    """Acts: the agent's frames to the caller until the Status; the caller's input to the
    agent until either side ends."""
    inbound = asyncio.ensure_future(_from_caller(ws, writer, request))
    try:
        ended = False
        while not ended:
            try:
                channel, size = rules.frame_header(await reader.readexactly(rules.HEADER_SIZE))
                data = await reader.readexactly(size)
            except (asyncio.IncompleteReadError, OSError, ssl.SSLError, rules.ExecError):
                await ws.send_bytes(bytes([rules.ERROR]) + rules.status_data(rules.failed(
                    "the node agent ended the session before the command's end")))
                break
            await ws.send_bytes(bytes([channel]) + data)
            ended = channel == rules.ERROR
    except (ConnectionResetError, OSError):
        pass  # the caller went away
    finally:
        inbound.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await inbound
        await ws.close()


async def _from_caller(ws: web.WebSocketResponse, writer: asyncio.StreamWriter,
                       request: web.Request) -> None:
    async for msg in ws:
        if msg.type == WSMsgType.TEXT:  # (the Python client sends text as text messages)
            raw = msg.data.encode()
        elif msg.type == WSMsgType.BINARY:
            raw = msg.data
        else:
            continue
        if raw and raw[0] in (rules.STDIN, rules.RESIZE, rules.CLOSE):
            writer.write(rules.frame(raw[0], bytes(raw[1:])))
            if not await _drained(writer, request):
                break
    # the caller is gone (or closed): the agent's connection ends, and with it the command
    writer.transport.abort()


async def _drained(writer: asyncio.StreamWriter, request: web.Request) -> bool:
    """Acts: wait while the agent takes the input (a command that reads none holds it up),
    as long as the caller is there; False once it is gone."""
    while True:
        try:
            await asyncio.wait_for(asyncio.shield(writer.drain()), CALLER_CHECK)
            return True
        except TimeoutError:
            transport = request.transport
            if transport is None or transport.is_closing():
                return False
