"""core/v1 Events as controllers write them (``record.EventRecorder``). Pure: builds objects.

The name is ``<involved name>.<16 hex digits>`` from the involved object's uid, the reason, the
message and ``salt`` (the writer's decision identity and time), so a retried write of one
decision's Event is create-if-absent, not a second Event.
"""

from __future__ import annotations

import hashlib
from typing import Any

from shared.model import meta

Obj = dict[str, Any]


def event(involved: Obj, type: str, reason: str, message: str, *, now: float, salt: str,
          component: str, count: int = 1) -> Obj:
    """The Event about ``involved`` (a stored object) written by ``component`` at ``now``."""
    digest = hashlib.sha256(
        f"{meta.uid(involved)}|{reason}|{message}|{salt}".encode()).hexdigest()[:16]
    stamp = meta.format_time(now)
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{meta.name(involved)}.{digest}",
                     "namespace": meta.namespace(involved)},
        "involvedObject": {"apiVersion": str(involved.get("apiVersion") or ""),
                           "kind": str(involved.get("kind") or ""),
                           "namespace": meta.namespace(involved), "name": meta.name(involved),
                           "uid": meta.uid(involved),
                           "resourceVersion": meta.resource_version(involved)},
        "reason": reason, "message": message, "type": type, "count": count,
        "firstTimestamp": stamp, "lastTimestamp": stamp,
        # a recorder's source is its component alone, as kube-controller-manager's, whose
        # reportingInstance is the source's (empty) host; a node agent's names its node
        "source": {"component": component},
        "reportingComponent": component, "reportingInstance": "",
    }
