"""Finding Redis: password and TLS URLs, the embedded server of `daemonbus up`, and the local
stack's lifecycle (children started, shown, and all stopped on SIGTERM)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner

from services import common, config
from services.cli.main import cli
from shared.store import client as store_client
from shared.store.server import RedisServer, free_port
from tests.integration.stack import ROOT, wait_for
from tests.integration.up import start_with_demo


@pytest.fixture
def password_server(tmp_path: Path):  # type: ignore[no-untyped-def]
    server = RedisServer(data_dir=str(tmp_path / "pw"), password="s3cret-pw").start()
    yield server
    server.stop()


def test_password_in_the_url_is_used(password_server: RedisServer, prefix: str) -> None:
    runner = CliRunner()
    ok = runner.invoke(cli, ["--redis-url", password_server.url, "--prefix", prefix,
                             "node", "add", "n1"])
    assert ok.exit_code == 0, ok.output
    got = runner.invoke(cli, ["--redis-url", password_server.url, "--prefix", prefix,
                              "get", "nodes", "-o", "name"])
    assert got.output.strip() == "node/n1"


def test_wrong_password_is_a_clear_error_without_traceback(password_server: RedisServer,
                                                           prefix: str) -> None:
    bad = password_server.url.replace("s3cret-pw", "wrong")
    res = CliRunner().invoke(cli, ["--redis-url", bad, "--prefix", prefix, "get", "nodes"])
    assert res.exit_code == 1
    assert "Traceback" not in res.output
    assert "wrong" not in res.output  # the password is never echoed


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is needed to make a cert")
def test_rediss_url_connects_over_tls(tmp_path: Path, prefix: str) -> None:
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    from shared.store.server import find_server_binary, free_port

    port = free_port()
    proc = subprocess.Popen([str(find_server_binary()), "--port", "0", "--tls-port", str(port),
                             "--tls-cert-file", str(cert), "--tls-key-file", str(key),
                             "--tls-ca-cert-file", str(cert), "--tls-auth-clients", "no",
                             "--save", "", "--dir", str(tmp_path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        url = f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={cert}"
        runner = CliRunner()

        def added() -> bool:
            res = runner.invoke(cli, ["--redis-url", url, "--prefix", prefix,
                                      "node", "add", "tls-node"])
            return res.exit_code == 0 or "already exists" in res.output

        wait_for(added, timeout=10, what="the TLS server to accept a write")
        got = runner.invoke(cli, ["--redis-url", url, "--prefix", prefix, "get", "nodes",
                                  "-o", "name"])
        assert got.output.strip() == "node/tls-node"
    finally:
        proc.terminate()
        proc.wait(5)


def test_up_runs_the_stack_records_its_url_and_stops_everything(tmp_path: Path) -> None:
    up = start_with_demo(tmp_path, nodes=3, workers=1)
    proc, home, url = up.proc, up.home, up.url
    url_file = home / "redis-url"
    try:
        assert (home / "data" / "appendonlydir").exists() or any(
            p.name.startswith("appendonly") for p in (home / "data").iterdir())
        out = (tmp_path / "up.log").read_text()
        for name in ("watcher", "reconciler-1", "status-writer", "gc", "compactor", "node-agent"):
            assert name in out
        assert url not in out  # the password stays in the files, off the terminal
        assert config.redacted(url) in out
        password = (home / "redis-password").read_text().strip()
        assert len(password) == 64 and f":{password}@127.0.0.1:" in url
        for path, mode in ((home, 0o700), (home / "data", 0o700),
                           (home / "redis-password", 0o600), (url_file, 0o600)):
            assert stat.S_IMODE(path.stat().st_mode) == mode, path
        with pytest.raises(redis.AuthenticationError):
            redis.Redis.from_url(url.replace(password, "guess")).ping()
        with pytest.raises(redis.RedisError, match=r"(?i)auth"):
            redis.Redis.from_url(url.replace(f":{password}@", "")).ping()
        children = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True,
                                  text=True).stdout.split()
        assert len(children) >= 7  # six processes and redis-server
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        up.close()
    assert proc.returncode == 0
    assert "stopped" in (tmp_path / "up.log").read_text()
    assert not (home / "redis-url").exists()
    for pid in children:
        assert not Path(f"/proc/{pid}").exists() or \
            Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"


def test_connections_bound_every_wait_on_a_vanished_redis(redis_url: str) -> None:
    """A partition must not hold a process on one socket: connect and reply timeouts, and the
    TCP options that fail an idle or an unacknowledged connection in about 25 s, are set on
    the connections themselves (not left to the client library's version)."""
    client = store_client.connect(redis_url)
    conn = client.connection_pool.get_connection()
    try:
        sock = conn._sock
        assert sock is not None
        assert sock.gettimeout() == store_client.READ_TIMEOUT
        assert conn.socket_connect_timeout == store_client.CONNECT_TIMEOUT
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        if hasattr(socket, "TCP_USER_TIMEOUT"):
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == \
                store_client.DEAD_PEER_SECONDS * 1000
            idle = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE)
            interval = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL)
            probes = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT)
            assert idle + interval * probes <= store_client.DEAD_PEER_SECONDS
    finally:
        client.connection_pool.release(conn)
        client.close()


