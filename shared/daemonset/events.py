"""The Events one sync writes about its DaemonSet (spec §i): their naming. Pure: decides.

Each Event is named from the DaemonSet, its reason and message, the log position the sync
read through and the sync's ``now`` (``shared.model.events``), so a retried write of one
sync's Events is create-if-absent and a replay of the decision names the same ones. The
reconciler's recorder then counts repeats, combines similar Events and limits their rate,
as client-go's event correlator does (``shared.store.recorder``).
"""

from __future__ import annotations

from typing import Any

from shared.daemonset.types import EmitEvent
from shared.model import events as model_events

Obj = dict[str, Any]
COMPONENT = "daemonset-controller"


def event_objects(ds: Obj, events: list[EmitEvent], now: float, position: str) -> list[Obj]:
    """The Event objects (not yet stamped) a sync of ``ds`` read through ``position`` at
    ``now`` writes for ``events``."""
    return [model_events.event(ds, e.type, e.reason, e.message, now=now,
                               salt=f"{position}|{now}", component=COMPONENT)
            for e in events]
