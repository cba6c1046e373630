"""Node agents' writes by request: a node agent whose credentials may not write the store
adds its commits to a stream only its own ACL user may write (``Keys.node_requests``), and
node-admission commits them as the node-agent role, vouching only for the nodes that user's
ACL grants (``ACL DRYRUN``). So nothing but the commit script's node rules, applied to nodes
bound to the agent's credentials, stands between a node agent and the store; and it holds no
write access to the log or the objects at all.

A request is one stream entry, field ``m``: msgpack of ``{"v": 1, "nodes": [...],
"ops": [[mode, kind, key, expected, payload], ...]}``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from shared.eventlog.entry import CommitResult, WriteMode
from shared.store import codec, errors
from shared.store.client import Op, Result
from shared.store.guard import redis_errors, text
from shared.store.keys import Keys

log = logging.getLogger(__name__)

VERSION = 1
GROUP = "node-admission"
MODES = frozenset({WriteMode.CREATE, WriteMode.ENSURE, WriteMode.UPDATE, WriteMode.DELETE})
KINDS = frozenset({"Node", "Pod"})
MAXLEN = 100_000  # requests kept unconsumed at most (approximate)
VOUCH_SECONDS = 60.0  # how long an ACL DRYRUN answer is reused


def whoami(client: redis.Redis) -> str:
    """The ACL user of ``client``'s connections."""
    with redis_errors("ACL WHOAMI"):
        return text(client.acl_whoami())


class Sender:
    """The node agent's side: ``commit`` adds the ops as one request; the log shows what
    node-admission made of them. Results are ``CommitResult.QUEUED``."""

    def __init__(self, client: redis.Redis, keys: Keys, user: str | None = None) -> None:
        self.r = client
        self.stream = keys.node_requests(user or whoami(client))

    def commit(self, ops: Sequence[Op], nodes: Iterable[str]) -> list[Result]:
        if not ops:
            return []
        msg = {"v": VERSION, "nodes": sorted(set(nodes)),
               "ops": [[op.mode, op.kind, op.key, op.expected, op.payload] for op in ops]}
        with redis_errors("node request"):
            self.r.xadd(self.stream, {"m": codec.pack(msg)}, maxlen=MAXLEN, approximate=True)
        return [Result(CommitResult.QUEUED, "", op) for op in ops]


@dataclass
class Request:
    """One decoded request of ``user``: its ops and the nodes it names."""

    id: str
    user: str
    nodes: list[str]
    ops: list[Op]


def decode(entry_id: str, user: str, fields: dict[bytes, bytes]) -> Request:
    """Decode and check the shape of one request (its objects are validated by the caller);
    raises CorruptEntryError."""
    msg = codec.unpack(fields.get(b"m") or b"")
    if not isinstance(msg, dict) or msg.get("v") != VERSION:
        raise errors.CorruptEntryError("not a version 1 node request")
    nodes, raw_ops = msg.get("nodes"), msg.get("ops")
    if not isinstance(nodes, list) or not all(isinstance(n, str) for n in nodes) \
            or not isinstance(raw_ops, list):
        raise errors.CorruptEntryError("a node request needs nodes and ops lists")
    ops = []
    for raw in raw_ops:
        if not (isinstance(raw, list) and len(raw) == 5 and raw[0] in MODES and raw[1] in KINDS
                and isinstance(raw[2], str) and isinstance(raw[3], str)
                and isinstance(raw[4], bytes)):
            raise errors.CorruptEntryError(f"malformed op in a node request: {raw!r:.200}")
        mode, kind, key, expected, payload = raw
        obj = codec.unpack(payload)
        if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
            raise errors.CorruptEntryError(f"op on {kind} {key}: not an object")
        ops.append(Op(WriteMode(mode), kind, key, payload, expected, obj))
    return Request(entry_id, user, nodes, ops)


class Inbox:
    """node-admission's side: read the request streams of ``users`` through a consumer
    group, and tell which nodes a user's ACL grants."""

    def __init__(self, client: redis.Redis, keys: Keys, users: Sequence[str],
                 consumer: str) -> None:
        self.r, self.keys, self.consumer = client, keys, consumer
        self.streams = {keys.node_requests(u): u for u in users}
        self._vouched: dict[tuple[str, str], tuple[bool, float]] = {}

    def ensure_groups(self) -> None:
        for stream in self.streams:
            try:
                self.r.xgroup_create(stream, GROUP, id="0", mkstream=True)
            except redis.ResponseError as err:
                if "BUSYGROUP" not in str(err):
                    raise errors.StoreError(f"redis: {err}") from err

    def read(self, count: int = 100, block_ms: int = 1000,
             claim_idle_ms: int = 30_000) -> list[tuple[str, str, dict[bytes, bytes]]]:
        """(stream, entry id, fields) of pending requests: first those a dead consumer left
        for ``claim_idle_ms``, else new ones."""
        out: list[tuple[str, str, dict[bytes, bytes]]] = []
        with redis_errors("node requests"):
            for stream in self.streams:
                claimed: Any = self.r.xautoclaim(stream, GROUP, self.consumer, claim_idle_ms,
                                                 start_id="0-0", count=count)
                out += [(stream, text(i), f) for i, f in claimed[1] if f is not None]
            if out:
                return out
            resp: Any = self.r.xreadgroup(GROUP, self.consumer, dict.fromkeys(self.streams, ">"),
                                          count=count, block=block_ms)
        for stream, entries in resp or []:
            out += [(text(stream), text(i), f) for i, f in entries if f is not None]
        return out

    def user(self, stream: str) -> str:
        return self.streams[stream]

    def done(self, stream: str, entry_id: str) -> None:
        with redis_errors("node request ack"):
            pipe = self.r.pipeline(transaction=True)
            pipe.xack(stream, GROUP, entry_id)
            pipe.xdel(stream, entry_id)
            pipe.execute()

    def grants(self, user: str, node: str, now: float | None = None) -> bool:
        """Whether ``user``'s ACL grants node ``node`` (``Keys.node_key``), by ACL DRYRUN;
        answers are reused for VOUCH_SECONDS."""
        now = time.monotonic() if now is None else now
        hit = self._vouched.get((user, node))
        if hit is not None and now - hit[1] < VOUCH_SECONDS:
            return hit[0]
        with redis_errors("ACL DRYRUN"):
            answer = text(self.r.acl_dryrun(user, "HSET", self.keys.node_key(node), "x", "x"))
        ok = answer == "OK"
        self._vouched[(user, node)] = (ok, now)
        return ok
