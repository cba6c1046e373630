"""A container's log writer, as containerd's shim or CRI-O's conmon is one (acts): it starts
the container's command with its output on pipes, writes what comes to its own standard
output (the run's log file) in the CRI log format kubelet reads, a time per line
(``shared.api.podlog.cri_line``), and ends as the command ends, with its exit status.

The process runtime (``procs.ProcessRuntime.start``) starts it in place of the command, as
the leader of the container's process group and session, its standard output the run's log
file (by which a restarted agent finds it, ``find_started``): the agent's records, signals
and exit status are the same as they were for the command. It reads the command on standard
input, as JSON (so that no environment value shows on a command line):
``{"argv", "env", "cwd", "uid", "gid", "groups", "memory", "stdin", "tty"}``; the command
runs as that user, with the memory limit as its RLIMIT_DATA, its input /dev/null, or with
``stdin`` (a container that keeps its input open) that named pipe, which ``kubectl attach
-i`` writes to (``runtime.FollowedAttach``).

With ``tty`` (a container with ``tty: true``: the path of a named pipe of its run) the
command's input and output are a new terminal, as a runtime gives such a container: the
session's controlling terminal (the log writer leads the session), whose output is the log's
stdout, written as it comes (a prompt shows before its line ends), and whose input is what
comes through the ``stdin`` pipe; a line ``COLUMNS ROWS`` through the ``tty`` pipe sets its
size (``kubectl attach -t`` sends the caller's).

It ignores SIGTERM, SIGINT and SIGHUP: they reach the whole group, and are the command's to
act on; SIGKILL ends both. When the command has ended it writes what is left in the pipes
(until they close, or for at most ``DRAIN_SECONDS`` while a process the command left behind
holds them) and exits with the command's code, or by the signal that ended it.

    python -m services.node_agent.logshim STATUS_FD < spec.json >> 0.log
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import pty
import resource
import selectors
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from typing import Any, BinaryIO

from shared.api import podlog

DRAIN_SECONDS = 1.0
READ = 65536
GROUP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class _Stream:
    """One of the command's output pipes: its lines, written as they end (a piece of one
    longer than ``podlog.CRI_PIECE`` as it comes; with ``at_once``, a terminal's, every
    piece as it comes)."""

    def __init__(self, name: str, out: BinaryIO, at_once: bool = False) -> None:
        self.name, self.out, self.held = name, out, b""
        self.piece = 1 if at_once else podlog.CRI_PIECE

    def take(self, data: bytes) -> None:
        self.held += data
        lines = self.held.split(b"\n")
        self.held = lines.pop()
        now = time.time_ns()
        out = [podlog.cri_line(now, self.name, line + b"\n") for line in lines]
        while len(self.held) >= self.piece:
            piece, self.held = self.held[:podlog.CRI_PIECE], self.held[podlog.CRI_PIECE:]
            out.append(podlog.cri_line(now, self.name, piece))
        if out:
            self.out.write(b"".join(out))
            self.out.flush()

    def end(self) -> None:
        """The pipe closed: a last line without its newline is written as a piece."""
        if self.held:
            self.out.write(podlog.cri_line(time.time_ns(), self.name, self.held))
            self.out.flush()
            self.held = b""


def _child(spec: dict[str, Any]) -> None:
    """In the forked command, before it runs: the group's signals back to their defaults,
    the memory limit (only system calls: the fork holds no lock of the parent's)."""
    for sig in GROUP_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
    if spec.get("memory") is not None:
        resource.setrlimit(resource.RLIMIT_DATA, (spec["memory"], spec["memory"]))


def run(spec: dict[str, Any], out: BinaryIO, status: int) -> int:
    """Acts: run the command of ``spec``, its output as CRI lines on ``out``; says on the
    file descriptor ``status`` ``started``, or why it could not start (then returns 127).
    Returns its wait status as ``subprocess`` gives it (negative: the signal that ended
    it)."""
    for sig in GROUP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    uid = spec.get("uid")
    stdin, master, term = subprocess.DEVNULL, -1, -1
    try:
        if spec.get("tty"):  # a terminal, this session's: its foreground group is this one
            master, term = pty.openpty()
            fcntl.ioctl(term, termios.TIOCSCTTY, 0)
        elif spec.get("stdin"):  # a container that keeps its input open: the run's pipe,
            # held open for reading and writing, so the command never reads an end of it
            stdin = os.open(spec["stdin"], os.O_RDWR)
        ends: Any = (term, term, term) if term >= 0 else \
            (stdin, subprocess.PIPE, subprocess.PIPE)
        proc = subprocess.Popen(
            spec["argv"], stdin=ends[0], stdout=ends[1], stderr=ends[2], env=spec["env"],
            cwd=spec["cwd"], close_fds=True, user=uid, group=spec.get("gid"),
            extra_groups=spec.get("groups") if uid is not None else None,
            preexec_fn=lambda: _child(spec))
    except (OSError, subprocess.SubprocessError, ValueError) as err:
        os.write(status, str(err).encode()[:4096] or b"failed")
        os.close(status)
        if master >= 0:
            os.close(master)
        return 127
    finally:
        for fd in (stdin, term):
            if fd >= 0:
                os.close(fd)  # (the command holds it)
    os.write(status, b"started")
    os.close(status)
    sel = selectors.DefaultSelector()
    if master >= 0:
        terminal = _Terminal(spec, master, _Stream("stdout", out, at_once=True), sel)
        try:
            _serve(proc, sel, terminal.step)
        finally:
            terminal.close()
        return proc.wait()
    assert proc.stdout is not None and proc.stderr is not None
    streams = {proc.stdout.fileno(): _Stream("stdout", out),
               proc.stderr.fileno(): _Stream("stderr", out)}
    for fd in streams:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)

    def step(ready: list[tuple[selectors.SelectorKey, int]]) -> bool:
        for key, _ in ready:
            fd = int(key.fd)
            try:
                data = os.read(fd, READ)
            except BlockingIOError:
                continue
            if data:
                streams[fd].take(data)
            else:
                sel.unregister(fd)
                streams.pop(fd).end()
        return bool(streams)

    _serve(proc, sel, step)
    for stream in streams.values():
        stream.end()
    return proc.wait()


