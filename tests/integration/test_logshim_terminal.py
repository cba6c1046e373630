"""The process runtime's log writer (``services.node_agent.logshim``) giving a command a
terminal, run as the runtime runs it: what comes through the run's input pipe is typed into
the terminal, however much and however fast (the terminal takes about 4 KiB at a time; the
rest waits for it), its size comes through the other pipe, and its output is the log's
stdout as it comes."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

from shared.api import podlog


def start(tmp_path: Path, script: str) -> tuple[subprocess.Popen[bytes], Path, Path, Path]:
    """The log writer running ``sh -c script`` on a terminal: it, the log, the input pipe,
    the size pipe."""
    stdin, sizes, log = tmp_path / "0.stdin", tmp_path / "0.tty", tmp_path / "0.log"
    os.mkfifo(stdin, 0o600)
    os.mkfifo(sizes, 0o600)
    spec = {"argv": ["sh", "-c", script], "env": {"PATH": os.environ["PATH"]},
            "cwd": str(tmp_path), "uid": None, "gid": None, "groups": [], "memory": None,
            "stdin": str(stdin), "tty": str(sizes)}
    said, tell = os.pipe()
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "services.node_agent.logshim", str(tell)],
                                stdin=subprocess.PIPE, stdout=out, pass_fds=(tell,),
                                start_new_session=True)
    os.close(tell)
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(spec).encode())
    proc.stdin.close()
    assert select.select([said], [], [], 30)[0] and os.read(said, 100) == b"started"
    os.close(said)
    return proc, log, stdin, sizes


def screen(log: Path) -> bytes:
    """What the terminal showed: the log's pieces joined."""
    out = b""
    for line in log.read_bytes().splitlines(keepends=True):
        parsed = podlog.parse_cri(line)
        assert parsed is not None, line
        assert b" stdout " in line  # a terminal's output is one stream
        out += parsed[1]
    return out


def test_typed_input_larger_than_the_terminal_takes_at_once_all_arrives(
        tmp_path: Path) -> None:
    # a command that reads only after a while: what is typed meanwhile waits
    proc, log, stdin, sizes = start(tmp_path, "stty -echo; echo ready; sleep 1; wc -c; "
                                              "stty size")
    shown(log, b"ready")  # (typed before, it would have been echoed)
    with open(sizes, "wb", buffering=0) as size_pipe:
        size_pipe.write(b"91 33\n")
    typed = b"".join(b"%099d\n" % i for i in range(1000))  # 100,000 bytes, short lines
    fd = os.open(stdin, os.O_WRONLY)
    try:
        view = memoryview(typed + b"\x04")  # then the end of input (^D)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    assert proc.wait(timeout=60) == 0
    assert screen(log).split() == [b"ready", b"100000", b"33", b"91"]


def shown(log: Path, text: bytes) -> None:
    """Waits (10 s at most) until the terminal has shown ``text``."""
    deadline = time.monotonic() + 10
    while text not in screen(log):
        assert time.monotonic() < deadline, f"no {text!r} on the terminal: {screen(log)!r}"
        time.sleep(0.02)  # (a file: nothing to wait on)
