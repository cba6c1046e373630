"""What ``rollout`` and ``set image`` decide and print, as kubectl's polymorphic helpers do for
a DaemonSet: the rollout status line (``DaemonSetStatusViewer``), the revision history
(``DaemonSetHistoryViewer``), the revision a rollback goes to (``findHistory``), and the pod
template edits of ``set image`` and ``rollout restart``. Pure: objects in, text or new objects
out; the commands in ``rollout`` do the reading and writing.
"""

from __future__ import annotations

import copy
import re
from datetime import UTC, datetime
from typing import Any

from services.cli import printers
from services.cli import sections as sec
from shared.daemonset import conditions, dsutil
from shared.daemonset import history as ds_history
from shared.model import labels, meta, podutil, rolloutopts

Obj = dict[str, Any]

CHANGE_CAUSE_ANNOTATION = "kubernetes.io/change-cause"
RESTARTED_AT_ANNOTATION = "kubectl.kubernetes.io/restartedAt"
TIMEOUT_MESSAGE = "timed out waiting for the condition"


class RolloutError(Exception):
    """A rollout request kubectl refuses; ``str(err)`` is its message (without ``error: ``).
    Retrying cannot help."""


# ---- rollout pause, resume, promote ---------------------------------------------------------


def _with_annotations(ds: Obj, set_: dict[str, str], remove: tuple[str, ...]) -> Obj | None:
    """A copy of ``ds`` with annotations set and removed; None when that changes nothing."""
    current = meta.annotations(ds)
    wanted = {k: v for k, v in {**current, **set_}.items() if k not in remove}
    if wanted == current:
        return None
    new = copy.deepcopy(ds)
    new["metadata"]["annotations"] = wanted
    return new


def paused(ds: Obj) -> Obj | None:
    """``rollout pause``: the paused annotation set. Decides."""
    return _with_annotations(ds, {rolloutopts.PAUSED: "true"}, ())


def resumed(ds: Obj) -> Obj | None:
    """``rollout resume``: the paused annotation removed. Decides."""
    return _with_annotations(ds, {}, (rolloutopts.PAUSED,))


def promoted(ds: Obj) -> Obj | None:
    """``rollout promote``: the partition and node-selector annotations removed. Decides."""
    return _with_annotations(ds, {}, (rolloutopts.PARTITION, rolloutopts.NODE_SELECTOR))


# ---- rollout status -------------------------------------------------------------------------


def status_message(ds: Obj) -> tuple[str, bool]:
    """kubectl's ``DaemonSetStatusViewer.Status``: the line to print (newline included) and
    whether the rollout is done. Decides. Raises :class:`RolloutError` for OnDelete."""
    strategy = dsutil.update_strategy(ds)
    if strategy.type != dsutil.ROLLING_UPDATE:
        raise RolloutError(
            f"rollout status is only available for {dsutil.ROLLING_UPDATE} strategy type")
    name = meta.name(ds)
    st = dsutil.status(ds)
    if dsutil.generation(ds) <= dsutil.observed_generation(ds):
        desired = int(st.get("desiredNumberScheduled") or 0)
        updated = int(st.get("updatedNumberScheduled") or 0)
        available = int(st.get("numberAvailable") or 0)
        progressing = conditions.find(conditions.conditions_of(st), conditions.PROGRESSING)
        reason = (progressing or {}).get("reason")
        if reason == conditions.REASON_DEADLINE:
            raise RolloutError(f'daemon set "{name}" exceeded its progress deadline')
        if updated < desired or available < desired:
            if rolloutopts.options(ds).paused:
                return (f'daemon set "{name}" rollout is paused: {updated} out of {desired} '
                        "new pods have been updated\n", True)
            if reason == conditions.REASON_PARTITIONED:
                return (f'daemon set "{name}" partitioned roll out complete: {updated} out of '
                        f"{desired} new pods have been updated...\n", True)
        if updated < desired:
            return (f'Waiting for daemon set "{name}" rollout to finish: {updated} out of '
                    f"{desired} new pods have been updated...\n", False)
        if available < desired:
            return (f'Waiting for daemon set "{name}" rollout to finish: {available} of '
                    f"{desired} updated pods are available...\n", False)
        return f'daemon set "{name}" successfully rolled out\n', True
    return "Waiting for daemon set spec update to be observed...\n", False


