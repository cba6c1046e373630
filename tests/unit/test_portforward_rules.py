"""The framing of kubectl's port-forward tunnel (``shared.api.spdy``) and the rules of a
port-forward request (``shared.api.portforward``). The framing is proven against kubectl
itself in tests/integration/test_pod_portforward.py; here, its reading of what a peer may
send: frames split anywhere, header blocks in one compression context, malformed bytes."""

from __future__ import annotations

import struct
import zlib

import pytest

from shared.api import portforward, spdy


def _peer_syn_stream(peer: spdy.Session, stream: int, headers: dict[str, str],
                     fin: bool = False) -> bytes:
    """A SYN_STREAM as a client writes it, compressed in ``peer``'s context (the same as a
    SYN_REPLY's block: a session has one context per direction)."""
    reply = peer.syn_reply(stream, headers)
    block = reply[spdy.HEADER_SIZE + 4:]
    payload = struct.pack(">IIBB", stream, 0, 0, 0) + block
    return struct.pack(">HHI", 0x8000 | spdy.VERSION, spdy.SYN_STREAM,
                       (spdy.FLAG_FIN if fin else 0) << 24 | len(payload)) + payload


def test_the_dictionary_is_the_protocols() -> None:
    assert len(spdy.DICTIONARY) == 1423
    assert spdy.DICTIONARY.startswith(b"\x00\x00\x00\x07options\x00\x00\x00\x04head")
    assert spdy.DICTIONARY.endswith(b"utf-,*,enq=0.")


def _client_wire() -> bytes:
    """What kubectl sends for one forwarded connection: its two streams (the error one
    closed at once), a request, a ping, and frames the server ignores."""
    client = spdy.Session()
    return b"".join([
        _peer_syn_stream(client, 1, {"streamType": "error", "port": "8080", "requestID": "0"}),
        _peer_syn_stream(client, 3, {"streamType": "data", "port": "8080", "requestID": "0"}),
        spdy.data(3, b"GET / HTTP/1.0\r\n\r\n"),
        spdy.data(1, fin=True),
        spdy._control(spdy.PING, 0, struct.pack(">I", 7)),
        spdy._control(spdy.WINDOW_UPDATE, 0, struct.pack(">II", 3, 1000)),
        spdy._control(spdy.SETTINGS, 0, struct.pack(">I", 0)),
    ])


@pytest.mark.parametrize("step", [1, 3, 7, 1 << 20])
def test_streams_are_read_in_one_context_whatever_the_split(step: int) -> None:
    server, wire = spdy.Session(), _client_wire()
    frames: list[spdy.Frame] = []
    for at in range(0, len(wire), step):
        frames += server.feed(wire[at:at + step])
    assert [f.kind for f in frames] == [spdy.SYN_STREAM, spdy.SYN_STREAM, spdy.DATA,
                                        spdy.DATA, spdy.PING, spdy.WINDOW_UPDATE,
                                        spdy.SETTINGS]
    assert frames[0].headers == {"streamtype": "error", "port": "8080", "requestid": "0"}
    assert (frames[1].stream, frames[1].headers["streamtype"]) == (3, "data")
    assert frames[2].data == b"GET / HTTP/1.0\r\n\r\n" and not frames[2].fin
    assert frames[3].stream == 1 and frames[3].fin
    assert spdy.ping(frames[4]) == spdy._control(spdy.PING, 0, struct.pack(">I", 7))


