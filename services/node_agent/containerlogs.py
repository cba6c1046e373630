"""Reading one run's log file (``procs.log_file``) as a log request asks (acts): its last
``tailLines`` lines, at most ``limitBytes``, and with ``follow`` what is written next, until
the run ends; of a file of CRI lines (the log writer's, ``logshim``) also the lines since a
time, and each line's time; and ``limitBytes`` of a stream that has no such option (the
Docker engine's log). The rules of the request are ``shared.api.podlog``'s."""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from shared.api import podlog
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
    """Acts: what the log file ``path`` holds, as ``opts`` ask: its last ``tail_lines``
    lines (all without), at most ``limit_bytes``; with ``follow`` what is written next too,
    until the next run's file ``newer`` appears, the pod's directory goes, or ``stop`` is
    set. A file of CRI lines (``podlog.parse_cri``, the log writer's) is read as kubelet
    reads one: the lines at or after ``podlog.since``, each with its time with
    ``timestamps``. A file of raw output (an earlier agent's) has no times: options that
    need them are a LogError (``podlog.untimed``). Raises OSError when the file cannot be
    read."""
    with open(path, "rb") as f:
        first = f.readline()
        f.seek(0)
        if first and not podlog.is_cri(first):
            refusal = podlog.untimed(opts)
            if refusal is not None:
                raise refusal
            yield from limited(_raw(f, path, opts, newer, stop), opts.limit_bytes)
        else:
            yield from limited(_cri(f, path, opts, newer, stop), opts.limit_bytes)


def _ended(path: Path, newer: Path | None, stop: threading.Event | None) -> bool:
    """Is the run of the file ``path`` over (the next one's file is there, the pod's
    directory gone, or the reader told to stop)?"""
    return (newer is not None and newer.exists()) or not path.parent.exists() \
        or (stop is not None and stop.is_set())


def _raw(f: Any, path: Path, opts: LogOptions, newer: Path | None,
         stop: threading.Event | None) -> Iterator[bytes]:
    data = _tail(f, opts.tail_lines)
    while True:
        if data:
            yield data
        if not opts.follow or opts.previous:
            return
        data = f.read(CHUNK)
        if data:
            continue
        if _ended(path, newer, stop):
            yield f.read()  # what the run wrote before it ended
            return
        time.sleep(FOLLOW_POLL)


def _cri(f: Any, path: Path, opts: LogOptions, newer: Path | None,
         stop: threading.Event | None) -> Iterator[bytes]:
    oldest = podlog.since(opts, time.time_ns())
    # (the times as written, all of one width in UTC, compare as the times do)
    cut = None if oldest is None else podlog.stamp(oldest).encode()
    new_line = True  # (a piece of a line after another piece is printed without a time)

    def shown(lines: list[bytes]) -> bytes:
        nonlocal new_line
        out = []
        for line in lines:
            parsed = podlog.parse_cri(line)
            if parsed is None:
                continue  # (not a CRI line: kubelet skips one it cannot parse too)
            when, text = parsed
            if cut is not None and when < cut:
                continue
            out.append(when + b" " + text if opts.timestamps and new_line else text)
            new_line = text.endswith(b"\n")
        return b"".join(out)

    tail = opts.tail_lines
    lines = list(deque(f, maxlen=tail + 1) if tail is not None else f)
    held = lines.pop() if lines and not lines[-1].endswith(b"\n") else b""  # (being written)
    if tail is not None:
        lines = lines[len(lines) - tail:] if tail else []
    yield shown(lines)
    if not opts.follow or opts.previous:
        return
    while True:
        data = f.read(CHUNK)
        if not data:
            if _ended(path, newer, stop):
                data = f.read()  # what the run wrote before it ended
                if not data:
                    return
            else:
                time.sleep(FOLLOW_POLL)
                continue
        *whole, held = (held + data).split(b"\n")
        yield shown([line + b"\n" for line in whole])


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
