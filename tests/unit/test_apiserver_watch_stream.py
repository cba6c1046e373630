"""A watch's body written straight to its connection (``watch._Stream``): whole HTTP chunks
that interleave with aiohttp's own writer in one valid chunked stream, nothing offered to a
connection that is behind or gone."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest
from aiohttp import web
from aiohttp.base_protocol import BaseProtocol
from aiohttp.http_writer import StreamWriter
from multidict import CIMultiDict

from services.apiserver import watch


class _Transport:
    def __init__(self) -> None:
        self.out = bytearray()
        self.closing = False

    def write(self, data: bytes) -> None:
        self.out += data

    def is_closing(self) -> bool:
        return self.closing


def _protocol(loop: asyncio.AbstractEventLoop) -> BaseProtocol:
    protocol = BaseProtocol(loop)
    protocol.transport = cast(asyncio.Transport, _Transport())
    return protocol


def _out(protocol: BaseProtocol) -> bytes:
    return bytes(cast(_Transport, protocol.transport).out)


def _stream(protocol: BaseProtocol, writer: Any = None) -> watch._Stream:
    request = type("Request", (), {"protocol": protocol, "writer": writer})()
    return watch._Stream(cast(web.Request, request))


def _body(raw: bytes) -> tuple[bytes, bool]:
    """The de-chunked body of an HTTP response, and whether its last chunk came."""
    _head, rest = raw.split(b"\r\n\r\n", 1)
    body = b""
    while rest:
        size_line, rest = rest.split(b"\r\n", 1)
        size = int(size_line, 16)
        if size == 0:
            assert rest == b"\r\n"
            return body, True
        assert rest[size:size + 2] == b"\r\n"
        body, rest = body + rest[:size], rest[size + 2:]
    return body, False


def test_direct_writes_interleave_with_aiohttps_chunks_in_one_stream() -> None:
    async def scenario() -> bytes:
        protocol = _protocol(asyncio.get_running_loop())
        writer = StreamWriter(protocol, asyncio.get_running_loop())
        writer.enable_chunking()
        await writer.write_headers("HTTP/1.1 200 OK", CIMultiDict())
        writer.send_headers()
        stream = _stream(protocol, writer)
        await writer.write(b'{"n":1}\n')  # the backlog, by aiohttp
        assert stream.offer(b'{"n":2}\n{"n":3}\n')  # a run, by the feed
        stream.write(b'{"n":4}\n')  # the buffer, by the watch's task
        await writer.write(b'{"n":5}\n')  # a BOOKMARK, by aiohttp
        await writer.write_eof()
        return _out(protocol)

    body, ended = _body(asyncio.run(scenario()))
    assert ended and body == b"".join(b'{"n":%d}\n' % i for i in range(1, 6))


def test_nothing_is_offered_to_a_connection_behind_or_gone() -> None:
    loop = asyncio.new_event_loop()
    protocol = _protocol(loop)
    stream = _stream(protocol)
    protocol.pause_writing()  # its buffers are full: the run waits in the watcher's
    assert not stream.offer(b"x\n")
    protocol.resume_writing()
    assert stream.offer(b"x\n") and _out(protocol) == b"2\r\nx\n\r\n"
    cast(_Transport, protocol.transport).closing = True
    assert not stream.offer(b"x\n")
    with pytest.raises(ConnectionResetError):
        stream.write(b"x\n")
    protocol.transport = None  # the connection was lost
    assert not stream.offer(b"x\n")
    with pytest.raises(ConnectionResetError):
        stream.write(b"x\n")
    loop.close()
