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
# runs an exec probe's command within a timeout: True when it exited 0
ExecProbe = Callable[[list[str], float], bool]


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


def run(probe: Obj, container: Obj, pod_ip: str, exec_probe: ExecProbe) -> bool:
    """Acts: run one probe; True for success. A probe that errs or times out failed."""
    timeout = float(probe.get("timeoutSeconds") or 1)
    try:
        if "exec" in probe:
            words = [str(w) for w in (probe["exec"] or {}).get("command") or []]
            return exec_probe(words, timeout)
        if "httpGet" in probe:
            h = probe["httpGet"] or {}
            host = str(h.get("host") or pod_ip)
            port = _port(h.get("port"), container)
            conn: http.client.HTTPConnection
            if str(h.get("scheme") or "HTTP").upper() == "HTTPS":
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
                conn.request("GET", str(h.get("path") or "/"), headers=headers)
                code = conn.getresponse().status
            finally:
                conn.close()
            return 200 <= code < 400
        if "tcpSocket" in probe:
            t = probe["tcpSocket"] or {}
            host = str(t.get("host") or pod_ip)
            with socket.create_connection((host, _port(t.get("port"), container)),
                                          timeout=timeout):
                return True
    except (OSError, ValueError, http.client.HTTPException):
        return False
    return False


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
    pending: Future[bool] | None = None  # a run of the probe not finished yet

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
