"""Authorisation inside the commit script: each role may make only its own writes; a
refused write is a Forbidden error, logged with the role, and changes nothing (not even the
other writes of its batch). Here every role's credentials are the test server's default
user (which holds every role); binding roles to ACL users is tested in test_acl_roles."""

from __future__ import annotations

import copy
import json
import logging
from typing import Any

import pytest

from services.node_agent import lifecycle
from shared.eventlog.entry import WriteMode
from shared.model import events, meta, nodelifecycle, rolloutopts
from shared.store import codec, errors, roles
from shared.store.client import Op, Store, connect
from shared.store.keys import Keys
from tests.integration.test_store import DS

Obj = dict[str, Any]


def daemon_pod(name: str, node: str) -> Obj:
    """A pod aimed at ``node`` the way the reconciler makes them (node affinity), unbound."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "agent"}},
            "spec": {"containers": [{"name": "agent", "image": "agent:1"}],
                     "affinity": {"nodeAffinity": {
                         "requiredDuringSchedulingIgnoredDuringExecution": {
                             "nodeSelectorTerms": [{"matchFields": [{
                                 "key": "metadata.name", "operator": "In",
                                 "values": [node]}]}]}}}}}


class World:
    """One prefix, a store per role (all on the same credentials), a DaemonSet, two nodes and
    a pod aimed at each."""

    def __init__(self, redis_url: str, prefix: str) -> None:
        self.client = connect(redis_url)
        self.keys = Keys(prefix)
        self.admin = self.store(roles.ADMIN)
        self.ds = self.admin.create(DS)
        for node in ("node-a", "node-b"):
            self.admin.create(lifecycle.new_node(node))
            self.admin.create(daemon_pod(f"agent-{node}", node))

    def store(self, role: str) -> Store:
        return Store(self.client, self.keys, role=role)

    def get(self, kind: str, key: str) -> Obj:
        return self.admin.get(kind, key)

    def tip(self) -> str:
        return self.admin.log_tip()


@pytest.fixture
def world(redis_url: str, prefix: str) -> World:
    return World(redis_url, prefix)


def refused(world: World, role: str, ops: list[Op], caplog: pytest.LogCaptureFixture) -> None:
    """``ops`` committed as ``role`` are refused, logged with the role, and write nothing."""
    before = world.tip()
    with caplog.at_level(logging.ERROR, logger="shared.store.client"):
        results = world.store(role).commit(ops)
    assert "forbidden" in {r.status for r in results}, results
    assert {r.status for r in results} <= {"forbidden", "skipped"}, results
    assert world.tip() == before, "a refused batch wrote nothing"
    assert f"commit refused: role {role}" in caplog.text


def _changed_image(ds: Obj) -> Obj:
    new = copy.deepcopy(ds)
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "evil.example/miner:latest"
    return new


def test_node_agent_cannot_rewrite_a_daemonset(world: World,
                                               caplog: pytest.LogCaptureFixture) -> None:
    agent = world.store(roles.NODE_AGENT)
    ds = world.get("DaemonSet", "default/agent")
    refused(world, roles.NODE_AGENT, [agent.update_op(_changed_image(ds), ds)], caplog)
    with pytest.raises(errors.ForbiddenError, match='role "node-agent" may not'):
        agent.update(_changed_image(ds))
    image = world.get("DaemonSet", "default/agent")["spec"]["template"]["spec"]["containers"]
    assert image[0]["image"] == "agent:1"


def test_node_agent_cannot_forge_a_deletion_or_a_status(world: World,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    agent = world.store(roles.NODE_AGENT)
    ds = world.get("DaemonSet", "default/agent")
    refused(world, roles.NODE_AGENT, [agent.final_delete_op(ds)], caplog)
    forged = dict(ds, status={**ds["status"], "numberReady": 99})
    refused(world, roles.NODE_AGENT, [agent.status_op(forged, ds)], caplog)
    refused(world, roles.NODE_AGENT, [Op.record("DaemonSet", "default/agent", {"forged": 1})],
            caplog)


def test_node_agent_writes_pod_status_and_binds_pods_to_their_node(world: World) -> None:
    agent = world.store(roles.NODE_AGENT)
    pod = world.get("Pod", "default/agent-node-a")
    bound = copy.deepcopy(pod)
    bound["spec"]["nodeName"] = "node-a"
    bound["status"] = {"phase": "Running"}
    assert [r.status for r in agent.commit([agent.status_op(bound, pod)])] == ["ok"]
    assert world.get("Pod", "default/agent-node-a")["spec"]["nodeName"] == "node-a"
    node = world.get("Node", "/node-a")
    ready = lifecycle.node_step(lifecycle.AgentConfig(), node, 1e9)
    assert ready is not None
    assert [r.status for r in agent.commit([agent.status_op(ready, node)])] == ["ok"]


def test_node_agent_cannot_misbind_or_change_a_pods_spec(world: World,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    agent = world.store(roles.NODE_AGENT)
    pod = world.get("Pod", "default/agent-node-a")
    elsewhere = copy.deepcopy(pod)
    elsewhere["spec"]["nodeName"] = "node-b"  # not the node its affinity names
    refused(world, roles.NODE_AGENT, [agent.status_op(elsewhere, pod)], caplog)
    evil = copy.deepcopy(pod)
    evil["spec"]["containers"][0]["image"] = "evil.example/miner:latest"
    refused(world, roles.NODE_AGENT, [agent.raw_update_op(evil, pod["metadata"]["resourceVersion"])],
            caplog)
    refused(world, roles.NODE_AGENT, [agent.final_delete_op(pod)], caplog)  # not being deleted
    refused(world, roles.NODE_AGENT, [agent.create_op(daemon_pod("mine", "node-a"))], caplog)


def _written_as_laid_out(obj: Obj, old: Obj) -> Op:
    """A write of ``obj`` over ``old`` packed in ``obj``'s own key order (no write rule)."""
    return Op(WriteMode.UPDATE, "Pod", meta.key(old), codec.pack_object(obj),
              meta.resource_version(old), obj)


