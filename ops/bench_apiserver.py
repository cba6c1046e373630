"""Benchmark: the API server in front of a 5,000-node cluster (simulated nodes, instant
readiness).

    python ops/bench_apiserver.py [--nodes 5000] [--watchers 50] [--repeats 20]
                                  [--client-procs 10] [--apiservers 1] [--creates 2000]
                                  [--clients 8] [--no-tls]
                                  [--load-nice 10] [--max-unavailable 10%]
                                  [--ready-delay SECONDS] [--pause-apiserver SECONDS]
                                  [--apiserver-from CHECKOUT] [--label TEXT]
                                  [--profile DIR] [--keep-logs] [--no-record] [--json-out FILE]

Starts a private redis-server, the real controller processes and ``daemonbus run apiserver``
(TLS with a generated CA and a bearer token, as ``daemonbus up`` runs it), rolls a DaemonSet
out on every node, then measures through the HTTP API. The rollout's own processes (watcher, reconciler,
status-writer, node agent: the workload) run at CPU niceness ``--load-nice`` (default 10): in
a cluster they are on machines of their own, not on the API server's, so here they yield the
cores to what is measured (the API server, its clients and the floors run at 0, Redis too).
``--load-nice 0`` runs everything at one priority, as before. Either way it is printed and
recorded, and so are the floors and the rollout's time.

* **LIST** of the N pods, as JSON and as a ``meta.k8s.io/v1`` Table: request → last byte
  of the body, p50/p99 over ``--repeats``. Floors measured in the same run: the driver's own
  read of the same pods from Redis plus encoding them as JSON (the work a list cannot avoid),
  and a ``GET /version`` round trip (the HTTP, TLS and token cost of any request).
* **WATCH** lag: ``--watchers`` concurrent watches of the DaemonSet's pods during a rolling
  update of every node (``set image``). Each event's lag is its delivery time minus its commit
  time: the resourceVersion is a log entry id whose first part is Redis' clock in ms at the
  commit; delivered is when its watcher read the event's bytes (decrypted, de-chunked), stamped
  before they are decoded. Every watcher must see every pod entry of the rollout, in order, each as the log's
  own event type (checked against the log); a stream the server ends is re-watched from the
  last resourceVersion, as client-go does. The watchers run in ``--client-procs`` client
  processes (default ten, five watchers each: one loop over non-blocking TLS sockets, each watch on a connection
  of its own, its HTTP and chunked framing parsed by hand; every read is stamped before
  anything read in the same round is decoded, and each event is decoded in full but builds
  only what it checks; its garbage collector off, so the lag is the server's rather than a
  client's backlog; its CPU and how late its own loop woke are printed). Floor in the same
  run: a process tailing the log in Redis directly (XREAD), what any reader on this machine
  sees. ``--pause-apiserver S`` stops the API server (SIGSTOP) for S seconds one second into
  the rollout, as a long garbage collection, a swapped-out page or a busy host would: the lag
  then shows whether it catches up with the rollout or stays behind until the rollout ends.
  ``--apiservers N`` runs N API servers on the one Redis and connects the client processes
  to them in turn (each replica keeps its own tail of the log).
* **CREATE** throughput: ``--clients`` concurrent clients POST ``--creates`` pods; floor: the
  same clients sending ``GET /version``, and the store's own create from as many threads.

Results: a JSON line in ops/results/bench.jsonl (``bench: apiserver``, with the 1-minute load
average) and ops/results/bench-apiserver.md.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import json
import multiprocessing
import os
import selectors
import signal
import socket
import ssl
import sys
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Literal

import aiohttp
import bench_rollout
import benchkit
import msgspec
import redis
from benchkit import NAMESPACE, Cluster, id_ms, percentile

from services.apiserver import auth
from shared.store import codec

SUMMARY = benchkit.RESULTS / "bench-apiserver.md"
TABLE_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
CREATE_NAMESPACE = "bench-create"

Obj = dict[str, Any]


def ms_now() -> float:
    return time.time() * 1000.0


def stats(values: list[float]) -> Obj:
    if not values:
        return {"n": 0, "p50": None, "p99": None, "max": None}
    return {"n": len(values), "p50": round(percentile(values, 50), 1),
            "p99": round(percentile(values, 99), 1), "max": round(max(values), 1)}


def fmt(s: Obj, unit: str = "ms") -> str:
    if not s["n"]:
        return "no samples"
    return f"p50 {s['p50']} {unit}, p99 {s['p99']} {unit} (max {s['max']}, n={s['n']})"


def loadavg() -> float:
    return round(os.getloadavg()[0], 2)


# ---- the API server --------------------------------------------------------------------------

class Api:
    """``daemonbus run apiserver`` in the cluster (``replicas`` of it, each on a port of its
    own, one token file and one CA), and how the driver reaches it."""

    def __init__(self, c: Cluster, use_tls: bool, root: Path | None = None,
                 replicas: int = 1) -> None:
        self.c = c
        self.root = root
        self.replicas = replicas
        self.token = auth.new_token()
        self.token_file = c.tmp / "tokens"
        auth.write_token_file(self.token_file, [(self.token, "bench", "admin")])
        self.cert_dir = c.tmp / "pki"
        self.use_tls = use_tls
        self.names: list[str] = []
        self.bases: list[str] = []
        self._start()
        self.base = self.bases[0]
        self.headers = {"Authorization": f"Bearer {self.token}"}

    def _start(self) -> None:
        """One more API server: ``apiserver``, then ``apiserver-2``, ``apiserver-3``..."""
        port = benchkit.free_port()
        name = "apiserver" if not self.names else f"apiserver-{len(self.names) + 1}"
        args = ["apiserver", "--port", str(port), "--token-file", str(self.token_file),
                "--cert-dir", str(self.cert_dir)]
        if not self.use_tls:
            args.append("--no-tls")
        self.c.start(name, *args, metrics=False, root=self.root)
        self.names.append(name)
        self.bases.append(f"{'https' if self.use_tls else 'http'}://127.0.0.1:{port}")

    def ssl(self) -> ssl.SSLContext | bool:
        if not self.use_tls:
            return False
        return ssl.create_default_context(cafile=str(self.cert_dir / "ca.crt"))

    def session(self, base: str | None = None, **kw: Any) -> aiohttp.ClientSession:
        conn = aiohttp.TCPConnector(ssl=self.ssl(), limit=0)
        return aiohttp.ClientSession(base or self.base, connector=conn, headers=self.headers,
                                     timeout=aiohttp.ClientTimeout(total=None), **kw)

    async def wait_ready(self, timeout: float = 60.0) -> None:
        """Every replica ready, started one after another: the first writes the CA and the
        serving certificate, which the others then load."""
        await self._wait_ready(0, timeout)
        while len(self.names) < self.replicas:
            self._start()
            await self._wait_ready(len(self.names) - 1, timeout)

    async def _wait_ready(self, i: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.c.check_alive()
            if not self.use_tls or (self.cert_dir / "ca.crt").exists():
                try:
                    async with self.session(self.bases[i]) as s, s.get("/readyz") as resp:
                        if resp.status == 200:
                            return
                except (aiohttp.ClientError, OSError):
                    pass
            await asyncio.sleep(0.2)
        raise RuntimeError(f"{self.names[i]} did not become ready:\n" +
                           self.c.log_tail(self.names[i]))


# ---- LIST ----------------------------------------------------------------------------------------

async def timed_get(s: aiohttp.ClientSession, path: str, accept: str = "application/json"
                    ) -> tuple[float, bytes]:
    started = time.perf_counter()
    async with s.get(path, headers={"Accept": accept}) as resp:
        body = await resp.read()
        if resp.status != 200:
            raise RuntimeError(f"GET {path}: {resp.status} {body[:300]!r}")
    return (time.perf_counter() - started) * 1000.0, body


def driver_list_floor(c: Cluster) -> float:
    """ms for the driver to read the pods from Redis, decode and encode them as JSON: the
    work a list cannot avoid (the store's snapshot also checks each object's shape)."""
    started = time.perf_counter()
    raw: Any = c.s.r.hgetall(c.s.keys.objects("Pod"))
    pods = [o for o in (codec.unpack(v) for v in raw.values())
            if o["metadata"].get("namespace") == NAMESPACE]
    json.dumps({"kind": "PodList", "items": pods}, separators=(",", ":"))
    return (time.perf_counter() - started) * 1000.0


async def measure_list(api: Api, n: int, repeats: int) -> Obj:
    path = f"/api/v1/namespaces/{NAMESPACE}/pods"
    out: Obj = {"load_before": loadavg()}
    async with api.session() as s:
        _, body = await timed_get(s, path)  # warm: connection, TLS session, caches
        items = len(json.loads(body)["items"])
        if items != n:
            raise RuntimeError(f"LIST returned {items} pods, expected {n}")
        out["json_bytes"] = len(body)
        _, table = await timed_get(s, path, TABLE_ACCEPT)
        rows = json.loads(table)
        if rows.get("kind") != "Table" or len(rows.get("rows") or []) != n:
            raise RuntimeError(f"the Table LIST has {len(rows.get('rows') or [])} rows")
        out["table_bytes"] = len(table)
        api.c.start_profiling(f"list-{n}")
        json_ms, table_ms, version_ms, floor_ms = [], [], [], []
        for _ in range(repeats):  # interleaved, so machine noise hits every series alike
            json_ms.append((await timed_get(s, path))[0])
            table_ms.append((await timed_get(s, path, TABLE_ACCEPT))[0])
            version_ms.append((await timed_get(s, "/version"))[0])
            floor_ms.append(driver_list_floor(api.c))
        api.c.stop_profiling()
    out.update(json_ms=stats(json_ms), table_ms=stats(table_ms),
               version_ms=stats(version_ms), driver_unpack_encode_ms=stats(floor_ms),
               load_after=loadavg())
    print(f"  LIST {n} pods as JSON  ({out['json_bytes'] / 1e6:.1f} MB): "
          f"{fmt(out['json_ms'])}")
    print(f"  LIST {n} pods as Table ({out['table_bytes'] / 1e6:.1f} MB): "
          f"{fmt(out['table_ms'])}")
    print(f"    floor: Redis read, decode and JSON encode in the driver "
          f"{fmt(out['driver_unpack_encode_ms'])}"
          f"; GET /version {fmt(out['version_ms'])}")
    return out


# ---- WATCH -----------------------------------------------------------------------------------------
#
# The watchers run in client processes of their own (``--client-procs``, default ten), not in
# the driver's loop. Each process decodes every event its watchers receive (the whole JSON
# line is parsed and its type, kind, namespace and resourceVersion checked, by msgspec: a
# full parse that builds only the fields it is asked for, several times cheaper than building
# every pod as dicts), after stamping what a watcher read and between the reads
# (``Decoder``), and after the rollout compares what it got with the log: every pod entry, in order, each
# with the log's own event type. 50 Python clients building a million pods as dicts (on the
# same two cores) were themselves the bottleneck, and their backlog counted as the server's
# lag; so was an aiohttp client (a task woken per watcher and read, about 55-70 µs of CPU per
# delivered event one at a time, against 32-35 µs for ``WatchStream``'s loop). The floor, a
# direct tail of the log, is a process too. One client process for all 50 was the bottleneck
# once rollouts got fast: at 1% it needs 4 s of CPU for the million events of a 5-6 s
# rollout, on one core it shares, and its backlog read as a p99 lag of 1.1 s (10 processes:
# 41-76 ms); at 25 or 50 processes the interpreters' own overhead (8-12 s of CPU) costs more
# than the spreading gains. Fifty real watchers are fifty processes on machines of their own.
# Each child gets its start position, then (on its pipe) the rollout's last pod entry id and
# the (id, type) of every pod entry a watcher must see; it answers with what it measured.


class _Meta(msgspec.Struct, gc=False):
    resourceVersion: str
    name: str
    namespace: str


class _Pod(msgspec.Struct, gc=False):
    kind: str
    metadata: _Meta


class _Event(msgspec.Struct, gc=False):
    type: Literal["ADDED", "MODIFIED", "DELETED"]
    object: _Pod


DECODE_EVENT = msgspec.json.Decoder(_Event)
TICK = 0.01  # s: how often a client process checks its pipe and how late it came round
READ_BYTES = 64 << 10  # a watcher's read per round of the client's loop, at most


@dataclass
class Tail:
    """What one watcher (or the floor's direct log tail) received."""

    rv: str
    lags: list[float] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    streams: int = 0  # watch requests made (1 + re-watches)
    expired: int = 0
    errors: list[str] = field(default_factory=list)
    # what a watcher got, kept while it watches: (arrival ms, the (type, resourceVersion) of
    # each event that arrived then); lags and the checks against the log come after the
    # rollout
    arrived: list[tuple[float, list[tuple[str, str]]]] = field(default_factory=list)
    foreign: int = 0  # events of another kind or namespace
    rest: bytes = b""  # the start of a line the next chunk of its stream ends
    done: bool = False  # it has the rollout's last event, or its stream failed

    def got(self, rv: str, at: float) -> None:
        self.rv = rv
        if rv not in self.seen:
            self.seen.add(rv)
            self.lags.append(at - id_ms(rv))

    def report(self, expected: list[tuple[str, str]]) -> Obj:
        """Lags, and how what arrived differs from ``expected`` (the log's pod entries, as
        (id, type)): missing, out of order (a resourceVersion not above the one before), or
        of another type than the log's."""
        types = dict(expected)
        last, disorder, wrong = (0, 0), 0, 0
        for at, events in self.arrived:
            for etype, rv in events:
                pos = codec.id_tuple(rv)
                disorder += pos <= last
                last = pos
                wrong += types.get(rv, etype) != etype
                self.got(rv, at)
        self.arrived = []
        return {"lags": self.lags, "missing": len(types.keys() - self.seen),
                "out_of_order": disorder, "wrong_type": wrong, "foreign": self.foreign,
                "streams": self.streams, "expired": self.expired, "errors": self.errors[:5]}


def past(rv: str, target: str | None) -> bool:
    return target is not None and codec.id_tuple(rv) >= codec.id_tuple(target)


class Decoder:
    """The watchers' received bytes, decoded after their arrival is stamped. The client's
    loop stamps each read as it makes it and queues what it read here; after a round of
    reads (each watcher at most ``READ_BYTES``) it decodes the queue in arrival order, so
    decoding what one watcher got does not hold back when the other watchers' bytes are
    read and stamped (with decoding inline, a burst's last watcher in a process waited for
    every other watcher's decoding, counted as the server's lag), and the decoding keeps up
    with the reads (decoded only when nothing was readable, it fell behind by 100 MB at
    1%, and the reads that then had to decode before going on stalled the loop). Every
    event is still decoded and checked: a line that does not decode as a pod's ADDED,
    MODIFIED or DELETED ends its watcher with an error (it then misses the rest, and is
    counted incomplete). The queue is bounded: past ``MAX_QUEUED`` bytes the oldest reads
    are decoded before the next is queued."""

    MAX_QUEUED = 128 << 20

    def __init__(self, end: Obj) -> None:
        self.end = end
        self.queue: collections.deque[tuple[Tail, float, bytes]] = collections.deque()
        self.queued = 0  # bytes in ``queue``

    def put(self, tail: Tail, at: float, data: bytes) -> None:
        self.queue.append((tail, at, data))
        self.queued += len(data)
        while self.queued > self.MAX_QUEUED:
            self.step()

    def step(self) -> None:
        tail, at, data = self.queue.popleft()
        self.queued -= len(data)
        if not tail.done:
            decode_chunk(tail, at, data, self.end)

    def flush(self) -> None:
        """Decode everything queued (a stream ended, or the rollout did)."""
        while self.queue:
            self.step()


def decode_chunk(tail: Tail, at: float, data: bytes, end: Obj) -> None:
    """Decode the complete lines ``data`` ends (with the start of a line the chunk before
    left in ``tail.rest``), parsed in full where they lie in the chunk, by one call; what
    they are is kept as arrived at ``at``. Sets ``tail.done`` when it has the event at or
    past ``end['id']``, or on an event that does not decode (as its error)."""
    decode_lines = DECODE_EVENT.decode_lines
    rest = tail.rest
    start = 0
    try:
        evs: list[_Event] = []
        if rest:
            nl = data.find(b"\n")
            if nl < 0:
                tail.rest = rest + data
                return
            evs = decode_lines(rest + data[:nl + 1])
            start, tail.rest = nl + 1, b""
        cut = data.rfind(b"\n") + 1
        if cut > start:  # the complete lines, decoded where they are
            evs += decode_lines(memoryview(data)[start:cut])
        tail.rest = data[max(cut, start):]
    except msgspec.ValidationError as err:
        data = rest + data
        error = data[data.find(b'{"type":"ERROR"'):][:200] \
            if b'{"type":"ERROR"' in data else b""
        tail.expired += b'"code":410' in error
        tail.errors.append(error.decode(errors="replace") or f"undecodable event: {err}")
        tail.done = True  # a position gone: a client would have to list again
        return
    except msgspec.DecodeError as err:
        tail.errors.append(f"malformed JSON in the stream: {err}")
        tail.done = True
        return
    if not evs:
        return
    got: list[tuple[str, str]] = [(e.type, e.object.metadata.resourceVersion) for e in evs
           if e.object.kind == "Pod" and e.object.metadata.namespace == NAMESPACE]
    tail.foreign += len(evs) - len(got)
    if got:
        tail.arrived.append((at, got))
        tail.rv = got[-1][1]
        tail.done = past(tail.rv, end["id"])


class WatchStream:
    """One watcher's watch request on a connection of its own, read without blocking: the
    TLS socket's bytes as they come, the HTTP response's status line and headers, then its
    chunked body, de-chunked here (what a chunk's read brings is handed on at once, so a
    large chunk's first events are stamped when they arrive, not when its last byte does).
    No HTTP library: per read, one ``recv`` of the decrypted bytes and a few slices, so
    the client's own cost per event stays a small part of the lag it measures."""

    HEAD, SIZE, DATA, CRLF, ENDED = range(5)

    def __init__(self, tail: Tail, spec: Obj, ctx: ssl.SSLContext | None) -> None:
        self.tail = tail
        url = urllib.parse.urlsplit(spec["base"])
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 443
        self.token = spec["token"]
        self.ctx = ctx
        self.sock: socket.socket | None = None
        self.buf = bytearray()
        self.state = self.HEAD
        self.need = 0  # bytes of the current chunk still to come
        self.failed = False  # the stream ended in an error (re-watched after a pause)
        self.more = False  # the last read left bytes to read (maybe decrypted already)

    def open(self) -> socket.socket:
        """Connect (a blocking TLS handshake) and send the watch request from ``tail.rv``."""
        self.tail.streams += 1
        raw = socket.create_connection((self.host, self.port))
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock = self.ctx.wrap_socket(raw, server_hostname=self.host) if self.ctx else raw
        query = urllib.parse.urlencode({"watch": "1", "resourceVersion": self.tail.rv,
                                        "timeoutSeconds": "900"})
        sock.sendall(f"GET /api/v1/namespaces/{NAMESPACE}/pods?{query} HTTP/1.1\r\n"
                     f"Host: {self.host}:{self.port}\r\nAuthorization: Bearer {self.token}\r\n"
                     f"Accept: application/json\r\n\r\n".encode())
        sock.setblocking(False)
        self.sock, self.buf, self.state, self.failed = sock, bytearray(), self.HEAD, False
        return sock

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def read(self) -> tuple[list[bytes], bool]:
        """What the socket has now, de-chunked: (the body's bytes, whether the stream
        ended: the server's last chunk, the connection closed, or a response that is not a
        watch, as an error)."""
        assert self.sock is not None
        closed, self.more = False, False
        try:
            while data := self.sock.recv(READ_BYTES):
                self.buf += data
                if len(self.buf) >= READ_BYTES:  # the other watchers' turn: more next round
                    self.more = True
                    break
            else:
                closed = True
        except (ssl.SSLWantReadError, BlockingIOError):
            pass
        except OSError as err:
            self.tail.errors.append(repr(err))
            closed = True
        body = self._parse()
        if closed and self.state != self.ENDED:
            self.tail.errors.append("the connection closed before the stream's end")
            self.failed = True
        return body, closed or self.state == self.ENDED

    def _parse(self) -> list[bytes]:
        buf, i, out = self.buf, 0, []
        while self.state != self.ENDED:
            if self.state == self.HEAD:
                end = buf.find(b"\r\n\r\n", i)
                if end < 0:
                    break
                head = bytes(buf[i:end])
                i = end + 4
                status = head.split(b" ", 2)[1]
                if status != b"200" or b"transfer-encoding: chunked" not in head.lower():
                    self.tail.errors.append(f"{status.decode()}: {bytes(buf[i:i + 200])!r}")
                    self.state, self.failed = self.ENDED, True
                    break
                self.state = self.SIZE
            elif self.state == self.SIZE:
                nl = buf.find(b"\r\n", i)
                if nl < 0:
                    break
                self.need = int(bytes(buf[i:nl]).split(b";", 1)[0], 16)
                i = nl + 2
                self.state = self.DATA if self.need else self.ENDED
            elif self.state == self.DATA:
                take = min(self.need, len(buf) - i)
                if not take:
                    break
                out.append(bytes(buf[i:i + take]))
                i += take
                self.need -= take
                if not self.need:
                    self.state = self.CRLF
            else:  # the CRLF after a chunk's data
                if len(buf) - i < 2:
                    break
                i += 2
                self.state = self.SIZE
        del buf[:i]
        return out


def _watch_group(spec: Obj, conn: Connection) -> Obj:
    """The client's loop: one selector over every watcher's socket. Each readable socket is
    read and its bytes stamped at once; queued bytes are decoded when nothing is readable;
    a stream the server ends is decoded to its end and re-watched from its last
    resourceVersion (after 0.2 s if it ended in an error), as client-go does. Every
    ``TICK`` it also records how late it came round (what of the lag a busy client adds
    itself)."""
    ctx = ssl.create_default_context(cafile=spec["ca"]) if spec["ca"] else None
    end: Obj = {"id": None, "expected": []}
    decoder = Decoder(end)
    sel = selectors.DefaultSelector()
    streams = [WatchStream(Tail(spec["rv"]), spec, ctx) for _ in range(spec["watchers"])]
    for stream in streams:
        sel.register(stream.open(), selectors.EVENT_READ, stream)
    conn.send("watching")
    cpu_before = cpu_s()
    delays: list[float] = []
    reopen: list[tuple[float, WatchStream]] = []  # (when, stream) to re-watch
    next_tick = time.monotonic() + TICK
    deadline = None
    while True:
        now = time.monotonic()
        if now >= next_tick:
            if deadline is None:
                delays.append((now - next_tick) * 1000.0)
                if conn.poll():  # the rollout's end: from now on, finish
                    end["id"], end["expected"] = conn.recv()
                    deadline = now + spec["drain_timeout"]
            else:
                decoder.flush()
                if now > deadline or all(s.tail.done or past(s.tail.rv, end["id"])
                                         for s in streams):
                    break
            next_tick = now + TICK
        for when, stream in [r for r in reopen if r[0] <= now]:
            reopen.remove((when, stream))
            sel.register(stream.open(), selectors.EVENT_READ, stream)
        more = [s for s in streams if s.more and s.sock is not None]
        ready = {key.data for key, _ in sel.select(0 if more else max(0.0, next_tick - now))}
        for stream in ready.union(more):
            body, ended = stream.read()
            at = ms_now()
            for data in body:
                decoder.put(stream.tail, at, data)
            if ended:
                sel.unregister(stream.sock)
                stream.close()
                decoder.flush()
                stream.tail.rest = b""
                if not stream.tail.done:
                    reopen.append((time.monotonic() + (0.2 if stream.failed else 0.0), stream))
        decoder.flush()  # this round's reads, each stamped before any of them was decoded
    decoder.flush()
    cpu = cpu_s() - cpu_before
    for stream in streams:
        stream.close()
    return {"tails": [s.tail.report(end["expected"]) for s in streams], "cpu_s": cpu,
            "loop_delay_ms": delays}


def cpu_s() -> float:
    own = os.times()
    return own.user + own.system


def watch_group(spec: Obj, conn: Connection) -> None:
    """A client process: ``spec['watchers']`` watches, each on a connection of its own, read
    by one loop (``_watch_group``). Its garbage collector is off: what it keeps (a million
    events' types and resourceVersions) makes no cycles, and each full collection of it
    would stall every watcher of the process for a tenth of a second or more, counted as the
    server's lag."""
    gc.disable()
    conn.send(_watch_group(spec, conn))


def tail_log(spec: Obj, conn: Connection) -> None:
    """The floor process: XREAD the log directly, the benchmark namespace's pod entries."""
    r = redis.Redis.from_url(spec["redis"], socket_timeout=30)
    tail, end_id = Tail(spec["rv"]), None
    expected: list[tuple[str, str]] = []
    prefix = NAMESPACE.encode() + b"/"
    conn.send("watching")
    while not past(tail.rv, end_id):
        if end_id is None and conn.poll():
            end_id, expected = conn.recv()
        try:
            reply: Any = r.xread({spec["log"]: tail.rv}, count=1000, block=200)
        except redis.RedisError as err:
            tail.errors.append(repr(err))
            continue
        at = ms_now()
        for _stream, entries in reply or []:
            for eid, f in entries:
                if f[b"k"] == b"Pod" and f[b"n"].startswith(prefix):
                    tail.got(eid.decode(), at)  # (its type is the log's own)
                else:
                    tail.rv = eid.decode()
    conn.send({"tails": [tail.report(expected)], "cpu_s": 0.0})


async def measure_watch(api: Api, n: int, watchers: int, procs: int, pause: float = 0.0) -> Obj:
    c = api.c
    async with api.session() as s, \
            s.get(f"/api/v1/namespaces/{NAMESPACE}/pods", params={"limit": "1"}) as r:
        start_rv = (await r.json())["metadata"]["resourceVersion"]
    mp = multiprocessing.get_context("spawn")
    spec: Obj = {"base": api.base, "token": api.token, "rv": start_rv, "drain_timeout": 300,
                 "ca": str(api.cert_dir / "ca.crt") if api.use_tls else "",
                 "redis": c.redis.url, "log": c.s.keys.log}
    children: list[tuple[Any, Connection]] = []
    sizes = [watchers // procs + (i < watchers % procs) for i in range(procs)]
    for i, size in enumerate([0, *sizes]):  # 0: the floor
        ours, theirs = mp.Pipe()
        target = tail_log if size == 0 else watch_group
        # the client processes spread over the API servers in turn
        base = api.bases[(i - 1) % len(api.bases)] if size else api.base
        child = mp.Process(target=target, args=({**spec, "base": base, "watchers": size},
                                                theirs),
                           daemon=True)
        child.start()
        children.append((child, ours))
    for _child, conn in children:
        if not await asyncio.to_thread(conn.poll, 120):
            raise RuntimeError("a watcher process did not start")
        conn.recv()
    await asyncio.sleep(1.0)  # every watch request is in before the rollout starts
    load_before = loadavg()
    c.start_profiling(f"watch-{n}")
    cpu_before = c.cpu_reading()
    started = time.monotonic()
    ds = await asyncio.to_thread(bench_rollout.set_image, c, bench_rollout.NEW_IMAGE)
    generation = int(ds["metadata"]["generation"])
    if pause:
        await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - started)))
        for name in api.names:
            c.procs[name].send_signal(signal.SIGSTOP)
        try:
            await asyncio.sleep(pause)
        finally:
            for name in api.names:
                c.procs[name].send_signal(signal.SIGCONT)
    while True:
        _pods, st = await asyncio.to_thread(c.poll_counts)
        if benchkit.status_complete(st.get("status") or {}, n, generation, updated=True):
            break
        if time.monotonic() - started > 900:
            raise RuntimeError("the rollout did not complete in 900 s")
        c.check_alive()
        await asyncio.sleep(0.2)
    rollout_s = time.monotonic() - started
    expected = [(eid, f[b"t"].decode()) for eid, f in c.scan_log(start_rv)
                if f[b"k"] == b"Pod" and f[b"n"].startswith(NAMESPACE.encode() + b"/")]
    reports: list[Obj] = []
    for _child, conn in children:
        conn.send((expected[-1][0], expected))
    for child, conn in children:
        if not await asyncio.to_thread(conn.poll, 400):
            raise RuntimeError("a watcher process did not report")
        reports.append(conn.recv())
        child.join(10)
    drained_s = time.monotonic() - started
    cpu = benchkit.cpu_delta(cpu_before, c.cpu_reading())
    c.stop_profiling()
    floor = reports[0]["tails"][0]
    tails = [t for group in reports[1:] for t in group["tails"]]
    client_cpu = round(sum(group["cpu_s"] for group in reports[1:]), 2)
    client_delay = stats([d for group in reports[1:] for d in group["loop_delay_ms"]])
    lags = [lag for t in tails for lag in t["lags"]]
    out = {"watchers": watchers, "client_procs": procs, "apiservers": len(api.names),
           "pod_events": len(expected),
           "apiserver_paused_s": pause,
           "rollout_s": round(rollout_s, 2), "drained_s": round(drained_s, 2),
           "lag_ms": stats(lags), "floor_lag_ms": stats(floor["lags"]),
           "watchers_complete": sum(1 for t in tails if t["missing"] == 0
                                    and t["out_of_order"] == 0 and t["wrong_type"] == 0),
           "events_missing_max": max(t["missing"] for t in tails),
           "events_out_of_order": sum(t["out_of_order"] for t in tails),
           "events_wrong_type": sum(t["wrong_type"] for t in tails),
           "events_foreign": sum(t["foreign"] for t in tails),
           "rewatches": sum(t["streams"] - 1 for t in tails),
           "expired": sum(t["expired"] for t in tails),
           "errors": sorted({e for t in tails for e in t["errors"]})[:5],
           "cpu_seconds": cpu, "client_cpu_seconds": client_cpu,
           "client_loop_delay_ms": client_delay, "load_before": load_before, "load_after": loadavg()}
    print(f"  {watchers} watchers in {procs} client processes"
          + (f" on {len(api.names)} API servers" if len(api.names) > 1 else "")
          + f", {len(expected)} pod events of "
          f"the rollout (rollout {rollout_s:.1f} s, all delivered {drained_s:.1f} s after "
          f"set image)" + (f"; the API server stopped for {pause:g} s one second in" if pause
                           else ""))
    print(f"    commit → delivery lag: {fmt(out['lag_ms'])}")
    print(f"    floor (a process tailing the log in Redis): {fmt(out['floor_lag_ms'])}")
    print(f"    the watchers' client: its event loop woke late by {fmt(client_delay)}")
    print(f"    watchers with every event, in order, of the log's type: "
          f"{out['watchers_complete']}/{watchers} (out of order {out['events_out_of_order']}, "
          f"of another type {out['events_wrong_type']}, not the benchmark's pods "
          f"{out['events_foreign']}); re-watches "
          f"{out['rewatches']}, 410 Expired {out['expired']}; cpu seconds {cpu} (the "
          f"watchers' client processes: {client_cpu}, in 'other')")
    return out


