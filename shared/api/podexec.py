"""Commands run in a pod's container (``kubectl exec``) and a running container's output
followed (``kubectl attach``), the API's rules (pure): the ``PodExecOptions`` (and
``PodAttachOptions``) of a query, the container (``podlog.pick_container``, upstream's
``ValidateContainer``), the request to the node agent running it, the frames the API server
and the agent exchange, and the Status that ends a session (kubelet's, on the error channel).

The caller's leg is a WebSocket with upstream's ``v5.channel.k8s.io`` subprotocol (or
``v4.channel.k8s.io``, the same without closes): each message is one channel byte and its
data (0 stdin, 1 stdout, 2 stderr, 3 the ending Status, 4 a terminal's size as
``{"Width": W, "Height": H}``), and ``[255, channel]`` closes a channel (the caller's stdin
ends). The agent's leg carries the same channels over its TLS connection, each as a frame:
the channel byte, the data's length (4 bytes, big-endian), the data.

Shared by the API server (``services/apiserver/podexec.py``) and the node agent's endpoint
(``services/node_agent/logserver.py``).
"""

from __future__ import annotations

import json
import struct
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shared.api import podlog
from shared.model import meta

Obj = dict[str, Any]

PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")  # the first a caller offers wins
SPDY_PROTOCOLS = ("v4.channel.k8s.io",)  # of a SPDY upgrade (kubelet's remotecommand v4)
STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
MAX_FRAME = 1 << 20  # the most data one frame may carry
_HEADER = struct.Struct(">BI")


class ExecError(Exception):
    """A request to run a command that cannot be served (upstream answers 400 BadRequest)."""


@dataclass(frozen=True)
class ExecOptions:
    command: tuple[str, ...]
    container: str = ""
    stdin: bool = False
    stdout: bool = False
    stderr: bool = False
    tty: bool = False


def _flag(q: Mapping[str, Sequence[str]], name: str) -> bool:
    """The last value of ``name``, read as a log request's flags are."""
    values = q.get(name)
    try:
        return podlog.flag(name, values[-1] if values else None)
    except podlog.LogError as err:
        raise ExecError(str(err)) from None


def attach_options(q: Mapping[str, Sequence[str]]) -> ExecOptions:
    """Decides: the ``PodAttachOptions`` of a query: ``container``, ``stdin``, ``stdout``,
    ``stderr``, ``tty`` (no command), with exec's rules for the streams."""
    tty = _flag(q, "tty")
    opts = ExecOptions((), (q.get("container") or [""])[-1], _flag(q, "stdin"),
                       _flag(q, "stdout"), _flag(q, "stderr") and not tty, tty)
    if not (opts.stdin or opts.stdout or opts.stderr):
        raise ExecError("you must specify at least 1 of stdin, stdout, stderr")
    return opts


def options(q: Mapping[str, Sequence[str]]) -> ExecOptions:
    """Decides: the ``PodExecOptions`` of a query (each name with all its values, in order):
    ``command`` repeated, one word each; ``container``; ``stdin``, ``stdout``, ``stderr``,
    ``tty``. As kubelet: at least one stream, and a terminal carries stderr on stdout."""
    command = tuple(q.get("command") or ())
    if not command or not command[0]:
        raise ExecError("you must specify at least one command for the container")
    tty = _flag(q, "tty")
    opts = ExecOptions(command, (q.get("container") or [""])[-1], _flag(q, "stdin"),
                       _flag(q, "stdout"), _flag(q, "stderr") and not tty, tty)
    if not (opts.stdin or opts.stdout or opts.stderr):
        raise ExecError("you must specify at least 1 of stdin, stdout, stderr")
    return opts


def pick_container(pod: Obj, name: str, into: str = "exec into") -> str:
    """Decides: the container to run in or attach to (the one named, else the pod's only
    one), on the pod's node; ExecError otherwise, in upstream's words (``into``: the verb's,
    "exec into" or "attach to")."""
    try:
        container = podlog.pick_container(pod, name)
    except podlog.LogError as err:
        raise ExecError(str(err)) from None
    if not (pod.get("spec") or {}).get("nodeName"):
        raise ExecError(f"pod {meta.name(pod)} does not have a host assigned")
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        raise ExecError(f"cannot {into} a container in a completed pod; current phase is "
                        f"{phase}")
    return container


