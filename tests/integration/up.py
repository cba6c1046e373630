"""`daemonbus up` for tests: the real supervisor with a home of the test's own."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from click.testing import CliRunner

from services.cli.main import cli
from tests.integration.stack import ROOT, wait_for


@dataclass
class Up:
    proc: subprocess.Popen[bytes]
    home: Path
    log_path: Path
    url: str
    runner: CliRunner  # daemonbus commands that find this stack through its recorded URL
    _log: IO[bytes]

    def close(self) -> None:
        self._log.close()


def start_with_demo(tmp_path: Path, nodes: int, workers: int) -> Up:
    """Run ``daemonbus up --demo`` (output in ``tmp_path/up.log``) until the demo DaemonSet
    is ready on every node."""
    home = tmp_path / "home"
    env = dict(os.environ, DAEMONBUS_HOME=str(home), PYTHONPATH=str(ROOT))
    env.pop("DAEMONBUS_REDIS_URL", None)
    env.pop("DAEMONBUS_PREFIX", None)
    log_path = tmp_path / "up.log"
    log = open(log_path, "wb")
    proc = subprocess.Popen([sys.executable, "-m", "services.cli.main", "up", "--nodes",
                             str(nodes), "--workers", str(workers), "--demo"], env=env,
                            stdout=log, stderr=subprocess.STDOUT, cwd=str(ROOT))
    runner = CliRunner(env={"DAEMONBUS_HOME": str(home)})

    def demo_ready() -> bool:
        res = runner.invoke(cli, ["get", "ds", "-n", "kube-system", "--no-headers"])
        cols = res.output.split()
        return res.exit_code == 0 and cols[1:6] == [str(nodes)] * 5

    try:
        url_file = home / "redis-url"
        wait_for(url_file.exists, timeout=20, what="the recorded Redis URL")
        up = Up(proc, home, log_path, url_file.read_text().strip(), runner, log)
        wait_for(demo_ready, timeout=60, what=f"the demo DaemonSet ready on {nodes} nodes")
    except BaseException:
        proc.terminate()
        proc.wait(30)
        log.close()
        raise
    return up
