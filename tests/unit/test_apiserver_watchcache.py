"""The watch cache's window: a watch resumed from any position gets exactly the events after
it (found by bisection over the window, not by a scan, and not dropped for being many), then
the live ones; watchers of one selection share a feed; the tail's hand-overs to the loop."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import orjson
import pytest

from services.apiserver import watchcache
from services.apiserver.watchcache import ExpiredError, WatchCache, Watcher
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


def _encode(etype: str, obj: dict[str, Any]) -> bytes:
    return orjson.dumps({"type": etype, "object": obj}) + b"\n"


def _subscribe(cache: WatchCache, after: str, match: Any = lambda _o: True) -> Watcher:
    return cache.subscribe("Pod", match, _encode, after)


def _queued(w: Watcher) -> list[str]:
    """What the watcher sends: its backlog from the window, then its buffer."""
    out = [obj["metadata"]["resourceVersion"] for _etype, obj in w.backlog]
    w.backlog = []
    out += [orjson.loads(line)["object"]["metadata"]["resourceVersion"]
            for line in w.take().splitlines()]
    return out


def test_a_resumed_watch_gets_exactly_the_events_after_its_position() -> None:
    cache = _cache(80)  # 80 events through a window of 50: the first 30 are gone
    window = [e.id for e in cache.events]
    assert len(window) == 50 and cache.oldest == "130-2"
    for i, after in enumerate(window):
        assert _queued(_subscribe(cache, after)) == window[i + 1:]
    assert _queued(_subscribe(cache, cache.oldest)) == window
    between = _subscribe(cache, "150-0")  # no such id: 150-1 is next
    assert _queued(between) == window[window.index("150-1"):]
    with pytest.raises(ExpiredError):
        _subscribe(cache, "129-0")


def test_a_resumed_watch_then_gets_the_live_events_once() -> None:
    cache = _cache(20)
    w = _subscribe(cache, "110-0", lambda o: o["metadata"]["name"] == "p1")
    assert _queued(w) == ["112-2", "117-1"]
    live = _entries(20, 10)
    cache.apply(live, live[-1].id)
    assert _queued(w) == ["122-0", "127-2"]


def test_a_backlog_longer_than_the_buffer_is_sent_not_dropped() -> None:
    cache = _cache(80)
    w = _subscribe(cache, cache.oldest)
    w.limit = 10  # a buffer smaller than the backlog of 50
    assert not w.dropped and len(w.backlog) == 50  # re-watching could not get further
    live = _entries(80, 5)
    cache.apply(live, live[-1].id)
    assert not w.dropped and _queued(w)[-5:] == [e.id for e in live]


def test_watchers_of_one_feed_key_share_one_feed_until_the_last_leaves() -> None:
    cache = _cache(5)
    a = cache.subscribe("Pod", lambda _o: True, _encode, cache.position, feed_key="pods")
    b = cache.subscribe("Pod", lambda _o: True, _encode, cache.position, feed_key="pods")
    alone = _subscribe(cache, cache.position)
    assert a.feed is b.feed and alone.feed is not a.feed and len(cache.feeds) == 2
    live = _entries(5, 3)
    cache.apply(live, live[-1].id)
    assert _queued(a) == _queued(b) == _queued(alone) == [e.id for e in live]
    cache.unsubscribe(a)
    assert "pods" in cache.feeds
    cache.unsubscribe(b)
    assert "pods" not in cache.feeds and len(cache.feeds) == 1


def test_a_watch_from_a_position_the_cache_has_not_reached_gets_only_what_follows_it() -> None:
    cache = _cache(5)
    live = _entries(5, 4)
    w = cache.subscribe("Pod", lambda _o: True, _encode, live[1].id)
    cache.apply(live, live[-1].id)
    assert _queued(w) == [e.id for e in live[2:]]


def _fake_loop(cache: WatchCache) -> list[Any]:
    """What the tail hands ``cache``'s loop is scheduled on the returned list instead."""
    scheduled: list[Any] = []

    class Loop:
        def call_soon_threadsafe(self, fn: Any) -> None:
            scheduled.append(fn)

    cache._loop = cast(Any, Loop())
    return scheduled


def test_hand_overs_waiting_for_the_loop_are_taken_together_and_in_log_order() -> None:
    cache = WatchCache(cast(Store, None), ("Pod",), window=50)
    scheduled = _fake_loop(cache)
    first, second = _entries(0, 3), _entries(3, 3)
    cache._post("apply", first, first[-1].id)  # from an older listing: the reset drops it
    cache._post("reset", "103-0", {"Pod": [_pod("p9", "103-0")]})
    cache._post("apply", second, second[-1].id)
    assert len(scheduled) == 1  # one wake-up of the loop for all three
    scheduled[0]()
    assert sorted(cache.objects["Pod"]) == ["ns/p0", "ns/p3", "ns/p4", "ns/p9"]  # not p1, p2
    assert [e.id for e in cache.events] == [e.id for e in second]
    assert cache.position == second[-1].id
    cache._post("apply", [], second[-1].id)
    assert len(scheduled) == 2  # taken: the next hand-over wakes the loop again


