"""An export keeps who made each write (field ``u`` of a log entry, what ``daemonbus why``
shows), and a log rebuilt from it into another Redis names the same users."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgpack
import pytest

from services.node_agent.lifecycle import new_node
from services.replay import export, logfile, rebuild, why
from shared.store.client import Store, connect
from shared.store.keys import Keys
from shared.store.server import RedisServer


@pytest.fixture
def fresh_redis() -> Iterator[RedisServer]:
    server = RedisServer().start()
    yield server
    server.stop()


def test_a_rebuilt_log_names_the_user_of_each_write(redis_server: RedisServer, prefix: str,
                                                     fresh_redis: RedisServer,
                                                     tmp_path: Path) -> None:
    store = Store(connect(redis_server.url), Keys(prefix))
    node = store.as_writer("alice").create(new_node("node-a"))
    node["metadata"]["labels"] = {"tier": "web"}
    store.update(node)  # a write by no named user (a daemonbus process or the CLI)
    path = tmp_path / "log.dblog"
    export.export(store.r, store.keys, path)
    with logfile.Reader(path) as reader:
        users = [logfile.raw_entry(r).user for r in reader.records() if r[0] == logfile.ENTRY]
    assert users == ["alice", ""]

    target = Store(connect(fresh_redis.url), Keys(prefix))
    stats = rebuild.rebuild(path, target.r, target.keys)
    assert stats.entries == 2
    assert [f.get(b"u") for _id, f in target.r.xrange(target.keys.log)] == [b"alice", None]
    assert why.why_changes(target, "Node", "/node-a") == \
        why.why_changes(store, "Node", "/node-a")
    lines = why.why_changes(target, "Node", "/node-a")
    assert "ADDED" in lines[1] and "by user alice" in lines[1], lines
    assert "MODIFIED" in lines[2] and "by a daemonbus process" in lines[2], lines


def test_a_user_that_is_not_text_is_refused_and_nothing_is_written(
        redis_server: RedisServer, prefix: str, tmp_path: Path) -> None:
    path = tmp_path / "bad.dblog"
    header = logfile.Header(prefix=prefix, first="1-0", last="1-0", complete=True)
    with logfile.Writer(path, header) as out:
        out.entry("1-0", "1", "ADDED", "Node", "/n1", b"\x80")
    with open(path, "rb") as f:
        data = f.read()
    # the same entry record with a user of the wrong type (a number)
    good = msgpack.packb(["E", "1-0", "1", "ADDED", "Node", "/n1", b"\x80"], use_bin_type=True)
    bad = msgpack.packb(["E", "1-0", "1", "ADDED", "Node", "/n1", b"\x80", 7],
                        use_bin_type=True)
    path.write_bytes(data.replace(good, bad))
    client, keys = connect(redis_server.url), Keys(prefix)
    with pytest.raises(logfile.LogFileError, match="bad user field"):
        rebuild.rebuild(path, client, keys)
    assert client.xlen(keys.log) == 0
