"""A request upgraded to SPDY/3.1, as kubectl asks before its WebSockets (kubectl before
1.30 for exec, before 1.31 for port-forward, and any kubectl when its WebSocket is refused
or turned off): ``Connection: Upgrade``, ``Upgrade: SPDY/3.1`` and the stream protocols it
speaks in ``X-Stream-Protocol-Version``; answered ``101 Switching Protocols`` naming the one
chosen, after which the connection's bytes are a SPDY session (``shared.api.spdy``). The
same session as the one kubectl tunnels in a WebSocket, so both reach one :class:`Pipe`.

aiohttp upgrades only to WebSockets: this takes the connection over as its WebSocket
response does (the 101 written by a prepared response, the bytes after it fed to a parser
of our own, keep-alive off), reading with back-pressure. Acts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Protocol

from aiohttp import WSMsgType, web
from aiohttp.abc import AbstractStreamWriter

from services.apiserver import status as st
from shared.api import spdy

log = logging.getLogger(__name__)

SPDY = "SPDY/3.1"
PROTOCOL_HEADER = "X-Stream-Protocol-Version"
HIGH_WATER = 1 << 20  # bytes read and not yet taken before reading pauses


class Pipe(Protocol):
    """A caller's connection carrying a session's bytes."""

    async def recv(self) -> bytes:
        """The next bytes; b"" once the caller has gone."""

    async def send(self, data: bytes) -> None: ...


def wants_spdy(request: web.Request) -> bool:
    return request.headers.get("Upgrade", "").lower() == SPDY.lower() and \
        "upgrade" in request.headers.get("Connection", "").lower()


def offered(request: web.Request) -> list[str]:
    """The stream protocols the caller speaks, in its order."""
    return [p.strip() for value in request.headers.getall(PROTOCOL_HEADER, [])
            for p in value.split(",") if p.strip()]


def choose(request: web.Request, served: Sequence[str]) -> str | None:
    """The first protocol the caller offers that is ``served`` (upstream's handshake)."""
    return next((p for p in offered(request) if p in served), None)


def not_negotiated(request: web.Request, served: Sequence[str]) -> st.ApiError:
    """The refusal of an upgrade offering none of the ``served`` protocols (upstream's
    words)."""
    return st.ApiError("Forbidden", f"unable to upgrade: unable to negotiate protocol: "
                       f"client supports [{' '.join(offered(request))}], server supports "
                       f"[{' '.join(served)}]")


class _Reader:
    """The bytes after the 101, as aiohttp's protocol feeds its payload parser."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.chunks: asyncio.Queue[bytes] = asyncio.Queue()
        self.held = 0
        self.paused = False

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        if data:
            self.chunks.put_nowait(bytes(data))
            self.held += len(data)
            if self.held > HIGH_WATER and not self.paused:
                self.paused = True
                with contextlib.suppress(RuntimeError):
                    self.transport.pause_reading()
        return False, b""

    def feed_eof(self) -> None:
        self.chunks.put_nowait(b"")

    async def recv(self) -> bytes:
        data = await self.chunks.get()
        self.held -= len(data)
        if self.paused and self.held <= HIGH_WATER // 2:
            self.paused = False
            with contextlib.suppress(RuntimeError):
                self.transport.resume_reading()
        if not data:
            self.chunks.put_nowait(b"")  # (the end, for any later call)
        return data


class SpdyPipe:
    """The connection after a 101: its bytes both ways (written on the transport, waiting
    on the response's writer, which waits while the transport is paused)."""

    def __init__(self, reader: _Reader, transport: asyncio.BaseTransport,
                 writer: AbstractStreamWriter) -> None:
        self.reader, self.transport, self.writer = reader, transport, writer

    async def recv(self) -> bytes:
        return await self.reader.recv()

    async def send(self, data: bytes) -> None:
        if self.transport.is_closing():
            raise ConnectionResetError("the caller went away")
        self.transport.write(data)  # type: ignore[attr-defined]
        await self.writer.drain()


async def accept_spdy(request: web.Request, protocol: str) -> tuple[web.StreamResponse,
                                                                    SpdyPipe]:
    """Acts: answer 101 with ``protocol`` and take the connection over."""
    transport = request.transport
    if transport is None:
        raise ConnectionResetError("the caller went away")
    resp = web.StreamResponse(status=101, headers={
        "Connection": "Upgrade", "Upgrade": SPDY, PROTOCOL_HEADER: protocol})
    reader = _Reader(transport)  # type: ignore[arg-type]
    request.protocol.set_parser(reader)  # type: ignore[arg-type]
    request.protocol.keep_alive(False)
    writer = await resp.prepare(request)
    assert writer is not None
    return resp, SpdyPipe(reader, transport, writer)


class WebSocketPipe:
    """A WebSocket whose binary messages carry a session's bytes (client-go's tunnel)."""

    def __init__(self, ws: web.WebSocketResponse) -> None:
        self.ws = ws

    async def recv(self) -> bytes:
        while True:
            msg = await self.ws.receive()
            if msg.type == WSMsgType.BINARY:
                if msg.data:
                    return bytes(msg.data)
            elif msg.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED,
                              WSMsgType.ERROR):
                return b""

    async def send(self, data: bytes) -> None:
        await self.ws.send_bytes(data)


class SpdyServer:
    """The API server's side of a SPDY session on ``pipe``: frames written in order (a
    header block is compressed under the same lock that sends it), the streams the caller
    opens answered, its pings echoed."""

    def __init__(self, pipe: Pipe) -> None:
        self.pipe = pipe
        self.session = spdy.Session()
        self.lock = asyncio.Lock()

    async def send(self, frame: bytes | Callable[[], bytes]) -> None:
        async with self.lock:
            await self.pipe.send(frame() if callable(frame) else frame)

    async def reply(self, stream: int) -> None:
        await self.send(lambda: self.session.syn_reply(stream))

    async def frames(self) -> AsyncIterator[spdy.Frame]:
        """The caller's frames until it goes (or sends GOAWAY, or bytes that are not
        SPDY/3), the pings answered."""
        try:
            while data := await self.pipe.recv():
                try:
                    frames = self.session.feed(data)
                except spdy.SpdyError as err:
                    log.info("SPDY session ended: %s", err)
                    await self.send(spdy.goaway(0, 1))
                    return
                for frame in frames:
                    if frame.kind == spdy.PING:
                        await self.send(spdy.ping(frame))
                    elif frame.kind == spdy.GOAWAY:
                        return
                    else:
                        yield frame
        except (ConnectionResetError, OSError):
            return  # the caller went away

    async def finish(self, *streams: int) -> None:
        """Acts: the server's last frame on each of ``streams`` (nothing when the caller
        is gone)."""
        with contextlib.suppress(ConnectionResetError, OSError, RuntimeError):
            for stream in streams:
                if stream:
                    await self.send(spdy.data(stream, fin=True))
