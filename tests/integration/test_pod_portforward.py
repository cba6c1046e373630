"""``kubectl port-forward`` with the real kubectl, through the API server (a WebSocket
carrying a SPDY session, ``SPDY/3.1+portforward.k8s.io``; or the request itself upgraded to
SPDY, as older kubectls ask), and the official Python client's ``portforward``
(``v4.channel.k8s.io``): the bytes both ways, many connections at once, a port nothing
listens on, who may. And the port-forward endpoint of a process runtime's node agent
(kubelet's /portForward) that the API server relays to, called as it calls it: one TCP
connection to a port of the pod (a small echo server on the pod's localhost), bytes both
ways, either side's close ending it; a refused port, a bad port and a pod not there are
refused in kubelet's words; no answer without its token."""

from __future__ import annotations

import concurrent.futures
import hashlib
import http.client
import os
import select
import socket
import ssl
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.stream import portforward

from shared.api.podlog import Endpoint
from shared.model import meta
from shared.store import nodeserver
from shared.store.server import free_port
from tests.integration.apiserver_kit import ApiServer
from tests.integration.controller_kit import daemonset as daemonset_of
from tests.integration.stack import wait_for
from tests.integration.test_node_agent_process import Machine, machine
from tests.integration.test_pod_logs import agent_pod, refuses_without_its_token, running_pod

__all__ = ["machine"]  # the fixture, shared with the process runtime's tests

# (the docker runtime's test runs it too) an echo server on ``bind``:``port``: it greets
# each connection with its number, echoes what it is sent, closes the connection itself
# after "bye\n", and marks a connection its caller closed (eof.N) or reset (reset.N)
ECHO = '''
import itertools, os, socket, sys, threading
port, marks, bind = int(sys.argv[1]), sys.argv[2], sys.argv[3]

def mark(what):
    open(os.path.join(marks, what), "w").close()

def echo(conn, n):
    try:
        conn.sendall(f"hello {n}\\n".encode())
        tail = b""
        while data := conn.recv(65536):
            conn.sendall(data)
            tail = (tail + data)[-4:]
            if tail == b"bye\\n":
                conn.close()
                return
    except OSError:
        mark(f"reset.{n}")
        return
    conn.close()
    mark(f"eof.{n}")

server = socket.create_server((bind, port))
mark("listening")
for n in itertools.count(1):
    conn, _ = server.accept()
    threading.Thread(target=echo, args=(conn, n), daemon=True).start()
'''


def daemonset(m: Machine, port: int) -> dict[str, Any]:
    (m.dir / "echo.py").write_text(ECHO)
    (m.dir / "echo.py").chmod(0o644)
    return daemonset_of("echo", pod={
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "app", "image": "python:3", "command": [
            "python3", str(m.dir / "echo.py"), str(port), str(m.dir / "marks"),
            "127.0.0.1"]}]})


def post(ep: Endpoint, path: str) -> tuple[int, ssl.SSLSocket, bytes]:
    """``POST path`` to the agent's endpoint as the API server does (its certificate pinned,
    its token): the answer's code, the connection, what came after the answer's head."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    conn = ctx.wrap_socket(socket.create_connection((ep.host, ep.port), timeout=30))
    assert hashlib.sha256(conn.getpeercert(binary_form=True) or b"").hexdigest() == ep.sha256
    conn.sendall(f"POST {path} HTTP/1.0\r\nAuthorization: Bearer {ep.token}\r\n\r\n".encode())
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = conn.recv(65536)
        assert chunk, f"the endpoint ended before its answer's head: {got!r}"
        got += chunk
    head, rest = got.split(b"\r\n\r\n", 1)
    return int(head.split(b" ", 2)[1]), conn, rest


def refused(ep: Endpoint, path: str) -> tuple[int, str]:
    """The endpoint's answer to ``path``: its code and body."""
    code, conn, body = post(ep, path)
    with conn:
        while chunk := conn.recv(65536):
            body += chunk
    return code, body.decode()


def read_some(conn: ssl.SSLSocket, got: bytes, size: int) -> bytes:
    """``got`` and what ``conn`` carries next, ``size`` bytes in all (its 30 s timeout: a
    failure, not a hang)."""
    while len(got) < size:
        chunk = conn.recv(65536)
        assert chunk, f"the connection ended after {len(got)} of {size} bytes"
        got += chunk
    return got


def read_to_end(conn: ssl.SSLSocket) -> bytes:
    got = b""
    try:
        while chunk := conn.recv(65536):
            got += chunk
    except ssl.SSLError:
        pass  # (the agent hangs up without TLS's goodbye)
    return got