_DURATION_PART = re.compile(r"([0-9]*\.?[0-9]+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0,
                 "h": 3600.0}


def parse_duration(text: str) -> float:
    """Go's ``time.ParseDuration`` (``90s``, ``1m30s``, ``500ms``, ``0``) → seconds.
    Decides. Raises ValueError with Go's message."""
    s = text.strip()
    body = s[1:] if s[:1] in "+-" else s
    if body == "0":
        return 0.0
    if not body:
        raise ValueError(f'time: invalid duration "{text}"')
    total, pos = 0.0, 0
    while pos < len(body):
        m = _DURATION_PART.match(body, pos)
        if m is None:
            if re.fullmatch(r"[0-9.]+", body[pos:]):
                raise ValueError(f'time: missing unit in duration "{text}"')
            raise ValueError(f'time: invalid duration "{text}"')
        total += float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
        pos = m.end()
    return -total if s.startswith("-") else total


# ---- history --------------------------------------------------------------------------------


def owned_revisions(ds: Obj, revisions: list[Obj]) -> list[Obj]:
    """kubectl's ``controlledHistory``: the ControllerRevisions selected by the DaemonSet's
    selector and controlled by it (owner uid), in revision order. Decides."""
    selector = dsutil.selector(ds)
    out = [cr for cr in revisions
           if (meta.controller_ref(cr) or {}).get("uid") == meta.uid(ds)
           and labels.selector_matches(selector, meta.labels(cr))]
    return sorted(out, key=lambda cr: (ds_history.revision_number(cr), meta.name(cr)))


def revision_template(revision: Obj) -> Obj:
    """The pod template a revision stores (``history.revision_template``). Decides."""
    return ds_history.revision_template(revision)


def history_text(revisions: list[Obj], revision: int = 0) -> str:
    """kubectl's ``printHistory``: the ``REVISION  CHANGE-CAUSE`` table, or with ``revision``
    the pod template of that revision (raw tabs, as ``printTemplate`` writes it). Decides.
    Raises :class:`RolloutError` when ``revision`` is not in the history."""
    by_number: dict[int, Obj] = {}
    for cr in revisions:
        by_number[ds_history.revision_number(cr)] = cr
    if not by_number:
        return "No rollout history found."
    if revision > 0:
        chosen = by_number.get(revision)
        if chosen is None:
            raise RolloutError("unable to find the specified revision")
        w = sec.Writer()
        sec.pod_template(w, revision_template(chosen))
        return "".join(w.buf)
    lines = ["REVISION\tCHANGE-CAUSE"]
    for number in sorted(by_number):
        cause = meta.annotations(by_number[number]).get(CHANGE_CAUSE_ANNOTATION) or "<none>"
        lines.append(f"{number}\t{cause}")
    return printers.tabwrite(lines, 0, 2)


def history_output(ref: str, revisions: list[Obj], revision: int = 0) -> str:
    """What ``rollout history`` prints for one object (kubectl's name printer with the
    history as its "operation"). Decides."""
    with_revision = f"with revision #{revision}" if revision > 0 else ""
    return f"{ref} {with_revision}\n{history_text(revisions, revision)}\n"


# ---- undo -----------------------------------------------------------------------------------


