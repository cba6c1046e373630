"""The node agent's own HTTPS endpoint (kubelet's server on port 10250): it serves the logs of
the pods it runs, so they can be read from another machine (the API server proxies
``/api/v1/namespaces/{ns}/pods/{name}/log`` to it; ``daemonbus logs`` calls it too). Acts.

``GET /containerLogs/{namespace}/{pod}/{container}?uid=U&run=N`` with ``tailLines``,
``limitBytes``, ``follow`` and ``previous``: the output of run N of that container, from the
agent's runtime (``Runtime.logs``: the process runtime's log file of the run, the docker
runtime's engine log of the run's container). Which run to read is the caller's decision,
from the pod's status (``shared.api.podlog.pick_run``); this endpoint only serves what the
runtime keeps.

It listens on the node's IP (``--log-port``, 10250 by default; 0 picks a free one), with TLS
always: its certificate is self-signed, made at each start, and its SHA-256 is published with
a bearer token made at each start (``shared.store.nodeserver``), outside the log, where only
this node's agent may write; callers pin the certificate and send the token. The port is in
the Node's ``status.daemonEndpoints.kubeletEndpoint.Port``, as kubelet reports it.
"""

from __future__ import annotations

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
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from services import config
from services.node_agent.runtime import Runtime
from shared.api import podlog
from shared.store.nodeserver import Credentials

log = logging.getLogger("node-agent")
DEFAULT_PORT = 10250
HANDSHAKE_TIMEOUT = 10.0
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_UID = re.compile(r"[A-Za-z0-9-]{1,64}")


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

    def __init__(self, rt: Runtime, state_dir: Path, ip: str, port: int) -> None:
        self.runtime = rt
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
                server.handle(self)

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

    def handle(self, req: BaseHTTPRequestHandler) -> None:
        auth = req.headers.get("Authorization") or ""
        if not hmac.compare_digest(auth.encode(), f"Bearer {self.credentials.token}".encode()):
            self._error(req, 401, "Unauthorized")
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

    @staticmethod
    def _error(req: BaseHTTPRequestHandler, code: int, message: str) -> None:
        body = message.encode()
        req.send_response(code)
        req.send_header("Content-Type", "text/plain")
        req.send_header("Content-Length", str(len(body)))
        req.end_headers()
        req.wfile.write(body)
