"""Container probes as kubelet runs them: exec (by the runtime, as the container would run
it: its environment, working directory and user), httpGet and tcpSocket, each within
timeoutSeconds (acts); and the thresholds that turn results into ready / alive
(``ProbeTracker``, pure)."""

from __future__ import annotations

import http.client
import socket
import ssl
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]
# runs an exec probe's command within a timeout: whether it exited 0, and its output
ExecProbe = Callable[[list[str], float], tuple[bool, str]]
EXEC_OUTPUT_MAX = 10 * 1024  # of an exec probe's output, what kubelet's prober keeps


def _port(value: Any, container: Obj) -> int:
    """A probe port: a number, or the name of one of the container's ports."""
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    for p in container.get("ports") or []:
        if p.get("name") == value:
            return int(p.get("containerPort") or 0)
    raise ValueError(f"port {value!r} not found")


def timed_out(words: list[str]) -> str:
    """An exec probe that outlasted its timeout, in kubelet's words."""
    return f'command "{" ".join(words)}" timed out'


def dial_error(host: str, port: int, err: OSError) -> str:
    """A failed connection in Go's words, as kubelet's probes report it: ``dial tcp
    10.0.0.7:8080: connect: connection refused``, ``... i/o timeout``."""
    if isinstance(err, TimeoutError):
        why = "i/o timeout"
    elif err.strerror:
        why = f"connect: {err.strerror.lower()}"
    else:
        why = str(err) or type(err).__name__
    return f"dial tcp {host}:{port}: {why}"


def run(probe: Obj, container: Obj, pod_ip: str, exec_probe: ExecProbe) -> tuple[bool, str]:
    """Acts: run one probe: whether it succeeded, and what kubelet's prober says of a
    failure (its Unhealthy event's text): an exec probe's output, an HTTP status or the
    error of the connection. A probe that errs or times out failed."""
    timeout = float(probe.get("timeoutSeconds") or 1)
    try:
        if "exec" in probe:
            words = [str(w) for w in (probe["exec"] or {}).get("command") or []]
            return exec_probe(words, timeout)
        if "httpGet" in probe:
            return _http(probe["httpGet"] or {}, container, pod_ip, timeout)
        if "tcpSocket" in probe:
            t = probe["tcpSocket"] or {}
            host = str(t.get("host") or pod_ip)
            port = _port(t.get("port"), container)
            try:
                with socket.create_connection((host, port), timeout=timeout):
                    return True, ""
            except OSError as err:
                return False, dial_error(host, port, err)
    except ValueError as err:
        return False, str(err)
    return False, "the probe names no action (exec, httpGet or tcpSocket)"


def _http(h: Obj, container: Obj, pod_ip: str, timeout: float) -> tuple[bool, str]:
    host = str(h.get("host") or pod_ip)
    port = _port(h.get("port"), container)
    scheme = str(h.get("scheme") or "HTTP").lower()
    url = f"{scheme}://{host}:{port}{h.get('path') or '/'}"
    conn: http.client.HTTPConnection
    if scheme == "https":
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # kubelet does not verify probe certificates
        conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=ctx)
    else:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        headers = {"User-Agent": "kube-probe/1.30"}
        headers.update({str(x.get("name")): str(x.get("value"))
                        for x in h.get("httpHeaders") or []})
        try:
            conn.connect()
        except TimeoutError:
            raise
        except OSError as err:
            return False, f'Get "{url}": {dial_error(host, port, err)}'
        conn.request("GET", str(h.get("path") or "/"), headers=headers)
        code = conn.getresponse().status
    except TimeoutError:
        return False, (f'Get "{url}": context deadline exceeded (Client.Timeout exceeded '
                       "while awaiting headers)")
    except (OSError, http.client.HTTPException) as err:
        return False, f'Get "{url}": {err}'
    finally:
        conn.close()
    if 200 <= code < 400:
        return True, ""
    return False, f"HTTP probe failed with statuscode: {code}"


@dataclass
class ProbeTracker:
    """One probe of one running container: when it is due, and its verdict after
    successThreshold successes / failureThreshold failures in a row (decides)."""

    probe: Obj
    started_at: float
    ok: bool  # the verdict before any result: readiness starts False, liveness True
    next_at: float = 0.0
    successes: int = 0
    failures: int = 0
    pending: Future[tuple[bool, str]] | None = None  # a run of the probe not finished yet

    def __post_init__(self) -> None:
        self.next_at = self.started_at + float(self.probe.get("initialDelaySeconds") or 0)

    def due(self, now: float) -> bool:
        return now >= self.next_at

    def record(self, success: bool, now: float) -> bool:
        """Take one result; returns the verdict."""
        self.next_at = now + float(self.probe.get("periodSeconds") or 10)
        if success:
            self.successes, self.failures = self.successes + 1, 0
            if self.successes >= int(self.probe.get("successThreshold") or 1):
                self.ok = True
        else:
            self.failures, self.successes = self.failures + 1, 0
            if self.failures >= int(self.probe.get("failureThreshold") or 3):
                self.ok = False
        return self.ok
