"""The process runtime (acts): a container is a child process of the agent in its own process
group (its own session), run as the agent's --run-as user, with stdout and stderr appended to
``<state dir>/pods/<namespace>_<name>_<uid>/<container>/<restartCount>.log`` (kubelet's
layout under /var/log/pods). Each container's state is recorded next to its logs
(``state.json``: pid, the process's start time, restarts, last termination), so an agent
killed and started again adopts the processes it left: a pid counts as the container's only
while the process of that pid has the recorded start time (psutil), so a reused pid is
never signalled.

When a container's main process ends, what it left in its process group is killed, as a
container's PID namespace ends with its first process.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import pty
import pwd
import select
import shutil
import signal
import struct
import subprocess
import sys
import termios
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from services.node_agent import containerlogs, logshim, podstatus, probes
from services.node_agent.podstatus import ContainerState
from services.node_agent.runtime import LOOPBACK, Exit, FollowedAttach, Records
from shared.api import metrics, podexec
from shared.api.podexec import ExecOptions
from shared.api.podlog import LogOptions

log = logging.getLogger("node-agent")
Obj = dict[str, Any]
START_TIMEOUT = 30.0  # for the log writer to say it started the command (or why not)


@dataclass(frozen=True)
class User:
    """Who containers run as: None fields = the agent's own user (no switch)."""

    name: str
    uid: int | None = None
    gid: int | None = None
    groups: tuple[int, ...] = ()
    home: str = "/"


def resolve_user(run_as: str | None) -> User:
    """--run-as: default ``nobody`` when the agent runs as root, else the agent's own user;
    root only when asked for by name. A non-root agent can only run as itself."""
    me = pwd.getpwuid(os.getuid())
    if run_as is None:
        run_as = "nobody" if os.getuid() == 0 else me.pw_name
    try:
        pw = pwd.getpwnam(run_as) if not run_as.isdigit() else pwd.getpwuid(int(run_as))
    except KeyError:
        raise ValueError(f"--run-as: no such user: {run_as}") from None
    if pw.pw_uid == os.getuid():
        return User(pw.pw_name, home=pw.pw_dir)
    if os.getuid() != 0:
        raise ValueError(f"--run-as {run_as}: only root can run containers as another user")
    return User(pw.pw_name, pw.pw_uid, pw.pw_gid,
                tuple(os.getgrouplist(pw.pw_name, pw.pw_gid)), pw.pw_dir)


def log_file(pod_dir: Path, container: str, run: int) -> Path:
    """The log of a container's run number ``run`` (its restartCount then; one file per
    run, as kubelet keeps them)."""
    return pod_dir / container / f"{run}.log"


def input_pipe(pod_dir: Path, container: str, run: int) -> Path:
    """The named pipe a container that keeps its input open (``stdin: true``) reads, in its
    run number ``run``."""
    return pod_dir / container / f"{run}.stdin"


def terminal_pipe(pod_dir: Path, container: str, run: int) -> Path:
    """The named pipe that sets the size of the terminal of a container with ``tty: true``
    (``logshim``), in its run number ``run``: a line ``COLUMNS ROWS``."""
    return pod_dir / container / f"{run}.tty"