def forwards_both_ways(ep: Endpoint, marks: Path, name: str, uid: str, port: int) -> None:
    """A forwarded connection carries bytes both ways; the caller's close reaches the pod,
    the pod's the caller."""
    path = f"/portforward/default/{name}?uid={uid}&port={port}"
    code, conn, got = post(ep, path)
    assert code == 200
    with conn:
        assert read_some(conn, got, 8) == b"hello 1\n"
        for _ in range(16):  # (one thread: a TLS connection is not for two at once)
            chunk = os.urandom(1 << 16).replace(b"\n", b" ")  # (no "bye\n")
            conn.sendall(chunk)
            assert read_some(conn, b"", len(chunk)) == chunk
    wait_for(lambda: (marks / "eof.1").exists(), what="the pod seeing its caller's close")

    code, conn, got = post(ep, path)
    assert code == 200
    with conn:
        conn.sendall(b"bye\n")
        assert got + read_to_end(conn) == b"hello 2\nbye\n"  # the pod's close ends it


def test_port_forward_relays_one_connection_to_the_pods_port(machine: Machine) -> None:
    port = free_port()
    node, pod = agent_pod(machine, daemonset(machine, port))
    wait_for(lambda: (machine.dir / "marks" / "listening").exists(), what="the echo server")
    ep = nodeserver.endpoint(machine.stack.store, node, "port-forward")
    forwards_both_ways(ep, machine.dir / "marks", meta.name(pod), meta.uid(pod), port)


def test_port_forward_refusals(machine: Machine) -> None:
    port = free_port()
    node, pod = agent_pod(machine, daemonset(machine, port))
    name, uid = meta.name(pod), meta.uid(pod)
    ep = nodeserver.endpoint(machine.stack.store, node, "port-forward")
    closed = free_port()
    assert refused(ep, f"/portforward/default/{name}?uid={uid}&port={closed}") == (
        400, f"error forwarding port {closed} to pod {name}, uid {uid}: dial tcp "
             f"127.0.0.1:{closed}: connect: connection refused")
    for bad, words in (
            ("0", 'port "0" must be > 0'),
            ("abc", 'unable to parse "abc" as a port: strconv.ParseUint: parsing "abc": '
                    'invalid syntax'),
            ("70000", 'unable to parse "70000" as a port: strconv.ParseUint: parsing '
                      '"70000": value out of range'),
            ("", 'unable to parse "" as a port: strconv.ParseUint: parsing "": invalid syntax')):
        assert refused(ep, f"/portforward/default/{name}?uid={uid}&port={bad}") == (400, words)
    assert refused(ep, f"/portforward/default/{name}?uid=not-here&port={port}") == (
        400, f'pod not found ("{name}_default")')
    assert refused(ep, f"/portforward/default/{name}/app?uid={uid}&port={port}") == (
        404, "not found")
    refuses_without_its_token(f"{ep.base}/portforward/default/{name}?uid={uid}&port={port}",
                              "POST")


# ---- through the API server: the real kubectl and the official Python client ------------

BIG = 3 * 1024 * 1024 + 17  # bytes of a file served through many frames


def web_daemonset(m: Machine, port: int) -> dict[str, Any]:
    """A web server on the pod's localhost (the directory in its words: the fixture's mark
    of what is ours)."""
    return daemonset_of("web", pod={
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "app", "image": "python:3",
                        "command": ["python3", "-m", "http.server", str(port),
                                    "--bind", "127.0.0.1", "--directory", str(m.dir)],
                        "ports": [{"containerPort": port}]}]})


class Forwarding:
    """``kubectl port-forward`` running, its local port ready."""

    def __init__(self, api: ApiServer, target: str, remote: int, user: str = "admin",
                 more_env: dict[str, str] | None = None) -> None:
        self.local = free_port()
        self.proc = api.popen("port-forward", target, f"{self.local}:{remote}", user=user,
                              env=more_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
        self.out = ""

    def ready(self, timeout: float = 30) -> None:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while f"Forwarding from 127.0.0.1:{self.local}" not in self.out:
            left = deadline - time.monotonic()
            assert left > 0 and self.proc.poll() is None, (self.out, self.stop())
            if select.select([self.proc.stdout], [], [], left)[0]:
                self.out += self.proc.stdout.readline()

    def get(self, path: str) -> bytes:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.local}{path}", timeout=30) as r:
            return bytes(r.read())

    def stop(self) -> str:
        """Its stderr, once it has been stopped."""
        if self.proc.poll() is None:
            self.proc.terminate()
        _, err = self.proc.communicate(timeout=30)
        return err