def test_what_the_server_writes_reads_back() -> None:
    server, client = spdy.Session(), spdy.Session()
    out = server.syn_reply(1) + server.syn_reply(3, {"a": "b"}, fin=True) \
        + spdy.data(3, b"x" * 70000) + spdy.rst_stream(5, spdy.PROTOCOL_ERROR) \
        + spdy.goaway(3)
    frames = client.feed(out)
    assert [(f.kind, f.stream) for f in frames] == [
        (spdy.SYN_REPLY, 1), (spdy.SYN_REPLY, 3), (spdy.DATA, 3), (spdy.RST_STREAM, 5),
        (spdy.GOAWAY, 0)]
    assert frames[0].headers == {} and frames[1].headers == {"a": "b"} and frames[1].fin
    assert frames[2].data == b"x" * 70000
    assert frames[3].data == struct.pack(">I", spdy.PROTOCOL_ERROR)
    # its header blocks are zlib with the protocol's dictionary, flushed each time
    length = struct.unpack_from(">I", out, 4)[0] & spdy.MAX_LENGTH
    block = out[spdy.HEADER_SIZE + 4:spdy.HEADER_SIZE + length]
    assert zlib.decompressobj(zdict=spdy.DICTIONARY).decompress(block)[:4] == b"\0\0\0\0"


@pytest.mark.parametrize("wire", [
    struct.pack(">HHI", 0x8002, spdy.SYN_STREAM, 0),  # another version
    struct.pack(">HHI", 0x8003, spdy.SYN_STREAM, 4) + b"\0\0\0\1",  # cut short
    struct.pack(">HHI", 0x8003, spdy.SYN_REPLY, 9) + b"\0\0\0\1" + b"junk!",  # no zlib
    struct.pack(">HHI", 0x8003, spdy.PING, 2) + b"\0\1",
])
def test_bytes_that_are_not_spdy3_end_the_session(wire: bytes) -> None:
    with pytest.raises(spdy.SpdyError):
        spdy.Session().feed(wire)


def test_a_header_block_may_not_inflate_without_bound() -> None:
    peer = spdy.Session()
    big = _peer_syn_stream(peer, 1, {"x": "y" * (spdy.MAX_HEADER_BLOCK + 10)})
    with pytest.raises(spdy.SpdyError, match="inflates to more than"):
        spdy.Session().feed(big)
    # a count of pairs the block does not hold
    raw = struct.pack(">I", 3) + struct.pack(">I", 1) + b"a" + struct.pack(">I", 1) + b"b"
    deflate = zlib.compressobj(zdict=spdy.DICTIONARY)
    block = deflate.compress(raw) + deflate.flush(zlib.Z_SYNC_FLUSH)
    wire = struct.pack(">HHI", 0x8003, spdy.SYN_REPLY, 4 + len(block)) + b"\0\0\0\1" + block
    with pytest.raises(spdy.SpdyError, match=r"malformed|cut short"):
        spdy.Session().feed(wire)


@pytest.mark.parametrize(("text", "words"), [
    ("abc", 'unable to parse "abc" as a port: strconv.ParseUint: parsing "abc": invalid '
            "syntax"),
    ("-1", 'unable to parse "-1" as a port'),
    ("65536", 'parsing "65536": value out of range'),
    ("0", 'port "0" must be > 0'),
    ("", 'unable to parse "" as a port'),
])
def test_a_port_is_named_as_kubelet_reads_it(text: str, words: str) -> None:
    with pytest.raises(portforward.ForwardError, match=words.replace("(", r"\(")):
        portforward.parse_port(text)
    assert portforward.parse_port("65535") == 65535


def test_the_channel_protocols_ports_come_from_the_query() -> None:
    assert portforward.query_ports({"ports": ["80,443", "8080"]}) == [80, 443, 8080]
    with pytest.raises(portforward.ForwardError, match='query parameter "port" is required'):
        portforward.query_ports({})
    with pytest.raises(portforward.ForwardError, match="cannot be empty"):
        portforward.query_ports({"ports": [""]})
    with pytest.raises(portforward.ForwardError, match="must be > 0"):
        portforward.query_ports({"ports": ["80,0"]})


def test_a_pod_without_a_node_has_nothing_to_forward_to() -> None:
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u-1"}, "spec": {}}
    with pytest.raises(portforward.ForwardError, match="pod p does not have a host assigned"):
        portforward.check_pod(pod)
    pod["spec"] = {"nodeName": "n1"}
    portforward.check_pod(pod)
    assert portforward.request_path(pod, 8080) == "/portforward/ns/p?uid=u-1&port=8080"
