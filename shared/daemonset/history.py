"""ControllerRevisions of a DaemonSet (spec §e): revision data, hash, constructHistory and
cleanupHistory. Pure: decides, returns actions.

A revision stores ``data`` = ``{"spec":{"template": <template + "$patch":"replace">}}`` as an
object; :func:`matches` compares the canonical serialisation (Go's ``json.Marshal`` of a map:
sorted keys, compact, HTML characters escaped) byte for byte, as upstream's ``Match`` does.
"""

from __future__ import annotations

import copy
import json
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from shared.daemonset import claim, dsutil
from shared.daemonset.types import (
    CreateRevision,
    DeleteRevision,
    PatchOwner,
    RelabelPod,
    UpdateRevision,
)
from shared.model import meta

Obj = dict[str, Any]
HistoryAction = CreateRevision | UpdateRevision | DeleteRevision | RelabelPod | PatchOwner

_FNV32_OFFSET = 0x811C9DC5
_FNV32_PRIME = 0x01000193


def _go_value(value: Any) -> Any:
    """Integral floats print as integers in Go (``float64`` from ``interface{}``)."""
    if isinstance(value, dict):
        return {k: _go_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_go_value(v) for v in value]
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return int(value)
    return value


def canonical_json(value: Any) -> str:
    """JSON as Go's ``json.Marshal`` writes a map: keys sorted at every level, no spaces,
    non-ASCII kept, and ``<``, ``>``, ``&``, U+2028, U+2029 escaped."""
    text = json.dumps(
        _go_value(value),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def revision_data(ds: Obj) -> Obj:
    """``getPatch(ds)`` as an object: the template with ``"$patch": "replace"`` inside."""
    template = dict(dsutil.template(ds))
    template["$patch"] = "replace"
    return {"spec": {"template": template}}


def _data_text(revision: Obj) -> str | None:
    data = revision.get("data")
    if isinstance(data, str):
        return data
    if isinstance(data, bytes):
        return data.decode("utf-8", "replace")
    if data is None:
        return None
    try:
        return canonical_json(data)
    except (TypeError, ValueError):
        return None


def matches(ds: Obj, revision: Obj, *, patch: str | None = None) -> bool:
    """``Match(ds, history)``: the revision's data equals the DaemonSet's patch byte for byte.
    ``patch`` may pass a precomputed ``canonical_json(revision_data(ds))``."""
    wanted = patch if patch is not None else canonical_json(revision_data(ds))
    return _data_text(revision) == wanted


def revision_template(revision: Obj) -> Obj:
    """The pod template a revision stores (its data with the ``$patch`` directive dropped),
    i.e. the template ``applyDaemonSetHistory`` gives the DaemonSet; ``{}`` when the data
    holds none."""
    data: Any = revision.get("data")
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except ValueError:
            data = {}
    template = ((data or {}).get("spec") or {}).get("template") if isinstance(data, dict) else None
    if not isinstance(template, dict):
        return {}
    out = copy.deepcopy(template)
    out.pop("$patch", None)
    return out


def rolled_back(ds: Obj, revision: Obj) -> Obj:
    """A copy of ``ds`` with its template replaced by the revision's: what ``rollout undo``
    writes (the strategic-merge patch ``{"spec":{"template":{..., "$patch":"replace"}}}``
    kubectl sends) and what an automatic rollback writes."""
    new = copy.deepcopy(ds)
    new.setdefault("spec", {})["template"] = revision_template(revision)
    return new


def _fnv32a(data: bytes, h: int = _FNV32_OFFSET) -> int:
    for byte in data:
        h = ((h ^ byte) * _FNV32_PRIME) & 0xFFFFFFFF
    return h


def safe_encode(text: str) -> str:
    """``rand.SafeEncodeString``: each byte → ``meta.NAME_ALPHABET[byte % 27]``."""
    return "".join(meta.NAME_ALPHABET[b % len(meta.NAME_ALPHABET)] for b in text.encode())


def compute_hash(template: Obj, collision_count: int | None) -> str:
    """``ComputeHash``: FNV-32a over a deterministic dump of ``template`` (canonical JSON), plus
    the collision count as uint32 little-endian and 4 zero bytes when it is not None; the
    decimal sum is safe-encoded (≤ 10 characters). None and 0 give different hashes."""
    h = _fnv32a(canonical_json(template).encode())
    if collision_count is not None:
        h = _fnv32a(struct.pack("<I", collision_count & 0xFFFFFFFF) + b"\x00" * 4, h)
    return safe_encode(str(h))


def bumped_collision_count(cached: Obj, fresh: Obj) -> Obj | None:
    """The status to write after a revision name collision (§e.3 step 5): ``fresh``'s (the
    DaemonSet as just read) with ``collisionCount`` one higher, so the next sync hashes the
    template anew. None when the count the sync decided on (``cached``'s) is not the stored
    one: the collision may be its own stale view, and the sync is retried until its cache has
    the current count."""
    cached_count = dsutil.status(cached).get("collisionCount")
    current = dsutil.status(fresh).get("collisionCount")
    if cached_count != current:
        return None
    return {**dsutil.status(fresh), "collisionCount": int(current or 0) + 1}


def revision_number(revision: Obj) -> int:
    value = revision.get("revision")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def revision_hash(revision: Obj) -> str:
    return str(meta.labels(revision).get(dsutil.HASH_LABEL) or "")


def new_revision(ds: Obj, hash: str, revision: int) -> Obj:
    """The ControllerRevision ``snapshot(ds, revision)`` creates, named ``<ds>-<hash>``."""
    labels = dsutil.template_labels(ds)
    labels[dsutil.HASH_LABEL] = hash
    md: Obj = {
        "name": f"{meta.name(ds)}-{hash}",
        "namespace": meta.namespace(ds),
        "labels": labels,
    }
    annotations = meta.annotations(ds)
    if annotations:
        md["annotations"] = dict(annotations)
    md["ownerReferences"] = [meta.controller_owner_ref(ds)]
    return {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": md,
        "data": revision_data(ds),
        "revision": revision,
    }


def _with(revision: Obj, *, labels: dict[str, str] | None = None, number: int | None = None) -> Obj:
    """A shallow view of ``revision`` with planned label / revision updates applied."""
    view = dict(revision)
    if labels is not None:
        md = dict(meta.metadata(revision))
        md["labels"] = labels
        view["metadata"] = md
    if number is not None:
        view["revision"] = number
    return view


@dataclass
class History:
    """The outcome of constructHistory: actions to run first, the current revision's hash."""

    hash: str
    current: Obj  # as it will be after ``actions``
    old: list[Obj]  # claimed non-matching revisions, as they will be after ``actions``
    actions: list[HistoryAction] = field(default_factory=list)


def construct_history(ds: Obj, revisions: list[Obj], claimed_pods: Iterable[Obj]) -> History:
    """``constructHistory`` (§e.3): claim revisions, add missing hash labels (value = the
    revision's name), split current/old, create the current revision or dedup the current
    ones (relabel pods to the keeper's hash, delete the duplicates) and bump the keeper's
    revision to ``max(old) + 1``. ``claimed_pods`` are the DaemonSet's claimed pods, in any
    order: relabels are planned in pod name order (stable)."""
    claimed, claim_actions = claim.claim(ds, revisions, "ControllerRevision")
    actions: list[HistoryAction] = list(claim_actions)
    patch = canonical_json(revision_data(ds))
    current: list[Obj] = []
    old: list[Obj] = []
    for cr in claimed:
        if dsutil.HASH_LABEL not in meta.labels(cr):
            labels = dict(meta.labels(cr))
            labels[dsutil.HASH_LABEL] = meta.name(cr)
            actions.append(
                UpdateRevision(
                    namespace=meta.namespace(cr),
                    name=meta.name(cr),
                    uid=meta.uid(cr),
                    labels=labels,
                )
            )
            cr = _with(cr, labels=labels)
        (current if matches(ds, cr, patch=patch) else old).append(cr)

    next_revision = max((revision_number(cr) for cr in old), default=0) + 1
    if not current:
        hash = compute_hash(dsutil.template(ds), dsutil.collision_count(ds))
        created = new_revision(ds, hash, next_revision)
        actions.append(CreateRevision(revision=created))
        return History(hash=hash, current=created, old=old, actions=actions)

    keeper = current[0]
    highest = 0
    for cr in current:  # highest revision wins; on ties the later one
        if revision_number(cr) >= highest:
            keeper, highest = cr, revision_number(cr)
    keeper_hash = revision_hash(keeper)
    duplicates = [cr for cr in current if meta.name(cr) != meta.name(keeper)]
    if duplicates:
        for pod in sorted(claimed_pods, key=meta.name):
            if meta.labels(pod).get(dsutil.HASH_LABEL) != keeper_hash:
                actions.append(
                    RelabelPod(
                        namespace=meta.namespace(pod),
                        name=meta.name(pod),
                        uid=meta.uid(pod),
                        labels={dsutil.HASH_LABEL: keeper_hash},
                    )
                )
        for dup in duplicates:
            actions.append(
                DeleteRevision(
                    namespace=meta.namespace(dup), name=meta.name(dup), uid=meta.uid(dup)
                )
            )
    if revision_number(keeper) < next_revision:
        actions.append(
            UpdateRevision(
                namespace=meta.namespace(keeper),
                name=meta.name(keeper),
                uid=meta.uid(keeper),
                revision=next_revision,
            )
        )
        keeper = _with(keeper, number=next_revision)
    return History(hash=keeper_hash, current=keeper, old=old, actions=actions)


def cleanup_history(ds: Obj, old: list[Obj], claimed_pods: Iterable[Obj]
                    ) -> list[DeleteRevision]:
    """``cleanupHistory`` (§e.5): delete the oldest old revisions beyond revisionHistoryLimit,
    never one whose hash is carried by a claimed pod (deleted terminal pods included)."""
    to_kill = len(old) - dsutil.revision_history_limit(ds)
    if to_kill <= 0:
        return []
    live = {
        h
        for pods in claim.nodes_to_daemon_pods(claimed_pods, include_deleted_terminal=True).values()
        for pod in pods
        if (h := meta.labels(pod).get(dsutil.HASH_LABEL))
    }
    deletes: list[DeleteRevision] = []
    for cr in sorted(old, key=lambda r: (revision_number(r), meta.name(r))):
        if to_kill <= 0:
            break
        if revision_hash(cr) in live:
            continue
        deletes.append(
            DeleteRevision(namespace=meta.namespace(cr), name=meta.name(cr), uid=meta.uid(cr))
        )
        to_kill -= 1
    return deletes