def _bound(pod: Obj, node: str, nodename_first: bool = False) -> Obj:
    spec = {"nodeName": node, **pod["spec"]} if nodename_first else \
        {**pod["spec"], "nodeName": node}
    return {**pod, "spec": spec, "status": {"phase": "Pending", "hostIP": "10.0.0.1"}}


def test_node_agent_status_writes_are_decided_alike_however_they_are_laid_out(
        world: World, caplog: pytest.LogCaptureFixture) -> None:
    """The commit script proves the usual status write (the stored pod with its status last,
    replaced or added, and nodeName added last to spec when binding) from the bytes, without
    comparing decoded objects; writes laid out otherwise are compared field by field. Both
    accept the same writes: any other change besides the status and the binding is refused
    whichever way it is laid out."""
    agent = world.store(roles.NODE_AGENT)
    pod = world.get("Pod", "default/agent-node-a")
    # refused, laid out as a status write is: nodeName and status last
    relabelled = _bound(pod, "node-a")
    relabelled["metadata"] = {**pod["metadata"], "labels": {"app": "other"}}
    imaged = _bound(pod, "node-a")
    imaged["spec"]["containers"] = [{"name": "agent", "image": "evil.example/miner:latest"}]
    extra = {**{k: v for k, v in _bound(pod, "node-a").items() if k != "status"},
             "extra": {"x": 1}, "status": {"phase": "Pending"}}
    for bad in (relabelled, imaged, extra, _bound(pod, "node-b")):
        refused(world, roles.NODE_AGENT, [_written_as_laid_out(bad, pod)], caplog)
    # accepted: binding with nodeName first in spec and status first (compared), then a status
    # write as the node agent makes it (proven from the bytes), then one reordered again
    first = _bound(pod, "node-a", nodename_first=True)
    first = {"status": first["status"], **{k: v for k, v in first.items() if k != "status"}}
    assert [r.status for r in agent.commit([_written_as_laid_out(first, pod)])] == ["ok"]
    pod = world.get("Pod", "default/agent-node-a")
    running = dict(pod, status={**pod["status"], "phase": "Running"})
    assert [r.status for r in agent.commit([agent.status_op(running, pod)])] == ["ok"]
    pod = world.get("Pod", "default/agent-node-a")
    assert pod["status"]["phase"] == "Running" and pod["spec"]["nodeName"] == "node-a"
    moved = dict(pod, spec={**pod["spec"], "nodeName": "node-b"}, status={"phase": "Failed"})
    refused(world, roles.NODE_AGENT, [_written_as_laid_out(moved, pod)], caplog)
    # the other pod bound as the node agent binds (nodeName and status added last)
    other = world.get("Pod", "default/agent-node-b")
    assert [r.status for r in agent.commit([agent.status_op(_bound(other, "node-b"), other)])] \
        == ["ok"]
    assert world.get("Pod", "default/agent-node-b")["spec"]["nodeName"] == "node-b"


