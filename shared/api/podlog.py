"""Pod logs, the API's rules (pure): the ``PodLogOptions`` of a query, which container
(the API server's ``ValidateContainer``) and which run of it (kubelet's
``validateContainerLogStatus``, from the pod's status) a request reads, where the node agent
serving it listens (the Node's InternalIP and ``status.daemonEndpoints.kubeletEndpoint.Port``)
and the request for one run. Errors carry upstream's texts; each is a BadRequest to a caller.

Times of lines are nanoseconds since the epoch (the runtimes' own precision: the Docker
engine's, kubelet's ``time.Time``), printed as kubelet prints them with ``timestamps``
(``stamp``: RFC 3339 in UTC with nine digits of fraction, ``types.RFC3339NanoFixed``).

Shared by the API server (``services/apiserver/podlog.py``), the node agent's log endpoint
(``services/node_agent/logserver.py``) and ``daemonbus logs``.
"""

from __future__ import annotations

import ipaddress
import re
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.model import meta, podutil, syntax

Obj = dict[str, Any]


class LogError(Exception):
    """A request for logs that cannot be served (upstream answers 400 BadRequest)."""


@dataclass(frozen=True)
class LogOptions:
    container: str = ""
    follow: bool = False
    previous: bool = False
    tail_lines: int | None = None
    limit_bytes: int | None = None
    timestamps: bool = False
    since_seconds: int | None = None
    since_time: int | None = None  # nanoseconds since the epoch

    @property
    def timed(self) -> bool:
        """Do these options need the time of each line (``timestamps``, a since)?"""
        return self.timestamps or self.since_seconds is not None or self.since_time is not None


SECOND = 10**9


def parse_time(value: str) -> int:
    """An RFC 3339 time → nanoseconds since the epoch (to the microsecond). LogError in Go's
    words (``time.Parse(time.RFC3339, ...)``, how upstream decodes ``sinceTime``) when it is
    not one."""
    try:
        syntax.parse_rfc3339(value)
    except ValueError as err:
        raise LogError(str(err)) from None
    seconds = meta.parse_time(value)
    if seconds is None:
        raise LogError(f"sinceTime: {value!r} is not a time")
    return round(seconds * 1_000_000) * 1000


def stamp(ns: int) -> str:
    """Nanoseconds since the epoch as kubelet prefixes a line with ``timestamps``
    (``2026-12-07T03:21:02.123456789Z``)."""
    seconds, fraction = divmod(ns, SECOND)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{fraction:09d}Z"


# A line of the CRI log format (kubelet's logs.go, containerd's and CRI-O's writers): its
# time as ``stamp`` prints it, the stream, F for a line's end or P for a piece of a longer
# line, the text (a P line's newline is the file's, not the text's)
_CRI = re.compile(rb"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z) (stdout|stderr) ([FP]) (.*\n)",
                  re.S)
CRI_PIECE = 16 * 1024  # a line longer than this is written in P pieces, as containerd's


def cri_line(ns: int, stream: str, text: bytes) -> bytes:
    """One CRI log line of ``text`` (a whole line with its newline, else a piece of one)."""
    if text.endswith(b"\n"):
        return f"{stamp(ns)} {stream} F ".encode() + text
    return f"{stamp(ns)} {stream} P ".encode() + text + b"\n"


def is_cri(line: bytes) -> bool:
    """Does ``line`` (a file's first, perhaps not all of it yet) begin as a CRI line does?"""
    return _CRI.match(line + b"\n" if not line.endswith(b"\n") else line) is not None


def parse_cri(line: bytes) -> tuple[bytes, bytes] | None:
    """A CRI log line (with its newline) → its time as written (``stamp``'s form, which
    ``parse_time`` reads) and its text as the container wrote it (a piece without the
    newline the file added); None when it is not one."""
    m = _CRI.fullmatch(line)
    if m is None:
        return None
    return m[1], (m[4][:-1] if m[3] == b"P" else m[4])


