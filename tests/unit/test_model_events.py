"""client-go's event correlator (``events.Correlator``): repeats counted on the Event written
first, similar Events combined, each object's Events rate-limited."""

from __future__ import annotations

from typing import Any

from shared.model import events, meta

Obj = dict[str, Any]
POD = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "agent-x", "namespace": "default", "uid": "u-1"}}


def kubelet(message: str, now: float, reason: str = "BackOff", pod: Obj = POD) -> Obj:
    ev = events.event(pod, "Warning", reason, message, now=now, salt=str(now),
                      component="kubelet")
    ev["metadata"]["name"] = f"{meta.name(pod)}.{int(now * 1e9):x}"
    ev["source"]["host"] = "node-a"
    return ev


def test_a_repeat_counts_on_the_event_written_first() -> None:
    c = events.Correlator()
    first = c.correlate(kubelet("Back-off restarting failed container web", 100.0), 100.0)
    assert first is not None and not first.repeat and first.event["count"] == 1
    stored = {**first.event, "metadata": {**first.event["metadata"], "uid": "e-1"}}
    c.stored(first, stored)
    again = c.correlate(kubelet("Back-off restarting failed container web", 160.0), 160.0)
    assert again is not None and again.repeat
    # the stored Event (its name, uid, first time) with the new count and last time
    assert again.event["metadata"] == stored["metadata"]
    assert (again.event["count"], again.event["firstTimestamp"],
            again.event["lastTimestamp"]) == (2, meta.format_time(100.0),
                                              meta.format_time(160.0))
    third = c.correlate(kubelet("Back-off restarting failed container web", 170.0), 170.0)
    assert third is not None and third.event["count"] == 3
    # another message is another Event
    other = c.correlate(kubelet("Back-off restarting failed container sidecar", 171.0), 171.0)
    assert other is not None and not other.repeat and other.event["count"] == 1


def test_a_forgotten_event_is_created_anew() -> None:
    c = events.Correlator()
    first = c.correlate(kubelet("m", 1.0), 1.0)
    assert first is not None
    c.forget(first)
    again = c.correlate(kubelet("m", 2.0), 2.0)
    assert again is not None and not again.repeat and again.event["count"] == 1


def test_ten_similar_events_within_ten_minutes_are_combined() -> None:
    c = events.Correlator()
    told = [c.correlate(kubelet(f"Readiness probe failed: try {i}", 10.0 + i,
                                reason="Unhealthy"), 10.0 + i) for i in range(12)]
    assert all(t is not None for t in told)
    assert [t.repeat for t in told if t is not None][:9] == [False] * 9
    tenth, eleventh = told[9], told[10]
    assert tenth is not None and eleventh is not None
    assert tenth.event["message"] == \
        "(combined from similar events): Readiness probe failed: try 9"
    assert not tenth.repeat and tenth.event["count"] == 1
    # the next similar one counts on the combined Event, with its own message
    assert eleventh.repeat and eleventh.event["count"] == 2
    assert eleventh.event["message"] == \
        "(combined from similar events): Readiness probe failed: try 10"
    assert eleventh.event["metadata"]["name"] == tenth.event["metadata"]["name"]
    # ten minutes later they start over
    later = c.correlate(kubelet("Readiness probe failed: try 99", 700.0, reason="Unhealthy"),
                        700.0)
    assert later is not None and not later.repeat
    assert later.event["message"] == "Readiness probe failed: try 99"


def test_each_object_has_a_burst_of_25_then_one_per_five_minutes() -> None:
    c = events.Correlator()
    told = [c.correlate(kubelet("m", 1.0 + i / 1000, reason=f"R{i % 5}"), 1.0 + i / 1000)
            for i in range(30)]
    assert sum(t is not None for t in told) == 25
    other_pod = {**POD, "metadata": {**POD["metadata"], "name": "agent-y", "uid": "u-2"}}
    assert c.correlate(kubelet("m", 2.0, pod=other_pod), 2.0) is not None
    assert c.correlate(kubelet("m", 100.0, reason="R0"), 100.0) is None
    # a filtered repeat still counts: the next one let through carries it
    passed = c.correlate(kubelet("m", 400.0, reason="R0"), 400.0)
    assert passed is not None and passed.repeat
    assert passed.event["count"] == 30 // 5 + 2
