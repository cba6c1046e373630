"""The node-admission process: commit node agents' write requests (``shared.store.
noderequests``) as the node-agent role, the way Kubernetes' Node authorizer and
NodeRestriction admission stand between kubelets and etcd.

A node agent then holds no write access to the store: it may only add requests to its own
stream. Each request is decoded and every object in it validated here; the nodes it names
are vouched for only where the requesting user's ACL grants them (``daemonbus-node:…``); and
the commit script applies the node-agent rules to every op (its nodes only; status and
binding of their pods; removal of pods being deleted). A refused or invalid request is logged
with its user and dropped; it changes nothing.
"""

from __future__ import annotations

import logging
import threading

from prometheus_client import Counter

from shared.eventlog.entry import CommitResult
from shared.model import validation as model_validation
from shared.store import adapters, errors, noderequests
from shared.store.client import Store

log = logging.getLogger("node-admission")

REQUESTS = Counter("daemonbus_node_requests_total", "Node agents' write requests",
                   ["result"])


class Admission:
    def __init__(self, store: Store, users: list[str], consumer: str) -> None:
        self.store = store
        self.inbox = adapters.on(store, noderequests.Inbox, users, consumer)
        self.committed = 0

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self.inbox.ensure_groups()
                while not stop.is_set():
                    self.step()
            except errors.UnavailableError as err:
                log.warning("redis unavailable: %s; retrying", err)
                stop.wait(1.0)

    def step(self, block_ms: int = 1000) -> int:
        """Acts: commit the pending requests (each at most once: acknowledged after)."""
        pending = self.inbox.read(block_ms=block_ms)
        for stream, entry_id, fields in pending:
            user = self.inbox.user(stream)
            self.admit(user, entry_id, fields)
            self.inbox.done(stream, entry_id)
        return len(pending)

    def admit(self, user: str, entry_id: str, fields: dict[bytes, bytes]) -> bool:
        """Acts: commit one request of ``user`` if it is well-formed and valid."""
        try:
            req = noderequests.decode(entry_id, user, fields)
        except errors.CorruptEntryError as err:
            log.error("request %s of %s dropped: %s", entry_id, user, err)
            REQUESTS.labels("malformed").inc()
            return False
        for op in req.ops:
            problems = model_validation.validate(op.obj)
            if problems:
                log.error("request %s of %s dropped: %s %s is invalid: %s", entry_id, user,
                          op.kind, op.key, "; ".join(problems))
                REQUESTS.labels("invalid").inc()
                return False
        nodes = [n for n in req.nodes if self.inbox.grants(user, n)]
        results = self.store.commit(req.ops, nodes=nodes)
        if any(r.status == CommitResult.FORBIDDEN for r in results):
            log.error("request %s of %s refused (the store logged why)", entry_id, user)
            REQUESTS.labels("forbidden").inc()
            return False
        self.committed += sum(1 for r in results if r.ok)
        REQUESTS.labels("committed").inc()
        return True
