"""SPDY/3.1 framing, as ``kubectl port-forward`` speaks it: client-go tunnels a SPDY session
inside a WebSocket (subprotocol ``SPDY/3.1+portforward.k8s.io``), the bytes of the session in
its binary messages, and opens two streams for each connection it forwards (``portforward``).
This is the session's side the API server plays, as kubelet's (moby/spdystream's): streams
the client opens are answered, data is framed, pings are echoed. No flow control is done,
as spdystream does none: WINDOW_UPDATE and SETTINGS frames are read and ignored.

A frame is an 8-byte header and a payload. A control frame's header is the control bit, the
version (3), its type, flags and the payload's length (24 bits); a data frame's the stream
id (31 bits), flags and length. The header blocks of SYN_STREAM, SYN_REPLY and HEADERS are
zlib streams with the protocol's dictionary, one compression context for each direction of
a session (each block flushed, ``Z_SYNC_FLUSH``), so every block read must be inflated in
order, whatever its frame. Decides; a :class:`Session` keeps a session's contexts.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

VERSION = 3
DATA, SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = (
    0, 1, 2, 3, 4, 6, 7, 8, 9)
FLAG_FIN = 0x01
HEADER_SIZE = 8
MAX_LENGTH = (1 << 24) - 1
MAX_HEADER_BLOCK = 64 * 1024  # the most a header block may inflate to
# RST_STREAM statuses
PROTOCOL_ERROR, REFUSED_STREAM, CANCEL = 1, 3, 5
_HEADER_TYPES = (SYN_STREAM, SYN_REPLY, HEADERS)
# where the header block starts in the payload of each frame that has one
_BLOCK_AT = {SYN_STREAM: 10, SYN_REPLY: 4, HEADERS: 4}

# The header blocks' zlib dictionary (SPDY/3 draft, 2.6.10.1): the names below, each after
# its length as 4 bytes, then a run of common values; 1,423 bytes in all.
_DICTIONARY_WORDS = (
    *"options head post put delete trace accept accept-charset accept-encoding "
     "accept-language accept-ranges age allow authorization cache-control connection "
     "content-base content-encoding content-language content-length content-location "
     "content-md5 content-range content-type date etag expect expires from host if-match "
     "if-modified-since if-none-match if-range if-unmodified-since last-modified location "
     "max-forwards pragma proxy-authenticate proxy-authorization range referer retry-after "
     "server te trailer transfer-encoding upgrade user-agent vary via warning "
     "www-authenticate method get status".split(),
    "200 OK",
    *"version HTTP/1.1 url public set-cookie keep-alive origin".split())
_DICTIONARY_TAIL = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502"
    "504505203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad "
    "Request401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not "
    "Implemented503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec "
    "00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,"
    "image/gif,application/xml,application/xhtml+xml,text/plain,text/javascript,"
    "publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.")
DICTIONARY = b"".join(struct.pack(">I", len(w)) + w.encode() for w in _DICTIONARY_WORDS) \
    + _DICTIONARY_TAIL.encode()


class SpdyError(ValueError):
    """The peer's bytes are not a SPDY/3 session (the session must end)."""


@dataclass(frozen=True, slots=True)
class Frame:
    """One frame read: ``kind`` (``DATA`` or a control type), its stream (0: none), flags,
    the payload (a data frame's data; else the control payload after what is read into
    the other fields), and a header block's pairs (names lowercase, as SPDY/3 sends them)."""

    kind: int
    stream: int = 0
    flags: int = 0
    data: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def fin(self) -> bool:
        return bool(self.flags & FLAG_FIN)