def request_path(pod: Obj, container: str, opts: ExecOptions, check: bool = False) -> str:
    """The node agent's path and query for ``opts`` in ``container`` of ``pod``: its command
    run, or without one (an attach) the current run followed (``podlog.pick_run``); with
    ``check`` the agent only says whether it could (and does nothing)."""
    q: list[tuple[str, str]] = [("uid", meta.uid(pod))] + ([("check", "1")] if check else [])
    if not opts.command:
        q.append(("run", str(podlog.pick_run(pod, container, False))))
    q += [("command", word) for word in opts.command]
    q += [(name, "1") for name, on in (("stdin", opts.stdin), ("stdout", opts.stdout),
                                      ("stderr", opts.stderr), ("tty", opts.tty)) if on]
    parts = [urllib.parse.quote(p, safe="") for p in
             (meta.namespace(pod), meta.name(pod), container)]
    return f"/{'exec' if opts.command else 'attach'}/{'/'.join(parts)}?" \
        f"{urllib.parse.urlencode(q)}"


def parse_query(query: str) -> dict[str, list[str]]:
    """A query's names with all their values, in order (as ``options`` takes them)."""
    return urllib.parse.parse_qs(query, keep_blank_values=True)


# ---- frames on the agent's leg ---------------------------------------------------------------

def frame(channel: int, data: bytes = b"") -> bytes:
    return _HEADER.pack(channel, len(data)) + data


HEADER_SIZE = _HEADER.size


def frame_header(head: bytes) -> tuple[int, int]:
    """A frame's channel and the length of its data, from its ``HEADER_SIZE`` first bytes;
    ExecError for a frame too large."""
    channel, size = _HEADER.unpack(head)
    if size > MAX_FRAME:
        raise ExecError(f"an exec frame of {size} bytes is larger than {MAX_FRAME}")
    return channel, size


def read_frame(read_exactly: Callable[[int], bytes]) -> tuple[int, bytes] | None:
    """The next frame from ``read_exactly`` (which returns fewer bytes only at the end);
    None at the end; ExecError for a frame that is cut short or too large."""
    head = read_exactly(HEADER_SIZE)
    if not head:
        return None
    if len(head) < HEADER_SIZE:
        raise ExecError("the exec stream ended inside a frame")
    channel, size = frame_header(head)
    data = read_exactly(size) if size else b""
    if len(data) < size:
        raise ExecError("the exec stream ended inside a frame")
    return channel, data


def terminal_size(data: bytes) -> tuple[int, int] | None:
    """A resize message's (width, height), or None when it is not one."""
    try:
        size = json.loads(data)
        width, height = int(size["Width"]), int(size["Height"])
    except (ValueError, TypeError, KeyError):
        return None
    if not (0 < width < 1 << 16 and 0 < height < 1 << 16):
        return None
    return width, height


# ---- the session's end -----------------------------------------------------------------------

def ended(command: Sequence[str], exit_code: int) -> Obj:
    """The Status kubelet sends on the error channel when the command has ended: Success, or
    NonZeroExitCode with the code as the ExitCode cause (kubectl exits with it)."""
    if exit_code == 0:
        return {"metadata": {}, "status": "Success"}
    return {"metadata": {}, "status": "Failure",
            "message": f"command terminated with non-zero exit code: command "
                       f"'{' '.join(command)}' exited with {exit_code}",
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": str(exit_code)}]}}


def failed(message: str) -> Obj:
    """The Status for a command that could not be run (kubelet's InternalError)."""
    return {"metadata": {}, "status": "Failure",
            "message": f"Internal error occurred: error executing command in container: "
                       f"{message}",
            "reason": "InternalError",
            "details": {"causes": [{"message": f"error executing command in container: "
                                              f"{message}"}]},
            "code": 500}


def status_data(status: Obj) -> bytes:
    return json.dumps(status, separators=(",", ":")).encode()