# ---- CREATE ----------------------------------------------------------------------------------------

def bare_pod(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": CREATE_NAMESPACE,
                         "labels": {"app": "bench-create"}},
            "spec": {"containers": [{"name": "c", "image": "bench/create:1"}]}}


async def rate(clients: int, total: int, one: Any) -> tuple[float, list[float]]:
    """(requests per second, per-request ms) of ``total`` calls ``one(i)`` by ``clients``."""
    counter = iter(range(total))
    times: list[float] = []

    async def client() -> None:
        for i in counter:
            t0 = time.perf_counter()
            await one(i)
            times.append((time.perf_counter() - t0) * 1000.0)

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return total / (time.perf_counter() - started), times


async def measure_create(api: Api, total: int, clients: int) -> Obj:
    path = f"/api/v1/namespaces/{CREATE_NAMESPACE}/pods"
    out: Obj = {"clients": clients, "creates": total, "load_before": loadavg()}
    sessions = [api.session() for _ in range(clients)]
    try:
        async def version(i: int) -> None:
            async with sessions[i % clients].get("/version") as resp:
                await resp.read()

        async def create(i: int) -> None:
            async with sessions[i % clients].post(path, json=bare_pod(f"p-{i:06d}")) as resp:
                body = await resp.read()
                if resp.status != 201:
                    raise RuntimeError(f"POST pod: {resp.status} {body[:300]!r}")

        await rate(clients, clients * 5, version)  # warm every connection
        version_rate, _ = await rate(clients, total, version)
        create_rate, create_ms = await rate(clients, total, create)
    finally:
        for s in sessions:
            await s.close()

    def direct(i: int) -> None:
        api.c.s.create(bare_pod(f"d-{i:06d}"))

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(direct, range(total)))
    store_rate = total / (time.perf_counter() - started)
    out.update(create_per_s=round(create_rate, 1), create_ms=stats(create_ms),
               version_per_s=round(version_rate, 1), store_create_per_s=round(store_rate, 1),
               load_after=loadavg())
    print(f"  create through the API, {clients} clients: {create_rate:.0f} pods/s "
          f"(per request {fmt(out['create_ms'])})")
    print(f"    floor: GET /version {version_rate:.0f}/s; the store's create from {clients} "
          f"threads in the driver {store_rate:.0f}/s")
    return out


