"""A caller's TLS connection and another socket joined both ways on one thread (acts): the
node agent's endpoint relays a port-forward's connection to the pod's port, and an exec's to
one end of a socket pair whose other end the session's own threads read and write
(``logserver``).

One thread moves both directions over non-blocking sockets, each with at most a buffer in
hand: an SSL connection read and written by two threads at once fails at random (OpenSSL's
objects are not safe under concurrent use; port-forward's first relay failed so under load).
A direction whose sink is slow stops reading its source, so a slow reader holds its writer
up, and the other direction moves on meanwhile.
"""

from __future__ import annotations

import io
import selectors
import socket
import ssl

BUFFER = 64 * 1024  # the most a direction holds: read from its source, not yet written on


def both_ways(conn: socket.socket, peer: socket.socket,
              buffered: io.BufferedIOBase | None = None) -> None:
    """Acts: ``conn``'s bytes to ``peer`` and ``peer``'s to ``conn`` until either side
    closes or fails (a reset, a TLS error); returns then, the sockets left open and
    non-blocking. ``buffered``: a reader of ``conn`` that may hold bytes already read from it
    (an HTTP head's reader's), which go first. Everything ``peer`` sent before its close has
    been written on ``conn`` when it returns."""
    conn.setblocking(False)
    peer.setblocking(False)
    to_peer = to_conn = b""
    try:
        if buffered is not None:
            try:
                to_peer = buffered.read1(BUFFER) or b""  # (what it holds, without waiting)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
                pass
        while True:
            waits = {conn: 0, peer: 0}  # what each socket is to be waited on for
            to_conn, out = _step(to_conn, peer, conn, waits)
            to_peer, into = _step(to_peer, conn, peer, waits)
            if not (out or into):
                with selectors.DefaultSelector() as sel:
                    for sock, events in waits.items():
                        if events:
                            sel.register(sock, events)
                    sel.select()
    except (EOFError, OSError):
        return


def _step(held: bytes, source: socket.socket, sink: socket.socket,
          waits: dict[socket.socket, int]) -> tuple[bytes, bool]:
    """Acts: one move of a relay's direction over non-blocking sockets: ``held`` (what
    ``source`` gave and ``sink`` has not taken) written on, else more read. Returns what is
    held then and whether anything moved; when nothing could, the socket that would block
    gets what to wait for in ``waits`` (a TLS socket may want to read to write, or the
    other way). EOFError once ``source`` has closed."""
    sock, event = (sink, selectors.EVENT_WRITE) if held else (source, selectors.EVENT_READ)
    try:
        if held:
            return held[sink.send(held):], True
        got = source.recv(BUFFER)
    except ssl.SSLWantReadError:
        waits[sock] |= selectors.EVENT_READ
        return held, False
    except ssl.SSLWantWriteError:
        waits[sock] |= selectors.EVENT_WRITE
        return held, False
    except BlockingIOError:
        waits[sock] |= event
        return held, False
    if not got:
        raise EOFError
    return got, True
