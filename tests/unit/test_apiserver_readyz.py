"""``/readyz`` says ready only once the watch cache holds its first list of the log, as
upstream's answers 500 while its caches sync; ``daemonbus up`` waits for it."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from services.apiserver import app


def _ask(cache: Any) -> web.Response:
    application = web.Application()
    application[app.STATE_KEY] = SimpleNamespace(cache=cache)  # type: ignore[assignment]
    request = make_mocked_request("GET", "/readyz", app=application)
    return asyncio.run(app.readiness(request))


def test_readyz_is_500_until_the_watch_cache_has_listed() -> None:
    cache = SimpleNamespace(ready=asyncio.Event())
    resp = _ask(cache)
    assert resp.status == 500
    assert resp.text is not None and resp.text.endswith("readyz check failed\n")
    cache.ready.set()
    resp = _ask(cache)
    assert resp.status == 200 and resp.text == "ok"