class ProcessRuntime(Records):
    """Starts, signals and watches container processes (and keeps their records)."""

    kind = "process"
    mounts = False  # (no mount namespace: a process sees the host's file system)

    def __init__(self, state_dir: Path, user: User) -> None:
        super().__init__(state_dir)
        self.user = user
        self.children: dict[int, subprocess.Popen[bytes]] = {}  # pid → our own children

    # ---- processes ----------------------------------------------------------------------

    def base_env(self) -> dict[str, str]:
        return {"PATH": podstatus.DEFAULT_PATH, "HOME": self.user.home}

    def version(self) -> str:
        return "process://daemonbus"

    def refresh(self) -> set[str]:
        """Nothing to read ahead: each process is asked about by itself (and there are no
        sandboxes)."""
        return set()

    def argv(self, container: Obj, env: dict[str, str]) -> list[str]:
        return podstatus.argv(container, env)

    def image_ready(self, container: Obj) -> str | None:
        return ""  # no image: the command is the host's

    def check_config(self, pod: Obj, container: Obj) -> None:
        pass  # (every command runs as the agent's pod user, whatever its securityContext)

    def start(self, pod_dir: Path, pod: Obj, container: Obj, c: ContainerState,
              words: list[str], env: dict[str, str]) -> None:
        """Start ``c``'s process; ``c`` gets its pid and start time. Raises OSError when it
        cannot be started (no such command, working directory, permission). A memory limit
        is the process's RLIMIT_DATA (its heap and private mappings; set in the child before
        the command runs); a CPU limit would need cgroups and is not applied."""
        exe = words[0] if "/" in words[0] else shutil.which(words[0], path=env.get("PATH"))
        if exe is None:
            raise FileNotFoundError(f'exec: "{words[0]}": executable file not found in $PATH')
        d = pod_dir / c.name
        d.mkdir(parents=True, exist_ok=True)
        try:
            memory = podstatus.memory_limit(container)
        except podstatus.ConfigError as err:
            raise OSError(str(err)) from err
        u = self.user
        if container.get("tty"):  # as the runtimes set it for a container with a terminal
            env = {"TERM": "xterm", **env}
        spec = {"argv": [exe, *words[1:]], "env": env,
                "cwd": str(container.get("workingDir") or "/"), "uid": u.uid, "gid": u.gid,
                "groups": list(u.groups), "memory": memory, "stdin": None, "tty": None}
        for key, path, asked in (("stdin", input_pipe, container.get("stdin")),
                                 ("tty", terminal_pipe, container.get("tty"))):
            if asked:
                pipe = path(pod_dir, c.name, c.restart_count)
                pipe.unlink(missing_ok=True)
                os.mkfifo(pipe, 0o600)
                spec[key] = str(pipe)
        said = b""
        read_end, write_end = os.pipe()  # where the log writer says how the start went
        try:
            with open(self.log_path(pod_dir, c), "ab") as out:
                # the log writer runs as the agent (it reads the pipes, writes the file) and
                # starts the command as its user, with the command's environment
                proc = subprocess.Popen(
                    [sys.executable, "-m", logshim.__name__, str(write_end)],
                    stdin=subprocess.PIPE, stdout=out, stderr=subprocess.DEVNULL, cwd="/",
                    start_new_session=True, close_fds=True, pass_fds=(write_end,))
            os.close(write_end)
            write_end = -1
            assert proc.stdin is not None
            with contextlib.suppress(OSError):  # (it died at once: said nothing, below)
                proc.stdin.write(json.dumps(spec).encode())
                proc.stdin.close()
            if select.select([read_end], [], [], START_TIMEOUT)[0]:
                said = os.read(read_end, 4096)
        finally:
            os.close(read_end)
            if write_end >= 0:
                os.close(write_end)
        if said != b"started":
            proc.kill()
            proc.wait()
            raise OSError(said.decode(errors="replace") or "the log writer did not start")
        self.children[proc.pid] = proc
        c.pid = proc.pid
        c.container_id = f"process://{proc.pid}"
        try:
            c.create_time = psutil.Process(proc.pid).create_time()
        except psutil.Error:
            c.create_time = 0.0

    def log_path(self, pod_dir: Path, c: ContainerState) -> Path:
        return log_file(pod_dir, c.name, c.restart_count)

    def find_started(self, pod_dir: Path, c: ContainerState) -> None:
        """Acts: for a container recorded as being started when the agent died, find its
        process (the one whose stdout is the run's log file) and record it running; if there
        is none, it never started (and will be, once)."""
        path = str(self.log_path(pod_dir, c))
        for p in psutil.process_iter():
            try:
                if any(f.fd == 1 and f.path == path for f in p.open_files()) \
                        and p.pid == os.getpgid(p.pid):
                    c.pid, c.create_time = p.pid, p.create_time()
                    c.container_id = f"process://{p.pid}"
                    c.started_at = c.create_time
                    log.info("found container %s (pid %d) started by an earlier run", c.name,
                             c.pid)
                    return
            except (psutil.Error, OSError):
                continue

    def is_ours(self, c: ContainerState) -> bool:
        """Is the process of ``c.pid`` the one recorded (same start time)?"""
        if c.pid <= 0:
            return False
        try:
            p = psutil.Process(c.pid)
            return abs(p.create_time() - c.create_time) < 0.01
        except psutil.Error:
            return False

    def exited(self, c: ContainerState) -> Exit | None:
        """How ``c``'s process ended, else None. An adopted process (not our child) that
        ended left no code: -1."""
        proc = self.children.get(c.pid)
        if proc is not None:
            rc = proc.poll()
            if rc is None:
                return None
            del self.children[c.pid]
            self._kill_group(c.pid)
            return Exit(0, -rc) if rc < 0 else Exit(rc)
        if self.is_ours(c):
            try:
                if psutil.Process(c.pid).status() != psutil.STATUS_ZOMBIE:
                    return None
            except psutil.Error:
                pass
        self._kill_group(c.pid)
        return Exit(-1)

    def signal(self, c: ContainerState, sig: int) -> None:
        """Send ``sig`` to ``c``'s process group (only while its leader is the recorded one)."""
        if c.pid in self.children or self.is_ours(c):
            try:
                os.killpg(c.pid, sig)
            except OSError:
                pass

    def _kill_group(self, pgid: int) -> None:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass

    def exec_probe(self, c: ContainerState, words: list[str], env: dict[str, str], cwd: str,
                   timeout: float) -> tuple[bool, str]:
        u = self.user
        try:
            res = subprocess.run(words, env=env, cwd=cwd, timeout=timeout, check=False,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, start_new_session=True,
                                 user=u.uid, group=u.gid,
                                 extra_groups=list(u.groups) if u.uid is not None else None)
        except subprocess.TimeoutExpired:
            return False, probes.timed_out(words)
        except (OSError, subprocess.SubprocessError) as err:
            return False, str(err)
        output = res.stdout[:probes.EXEC_OUTPUT_MAX].decode(errors="replace")
        return res.returncode == 0, output

    def exec(self, c: ContainerState, env: dict[str, str], cwd: str,
             opts: ExecOptions) -> ProcessExec:
        """The command as a child of the agent in a session of its own, run as the
        containers are; with a terminal, the session's controlling terminal is a new pty."""
        words = list(opts.command)
        exe = words[0] if "/" in words[0] else shutil.which(words[0], path=env.get("PATH"))
        if exe is None:
            raise FileNotFoundError(f'exec: "{words[0]}": executable file not found in $PATH')
        try:
            return self._exec(exe, words, env, cwd or "/", opts)
        except OSError as err:  # in the words runc's exec gives
            if err.filename == exe and isinstance(err, FileNotFoundError):
                raise OSError(f'exec: "{words[0]}": stat {exe}: no such file or '
                              "directory") from err
            if err.filename == exe and isinstance(err, PermissionError):
                raise OSError(f'exec: "{words[0]}": permission denied') from err
            if err.filename == (cwd or "/"):
                raise OSError(f'chdir to cwd ("{cwd}") set in config.json failed: '
                              f"{(err.strerror or str(err)).lower()}") from err
            raise

    def _exec(self, exe: str, words: list[str], env: dict[str, str], cwd: str,
              opts: ExecOptions) -> ProcessExec:
        u = self.user
        ids: dict[str, Any] = {"user": u.uid, "group": u.gid, "extra_groups":
                               list(u.groups) if u.uid is not None else None}
        if not opts.tty:
            def pipe(on: bool) -> int:
                return subprocess.PIPE if on else subprocess.DEVNULL
            proc = subprocess.Popen([exe, *words[1:]], stdin=pipe(opts.stdin),
                                    stdout=pipe(opts.stdout), stderr=pipe(opts.stderr),
                                    env=env, cwd=cwd, start_new_session=True,
                                    close_fds=True, bufsize=0, **ids)
            outs = [(ch, f.fileno()) for ch, f in ((podexec.STDOUT, proc.stdout),
                                                   (podexec.STDERR, proc.stderr)) if f]
            return ProcessExec(proc, outs, proc.stdin.fileno() if proc.stdin else None)
        master, slave = pty.openpty()
        try:
            proc = subprocess.Popen([exe, *words[1:]], stdin=slave, stdout=slave,
                                    stderr=slave, env={"TERM": "xterm", **env}, cwd=cwd,
                                    start_new_session=True, close_fds=True,
                                    preexec_fn=_controlling_tty, **ids)
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)
        return ProcessExec(proc, [(podexec.STDOUT, master)], master, tty=master)

    def attach(self, pod: Obj, c: ContainerState, run: int,
               opts: ExecOptions) -> FollowedAttach | None:
        """Its output followed and the caller's input written to the run's pipe, when the
        caller sends input and the container keeps its input open (``input_pipe``); the
        caller's terminal size to its terminal's pipe when both have one (``terminal_pipe``)."""
        pod_dir = self.pod_dir(pod)
        pipe = input_pipe(pod_dir, c.name, run)
        if not opts.stdin or not pipe.exists():
            return None
        sizes = terminal_pipe(pod_dir, c.name, run)
        return FollowedAttach(self, pod, c.name, run, opts, pipe,
                              sizes if opts.tty and sizes.exists() else None)

    def dns_fallback(self, pod: Obj) -> bool:
        return False  # (its processes use the host's resolver, whatever the pod asks)

    def on_host_network(self, pod: Obj) -> bool:
        return True  # every pod: there is no network of pods here

    def sandbox(self, pod: Obj) -> None:
        pass  # none: processes share the host's namespaces

    def pod_ip(self, pod: Obj, containers: list[ContainerState]) -> str:
        return ""  # the node's: processes share the host's network

    def forward_host(self, pod: Obj, containers: list[ContainerState]) -> str:
        """The loopback address (processes share the host's network, as a pod's containers
        share its network namespace, whose localhost kubelet dials)."""
        return LOOPBACK if any(c.running() for c in containers) else ""

    def usage(self, containers: list[ContainerState]) -> dict[str, metrics.Sample]:
        """Each container's process group (what it started stays in it, as in a container's
        cgroup), read in one pass over the host's processes: the CPU time of its live
        members, with what their ended children used, and the sum of their resident memory;
        not the log writer's own (the group's leader, ``logshim``), as kubelet counts no
        shim's."""
        leaders = {c.pid: c for c in containers if c.running() and self.is_ours(c)}
        cpu = dict.fromkeys(leaders, 0.0)
        memory = dict.fromkeys(leaders, 0)
        for p in psutil.process_iter(["cpu_times", "memory_info"]):
            try:
                group = p.pid if p.pid in leaders else os.getpgid(p.pid)
                if group not in leaders:
                    continue
                own = p.pid != group or logshim.__name__ not in p.cmdline()
            except (OSError, psutil.Error):
                continue
            t, mem = p.info["cpu_times"], p.info["memory_info"]
            if t is None or mem is None:
                continue
            cpu[group] += t.children_user + t.children_system + \
                (t.user + t.system if own else 0.0)
            memory[group] += mem.rss if own else 0
        return {c.container_id: metrics.Sample(cpu[pid], memory[pid])
                for pid, c in leaders.items()}

    def sweep(self, known: set[str]) -> None:
        """Nothing: a process without a record cannot be told from the host's own."""

    def logs(self, pod: Obj, container: str, run: int, opts: LogOptions,
             stop: threading.Event | None = None) -> Iterator[bytes]:
        """The run's log file; following it ends when the next run's file appears."""
        pod_dir = self.pod_dir(pod)
        return containerlogs.stream(log_file(pod_dir, container, run), opts,
                                    log_file(pod_dir, container, run + 1), stop)


