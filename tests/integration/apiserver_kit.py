"""A live stack with an API server, and the real kubectl pointed at it.

``ApiServer`` starts ``daemonbus run apiserver`` (TLS with a generated CA, a token file with
an admin, an editor and a viewer) beside the controller processes of a ``Stack``, writes a
kubeconfig per user into the test's temp folder, and runs the real ``kubectl`` with a temp
HOME and cache dir. A missing kubectl fails the test (never skips it).
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from services.apiserver import auth, kubeconfig
from shared.store.server import free_port
from tests import testdata
from tests.integration.stack import Stack, wait_for

__all__ = ["ApiServer", "free_port", "kubectl_binary", "manifest", "running"]

TESTDATA = testdata.DAEMONSETS
USERS = {"admin": "admin", "editor": "edit", "viewer": "view"}


def kubectl_binary() -> str:
    found = shutil.which("kubectl")
    if found is None:
        pytest.fail("kubectl is not on PATH: these tests need the real kubectl")
    return found


class ApiServer:
    def __init__(self, stack: Stack, tmp: Path) -> None:
        self.stack = stack
        self.tmp = tmp
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.tokens = {name: auth.new_token() for name in USERS}
        self.token_file = tmp / "tokens"
        auth.write_token_file(self.token_file, [(self.tokens[n], n, r)
                                                for n, r in USERS.items()])
        self.cert_dir = tmp / "pki"
        self.home = tmp / "kube-home"
        self.home.mkdir()
        self.kubectl_path = kubectl_binary()

    def start(self, name: str = "apiserver", port: int | None = None) -> None:
        port = port or self.port
        self.stack.start(name, "apiserver", "--port", str(port), "--token-file",
                         str(self.token_file), "--cert-dir", str(self.cert_dir))
        wait_for(lambda: (self.cert_dir / "ca.crt").exists(), timeout=30, what="the CA")
        wait_for(lambda: self._ready(port), timeout=30, what=f"{name} ready")

    def _ready(self, port: int) -> bool:
        try:
            code, _ = self.request("GET", "/readyz", port=port, token=None)
        except OSError:
            return False
        return code == 200

    def kubeconfig(self, user: str = "admin") -> Path:
        path = self.tmp / f"kubeconfig-{user}"
        if not path.exists():
            cfg = kubeconfig.build(self.url, self.tokens[user],
                                   (self.cert_dir / "ca.crt").read_bytes())
            kubeconfig.write(path, cfg)
        return path

    def _run_as(self, args: tuple[str, ...], user: str, env: dict[str, str] | None,
                ) -> tuple[list[str], dict[str, str]]:
        """kubectl's words and environment for ``args`` as ``user`` (``env``: more)."""
        return ([self.kubectl_path, "--cache-dir", str(self.home / "cache"), *args],
                {"PATH": os.environ.get("PATH", ""), "HOME": str(self.home),
                 "KUBECONFIG": str(self.kubeconfig(user)), **(env or {})})

    def kubectl(self, *args: str, user: str = "admin", input: str | None = None,
                check: bool = True, timeout: float = 60,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        argv, full_env = self._run_as(args, user, env)
        proc = subprocess.run(argv, input=input, capture_output=True, text=True,
                              env=full_env, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}):\n"
                                 f"stdout: {proc.stdout}\nstderr: {proc.stderr}")
        return proc

    def popen(self, *args: str, user: str = "admin", env: dict[str, str] | None = None,
              **how: Any) -> subprocess.Popen[Any]:
        """kubectl ``args`` started as ``user`` and left running (``how``: Popen's
        options)."""
        argv, full_env = self._run_as(args, user, env)
        return subprocess.Popen(argv, env=full_env, **how)

    def json(self, *args: str, user: str = "admin") -> Any:
        return json.loads(self.kubectl(*args, "-o", "json", user=user).stdout)

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.cert_dir / "ca.crt"))

    def request(self, method: str, path: str, body: Any = None, token: str | None = "admin",
                headers: dict[str, str] | None = None, port: int | None = None,
                ) -> tuple[int, Any]:
        """One raw HTTPS request; ``token`` names a user (None: no token)."""
        data = body if isinstance(body, bytes) else (
            json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(f"https://127.0.0.1:{port or self.port}{path}",
                                     data=data, method=method)
        req.add_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        if token is not None:
            req.add_header("Authorization", f"Bearer {self.tokens.get(token, token)}")
        try:
            with urllib.request.urlopen(req, context=self.ssl_context(), timeout=30) as resp:
                raw = resp.read()
                code = resp.status
        except urllib.error.HTTPError as err:
            raw, code = err.read(), err.code
        try:
            return code, json.loads(raw) if raw else None
        except ValueError:
            return code, raw.decode()


def manifest(name: str) -> Any:
    return yaml.safe_load((TESTDATA / name).read_text())


def in_front(stack: Stack, tmp: Path, nodes: int = 3,
             agent_args: tuple[str, ...] = ()) -> ApiServer:
    """``stack`` started with one worker and ``nodes`` simulated nodes (their agent started
    with ``agent_args``), and an API server in front of it (whoever owns the stack stops
    them all)."""
    stack.start_all(workers=1, nodes=nodes, agent_args=agent_args)
    wait_for(lambda: len(stack.store.list("Node")) == nodes, what=f"{nodes} nodes")
    server = ApiServer(stack, tmp)
    server.start()
    return server


@contextmanager
def running(redis_url: str, name: str, tmp: Path, nodes: int = 3,
            agent_args: tuple[str, ...] = ()) -> Iterator[ApiServer]:
    """A stack of one worker and ``nodes`` simulated nodes (their agent started with
    ``agent_args``) on prefix ``name``, with an API server in front: for a module-scoped
    fixture of the API server's tests."""
    stack = Stack(redis_url, f"{name}{os.getpid()}", tmp)
    try:
        yield in_front(stack, tmp, nodes, agent_args)
    finally:
        stack.stop()