def _listening_addresses(port: int) -> set[str]:
    """Local addresses (hex, as /proc/net/tcp writes them) of sockets listening on ``port``."""
    out = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        addr, hexport = local.split(":")
        if state == "0A" and int(hexport, 16) == port:  # 0A: LISTEN
            out.add(addr)
    return out


def test_metrics_listen_on_loopback_unless_told_otherwise() -> None:
    loopback, anywhere = free_port(), free_port()
    common.serve_metrics(loopback)
    common.serve_metrics(anywhere, "0.0.0.0")
    assert _listening_addresses(loopback) == {"0100007F"}  # 127.0.0.1
    assert _listening_addresses(anywhere) == {"00000000"}


def _written_by_a_newer_server(data: Path) -> Path:
    """An append-only directory whose base file has an RDB format no server reads yet."""
    aof = data / "appendonlydir"
    aof.mkdir(parents=True)
    (aof / "appendonly.aof.manifest").write_text("file appendonly.aof.1.base.rdb seq 1 type b\n")
    (aof / "appendonly.aof.1.base.rdb").write_bytes(b"REDIS0099\xff")
    return data


def test_a_server_that_cannot_read_the_data_says_why_and_the_next_one_is_tried(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from shared.store import server as server_module

    data = _written_by_a_newer_server(tmp_path / "newer")
    with pytest.raises(RuntimeError, match=r"Can't handle RDB format version 99.*"
                       r"was written by a newer server"):
        RedisServer(binary=server_module.find_server_binary(), data_dir=str(data),
                    appendonly=True).start()

    # an older server first (it says what an older redis-server says of newer data), then
    # one that reads the directory: the second is started, the first named with its words
    older = tmp_path / "older-redis-server"
    older.write_text("#!/bin/sh\ncat >/dev/null\necho \"1:M 06 Dec 2026 18:35:12.588 # Can't "
                     "handle RDB format version 11\"\nexit 1\n")
    older.chmod(0o755)
    real = str(server_module.find_server_binary())
    monkeypatch.setattr(server_module, "server_binaries", lambda: [str(older), real])
    started = RedisServer(data_dir=str(tmp_path / "readable"), appendonly=True).start()
    try:
        assert started.binary == real
        assert started.passed_over == [(str(older), "Can't handle RDB format version 11")]
        assert redis.Redis.from_url(started.url).ping()
    finally:
        started.stop()


def test_up_says_why_its_redis_did_not_start_without_a_traceback(tmp_path: Path) -> None:
    data = _written_by_a_newer_server(tmp_path / "data")
    env = dict(os.environ, DAEMONBUS_HOME=str(tmp_path / "home"), PYTHONPATH=str(ROOT))
    env.pop("DAEMONBUS_REDIS_URL", None)
    up = subprocess.run([sys.executable, "-m", "services.cli.main", "up", "--nodes", "0",
                         "--data-dir", str(data)], env=env, capture_output=True, text=True,
                        timeout=60, cwd=str(ROOT))
    assert up.returncode == 1, up
    assert "Traceback" not in up.stderr
    assert up.stderr.startswith("Error: Redis did not start: ")
    assert "Can't handle RDB format version 99" in up.stderr
    assert f"{data} was written by a newer server" in up.stderr