# ---- results ----------------------------------------------------------------------------------------

def write_summary() -> None:
    rows = [r for r in benchkit._load() if r.get("bench") == "apiserver"]
    lines = [
        "# daemonbus API server benchmarks",
        "",
        "Written by `ops/bench_apiserver.py` from `bench.jsonl` (`bench: apiserver`). All "
        "processes, Redis and the driver on one 2-core machine; `load` is the 1-minute load "
        "average when the run was recorded (other work sharing the cores).",
        "",
        "| at | nodes | TLS | LIST JSON p50 / p99 | LIST Table p50 / p99 | list floor p50 | "
        "watchers | client procs | maxUnavailable | watch lag p50 / p99 | floor lag p99 | "
        "rollout | complete | "
        "creates/s (8 clients) | load | workload nice | revision | label |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
        "---: | ---: | ---: | ---: | --- | --- |",
    ]

    def pp(s: Obj | None) -> str:
        s = s or {}
        return f"{s.get('p50')} / {s.get('p99')} ms" if s.get("n") else "-"

    for r in rows[-20:]:
        li, wa, cr = r.get("list") or {}, r.get("watch") or {}, r.get("create") or {}
        lines.append(
            f"| {r.get('at')} | {r.get('nodes')} | {'yes' if r.get('tls') else 'no'} | "
            f"{pp(li.get('json_ms'))} | {pp(li.get('table_ms'))} | "
            f"{(li.get('driver_unpack_encode_ms') or li.get('driver_read_encode_ms') or {}).get('p50', '-')} ms | "
            f"{wa.get('watchers', '-')}"
            f"{' on ' + str(wa['apiservers']) + ' API servers' if wa.get('apiservers', 1) > 1 else ''} | "
            f"{wa.get('client_procs', 1) if wa else '-'} | "
            f"{r.get('max_unavailable', '10%') if wa else '-'} | {pp(wa.get('lag_ms'))} | "
            f"{(wa.get('floor_lag_ms') or {}).get('p99', '-')} ms | "
            f"{wa.get('rollout_s', '-')} s | "
            f"{wa.get('watchers_complete', '-')}/{wa.get('watchers', '-')} | "
            f"{cr.get('create_per_s', '-')} | {r.get('loadavg_1m')} | "
            f"{r.get('load_nice', 0)} | {r.get('revision')}"
            f"{' (API server ' + r['apiserver_revision'] + ')' if r.get('apiserver_revision') else ''} | "
            f"{r.get('label', '')} |")
    SUMMARY.write_text("\n".join(lines) + "\n")


