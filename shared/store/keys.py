"""The one home of every Redis name daemonbus uses.

All keys of one cluster share the hash tag ``{<prefix>}`` so every Lua script touches a single
slot of a Redis Cluster; several clusters (prefixes) can share one Redis.

Layout (``P`` = ``{prefix}``):

=================================  ======  =====================================================
key                                type    holds
=================================  ======  =====================================================
P:log                              stream  the event log (entry id = resourceVersion)
P:obj:<Kind>                       hash    "<ns>/<name>" → msgpack object (materialised view)
P:rv:<Kind>                        hash    "<ns>/<name>" → resourceVersion of that object
P:parked                           hash    log id → why a reader could not decode that entry
P:logsnap                          string  msgpack snapshot of every object as of the log id
                                           below (written by compaction, read by export)
P:logsnap:id                       string  that log id: entries before it were trimmed
P:status                           stream  computed DaemonSet status from the reconcilers
P:status:pos                       hash    DaemonSet key → log position of the newest status written
P:nodereq:<user>                   stream  write requests of the node agent of ACL user <user>,
                                           committed by node-admission (only <user> may add)
P:wq:queue                         list    FIFO of queued keys
P:wq:dirty                         set     an older version's dirty keys (folded into wq:hints)
P:wq:processing                    zset    key → lease deadline (ms)
P:wq:owner                         hash    key → "<token>:<leased ms>:<worker id>" of its lease
P:wq:waiting                       zset    key → ready time (ms) of a delayed add
P:wq:failures                      hash    key → consecutive failures (rate limiter)
P:wq:bucket                        hash    overall token bucket (tokens, stamp)
P:wq:signal                        list    wake-up tokens for blocked workers
P:wq:stats                         hash    counters for metrics (adds, retries, ...); "gets"
                                           is also the lease-token sequence
P:wq:enqueued                      hash    an older version's enqueue stamps (folded into
                                           wq:hints)
P:wq:shutdown                      string  present while the queue is shut down
P:wq:redelivered                   set     keys reclaimed from an expired lease, not handed
                                           out since
P:wq:hints                         hash    the keys waiting to be processed (dirty) → the ms
                                           each became dirty (queue-wait metric), then "*" (a
                                           full sync is asked for: a plain add) or its node
                                           hints for the next hand-out ("\n<node>\n...")
P:exp                              hash    DaemonSet key → msgpack [add, del, timestamp]
P:backoff                          hash    backoff key → msgpack [delay, last_update]
P:cursor:<reader>                  string  last log id a reader has fully processed
P:lease:<role>                     string  holder id of a leader lease (with TTL)
P:nodelease:<node>                 string  the node's lease: its agent's renew time (ms, with
                                           a TTL), outside the log (shared.store.nodelease)
P:meta                             hash    cluster metadata; "epoch": the log's identity
                                           (shared.store.logmark)
=================================  ======  =====================================================

Two families of names are never written: the ACL grants them, and the commit script asks
Redis (``redis.acl_check_cmd``) whether the caller could write them, to bind a role, and a
node agent's nodes, to credentials (see ``shared.store.roles``):

=================================  =====================================================
daemonbus-role:P:<role>            the caller may commit as <role>
daemonbus-node:P:<node>            the caller may commit as the node agent of <node>
=================================  =====================================================

One name is kept outside the prefix so that the grants of the whole cluster's keys (``P:*``,
the controllers' reads) do not cover it: only the node agents write it and only the API
server and the CLI read it (its token runs commands in pods):

=================================  ======  =====================================================
daemonbus-nodeserver:P:<node>      string  JSON {token, sha256}: how to reach the node agent's
                                           endpoint (logs, exec; shared.store.nodeserver)
=================================  ======  =====================================================
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_PREFIX = "daemonbus"


@dataclass(frozen=True)
class Keys:
    """Every Redis key name of one cluster (one prefix)."""

    prefix: str = DEFAULT_PREFIX

    @property
    def tag(self) -> str:
        return "{" + self.prefix + "}"

    def _k(self, *parts: str) -> str:
        return ":".join((self.tag, *parts))

    # event log and materialised view
    @property
    def log(self) -> str:
        return self._k("log")

    def objects(self, kind: str) -> str:
        return self._k("obj", kind)

    def versions(self, kind: str) -> str:
        return self._k("rv", kind)

    @property
    def parked(self) -> str:
        return self._k("parked")

    @property
    def log_snapshot(self) -> str:
        return self._k("logsnap")

    @property
    def log_snapshot_id(self) -> str:
        return self._k("logsnap", "id")

    @property
    def status_stream(self) -> str:
        return self._k("status")

    @property
    def status_positions(self) -> str:
        return self._k("status", "pos")

    def node_requests(self, user: str) -> str:
        return self._k("nodereq", user)

    @property
    def meta(self) -> str:
        return self._k("meta")

    # workqueue
    @property
    def wq_queue(self) -> str:
        return self._k("wq", "queue")

    @property
    def wq_dirty(self) -> str:
        return self._k("wq", "dirty")

    @property
    def wq_processing(self) -> str:
        return self._k("wq", "processing")

    @property
    def wq_owner(self) -> str:
        return self._k("wq", "owner")

    @property
    def wq_waiting(self) -> str:
        return self._k("wq", "waiting")

    @property
    def wq_failures(self) -> str:
        return self._k("wq", "failures")

    @property
    def wq_bucket(self) -> str:
        return self._k("wq", "bucket")

    @property
    def wq_signal(self) -> str:
        return self._k("wq", "signal")

    @property
    def wq_stats(self) -> str:
        return self._k("wq", "stats")

    @property
    def wq_enqueued(self) -> str:
        return self._k("wq", "enqueued")

    @property
    def wq_shutdown(self) -> str:
        return self._k("wq", "shutdown")

    @property
    def wq_redelivered(self) -> str:
        return self._k("wq", "redelivered")

    @property
    def wq_hints(self) -> str:
        return self._k("wq", "hints")

    # controller state
    @property
    def expectations(self) -> str:
        return self._k("exp")

    @property
    def backoff(self) -> str:
        return self._k("backoff")

    def cursor(self, reader: str) -> str:
        return self._k("cursor", reader)

    def lease(self, role: str) -> str:
        return self._k("lease", role)

    def node_lease(self, node: str) -> str:
        return self._k("nodelease", node)

    def node_server(self, node: str) -> str:
        return f"daemonbus-nodeserver:{self.tag}:{node}"

    # names the ACL grants, never written (see the module docstring)
    def role_key(self, role: str) -> str:
        return f"daemonbus-role:{self.tag}:{role}"

    def node_key(self, node: str) -> str:
        return f"daemonbus-node:{self.tag}:{node}"

    # RQ (its own names, kept under our prefix so clusters do not share queues)
    @property
    def rq_queue_name(self) -> str:
        return f"daemonbus-{self.prefix}"

    def all_patterns(self) -> list[str]:
        """Glob patterns matching every key of this cluster (for cleanup and checks)."""
        return [self.tag + ":*"]
