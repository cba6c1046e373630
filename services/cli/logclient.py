"""``daemonbus logs``' client of a node agent's log endpoint (``services.node_agent.logserver``),
from any machine (where it listens and how to trust it: ``shared.store.nodeserver.endpoint``):
one request, with the endpoint's certificate pinned and its token sent. Acts. (The API server has its own
asynchronous client, ``services.apiserver.podlog``.)
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import ssl

from shared.api.podlog import Endpoint, LogError

CONNECT_TIMEOUT = 10.0


def open_stream(ep: Endpoint, path: str) -> http.client.HTTPResponse:
    """Acts: GET ``path`` from the endpoint, its certificate pinned, with its token; the
    response to read the log from. LogError for an answer other than 200."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # trust is the pinned SHA-256, checked below
    conn = http.client.HTTPSConnection(ep.host, ep.port, timeout=CONNECT_TIMEOUT, context=ctx)
    try:
        conn.connect()
        assert isinstance(conn.sock, ssl.SSLSocket)
        der = conn.sock.getpeercert(binary_form=True) or b""
        if not hmac.compare_digest(hashlib.sha256(der).hexdigest(), ep.sha256):
            raise LogError(f"the log endpoint {ep.base} is not the one its node agent "
                           "published (certificate mismatch)")
        conn.sock.settimeout(None)  # a follow waits as long as the container is quiet
        conn.request("GET", path, headers={"Authorization": f"Bearer {ep.token}"})
        resp = conn.getresponse()
    except OSError as err:
        conn.close()
        raise LogError(f"the log endpoint {ep.base} cannot be reached: {err}") from err
    except LogError:
        conn.close()
        raise
    if resp.status != 200:
        body = resp.read(4096).decode(errors="replace")
        conn.close()
        raise LogError(body or f"the log endpoint answered {resp.status}")
    return resp
