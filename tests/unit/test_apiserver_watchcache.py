"""The watch cache's window: a watch resumed from any position gets exactly the events after
it (found by bisection over the window, not by a scan, and not dropped for being many), then
the live ones."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from services.apiserver.watchcache import ExpiredError, WatchCache
from shared.store import codec
from shared.store.client import Store


def _pod(name: str, rv: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}}


def _entries(first: int, n: int) -> list[codec.Entry]:
    out = []
    for i in range(first, first + n):
        eid = f"{101 + i}-{i % 3}"
        out.append(codec.Entry(eid, "ADDED" if i < 5 else "MODIFIED", "Pod", f"ns/p{i % 5}",
                               _pod(f"p{i % 5}", eid)))
    return out


def _cache(n: int) -> WatchCache:
    cache = WatchCache(cast(Store, None), ("Pod",), window=50)
    cache._reset("100-0", {})
    entries = _entries(0, n)
    cache.apply(entries, entries[-1].id)
    return cache


def _queued(w: Any) -> list[str]:
    """What the watcher sends: its backlog from the window, then its queue."""
    out = [obj["metadata"]["resourceVersion"] for _etype, obj in w.backlog]
    w.backlog = []
    while not w.queue.empty():
        item = w.queue.get_nowait()
        assert item is not None
        out.append(item[1]["metadata"]["resourceVersion"])
    return out


def test_a_resumed_watch_gets_exactly_the_events_after_its_position() -> None:
    cache = _cache(80)  # 80 events through a window of 50: the first 30 are gone
    window = [e.id for e in cache.events]
    assert len(window) == 50 and cache.oldest == "130-2"
    for i, after in enumerate(window):
        assert _queued(cache.subscribe("Pod", lambda _o: True, after)) == window[i + 1:]
    assert _queued(cache.subscribe("Pod", lambda _o: True, cache.oldest)) == window
    between = cache.subscribe("Pod", lambda _o: True, "150-0")  # no such id: 150-1 is next
    assert _queued(between) == window[window.index("150-1"):]
    with pytest.raises(ExpiredError):
        cache.subscribe("Pod", lambda _o: True, "129-0")


def test_a_resumed_watch_then_gets_the_live_events_once() -> None:
    cache = _cache(20)
    w = cache.subscribe("Pod", lambda o: o["metadata"]["name"] == "p1", "110-0")
    assert _queued(w) == ["112-2", "117-1"]
    live = _entries(20, 10)
    cache.apply(live, live[-1].id)
    assert _queued(w) == ["122-0", "127-2"]


def test_a_backlog_longer_than_the_buffer_is_sent_not_dropped() -> None:
    cache = _cache(80)
    w = cache.subscribe("Pod", lambda _o: True, cache.oldest)
    w.queue = asyncio.Queue(10)  # a buffer smaller than the backlog of 50
    assert not w.dropped and len(w.backlog) == 50  # re-watching could not get further
    live = _entries(80, 5)
    cache.apply(live, live[-1].id)
    assert not w.dropped and _queued(w)[-5:] == [e.id for e in live]
