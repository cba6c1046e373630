"""Large DaemonSets: a collector killed mid-cascade finishes it after a restart, and deleting
a DaemonSet of a thousand pods leaves nothing of it in Redis (spec §h, §g)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from shared.control.backoff import BackoffEntry
from shared.model import meta
from shared.store.backoff import RedisBackoff
from shared.store.workqueue import RedisWorkQueue
from tests.integration.gcstack import NS, apply, owned, run
from tests.integration.stack import Stack, wait_for

Obj = dict[str, Any]

BIG = 1000


def big_cluster(stack: Stack, gc_args: tuple[str, ...] = ()) -> Obj:
    """BIG nodes and a DaemonSet with a running pod on each."""
    stack.start_all(workers=2, nodes=BIG, gc=False)
    stack.start("gc", "gc", *gc_args)
    wait_for(lambda: len(stack.store.list("Node")) == BIG, what=f"{BIG} nodes")
    ds = apply(stack, "big")
    wait_for(lambda: stack.status(f"{NS}/big").get("numberReady") == BIG, timeout=60,
             what=f"{BIG} ready pods")
    return ds


def test_collector_killed_mid_cascade_finishes_after_restart(stack: Stack) -> None:
    """SIGKILL the collector while it deletes the pods of a BIG DaemonSet, start a new one: it
    finishes from state. The first collector is throttled so its cascade lasts about ten
    seconds: the kill lands well inside it even when a poll of the pods is slow on a busy
    machine (the restarted collector is not throttled)."""
    ds = big_cluster(stack, ("--batch", "50", "--max-deletes-per-second", "100"))
    uid = meta.uid(ds)

    assert run(stack, "delete", "ds/big").exit_code == 0

    def partly_done() -> bool:
        pods = owned(stack, "Pod", uid)
        untouched = [p for p in pods if not meta.is_being_deleted(p)]
        return 0 < len(untouched) < BIG

    wait_for(partly_done, interval=0.01, what="the cascade under way")
    stack.kill("gc")
    untouched = [p for p in owned(stack, "Pod", uid) if not meta.is_being_deleted(p)]
    assert untouched, "the collector had finished before it was killed"

    stack.start("gc", "gc")
    wait_for(lambda: not owned(stack, "Pod", uid) and not owned(stack, "ControllerRevision", uid),
             timeout=60, what="the cascade finished by the restarted collector")


def traces(stack: Stack, needles: list[bytes]) -> list[str]:
    """Every place under the cluster's prefix that still mentions one of ``needles``: each key
    (``Keys.all_patterns``) is read whole — hash fields and values, set and list members,
    stream entries and pending messages, string values.

    Not searched: the event log and its compaction snapshot (history, kept on purpose) and
    the Event objects (history too; they are not kept for ever: the collector deletes Events
    after their TTL, an hour by default). RQ's own job keys live outside the prefix: a
    successful sync's job is deleted when it ends, a failed one expires after RQ's
    failure_ttl (an hour)."""
    r, keys = stack.store.r, stack.store.keys
    history = {keys.log, keys.log_snapshot, keys.log_snapshot_id,
               keys.objects("Event"), keys.versions("Event")}
    found: list[str] = []

    def check(where: str, *values: Any) -> None:
        for v in values:
            data = v if isinstance(v, bytes) else str(v).encode()
            if any(n in data for n in needles):
                found.append(f"{where}: {data[:120]!r}")

    for pattern in keys.all_patterns():
        for raw_key in r.scan_iter(match=pattern, count=1000):
            key = raw_key.decode()
            if key in history:
                continue
            kind = r.type(raw_key).decode()
            check(f"{kind} {key} (name)", raw_key)
            if kind == "string":
                check(key, r.get(raw_key))
            elif kind == "hash":
                for f, v in r.hscan_iter(raw_key, count=1000):
                    check(f"{key}[{f!r}]", f, v)
            elif kind == "set":
                check(key, *r.smembers(raw_key))
            elif kind == "zset":
                check(key, *(m for m, _ in r.zrange(raw_key, 0, -1, withscores=True)))
            elif kind == "list":
                check(key, *r.lrange(raw_key, 0, -1))
            elif kind == "stream":
                for eid, fields in r.xrange(raw_key):
                    check(f"{key} {eid!r}", *fields.keys(), *fields.values())
                for group in r.xinfo_groups(raw_key):
                    if group["pending"]:
                        found.append(f"{key}: {group['pending']} pending in {group['name']!r}")
    return found


def test_deleting_a_large_daemonset_leaves_nothing_of_it_in_redis(stack: Stack) -> None:
    """Delete a DaemonSet of BIG pods: once the cascade is over, no key of the cluster names
    it or its uid — objects, expectations, backoff, workqueue, status stream. State a
    running controller may hold at any moment is planted first: a failed-pod backoff entry
    and a delayed requeue."""
    ds = big_cluster(stack)
    key, uid = f"{NS}/big", meta.uid(ds)
    RedisBackoff(stack.store.r, stack.store.keys).put_many(
        {f"{uid}/1/node-00001": BackoffEntry(4.0, time.time())})
    RedisWorkQueue(stack.store.r, stack.store.keys).add_after(key, 600)
    assert traces(stack, [key.encode(), uid.encode()])

    assert run(stack, "delete", "ds/big").exit_code == 0

    wait_for(lambda: not owned(stack, "Pod", uid), timeout=60, what="the pods collected")
    left: list[str] = []

    def clean() -> bool:
        left[:] = traces(stack, [key.encode(), uid.encode()])
        return not left

    try:
        wait_for(clean, timeout=30, interval=0.2, what="no trace of the DaemonSet")
    except AssertionError:
        pytest.fail("left behind:\n" + "\n".join(left))
