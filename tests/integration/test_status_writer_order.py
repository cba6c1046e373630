"""Status messages published out of log-position order: the newest position wins."""

from __future__ import annotations

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


def test_newer_position_wins_within_one_batch_whatever_the_publish_order(
        redis_url: str, prefix: str) -> None:
    store = Store(connect(redis_url), Keys(prefix))
    ds = store.create(DS)
    writer = StatusWriter(store, "w1")
    writer.ensure_group()
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
