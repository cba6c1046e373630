"""The health endpoints answer as kube-apiserver's: ``/readyz`` says ready only once the watch
cache holds its first list of the log and its tail reads the log (``daemonbus up`` waits for
it); ``?verbose`` lists the checks, ``?exclude=`` skips one, a failure lists them all without
the reason, and ``/readyz/<check>`` runs one and says why."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from services.apiserver import app, health


def _cache(ready: bool = False, unavailable: str | None = None) -> Any:
    event = asyncio.Event()
    if ready:
        event.set()
    return SimpleNamespace(ready=event, unavailable=unavailable)


def _ask(cache: Any, path: str = "/readyz") -> web.Response:
    application = web.Application()
    application[app.STATE_KEY] = SimpleNamespace(cache=cache)  # type: ignore[assignment]
    request = make_mocked_request("GET", path, app=application)
    endpoint = request.path.strip("/")
    return asyncio.run(health.handler(endpoint, app._cache)(request))


def test_readyz_is_500_until_the_watch_cache_has_listed() -> None:
    cache = _cache()
    resp = _ask(cache)
    assert resp.status == 500
    assert resp.text == ("[+]ping ok\n[+]log ok\n[-]watch-cache failed: reason withheld\n"
                         "readyz check failed\n")
    cache.ready.set()
    resp = _ask(cache)
    assert resp.status == 200 and resp.text == "ok"


def test_verbose_lists_every_check_and_exclude_skips_one() -> None:
    cache = _cache(ready=True)
    resp = _ask(cache, "/readyz?verbose")
    assert resp.status == 200
    assert resp.text == "[+]ping ok\n[+]log ok\n[+]watch-cache ok\nreadyz check passed\n"
    resp = _ask(_cache(), "/readyz?verbose&exclude=watch-cache&exclude=etcd")
    assert resp.status == 200
    assert resp.text == ("[+]ping ok\n[+]log ok\n[+]watch-cache excluded: ok\n"
                         'warn: some health checks cannot be excluded: no matches for "etcd"\n'
                         "readyz check passed\n")


def test_a_log_that_cannot_be_read_fails_readyz_and_healthz_not_livez() -> None:
    cache = _cache(ready=True, unavailable="Redis is unavailable (connection refused)")
    assert _ask(cache, "/readyz").status == 500
    resp = _ask(cache, "/healthz")
    assert resp.status == 500
    assert resp.text == "[+]ping ok\n[-]log failed: reason withheld\nhealthz check failed\n"
    resp = _ask(cache, "/livez?verbose")
    assert resp.status == 200 and resp.text == "[+]ping ok\nlivez check passed\n"


def test_one_check_says_why_it_failed() -> None:
    cache = _cache(unavailable="Redis is unavailable (connection refused)")
    assert health.one_check("log", cache) == (
        500, "internal server error: Redis is unavailable (connection refused)\n")
    assert health.one_check("watch-cache", cache) == (
        500, "internal server error: the log is not listed yet\n")
    assert health.one_check("ping", cache) == (200, "ok")
