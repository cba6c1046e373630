"""The fleet view at ``/ui``: its page and bundle (package data built by ``ops/build_ui.py``
from ``ui/``), and the read-only daemonbus answers the page needs beside the Kubernetes API.

The page itself and its bundle are static and carry no data, so they are served without a
token (the page asks for one); everything under ``/ui/api/`` is authenticated like the rest
of the API, and any role may read it:

* ``why``: ``daemonbus why``'s answer (services.replay.why) for a pod, a DaemonSet, or a
  DaemonSet on a node, as lines, with the log entry ids the lines name;
* ``log/{id}``: one log entry (type, kind, key, user, object), for those links;
* ``placement``: the nodes a DaemonSet should not run on, with the reason (the planner's
  placement rules), so the grid tells "not scheduled here" from "missing";
* ``history``: a DaemonSet's revisions (kubectl's rollout history) with a diff of each
  revision's pod template against the one before;
* ``progress``: a DaemonSet's status counters (desired, updated, available) over time,
  from its entries in the log (newest ``PROGRESS_READ`` entries read, ``PROGRESS_POINTS``
  changes returned), so the page's progress chart starts before the page opened;
* ``action``: the write an action would make (``rollout pause|resume|promote|undo``,
  ``cordon|uncordon``), by the CLI's own rules, as a JSON patch (a DaemonSet's with a
  ``test`` of the generation read). The page sends it itself as a normal PATCH of the API, so the usual
  authorization refuses it for a view token and the log names the user who made it.

The request functions here run in the store's thread pool (they read Redis). Acts.
"""

from __future__ import annotations

import copy
import difflib
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonpatch
import yaml

from services.apiserver import status as st
from services.cli import edits
from services.cli import rollout_views as views
from services.replay import bounds, scan, why
from shared.daemonset import history as ds_history
from shared.daemonset import placement
from shared.eventlog.entry import EntryType, RawEntry
from shared.eventlog.ports import EventLog
from shared.model import meta
from shared.model.objkey import ObjectKey
from shared.store import adapters, codec
from shared.store import errors as store_errors
from shared.store.client import Store
from shared.store.eventlog import RedisEventLog

Obj = dict[str, Any]

STATIC_DIR = Path(__file__).parent / "ui"
PAGE = "/ui"
STATIC_PREFIX = "/ui/static/"
API_PREFIX = "/ui/api/"
STATIC_TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html",
                ".txt": "text/plain"}
# The page loads only its own bundle; no inline script, nothing from elsewhere.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
                               "style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}
ENTRY_ID = re.compile(r"\b([0-9]{10,}-[0-9]+)\b")
NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
ACTIONS = ("pause", "resume", "promote", "undo", "cordon", "uncordon")
PROGRESS_COUNTERS = ("desiredNumberScheduled", "updatedNumberScheduled", "numberAvailable")
PROGRESS_READ = 20_000  # log entries read back at most for a progress chart
PROGRESS_POINTS = 500  # changes of the counters returned at most


def is_public(path: str) -> bool:
    """Whether ``path`` is the page or its bundle (static, no data: no token needed)."""
    return path in (PAGE, PAGE + "/") or path.startswith(STATIC_PREFIX)


def static_file(name: str) -> tuple[bytes, str] | None:
    """The bytes and content type of a bundle file, None when there is no such file (only
    plain names of the files shipped, never a path)."""
    suffix = Path(name).suffix
    if "/" in name or name.startswith(".") or suffix not in STATIC_TYPES:
        return None
    path = STATIC_DIR / name
    if not path.is_file():
        return None
    return path.read_bytes(), STATIC_TYPES[suffix]


def _name(value: str | None, what: str) -> str:
    if not value or not NAME.match(value):
        raise st.bad_request(f"{what}: Invalid value: {value!r}: must be a DNS subdomain name")
    return value


def _ds_key(query: dict[str, str]) -> str:
    return f"{_name(query.get('namespace'), 'namespace')}/{_name(query.get('name'), 'name')}"


