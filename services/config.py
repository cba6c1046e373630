"""Where a command finds its Redis: ``--redis-url``, else ``DAEMONBUS_REDIS_URL``, else the
URL recorded by a running ``daemonbus up`` (in ``$DAEMONBUS_HOME``, default ~/.daemonbus)."""

from __future__ import annotations

import os
from pathlib import Path

from shared.store.keys import DEFAULT_PREFIX


def home() -> Path:
    return Path(os.environ.get("DAEMONBUS_HOME") or Path.home() / ".daemonbus")


def recorded_url_file() -> Path:
    return home() / "redis-url"


def record_url(url: str) -> None:
    path = recorded_url_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(url + "\n")
    path.chmod(0o600)


def forget_url(url: str) -> None:
    path = recorded_url_file()
    try:
        if path.read_text().strip() == url:
            path.unlink()
    except OSError:
        pass


def redis_url(explicit: str | None = None) -> str | None:
    if explicit:
        return explicit
    env = os.environ.get("DAEMONBUS_REDIS_URL")
    if env:
        return env
    try:
        recorded = recorded_url_file().read_text().strip()
    except OSError:
        return None
    return recorded or None


def prefix(explicit: str | None = None) -> str:
    return explicit or os.environ.get("DAEMONBUS_PREFIX") or DEFAULT_PREFIX