async def run(c: Cluster, args: argparse.Namespace) -> Obj:
    api = Api(c, not args.no_tls, args.apiserver_from, args.apiservers)
    await api.wait_ready()
    result: Obj = {"bench": "apiserver", "nodes": args.nodes, "tls": not args.no_tls,
                   "load_nice": args.load_nice, "max_unavailable": args.max_unavailable,
                   "ready_delay": args.ready_delay,
                   "label": args.label}
    if args.apiserver_from:
        result["apiserver_revision"] = benchkit.git_revision(args.apiserver_from)
    if "list" in args.only:
        result["list"] = await measure_list(api, args.nodes, args.repeats)
    if "watch" in args.only:
        result["watch"] = await measure_watch(api, args.nodes, args.watchers, args.client_procs,
                                             args.pause_apiserver)
    if "create" in args.only:
        result["create"] = await measure_create(api, args.creates, args.clients)
    return result


def int_or_percent(text: str) -> int | str:
    """A maxUnavailable as the manifest takes it: ``5`` is a count, ``10%`` a percentage."""
    if text.isdigit():
        return int(text)
    if text.endswith("%") and text[:-1].isdigit():
        return text
    raise argparse.ArgumentTypeError(f"{text!r}: a count (5) or a percentage (10%)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--watchers", type=int, default=50)
    ap.add_argument("--apiservers", type=int, default=1, metavar="N",
                    help="API server replicas on the one Redis (default 1); the watchers' "
                         "client processes connect to them in turn (LIST and creates go to "
                         "the first)")
    ap.add_argument("--client-procs", type=int, default=10,
                    help="processes the watchers are spread over (default 10: five watchers "
                         "each)")
    ap.add_argument("--repeats", type=int, default=20, help="LIST repetitions per format")
    ap.add_argument("--creates", type=int, default=2000)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--no-tls", action="store_true", help="plain HTTP (loopback only)")
    ap.add_argument("--only", default="list,watch,create",
                    help="comma-separated subset of list, watch, create")
    ap.add_argument("--load-nice", type=int, default=10,
                    help="CPU niceness of the controllers and the node agent (the workload); "
                         "0: everything at one priority")
    ap.add_argument("--max-unavailable", type=int_or_percent, default="10%",
                    help="the rolling update's maxUnavailable, a number or a percentage "
                         "(default 10%%: bursts of 500 pods at 5,000 nodes; upstream's "
                         "default is 1, one node at a time)")
    ap.add_argument("--ready-delay", type=float, default=0.0, metavar="SECONDS",
                    help="the simulated nodes' time from a pod's start to Ready (default 0: "
                         "at once); above the controller's own time per round it sets the "
                         "rollout's pace, so two heads roll at one rate")
    ap.add_argument("--pause-apiserver", type=float, default=0.0, metavar="SECONDS",
                    help="stop the API server for this long one second into the watched "
                         "rollout (default 0: not at all), to see it catch up")
    ap.add_argument("--apiserver-from", type=Path, default=None, metavar="CHECKOUT",
                    help="run the API server from another checkout of daemonbus (the rest "
                         "from this one): the old and new API server side by side under one "
                         "workload")
    ap.add_argument("--label", default="", help="a note stored with the results")
    ap.add_argument("--profile", type=Path, default=None,
                    help="record py-spy profiles (raw collapsed stacks) of the LIST and WATCH "
                         "phases here")
    ap.add_argument("--keep-logs", action="store_true", help="keep the processes' logs")
    ap.add_argument("--no-record", action="store_true",
                    help="do not append to ops/results (tests)")
    ap.add_argument("--json-out", type=Path, default=None,
                    help="write the run's result here as JSON")
    args = ap.parse_args(argv)
    args.only = set(args.only.split(","))
    n = args.nodes
    print(f"== API server: {n} nodes, {args.watchers} watchers, {args.clients} create clients, "
          f"{'TLS' if not args.no_tls else 'plain HTTP'}; the workload (controllers, node "
          f"agent) at niceness {args.load_nice}; load average {loadavg()}")
    try:
        with Cluster(workers=1, profile_dir=args.profile, keep_logs=args.keep_logs,
                     load_nice=args.load_nice, ready_delay=args.ready_delay) as c:
            c.create_nodes([f"node-{i:05d}" for i in range(1, n + 1)])
            c.start_all()
            c.warm_up()
            bench_rollout.converge(c, n, args.max_unavailable)
            result = asyncio.run(run(c, args))
    except BaseException:
        if not benchkit.interrupted():
            raise
        print("interrupted; everything started was stopped", file=sys.stderr)
        return 130
    if args.json_out is not None:
        args.json_out.write_text(json.dumps(result, indent=1, sort_keys=True))
    if not args.no_record:
        benchkit.record(result)
        write_summary()
        print(f"results: {benchkit.JSONL.relative_to(benchkit.ROOT)}, "
              f"{SUMMARY.relative_to(benchkit.ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
