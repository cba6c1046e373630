"""The node agent's own HTTPS endpoint (kubelet's server on port 10250): it serves the logs of
the pods it runs, so they can be read from another machine (the API server proxies
``/api/v1/namespaces/{ns}/pods/{name}/log`` to it; ``daemonbus logs`` calls it too), and runs
commands in their containers (the API server relays ``.../pods/{name}/exec`` to it), and
connects callers to their ports (``.../pods/{name}/portforward``). Acts.

``GET /containerLogs/{namespace}/{pod}/{container}?uid=U&run=N`` with ``tailLines``,
``limitBytes``, ``follow``, ``previous``, ``timestamps``, ``sinceSeconds`` and ``sinceTime``:
the output of run N of that container, from the agent's runtime (``Runtime.logs``: the
process runtime's log file of the run, the docker runtime's engine log of the run's
container). Which run to read is the caller's decision, from the pod's status
(``shared.api.podlog.pick_run``); this endpoint only serves what the runtime keeps: options
its runtime cannot serve are a 400 in its words.

It listens on the node's IP (``--log-port``, 10250 by default; 0 picks a free one), with TLS
always: its certificate is self-signed, made at each start, and its SHA-256 is published with
a bearer token made at each start (``shared.store.nodeserver``), outside the log, where only
this node's agent may write; callers pin the certificate and send the token. The port is in
the Node's ``status.daemonEndpoints.kubeletEndpoint.Port``, as kubelet reports it.

``POST /exec/{namespace}/{pod}/{container}?uid=U&command=...`` with ``stdin``, ``stdout``,
``stderr``, ``tty``: the command in that running container (``Runtime.exec``). Once answered
200 the connection carries ``shared.api.podexec``'s frames both ways, and ends with the
Status of how the command ended. With ``check=1`` it answers as it would, and runs nothing.
The command is killed when the caller goes away or the container stops running. As a
port-forward's, the connection is read and written by one thread only (``relay.both_ways``).

``POST /attach/{namespace}/{pod}/{container}?uid=U&run=N`` with the same streams: exec's
session without a command, the output of run N from now on as its stdout, until the caller
goes or the container stops (kubelet's attach). The caller's input reaches a container that
keeps its input open (``stdin: true``: ``Runtime.attach``, the engine's attach for docker,
the run's named pipe for a process); elsewhere it is dropped.

``POST /portforward/{namespace}/{pod}?uid=U&port=P``: one TCP connection to port P of that
pod, where its runtime says it is reached (``Runtime.forward_host``: the loopback address for
a pod on the host's network, else the pod's IP). The connection is made before the answer, so
a refusal is a 400 in kubelet's words; once answered 200 the caller's connection carries the
port's bytes both ways, until either side closes it, which closes both. A bad port is a 400
in upstream's words.

``GET /metrics/usage``: the resource usage of the node and of its pods' running containers
over the sampler's last window (``usage.Sampler``; ``shared.api.metrics``'s document), as
kubelet's resource metrics that metrics-server scrapes; 503 until a window is over.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import hmac
import ipaddress
import logging
import re
import secrets
import socket
import ssl
import threading
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from services import common, config
from services.node_agent import relay
from services.node_agent.podstatus import ContainerState
from services.node_agent.runtime import ExecSession, FollowedAttach, Runtime
from shared.api import metrics, podexec, podlog, portforward
from shared.store.nodeserver import Credentials

log = logging.getLogger("node-agent")
DEFAULT_PORT = 10250
HANDSHAKE_TIMEOUT = 10.0
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_UID = re.compile(r"[A-Za-z0-9-]{1,64}")
WATCH_EVERY = 1.0  # seconds between looks at whether an exec's container still runs
CONNECT_TIMEOUT = 10.0  # seconds a forwarded port has to accept the connection
# what an exec runs in: the container's state, its environment, its working directory ("":
# the runtime's default); ExecError (the caller's words) when it does not run here
ExecTarget = Callable[[str, str], tuple[ContainerState, dict[str, str], str]]
# the usage document of the last window (``shared.api.metrics``): None before there is one
Usage = Callable[[], bytes | None]
# where a port of pod ``uid`` is reached: None when the pod does not run here, "" while
# nothing of it runs
ForwardHost = Callable[[str], str | None]


def _self_signed(directory: Path, ip: str) -> tuple[Path, Path, str]:
    """A fresh key and self-signed certificate for ``ip`` in ``directory`` (owner-only);
    returns their paths and the certificate's SHA-256 (hex, of its DER form)."""
    config.private_dir(directory)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "daemonbus-node-agent")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=365))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(
                ipaddress.ip_address(ip))]), critical=False)
            .sign(key, hashes.SHA256()))
    crt, key_path = directory / "server.crt", directory / "server.key"
    config.write_private(key_path, key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    config.write_private(crt, cert.public_bytes(serialization.Encoding.PEM))
    digest = hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest()
    return crt, key_path, digest


class _TLSServer(ThreadingHTTPServer):
    """TLS on each connection's own thread (a slow handshake holds up no other caller)."""

    ctx: ssl.SSLContext

    def finish_request(self, request: socket.socket,  # type: ignore[override]
                       client_address: tuple[str, int]) -> None:
        request.settimeout(HANDSHAKE_TIMEOUT)
        try:
            tls = self.ctx.wrap_socket(request, server_side=True)
        except (OSError, ssl.SSLError):
            return
        try:
            tls.settimeout(None)
            self.RequestHandlerClass(tls, client_address, self)  # type: ignore[arg-type]
        finally:
            tls.close()


class LogServer:
    """The endpoint, on a thread of its own (each request on its own thread)."""

    def __init__(self, rt: Runtime, state_dir: Path, ip: str, port: int,
                 exec_target: ExecTarget | None = None,
                 forward_host: ForwardHost | None = None,
                 usage: Usage | None = None) -> None:
        self.runtime = rt
        self.usage = usage
        self.exec_target = exec_target
        self.forward_host = forward_host
        crt, key, digest = _self_signed(state_dir / "server", ip)
        self.credentials = Credentials(secrets.token_urlsafe(32), digest)
        self.stop = threading.Event()
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(str(crt), str(key))
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # the body ends when the connection does

            def do_GET(self) -> None:
                if urllib.parse.urlsplit(self.path).path == metrics.PATH:
                    server.handle_usage(self)
                else:
                    server.handle(self)

            def do_POST(self) -> None:
                if self.path.startswith("/portforward/"):
                    server.handle_portforward(self)
                else:
                    server.handle_exec(self)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = _TLSServer((ip, port), Handler)
        self.httpd.ctx = ctx
        self.httpd.daemon_threads = True
        self.port = int(self.httpd.server_address[1])

    def start(self) -> None:
        threading.Thread(target=self.httpd.serve_forever, name="log-server",
                         daemon=True).start()
        log.info("serving container logs on port %d (TLS)", self.port)

    def close(self) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def _authorized(self, req: BaseHTTPRequestHandler) -> bool:
        auth = req.headers.get("Authorization") or ""
        if not hmac.compare_digest(auth.encode(), f"Bearer {self.credentials.token}".encode()):
            self._error(req, 401, "Unauthorized")
            return False
        return True

    def handle(self, req: BaseHTTPRequestHandler) -> None:
        if not self._authorized(req):
            return
        url = urllib.parse.urlsplit(req.path)
        parts = [urllib.parse.unquote(p) for p in url.path.split("/")[1:]]
        q = dict(urllib.parse.parse_qsl(url.query))
        if len(parts) != 4 or parts[0] != "containerLogs" or \
                not all(_NAME.fullmatch(p) for p in parts[1:]) or \
                not _UID.fullmatch(q.get("uid", "")) or not q.get("run", "").isdigit():
            self._error(req, 404, "not found")
            return
        _, ns, name, container = parts
        try:
            opts = podlog.options(q)
        except podlog.LogError as err:
            self._error(req, 400, str(err))
            return
        pod = {"metadata": {"namespace": ns, "name": name, "uid": q["uid"]}}
        run = int(q["run"])
        try:
            chunks = self.runtime.logs(pod, container, run, opts, self.stop)
            first = next(chunks, b"")
        except podlog.LogError as err:
            self._error(req, 400, str(err))
            return
        except OSError:
            self._error(req, 404, f'no log of run {run} of container "{container}" in pod '
                                  f'"{name}" on this node')
            return
        req.send_response(200)
        req.send_header("Content-Type", "text/plain")
        req.end_headers()
        try:
            req.wfile.write(first)
            req.wfile.flush()
            for chunk in chunks:
                req.wfile.write(chunk)
                req.wfile.flush()
        except OSError:
            return  # the caller went away

    def handle_usage(self, req: BaseHTTPRequestHandler) -> None:
        """Acts: the usage document of the last window; 503 before there is one."""
        if not self._authorized(req):
            return
        doc = self.usage() if self.usage is not None else None
        if doc is None:
            self._error(req, 503, "no resource metrics yet: the first window is not over")
            return
        req.send_response(200)
        req.send_header("Content-Type", "application/json")
        req.send_header("Content-Length", str(len(doc)))
        req.end_headers()
        req.wfile.write(doc)

    def handle_exec(self, req: BaseHTTPRequestHandler) -> None:
        if not self._authorized(req):
            return
        url = urllib.parse.urlsplit(req.path)
        parts = [urllib.parse.unquote(p) for p in url.path.split("/")[1:]]
        q = podexec.parse_query(url.query)
        uid = (q.get("uid") or [""])[-1]
        run = (q.get("run") or [""])[-1]
        attach = parts[:1] == ["attach"]
        if len(parts) != 4 or parts[0] not in ("exec", "attach") or self.exec_target is None \
                or not all(_NAME.fullmatch(p) for p in parts[1:]) or not _UID.fullmatch(uid) \
                or (attach and not run.isdigit()):
            self._error(req, 404, "not found")
            return
        container = parts[3]
        try:
            opts = podexec.attach_options(q) if attach else podexec.options(q)
            c, env, cwd = self.exec_target(uid, container)
        except podexec.ExecError as err:
            self._error(req, 400, str(err))
            return
        self._answer(req)
        if q.get("check") == ["1"]:
            return  # it could run: asked no more
        try:
            pod = {"metadata": {"namespace": parts[1], "name": parts[2], "uid": uid}}
            session: ExecSession = (self.runtime.attach(pod, c, int(run), opts) or
                                    FollowedAttach(self.runtime, pod, container, int(run),
                                                   opts)) \
                if attach else self.runtime.exec(c, env, cwd, opts)
        except (OSError, ValueError) as err:  # (ValueError: a word with a NUL byte)
            with contextlib.suppress(OSError):
                req.wfile.write(podexec.frame(podexec.ERROR, podexec.status_data(
                    podexec.failed(str(err)))))
            return
        log.info("%s pod %s/%s container %s%s", parts[0], parts[1], parts[2], container,
                 f": {' '.join(opts.command)}" if opts.command else "")
        self._serve_session(req, session, c, opts.command)

    def _serve_session(self, req: BaseHTTPRequestHandler, session: ExecSession,
                       c: ContainerState, command: tuple[str, ...]) -> None:
        """Acts: the session and its caller joined until the Status of its end has been
        sent, or the caller goes, which kills the command (as the container's stopping
        does, ``_watch_container``). This thread alone reads and writes the caller's
        connection (``relay.both_ways``); the session's threads meet it at the other end of
        a socket pair, whose buffers bound what waits for a slow caller: its output and the
        Status as frames (``_session_output``), the caller's frames (``_caller_input``, on a
        thread of its own: passing input on may wait on the command)."""
        done = threading.Event()
        ours, theirs = socket.socketpair()
        workers = [threading.Thread(target=target, args=args, daemon=True, name=name)
                   for target, args, name in (
                       (_session_output, (theirs, session, command, done), "exec-output"),
                       (_caller_input, (theirs, session, done), "exec-input"))]
        for t in workers:
            t.start()
        threading.Thread(target=self._watch_container, args=(c, c.container_id, session,
                         done, req.connection.fileno()), daemon=True,
                         name="exec-watch").start()
        try:
            relay.both_ways(req.connection, ours, req.rfile)
            if not done.is_set():
                session.kill()  # the caller went (its input may wait on a command's)
        finally:
            ours.close()  # (the session's threads blocked on the pair see it end)
            for t in workers:
                t.join()
            theirs.close()

    def _watch_container(self, c: ContainerState, started: str, session: ExecSession,
                         done: threading.Event, caller: int) -> None:
        """The container stopped (or was restarted): the command ends with it, as in a
        container's PID namespace. So does the caller's hanging up (``common.hung_up`` of
        its connection's ``caller``): the relay reads that only as the command takes its
        input, and a command that reads none would hold it up."""
        while not done.wait(WATCH_EVERY) and not self.stop.is_set():
            if c.container_id != started or not c.running() or common.hung_up(caller):
                session.kill()
                return
        if not done.is_set():
            session.kill()

    def handle_portforward(self, req: BaseHTTPRequestHandler) -> None:
        """Acts: connect the caller to the port it asks for of a pod that runs here, or say
        why not."""
        if not self._authorized(req):
            return
        url = urllib.parse.urlsplit(req.path)
        parts = [urllib.parse.unquote(p) for p in url.path.split("/")[1:]]
        q = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
        uid = q.get("uid", "")
        if len(parts) != 3 or parts[0] != "portforward" or self.forward_host is None or \
                not all(_NAME.fullmatch(p) for p in parts[1:]) or not _UID.fullmatch(uid):
            self._error(req, 404, "not found")
            return
        _, ns, name = parts
        try:
            port = portforward.parse_port(q.get("port", ""))
        except portforward.ForwardError as err:
            self._error(req, 400, str(err))
            return
        host = self.forward_host(uid)
        if host is None:
            self._error(req, 400, f'pod not found ("{name}_{ns}")')  # (kubelet's words)
            return
        if not host:
            self._error(req, 400, f'pod "{name}" has no running container')
            return
        try:
            pod = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT)
        except OSError as err:
            reason = (err.strerror or str(err) or "timed out").lower()
            self._error(req, 400, f"error forwarding port {port} to pod {name}, uid {uid}: "
                                  f"dial tcp {host}:{port}: connect: {reason}")
            return
        try:
            self._answer(req)
            log.info("port-forward to pod %s/%s port %d", ns, name, port)
            relay.both_ways(req.connection, pod, req.rfile)
        finally:
            pod.close()

    @staticmethod
    def _answer(req: BaseHTTPRequestHandler) -> None:
        req.send_response(200)
        req.send_header("Content-Type", "application/octet-stream")
        req.end_headers()
        req.wfile.flush()

    @staticmethod
    def _error(req: BaseHTTPRequestHandler, code: int, message: str) -> None:
        body = message.encode()
        req.send_response(code)
        req.send_header("Content-Type", "text/plain")
        req.send_header("Content-Length", str(len(body)))
        req.end_headers()
        req.wfile.write(body)


