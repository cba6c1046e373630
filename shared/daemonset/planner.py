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
from collections.abc import Collection, Container, Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple, overload

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
from shared.daemonset.nodeindex import DaemonSetIndex, PlanSets
from shared.daemonset.placement import Decision, Placement
from shared.daemonset.podfacts import PodFacts
from shared.daemonset.types import (
    CreatePod,
    DeletePod,
    EmitEvent,
    PatchOwner,
    Plan,
    Reasons,
    Snapshot,
    SyncNodes,
    in_sorted,
)
from shared.model import labels, meta, podutil, priority, rolloutopts

Obj = dict[str, Any]

SELECTING_ALL_MESSAGE = "This daemon set is selecting all pods. A non-empty selector is required."

REASON_EXPECTATIONS = "waiting for earlier pod creates/deletes to be observed"
REASON_CREATE = "pod creation planned"
REASON_BURST = f"burst limit: at most {manage.BURST_REPLICAS} pod creates per sync"
REASON_TERMINATING = "waiting for the terminating pod to go away"
REASON_NO_POD = "no pod yet"


def plan(snapshot: Snapshot, index: DaemonSetIndex | None = None,
         names: Container[str] | None = None) -> Plan:
    """Decide one sync of ``snapshot.key`` from ``snapshot`` alone.

    ``index``, when given, must hold the snapshot's Nodes and Pods (the caller keeps it fed
    from the same cache); the plan then takes the placement decisions, pod facts, node order
    and status counters from it instead of reading every Node and Pod, and claims only the
    pods it may adopt or release, if it fits (the same DaemonSet; for the pod facts the same
    current revision and no orphan to adopt: :func:`_usable`). manage, the rolling update,
    the unavailable breakdown and the reasons then visit only the nodes the index does not
    account for in bulk (``DaemonSetIndex.plan_sets``): the nodes that can act, not every
    node. The plan is the same with or without it.

    ``names``: the names of the namespace's pods (a created pod's name must be free among
    them); None: those of ``snapshot.pods``."""
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
    claimed: Iterable[Obj]
    if index is None:
        claimed, pod_claims = claim.claim(ds, snapshot.pods, "Pod")
    else:
        adopted, pod_claims = claim.claim(ds, index.claim_candidates(), "Pod")
        claimed = _Claimed(index, adopted)
    result.claims = sorted(pod_claims, key=_patch_name)

    hist = history.construct_history(ds, revisions, claimed)
    result.history = list(hist.actions)
    result.hash = hist.hash
    if index is not None and not _usable(index, hist.hash, pod_claims):
        index = None
    nodes, node_names, decisions, node_pods = _node_facts(snapshot, ds, claimed, hist.hash,
                                                          index)
    sets = index.plan_sets() if index is not None else None

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
            node_names, decisions, node_pods, result, waiting_expectations=True, sets=sets
        )
        return result

    if sets is None:
        managed = manage.manage(
            ds, node_names, decisions, node_pods, result.hash, now, snapshot.backoff
        )
    else:
        managed = manage.manage(
            ds, sets.other, decisions, node_pods, result.hash, now, snapshot.backoff,
            bare=sets.bare, missing=sets.missing,
        )
    result.events.extend(managed.events)
    result.backoff = list(managed.backoff)
    result.requeue_after = _earliest(managed.requeue_after, verdict.requeue_after)
    create_nodes, delete_pods = managed.creates, managed.deletes
    deferred = list(managed.deferred)
    waiting: list[str] = []
    waiting_in_order: Sequence[str] = ()  # the end of ``waiting``: the index's, name order
    rolled_creates = False  # the creates (and deferred) are the rolling update's

    rolling_back = result.failure is not None and result.failure.template is not None
    if (not create_nodes and not delete_pods and strategy.type == dsutil.ROLLING_UPDATE
            and not rolling_back):  # a rollback's own update starts the next rollout
        if index is None or sets is None:
            rolled = rollout.rolling_update(ds, node_names, decisions, node_pods, now, held)
        else:
            rolled, waiting_in_order = _roll_from_index(ds, index, sets, node_pods, now, held)
        rolled_creates = bool(rolled.creates)
        if rolled.error:
            result.error = rolled.error
            waiting_in_order = ()
        else:
            create_nodes = rolled.creates[: manage.BURST_REPLICAS]
            deferred = rolled.creates[manage.BURST_REPLICAS :]
            delete_pods = rolled.deletes[: manage.BURST_REPLICAS]
            waiting = rolled.waiting

    if names is None:
        names = {meta.name(p) for p in snapshot.pods} if create_nodes else ()
    result.sync_nodes = _sync_nodes(
        ds, names, create_nodes, delete_pods, result, snapshot,
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
        deferred=deferred,
        waiting=waiting,
        waiting_in_order=waiting_in_order,
        held=held,
        sets=sets,
        rolled_creates=rolled_creates,
        planned=create_nodes,
    )
    return result