def _answer(lines: list[str]) -> Obj:
    ids = sorted({m for line in lines for m in ENTRY_ID.findall(line)},
                 key=codec.id_tuple)
    return {"lines": lines, "entries": ids}


def why_answer(store: Store, query: dict[str, str]) -> Obj:
    """``daemonbus why`` for ``kind=pod`` (namespace, name), ``kind=daemonset`` (namespace,
    name) or ``kind=node`` (namespace, name of the DaemonSet, node)."""
    kind = query.get("kind")
    try:
        if kind == "pod":
            return _answer(why.why_pod(store, _name(query.get("namespace"), "namespace"),
                                       _name(query.get("name"), "name")))
        if kind == "daemonset":
            return _answer(why.why_daemonset(store, _ds_key(query), time.time()))
        if kind == "node":
            return _answer(why.why_node(store, _ds_key(query),
                                        _name(query.get("node"), "node"), time.time()))
    except why.WhyError as err:
        raise st.ApiError("NotFound", str(err)) from err
    except store_errors.StoreError as err:
        raise st.from_store(err) from err
    raise st.bad_request('kind: Unsupported value: must be "pod", "daemonset" or "node"')


def log_entry(store: Store, entry_id: str) -> Obj:
    """One entry of the log, by id."""
    if not ENTRY_ID.fullmatch(entry_id):
        raise st.bad_request(f"entry id: Invalid value: {entry_id!r}")
    hit = scan.entry_at(adapters.on(store, RedisEventLog), entry_id)
    if hit is None:
        raise st.ApiError("NotFound", f"the log holds no entry {entry_id} (compacted, or "
                          "never written)")
    return {"id": hit.id, "type": hit.type, "kind": hit.kind, "key": hit.key,
            "user": hit.user, "object": hit.obj}


def _daemonset(store: Store, key: str) -> Obj:
    try:
        return store.get("DaemonSet", key)
    except store_errors.StoreError as err:
        raise st.from_store(err) from err


def placement_answer(store: Store, nodes: list[Obj], query: dict[str, str]) -> Obj:
    """The nodes (of ``nodes``, the watch cache's) the DaemonSet should not run on, with
    why, and the DaemonSet's generation the answer is for."""
    ds = _daemonset(store, _ds_key(query))
    judge = placement.Placement(ds)
    out = {}
    for node in nodes:
        reason = judge.decide(node).reason
        if reason:
            out[meta.name(node)] = reason
    return {"generation": meta.metadata(ds).get("generation"), "notScheduled": out}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def progress_points(log: EventLog, key: str, uid: str, read: int = PROGRESS_READ,
                    points: int = PROGRESS_POINTS) -> list[list[float]]:
    """The DaemonSet ``key`` (of ``uid``)'s status counters over time from its entries in
    ``log``, oldest first: ``[seconds, desired, updated, available]`` each time they
    changed (at the entry that changed them), from the newest ``read`` entries, the newest
    ``points`` changes. An entry of an earlier DaemonSet of that name ends the history."""
    def want(raw: RawEntry) -> bool:
        return raw.kind == "DaemonSet" and raw.key == key and raw.type in (
            EntryType.ADDED, EntryType.MODIFIED)

    out: list[list[float]] = []  # newest first
    for hit in scan.backwards_in(log, want, limit=read):
        if meta.uid(hit.obj) != uid:
            break
        status = hit.obj.get("status") or {}
        counters: list[float] = [_count(status.get(c)) for c in PROGRESS_COUNTERS]
        if out and out[-1][1:] == counters:
            out[-1][0] = bounds.id_seconds(hit.id)  # the same counters, reached earlier
        elif len(out) == points:
            break
        else:
            out.append([bounds.id_seconds(hit.id), *counters])
        if hit.type == EntryType.ADDED:
            break
    return out[::-1]


def progress_answer(store: Store, query: dict[str, str]) -> Obj:
    """``progress_points`` of the DaemonSet as it is now, with its uid (the page's chart is
    of that DaemonSet)."""
    key = _ds_key(query)
    uid = meta.uid(_daemonset(store, key))
    log = adapters.on(store, RedisEventLog)
    return {"uid": uid, "columns": ["time", *PROGRESS_COUNTERS],
            "points": progress_points(log, key, uid)}