def test_kubectl_port_forward_reaches_the_pods_port(machine: Machine, tmp_path: Path) -> None:
    port = free_port()
    (machine.dir / "hello.txt").write_text("hello from the pod\n")
    big = os.urandom(BIG)
    (machine.dir / "big.bin").write_bytes(big)
    for f in ("hello.txt", "big.bin"):
        (machine.dir / f).chmod(0o644)
    api, _node, pod = running_pod(machine, tmp_path, web_daemonset(machine, port))
    name = meta.name(pod)

    fwd = Forwarding(api, f"pod/{name}", port)
    try:
        fwd.ready()
        assert f"Forwarding from 127.0.0.1:{fwd.local} -> {port}" in fwd.out
        assert fwd.get("/hello.txt") == b"hello from the pod\n"
        assert fwd.get("/big.bin") == big  # many frames, both legs
        with concurrent.futures.ThreadPoolExecutor(8) as pool:  # connections at once
            got = list(pool.map(lambda _i: fwd.get("/hello.txt"), range(16)))
        assert got == [b"hello from the pod\n"] * 16
    finally:
        err = fwd.stop()
    assert "error" not in err.lower(), err

    # kubectl picks the DaemonSet's pod; a port nothing listens on is told per connection
    closed = free_port()
    fwd = Forwarding(api, "daemonset/web", closed)
    try:
        fwd.ready()
        try:
            fwd.get("/")
        except OSError:
            pass  # the connection ends with nothing sent back
        else:
            raise AssertionError("a port nothing listens on answered")
    finally:
        err = fwd.stop()
    assert f"error forwarding port {closed} to pod" in err, err
    assert "connection refused" in err, err

    # as kubectl before 1.31 asks: the request itself upgraded to SPDY/3.1
    fwd = Forwarding(api, f"pod/{name}", port,
                     more_env={"KUBECTL_PORT_FORWARD_WEBSOCKETS": "false"})
    try:
        fwd.ready()
        assert fwd.get("/hello.txt") == b"hello from the pod\n"
        assert fwd.get("/big.bin") == big
    finally:
        fwd.stop()
    # an upgrade naming no protocol served is refused in upstream's words
    conn = http.client.HTTPSConnection("127.0.0.1", api.port,
                                       context=ssl._create_unverified_context())
    conn.request("POST", f"/api/v1/namespaces/default/pods/{name}/portforward", headers={
        "Authorization": f"Bearer {api.tokens['admin']}", "Connection": "Upgrade",
        "Upgrade": "SPDY/3.1", "X-Stream-Protocol-Version": "portforward.k8s.io.v9"})
    answer = conn.getresponse()
    assert answer.status == 403
    assert ("unable to upgrade: unable to negotiate protocol: client supports "
            "[portforward.k8s.io.v9], server supports [portforward.k8s.io]") in \
        answer.read().decode()

    # edit may forward, view may not
    fwd = Forwarding(api, f"pod/{name}", port, user="editor")
    try:
        fwd.ready()
        assert fwd.get("/hello.txt") == b"hello from the pod\n"
    finally:
        fwd.stop()
    refused = api.kubectl("port-forward", f"pod/{name}", f"{free_port()}:{port}",
                          user="viewer", check=False, timeout=30)
    assert refused.returncode != 0
    assert (f'pods "{name}" is forbidden: User "viewer" cannot create resource '
            '"pods/portforward" in API group "" in the namespace "default"') in refused.stderr

    # the official Python client: one connection per port, for the WebSocket's life
    api_client = config.new_client_from_config(config_file=str(api.kubeconfig()))
    core = client.CoreV1Api(api_client)
    pf = portforward(core.connect_get_namespaced_pod_portforward, name, "default",
                     ports=f"{port},{closed}")
    sock = pf.socket(port)
    sock.setblocking(True)
    sock.sendall(b"GET /hello.txt HTTP/1.0\r\n\r\n")
    answer = b""
    while chunk := sock.recv(65536):
        answer += chunk
    assert answer.startswith(b"HTTP/1.0 200") and answer.endswith(b"hello from the pod\n")
    assert pf.error(port) is None
    assert f"error forwarding port {closed} to pod" in (pf.error(closed) or "")
    pf.close()


def test_a_killed_kubectl_port_forward_ends_the_pods_connections(machine: Machine,
                                                                 tmp_path: Path) -> None:
    """The caller gone without a word (kubectl killed, its connections to the API server
    dropped by the kernel): the connections it forwarded end at the pod too, one that only
    waits for data and one whose caller had more to send than the pod read."""
    port = free_port()
    api, _node, pod = running_pod(machine, tmp_path, daemonset(machine, port))
    marks = machine.dir / "marks"
    wait_for(lambda: (marks / "listening").exists(), what="the echo server")
    fwd = Forwarding(api, f"pod/{meta.name(pod)}", port)
    try:
        fwd.ready()
        idle = socket.create_connection(("127.0.0.1", fwd.local), timeout=30)
        assert idle.recv(64) == b"hello 1\n"
        busy = socket.create_connection(("127.0.0.1", fwd.local), timeout=30)
        assert busy.recv(64) == b"hello 2\n"
        busy.setblocking(False)
        try:  # more than the pod echoes back while nothing reads its echo here
            for _ in range(256):
                busy.send(os.urandom(1 << 16))
        except BlockingIOError:
            pass
        fwd.proc.kill()
        fwd.proc.wait(timeout=30)
        wait_for(lambda: all((marks / f"eof.{n}").exists() or (marks / f"reset.{n}").exists()
                             for n in (1, 2)),
                 timeout=30, what="the pod seeing both connections end")
    finally:
        fwd.stop()
        for s in ("idle", "busy"):
            if s in locals():
                locals()[s].close()