def _session_output(out: socket.socket, session: ExecSession, command: tuple[str, ...],
                    done: threading.Event) -> None:
    """Acts: the session's output, then the Status of how the command ended, as frames on
    ``out`` (each whole: the session may send from more than one thread), waiting while
    ``out`` is full; then ``out``'s end of writing, the relay's sign that all has been
    sent. ``done`` is set once the command has ended."""
    lock = threading.Lock()

    def send(channel: int, data: bytes) -> None:
        with lock:
            try:
                out.sendall(podexec.frame(channel, data))
            except OSError:
                pass  # the caller went away: the command is killed
    code = None
    try:
        session.pump(send)
        code = session.wait()
    finally:
        done.set()  # (before the Status: the caller may go once it has it)
        if code is not None:
            send(podexec.ERROR, podexec.status_data(podexec.ended(command, code)))
        with contextlib.suppress(OSError):
            out.shutdown(socket.SHUT_WR)


def _caller_input(source: socket.socket, session: ExecSession, done: threading.Event) -> None:
    """Acts: the caller's frames from ``source`` passed on to the command (its input, its
    input's end, its terminal's size); their end, or one that is not a frame: the command
    is killed unless it is done."""
    with source.makefile("rb") as frames:
        while True:
            try:
                got = podexec.read_frame(frames.read)
            except (OSError, ValueError, podexec.ExecError):
                got = None
            if got is None:
                if not done.is_set():
                    session.kill()
                return
            channel, data = got
            if channel == podexec.STDIN:
                session.write_stdin(data)
            elif channel == podexec.CLOSE and data[:1] == bytes([podexec.STDIN]):
                session.close_stdin()
            elif channel == podexec.RESIZE and (size := podexec.terminal_size(data)):
                session.resize(*size)