def current_hash(snapshot: Snapshot) -> str:
    """The current revision's hash :func:`plan` of ``snapshot`` works at (``Plan.hash``),
    so that an index at it can be built before planning (a plan with a fitting index reads
    no Node or Pod one by one; without one, it walks them all, and so does building the
    index after it); "" when the plan stops before reading a Node or a Pod (no DaemonSet,
    one being deleted, an empty selector). Decides."""
    ds = snapshot.ds
    if ds is None or labels.is_empty_selector(dsutil.selector(ds)) or \
            meta.is_being_deleted(ds):
        return ""
    # the hash does not depend on the pods (they are only relabelled after a duplicate
    # revision), nor on the order of the revisions (plan sorts them by name first)
    return history.construct_history(ds, sorted(snapshot.revisions, key=meta.name), ()).hash


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
        ds, names, managed.creates, managed.deletes, result, snapshot
    )
    _finish(result, ds, present, decisions, node_pods, now, 0, update_observed_gen=True,
            index=index)
    result.reasons = _reasons(
        node_names, decisions, node_pods, result,
        backoff_until=managed.backoff_until, deferred=managed.deferred,
    )
    return result


class _IndexNodes(Sequence[tuple[str, Obj]]):
    """The index's (name, Node) pairs, listed only when a pass reads them (the failure
    judge, the rollout gates): after a Node changes, ``DaemonSetIndex.nodes`` lists them
    again, every node."""

    def __init__(self, index: DaemonSetIndex) -> None:
        self._nodes_of = index

    def __len__(self) -> int:
        return len(self._nodes_of.node_names())

    @overload
    def __getitem__(self, i: int) -> tuple[str, Obj]: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[tuple[str, Obj]]: ...

    def __getitem__(self, i: int | slice) -> tuple[str, Obj] | Sequence[tuple[str, Obj]]:
        return self._nodes_of.nodes()[i]

    def __iter__(self) -> Iterator[tuple[str, Obj]]:
        return iter(self._nodes_of.nodes())


class _Claimed:
    """The pods a plan with an index claims: the index's own and those it adopts, listed
    only when the history reads them (rarely: duplicate revisions, a cleanup)."""

    def __init__(self, index: DaemonSetIndex, adopted: list[Obj]) -> None:
        self.index, self.adopted = index, adopted

    def __iter__(self) -> Iterator[Obj]:
        yield from self.index.claimed_pods()
        yield from self.adopted