def test_a_watchers_waits_keep_one_timer_and_each_ends_at_its_own_timeout() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        cache = _cache(5)
        w = _subscribe(cache, cache.position)
        first = asyncio.create_task(w.wait(0.05))
        await asyncio.sleep(0.01)
        timer = w._timer
        assert timer is not None
        w.push(b"{}\n", 1)
        assert await first  # something buffered: the wait ends at once
        w.take()
        started = loop.time()
        # the kept timer fires at 0.05 s, before this wait's timeout: it waits on
        assert not await w.wait(0.2)
        assert loop.time() - started >= 0.2
        assert w._timer is not timer
        second = asyncio.create_task(w.wait(30))
        await asyncio.sleep(0.01)
        w.close("too slow")
        assert await second  # a dropped watch ends its wait
        cache.unsubscribe(w)
        assert w._timer is None  # nothing keeps it until the timer's time

    asyncio.run(scenario())


class _Connection:
    """A watcher's ``send``: takes a run while ``open``, records what it took."""

    def __init__(self) -> None:
        self.open = True
        self.sent: list[bytes] = []

    def __call__(self, data: bytes) -> bool:
        if self.open:
            self.sent.append(data)
        return self.open


def _rvs(data: bytes) -> list[str]:
    return [orjson.loads(line)["object"]["metadata"]["resourceVersion"]
            for line in data.splitlines()]


def test_a_run_the_connection_takes_is_written_at_once_without_waking_the_watch() -> None:
    cache = _cache(5)
    w = _subscribe(cache, cache.position)
    w.send = conn = _Connection()
    live = _entries(5, 3)
    cache.apply(live, live[-1].id)
    assert [rv for data in conn.sent for rv in _rvs(data)] == [e.id for e in live]
    assert not w.pending and w.count == 0 and not w.ready.is_set()


def test_runs_written_at_once_and_buffered_keep_the_log_order() -> None:
    cache = _cache(5)
    w = _subscribe(cache, cache.position)
    w.send = conn = _Connection()
    first, second, third = _entries(5, 2), _entries(7, 2), _entries(9, 2)
    cache.apply(first, first[-1].id)
    conn.open = False  # the connection is behind: the next run waits in the buffer
    cache.apply(second, second[-1].id)
    conn.open = True  # it takes more, but the buffer is written first: the run waits too
    cache.apply(third, third[-1].id)
    assert [rv for data in conn.sent for rv in _rvs(data)] == [e.id for e in first]
    assert w.ready.is_set() and _rvs(w.take()) == [e.id for e in second + third]
    fourth = _entries(11, 2)  # the buffer written: runs go straight to the connection again
    cache.apply(fourth, fourth[-1].id)
    assert _rvs(conn.sent[-1]) == [e.id for e in fourth] and not w.pending


def test_a_watcher_whose_connection_takes_nothing_is_dropped_at_its_limit() -> None:
    cache = _cache(5)
    w = _subscribe(cache, cache.position)
    w.limit = 4
    w.send = conn = _Connection()
    conn.open = False
    first = _entries(5, 3)
    cache.apply(first, first[-1].id)
    assert not w.dropped and w.count == 3
    second = _entries(8, 2)
    cache.apply(second, second[-1].id)  # 5 events waiting would pass the limit of 4
    assert w.dropped.startswith("too slow") and not w.pending and w not in cache.watchers
    assert not conn.sent


def test_a_large_batch_goes_to_each_watcher_in_pieces_in_log_order(
        monkeypatch: pytest.MonkeyPatch) -> None:
    cache = _cache(5)
    event_size = len(_encode("MODIFIED", _pod("p0", "105-0")))
    monkeypatch.setattr(watchcache, "WRITE_BYTES", 3 * event_size)
    w = _subscribe(cache, cache.position)
    w.send = conn = _Connection()
    late = _subscribe(cache, "110-2")  # from a position inside the batch
    late.send = late_conn = _Connection()
    batch = _entries(5, 10)
    cache.apply(batch, batch[-1].id)
    assert [len(_rvs(data)) for data in conn.sent] == [3, 3, 3, 1]
    assert [rv for data in conn.sent for rv in _rvs(data)] == [e.id for e in batch]
    assert [rv for data in late_conn.sent for rv in _rvs(data)] == [e.id for e in batch[5:]]