def since(opts: LogOptions, now: int) -> int | None:
    """Decides: the time (ns) of the oldest line to show at ``now`` (ns), as kubelet's
    ``NewLogOptions``: ``now`` less ``sinceSeconds``, or ``sinceTime`` if that is later;
    None: every line. A line at that very time is shown."""
    oldest = None if opts.since_seconds is None else now - opts.since_seconds * SECOND
    if opts.since_time is not None and (oldest is None or opts.since_time > oldest):
        oldest = opts.since_time
    return oldest


def untimed(opts: LogOptions) -> LogError | None:
    """Decides: the refusal of options that need the time of each line, by a runtime that
    records none (None: these need none)."""
    if opts.timestamps:
        return LogError("timestamps are not recorded by this node agent's runtime")
    if opts.timed:
        return LogError("the time of each line is not recorded by this node agent's runtime: "
                        "sinceSeconds and sinceTime cannot be served")
    return None


def flag(name: str, raw: str | None) -> bool:
    """A query's boolean ``name`` given as ``raw`` (None: not given, false); LogError for a
    value other than true, false, 1, 0 or empty."""
    value = "false" if raw is None else raw.lower()
    if value not in ("true", "false", "1", "0", ""):
        raise LogError(f"{name}: invalid value {raw!r}, want true or false")
    return value in ("true", "1")


def _flag(q: Mapping[str, str], name: str) -> bool:
    return flag(name, q.get(name))


def _count(q: Mapping[str, str], name: str, least: int) -> int | None:
    if name not in q:
        return None
    try:
        value = int(q[name])
    except ValueError:
        raise LogError(f"{name}: invalid value {q[name]!r}, want an integer") from None
    if value < least:
        raise LogError(f"PodLogOptions \"\" is invalid: {name}: Invalid value: {value}: "
                       f"must be greater than {'or equal to ' if least == 0 else ''}0")
    return value


def options(q: Mapping[str, str]) -> LogOptions:
    """Decides: the ``PodLogOptions`` of a query (``container``, ``follow``, ``previous``,
    ``tailLines`` >= 0, ``limitBytes`` > 0, ``timestamps``, ``sinceSeconds`` > 0 or an RFC
    3339 ``sinceTime``, not both). Whether the runtime can serve them is the node agent's
    to say (``untimed``)."""
    since_seconds = _count(q, "sinceSeconds", 1)
    since_time = None
    if q.get("sinceTime"):
        if since_seconds is not None:
            raise LogError('PodLogOptions "" is invalid: []: Forbidden: at most one of '
                           "`sinceTime` or `sinceSeconds` may be specified")
        since_time = parse_time(q["sinceTime"])
    return LogOptions(container=q.get("container", ""), follow=_flag(q, "follow"),
                      previous=_flag(q, "previous"), tail_lines=_count(q, "tailLines", 0),
                      limit_bytes=_count(q, "limitBytes", 1), timestamps=_flag(q, "timestamps"),
                      since_seconds=since_seconds, since_time=since_time)


def container_names(pod: Obj) -> list[str]:
    """Init containers, containers, then ephemeral containers (``VisitContainers``'
    order)."""
    spec = pod.get("spec") or {}
    return [str(c.get("name")) for key in podutil.CONTAINER_LISTS for c in spec.get(key) or []]


def container_status(pod: Obj, name: str) -> Obj | None:
    """The status of the (init, ephemeral) container ``name`` of ``pod``, if it has one."""
    status = pod.get("status") or {}
    return next((c for key in podutil.STATUS_LISTS for c in status.get(key) or []
                 if c.get("name") == name), None)


def pick_container(pod: Obj, name: str) -> str:
    """Decides: the container to read (upstream's ``ValidateContainer``): the one named, else
    the pod's only container."""
    spec = pod.get("spec") or {}
    if not name:
        mains = spec.get("containers") or []
        if len(mains) == 1:
            return str(mains[0].get("name"))
        if not mains:
            raise LogError(f"a container name must be specified for pod {meta.name(pod)}")
        raise LogError(f"a container name must be specified for pod {meta.name(pod)}, "
                       f"choose one of: [{' '.join(container_names(pod))}]")
    if name not in container_names(pod):
        raise LogError(f"container {name} is not valid for pod {meta.name(pod)}")
    return name


