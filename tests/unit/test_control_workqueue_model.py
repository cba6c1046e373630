"""Random operation sequences keep the workqueue invariants (hypothesis state machine)."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from shared.control.clock import FakeClock
from shared.control.protocols import Lease
from shared.control.workqueue import InMemoryWorkQueue

KEYS = st.sampled_from(["a", "b", "c", "d"])
WORKERS = st.sampled_from(["w1", "w2", "w3"])


class WorkQueueMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.q = InMemoryWorkQueue(self.clock, lease_seconds=5)
        self.leases: list[Lease] = []
        self.needs_work: set[str] = set()  # keys added since they were last handed out
        self.needs_full: set[str] = set()  # keys plain-added since they were last handed out
        self.hinted: dict[str, set[str]] = {}  # node hints since the key was last handed out

    @rule(keys=st.lists(KEYS, max_size=4))
    def add(self, keys: list[str]) -> None:
        self.q.add(keys)
        self.needs_work |= set(keys)
        self.needs_full |= set(keys)

    @rule(key=KEYS, nodes=st.lists(st.sampled_from(["n1", "n2", "n3"]), max_size=3))
    def add_nodes(self, key: str, nodes: list[str]) -> None:
        self.q.add_nodes({key: nodes})
        self.needs_work.add(key)
        self.hinted.setdefault(key, set()).update(nodes)  # none: a sync of no node

    @rule(key=KEYS, delay=st.floats(0, 3))
    def add_after(self, key: str, delay: float) -> None:
        self.q.add_after(key, delay)

    @rule(worker=WORKERS)
    def get(self, worker: str) -> None:
        lease = self.q.try_get(worker)
        if lease is None:
            return
        current = [x for x in self.leases if x.key == lease.key and self.q.renew(x)]
        assert not current, f"{lease.key} handed out while {current} still holds it"
        self.leases.append(lease)
        self.needs_work.discard(lease.key)
        hinted = self.hinted.pop(lease.key, None)
        if lease.key in self.needs_full:
            assert lease.full, f"{lease.key} was added for a full sync: {lease}"
        if not lease.full:
            assert hinted is not None, f"{lease} is neither hinted nor a full sync"
            assert lease.nodes == tuple(sorted(hinted)), f"{lease} lost or invented hints"
        self.needs_full.discard(lease.key)

    @rule(i=st.integers(0, 10))
    def done(self, i: int) -> None:
        if self.leases:
            self.q.done(self.leases.pop(i % len(self.leases)))

    @rule(seconds=st.floats(0, 6))
    def tick(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @invariant()
    def queue_is_dirty_minus_processing(self) -> None:
        s = self.q.state()
        assert len(set(s.queue)) == len(s.queue)
        assert set(s.queue) == s.dirty - s.processing
        assert self.q.len() == len(s.queue)

    @invariant()
    def added_keys_are_never_lost(self) -> None:
        s = self.q.state()
        assert self.needs_work <= s.dirty


TestWorkQueueMachine = WorkQueueMachine.TestCase
TestWorkQueueMachine.settings = settings(max_examples=200, stateful_step_count=40, deadline=None)
