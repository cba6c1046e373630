"""Where a command finds its Redis: ``--redis-url``, else ``DAEMONBUS_REDIS_URL``, else the
URL recorded by a running ``daemonbus up`` (in ``$DAEMONBUS_HOME``, default ~/.daemonbus)."""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

from shared.store.keys import DEFAULT_PREFIX


def home() -> Path:
    return Path(os.environ.get("DAEMONBUS_HOME") or Path.home() / ".daemonbus")


def recorded_url_file() -> Path:
    return home() / "redis-url"


def password_file() -> Path:
    return home() / "redis-password"


def private_dir(path: Path) -> Path:
    """Acts: ``path`` (and its parents) created, and made readable by its owner only."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


def _private_home() -> Path:
    """``home()``, created readable by its owner only."""
    return private_dir(home())


def write_private(path: Path, data: str | bytes) -> None:
    """Acts: write ``data`` to ``path`` created with mode 600 (never briefly readable by
    others, as a write then chmod would be); a file there already is made 600 too."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
    path.chmod(0o600)


def record_url(url: str) -> None:
    _private_home()
    write_private(recorded_url_file(), url + "\n")


def redis_password() -> str:
    """The local stack's Redis password: generated once (256 random bits, hex so it goes
    into a URL as it is) and kept in ``home()/redis-password``, mode 600."""
    path = password_file()
    try:
        existing = path.read_text().strip()
    except OSError:
        existing = ""
    if existing:
        path.chmod(0o600)
        return existing
    _private_home()
    password = secrets.token_hex(32)
    write_private(path, password + "\n")
    return password


def redacted(url: str) -> str:
    """``url`` with its password replaced by ``***`` (for logs and terminals)."""
    return re.sub(r"^(\w+://[^:/@]*:)[^@]*@", r"\1***@", url)


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


def apiserver_dir() -> Path:
    """The API server's token file, certificates and recorded address."""
    return home() / "apiserver"


def kubeconfig_path() -> Path:
    return home() / "kubeconfig"
