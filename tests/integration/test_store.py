"""The store against a real redis-server: commits, conflicts, bookkeeping, the log."""

from __future__ import annotations

import copy

import pytest
import yaml

from shared.eventlog import entry as entry_mod
from shared.model import meta
from shared.store import codec, errors, ownwrites
from shared.store.cache import Cache
from shared.store.client import Fence, Store, connect, slow_start_batches
from shared.store.keys import Keys
from shared.store.log import parked_entries, redis_reader
from shared.store.workqueue import RedisWorkQueue

DS = yaml.safe_load("""
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: default}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: agent, image: "agent:1"}]
""")


@pytest.fixture
def store(redis_url: str, prefix: str) -> Store:
    return Store(connect(redis_url), Keys(prefix))


def log_len(store: Store) -> int:
    return int(store.r.xlen(store.keys.log))


def test_create_assigns_identity_defaults_and_logs_one_entry(store: Store) -> None:
    ds = store.create(DS)
    md = ds["metadata"]
    assert md["uid"] and md["creationTimestamp"] and md["generation"] == 1
    assert md["annotations"]["deprecated.daemonset.template.generation"] == "1"
    assert ds["spec"]["updateStrategy"] == {
        "type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
    assert ds["spec"]["revisionHistoryLimit"] == 10
    assert log_len(store) == 1
    entry = redis_reader(store.r, store.keys).read()[0]
    assert (entry.type, entry.kind, entry.key) == ("ADDED", "DaemonSet", "default/agent")
    assert entry.id == md["resourceVersion"] == store.get("DaemonSet", "default/agent")[
        "metadata"]["resourceVersion"]


def test_create_twice_is_already_exists_and_writes_nothing(store: Store) -> None:
    store.create(DS)
    with pytest.raises(errors.AlreadyExistsError):
        store.create(DS)
    assert log_len(store) == 1


def test_stale_resource_version_is_a_conflict_and_changes_nothing(store: Store) -> None:
    ds = store.create(DS)
    stale = copy.deepcopy(ds)
    ds["spec"]["minReadySeconds"] = 5
    store.update(ds)
    stale["spec"]["minReadySeconds"] = 9
    with pytest.raises(errors.ConflictError) as exc:
        store.update(stale)
    assert exc.value.retryable
    assert store.get("DaemonSet", "default/agent")["spec"]["minReadySeconds"] == 5
    assert log_len(store) == 2


def test_generation_rises_on_spec_changes_only(store: Store) -> None:
    ds = store.create(DS)
    ds["metadata"]["labels"] = {"team": "infra"}
    ds = store.update(ds)
    assert ds["metadata"]["generation"] == 1
    ds["spec"]["minReadySeconds"] = 3
    ds = store.update(ds)
    assert ds["metadata"]["generation"] == 2
    assert ds["metadata"]["annotations"]["deprecated.daemonset.template.generation"] == "1"
    ds["spec"]["template"]["spec"]["containers"][0]["image"] = "agent:2"
    ds = store.update(ds)
    assert ds["metadata"]["generation"] == 3
    assert ds["metadata"]["annotations"]["deprecated.daemonset.template.generation"] == "2"
    ds["status"] = {"numberReady": 7}
    ds = store.update(ds)
    assert ds["metadata"]["generation"] == 3
    assert ds["status"].get("numberReady", 0) == 0  # spec updates discard status changes


TG = "deprecated.daemonset.template.generation"


@pytest.mark.parametrize(("given", "stored"), [
    # Convert_v1_DaemonSet_To_apps_DaemonSet parses the annotation with
    # strconv.ParseInt(v, 10, 64); PrepareForCreate raises TemplateGeneration to 1 only when
    # lower; Convert_apps_DaemonSet_To_v1_DaemonSet writes it back with strconv.FormatInt
    (None, "1"), ("5", "5"), ("1", "1"), ("0", "1"), ("-3", "1"), ("007", "7"), ("+4", "4"),
])
def test_create_keeps_the_template_generation_annotation(store: Store, given: str | None,
                                                         stored: str) -> None:
    ds = copy.deepcopy(DS)
    if given is not None:
        ds["metadata"]["annotations"] = {TG: given}
    assert store.create(ds)["metadata"]["annotations"][TG] == stored
    assert store.get("DaemonSet", "default/agent")["metadata"]["annotations"][TG] == stored


@pytest.mark.parametrize(("given", "message"), [
    # the decode error transformDecodeError wraps as BadRequest, with strconv's NumError
    ("abc", 'DaemonSet in version "v1" cannot be handled as a DaemonSet: strconv.ParseInt: '
            'parsing "abc": invalid syntax'),
    ("", 'DaemonSet in version "v1" cannot be handled as a DaemonSet: strconv.ParseInt: '
         'parsing "": invalid syntax'),
    ("9223372036854775808", 'DaemonSet in version "v1" cannot be handled as a DaemonSet: '
                            'strconv.ParseInt: parsing "9223372036854775808": value out of range'),
])
def test_a_non_numeric_template_generation_is_a_bad_request_and_writes_nothing(
        store: Store, given: str, message: str) -> None:
    ds = copy.deepcopy(DS)
    ds["metadata"]["annotations"] = {TG: given}
    with pytest.raises(errors.BadRequestError) as exc:
        store.create(ds)
    assert str(exc.value) == message and exc.value.reason == "BadRequest"
    with pytest.raises(errors.BadRequestError):
        store.apply(ds)
    assert log_len(store) == 0
    store.create(DS)  # on update too: the request is decoded before it is ignored
    with pytest.raises(errors.BadRequestError):
        store.apply(ds)

    def bad(current: dict) -> dict:  # type: ignore[type-arg]
        current["metadata"]["annotations"][TG] = given
        return current

    with pytest.raises(errors.BadRequestError):
        store.mutate("DaemonSet", "default/agent", bad)
    assert log_len(store) == 1


def test_update_ignores_the_requested_template_generation(store: Store) -> None:
    # PrepareForUpdate: newDaemonSet.Spec.TemplateGeneration = old, +1 on a template change
    ds = copy.deepcopy(DS)
    ds["metadata"]["annotations"] = {TG: "4"}
    ds = store.create(ds)
    ds["metadata"]["annotations"][TG] = "9"
    assert store.update(ds)["metadata"]["annotations"][TG] == "4"
    ds = store.get("DaemonSet", "default/agent")
    ds["spec"]["template"]["spec"]["containers"][0]["image"] = "agent:2"
    assert store.update(ds)["metadata"]["annotations"][TG] == "5"


def test_status_update_keeps_spec(store: Store) -> None:
    ds = store.create(DS)
    ds["spec"]["minReadySeconds"] = 30
    ds["status"] = {"currentNumberScheduled": 1, "desiredNumberScheduled": 1,
                    "numberMisscheduled": 0, "numberReady": 1, "observedGeneration": 1}
    out = store.update_status(ds)
    assert out["spec"].get("minReadySeconds", 0) == 0
    assert out["status"]["numberReady"] == 1


def test_invalid_update_is_refused_and_nothing_written(store: Store) -> None:
    ds = store.create(DS)
    ds["spec"]["selector"] = {"matchLabels": {"app": "other"}}
    ds["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
    with pytest.raises(errors.InvalidError) as exc:
        store.update(ds)
    assert any("spec.selector" in c and "field is immutable" in c for c in exc.value.causes)
    assert log_len(store) == 1


def test_finalizers_hold_deletion_until_removed(store: Store) -> None:
    obj = copy.deepcopy(DS)
    obj["metadata"]["finalizers"] = ["example.com/hold"]
    store.create(obj)
    left = store.delete("DaemonSet", "default/agent")
    assert left is not None and left["metadata"]["deletionTimestamp"]
    assert store.try_get("DaemonSet", "default/agent") is not None

    def drop(o: dict) -> dict:
        o["metadata"]["finalizers"] = []
        return o

    store.mutate("DaemonSet", "default/agent", drop)
    assert store.try_get("DaemonSet", "default/agent") is None
    types = [e.type for e in redis_reader(store.r, store.keys).read()]
    assert types == ["ADDED", "MODIFIED", "DELETED"]


def test_foreground_and_orphan_deletes_set_their_finalizer(store: Store) -> None:
    store.create(DS)
    left = store.delete("DaemonSet", "default/agent", propagation="foreground")
    assert left is not None and meta.finalizers(left) == ["foregroundDeletion"]
    other = copy.deepcopy(DS)
    other["metadata"]["name"] = "agent2"
    store.create(other)
    left = store.delete("DaemonSet", "default/agent2", propagation="orphan")
    assert left is not None and meta.finalizers(left) == ["orphan"]


def test_delete_with_wrong_uid_precondition_is_a_conflict(store: Store) -> None:
    store.create(DS)
    with pytest.raises(errors.ConflictError):
        store.delete("DaemonSet", "default/agent", uid="not-the-uid")
    assert store.try_get("DaemonSet", "default/agent") is not None


def test_batched_ensure_is_create_if_absent(store: Store) -> None:
    objs = []
    for i in range(3):
        o = copy.deepcopy(DS)
        o["metadata"]["name"] = f"ds{i}"
        objs.append(o)
    first = store.commit([store.create_op(o, ensure=True) for o in objs])
    assert [r.status for r in first] == ["ok", "ok", "ok"]
    again = store.commit([store.create_op(o, ensure=True) for o in objs])
    assert [r.status for r in again] == ["exists", "exists", "exists"]
    assert log_len(store) == 3


def test_atomic_batch_writes_nothing_when_one_op_fails(store: Store) -> None:
    store.create(DS)
    fresh = copy.deepcopy(DS)
    fresh["metadata"]["name"] = "fresh"
    ops = [store.create_op(fresh), store.create_op(DS)]
    results = store.commit(ops, atomic=True)
    assert [r.status for r in results] == ["skipped", "exists"]
    assert store.try_get("DaemonSet", "default/fresh") is None
    assert log_len(store) == 1


def _named(name: str) -> dict:
    o = copy.deepcopy(DS)
    o["metadata"]["name"] = name
    return o


def test_a_slow_start_commit_stops_after_the_first_batch_with_a_failure(store: Store) -> None:
    store.create(_named("ds4"))  # in the third batch (ops 3-6) of batches 1, 2, 4, 8
    ops = [store.create_op(_named(f"ds{i}"), ensure=True) for i in range(10)]
    results = store.commit(ops, slow_start=1)
    assert [r.status for r in results] == ["ok"] * 4 + ["exists"] + ["ok"] * 2 + ["skipped"] * 3
    written = {f"ds{i}" for i in (0, 1, 2, 3, 5, 6)}
    present = {f"ds{i}" for i in range(10) if store.try_get("DaemonSet", f"default/ds{i}")}
    assert present == written | {"ds4"}
    assert log_len(store) == 1 + len(written)


def test_a_slow_start_commit_without_failures_writes_every_batch(store: Store) -> None:
    ops = [store.create_op(_named(f"ds{i}"), ensure=True) for i in range(11)]
    assert [r.status for r in store.commit(ops, slow_start=2)] == ["ok"] * 11
    assert log_len(store) == 11


@pytest.mark.parametrize(("count", "first", "batches"), [
    (0, 1, []),
    (1, 1, [(0, 1)]),
    (10, 1, [(0, 1), (1, 3), (3, 7), (7, 10)]),
    (11, 2, [(0, 2), (2, 6), (6, 11)]),
])
def test_slow_start_batches_double_and_the_last_is_cut(count: int, first: int,
                                                       batches: list[tuple[int, int]]) -> None:
    assert list(slow_start_batches(count, first)) == batches


def test_a_fenced_commit_writes_only_while_its_token_holds_the_lease(store: Store) -> None:
    queue = RedisWorkQueue(store.r, store.keys, lease_seconds=0.05)
    queue.add(["default/agent"])
    lease = queue.get("a")
    assert lease is not None
    fence = Fence("default/agent", lease.token)
    ok = store.commit([store.create_op(DS, ensure=True)], fence=fence)
    assert [r.status for r in ok] == ["ok"]
    taken = queue.get("b", block_seconds=5)  # the lease ran out: reclaimed and handed to b
    assert taken is not None and taken.token != lease.token
    late = copy.deepcopy(DS)
    late["metadata"]["name"] = "late"
    fenced = store.commit([store.create_op(late, ensure=True)], fence=fence)
    assert [r.status for r in fenced] == ["fenced"]
    assert store.try_get("DaemonSet", "default/late") is None and log_len(store) == 1
    held = store.commit([store.create_op(late, ensure=True)],
                        fence=Fence("default/agent", taken.token))
    assert [r.status for r in held] == ["ok"]


def test_cache_lists_then_follows_idempotently(store: Store) -> None:
    store.create(DS)
    cache = Cache(store, ["DaemonSet"])
    pos = cache.sync()
    assert cache.get("DaemonSet", "default/agent") is not None
    ds = store.get("DaemonSet", "default/agent")
    ds["spec"]["minReadySeconds"] = 4
    store.update(ds)
    changes = cache.poll()
    assert [c.type for c in changes] == ["MODIFIED"]
    assert changes[0].old is not None and changes[0].old["spec"].get("minReadySeconds", 0) == 0
    # re-applying the same entries (redelivery) changes nothing
    entries = redis_reader(store.r, store.keys, "0-0").read()
    assert cache.apply(entries) == []
    assert codec.id_ge(cache.position, pos)


def test_a_cache_of_own_writes_reads_them_back_unchecked_and_others_checked(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """With own_writes, the objects this store committed are read back without a second
    shape check (as the objects written, which the caller's later changes do not reach);
    what another process wrote is checked as ever, and so is everything for a cache
    without it."""
    checked: list[str] = []
    real = entry_mod.check_shape

    def counting(kind: str, key: str, obj: dict) -> None:  # type: ignore[type-arg]
        checked.append(key)
        real(kind, key, obj)

    monkeypatch.setattr(entry_mod, "check_shape", counting)
    own = Cache(store, ["DaemonSet"], own_writes=True)
    plain = Cache(Store(store.r, store.keys), ["DaemonSet"])
    own.sync()
    plain.sync()
    mine = store.create(DS)
    other = Store(store.r, store.keys)  # another process's store
    theirs = other.create({**DS, "metadata": {"name": "theirs", "namespace": "default"}})
    mine["spec"]["minReadySeconds"] = 3
    store.update(mine)
    changes = own.poll()
    assert [c.key for c in changes] == ["default/agent", "default/theirs", "default/agent"]
    assert checked == ["default/theirs"]
    assert "minReadySeconds" not in changes[0].new["spec"]  # as created, before the change
    got = own.get("DaemonSet", "default/agent")
    assert got == store.get("DaemonSet", "default/agent") and got["spec"]["minReadySeconds"] == 3
    assert own.get("DaemonSet", "default/theirs") == theirs
    checked.clear()
    plain.poll()
    assert checked == ["default/agent", "default/theirs", "default/agent"]


def test_own_writes_match_the_very_payload_once_and_keep_the_newest(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ownwrites, "MAX_KEPT", 2)
    own = ownwrites.OwnWrites()
    own.add([("0-1", "Pod", b"a", {"n": 1})])
    assert not own.enabled and own.mine("0-1", b"a") is None  # no cache asked: none kept
    own.enable(["Pod"])
    own.add([("1-0", "Pod", b"a", {"n": 1}), ("1-1", "Event", b"e", {"n": 2}),
             ("2-0", "Pod", b"b", {"n": 3}), ("3-0", "Pod", b"c", {"n": 4})])
    assert own.mine("1-1", b"e") is None  # a kind no cache reads: not kept
    assert own.mine("1-0", b"a") is None  # the oldest, dropped
    assert own.mine("2-0", b"x") is None  # another payload at that id: not ours
    assert own.mine("2-0", b"b") is None  # asked once already
    assert own.mine("3-0", b"c") == {"n": 4} and own.mine("3-0", b"c") is None


def test_watch_resumes_from_any_position(store: Store) -> None:
    for i in range(5):
        o = copy.deepcopy(DS)
        o["metadata"]["name"] = f"ds{i}"
        store.create(o)
    ids = [e.id for e in redis_reader(store.r, store.keys).read()]
    reader = redis_reader(store.r, store.keys, ids[2])
    assert [e.key for e in reader.read()] == ["default/ds3", "default/ds4"]


def test_corrupt_log_entries_are_parked_not_fatal(store: Store) -> None:
    store.create(DS)
    store.r.xadd(store.keys.log, {"v": "1", "t": "ADDED", "k": "DaemonSet", "n": "default/x",
                                  "o": b"\xc1not msgpack"})
    store.r.xadd(store.keys.log, {"v": "99", "t": "ADDED", "k": "DaemonSet", "n": "default/y",
                                  "o": codec.pack({})})
    store.r.xadd(store.keys.log, {"garbage": "yes"})
    other = copy.deepcopy(DS)
    other["metadata"]["name"] = "after"
    store.create(other)
    reader = redis_reader(store.r, store.keys)
    good = reader.read()
    assert [e.key for e in good] == ["default/agent", "default/after"]
    parked = parked_entries(store.r, store.keys)
    assert len(parked) == 3
    assert any("schema version" in p["error"] for p in parked.values())
