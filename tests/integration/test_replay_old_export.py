"""An export written by an older daemonbus still rebuilds and verifies.

``tests/data/main-5c07e65.dblog`` was recorded from the real processes with the code of
commit 5c07e65 (before the log had a module of its own): three nodes, a DaemonSet rolled out,
then a compaction (the file holds its snapshot), a DaemonSet of failing pods with their
backoff, a node added and deleted, a NoExecute taint with its eviction, and a rolling update.
``main-5c07e65.view.json`` is what that code's ``replay`` rebuilt from it: each object's
resourceVersion and the SHA-256 of its stored bytes.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from services.replay import logfile, rebuild, verify
from shared.store.client import connect
from shared.store.keys import Keys
from shared.store.server import RedisServer

DATA = Path(__file__).resolve().parents[1] / "data"
EXPORT = DATA / "main-5c07e65.dblog"
VIEW = DATA / "main-5c07e65.view.json"
KINDS = ["DaemonSet", "Node", "Pod", "ControllerRevision", "Event"]


def _view(client: Any, keys: Keys) -> dict[str, dict[str, list[str]]]:
    out: dict[str, dict[str, list[str]]] = {}
    for kind in KINDS:
        objs, rvs = client.hgetall(keys.objects(kind)), client.hgetall(keys.versions(kind))
        if objs:
            out[kind] = {k.decode(): [rvs[k].decode(), hashlib.sha256(v).hexdigest()]
                         for k, v in sorted(objs.items())}
    return out


def test_an_old_export_rebuilds_the_same_objects_and_log(redis_server: RedisServer,
                                                         prefix: str) -> None:
    client, keys = connect(redis_server.url), Keys(prefix)
    expected = json.loads(VIEW.read_text())
    stats = rebuild.rebuild(EXPORT, client, keys)
    assert (stats.entries, stats.last) == (expected["entries"], expected["last"])
    assert _view(client, keys) == expected["objects"]
    with logfile.Reader(EXPORT) as reader:
        entries = [(r[1], r[3], r[4], r[5], r[6]) for r in reader.records()
                   if r[0] == logfile.ENTRY]
    log = [(rid.decode(), f[b"t"].decode(), f[b"k"].decode(), f[b"n"].decode(), f[b"o"])
           for rid, f in client.xrange(keys.log)]
    assert log == entries


def test_an_old_export_verifies_with_no_divergence() -> None:
    result = verify.verify(EXPORT)
    assert result.divergences == []
    # eleven decisions read state after the file's snapshot (one a taint eviction); one
    # read state the compaction folded away
    assert (result.verified, result.skipped, result.entries) == (11, 1, 100)
