"""The Events one sync writes about its DaemonSet (spec §i): aggregation and naming. Pure:
decides.

More than ``AGGREGATE_AFTER`` events of one type and reason in one sync become one Event
with their count and the last message, as client-go's event correlator combines similar
events. Each Event is named from the DaemonSet, its reason and message, the log position the
sync read through and the sync's ``now`` (``shared.model.events``), so a retried write of one
sync's Events is create-if-absent and a replay of the decision names the same ones.
"""

from __future__ import annotations

from typing import Any

from shared.daemonset.types import EmitEvent
from shared.model import events as model_events

Obj = dict[str, Any]
AGGREGATE_AFTER = 10
COMPONENT = "daemonset-controller"


def aggregate(events: list[EmitEvent]) -> list[tuple[EmitEvent, int]]:
    """Each event to write with its count: groups of one (type, reason) in order of their
    first event; a group of more than ``AGGREGATE_AFTER`` is one event, "(combined from
    similar events): <last message>", counting them all."""
    groups: dict[tuple[str, str], list[EmitEvent]] = {}
    for e in events:
        groups.setdefault((e.type, e.reason), []).append(e)
    out: list[tuple[EmitEvent, int]] = []
    for (etype, reason), evs in groups.items():
        if len(evs) > AGGREGATE_AFTER:
            combined = f"(combined from similar events): {evs[-1].message}"
            out.append((EmitEvent(etype, reason, combined), len(evs)))
        else:
            out += [(e, 1) for e in evs]
    return out


def event_objects(ds: Obj, events: list[EmitEvent], now: float, position: str) -> list[Obj]:
    """The Event objects (not yet stamped) a sync of ``ds`` read through ``position`` at
    ``now`` writes for ``events``."""
    return [model_events.event(ds, e.type, e.reason, e.message, now=now,
                               salt=f"{position}|{now}", component=COMPONENT, count=count)
            for e, count in aggregate(events)]