def test_node_agent_creates_events_about_pods_from_its_node_only_and_counts_repeats(
        world: World, caplog: pytest.LogCaptureFixture) -> None:
    agent = world.store(roles.NODE_AGENT)
    pod = {**world.get("Pod", "default/agent-node-a"), "apiVersion": "v1", "kind": "Pod"}

    def kubelet_event(about: Obj, host: str | None, salt: str) -> Obj:
        ev = events.event(about, "Warning", "Failed", "Error: ErrImagePull", now=1e9,
                          salt=salt, component="kubelet")
        if host is not None:
            ev["source"]["host"] = host
        return ev
    ok = agent.commit([agent.create_op(kubelet_event(pod, "node-a", "1"), ensure=True)])
    assert [r.status for r in ok] == ["ok"]
    ds = {**world.get("DaemonSet", "default/agent"), "apiVersion": "apps/v1",
          "kind": "DaemonSet"}
    refused(world, roles.NODE_AGENT, [agent.create_op(kubelet_event(ds, "node-a", "2"))],
            caplog)  # about a DaemonSet
    refused(world, roles.NODE_AGENT, [agent.create_op(kubelet_event(pod, None, "3"))],
            caplog)  # from no node
    stored = world.get("Event", f"default/{kubelet_event(pod, 'node-a', '1')['metadata']['name']}")
    # a repeat counted on it, as client-go's recorder patches it, at whatever version
    counted = {**stored, "count": 2, "lastTimestamp": "2001-09-09T01:47:00Z",
               "message": "(combined from similar events): Error: ImagePullBackOff"}
    assert [r.status for r in agent.commit([agent.recount_op(counted)])] == ["ok"]
    assert world.get("Event", meta.key(stored))["count"] == 2
    refused(world, roles.NODE_AGENT, [agent.recount_op({**counted, "reason": "Forged"})],
            caplog)  # changing what it is about or says besides its message
    refused(world, roles.NODE_AGENT, [agent.recount_op(
        {**counted, "involvedObject": {**counted["involvedObject"], "name": "other"}})], caplog)