def _roll_from_index(
    ds: Obj, index: DaemonSetIndex, sets: PlanSets, node_pods: Mapping[str, list[PodFacts]],
    now: float, held: Mapping[str, str],
) -> tuple[rollout.Rollout, Sequence[str]]:
    """``rollout.rolling_update`` over the index's nodes, visiting only those that can act:
    the unsteady ones besides the bare and the old ready ones, the old ready ones whose pod
    is not yet available (minReadySeconds), and as many other old ready ones as the budget
    can take (not held), in name order; the rest are counted (``rollout.Rest``). Decides.
    With it, the rest's nodes left waiting (name order), which end its ``waiting``."""
    desired = index.counts(now)[0]
    try:
        max_surge, max_unavailable = rollout.budget(ds, desired)
    except ValueError:  # the pass fails with it, whatever it visits
        return rollout.rolling_update(ds, index.node_names(), index.decisions, node_pods,
                                      now, held), ()
    wanted = max_unavailable if max_surge == 0 else max_surge
    ready_old = sets.ready_old
    late = set(index.not_yet_available(now))
    visit = [*sets.other, *sets.missing]
    rest: list[str] = []
    if not held and not late:  # the common case: a prefix and the rest, as slices
        visit.extend(ready_old[:wanted])
        rest = list(ready_old[wanted:])
    else:
        taken = 0
        for name in ready_old:
            if name in late or (taken < wanted and name not in held):
                visit.append(name)
                taken += name not in late
            else:
                rest.append(name)
    steady_run, steady_down = index.steady_unavailable(now)
    waiting = [name for name in rest if name not in held] if held else rest
    return rollout.rolling_update(
        ds, sorted(visit), index.decisions, node_pods, now, held,
        rest=rollout.Rest(desired=desired, unavailable=len(sets.bare) + steady_down,
                          available=steady_run - steady_down + len(rest), waiting=waiting),
    ), waiting


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
    snapshot: Snapshot, ds: Obj, claimed: Iterable[Obj], hash: str,
    index: DaemonSetIndex | None,
) -> tuple[Sequence[tuple[str, Obj]], Sequence[str], Mapping[str, Decision],
           Mapping[str, list[PodFacts]]]:
    """The (name, Node) pairs and the names in name order, each node's placement decision
    and the claimed pods' facts by node: the index's, else read from every Node and Pod."""
    if index is not None:
        return _IndexNodes(index), index.node_names(), index.decisions, index.node_pods
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
    snapshot: Snapshot,
) -> SyncNodes:
    """The SyncNodes action: pods built from ``CreatePodTemplate`` and admitted as the API
    server admits each (their priority from their class, ``priority.admit``), named for
    this decision (the snapshot's position) with names free in the namespace (``names``:
    the names of its pods) and in this plan (lowest salt)."""
    creates: list[CreatePod] = []
    decision = snapshot.position
    if create_nodes:
        template = podtemplate.create_pod_template(ds, result.hash)
        taken = _Taken(names)
        try:
            priority.admit(template["spec"], snapshot.priority_classes)
            for node in create_nodes:
                salt = 0
                while podtemplate.pod_name(ds, node, result.hash, salt, decision) in taken:
                    salt += 1
                pod = podtemplate.new_pod(ds, template, node, result.hash, salt, decision)
                taken.add(meta.name(pod))
                creates.append(CreatePod(node=node, pod=pod, salt=salt))
        except (podtemplate.NoLabelsError, priority.Forbidden) as err:
            # Pod control (or the API server's admission, named as a pod of generateName)
            # refuses every create; upstream stops after the first failed batch, and the
            # sync fails: it is retried with backoff (a class made meanwhile is read then)
            why = str(err) if isinstance(err, podtemplate.NoLabelsError) else \
                f'pods "{podtemplate.name_prefix(ds)}" is forbidden: {err}'
            creates = []
            result.events.append(EmitEvent("Warning", "FailedCreate", f"Error creating: {why}"))
            result.error = result.error or why
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
    deferred: Sequence[str] = (),
    waiting: Sequence[str] = (),
    waiting_in_order: Sequence[str] = (),
    held: Mapping[str, str] | None = None,
    sets: PlanSets | None = None,
    rolled_creates: bool = False,
    planned: Sequence[str] = (),
) -> Mapping[str, str]:
    """Why each node has no (up-to-date) daemon pod; nodes that should run and have a pod are
    left out, except those whose old pod waits for rolling-update budget or is held by a
    rollout gate (:func:`_reason`, node by node).

    ``sets`` (the index's split): the nodes of ``sets.off``, ``sets.bare`` and ``waiting``
    take their reason in bulk (the one :func:`_reason` gives each: the decision's, the bare
    node's by whether it is deferred, the budget's), every other node that may have one
    (unsteady, held, in backoff, created, or deferred by the rolling update) node by node.
    The many nodes of one reason at 50,000 nodes (the bare ones while expectations are
    pending, the rolling update's waiting ones past those it visited, or manage's deferred
    ones) stay the sorted list they are (:class:`Reasons`' group).
    ``rolled_creates``: the creates and ``deferred`` are the rolling update's (not only bare
    nodes). ``planned``: the nodes the plan meant to create a pod on (``creating`` unless
    the creates failed): with bare nodes, manage's creates, and then every bare node is
    planned or deferred, so no bare node is left with "no pod yet" in bulk. The map is the
    same, in another order."""
    creating = {c.node for c in result.sync_nodes.creates} if result.sync_nodes else set()
    # manage's deferred nodes from an index's sets are in name order (bare and unsteady
    # nodes merged), and so are the rolling update's waiting ones past those it visited
    # (``waiting_in_order``, the end of ``waiting``): looked up in place, not copied
    in_order = sets is not None and not rolled_creates
    visited_waiting = waiting[:len(waiting) - len(waiting_in_order)]
    facts = _ReasonFacts(creating, waiting_expectations, backoff_until or {},
                         _Sorted(deferred) if in_order else set(deferred),
                         _Sorted(waiting_in_order, set(visited_waiting)), held or {})
    if sets is None:
        reasons: dict[str, str] = {}
        for name in node_names:
            reason = _reason(name, decisions[name], node_pods.get(name), facts)
            if reason is not None:
                reasons[name] = reason
        return reasons
    # The bulk reasons, one group of them kept as its sorted list (:class:`Reasons`): the
    # bare nodes while expectations are pending; else the rolling update's waiting nodes
    # past those it visited, when it acted (manage then had nothing to do: no deferred
    # nodes but the rolling update's, each taken one by one); else manage's deferred nodes.
    # Bare nodes (listed, should run, no pod) mean manage planned creates: each bare node
    # is then planned (one by one below) or deferred (the burst limit), none left with "no
    # pod yet". The group's nodes should run, those of ``off`` not.
    own: dict[str, str] = dict.fromkeys(visited_waiting, rollout.REASON_BUDGET)
    group: Sequence[str] = ()
    group_reason = ""
    if waiting_expectations:
        group, group_reason = sets.bare, REASON_EXPECTATIONS
    elif waiting_in_order:
        group, group_reason = waiting_in_order, rollout.REASON_BUDGET
    elif not rolled_creates:
        group, group_reason = deferred, REASON_BURST
    in_group = _Sorted(group)
    shadowed: set[str] = set()  # the group's nodes given another reason, or none
    for name in sets.missing:
        own.pop(name, None)
        if name in in_group:
            shadowed.add(name)
    if deferred and group is not deferred:  # the rolling update's, over its waiting nodes
        own.update(dict.fromkeys(deferred, REASON_BURST))
        shadowed.update(name for name in deferred if name in in_group)
    own.update(sets.off)
    one_by_one = {*sets.other, *facts.held, *facts.backoff_until, *creating, *planned}
    if rolled_creates:
        one_by_one.update(deferred)
    for name in one_by_one:
        decision = decisions.get(name)
        if decision is None:
            continue  # a node missing from the node list: no reason
        reason = _reason(name, decision, node_pods.get(name), facts)
        if name in in_group:
            shadowed.add(name)
        if reason is None:
            own.pop(name, None)
        else:
            own[name] = reason
    return Reasons(own, group, group_reason, shadowed)


