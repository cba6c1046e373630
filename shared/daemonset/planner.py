"""``plan(snapshot) -> Plan``: one ``syncDaemonSet`` pass (spec §c.1). Pure: decides.

Order of decisions, as upstream: NotFound → drop expectations; empty selector → one
SelectingAll warning; DaemonSet being deleted → nothing; constructHistory; expectations
pending → status only (observedGeneration kept); else manage, then rollingUpdate only when
manage planned no creates and no deletes (upstream's re-check of expectations), then
cleanupHistory; status always, computed from the snapshot (before the actions), as upstream
computes it from its cache.

Nodes, pods and revisions are taken in name order (upstream: lister order), the facts the
passes need of each claimed pod are read once and indexed by node (``podfacts``), so a plan is
O(nodes + pods) apart from the sorts, and the same snapshot in any order gives the same plan.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Container, Mapping, Sequence
from typing import Any

from shared.daemonset import (
    claim,
    conditions,
    dsutil,
    failure,
    gates,
    history,
    manage,
    podfacts,
    podtemplate,
    rollout,
    status,
    unavailable,
)
from shared.daemonset.nodeindex import DaemonSetIndex
from shared.daemonset.placement import Decision, Placement
from shared.daemonset.podfacts import PodFacts
from shared.daemonset.types import (
    CreatePod,
    DeletePod,
    EmitEvent,
    PatchOwner,
    Plan,
    Snapshot,
    SyncNodes,
)
from shared.model import labels, meta, podutil, rolloutopts

Obj = dict[str, Any]

SELECTING_ALL_MESSAGE = "This daemon set is selecting all pods. A non-empty selector is required."

REASON_EXPECTATIONS = "waiting for earlier pod creates/deletes to be observed"
REASON_CREATE = "pod creation planned"
REASON_BURST = f"burst limit: at most {manage.BURST_REPLICAS} pod creates per sync"
REASON_TERMINATING = "waiting for the terminating pod to go away"
REASON_NO_POD = "no pod yet"


def plan(snapshot: Snapshot, index: DaemonSetIndex | None = None) -> Plan:
    """Decide one sync of ``snapshot.key`` from ``snapshot`` alone.

    ``index``, when given, must hold the snapshot's Nodes and Pods (the caller keeps it fed
    from the same cache); the plan then takes the placement decisions, pod facts, node order
    and status counters from it instead of reading every Node and Pod, and claims only the
    pods it may adopt or release, if it fits (the same DaemonSet; for the pod facts the same
    current revision and no orphan to adopt: :func:`_usable`). The plan is the same with or
    without it."""
    result = Plan(key=snapshot.key)
    ds = snapshot.ds
    if ds is None:
        result.delete_expectations = True
        return result
    if labels.is_empty_selector(dsutil.selector(ds)):
        result.events.append(EmitEvent("Warning", "SelectingAll", SELECTING_ALL_MESSAGE))
        return result
    if meta.is_being_deleted(ds):
        return result

    now = snapshot.now
    revisions = sorted(snapshot.revisions, key=meta.name)
    if index is not None and not index.fits(ds):
        index = None
    # Each pod is claimed on its own, so claiming in input order and then ordering the
    # outcome by name (stable) is claiming in name order; the index's pods claimed already
    # and the few it may adopt or release are all the pods claim acts on.
    if index is None:
        claimed, pod_claims = claim.claim(ds, snapshot.pods, "Pod")
    else:
        claimed, pod_claims = claim.claim(ds, index.claim_candidates(), "Pod")
        claimed = index.claimed_pods() + claimed
    result.claims = sorted(pod_claims, key=_patch_name)

    hist = history.construct_history(ds, revisions, claimed)
    result.history = list(hist.actions)
    result.hash = hist.hash
    if index is not None and not _usable(index, hist.hash, pod_claims):
        index = None
    nodes, node_names, decisions, node_pods = _node_facts(snapshot, ds, claimed, hist.hash,
                                                          index)

    strategy = dsutil.update_strategy(ds)
    opts = rolloutopts.options(ds)
    verdict = failure.Verdict()
    if opts.failure_action is not None and snapshot.expectations_satisfied:
        verdict = failure.judge(ds, opts, nodes, decisions, node_pods, hist, now)
        result.failure = verdict.action
        if verdict.action is not None and verdict.action.action == rolloutopts.PAUSE:
            opts = dataclasses.replace(opts, paused=True)  # this pass holds as paused already
    held: dict[str, str] = {}
    if strategy.type == dsutil.ROLLING_UPDATE:
        held = gates.held_nodes(opts, nodes, decisions, node_pods)
    result.held = held

    if not snapshot.expectations_satisfied:
        result.update_observed_generation = False
        _finish(result, ds, nodes, decisions, node_pods, now, len(held),
                update_observed_gen=False, index=index)
        result.reasons = _reasons(
            node_names, decisions, node_pods, result, waiting_expectations=True
        )
        return result

    managed = manage.manage(
        ds, node_names, decisions, node_pods, result.hash, now, snapshot.backoff
    )
    result.events.extend(managed.events)
    result.backoff = list(managed.backoff)
    result.requeue_after = _earliest(managed.requeue_after, verdict.requeue_after)
    create_nodes, delete_pods = managed.creates, managed.deletes
    deferred = list(managed.deferred)
    waiting: list[str] = []

    rolling_back = result.failure is not None and result.failure.template is not None
    if (not create_nodes and not delete_pods and strategy.type == dsutil.ROLLING_UPDATE
            and not rolling_back):  # a rollback's own update starts the next rollout
        rolled = rollout.rolling_update(ds, node_names, decisions, node_pods, now, held)
        if rolled.error:
            result.error = rolled.error
        else:
            create_nodes = rolled.creates[: manage.BURST_REPLICAS]
            deferred = rolled.creates[manage.BURST_REPLICAS :]
            delete_pods = rolled.deletes[: manage.BURST_REPLICAS]
            waiting = rolled.waiting

    result.sync_nodes = _sync_nodes(
        ds, {meta.name(p) for p in snapshot.pods} if create_nodes else (), create_nodes,
        delete_pods, result, snapshot.position,
    )
    if not result.error:
        result.cleanup = history.cleanup_history(ds, hist.old, claimed)
    _finish(result, ds, nodes, decisions, node_pods, now, len(held),
            update_observed_gen=True, index=index)
    result.reasons = _reasons(
        node_names,
        decisions,
        node_pods,
        result,
        backoff_until=managed.backoff_until,
        deferred=set(deferred),
        waiting=set(waiting),
        held=held,
    )
    return result


def plan_nodes(
    snapshot: Snapshot,
    nodes: Collection[str],
    index: DaemonSetIndex,
    names: Container[str],
) -> Plan | None:
    """The sync of ``snapshot.key`` for the nodes ``nodes`` alone, or None when it needs a
    full sync (``plan``): the plan ``plan`` would make of the whole cluster, by the same
    passes (claim, history, ``manage``, ``_sync_nodes``, status and conditions, reasons),
    whenever nothing outside ``nodes`` could act. Decides.

    ``snapshot`` holds the DaemonSet, the Nodes of ``nodes`` that exist, the pods targeting
    them (any owner: an orphan among them makes a full sync), every revision of the
    namespace, the backoff of those nodes, expectations and the time. ``index`` is the
    DaemonSet's per-node state at the same position (``nodeindex``): the status counters,
    the unavailable breakdown and the "every other node is steady" check come from it (the
    rest of the status from ``snapshot.ds``, whichever object of it the index was last told
    of). ``names`` holds the names of the namespace's pods (a created pod's name must be
    free among all of them).

    None (a full sync) when: the DaemonSet is missing, being deleted or selects everything;
    expectations are pending; a failure action is set; the index does not fit the
    DaemonSet (``DaemonSetIndex.fits``: another uid, or a spec its state derives from
    changed); the history is not settled (the sync would claim, label, create, dedup or
    clean up a revision) or its hash is not the index's; a pod of ``nodes`` would be adopted
    or released, or is of an old revision (the rolling update's business); the budget does
    not parse; another node is not steady (``nodeindex.steady``: an old, failed,
    terminating or missing pod, a surge, a pod to delete, pods on a removed node; a pod not
    ready or not yet available is steady); or the index does not hold what the snapshot
    does for ``nodes``. With every other node steady the full plan's manage and rolling
    update act on ``nodes`` alone, in the same order, so the actions, events, backoff,
    status and unavailable breakdown are the full plan's.
    """
    ds = snapshot.ds
    if (ds is None or labels.is_empty_selector(dsutil.selector(ds))
            or meta.is_being_deleted(ds) or not snapshot.expectations_satisfied):
        return None
    opts = rolloutopts.options(ds)
    if opts.failure_action is not None or not index.fits(ds):
        return None  # an index of another spec (or a recreated DaemonSet) counts otherwise
    now = snapshot.now
    wanted = set(nodes)
    present = sorted(((meta.name(n), n) for n in snapshot.nodes if meta.name(n) in wanted),
                     key=_first)
    node_names = [name for name, _ in present]
    pods = [p for p in snapshot.pods if podutil.target_node(p) in wanted]
    claimed, pod_claims = claim.claim(ds, pods, "Pod")
    if pod_claims:
        return None
    hist = history.construct_history(ds, sorted(snapshot.revisions, key=meta.name), claimed)
    if hist.actions or hist.hash != index.hash:
        return None
    if history.cleanup_history(ds, hist.old, claimed):
        return None  # with fewer pods than a full sync sees: that one may keep them
    node_pods = podfacts.by_node(
        claimed, status.labels_updated_check(hist.hash, dsutil.template_generation(ds))
    )
    if not _index_agrees(index, wanted, present, node_pods):
        return None
    if any(not p.updated for pods_ in node_pods.values() for p in pods_ if not p.deleting):
        return None  # an old pod: the rolling update and its gates decide
    if not index.settled_except(wanted):
        return None
    if dsutil.update_strategy(ds).type == dsutil.ROLLING_UPDATE:
        try:
            rollout.budget(ds, index.counts(now)[0])
        except ValueError:
            return None  # the rolling update fails the sync with it
    placement = Placement(ds)
    decisions = {name: placement.decide(n, name) for name, n in present}

    result = Plan(key=snapshot.key, hash=hist.hash, nodes=sorted(wanted))
    managed = manage.manage(
        ds, node_names, decisions, node_pods, result.hash, now, snapshot.backoff
    )
    result.events.extend(managed.events)
    result.backoff = list(managed.backoff)
    result.requeue_after = managed.requeue_after
    result.sync_nodes = _sync_nodes(
        ds, names, managed.creates, managed.deletes, result, snapshot.position
    )
    _finish(result, ds, present, decisions, node_pods, now, 0, update_observed_gen=True,
            index=index)
    result.reasons = _reasons(
        node_names, decisions, node_pods, result,
        backoff_until=managed.backoff_until, deferred=set(managed.deferred),
    )
    return result


def _index_agrees(
    index: DaemonSetIndex,
    wanted: Collection[str],
    present: Sequence[tuple[str, Obj]],
    node_pods: Mapping[str, list[PodFacts]],
) -> bool:
    """Whether ``index`` holds the snapshot's Nodes and claimed pods of ``wanted``."""
    here = dict(present)
    for name in wanted:
        if index.node(name) != here.get(name):
            return False
        mine = [(meta.key(f.pod), meta.resource_version(f.pod)) for f in node_pods.get(name, ())]
        held = [(meta.key(f.pod), meta.resource_version(f.pod))
                for f in index.node_pods.get(name, ())]
        if mine != held:
            return False
    return True


def _usable(index: DaemonSetIndex, hash: str, pod_claims: Sequence[PatchOwner]) -> bool:
    """Whether ``index`` (which fits the DaemonSet) holds the facts this plan would read
    of every Node and Pod: the same current revision, and no pod adopted (the index has the
    facts of the pods the DaemonSet already owns)."""
    return index.hash == hash and not any(c.adopt for c in pod_claims)


def _node_facts(
    snapshot: Snapshot, ds: Obj, claimed: list[Obj], hash: str,
    index: DaemonSetIndex | None,
) -> tuple[Sequence[tuple[str, Obj]], Sequence[str], Mapping[str, Decision],
           Mapping[str, list[PodFacts]]]:
    """The (name, Node) pairs and the names in name order, each node's placement decision
    and the claimed pods' facts by node: the index's, else read from every Node and Pod."""
    if index is not None:
        return index.nodes(), index.node_names(), index.decisions, index.node_pods
    # Input order must not matter (store listings are unordered): everything is taken by
    # name. Pods are *read* in input order, though, the order they were decoded in: at
    # thousands of pods, visiting their dicts by name costs more in cache misses than the
    # reads themselves.
    nodes = sorted(((meta.name(n), n) for n in snapshot.nodes), key=_first)
    placement = Placement(ds)
    decisions = {name: placement.decide(n, name) for name, n in nodes}
    # Every pass below reads the same few facts of each pod: read them once.
    node_pods = podfacts.by_node(
        claimed, status.labels_updated_check(hash, dsutil.template_generation(ds))
    )
    return nodes, [name for name, _ in nodes], decisions, node_pods


def _first(pair: tuple[str, Obj]) -> str:
    return pair[0]


def _earliest(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def _patch_name(action: PatchOwner) -> str:
    return action.name


def _sync_nodes(
    ds: Obj,
    names: Container[str],
    create_nodes: list[str],
    delete_pods: list[Obj],
    result: Plan,
    decision: str,
) -> SyncNodes:
    """The SyncNodes action: pods built from ``CreatePodTemplate``, named for this decision
    (the snapshot's position) with names free in the namespace (``names``: the names of its
    pods) and in this plan (lowest salt)."""
    creates: list[CreatePod] = []
    if create_nodes:
        template = podtemplate.create_pod_template(ds, result.hash)
        taken = _Taken(names)
        try:
            for node in create_nodes:
                salt = 0
                while podtemplate.pod_name(ds, node, result.hash, salt, decision) in taken:
                    salt += 1
                pod = podtemplate.new_pod(ds, template, node, result.hash, salt, decision)
                taken.add(meta.name(pod))
                creates.append(CreatePod(node=node, pod=pod, salt=salt))
        except podtemplate.NoLabelsError as err:
            # Pod control refuses every create; upstream stops after the first failed batch.
            creates = []
            result.events.append(EmitEvent("Warning", "FailedCreate", f"Error creating: {err}"))
    deletes = [
        DeletePod(
            namespace=meta.namespace(p),
            name=meta.name(p),
            uid=meta.uid(p),
            node=podutil.target_node(p) or "",
        )
        for p in delete_pods
    ]
    return SyncNodes(creates=creates, deletes=deletes)


class _Taken:
    """The pod names a plan may not give: ``names`` plus those it gave."""

    def __init__(self, names: Container[str]) -> None:
        self.names = names
        self.given: set[str] = set()

    def __contains__(self, name: object) -> bool:
        return name in self.given or name in self.names

    def add(self, name: str) -> None:
        self.given.add(name)


def _finish(
    result: Plan,
    ds: Obj,
    nodes: Sequence[tuple[str, Obj]],
    decisions: Mapping[str, Decision],
    node_pods: Mapping[str, list[PodFacts]],
    now: float,
    held: int,
    *,
    update_observed_gen: bool,
    index: DaemonSetIndex | None = None,
) -> None:
    """Status (with the rollout conditions, ``held`` nodes kept at the old revision by the
    gates), the unavailable breakdown and the requeue. ``index``: the DaemonSet's per-node
    state, which counts the status and lists the unavailable nodes of every node (``nodes``
    may then be a few of them); else both come from ``nodes``."""
    if index is not None:
        new_status = status.with_counts(ds, index.counts(now), update_observed_gen)
    else:
        new_status = status.compute_status(
            ds, [name for name, _ in nodes], decisions, node_pods, now, update_observed_gen
        )
    if new_status.get("numberUnavailable"):
        result.unavailable = index.unavailable(now) if index is not None else \
            unavailable.breakdown(dsutil.min_ready_seconds(ds), nodes, decisions, node_pods, now)
    again = status.requeue_after(ds, new_status)
    rolled = conditions.rollout_conditions(ds, new_status, held, now, result.hash)
    if rolled is not None:
        new_status = status.json_shape({**new_status, "conditions": rolled.conditions})
        result.events.extend(rolled.events)
        if rolled.requeue_after is not None:
            again = rolled.requeue_after if again is None else min(again, rolled.requeue_after)
    result.status = new_status
    if again is not None:
        result.requeue_after = (
            again if result.requeue_after is None else min(result.requeue_after, again)
        )


def _reasons(
    node_names: Sequence[str],
    decisions: Mapping[str, Decision],
    node_pods: Mapping[str, list[PodFacts]],
    result: Plan,
    *,
    waiting_expectations: bool = False,
    backoff_until: Mapping[str, float] | None = None,
    deferred: set[str] | None = None,
    waiting: set[str] | None = None,
    held: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Why each node has no (up-to-date) daemon pod; nodes that should run and have a pod are
    left out, except those whose old pod waits for rolling-update budget or is held by a
    rollout gate."""
    creating = {c.node for c in result.sync_nodes.creates} if result.sync_nodes else set()
    reasons: dict[str, str] = {}
    for name in node_names:
        decision = decisions[name]
        pods = node_pods.get(name) or []
        if (
            decision.should_run
            and len(pods) == 1
            and not (waiting and name in waiting)
            and not (held and name in held)
            and not (backoff_until and name in backoff_until)
            and not pods[0].deleting
        ):
            continue  # the common case: should run, has a pod
        live = [p for p in pods if not p.deleting]
        if not decision.should_run:
            reasons[name] = decision.reason
        elif backoff_until and name in backoff_until:
            reasons[name] = f"failed-pod backoff until {meta.format_time(backoff_until[name])}"
        elif not live:
            if name in creating:
                reasons[name] = REASON_CREATE
            elif waiting_expectations:
                reasons[name] = REASON_EXPECTATIONS
            elif deferred and name in deferred:
                reasons[name] = REASON_BURST
            elif pods:
                reasons[name] = REASON_TERMINATING
            else:
                reasons[name] = REASON_NO_POD
        elif held and name in held:
            reasons[name] = held[name]
        elif waiting and name in waiting:
            reasons[name] = rollout.REASON_BUDGET
    return reasons
