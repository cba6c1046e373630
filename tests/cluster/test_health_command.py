"""``daemonbus health ROLE``, the compose services' health check, on a real Redis and a
metrics endpoint on loopback (no Docker needed)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from services.cli.main import cli
from shared.store.server import free_port


def _serve(text: str) -> Iterator[int]:
    """A metrics page with ``text`` on a loopback port, for the test's duration."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = text.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture
def leader_metrics() -> Iterator[int]:
    yield from _serve("# TYPE daemonbus_watcher_leader gauge\ndaemonbus_watcher_leader 1.0\n")


@pytest.fixture
def standby_metrics() -> Iterator[int]:
    yield from _serve("daemonbus_watcher_leader 0.0\n")


def _health(redis_url: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["health", *args], env={"DAEMONBUS_REDIS_URL": redis_url})
    return result.exit_code, result.output


def test_health_reports_healthy_leader_when_redis_and_metrics_answer(
        redis_url: str, leader_metrics: int) -> None:
    code, out = _health(redis_url, "watcher", "--metrics-port", str(leader_metrics))
    assert (code, out.strip()) == (0, "watcher: healthy (redis ok, metrics ok, leader)")


def test_health_reports_a_standby_watcher(redis_url: str, standby_metrics: int) -> None:
    code, out = _health(redis_url, "watcher", "--metrics-port", str(standby_metrics))
    assert code == 0 and out.strip().endswith("standby)")


def test_health_fails_when_redis_does_not_answer() -> None:
    code, out = _health(f"redis://127.0.0.1:{free_port()}/0", "gc", "--timeout", "1")
    assert code == 1 and out.startswith("gc: unhealthy (redis: ")


def test_health_fails_when_the_process_does_not_answer(redis_url: str) -> None:
    code, out = _health(redis_url, "reconciler", "--metrics-port", str(free_port()),
                        "--timeout", "1")
    assert code == 1 and "redis ok, metrics: " in out


def test_health_fails_when_the_redis_host_does_not_resolve() -> None:
    code, out = _health("redis://no-such-host.invalid:6379/0", "node-agent", "--timeout", "1")
    assert code == 1 and "cannot resolve no-such-host.invalid" in out