def _controlling_tty() -> None:
    # (in the forked child, a session leader: only this system call)
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class ProcessExec:
    """A command run for a caller (``ExecSession``): its output read from its pipes or its
    terminal, its input written to them. Its input and terminal are used and closed under
    one lock, so no write goes to a descriptor closed meanwhile (and its number reused)."""

    def __init__(self, proc: subprocess.Popen[bytes], outputs: list[tuple[int, int]],
                 stdin: int | None, tty: int | None = None) -> None:
        self.proc = proc
        self.outputs = outputs
        self.stdin = stdin
        self.tty = tty
        self._lock = threading.Lock()

    def pump(self, send: Callable[[int, bytes], None]) -> None:
        readers = [threading.Thread(target=self._read, args=(ch, fd, send), daemon=True,
                                    name="exec-output") for ch, fd in self.outputs[1:]]
        for t in readers:
            t.start()
        if self.outputs:
            self._read(*self.outputs[0], send)
        for t in readers:
            t.join()

    @staticmethod
    def _read(channel: int, fd: int, send: Callable[[int, bytes], None]) -> None:
        while True:
            try:
                data = os.read(fd, 65536)
            except OSError:  # a terminal whose last holder closed it (EIO)
                return
            if not data:
                return
            send(channel, data)

    def write_stdin(self, data: bytes) -> None:
        with self._lock:
            view = memoryview(data)
            while view and self.stdin is not None:
                try:
                    view = view[os.write(self.stdin, view):]
                except OSError:  # the command closed its input, or ended
                    return

    def close_stdin(self) -> None:
        with self._lock:
            if self.stdin is not None and self.tty is None:
                if self.proc.stdin is not None:
                    self.proc.stdin.close()
                self.stdin = None

    def resize(self, width: int, height: int) -> None:
        with self._lock:
            if self.tty is None:
                return
            try:
                fcntl.ioctl(self.tty, termios.TIOCSWINSZ,
                            struct.pack("HHHH", height, width, 0, 0))
            except OSError:
                pass

    def wait(self) -> int:
        rc = self.proc.wait()
        self._close()
        return 128 - rc if rc < 0 else rc

    def kill(self) -> None:
        """Its process group: what it left running too (a group's number is not given to
        another process while one of its members lives)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass

    def _close(self) -> None:
        with self._lock:
            for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                if f is not None:
                    f.close()
            if self.tty is not None:
                os.close(self.tty)
            self.tty = self.stdin = None
