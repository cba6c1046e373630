"""A tiny reconciler-like worker process for the multi-process workqueue tests.

Run as ``python -m tests.integration.queue_worker MODE URL PREFIX WORKER``:

* ``work``: get → check exclusivity → done, until the queue is shut down. Exclusivity is
  checked independently of the queue: ``SET <holder key> worker NX`` must succeed while a
  key is held (else the violation counter rises).
* ``die``: take one key, print it, and exit without ever calling done.
"""

from __future__ import annotations

import os
import random
import sys
import time

import redis

from shared.store.keys import Keys
from shared.store.workqueue import RedisWorkQueue


def holder_key(keys: Keys, key: str) -> str:
    return f"{keys.tag}:test:holder:{key}"


def violations_key(keys: Keys) -> str:
    return f"{keys.tag}:test:violations"


def processed_key(keys: Keys) -> str:
    return f"{keys.tag}:test:processed"


def work(q: RedisWorkQueue, r: redis.Redis, keys: Keys, worker: str) -> None:
    rng = random.Random(worker)
    while True:
        lease = q.get(worker, block_seconds=0.5)
        if lease is None:
            if q.shutting_down():
                return
            continue
        if not r.set(holder_key(keys, lease.key), worker, nx=True):
            r.incr(violations_key(keys))
        time.sleep(rng.random() * 0.002)  # the "sync"
        r.delete(holder_key(keys, lease.key))
        r.incr(processed_key(keys))
        q.done(lease)


def main(argv: list[str]) -> int:
    mode, url, prefix, worker = argv
    keys = Keys(prefix)
    r = redis.Redis.from_url(url)
    q = RedisWorkQueue(r, keys, lease_seconds=float(os.environ.get("LEASE_SECONDS", "10")))
    if mode == "work":
        work(q, r, keys, worker)
        return 0
    if mode == "die":
        lease = q.get(worker, block_seconds=10)
        print(lease.key if lease else "", flush=True)
        os._exit(0)  # no done, no cleanup: a crash
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