def _template_yaml(revision: Obj) -> list[str]:
    return yaml.safe_dump(views.revision_template(revision), sort_keys=True,
                          default_flow_style=False).splitlines()


def history_answer(store: Store, revisions: list[Obj], query: dict[str, str]) -> Obj:
    """The DaemonSet's revisions, oldest first, each with its change-cause, hash and the
    diff of its pod template against the revision before, and whether it is current."""
    ds = _daemonset(store, _ds_key(query))
    owned = views.owned_revisions(ds, revisions)
    out: list[Obj] = []
    before: list[str] = []
    for cr in owned:
        now = _template_yaml(cr)
        number = ds_history.revision_number(cr)
        diff = list(difflib.unified_diff(before, now, "previous", f"revision {number}",
                                         lineterm="", n=2)) if before else []
        out.append({"revision": number, "name": meta.name(cr),
                    "hash": meta.labels(cr).get("controller-revision-hash", ""),
                    "changeCause": meta.annotations(cr).get(views.CHANGE_CAUSE_ANNOTATION, ""),
                    "created": meta.creation_timestamp(cr),
                    "current": ds_history.matches(ds, cr), "diff": diff})
        before = now
    return {"revisions": out}


def _plan(path: str, current: Obj, new: Obj | None, summary: str) -> Obj:
    """The JSON patch from ``current`` to ``new``. A DaemonSet's carries a ``test`` of the
    generation read: a spec changed since (another rollout, an undo) refuses it, while the
    status writes and annotations of a rollout in progress (which leave the generation
    alone) do not."""
    if new is None or new == current:
        return {"noop": True, "summary": summary + ": nothing to change"}
    ops: list[Obj] = list(jsonpatch.make_patch(current, new).patch)
    generation = meta.metadata(current).get("generation")
    if current.get("kind") == "DaemonSet" and generation is not None:
        ops.insert(0, {"op": "test", "path": "/metadata/generation", "value": generation})
    return {"noop": False, "summary": summary, "method": "PATCH", "path": path,
            "contentType": "application/json-patch+json", "body": ops}


def action_plan(store: Store, query: dict[str, str]) -> Obj:
    """The write ``action`` would make, as the CLI's rules make it (rollout_views' edits,
    cordon's set_schedulable): a JSON patch for the page to send through the API."""
    action = query.get("action")
    if action not in ACTIONS:
        raise st.bad_request(f"action: Unsupported value: {action!r}: supported values: "
                             + ", ".join(ACTIONS))
    if action in ("cordon", "uncordon"):
        name = _name(query.get("node"), "node")
        try:
            node = store.get("Node", "/" + name)
        except store_errors.StoreError as err:
            raise st.from_store(err) from err
        new = edits.set_schedulable(copy.deepcopy(node), schedulable=action == "uncordon")
        return _plan(f"/api/v1/nodes/{name}", node, new, f"{action} node {name}")
    key = _ds_key(query)
    ds = _daemonset(store, key)
    ns, name = ObjectKey.parse(key)
    path = f"/apis/apps/v1/namespaces/{ns}/daemonsets/{name}"
    edit: dict[str, Callable[[Obj], Obj | None]] = {
        "pause": views.paused, "resume": views.resumed, "promote": views.promoted}
    if action in edit:
        return _plan(path, ds, edit[action](ds), f"rollout {action} daemonset {key}")
    owned = views.owned_revisions(ds, store.list("ControllerRevision", ns))
    try:
        target, same = views.find_rollback(ds, owned, int(query.get("toRevision") or 0))
    except (views.RolloutError, ValueError) as err:
        raise st.bad_request(str(err)) from err
    number = ds_history.revision_number(target)
    summary = f"rollout undo daemonset {key} to revision {number}"
    if same:
        return {"noop": True, "summary": f"{summary}: skipped (the current template already "
                                         f"matches revision {number})"}
    return _plan(path, ds, views.rolled_back(ds, target), summary)