def _serve(proc: subprocess.Popen[bytes], sel: selectors.BaseSelector,
           step: Callable[[list[tuple[selectors.SelectorKey, int]]], bool]) -> None:
    """Hands ``step`` what ``sel`` finds ready until it says the command's output is over
    (False), or for at most ``DRAIN_SECONDS`` after the command ended: a process the command
    left behind may hold its output, and is not waited for."""
    deadline = None
    while True:
        if deadline is None and proc.poll() is not None:
            deadline = time.monotonic() + DRAIN_SECONDS
        wait = 0.2 if deadline is None else deadline - time.monotonic()
        if wait <= 0 or not step(sel.select(wait)):
            return


class _Terminal:
    """A command's terminal (its pty's ``master`` end): its output to ``screen``, what comes
    through the run's ``stdin`` pipe typed into it, and its size set from the lines
    ``COLUMNS ROWS`` that come through its ``tty`` pipe; served through ``sel``."""

    def __init__(self, spec: dict[str, Any], master: int, screen: _Stream,
                 sel: selectors.BaseSelector) -> None:
        self.master, self.screen, self.sel = master, screen, sel
        self.typed = b""  # what the terminal has not taken yet
        self.sizes = b""  # the start of a size line
        os.set_blocking(master, False)
        self.inputs: dict[int, str] = {}
        for what in ("stdin", "tty"):
            if spec.get(what):  # held open for reading and writing: never at an end
                self.inputs[os.open(spec[what], os.O_RDWR | os.O_NONBLOCK)] = what
        for fd in (master, *self.inputs):
            sel.register(fd, selectors.EVENT_READ)

    def close(self) -> None:
        self.screen.end()
        for fd in self.inputs:
            os.close(fd)
        os.close(self.master)

    def step(self, ready: list[tuple[selectors.SelectorKey, int]]) -> bool:
        """Handles what is ready; False once the terminal has no writer left (the command
        and what it started ended)."""
        for key, events in ready:
            fd = int(key.fd)
            if fd == self.master and events & selectors.EVENT_WRITE:
                self._type(b"")
            if not events & selectors.EVENT_READ:
                continue
            try:
                data = os.read(fd, READ)
            except BlockingIOError:
                continue
            except OSError as err:  # EIO: no process holds the terminal any more
                if fd == self.master and err.errno == errno.EIO:
                    return False
                raise
            if fd == self.master:
                if not data:
                    return False
                self.screen.take(data)
            elif self.inputs[fd] == "stdin":
                self._type(data)
            else:
                self._resize(data)
        return True

    def _type(self, data: bytes) -> None:
        """Into the terminal what it takes now; the rest when it can take more (the master
        end watched for writing meanwhile)."""
        self.typed += data
        try:
            self.typed = self.typed[os.write(self.master, self.typed):]
        except BlockingIOError:
            pass
        except OSError:  # the terminal is going: nothing reads what was typed
            self.typed = b""
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if self.typed else 0)
        if self.sel.get_key(self.master).events != events:
            self.sel.modify(self.master, events)

    def _resize(self, data: bytes) -> None:
        *lines, self.sizes = (self.sizes + data).split(b"\n")
        for line in lines:
            try:
                columns, rows = (int(word) for word in line.split())
            except ValueError:
                continue  # not a size: ignored
            if 0 < columns < 65536 and 0 < rows < 65536:
                fcntl.ioctl(self.master, termios.TIOCSWINSZ,
                            struct.pack("HHHH", rows, columns, 0, 0))


def main() -> None:
    said = int(sys.argv[1])
    spec = json.loads(sys.stdin.buffer.read())
    os.close(0)
    os.open(os.devnull, os.O_RDONLY)  # (fd 0 again, /dev/null)
    status = run(spec, sys.stdout.buffer, said)
    if status < 0:  # ended by a signal: so end, that the agent reads the same status
        with contextlib.suppress(OSError, ValueError):  # (SIGKILL, SIGSTOP: no handler)
            signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    sys.exit(status)


if __name__ == "__main__":
    main()