class Session:
    """One session's framing: what was read and not yet a whole frame, and its two header
    compression contexts."""

    def __init__(self) -> None:
        self._pending = bytearray()
        self._inflate = zlib.decompressobj(zdict=DICTIONARY)
        self._deflate = zlib.compressobj(9, zlib.DEFLATED, 15, 8, zlib.Z_DEFAULT_STRATEGY,
                                         DICTIONARY)

    def feed(self, data: bytes) -> list[Frame]:
        """The whole frames ``data`` completes (the rest is kept); SpdyError for bytes
        that are not SPDY/3."""
        self._pending += data
        frames: list[Frame] = []
        while len(self._pending) >= HEADER_SIZE:
            first, flags_length = struct.unpack_from(">II", self._pending)
            length = flags_length & MAX_LENGTH
            if len(self._pending) < HEADER_SIZE + length:
                break
            payload = bytes(self._pending[HEADER_SIZE:HEADER_SIZE + length])
            del self._pending[:HEADER_SIZE + length]
            flags = flags_length >> 24
            if not first & 0x80000000:
                frames.append(Frame(DATA, first & 0x7FFFFFFF, flags, payload))
                continue
            version, kind = (first >> 16) & 0x7FFF, first & 0xFFFF
            if version != VERSION:
                raise SpdyError(f"SPDY version {version} is not served (only {VERSION})")
            frames.append(self._control(kind, flags, payload))
        return frames

    def _control(self, kind: int, flags: int, payload: bytes) -> Frame:
        at = _BLOCK_AT.get(kind, 0)
        if len(payload) < max(at, 4 if kind in (RST_STREAM, PING, GOAWAY,
                                                WINDOW_UPDATE) else 0):
            raise SpdyError(f"a control frame of type {kind} is cut short")
        stream = struct.unpack_from(">I", payload)[0] & 0x7FFFFFFF if kind in (
            SYN_STREAM, SYN_REPLY, RST_STREAM, HEADERS, WINDOW_UPDATE) else 0
        if kind in _HEADER_TYPES:
            return Frame(kind, stream, flags, payload[:at], self._headers(payload[at:]))
        return Frame(kind, stream, flags, payload[4 if stream else 0:])

    def _headers(self, block: bytes) -> dict[str, str]:
        """A header block inflated (in the session's order) and read."""
        try:
            raw = self._inflate.decompress(block, MAX_HEADER_BLOCK)
        except zlib.error as err:
            raise SpdyError(f"a header block does not inflate: {err}") from err
        if self._inflate.unconsumed_tail:
            raise SpdyError(f"a header block inflates to more than {MAX_HEADER_BLOCK} bytes")
        headers: dict[str, str] = {}
        try:
            (count,), at = struct.unpack_from(">I", raw), 4
            for _ in range(count):
                words = []
                for _part in (0, 1):
                    (size,) = struct.unpack_from(">I", raw, at)
                    if at + 4 + size > len(raw):
                        raise SpdyError("a header block is cut short")
                    words.append(raw[at + 4:at + 4 + size].decode())
                    at += 4 + size
                headers[words[0].lower()] = words[1]
        except (struct.error, UnicodeDecodeError) as err:
            raise SpdyError(f"a header block is malformed: {err}") from err
        return headers

    def _block(self, headers: dict[str, str]) -> bytes:
        raw = struct.pack(">I", len(headers)) + b"".join(
            struct.pack(">I", len(n := name.lower().encode())) + n
            + struct.pack(">I", len(v := value.encode())) + v
            for name, value in headers.items())
        return self._deflate.compress(raw) + self._deflate.flush(zlib.Z_SYNC_FLUSH)

    def syn_reply(self, stream: int, headers: dict[str, str] | None = None,
                  fin: bool = False) -> bytes:
        """The answer to the stream the peer opened (spdystream waits for it)."""
        return _control(SYN_REPLY, FLAG_FIN if fin else 0,
                        struct.pack(">I", stream) + self._block(headers or {}))


def data(stream: int, payload: bytes = b"", fin: bool = False) -> bytes:
    """A data frame (``payload`` at most MAX_LENGTH bytes); ``fin``: the sender's last."""
    return struct.pack(">II", stream & 0x7FFFFFFF,
                       (FLAG_FIN if fin else 0) << 24 | len(payload)) + payload


def rst_stream(stream: int, status: int) -> bytes:
    return _control(RST_STREAM, 0, struct.pack(">II", stream, status))


def ping(frame: Frame) -> bytes:
    """The echo of a PING the peer sent."""
    return _control(PING, 0, frame.data[:4])


def server_ping(n: int) -> bytes:
    """The server's ``n``-th PING of its own (even ids, as SPDY/3 gives a server)."""
    return _control(PING, 0, struct.pack(">I", (2 * n) & 0xFFFFFFFE))


def goaway(last_stream: int, status: int = 0) -> bytes:
    return _control(GOAWAY, 0, struct.pack(">II", last_stream, status))


def _control(kind: int, flags: int, payload: bytes) -> bytes:
    return struct.pack(">HHI", 0x8000 | VERSION, kind, flags << 24 | len(payload)) + payload