def test_a_forbidden_op_makes_its_whole_batch_write_nothing(world: World,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    agent = world.store(roles.NODE_AGENT)
    node = world.get("Node", "/node-a")
    ready = lifecycle.node_step(lifecycle.AgentConfig(), node, 1e9)
    assert ready is not None
    ds = world.get("DaemonSet", "default/agent")
    refused(world, roles.NODE_AGENT,
            [agent.status_op(ready, node), agent.update_op(_changed_image(ds), ds)], caplog)


def test_status_writer_writes_daemonset_status_only(world: World,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    writer = world.store(roles.STATUS_WRITER)
    ds = world.get("DaemonSet", "default/agent")
    written = writer.update_status(dict(ds, status={**ds["status"], "numberReady": 1}))
    assert written["status"]["numberReady"] == 1
    ds = world.get("DaemonSet", "default/agent")
    refused(world, roles.STATUS_WRITER, [writer.update_op(_changed_image(ds), ds)], caplog)
    pod = world.get("Pod", "default/agent-node-a")
    refused(world, roles.STATUS_WRITER,
            [writer.status_op(dict(pod, status={"phase": "Failed"}), pod)], caplog)


def test_reconciler_writes_pods_revisions_events_decisions_not_daemonsets(
        world: World, caplog: pytest.LogCaptureFixture) -> None:
    rec = world.store(roles.RECONCILER)
    made = rec.commit([rec.create_op(daemon_pod("agent-extra", "node-a")),
                       Op.record("DaemonSet", "default/agent", {"decided": 1})])
    assert [r.status for r in made] == ["ok", "ok"]
    ds = world.get("DaemonSet", "default/agent")
    refused(world, roles.RECONCILER, [rec.update_op(_changed_image(ds), ds)], caplog)
    refused(world, roles.RECONCILER, [rec.final_delete_op(ds)], caplog)
    node = world.get("Node", "/node-a")
    refused(world, roles.RECONCILER, [rec.final_delete_op(node)], caplog)


def _failure_record(action: str) -> dict[str, str]:
    return {rolloutopts.FAILURE_RECORD: json.dumps({"action": action, "failed": 1})}


def test_reconciler_pauses_or_rolls_back_a_failed_rollout_and_nothing_more(
        world: World, caplog: pytest.LogCaptureFixture) -> None:
    rec = world.store(roles.RECONCILER)
    ds = world.get("DaemonSet", "default/agent")
    paused = copy.deepcopy(ds)
    paused["metadata"].setdefault("annotations", {}).update(
        {rolloutopts.PAUSED: "true", **_failure_record("pause")})
    # a pause needs its record: the paused annotation alone is a user's
    without_record = copy.deepcopy(ds)
    without_record["metadata"].setdefault("annotations", {})[rolloutopts.PAUSED] = "true"
    refused(world, roles.RECONCILER, [rec.update_op(without_record, ds)], caplog)
    # a template change only with a rollback's record
    refused(world, roles.RECONCILER, [rec.update_op(_changed_image(paused), ds)], caplog)
    relabelled = copy.deepcopy(paused)
    relabelled["metadata"]["labels"] = {"evil": "true"}
    refused(world, roles.RECONCILER, [rec.update_op(relabelled, ds)], caplog)
    other_annotation = copy.deepcopy(paused)
    other_annotation["metadata"]["annotations"]["example.com/x"] = "y"
    refused(world, roles.RECONCILER, [rec.update_op(other_annotation, ds)], caplog)
    reselected = copy.deepcopy(paused)
    reselected["spec"]["minReadySeconds"] = 30
    refused(world, roles.RECONCILER, [rec.update_op(reselected, ds)], caplog)
    written = rec.update(paused)
    assert meta.annotations(written)[rolloutopts.PAUSED] == "true"
    rolled = _changed_image(written)
    rolled["metadata"]["annotations"].update(_failure_record("rollback"))
    written = rec.update(rolled)
    assert written["spec"]["template"] == rolled["spec"]["template"]
    assert written["metadata"]["generation"] == ds["metadata"]["generation"] + 1


def test_gc_deletes_dependents_and_finishes_deletions_only(world: World,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    gc = world.store(roles.GC)
    pod = world.get("Pod", "default/agent-node-b")
    assert gc.commit([gc.final_delete_op(pod)])[0].ok
    ds = world.get("DaemonSet", "default/agent")
    refused(world, roles.GC, [gc.final_delete_op(ds)], caplog)  # a live owner
    refused(world, roles.GC, [gc.final_delete_op(world.get("Node", "/node-a"))], caplog)
    pod = world.get("Pod", "default/agent-node-a")
    refused(world, roles.GC, [gc.status_op(dict(pod, status={"phase": "Failed"}), pod)], caplog)
    world.admin.delete("DaemonSet", "default/agent", propagation="orphan")
    ds = world.get("DaemonSet", "default/agent")
    done = copy.deepcopy(ds)
    done["metadata"]["finalizers"] = []
    assert gc.commit([gc.update_op(done, ds)])[0].ok  # the last finalizer: deleted
    assert world.admin.try_get("DaemonSet", "default/agent") is None


def test_gc_raises_a_dependents_generation_only_as_its_deletion_starts(
        world: World, caplog: pytest.LogCaptureFixture) -> None:
    """A graceful delete raises the generation by one (upstream's BeforeDelete): the gc's
    deletes of pods (cascades, taint evictions) may; no other change of it."""
    gc = world.store(roles.GC)
    bound = dict(daemon_pod("bound", "node-a"), spec={
        "nodeName": "node-a", "containers": [{"name": "agent", "image": "agent:1"}]})
    pod = world.admin.create(bound)
    raised = copy.deepcopy(pod)
    raised["metadata"]["generation"] += 1
    refused(world, roles.GC, [gc.raw_update_op(raised, meta.resource_version(pod))], caplog)
    op = gc.delete_op(pod)
    assert op is not None and gc.commit([op])[0].ok
    terminating = world.get("Pod", "default/bound")
    assert terminating["metadata"]["generation"] == pod["metadata"]["generation"] + 1
    again = copy.deepcopy(terminating)
    again["metadata"]["generation"] += 1
    refused(world, roles.GC, [gc.raw_update_op(again, meta.resource_version(terminating))],
            caplog)


def test_gc_empties_a_namespace_being_deleted_then_deletes_it(
        world: World, caplog: pytest.LogCaptureFixture) -> None:
    gc = world.store(roles.GC)
    ds = world.get("DaemonSet", "default/agent")
    world.admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    ns = world.get("Namespace", "/default")
    refused(world, roles.GC, [gc.final_delete_op(ns)], caplog)  # not being deleted
    refused(world, roles.GC, [gc.final_delete_op(ds)], caplog)  # nor is its namespace
    # (default cannot be deleted through the API; its object can be marked in the store)
    ns["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    world.admin.commit([world.admin.raw_update_op(ns, meta.resource_version(ns))])
    assert gc.commit([gc.final_delete_op(ds)])[0].ok  # in a namespace being deleted
    ns = world.get("Namespace", "/default")
    told = {"status": {**ns["status"], "conditions": [{"type": "NamespaceContentRemaining",
                                                        "status": "True"}]}}
    assert gc.commit([gc.status_op(told, ns)])[0].ok  # its conditions
    ns = world.get("Namespace", "/default")
    relabelled = copy.deepcopy(ns)
    relabelled["metadata"]["labels"]["x"] = "y"
    refused(world, roles.GC, [gc.raw_update_op(relabelled, meta.resource_version(ns))], caplog)
    node = world.get("Node", "/node-a")
    refused(world, roles.GC, [gc.final_delete_op(node)], caplog)  # not in any namespace
    assert gc.commit([gc.final_delete_op(world.get("Namespace", "/default"))])[0].ok
    assert world.admin.try_get("Namespace", "/default") is None


USERS_OWN = [
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "agent-config"},
     "data": {"level": "info"}},
    {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"},
     "data": {"token": "dDBr"}},
    {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "agent"}},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "metrics"},
     "spec": {"clusterIP": "None", "ports": [{"port": 9100}]}},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r"},
     "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
     "metadata": {"name": "rb"},
     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}},
]


