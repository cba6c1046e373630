"""`daemonbus up` runs an API server and writes a kubeconfig the real kubectl uses as it is;
`daemonbus kubeconfig` prints one for the running stack; unsafe options are refused."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import yaml
from click.testing import CliRunner

from services.cli.main import cli
from tests.integration.apiserver_kit import free_port, kubectl_binary
from tests.integration.stack import ROOT, wait_for


def test_up_writes_a_kubeconfig_that_kubectl_uses(tmp_path: Path) -> None:
    kubectl = kubectl_binary()
    home = tmp_path / "home"
    port = free_port()
    env = dict(os.environ, DAEMONBUS_HOME=str(home), PYTHONPATH=str(ROOT))
    env.pop("DAEMONBUS_REDIS_URL", None)
    env.pop("DAEMONBUS_PREFIX", None)
    log = open(tmp_path / "up.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "services.cli.main", "up", "--nodes", "2",
                             "--workers", "1", "--demo", "--apiserver-port", str(port)],
                            env=env, stdout=log, stderr=subprocess.STDOUT, cwd=str(ROOT))
    kubeconfig = home / "kubeconfig"
    try:
        # the stack says it is up only once the API server answers: the first kubectl works
        wait_for(lambda: "Ctrl-C stops everything." in (tmp_path / "up.log").read_text(),
                 timeout=60, what="the stack up")
        kube_env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path),
                    "KUBECONFIG": str(kubeconfig)}
        first = subprocess.run([kubectl, "--cache-dir", str(tmp_path / "cache"), "get", "ds",
                                "-A", "-o", "name"], capture_output=True, text=True,
                               env=kube_env, timeout=30)
        assert first.returncode == 0, first.stderr
        assert first.stdout.split() == ["daemonset.apps/fluentd-elasticsearch"]
        assert f"export KUBECONFIG={kubeconfig}" in (tmp_path / "up.log").read_text()
        assert oct(kubeconfig.stat().st_mode & 0o777) == "0o600"
        assert f"fleet view: https://127.0.0.1:{port}/ui" in (tmp_path / "up.log").read_text()
        cfg = yaml.safe_load(kubeconfig.read_text())
        assert cfg["current-context"] == "daemonbus"
        cluster = cfg["clusters"][0]["cluster"]
        assert cluster["server"] == f"https://127.0.0.1:{port}"
        assert cluster["certificate-authority-data"]
        printed = CliRunner(env={"DAEMONBUS_HOME": str(home)}).invoke(cli, ["kubeconfig"])
        assert printed.exit_code == 0, printed.output
        assert yaml.safe_load(printed.output) == cfg
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        log.close()
    assert proc.returncode == 0


def test_apiserver_refuses_a_non_loopback_bind_without_tls(tmp_path: Path) -> None:
    res = CliRunner(env={"DAEMONBUS_HOME": str(tmp_path)}).invoke(
        cli, ["run", "apiserver", "--bind", "0.0.0.0", "--no-tls"])
    assert res.exit_code != 0
    assert "refusing to serve 0.0.0.0 without TLS" in res.output


def test_apiserver_refuses_a_token_file_with_an_unknown_role(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("0123456789abcdef0123,alice,root\n")
    res = CliRunner(env={"DAEMONBUS_HOME": str(tmp_path)}).invoke(
        cli, ["run", "apiserver", "--token-file", str(tokens)])
    assert res.exit_code != 0
    assert "unknown role 'root'" in res.output


def test_apiserver_says_when_its_port_is_taken(tmp_path: Path, redis_url: str,
                                               prefix: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        res = subprocess.run([sys.executable, "-m", "services.cli.main", "--redis-url",
                              redis_url, "--prefix", prefix, "run", "apiserver", "--port",
                              str(port)],
                             env=dict(os.environ, DAEMONBUS_HOME=str(tmp_path),
                                      PYTHONPATH=str(ROOT)),
                             capture_output=True, text=True, timeout=60, cwd=str(ROOT))
    assert res.returncode == 1
    assert f"Error: cannot listen on 127.0.0.1:{port}: " in res.stderr
    assert "Traceback" not in res.stderr