def find_rollback(ds: Obj, revisions: list[Obj], to_revision: int) -> tuple[Obj, bool]:
    """kubectl's ``DaemonSetRollbacker`` choice: the revision to roll back to (``0``: the one
    before the newest) and whether the DaemonSet already matches it (a skipped rollback).
    Decides. Raises :class:`RolloutError` with kubectl's messages."""
    if to_revision < 0:
        raise RolloutError(f"unable to find specified revision {to_revision} in history")
    if to_revision == 0 and len(revisions) <= 1:
        raise RolloutError("no last revision to roll back to")
    ordered = sorted(revisions, key=ds_history.revision_number)
    if to_revision == 0:
        target: Obj | None = ordered[-2]
    else:
        target = next((cr for cr in revisions
                       if ds_history.revision_number(cr) == to_revision), None)
    if target is None:
        raise RolloutError(f"unable to find specified revision {to_revision} in history")
    return target, ds_history.matches(ds, target)


def rolled_back(ds: Obj, revision: Obj) -> Obj:
    """The DaemonSet rolled back to ``revision`` (``history.rolled_back``). Decides."""
    return ds_history.rolled_back(ds, revision)


# ---- set image, restart ---------------------------------------------------------------------


def split_image_args(args: tuple[str, ...] | list[str]) -> tuple[list[str], dict[str, str]]:
    """kubectl's ``GetResourcesAndPairs`` + ``ParsePairs`` for ``set image``: resource
    arguments first, then ``CONTAINER=IMAGE`` pairs. Decides. Raises :class:`RolloutError`."""
    resources: list[str] = []
    pairs: list[str] = []
    for a in args:
        is_pair = ("=" in a and not a.startswith("=")) or (a.endswith("-") and a != "-")
        if is_pair:
            pairs.append(a)
        elif pairs:
            raise RolloutError(f"all resources must be specified before image changes: {a}")
        else:
            resources.append(a)
    images: dict[str, str] = {}
    invalid = [p for p in pairs if "=" not in p]
    if invalid:
        raise RolloutError(f'invalid image format: "{",".join(invalid)}"')
    for p in pairs:
        name, _, image = p.partition("=")
        images[name] = image
    if not resources:
        raise RolloutError("one or more resources must be specified as <resource> <name> or "
                           "<resource>/<name>")
    if not images:
        raise RolloutError("at least one image update is required")
    if len(images) > 1 and "*" in images:
        raise RolloutError("all containers are already specified by *, but saw more than one "
                           "container_name=container_image pairs")
    return resources, images


def set_images(pod_spec: Obj, images: dict[str, str]) -> list[str]:
    """Set the image of every container (init, regular, ephemeral) named in ``images``
    (``*``: all of them) in ``pod_spec``, in place. Decides. Returns kubectl's error for
    each name no container has."""
    problems = []
    for name, image in images.items():
        found = False
        for section in podutil.CONTAINER_LISTS:
            for c in pod_spec.get(section) or []:
                if isinstance(c, dict) and (name == "*" or c.get("name") == name):
                    c["image"] = image
                    found = True
        if not found:
            problems.append(f'error: unable to find container named "{name}"')
    return problems


def with_images(obj: Obj, images: dict[str, str]) -> tuple[Obj | None, list[str]]:
    """A DaemonSet (its pod template) or a Pod with the images of ``images`` set
    (:func:`set_images`), or None when nothing changes; and kubectl's errors for names no
    container has. Decides."""
    new = copy.deepcopy(obj)
    spec = new.setdefault("spec", {})
    if new.get("kind") == "DaemonSet":
        spec = spec.setdefault("template", {}).setdefault("spec", {})
    problems = set_images(spec, images)
    return (None if new == obj else new), problems


def restarted(ds: Obj, now: float) -> Obj:
    """The DaemonSet with ``kubectl.kubernetes.io/restartedAt`` set on its pod template to
    ``now`` (RFC 3339, local time, as kubectl's ``time.Now().Format(time.RFC3339)``).
    Decides."""
    new = copy.deepcopy(ds)
    template = new.setdefault("spec", {}).setdefault("template", {})
    md = template.setdefault("metadata", {})
    stamp = datetime.fromtimestamp(int(now), tz=UTC).astimezone().isoformat()
    stamp = stamp.replace("+00:00", "Z")
    md["annotations"] = {**(md.get("annotations") or {}), RESTARTED_AT_ANNOTATION: stamp}
    return new