@pytest.mark.parametrize("made", USERS_OWN, ids=lambda obj: obj["kind"])
def test_only_admin_writes_the_users_kinds_and_gc_deletes_them_with_their_namespace(
        world: World, caplog: pytest.LogCaptureFixture, made: dict[str, Any]) -> None:
    """ConfigMaps, Secrets, Services, ServiceAccounts, Roles and RoleBindings are the
    user's: no controller or node agent creates, changes or deletes one; the gc deletes one
    only as its namespace's deletion empties it."""
    made = copy.deepcopy(made)
    made["metadata"]["namespace"] = "default"
    kind = made["kind"]
    obj = world.admin.create(made)
    changed = copy.deepcopy(obj)
    changed["metadata"]["annotations"] = {"changed": "yes"}
    other = copy.deepcopy(made)
    other["metadata"]["name"] = "other"
    for role in (roles.RECONCILER, roles.STATUS_WRITER, roles.GC, roles.NODE_AGENT):
        store = world.store(role)
        refused(world, role, [store.create_op(other)], caplog)
        refused(world, role, [store.update_op(changed, obj)], caplog)
        refused(world, role, [store.final_delete_op(obj)], caplog)
    world.admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    ns = world.get("Namespace", "/default")
    ns["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    world.admin.commit([world.admin.raw_update_op(ns, meta.resource_version(ns))])
    gc = world.store(roles.GC)
    refused(world, roles.GC, [gc.update_op(changed, obj)], caplog)  # still not its own
    assert gc.commit([gc.final_delete_op(obj)])[0].ok  # in a namespace being deleted
    assert world.admin.try_get(kind, f"default/{meta.name(made)}") is None


def test_no_controller_writes_a_cluster_role_or_its_binding(
        world: World, caplog: pytest.LogCaptureFixture) -> None:
    """The cluster-wide access kinds are in no namespace: the gc never deletes one."""
    role = world.admin.create({"apiVersion": "rbac.authorization.k8s.io/v1",
                               "kind": "ClusterRole", "metadata": {"name": "reader"}})
    binding = world.admin.create({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "reader"}})
    for role_name in (roles.RECONCILER, roles.STATUS_WRITER, roles.GC, roles.NODE_AGENT):
        store = world.store(role_name)
        for obj in (role, binding):
            refused(world, role_name, [store.final_delete_op(obj)], caplog)


