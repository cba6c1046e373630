"""Status messages published out of log-position order: the newest position wins."""

from __future__ import annotations

import threading
import time
from typing import Any

import yaml

from services.status_writer.writer import StatusWriter
from shared.store import codec
from shared.store.client import Store, connect
from shared.store.keys import Keys

DS = yaml.safe_load("""
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: default}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: agent, image: "agent:1"}]
""")


def _status(n: int) -> dict[str, int]:
    return {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": n,
            "updatedNumberScheduled": n, "numberAvailable": n, "numberMisscheduled": 0,
            "numberUnavailable": 3 - n}


def _writer(redis_url: str, prefix: str) -> tuple[Store, dict[str, Any], StatusWriter]:
    store = Store(connect(redis_url), Keys(prefix))
    ds = store.create(DS)
    writer = StatusWriter(store, "w1")
    writer.ensure_group()
    return store, ds, writer


def test_newer_position_wins_within_one_batch_whatever_the_publish_order(
        redis_url: str, prefix: str) -> None:
    store, ds, writer = _writer(redis_url, prefix)
    newer = {"key": "default/agent", "uid": ds["metadata"]["uid"], "generation": 1,
             "status": _status(3), "observe": True, "position": "200-0"}
    older = dict(newer, status=_status(1), position="100-0")
    for msg in (newer, older):  # published in the wrong order
        store.r.xadd(store.keys.status_stream, {"m": codec.pack(msg)})
    assert writer.step(block_ms=10) == 2
    assert store.get("DaemonSet", "default/agent")["status"]["updatedNumberScheduled"] == 3
    # and an older status arriving in a later batch is not written either
    store.r.xadd(store.keys.status_stream, {"m": codec.pack(dict(older, position="150-0"))})
    writer.step(block_ms=10)
    assert store.get("DaemonSet", "default/agent")["status"]["updatedNumberScheduled"] == 3


def test_a_status_from_a_position_the_log_has_not_reached_is_refused_and_leaves_no_trace(
        redis_url: str, prefix: str) -> None:
    """A forged message "computed" far in the future must not freeze the status: before,
    its position was recorded first, and every true status after it counted as older."""
    store, ds, writer = _writer(redis_url, prefix)
    forged = {"key": "default/agent", "uid": ds["metadata"]["uid"], "generation": 1,
              "status": _status(0), "observe": True, "position": "99999999999999-0"}
    for position in ("99999999999999-0", "not-a-position", ""):
        store.r.xadd(store.keys.status_stream, {"m": codec.pack(dict(forged, position=position))})
        writer.step(block_ms=10)
    assert not store.r.hexists(store.keys.status_positions, "default/agent")
    assert "observedGeneration" not in store.get("DaemonSet", "default/agent")["status"]
    true = dict(forged, status=_status(3), position=store.log_tip())
    store.r.xadd(store.keys.status_stream, {"m": codec.pack(true)})
    writer.step(block_ms=10)
    assert store.get("DaemonSet", "default/agent")["status"]["numberReady"] == 3


def test_statuses_published_while_the_writer_pauses_after_a_write_make_one_write(
        redis_url: str, prefix: str) -> None:
    """After a round that wrote, the writer waits its write gap before receiving again: the
    statuses a busy DaemonSet's syncs publish meanwhile make one write, the newest."""
    store = Store(connect(redis_url), Keys(prefix))
    ds = store.create(DS)
    writer = StatusWriter(store, "w1", write_gap=1.0)
    stop = threading.Event()
    thread = threading.Thread(target=writer.run, args=(stop,), daemon=True)
    thread.start()
    try:
        msg = {"key": "default/agent", "uid": ds["metadata"]["uid"], "generation": 1,
               "observe": True}

        def publish(ready: int) -> None:
            store.r.xadd(store.keys.status_stream,
                         {"m": codec.pack(dict(msg, status=_status(ready),
                                               position=store.log_tip()))})

        def ready() -> int:
            return int(store.get("DaemonSet", "default/agent")["status"].get("numberReady", -1))

        publish(1)
        _until(lambda: ready() == 1)
        publish(2)
        time.sleep(0.2)  # the input: two syncs' statuses 0.2 s apart, both within the gap
        publish(3)
        _until(lambda: ready() == 3)
        _until(lambda: writer.written >= 2)  # counted after its commit, on the writer's thread
        assert writer.written == 2  # 2 was never written: 3 replaced it in the pause
    finally:
        stop.set()
        thread.join(timeout=10)


def _until(cond: Any, deadline_s: float = 10.0) -> None:
    deadline = time.monotonic() + deadline_s
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)
