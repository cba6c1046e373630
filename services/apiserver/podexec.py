"""``/api/v1/namespaces/{namespace}/pods/{name}/exec`` (``kubectl exec``, ``kubectl cp``) and
``.../attach`` (``kubectl attach``: the container's output from now on): the API server checks
the request (``shared.api.podexec``, upstream's texts) and asks the exec endpoint of the node
agent running the pod (``shared.store.nodeserver``: its address from the Node, its
certificate pinned, its token) whether it would run it; then it upgrades the caller's
request to a WebSocket (``v5.channel.k8s.io``, kubectl's; or ``v4.channel.k8s.io``, which
has no close of stdin), opens the session on the agent and relays the channels both ways
until the command's Status has come. A request upgraded to SPDY/3.1 (older kubectls:
``upgrade``) gets the same session as remotecommand v4's streams. The caller going away
closes the agent's connection, which ends the command. Acts.

Registered by ``app.make_app`` before the generic resource routes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable

from aiohttp import WSMsgType, web

from services import common
from services.apiserver import auth, podlog, upgrade
from services.apiserver import status as st
from shared.api import podexec as rules
from shared.api import spdy
from shared.api.podlog import LogError

log = logging.getLogger(__name__)
PATH = "/api/v1/namespaces/{namespace}/pods/{name}/exec"
ATTACH_PATH = "/api/v1/namespaces/{namespace}/pods/{name}/attach"
MAX_MESSAGE = rules.MAX_FRAME + 1
CALLER_CHECK = 1.0  # seconds between looks at whether a caller whose input waits is there
STREAMS_TIMEOUT = 30.0  # seconds a SPDY caller has to open its streams (kubelet's)


def handler(state: podlog.State, user_of: Callable[[web.Request], auth.User],
            subresource: str = "exec",
            ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """``pods/exec``, or ``pods/attach`` (the same session without a command: the agent
    follows the container's current run)."""
    attach = subresource == "attach"

    async def serve(request: web.Request) -> web.StreamResponse:
        user = user_of(request)
        # a WebSocket's GET asks for what a POST would: create (upstream's
        # AuthorizePodWebsocketUpgradeCreatePermission)
        ns, name = podlog.checked(request, state, user, ("GET", "POST"), "create", subresource)
        try:
            query = rules.parse_query(request.query_string)
            opts = rules.attach_options(query) if attach else rules.options(query)
        except rules.ExecError as err:
            raise st.bad_request(str(err)) from err
        pod = await podlog.read_pod(state, ns, name)
        try:
            container = rules.pick_container(pod, opts.container,
                                             "attach to" if attach else "exec into")
            path = rules.request_path(pod, container, opts)
            checking = rules.request_path(pod, container, opts, check=True)
        except (rules.ExecError, LogError) as err:  # (an attach's request_path: pick_run)
            raise st.bad_request(str(err)) from err
        ep = await podlog.node_endpoint(state, pod, "exec")
        what = "attaches to" if attach else f"runs {' '.join(opts.command)!r} in"
        if upgrade.wants_spdy(request):
            protocol = upgrade.choose(request, rules.SPDY_PROTOCOLS)
            if protocol is None:
                raise upgrade.not_negotiated(request, rules.SPDY_PROTOCOLS)
            reader, writer = await podlog.open_stream(ep, path, "exec")
            try:
                resp, pipe = await upgrade.accept_spdy(request, protocol)
                log.info("user %s %s pod %s/%s container %s over SPDY", user.name, what, ns,
                         name, container)
                await _SpdyExec(pipe, opts, reader, writer, request).run()
            finally:
                writer.close()
            return resp
        ws = web.WebSocketResponse(protocols=rules.PROTOCOLS, max_msg_size=MAX_MESSAGE)
        ready = ws.can_prepare(request)
        if not ready.ok or ready.protocol not in rules.PROTOCOLS:
            raise podlog.upgrade_required(rules.PROTOCOLS)
        # The agent's refusal, if it refuses, before the upgrade (asked to do nothing); the
        # session after it: client-go creates its streams once upgraded, and drops what
        # comes for a stream it has not made yet, as a command's first words may
        _, checked = await podlog.open_stream(ep, checking, "exec")
        checked.close()
        await ws.prepare(request)
        try:
            reader, writer = await podlog.open_stream(ep, path, "exec")
        except st.ApiError as err:
            await ws.send_bytes(bytes([rules.ERROR]) + rules.status_data(rules.failed(
                str(err))))
            await ws.close()
            return ws
        try:
            log.info("user %s %s pod %s/%s container %s", user.name, what, ns, name,
                     container)
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
        channel = None
        while channel != rules.ERROR:
            channel, data = await _agent_frame(reader)
            await ws.send_bytes(bytes([channel]) + data)
    except (ConnectionResetError, OSError):
        pass  # the caller went away
    finally:
        inbound.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await inbound
        await ws.close()


async def _agent_frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """The agent's next frame; once its leg has ended or broken, the Status saying so."""
    try:
        channel, size = rules.frame_header(await reader.readexactly(rules.HEADER_SIZE))
        return channel, await reader.readexactly(size)
    except (asyncio.IncompleteReadError, OSError, ssl.SSLError, rules.ExecError):
        return rules.ERROR, rules.status_data(rules.failed(
            "the node agent ended the session before the command's end"))


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
            if not await _drained(writer, request, ws.ping):
                break
    # the caller is gone (or closed): the agent's connection ends, and with it the command
    podlog.cut(writer)


async def _drained(writer: asyncio.StreamWriter, request: web.Request,
                   probe: Callable[[], Awaitable[object]]) -> bool:
    """Acts: wait while the agent takes the input (a command that reads none holds it up),
    as long as the caller is there; False once it is gone. Meanwhile the server reads none
    of the caller's input, and a caller that went while sending more cannot close its
    connection (its end waits to send what the server has not taken first): each
    ``CALLER_CHECK`` a ``probe`` (a ping) is sent it, which a connection its process has
    closed answers with a reset. A cancel (the session's end) always ends the wait: not so
    asyncio.wait_for on Python 3.11, which returns the drain's result when the cancel comes
    as the drain ends (the input's reader then read on, and its session never ended)."""
    drain = asyncio.ensure_future(writer.drain())
    try:
        while not (await asyncio.wait((drain,), timeout=CALLER_CHECK))[0]:
            transport = request.transport
            if transport is None or transport.is_closing():
                return False
            sock = transport.get_extra_info("socket")
            try:
                await probe()
            except (ConnectionError, OSError, RuntimeError):
                return False
            if sock is not None and common.hung_up(sock.fileno()):
                return False
        drain.result()  # (the agent's leg broken: its error)
        return True
    finally:
        drain.cancel()


class _SpdyExec:
    """A command's session over SPDY (remotecommand v4, kubelet's): the caller opens a
    stream for each of its streams (its ``streamtype`` header: error, stdin, stdout, stderr,
    resize for a terminal); once all have come, the agent's frames go to them, and the
    caller's stdin (its end closing the command's) and terminal sizes (JSON, one a line) to
    the agent. The Status ends the error stream, and then every stream."""

    def __init__(self, pipe: upgrade.Pipe, opts: rules.ExecOptions,
                 reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 request: web.Request) -> None:
        self.server, self.reader, self.writer, self.request = \
            upgrade.SpdyServer(pipe), reader, writer, request
        self.expected = {"error"} | {name for name, on in (
            ("stdin", opts.stdin), ("stdout", opts.stdout), ("stderr", opts.stderr),
            ("resize", opts.tty)) if on}
        self.streams: dict[str, int] = {}
        self.all_came = asyncio.Event()
        self.resize_text = b""
        self.pings = 0

    async def ping(self) -> None:
        """Acts: a PING of the server's own to the caller (``_drained``'s probe)."""
        self.pings += 1
        await self.server.send(spdy.server_ping(self.pings))

    async def run(self) -> None:
        inbound = asyncio.ensure_future(self.from_caller())
        try:
            waiting = asyncio.ensure_future(self.all_came.wait())
            await asyncio.wait((waiting, inbound), timeout=STREAMS_TIMEOUT,
                               return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            if self.all_came.is_set():
                await self.from_agent()
        finally:
            inbound.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await inbound
            await self.server.finish(*(self.streams.get(n, 0) for n in
                                       ("stdout", "stderr", "error")))

    async def from_agent(self) -> None:
        """Acts: the agent's frames to their streams, until the Status."""
        channels = {rules.STDOUT: "stdout", rules.STDERR: "stderr", rules.ERROR: "error"}
        while True:
            channel, data = await _agent_frame(self.reader)
            stream = self.streams.get(channels.get(channel, ""), 0)
            if stream and data:
                await self.server.send(spdy.data(stream, data))
            if channel == rules.ERROR:
                return

    async def from_caller(self) -> None:
        """Acts: the caller's streams answered; its stdin and sizes to the agent."""
        names: dict[int, str] = {}
        async for frame in self.server.frames():
            if frame.kind == spdy.SYN_STREAM:
                await self.server.reply(frame.stream)
                name = frame.headers.get("streamtype", "")
                if name in self.expected and name not in self.streams:
                    self.streams[name], names[frame.stream] = frame.stream, name
                    if set(self.streams) == self.expected:
                        self.all_came.set()
            elif frame.kind == spdy.DATA and names.get(frame.stream) == "stdin":
                if frame.data:
                    await self.to_agent(rules.STDIN, frame.data)
                if frame.fin:
                    await self.to_agent(rules.CLOSE, bytes([rules.STDIN]))
            elif frame.kind == spdy.DATA and names.get(frame.stream) == "resize":
                self.resize_text += frame.data
                *lines, self.resize_text = self.resize_text.split(b"\n")
                for line in lines:
                    if line.strip():
                        await self.to_agent(rules.RESIZE, line)
        podlog.cut(self.writer)  # the caller is gone: the command ends with it

    async def to_agent(self, channel: int, data: bytes) -> None:
        """Acts: a frame to the agent, waiting while it takes it as long as the caller is
        there (``_drained``, as the WebSocket's input): the caller gone, the agent's
        connection ends, and the command with it."""
        try:
            self.writer.write(rules.frame(channel, data))
            if not await _drained(self.writer, self.request, self.ping):
                podlog.cut(self.writer)
        except (OSError, ssl.SSLError, RuntimeError):
            pass  # the agent's leg broke: from_agent tells the caller
