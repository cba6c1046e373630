"""The node agent's exec endpoint (``logserver``, ``relay``) over real TLS, with stand-in
sessions: each caller's connection is read and written by one thread (OpenSSL's objects are
not for two at once); input and output moving both ways at once arrive whole and in order,
the Status last, the input that came with the request's head first; a caller that reads
nothing holds the session's output up within bounded buffers."""

from __future__ import annotations

import asyncio
import hashlib
import os
import queue
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from services.node_agent import logserver
from services.node_agent.podstatus import ContainerState
from services.node_agent.runtime import ExecSession, Runtime
from shared.api import podexec

CHUNK = 1 << 16
SUCCESS = podexec.status_data(podexec.ended(("cat",), 0))


class _Cat:
    """A stand-in ``cat`` (``ExecSession``): its input back as its output, until its input
    ends or it is killed."""

    def __init__(self) -> None:
        self.input: queue.Queue[bytes | None] = queue.Queue()

    def pump(self, send: Callable[[int, bytes], None]) -> None:
        while (data := self.input.get()) is not None:
            send(podexec.STDOUT, data)

    def write_stdin(self, data: bytes) -> None:
        self.input.put(data)

    def close_stdin(self) -> None:
        self.input.put(None)

    def resize(self, width: int, height: int) -> None:
        pass

    def wait(self) -> int:
        return 0

    def kill(self) -> None:
        self.input.put(None)


class _Flood(_Cat):
    """A session whose output is ``frames`` chunks of CHUNK bytes (chunk i: the byte i % 256
    throughout), ``sent`` counting those taken."""

    def __init__(self, frames: int) -> None:
        super().__init__()
        self.frames, self.sent = frames, 0

    def pump(self, send: Callable[[int, bytes], None]) -> None:
        for i in range(self.frames):
            send(podexec.STDOUT, bytes([i % 256]) * CHUNK)
            self.sent += 1


Serve = Callable[[Callable[[], ExecSession]], tuple[logserver.LogServer, list[Any]]]


@pytest.fixture
def serving(tmp_path: Path) -> Iterator[Serve]:
    """An endpoint whose sessions ``make`` makes, and its callers' connections as they are
    made, each with the threads that read or wrote it (``touched``)."""
    servers: list[logserver.LogServer] = []

    def serve(make: Callable[[], ExecSession]) -> tuple[logserver.LogServer, list[Any]]:
        running = ContainerState("app", pid=os.getpid(), container_id="process://1")
        rt = type("Runtime", (), {"exec": lambda *_: make()})()
        server = logserver.LogServer(cast(Runtime, rt), tmp_path / str(len(servers)),
                                     "127.0.0.1", 0, lambda *_: (running, {}, ""))
        made: list[Any] = []

        class Recorded(ssl.SSLSocket):
            def note(self) -> None:
                if not hasattr(self, "touched"):
                    self.touched: set[int] = set()
                    made.append(self)
                self.touched.add(threading.get_ident())

        for name in ("recv", "recv_into", "send", "sendall", "read", "write"):
            def noted(self: Recorded, *args: Any, _name: str = name, **kw: Any) -> Any:
                self.note()
                return getattr(ssl.SSLSocket, _name)(self, *args, **kw)
            setattr(Recorded, name, noted)
        server.httpd.ctx.sslsocket_class = Recorded
        server.start()
        servers.append(server)
        return server, made

    yield serve
    for server in servers:
        server.close()


async def _open(server: logserver.LogServer, first: bytes = b"",
                ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """An exec session of ``cat`` on ``server``, ``first`` sent with the request's head."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=ctx)
    writer.write(f"POST /exec/default/p/app?uid=u&command=cat&stdin=1&stdout=1 HTTP/1.0\r\n"
                 f"Authorization: Bearer {server.credentials.token}\r\n\r\n".encode() + first)
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200 "), head
    return reader, writer


async def _frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    channel, size = podexec.frame_header(await reader.readexactly(podexec.HEADER_SIZE))
    return channel, await reader.readexactly(size)


def test_exec_moves_both_ways_at_once_on_one_thread_per_connection(serving: Serve) -> None:
    server, made = serving(_Cat)

    async def session() -> tuple[bool, bytes]:
        first, data = b"first words", os.urandom(8 << 20)
        reader, writer = await _open(server, podexec.frame(podexec.STDIN, first))

        async def feed() -> None:
            for at in range(0, len(data), CHUNK):
                writer.write(podexec.frame(podexec.STDIN, data[at:at + CHUNK]))
                await writer.drain()
            writer.write(podexec.frame(podexec.CLOSE, bytes([podexec.STDIN])))
            await writer.drain()

        feeding = asyncio.ensure_future(feed())
        got = hashlib.sha256()
        channel, out = await _frame(reader)
        while channel == podexec.STDOUT:
            got.update(out)
            channel, out = await _frame(reader)
        await feeding
        writer.close()
        return got.digest() == hashlib.sha256(first + data).digest(), out

    async def sessions() -> list[tuple[bool, bytes]]:
        return await asyncio.wait_for(asyncio.gather(*(session() for _ in range(4))), 60)

    assert asyncio.run(sessions()) == [(True, SUCCESS)] * 4
    assert len(made) == 4
    assert [len(conn.touched) for conn in made] == [1] * 4


def _settled(count: Callable[[], int], timeout: float = 30) -> int:
    """``count()`` once it has stayed the same for half a second."""
    deadline = time.monotonic() + timeout
    last, since = count(), time.monotonic()
    while time.monotonic() - since < 0.5:
        assert time.monotonic() < deadline, f"still moving after {timeout} s: {last}"
        time.sleep(0.05)
        if (now := count()) != last:
            last, since = now, time.monotonic()
    return last


def test_a_caller_reading_nothing_holds_the_output_up(serving: Serve) -> None:
    flood = _Flood(1024)  # 64 MB
    server, _ = serving(lambda: flood)

    async def scenario() -> tuple[int, list[int], bytes]:
        reader, writer = await _open(server)
        held = await asyncio.to_thread(_settled, lambda: flood.sent)
        seen: list[int] = []
        channel, out = await _frame(reader)
        while channel == podexec.STDOUT:
            assert out == out[:1] * CHUNK
            seen.append(out[0])
            channel, out = await _frame(reader)
        writer.close()
        return held, seen, out

    held, seen, status = asyncio.run(scenario())
    assert 0 < held < 256, held  # (16 MB: the pair's buffers, the relay's, the kernel's)
    assert seen == [i % 256 for i in range(1024)]
    assert status == SUCCESS
