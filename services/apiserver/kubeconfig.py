"""The kubeconfig that points kubectl (and client libraries) at a daemonbus API server:
cluster, user and context all named ``daemonbus``, a bearer token, the CA when TLS is on.
``build`` decides; ``write`` and ``record_server`` act."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml

from services import config as services_config
from services.apiserver import auth

NAME = "daemonbus"


def build(server: str, token: str, ca_pem: bytes | None = None,
          namespace: str = "default") -> dict[str, Any]:
    cluster: dict[str, Any] = {"server": server}
    if ca_pem:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    return {
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": NAME, "cluster": cluster}],
        "users": [{"name": NAME, "user": {"token": token}}],
        "contexts": [{"name": NAME, "context": {"cluster": NAME, "user": NAME,
                                                "namespace": namespace}}],
        "current-context": NAME,
    }


def dump(config: dict[str, Any]) -> str:
    return yaml.safe_dump(config, sort_keys=False)


def write(path: Path, config: dict[str, Any]) -> None:
    """Write a kubeconfig readable by its owner only (it holds a token)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    services_config.write_private(path, dump(config))


def record_server(directory: Path, url: str, ca: Path | None) -> None:
    """Remember where the local API server listens (and its CA) for `daemonbus kubeconfig`."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "url").write_text(url + "\n")
    ca_record = directory / "ca-file"
    if ca is not None:
        ca_record.write_text(str(ca) + "\n")
    elif ca_record.exists():
        ca_record.unlink()


def recorded_server(directory: Path) -> tuple[str, Path | None] | None:
    try:
        url = (directory / "url").read_text().strip()
    except OSError:
        return None
    try:
        ca: Path | None = Path((directory / "ca-file").read_text().strip())
    except OSError:
        ca = None
    return url, ca


def for_user(server: str, token_file: Path, ca: Path | None, user: str | None = None,
             namespace: str = "default") -> dict[str, Any]:
    """A kubeconfig for ``user`` of a token file (default: its first admin). Raises
    auth.TokenFileError when the file has no such user."""
    users = auth.TokenFile(token_file).users
    wanted = [(t, u) for t, u in users.items()
              if (u.name == user if user else u.role == "admin")]
    if not wanted:
        raise auth.TokenFileError(f"{token_file}: no user {user!r}" if user
                                  else f"{token_file}: no admin user")
    ca_pem = ca.read_bytes() if ca is not None and server.startswith("https:") else None
    return build(server, wanted[0][0], ca_pem, namespace)
