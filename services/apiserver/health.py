"""The health endpoints, as kube-apiserver serves them: ``/livez``, ``/readyz`` and the older
``/healthz``, each a list of named checks.

``GET /readyz`` answers ``ok`` when every check passes; ``?verbose`` lists them
(``[+]ping ok`` ... ``readyz check passed``), ``?exclude=NAME`` skips one. A failure is a 500
that lists every check, without the failure's reason (these paths need no token: the reason
goes to the server's log); ``/readyz/NAME`` runs one check, for an authenticated user, and
says why it failed. The checks: ``ping`` (the server answers), ``log`` (the watch cache's
tail reads the log from Redis) and ``watch-cache`` (it holds its first list of the log:
until then every read and watch waits). ``/livez`` is ``ping`` alone, so that an outage of
Redis does not get a supervisor to restart API servers that would then wait just the same.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from services.apiserver.watchcache import WatchCache

log = logging.getLogger("apiserver")

Check = Callable[[WatchCache], "str | None"]
"""A check: None when it passes, else why it failed."""


def _ping(_cache: WatchCache) -> str | None:
    return None


def _log(cache: WatchCache) -> str | None:
    return cache.unavailable


def _watch_cache(cache: WatchCache) -> str | None:
    return None if cache.ready.is_set() else "the log is not listed yet"


CHECKS: dict[str, Check] = {"ping": _ping, "log": _log, "watch-cache": _watch_cache}
ENDPOINTS: dict[str, tuple[str, ...]] = {
    "livez": ("ping",),
    "healthz": ("ping", "log"),
    "readyz": ("ping", "log", "watch-cache"),
}
"""Each endpoint's checks, in the order they are listed."""


def report(endpoint: str, cache: WatchCache, query: dict[str, list[str]]) -> tuple[int, str]:
    """The status and text of ``GET /<endpoint>`` with ``query`` (its values by name).
    Decides."""
    excluded = set(query.get("exclude", []))
    lines: list[str] = []
    failed: list[str] = []
    for name in ENDPOINTS[endpoint]:
        if name in excluded:
            excluded.discard(name)
            lines.append(f"[+]{name} excluded: ok\n")
            continue
        why = CHECKS[name](cache)
        if why is None:
            lines.append(f"[+]{name} ok\n")
        else:
            lines.append(f"[-]{name} failed: reason withheld\n")
            failed.append(f"{name}: {why}")
    if excluded:
        names = ",".join(f'"{n}"' for n in sorted(excluded))
        lines.append(f"warn: some health checks cannot be excluded: no matches for {names}\n")
    if failed:
        log.debug("%s check failed: %s", endpoint, "; ".join(failed))  # the tail warns
        return 500, "".join(lines) + f"{endpoint} check failed\n"
    if "verbose" not in query:
        return 200, "ok"
    return 200, "".join(lines) + f"{endpoint} check passed\n"


def one_check(name: str, cache: WatchCache) -> tuple[int, str]:
    """The status and text of ``GET /<endpoint>/<name>``. Decides."""
    why = CHECKS[name](cache)
    return (200, "ok") if why is None else (500, f"internal server error: {why}\n")


def _text(code: int, text: str) -> web.Response:
    return web.Response(status=code, text=text, headers={"X-Content-Type-Options": "nosniff"})


def handler(endpoint: str, cache_of: Callable[[web.Request], WatchCache],
            ) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The handler of ``/<endpoint>``; ``cache_of`` finds the server's watch cache."""
    async def root(request: web.Request) -> web.Response:
        query = {k: request.query.getall(k) for k in set(request.query.keys())}
        return _text(*report(endpoint, cache_of(request), query))
    return root


def check_handler(name: str, cache_of: Callable[[web.Request], WatchCache],
                  ) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The handler of ``/<endpoint>/<name>``, the one check."""
    async def one(request: web.Request) -> web.Response:
        return _text(*one_check(name, cache_of(request)))
    return one
