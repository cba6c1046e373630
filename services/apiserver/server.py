"""``daemonbus run apiserver``: settle the options safely, then serve. Acts.

Safe by default: a token file is always required (without ``--token-file`` the default one
under ``$DAEMONBUS_HOME/apiserver`` is used, made with one admin token when missing), and
TLS is on, with a certificate from a generated CA. ``--no-tls`` is for loopback only (a
non-loopback bind without TLS is refused); note that kubectl sends no bearer token over
plain HTTP, so it cannot use such a server (the Python client can). The process is
stateless: any number of replicas may serve one Redis.
"""

from __future__ import annotations

import asyncio
import gc
import ipaddress
import logging
import signal
import ssl
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services import common, config
from services.apiserver import app, auth, satokens, tls
from services.apiserver.watchcache import WatchCache
from shared.api import served
from shared.model import kinds, meta, priority
from shared.store import errors as store_errors
from shared.store.client import Store

Obj = dict[str, Any]
log = logging.getLogger(__name__)

DEFAULT_PORT = 6443
POOL_THREADS = 16
#: who the log names for the API server's own writes (upstream's loopback client's name)
SYSTEM_USER = "system:apiserver"
#: how often the API server looks for a built-in namespace without its object (upstream's
#: system namespaces controller: every minute)
SYSTEM_NAMESPACES_EVERY = 60.0


class ConfigError(Exception):
    """The options would make an unsafe or impossible server: it does not serve."""


@dataclass
class Options:
    bind: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    token_file: Path | None = None
    tls: bool = True
    cert_dir: Path | None = None
    service_account_key_file: Path | None = None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def default_token_file() -> Path:
    return config.apiserver_dir() / "tokens"


def ensure_token_file(path: Path) -> Path:
    """The default token file, made with one admin token when missing. Acts."""
    if not path.exists():
        auth.write_token_file(path, [(auth.new_token(), "admin", "admin")])
        log.info("wrote an admin token to %s", path)
    return path


def pki_dir(opts: Options) -> Path:
    return opts.cert_dir or config.apiserver_dir() / "pki"


def issuer(opts: Options) -> satokens.Issuer:
    """The issuer of ServiceAccount tokens, its key made when missing; raises
    ConfigError."""
    try:
        return satokens.Issuer(satokens.load_key(opts.service_account_key_file
                                                 or pki_dir(opts) / "sa.key"))
    except satokens.SigningKeyError as err:
        raise ConfigError(str(err)) from err


def settle(opts: Options) -> tuple[auth.TokenFile, ssl.SSLContext | None, Path | None]:
    """The token file, the TLS context and the CA file of ``opts``; raises ConfigError."""
    use_tls = opts.tls
    if not is_loopback(opts.bind) and not use_tls:
        raise ConfigError(f"refusing to serve {opts.bind} without TLS: bind 127.0.0.1, or "
                          "drop --no-tls")
    path = opts.token_file or ensure_token_file(default_token_file())
    try:
        tokens = auth.TokenFile(path)
    except auth.TokenFileError as err:
        raise ConfigError(str(err)) from err
    if not use_tls:
        return tokens, None, None
    ca, crt, key = tls.ensure_serving(pki_dir(opts), opts.bind)
    return tokens, tls.server_context(crt, key), ca


def run(redis_url: str | None, prefix: str | None, opts: Options,
        metrics: common.Metrics = (None, common.METRICS_BIND)) -> None:
    tokens, context, _ca = settle(opts)  # refuse unsafe options before anything starts
    signer = issuer(opts)
    common.setup_logging("apiserver")
    common.tune_gc(streaming=True)
    common.serve_metrics(*metrics)
    store = common.open_store(redis_url, prefix)
    asyncio.run(_main(store, tokens, context, opts, signer))


async def _main(store: object, tokens: auth.TokenFile, context: ssl.SSLContext | None,
                opts: Options, signer: satokens.Issuer) -> None:
    assert isinstance(store, Store)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    cache = WatchCache(store, served.STORED_KINDS)
    scheme = "https" if context else "http"
    state = app.State(store=store, cache=cache, tokens=tokens, issuer=signer,
                      pool=ThreadPoolExecutor(POOL_THREADS, thread_name_prefix="store"),
                      server_address=f"{opts.bind}:{opts.port}")
    log.info("apiserver %s://%s:%d (%d users)", scheme, opts.bind, opts.port,
             len(tokens.users))
    collector = asyncio.create_task(full_collections(cache))
    keeper = asyncio.create_task(keep_system_namespaces(state))
    try:
        await app.serve(state, opts.bind, opts.port, context, stop)
    except app.ListenError as err:
        raise ConfigError(str(err)) from err
    finally:
        collector.cancel()
        keeper.cancel()
        state.pool.shutdown(wait=False, cancel_futures=True)


async def keep_system_namespaces(state: app.State,
                                 every: float = SYSTEM_NAMESPACES_EVERY) -> None:
    """Acts: as upstream's API servers do, give each namespace every cluster has
    (``kinds.BUILTIN_NAMESPACES``) its Namespace object when it has none, once the watch
    cache is ready and every ``every`` seconds after, so each has a uid and a
    resourceVersion of the log's (tools take kube-system's uid for the cluster's id). It
    keeps the creation time the namespace had without one. Likewise each built-in priority
    class (``priority.SYSTEM``; they resolve without their objects, which ``kubectl get
    priorityclass`` shows). Replicas race harmlessly: the second create of one is
    AlreadyExists."""
    await state.cache.ready.wait()
    while True:
        # read on the event loop, as every read of the watch cache; the writes in the pool
        missing = [(name, meta.creation_timestamp(state.namespace(name) or {}) or None)
                   for name in kinds.BUILTIN_NAMESPACES
                   if name not in state.cache.namespaces.stored]
        classes = state.cache.objects.get(kinds.PRIORITY_CLASS.kind, {})
        missing_classes = [pc for pc in priority.system_classes()
                           if "/" + meta.name(pc) not in classes]
        try:
            for name, created in missing:
                await state.run(create_system_namespace, state.store, name, created)
            for pc in missing_classes:
                await state.run(create_system_object, state.store, pc)
        except Exception as err:  # Redis away, say: the next round tries again
            log.warning("cannot create the built-in namespaces' and priority classes' "
                        "objects yet: %s", err)
        await asyncio.sleep(every)


def create_system_namespace(store: Store, name: str, created: str | None) -> None:
    """Acts: create the Namespace ``name`` as the API server, created at ``created`` (None:
    now); no write when another replica stored it first."""
    create_system_object(store, {"apiVersion": "v1", "kind": kinds.NAMESPACE.kind,
                                 "metadata": {"name": name}}, created)


def create_system_object(store: Store, obj: Obj, created: str | None = None) -> None:
    """Acts: create ``obj`` as the API server (a built-in namespace's object, a built-in
    priority class), created at ``created`` (None: now); no write when another replica
    stored it first."""
    try:
        store.as_writer(SYSTEM_USER).create(obj, created=created)
    except store_errors.AlreadyExistsError:
        return
    log.info("created the %s object of %s", obj["kind"], meta.name(obj))


async def full_collections(cache: WatchCache) -> None:
    """Acts: this process's full garbage collections (``common.tune_gc(streaming=True)``
    leaves them to it), made between bursts of changes, when no watch is waiting for one."""
    last_full = time.monotonic()
    while True:
        await asyncio.sleep(common.FULL_GC_IDLE_SECONDS)
        if common.full_collection_due(time.monotonic(), last_full, cache.last_change):
            gc.collect()
            last_full = time.monotonic()
