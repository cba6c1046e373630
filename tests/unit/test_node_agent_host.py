"""What a real node agent reports of its host: the OS image as kubelet's."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from services.node_agent import host


@pytest.mark.parametrize(("text", "image"), [
    ('NAME="Debian GNU/Linux"\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n',
     "Debian GNU/Linux 12 (bookworm)"),
    ("PRETTY_NAME=Alpine Linux v3.20\n", "Alpine Linux v3.20"),
    ('NAME="Fedora Linux"\nVERSION_ID=40\n', "Linux"),  # no PRETTY_NAME
])
def test_the_os_image_is_the_os_release_pretty_name(tmp_path: Path, text: str, image: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platform, "system", lambda: "Linux")
    release = tmp_path / "os-release"
    release.write_text(text)
    assert host.os_image(str(release)) == image


def test_without_an_os_release_the_os_image_is_linux(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platform, "system", lambda: "Linux")
    assert host.os_image(str(tmp_path / "missing")) == "Linux"


def test_the_node_ip_is_the_address_on_the_route_to_redis() -> None:
    # to one of this machine's own addresses the route starts at that address
    own = host.primary_ip()
    assert own != "127.0.0.1", "this test needs a network interface"
    assert host.route_ip(f"redis://:secret@{own}:6379/0") == own
    for local in ("redis://127.0.0.1:6379/0", "redis://localhost:6379", None, "",
                  "redis://no-such-host.invalid:6379"):
        assert host.route_ip(local) is None