def no_previous(container: str, pod_name: str) -> LogError:
    """Upstream's error for a previous run that is not there (kubelet's, and the runtime's
    when it keeps no such container)."""
    return LogError(f'previous terminated container "{container}" in pod "{pod_name}" not '
                    "found")


def pick_run(pod: Obj, container: str, previous: bool) -> int:
    """Decides: which run of ``container`` to read (its log file's number), from the pod's
    status as kubelet's ``validateContainerLogStatus`` does: the current (or last ended) run,
    or with ``previous`` the one before the current (the ended one while it waits to
    restart)."""
    if not (pod.get("spec") or {}).get("nodeName"):
        raise LogError(f"pod {meta.name(pod)} does not have a host assigned")
    cs = container_status(pod, container)
    pod_name = meta.name(pod)
    if cs is None:
        if previous:
            raise no_previous(container, pod_name)
        raise LogError(f'container "{container}" in pod "{pod_name}" is waiting to start - '
                       "no logs yet")
    run = int(cs.get("restartCount") or 0)
    state = cs.get("state") or {}
    last = (cs.get("lastState") or {}).get("terminated")
    if previous:
        if not last:
            raise no_previous(container, pod_name)
        return run if "waiting" in state else max(0, run - 1)
    if "running" in state or "terminated" in state or last:
        return run
    reason = str((state.get("waiting") or {}).get("reason") or "")
    if reason == "ErrImagePull":
        reason = "image can't be pulled"
    elif reason == "ImagePullBackOff":
        reason = "trying and failing to pull image"
    if reason:
        raise LogError(f'container "{container}" in pod "{pod_name}" is waiting to start: '
                       f"{reason}")
    raise LogError(f'container "{container}" in pod "{pod_name}" is waiting to start - no '
                   "logs yet")


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int
    token: str  # the bearer token its agent made
    sha256: str  # its certificate's digest (hex, of the DER form), to pin

    @property
    def base(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"https://{host}:{self.port}"


def endpoint_of(node: Obj, token: str, sha256: str, serves: str = "logs") -> Endpoint:
    """Decides: the endpoint of ``node``'s agent (its logs, its exec) from its status and the
    credentials the agent published ("" when none); LogError when it has none."""
    name = meta.name(node)
    status = node.get("status") or {}
    port = ((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port")
    ip = next((str(a.get("address")) for a in status.get("addresses") or []
               if isinstance(a, dict) and a.get("type") == "InternalIP"), "")
    try:
        ipaddress.ip_address(ip)
    except ValueError:
        raise LogError(f'node "{name}" has no InternalIP address') from None
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536 \
            or not token or not sha256:
        raise LogError(f'node "{name}" serves no {serves}: its agent publishes no endpoint')
    return Endpoint(ip, port, token, sha256)


def request_path(pod: Obj, container: str, run: int, opts: LogOptions) -> str:
    """The endpoint's path and query for run ``run`` of ``container`` of ``pod``."""
    given: dict[str, object] = {
        "follow": opts.follow or None, "previous": opts.previous or None,
        "tailLines": opts.tail_lines, "limitBytes": opts.limit_bytes,
        "timestamps": opts.timestamps or None, "sinceSeconds": opts.since_seconds,
        "sinceTime": None if opts.since_time is None else stamp(opts.since_time)}
    q = {"uid": meta.uid(pod), "run": str(run)} | {
        name: "true" if value is True else str(value)
        for name, value in given.items() if value is not None}
    parts = [urllib.parse.quote(p, safe="") for p in
             (meta.namespace(pod), meta.name(pod), container)]
    return f"/containerLogs/{'/'.join(parts)}?{urllib.parse.urlencode(q)}"
