"""``/api/v1/namespaces/{namespace}/pods/{name}/portforward`` (``kubectl port-forward``, the
Python client's ``portforward``): the API server checks the request (``shared.api
.portforward``, upstream's texts), upgrades it and, for each connection the caller forwards,
opens one connection to the port-forward endpoint of the node agent running the pod
(``shared.store.nodeserver``: its address from the Node, its certificate pinned, its token),
relaying the bytes both ways. Acts.

kubectl's WebSocket carries a SPDY session (``shared.api.spdy``), in which each connection is
a pair of streams; older kubectls upgrade the request itself to SPDY/3.1 for the same
session (``upgrade``); the Python client's WebSocket carries channels, one connection per
port named in the query. A connection that cannot be made is told on its error stream or
channel, in the agent's words; the session goes on. The caller going away closes every
connection.

Registered by ``app.make_app`` before the generic resource routes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from services.apiserver import auth, podlog, upgrade
from services.apiserver import status as st
from shared.api import podexec, spdy
from shared.api import portforward as rules
from shared.api.podlog import Endpoint

log = logging.getLogger(__name__)
PATH = "/api/v1/namespaces/{namespace}/pods/{name}/portforward"
MAX_MESSAGE = 4 << 20  # a tunnel's message carries a frame of what the caller's copy read
MAX_CONNECTIONS = 256  # forwarded connections open at once in one session
MAX_EARLY = 1 << 20  # bytes a connection may send before its agent's leg is open
CHUNK = 32 * 1024
Obj = dict[str, Any]


def handler(state: podlog.State, user_of: Callable[[web.Request], auth.User],
            ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def serve(request: web.Request) -> web.StreamResponse:
        user = user_of(request)
        # a WebSocket's GET asks for what a POST would (upstream's
        # AuthorizePodWebsocketUpgradeCreatePermission)
        ns, name = podlog.checked(request, state, user, ("GET", "POST"), "create", "portforward")
        pod = await podlog.read_pod(state, ns, name)
        try:
            rules.check_pod(pod)
        except rules.ForwardError as err:
            raise st.bad_request(str(err)) from err
        ep = await podlog.node_endpoint(state, pod, "port forwarding")
        target = _Target(ep, pod)
        if upgrade.wants_spdy(request):
            if upgrade.choose(request, (rules.STREAM_PROTOCOL,)) is None:
                raise upgrade.not_negotiated(request, (rules.STREAM_PROTOCOL,))
            log.info("user %s forwards to pod %s/%s over SPDY", user.name, ns, name)
            resp, pipe = await upgrade.accept_spdy(request, rules.STREAM_PROTOCOL)
            await _Tunnel(pipe, target).run()
            return resp
        ws = web.WebSocketResponse(protocols=rules.PROTOCOLS, max_msg_size=MAX_MESSAGE)
        ready = ws.can_prepare(request)
        if not ready.ok or ready.protocol not in rules.PROTOCOLS:
            raise podlog.upgrade_required(rules.PROTOCOLS)
        ports: list[int] = []
        if ready.protocol == rules.CHANNELS:
            try:
                ports = rules.query_ports(podexec.parse_query(request.query_string))
            except rules.ForwardError as err:
                raise st.bad_request(str(err)) from err
        await ws.prepare(request)
        log.info("user %s forwards to pod %s/%s (%s)", user.name, ns, name,
                 ", ".join(map(str, ports)) or "ports per connection")
        try:
            if ready.protocol == rules.TUNNEL:
                await _Tunnel(upgrade.WebSocketPipe(ws), target).run()
            else:
                await _channels(ws, target, ports)
        finally:
            await ws.close()
        return ws

    return serve


@dataclass(frozen=True)
class _Target:
    ep: Endpoint
    pod: Obj

    async def open(self, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """Acts: a connection to ``port`` of the pod, through its agent; ApiError (its
        message the caller's to read) when it cannot be made."""
        return await podlog.open_stream(self.ep, rules.request_path(self.pod, port),
                                        "port-forward")


def _close(writer: asyncio.StreamWriter | None, at_once: bool = True) -> None:
    """Acts: an agent's leg closed, at once (``podlog.cut``: what it has not sent is
    dropped) or once it has sent what it was given."""
    if writer is not None:
        with contextlib.suppress(OSError, ssl.SSLError, RuntimeError):
            if at_once:
                podlog.cut(writer)
            else:
                writer.close()


# ---- kubectl's: a SPDY session, in the WebSocket or on the upgraded connection ---------------

@dataclass
class _Connection:
    """One forwarded connection: its two streams and its agent's leg."""

    request_id: str
    port_text: str = ""
    error_stream: int = 0
    data_stream: int = 0
    early: bytearray = field(default_factory=bytearray)  # the caller's bytes before the leg
    fin: bool = False  # the caller sent its last bytes
    writer: asyncio.StreamWriter | None = None
    task: asyncio.Task[None] | None = None


class _Tunnel:
    """A SPDY session: streams answered, paired into connections, each relayed."""

    def __init__(self, pipe: upgrade.Pipe, target: _Target) -> None:
        self.server, self.target = upgrade.SpdyServer(pipe), target
        self.send = self.server.send
        self.by_request: dict[str, _Connection] = {}
        self.by_stream: dict[int, _Connection] = {}

    async def run(self) -> None:
        try:
            async for frame in self.server.frames():
                if frame.kind == spdy.SYN_STREAM:
                    await self.opened(frame)
                elif frame.kind == spdy.DATA:
                    conn = self.by_stream.get(frame.stream)
                    if conn is not None and frame.stream == conn.data_stream:
                        await self.from_caller(conn, frame)
                elif frame.kind == spdy.RST_STREAM:
                    conn = self.by_stream.get(frame.stream)
                    if conn is not None:
                        self.end(conn)
        finally:
            for conn in list(self.by_request.values()):
                self.end(conn)

    async def opened(self, frame: spdy.Frame) -> None:
        """A stream the caller opened: answered, and paired with its connection's other."""
        stream, headers = frame.stream, frame.headers
        await self.server.reply(stream)
        kind, request_id = headers.get(rules.STREAM_TYPE), headers.get(rules.REQUEST_ID, "")
        conn = self.by_request.get(request_id)
        if conn is None:
            if len(self.by_request) >= MAX_CONNECTIONS:
                await self.send(spdy.rst_stream(stream, spdy.REFUSED_STREAM))
                return
            conn = self.by_request[request_id] = _Connection(request_id)
        if kind == rules.ERROR_STREAM and not conn.error_stream:
            conn.error_stream = stream
        elif kind == rules.DATA_STREAM and not conn.data_stream:
            conn.data_stream = stream
        else:
            await self.send(spdy.rst_stream(stream, spdy.PROTOCOL_ERROR))
            return
        self.by_stream[stream] = conn
        conn.port_text = headers.get(rules.PORT, "")
        if conn.error_stream and conn.data_stream and conn.task is None:
            conn.task = asyncio.ensure_future(self.forward(conn))

    async def from_caller(self, conn: _Connection, frame: spdy.Frame) -> None:
        conn.fin = conn.fin or frame.fin
        if conn.writer is None:
            conn.early += frame.data
            if len(conn.early) > MAX_EARLY:
                self.end(conn)
            return
        try:
            if frame.data:
                conn.writer.write(frame.data)
                await conn.writer.drain()
        except (OSError, ssl.SSLError, RuntimeError):
            self.end(conn)
            return
        if conn.fin:
            _close(conn.writer, at_once=False)  # (TLS has no half-close: the pod's ends too)

    async def forward(self, conn: _Connection) -> None:
        """Acts: the agent's leg of ``conn`` opened and relayed to the caller; what goes
        wrong told on the error stream; both streams ended."""
        try:
            try:
                reader, conn.writer = await self.target.open(rules.parse_port(conn.port_text))
            except (rules.ForwardError, st.ApiError) as err:
                await self.send(spdy.data(conn.error_stream, str(err).encode()))
                return
            if conn.early:
                conn.writer.write(bytes(conn.early))
                conn.early.clear()
            if conn.fin:
                _close(conn.writer, at_once=False)
            while chunk := await _read(reader):
                await self.send(spdy.data(conn.data_stream, chunk))
        except (ConnectionResetError, OSError):
            pass  # the caller went away: run's end ends the rest
        finally:
            _close(conn.writer)
            await self.server.finish(conn.data_stream, conn.error_stream)
            self.forget(conn)

    def end(self, conn: _Connection) -> None:
        """Acts: the connection given up (its leg closed, its relay stopped)."""
        _close(conn.writer)
        if conn.task is not None and not conn.task.done():
            conn.task.cancel()
        self.forget(conn)

    def forget(self, conn: _Connection) -> None:
        self.by_request.pop(conn.request_id, None)
        for stream in (conn.error_stream, conn.data_stream):
            if self.by_stream.get(stream) is conn:
                del self.by_stream[stream]


async def _read(reader: asyncio.StreamReader) -> bytes:
    """The agent's next bytes; b"" once its leg has ended, however."""
    try:
        return await reader.read(CHUNK)
    except (OSError, ssl.SSLError, asyncio.IncompleteReadError):
        return b""


# ---- the Python client's: channels, one connection per port ---------------------------------

async def _channels(ws: web.WebSocketResponse, target: _Target, ports: list[int]) -> None:
    """Acts: each port's connection for the WebSocket's life, its data on channel 2i and
    its errors on 2i+1 (each opened by the port number); closed once all have ended."""
    legs: list[asyncio.Future[asyncio.StreamWriter | None]] = [
        asyncio.get_running_loop().create_future() for _ in ports]
    for i, port in enumerate(ports):
        for channel in (2 * i, 2 * i + 1):
            await ws.send_bytes(bytes([channel]) + port.to_bytes(2, "little"))

    async def one(i: int, port: int) -> None:
        try:
            reader, writer = await target.open(port)
        except st.ApiError as err:
            legs[i].set_result(None)
            await ws.send_bytes(bytes([2 * i + 1]) + str(err).encode())
            return
        legs[i].set_result(writer)
        while chunk := await _read(reader):
            await ws.send_bytes(bytes([2 * i]) + chunk)

    relays = asyncio.ensure_future(asyncio.gather(*(one(i, p) for i, p in enumerate(ports))))
    inbound = asyncio.ensure_future(_channel_input(ws, legs))
    try:
        await asyncio.wait((relays, inbound), return_when=asyncio.FIRST_COMPLETED)
    except (ConnectionResetError, OSError):
        pass
    finally:
        for fut in (relays, inbound):
            fut.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionResetError, OSError):
                await fut
        for leg in legs:
            _close(leg.result() if leg.done() else None)


async def _channel_input(ws: web.WebSocketResponse,
                         legs: list[asyncio.Future[asyncio.StreamWriter | None]]) -> None:
    """Acts: the caller's data on each port's leg (once it is open; dropped when it could
    not be)."""
    async for msg in ws:
        if msg.type != WSMsgType.BINARY or len(msg.data) < 2 or msg.data[0] % 2 \
                or msg.data[0] // 2 >= len(legs):
            continue
        writer = await legs[msg.data[0] // 2]
        if writer is not None:
            writer.write(msg.data[1:])
            with contextlib.suppress(OSError, ssl.SSLError, RuntimeError):
                await writer.drain()
