"""Stored objects of the wrong shape, written straight into Redis as anything that can write
it could (through the commit script, or appended to the log alone), and control state
(expectations, backoff) of the wrong shape, on a running stack:
every process stays alive, parks or skips each one with a line naming the kind, key and
field, and the rest of the cluster converges. Also: the status-writer survives a DaemonSet
deleted during its status write."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import yaml

from services.node_agent.lifecycle import new_node
from services.status_writer.writer import StatusWriter
from shared.model import meta
from shared.model.podutil import is_ready
from shared.store import codec
from shared.store.client import Op, Store, connect
from shared.store.log import parked_entries
from tests.integration.stack import Stack, wait_for

Obj = dict[str, Any]

MANIFEST = """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: NAME, namespace: default}
spec:
  selector: {matchLabels: {app: NAME}}
  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 2}}
  template:
    metadata: {labels: {app: NAME}}
    spec:
      containers: [{name: c, image: "img:1"}]
"""


def _ds(name: str) -> Obj:
    return yaml.safe_load(MANIFEST.replace("NAME", name))  # type: ignore[no-any-return]


def _set(path: str, value: Any) -> Callable[[Obj], None]:
    def mutate(obj: Obj) -> None:
        *parents, last = path.split(".")
        target = obj
        for p in parents:
            target = target.setdefault(p, {})
        target[last] = value
    return mutate


# (kind, field, bad value): each shape the fault campaign found, and their siblings
HOSTILE: list[tuple[str, str, Any]] = [
    ("Node", "status.conditions", "Ready"),
    ("Node", "metadata.labels", ["a", "b"]),
    ("Node", "spec.taints", "NoSchedule"),
    ("Node", "spec.unschedulable", "yes"),
    ("Pod", "status.conditions", "Ready"),
    ("Pod", "metadata.labels", ["app"]),
    ("Pod", "spec.containers", "c"),
    ("Pod", "metadata.ownerReferences", "victim"),
    ("Pod", "status", "Running"),
    ("DaemonSet", "spec.template", "tmpl"),
    ("DaemonSet", "spec.selector", "app=x"),
    ("DaemonSet", "spec.updateStrategy", ["RollingUpdate"]),
    ("DaemonSet", "status", "ok"),
    ("DaemonSet", "status.observedGeneration", "1"),
    ("DaemonSet", "metadata.generation", "one"),
    ("ControllerRevision", "revision", "1"),
    ("ControllerRevision", "metadata.ownerReferences", {"uid": "x"}),
    ("Event", "involvedObject", "pod"),
]


def _base(kind: str, name: str, ds: Obj, node: str) -> Obj:
    """A well-formed object of ``kind`` that the processes would act on: pods and revisions
    owned by ``ds`` and bound to a served ``node``."""
    owner = [meta.controller_owner_ref(ds)]
    md = {"name": name, "namespace": "default", "uid": f"uid-{name}",
          "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"app": meta.name(ds)}}
    if kind == "Node":
        return new_node(name)
    if kind == "Pod":
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {**md, "ownerReferences": owner},
                "spec": {"nodeName": node, "containers": [{"name": "c", "image": "img:1"}]},
                "status": {"phase": "Running"}}
    if kind == "DaemonSet":
        obj = _ds(name)
        obj["metadata"].update(uid=f"uid-{name}", generation=1)
        return obj
    if kind == "ControllerRevision":
        return {"apiVersion": "apps/v1", "kind": "ControllerRevision",
                "metadata": {**md, "ownerReferences": owner}, "data": {}, "revision": 1}
    return {"apiVersion": "v1", "kind": "Event", "metadata": md, "reason": "Hostile",
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "x"},
            "lastTimestamp": "2026-01-01T00:00:00Z"}


def _raw_create(store: Store, obj: Obj) -> str:
    """Write ``obj`` through the commit script without any validation; its entry id."""
    op = Op("create", obj["kind"], meta.key(obj), codec.pack_object(obj), obj=obj)
    res = store.commit([op])[0]
    assert res.ok, res
    return res.value


def _log_only(store: Store, etype: str, obj: Obj) -> str:
    """Append an entry for ``obj`` to the log alone (the view keeps what it had)."""
    eid = store.r.xadd(store.keys.log, {"v": str(codec.SCHEMA_VERSION), "t": etype,
                                        "k": obj["kind"], "n": meta.key(obj),
                                        "o": codec.pack_object(obj)})
    return eid.decode() if isinstance(eid, bytes) else str(eid)


def _converged(stack: Stack, key: str, image: str, nodes: int) -> bool:
    ds = stack.store.try_get("DaemonSet", key)
    if ds is None:
        return False
    pods = [p for p in stack.pods("default")
            if (meta.controller_ref(p) or {}).get("uid") == meta.uid(ds)]
    st = ds.get("status") or {}
    return (len(pods) == nodes and all(is_ready(p) for p in pods)
            and all(p["spec"]["containers"][0]["image"] == image for p in pods)
            and st.get("observedGeneration") == ds["metadata"]["generation"]
            and st.get("updatedNumberScheduled") == nodes and st.get("numberReady") == nodes)


def _alive(stack: Stack) -> list[str]:
    return sorted(n for n, p in stack.procs.items() if p.poll() is not None)


def test_hostile_objects_are_parked_and_the_cluster_converges(stack: Stack) -> None:
    nodes = 3
    stack.start_all(workers=2, nodes=nodes)
    wait_for(lambda: len(stack.store.list("Node")) == nodes, what="nodes registered")
    _result, victim = stack.store.apply(_ds("victim"))
    wait_for(lambda: _converged(stack, "default/victim", "img:1", nodes), timeout=60,
             what="victim converged")
    # gc is not on the victim's path: on a loaded machine it may list the view only after
    # the hostile writes below, and never meet them in the log. It says so after its list.
    wait_for(lambda: "node lifecycle controller active" in (stack.log_dir / "gc.log").read_text(),
             timeout=60, what="gc listed")

    written: dict[str, tuple[str, str, str]] = {}  # entry id -> (kind, key, field)
    for i, (kind, field, value) in enumerate(HOSTILE):
        obj = _base(kind, f"hostile-{i}", victim, "node-00001")
        _set(field, value)(obj)
        shown = "metadata.taints" if field == "spec.taints" else field  # upstream's path
        written[_raw_create(stack.store, obj)] = (kind, meta.key(obj), shown)
    # the log alone: a served node and a running daemon pod turned hostile, then a hostile
    # object's deletion (which readers must apply however it looks)
    node = copy.deepcopy(stack.store.get("Node", "/node-00002"))
    node["spec"]["taints"] = "NoExecute"
    written[_log_only(stack.store, "MODIFIED", node)] = ("Node", "/node-00002",
                                                          "metadata.taints")
    pod = copy.deepcopy(next(p for p in stack.pods("default")
                             if p["spec"].get("nodeName") == "node-00003"))
    pod["status"]["conditions"] = "Ready"
    written[_log_only(stack.store, "MODIFIED", pod)] = ("Pod", meta.key(pod), "status.conditions")
    gone = _base("Pod", "hostile-4", victim, "node-00001")
    _set("status.conditions", "Ready")(gone)
    stack.store.r.hdel(stack.store.keys.objects("Pod"), "default/hostile-4")
    stack.store.r.hdel(stack.store.keys.versions("Pod"), "default/hostile-4")
    _log_only(stack.store, "DELETED", gone)

    # control state of the wrong shape too: expectations and a failed-pod backoff entry
    for key in ("default/victim", "default/after"):
        stack.store.r.hset(stack.store.keys.expectations, key, codec.pack(["a", "b", "c"]))
    stack.store.r.hset(stack.store.keys.backoff, f"{meta.uid(victim)}/1/node-00001",
                       codec.pack({"delay": "forever"}))

    # the rest of the cluster goes on: a new DaemonSet, and a rollout of the victim
    stack.store.apply(_ds("after"))
    rolled = _ds("victim")
    rolled["spec"]["template"]["spec"]["containers"][0]["image"] = "img:2"
    stack.store.apply(rolled)
    # a restart reads the hostile objects from the view (a relist), not from the log: once
    # the readers have met every hostile entry in the log (gc, the one reader of Events here,
    # reads it at most every gc_read_gap_seconds)
    wait_for(lambda: set(written) <= set(parked_entries(stack.store.r, stack.store.keys)),
             timeout=30, what="every hostile entry parked")
    stack.kill("gc")
    stack.start("gc", "gc")
    stack.kill("reconciler-1")
    stack.start("reconciler-1", "reconciler", "--name", f"{stack.prefix}-r1b")

    wait_for(lambda: _converged(stack, "default/after", "img:1", nodes), timeout=90,
             what="a new DaemonSet converged beside the hostile objects")
    wait_for(lambda: _converged(stack, "default/victim", "img:2", nodes), timeout=90,
             what="the victim rolled out beside the hostile objects")
    assert _alive(stack) == [], stack.logs()

    # every hostile entry parked by the readers, each named with its kind, key and field
    parked = parked_entries(stack.store.r, stack.store.keys)
    for eid, (kind, key, field) in written.items():
        assert eid in parked, (eid, kind, key, field)
        reason = parked[eid]["error"]
        assert f'{kind} "{key}" has the wrong shape: {field}' in reason, reason
    logs = "".join(f.read_text() for f in stack.log_dir.glob("*.log"))
    assert 'has the wrong shape: spec.containers: Invalid value: "c": must be of type array' \
        in logs
    assert "Traceback" not in logs, logs[-5000:]
    # nothing acted on them: the hostile pod bound to a served node was neither run nor
    # collected, the daemon pods on the nodes turned hostile in the log are still there
    assert stack.store.names("Pod") >= {f"default/hostile-{i}" for i in (5, 6, 7, 8)}
    assert any(p["spec"].get("nodeName") == "node-00002"
               for p in stack.pods("default") if meta.labels(p).get("app") == "victim")


def test_status_writer_survives_a_daemonset_deleted_during_its_write(redis_url: str,
                                                                     prefix: str) -> None:
    from shared.store.keys import Keys

    store = Store(connect(redis_url), Keys(prefix))
    ds = store.create(_ds("racer"))
    other = Store(connect(redis_url), Keys(prefix))
    real_update = store.update_status

    def deleted_meanwhile(obj: Obj, **kwargs: Any) -> Obj:
        other.delete("DaemonSet", meta.key(obj))  # between the writer's read and write
        return real_update(obj, **kwargs)

    store.update_status = deleted_meanwhile  # type: ignore[method-assign]
    writer = StatusWriter(store, "w1")
    msg = {"key": "default/racer", "uid": meta.uid(ds), "generation": 1, "observe": True,
           "position": "1-0", "status": {"desiredNumberScheduled": 3,
                                         "currentNumberScheduled": 0, "numberMisscheduled": 0,
                                         "numberReady": 0}}
    assert writer.write("default/racer", msg) is False
    assert store.try_get("DaemonSet", "default/racer") is None


def test_control_state_of_the_wrong_shape_is_read_as_none_and_cleared(redis_url: str,
                                                                      prefix: str) -> None:
    from shared.store.backoff import RedisBackoff
    from shared.store.expectations import RedisExpectations
    from shared.store.keys import Keys

    keys = Keys(prefix)
    r = connect(redis_url)
    for raw in (codec.pack(["a", "b", "c"]), codec.pack("x"), b"\xc1not msgpack"):
        r.hset(keys.expectations, "default/ds", raw)
        exp = RedisExpectations(r, keys)
        assert exp.get("default/ds") is None
        assert exp.satisfied("default/ds", 0.0)
        exp.lower("default/ds", 1, 0)  # the script deletes what it cannot lower
        assert r.hget(keys.expectations, "default/ds") is None
        r.hset(keys.backoff, "uid/1/n1", raw)
        backoff = RedisBackoff(r, keys)
        assert backoff.get_many(["uid/1/n1"]) == {}
        assert backoff.gc(now=0.0) == 1
        assert r.hget(keys.backoff, "uid/1/n1") is None