class _Sorted(Container[str]):
    """Membership in a sorted list of names, looked up in place, or in ``also``."""

    def __init__(self, names: Sequence[str], also: Container[str] = frozenset()) -> None:
        self.names, self.also = names, also

    def __contains__(self, name: object) -> bool:
        return name in self.also or (isinstance(name, str) and in_sorted(self.names, name))


class _ReasonFacts(NamedTuple):
    """What one plan decided that the reasons read (:func:`_reason`)."""

    creating: set[str]
    waiting_expectations: bool
    backoff_until: Mapping[str, float]
    deferred: Container[str]
    waiting: Container[str]
    held: Mapping[str, str]


def _reason(name: str, decision: Decision, pods: list[PodFacts] | None,
            facts: _ReasonFacts) -> str | None:
    """Why node ``name`` has no (up-to-date) daemon pod, or None (:func:`_reasons`)."""
    pods = pods or []
    if (
        decision.should_run
        and len(pods) == 1
        and name not in facts.waiting
        and name not in facts.held
        and name not in facts.backoff_until
        and not pods[0].deleting
    ):
        return None  # the common case: should run, has a pod
    if not decision.should_run:
        return decision.reason
    if name in facts.backoff_until:
        return f"failed-pod backoff until {meta.format_time(facts.backoff_until[name])}"
    if all(p.deleting for p in pods):  # no live pod
        if name in facts.creating:
            return REASON_CREATE
        if facts.waiting_expectations:
            return REASON_EXPECTATIONS
        if name in facts.deferred:
            return REASON_BURST
        return REASON_TERMINATING if pods else REASON_NO_POD
    if name in facts.held:
        return facts.held[name]
    if name in facts.waiting:
        return rollout.REASON_BUDGET
    return None
