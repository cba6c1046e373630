"""``replay FILE`` copies each entry's stored bytes into the log as they are; a record whose
fields are not what an entry holds (text fields, a bytes payload) is refused, naming it, in
the middle of the file as at its start."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest

from services.replay import logfile, rebuild
from shared.store.client import connect
from shared.store.keys import Keys
from shared.store.server import RedisServer


def _node(i: int) -> list[object]:
    payload = msgpack.packb({"kind": "Node", "metadata": {"name": f"n{i}"}}, use_bin_type=True)
    return ["E", f"{i}-0", "1", "ADDED", "Node", f"/n{i}", payload]


def _write_log(path: Path, prefix: str, records: list[list[object]], first: str,
               last: str) -> Path:
    """A complete log file at ``path``: its header, ``records`` as they are, its trailer."""
    header = logfile.Header(prefix=prefix, first=first, last=last, complete=True)
    packer = msgpack.Packer(use_bin_type=True)
    path.write_bytes(b"".join([packer.pack(header.to_map())] + [packer.pack(r) for r in records]
                              + [packer.pack(["Z", len(records), last])]))
    return path


@pytest.mark.parametrize("bad", [
    ["E", "3-0", "1", "ADDED", "Node", "/n3", "a payload that is text"],
    ["E", "3-0", "1", "ADDED", "Node", 3, b"\x80"],
    ["E", "3-0", 1, "ADDED", "Node", "/n3", b"\x80"],
])
def test_a_malformed_record_in_the_middle_is_refused_with_its_id(
        redis_server: RedisServer, prefix: str, tmp_path: Path, bad: list[object]) -> None:
    path = _write_log(tmp_path / "bad.dblog", prefix,
                      [_node(1), _node(2), bad, _node(4), _node(5)], "1-0", "5-0")
    client, keys = connect(redis_server.url), Keys(prefix)
    with pytest.raises(logfile.LogFileError, match="malformed entry record '3-0'"):
        rebuild.rebuild(path, client, keys, batch=2)
    # the batches before it were appended; nothing of its own batch or after
    assert [i.decode() for i, _f in client.xrange(keys.log)] == ["1-0", "2-0"]


def test_entries_out_of_order_are_refused_before_the_view_is_written(
        redis_server: RedisServer, prefix: str, tmp_path: Path) -> None:
    """Redis refuses an entry whose id is not newer than the one before, and the rebuild is
    refused then, before any view hash is written (the view is folded from each object's
    newest entry, which only a log in order makes the newest)."""
    later = _node(3)
    later[6] = msgpack.packb({"kind": "Node", "metadata": {"name": "n3", "labels": {"a": "b"}}},
                             use_bin_type=True)
    records = [_node(1), _node(3), _node(2), ["E", "2-5", *later[2:]]]  # 2-0 and 2-5 late
    path = _write_log(tmp_path / "unordered.dblog", prefix, records, "1-0", "2-5")
    client, keys = connect(redis_server.url), Keys(prefix)
    with pytest.raises(rebuild.RebuildError, match="Redis took 2 of 4 log entries"):
        rebuild.rebuild(path, client, keys)
    assert not client.exists(keys.objects("Node"), keys.versions("Node"))


def test_an_object_record_among_the_entries_is_refused(
        redis_server: RedisServer, prefix: str, tmp_path: Path) -> None:
    """The snapshot's objects come before the entries: one after them is a damaged file,
    refused (not folded into the view as if it were the snapshot's)."""
    stray = ["O", "Node", "/n9", "9-0", msgpack.packb({"metadata": {"name": "n9"}})]
    path = _write_log(tmp_path / "stray.dblog", prefix,
                      [_node(1), _node(2), _node(3), stray, _node(4)], "1-0", "4-0")
    client, keys = connect(redis_server.url), Keys(prefix)
    with pytest.raises(logfile.LogFileError, match="'O' record among the entries"):
        rebuild.rebuild(path, client, keys, batch=2)
    assert [i.decode() for i, _f in client.xrange(keys.log)] == ["1-0", "2-0"]
    assert not client.exists(keys.objects("Node"))
