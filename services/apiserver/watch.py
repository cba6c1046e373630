"""WATCH: a chunked stream of JSON lines, one ``{"type", "object"}`` event each, served from
the process's watch cache. Acts (writes to the client).

``resourceVersion`` semantics as upstream: unset or ``"0"`` starts with a synthetic ADDED
for every selected object, then the changes after the cache's position (unset: "the most
recent", consistent, so the caller has first let the cache fold the log in through its tip,
as for a list; ``"0"``: any, the cache as it is); a position starts
right after it (a position older than the cache's window gets an in-stream ERROR event
with a 410 Expired Status); ``sendInitialEvents=true`` (with ``allowWatchBookmarks`` and
``resourceVersionMatch=NotOlderThan``) sends the ADDEDs then a BOOKMARK annotated
``k8s.io/initial-events-end``. ``allowWatchBookmarks`` adds a BOOKMARK every
``BOOKMARK_SECONDS`` and when the watch times out; ``timeoutSeconds`` ends the stream.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping
from typing import Any

import orjson
from aiohttp import web

from services.apiserver import listing, requests
from services.apiserver import status as st
from services.apiserver.requests import Target
from services.apiserver.watchcache import ExpiredError, WatchCache
from shared.store import codec

Obj = dict[str, Any]

BOOKMARK_SECONDS = 10.0
MAX_TIMEOUT = 1800  # upstream's --min-request-timeout: a watch lasts 30 to 60 min by default
MAX_WATCHERS = 1000  # per process; more is 429 TooManyRequests
CATCH_UP_SECONDS = 10.0  # how long a watch from a newer position waits for the cache
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
WRITE_BATCH = 256  # initial or backlog events written to the stream at once


def _event(etype: str, obj: Obj) -> bytes:
    return orjson.dumps({"type": etype, "object": obj}) + b"\n"


def _bookmark(t: Target, rv: str, initial_end: bool = False) -> Obj:
    md: Obj = {"resourceVersion": rv}
    if initial_end:
        md["annotations"] = {INITIAL_EVENTS_END: "true"}
    return {"kind": t.kind, "apiVersion": t.resource.info.api_version, "metadata": md}


class _Stream:
    """The watch's chunked response body, written straight to its connection. The feed
    writes a run of events through ``offer`` as it fans it out, without waking the watch's
    task (``Watcher.send``), unless the connection is behind (its writing paused) or going;
    what it does not take waits in the watcher's buffer for the task, which writes it with
    ``write`` once ``drain`` lets it. Each write is one whole HTTP chunk, framed as aiohttp's
    writer frames it, so the two interleave in one stream: aiohttp wrote the headers at
    ``prepare`` (a StreamResponse sends them at once) and keeps nothing buffered."""

    def __init__(self, request: web.Request) -> None:
        self.protocol = request.protocol
        self.writer = request.writer

    def write(self, data: bytes) -> None:
        transport = self.protocol.transport
        if transport is None or transport.is_closing():
            raise ConnectionResetError("the watch's connection is closed")
        transport.write(b"%x\r\n%b\r\n" % (len(data), data))

    def offer(self, data: bytes) -> bool:
        transport = self.protocol.transport
        if transport is None or transport.is_closing() or self.protocol.writing_paused:
            return False
        transport.write(b"%x\r\n%b\r\n" % (len(data), data))
        return True

    async def drain(self) -> None:
        """Wait until the connection takes more (raises ConnectionResetError if it closed)."""
        if self.protocol.writing_paused:
            await self.writer.drain()


async def serve(request: web.Request, t: Target, cache: WatchCache,
                render: Callable[[Obj, str], Obj], render_key: str,
                mark: Callable[[Obj], Obj]) -> web.StreamResponse:
    """Stream the watch ``t`` with the request's query; ``render(obj, event_type)`` turns
    each object into what the client asked for (the object, a Table of it, its metadata),
    the same for every request with the same ``render_key``, so each event is encoded
    once; ``mark`` turns a bookmark's object (its kind and position) into the same shape."""

    def encoded(etype: str, obj: Obj) -> bytes:
        rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        if not rv:
            return _event(etype, render(obj, etype))
        return cache.encode((t.kind, rv, etype, render_key),
                            lambda: _event(etype, render(obj, etype)))

    q: Mapping[str, str] = request.query
    match = listing.matcher(t, q)
    rv = q.get("resourceVersion") or ""
    bookmarks = requests.boolean(q.get("allowWatchBookmarks"))
    initial = requests.boolean(q.get("sendInitialEvents"))
    timeout = requests.integer(q, "timeoutSeconds")
    if timeout is None or timeout > MAX_TIMEOUT:
        timeout = int(MAX_TIMEOUT * (1 + random.random())) if timeout is None else MAX_TIMEOUT
    if initial and (not bookmarks or q.get("resourceVersionMatch") != listing.NOT_OLDER_THAN):
        raise st.ApiError("Invalid", "sendInitialEvents is forbidden for watch unless the "
                          "WatchList feature is enabled (allowWatchBookmarks=true and "
                          "resourceVersionMatch=NotOlderThan are required)")
    if "sendInitialEvents" in q and not initial and q.get("resourceVersionMatch") \
            not in (None, "", listing.NOT_OLDER_THAN):
        raise st.bad_request("resourceVersionMatch: unsupported with sendInitialEvents")
    if rv not in ("", "0") and codec.id_tuple(rv) == (0, 0) and rv != "0-0":
        raise st.ApiError("BadRequest", f'resourceVersion: Invalid value: "{rv}": '
                          "must be a resource version returned by this server")
    if len(cache.watchers) >= MAX_WATCHERS:
        raise st.ApiError("TooManyRequests", "too many watches on this API server; "
                          "try again later", {"retryAfterSeconds": 1})
    try:
        await cache.wait_for(rv if rv not in ("", "0") else "0-0", CATCH_UP_SECONDS)
    except TimeoutError as err:
        raise st.ApiError("Timeout", "the watch cache is not ready yet") from err
    resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    resp.enable_chunked_encoding()
    await resp.prepare(request)
    first: list[tuple[str, Obj]] = []
    end_bookmark = ""
    if initial or rv in ("", "0"):
        if initial and rv not in ("", "0"):
            await cache.wait_for(rv, CATCH_UP_SECONDS)
        first = [("ADDED", o) for o in cache.current(t.kind, match)]
        start = cache.position
        end_bookmark = start if initial else ""
    else:
        start = rv
    # watches of one kind, namespace, selection and rendering share their matching and
    # encoding (``WatchCache.subscribe``)
    feed = (t.kind, t.namespace if t.resource.info.namespaced else None,
            q.get("labelSelector") or "", q.get("fieldSelector") or "", render_key)
    try:
        watcher = cache.subscribe(t.kind, match, encoded, start, feed)
    except ExpiredError as err:
        gone = st.status("Expired", str(err), 410)
        await resp.write(_event("ERROR", gone))
        await resp.write_eof()
        return resp
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    stream = _Stream(request)
    try:
        backlog, watcher.backlog = first + watcher.backlog, []
        for i in range(0, len(backlog), WRITE_BATCH):
            await resp.write(b"".join(encoded(*item) for item in backlog[i:i + WRITE_BATCH]))
        if end_bookmark:
            await resp.write(_event("BOOKMARK", mark(_bookmark(t, end_bookmark, True))))
        watcher.send = stream.offer  # from here the feed writes what the connection takes
        while True:
            left = deadline - loop.time()
            if left <= 0:
                if bookmarks:  # after every event up to its position
                    position = cache.position
                    cache.unsubscribe(watcher)
                    while data := watcher.take():
                        await stream.drain()
                        stream.write(data)
                    await resp.write(_event("BOOKMARK", mark(_bookmark(t, position))))
                break
            if not await watcher.wait(min(left, BOOKMARK_SECONDS) if bookmarks else left):
                if bookmarks and deadline - loop.time() > 0:  # at the deadline: the one above
                    await resp.write(_event("BOOKMARK", mark(_bookmark(t, cache.position))))
                continue
            await stream.drain()
            data = watcher.take()  # what was buffered since the last write, at once
            if data:
                stream.write(data)
            if watcher.dropped:
                if watcher.dropped.startswith("expired"):
                    await resp.write(_event("ERROR", st.status(
                        "Expired", f"too old resource version: {watcher.dropped}", 410)))
                break
        watcher.send = None  # nothing may follow the stream's end
        await resp.write_eof()
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    finally:
        watcher.send = None
        cache.unsubscribe(watcher)
    return resp