def test_gc_sets_node_conditions_and_taints_only(world: World,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    """The node lifecycle controller's writes: a Node's conditions and taints, nothing else
    of it (not its labels, not another status field)."""
    gc = world.store(roles.GC)
    node = world.get("Node", "/node-a")
    lost = nodelifecycle.with_conditions_unknown(node, 1_700_000_000.0)
    assert lost is not None
    lost = nodelifecycle.with_taints(lost, [(nodelifecycle.UNREACHABLE, "NoExecute")],
                                     1_700_000_000.0)
    assert lost is not None
    assert gc.commit([gc.raw_update_op(lost, meta.resource_version(node))])[0].ok
    node = world.get("Node", "/node-a")
    assert node["spec"]["taints"][-1]["key"] == nodelifecycle.UNREACHABLE
    relabelled = copy.deepcopy(node)
    relabelled["metadata"]["labels"]["evil"] = "yes"
    refused(world, roles.GC, [gc.raw_update_op(relabelled, meta.resource_version(node))],
            caplog)
    moved = copy.deepcopy(node)
    moved["status"]["addresses"] = [{"type": "InternalIP", "address": "10.9.9.9"}]
    refused(world, roles.GC, [gc.raw_update_op(moved, meta.resource_version(node))], caplog)
    cordoned = copy.deepcopy(node)
    cordoned["spec"]["unschedulable"] = True
    refused(world, roles.GC, [gc.raw_update_op(cordoned, meta.resource_version(node))], caplog)


def test_writes_must_name_the_clusters_own_hash_of_their_kind(world: World) -> None:
    """A caller passing another hash under a kind it may write (a Node op aimed at the
    DaemonSet hash) is refused by the script itself."""
    agent = world.store(roles.NODE_AGENT)
    ds = world.get("DaemonSet", "default/agent")
    payload = codec.pack_object(_changed_image(ds))
    k = world.keys
    raw = agent._commit(keys=[k.log, k.objects("DaemonSet"), k.versions("DaemonSet"), k.meta,
                              k.log_snapshot_id],
                        args=[1, "0", codec.SCHEMA_VERSION, 0, "", "", "0-0", "", roles.NODE_AGENT, "",
                              "update", 1, "Node", "default/agent", "*", payload])
    assert raw[0][0] == b"forbidden"
    image = world.get("DaemonSet", "default/agent")["spec"]["template"]["spec"]["containers"]
    assert image[0]["image"] == "agent:1"


def test_an_unknown_role_commits_nothing(world: World, caplog: pytest.LogCaptureFixture) -> None:
    refused(world, "root", [world.store("root").create_op(daemon_pod("x", "node-a"))], caplog)


def test_status_and_metadata_writes_are_validated_like_any_other(world: World) -> None:
    """No "trusted" write path stores what validation would refuse."""
    agent = world.store(roles.NODE_AGENT)
    pod = world.get("Pod", "default/agent-node-a")
    with pytest.raises(errors.InvalidError, match=r"status\.phase"):
        agent.status_op(dict(pod, status={"phase": "Mining"}), pod)
    bad_bind = copy.deepcopy(pod)
    bad_bind["spec"]["nodeName"] = "Not_A_Node!"
    with pytest.raises(errors.InvalidError, match=r"spec\.nodeName"):
        agent.status_op(bad_bind, pod)
    node = world.get("Node", "/node-a")
    with pytest.raises(errors.InvalidError, match=r"status\.conditions"):
        agent.status_op(dict(node, status={"conditions": "Ready"}), node)
    labelled = copy.deepcopy(pod)
    labelled["metadata"]["labels"] = {"app": "not a valid label value!"}
    with pytest.raises(errors.InvalidError, match=r"metadata\.labels"):
        world.store(roles.RECONCILER).raw_update_op(labelled, pod["metadata"]["resourceVersion"])
