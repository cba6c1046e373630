"""``free_port``: a loopback port to listen on, below the range the kernel hands to outgoing
connections (one inside it can be taken by any connection before the listener binds)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from shared.store import server


def _listen(port: int) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))  # raises if the port is not free


def test_the_port_is_below_the_range_of_outgoing_connections(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ranges = tmp_path / "ip_local_port_range"
    ranges.write_text("40000\t60999\n")
    monkeypatch.setattr(server, "EPHEMERAL_RANGE", str(ranges))
    ports = {server.free_port() for _ in range(20)}
    assert all(40000 - 16384 <= p < 40000 for p in ports), ports
    assert len(ports) > 1  # drawn at random: concurrent callers rarely meet
    for p in ports:
        _listen(p)


def test_a_port_in_use_is_drawn_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        ranges = tmp_path / "ip_local_port_range"
        ranges.write_text(f"{port + 1} 60999\n")
        monkeypatch.setattr(server, "EPHEMERAL_RANGE", str(ranges))
        draws: list[int] = []
        real = server.random.randrange

        def draw(low: int, high: int) -> int:  # the taken port twice, then at random
            draws.append(port if len(draws) < 2 else real(low, high))
            return draws[-1]

        monkeypatch.setattr(server.random, "randrange", draw)
        got = server.free_port()
        assert got != port and len(draws) == 3 and got == draws[-1]
        _listen(got)


def test_without_the_range_the_kernel_picks(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "EPHEMERAL_RANGE", str(tmp_path / "missing"))
    _listen(server.free_port())
