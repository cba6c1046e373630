"""Reading one run's log file (``procs.log_file``) as a log request asks (acts): its last
``tailLines`` lines, at most ``limitBytes``, and with ``follow`` what is written next, until
the run ends; and ``limitBytes`` of a stream that has no such option (the Docker engine's
log). The rules of the request are ``shared.api.podlog``'s."""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from shared.api.podlog import LogOptions

FOLLOW_POLL = 0.2
CHUNK = 65536


def _tail(f: Any, lines: int | None) -> bytes:
    if lines is None:
        return bytes(f.read())
    data = b"".join(deque(f, maxlen=lines)) if lines > 0 else b""
    f.seek(0, os.SEEK_END)
    return data


def stream(path: Path, opts: LogOptions, newer: Path | None = None,
           stop: threading.Event | None = None) -> Iterator[bytes]:
    """Acts: the bytes of the log file ``path``: its last ``tail_lines`` lines (all without),
    at most ``limit_bytes``; with ``follow`` what is written next too, until the next run's
    file ``newer`` appears, the pod's directory goes, or ``stop`` is set. Raises OSError when
    the file cannot be read."""
    left = opts.limit_bytes
    with open(path, "rb") as f:
        data = _tail(f, opts.tail_lines)
        while True:
            if left is not None:
                data = data[:left]
                left -= len(data)
            if data:
                yield data
            if left == 0 or not opts.follow or opts.previous:
                return
            data = f.read(CHUNK)
            if data:
                continue
            if (newer is not None and newer.exists()) or not path.parent.exists() \
                    or (stop is not None and stop.is_set()):
                # the run is over: what it wrote before it ended, then stop
                data = f.read()
                if left is not None:
                    data = data[:left]
                if data:
                    yield data
                return
            time.sleep(FOLLOW_POLL)


def limited(chunks: Iterator[bytes], limit_bytes: int | None,
            stop: threading.Event | None = None) -> Iterator[bytes]:
    """Acts: ``chunks`` up to ``limit_bytes`` in all (all without), until ``stop`` is set."""
    left = limit_bytes
    for chunk in chunks:
        if left is not None:
            chunk = chunk[:left]
            left -= len(chunk)
        if chunk:
            yield chunk
        if left == 0 or (stop is not None and stop.is_set()):
            return
