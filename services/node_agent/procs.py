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

import json
import logging
import os
import pwd
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from services.node_agent import podstatus
from services.node_agent.podstatus import ContainerState

log = logging.getLogger("node-agent")
Obj = dict[str, Any]


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


def pod_dir(state_dir: Path, pod: Obj) -> Path:
    """Where an agent with ``state_dir`` keeps a pod's container records and logs."""
    md = pod.get("metadata") or {}
    return state_dir / "pods" / f"{md.get('namespace')}_{md.get('name')}_{md.get('uid')}"


def log_file(pod_dir: Path, container: str, run: int) -> Path:
    """The log of a container's run number ``run`` (its restartCount then; one file per
    run, as kubelet keeps them)."""
    return pod_dir / container / f"{run}.log"


def _write_json(path: Path, data: object) -> None:
    """Write ``path`` whole or not at all (a crash leaves the old file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


class Runtime:
    """Starts, signals and watches container processes, and keeps their records."""

    def __init__(self, state_dir: Path, user: User) -> None:
        self.state_dir = state_dir
        self.user = user
        self.children: dict[int, subprocess.Popen[bytes]] = {}  # pid → our own children
        (state_dir / "pods").mkdir(parents=True, exist_ok=True)

    # ---- records ------------------------------------------------------------------------

    def pod_dir(self, pod: Obj) -> Path:
        return pod_dir(self.state_dir, pod)

    def save(self, pod_dir: Path, c: ContainerState) -> None:
        _write_json(pod_dir / c.name / "state.json", c.to_record())

    def save_pod(self, pod_dir: Path, pod: Obj) -> None:
        """What stopping the pod's containers needs once the pod object is gone: its name
        and grace period (``pod.json``, a stub of the pod)."""
        md = pod.get("metadata") or {}
        stub = {"metadata": {k: md.get(k) for k in ("name", "namespace", "uid")},
                "spec": {"terminationGracePeriodSeconds":
                         (pod.get("spec") or {}).get("terminationGracePeriodSeconds")}}
        _write_json(pod_dir / "pod.json", stub)

    def pod_stub(self, pod_dir: Path) -> Obj | None:
        try:
            stub = json.loads((pod_dir / "pod.json").read_text())
        except (OSError, ValueError):
            return None
        return stub if isinstance(stub, dict) else None

    def recorded(self) -> dict[str, dict[str, ContainerState]]:
        """Every pod dir's containers: pod uid → container name → state (unreadable records
        are skipped with a warning)."""
        out: dict[str, dict[str, ContainerState]] = {}
        for pod_dir in sorted((self.state_dir / "pods").iterdir()):
            uid = pod_dir.name.rsplit("_", 1)[-1]
            for f in sorted(pod_dir.glob("*/state.json")):
                try:
                    c = ContainerState.from_record(json.loads(f.read_text()))
                except (OSError, ValueError, TypeError) as err:
                    log.warning("unreadable container record %s: %s", f, err)
                    continue
                out.setdefault(uid, {})[c.name] = c
        return out

    def pod_dirs(self) -> dict[str, Path]:
        return {d.name.rsplit("_", 1)[-1]: d for d in (self.state_dir / "pods").iterdir()}

    def forget(self, pod_dir: Path) -> None:
        shutil.rmtree(pod_dir, ignore_errors=True)

    # ---- processes ----------------------------------------------------------------------

    def base_env(self) -> dict[str, str]:
        return {"PATH": podstatus.DEFAULT_PATH, "HOME": self.user.home}

    def start(self, pod_dir: Path, c: ContainerState, words: list[str], env: dict[str, str],
              cwd: str) -> None:
        """Start ``c``'s process; ``c`` gets its pid and start time. Raises OSError when it
        cannot be started (no such command, working directory, permission)."""
        exe = words[0] if "/" in words[0] else shutil.which(words[0], path=env.get("PATH"))
        if exe is None:
            raise FileNotFoundError(f'exec: "{words[0]}": executable file not found in $PATH')
        d = pod_dir / c.name
        d.mkdir(parents=True, exist_ok=True)
        with open(self.log_path(pod_dir, c), "ab") as out:
            u = self.user
            proc = subprocess.Popen(
                [exe, *words[1:]], stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env,
                cwd=cwd, start_new_session=True, close_fds=True,
                user=u.uid, group=u.gid, extra_groups=list(u.groups) if u.uid is not None
                else None)
        self.children[proc.pid] = proc
        c.pid = proc.pid
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

    def exited(self, c: ContainerState) -> tuple[int, int] | None:
        """(exit code, signal) when ``c``'s process has ended, else None. An adopted process
        (not our child) that ended left no code: (-1, 0)."""
        proc = self.children.get(c.pid)
        if proc is not None:
            rc = proc.poll()
            if rc is None:
                return None
            del self.children[c.pid]
            self._kill_group(c.pid)
            return (0, -rc) if rc < 0 else (rc, 0)
        if self.is_ours(c):
            try:
                if psutil.Process(c.pid).status() != psutil.STATUS_ZOMBIE:
                    return None
            except psutil.Error:
                pass
        self._kill_group(c.pid)
        return (-1, 0)

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
