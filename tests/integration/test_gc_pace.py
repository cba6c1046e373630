"""The garbage collector's pause after a read of entries (``gc_read_gap_seconds``): the
commits of that time come in one read, on a real Redis."""

from __future__ import annotations

import threading
from typing import Any

from services.gc.collector import Collector
from services.node_agent.lifecycle import new_node
from shared.store.client import Store
from shared.store.keys import Keys
from tests.integration.contract import connect, wait_for


def test_the_commits_of_the_pause_after_a_read_come_in_one_read(redis_url: str,
                                                                 prefix: str) -> None:
    store = Store(connect(redis_url), Keys(prefix))
    store.create(new_node("seed"))
    gc = Collector(store, read_gap=1.0)
    reads: list[int] = []
    poll = gc.cache.poll

    def counted(*args: Any, **kwargs: Any) -> Any:
        changes = poll(*args, **kwargs)
        if changes:
            reads.append(len(changes))
        return changes

    gc.cache.poll = counted  # type: ignore[method-assign]
    stop = threading.Event()
    thread = threading.Thread(target=gc.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_for(lambda: "/seed" in gc.cache.objects["Node"], timeout=10)
        store.create(new_node("a"))
        wait_for(lambda: reads == [1], timeout=10)
        for name in ("b", "c", "d"):  # while the collector pauses
            store.create(new_node(name))
        wait_for(lambda: sum(reads) == 4, timeout=10)
        assert reads == [1, 3]
    finally:
        stop.set()
        thread.join(timeout=10)
