"""The log entry's module: its layout both ways, its types, and the upcaster hook that
brings an entry of an older schema version up to this one."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.eventlog import entry, wire
from shared.model import validation
from shared.model.errors import CorruptEntryError

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
       "spec": {"containers": [{"name": "c", "image": "i"}]}}


def _fields(**over: bytes) -> dict[bytes, bytes]:
    fields = {b"v": b"1", b"t": b"ADDED", b"k": b"Pod", b"n": b"ns/p",
              b"o": wire.pack_object(POD)}
    fields.update({k.encode(): v for k, v in over.items()})
    return fields


def test_a_stored_entry_reads_back_as_its_fields_and_decodes() -> None:
    raw = entry.RawEntry.from_fields(b"5-1", _fields(u=b"alice"))
    assert raw == entry.RawEntry("5-1", "1", "ADDED", "Pod", "ns/p", wire.pack_object(POD),
                                 "alice")
    assert {k.encode(): v if isinstance(v, bytes) else v.encode()
            for k, v in raw.fields().items()} == _fields(u=b"alice")
    e = entry.decode(raw)
    assert (e.id, e.type, e.kind, e.key, e.user) == ("5-1", entry.EntryType.ADDED, "Pod",
                                                     "ns/p", "alice")
    assert e.obj["metadata"]["resourceVersion"] == "5-1"
    assert entry.decode_fields(b"5-1", _fields(u=b"alice")) == e


def _outcome(fn: object, *args: object) -> object:
    try:
        return fn(*args)  # type: ignore[operator]
    except CorruptEntryError as err:
        return f"refused: {err}"


def _strictly(outcome: object) -> object:
    """An outcome compared with its types (``True == 1 == 1.0`` in Python): an entry with
    its object packed."""
    return (outcome, wire.pack(outcome.obj)) if isinstance(outcome, entry.Entry) else outcome


@pytest.mark.parametrize("fields", [
    _fields(), _fields(u=b"alice"), _fields(v=b"2"), _fields(v=b"\xff"), _fields(t=b"\xff"),
    _fields(k=b"Pod\xff"), _fields(n=b"ns/p\xff"), _fields(u=b"\xff"), _fields(o=b"\x80"),
    {k: v for k, v in _fields().items() if k != b"v"},
    {k: v for k, v in _fields().items() if k != b"t"},
    {k: v for k, v in _fields().items() if k != b"o"},
    {k: v for k, v in _fields(v=b"2").items() if k != b"t"},
])
def test_an_entry_read_from_the_stream_decodes_as_its_stored_fields(
        fields: dict[bytes, bytes]) -> None:
    """What the caches' reader decodes through the log port (``decode_as_stored`` of
    ``from_fields``) is what ``decode_fields`` makes of the stream's fields, refusal and
    message included, though the str fields replace what is not UTF-8."""
    raw = entry.RawEntry.from_fields(b"5-1", fields)
    assert _outcome(entry.decode_as_stored, raw) == _outcome(entry.decode_fields, b"5-1",
                                                             fields)
    assert raw.stored is fields


@pytest.mark.parametrize("fields", [
    _fields(), _fields(u=b"alice"), _fields(v=b"2"), _fields(v=b"\xff"), _fields(t=b"\xff"),
    _fields(k=b"Pod\xff"), _fields(n=b"ns/p\xff"), _fields(u=b"\xff"), _fields(o=b"\x80"),
    {k: v for k, v in _fields().items() if k != b"t"},
    {b"o": _fields()[b"o"], **{k: v for k, v in _fields().items() if k != b"o"}},
    {**_fields(), b"x": b"more"}, {**_fields(u=b"alice"), b"x": b"more"},
])
def test_an_entry_as_the_wire_gives_it_reads_as_its_field_map(
        fields: dict[bytes, bytes]) -> None:
    """``from_flat`` (the fields' names and values alternating, as the log's reads get them)
    makes what ``from_fields`` makes of the same fields as a map, in any order, with fields
    missing, added or not UTF-8, and the same decode (or refusal) follows."""
    flat = [part for pair in fields.items() for part in pair]
    raw = entry.RawEntry.from_flat(b"5-1", flat)
    mapped = entry.RawEntry.from_fields(b"5-1", fields)
    assert (raw, raw.exact) == (mapped, mapped.exact)
    assert _outcome(entry.decode_as_stored, raw) == _outcome(entry.decode_as_stored, mapped)


def test_every_write_mode_appends_the_entry_type_commit_gives_it() -> None:
    assert {m.value: t.value for m, t in entry.ENTRY_TYPE_OF.items()} == {
        "create": "ADDED", "ensure": "ADDED", "update": "MODIFIED", "delete": "DELETED",
        "record": "DECISION"}


def test_an_entry_of_an_unknown_version_is_refused() -> None:
    for version in (b"2", b"0", b"x"):
        with pytest.raises(CorruptEntryError, match="unsupported schema version"):
            entry.decode_fields("5-0", _fields(v=version))


def test_an_older_entry_is_upcast_before_it_is_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Were the schema at version 3, a version 1 entry goes through both upcasters."""
    def v1_to_v2(raw: entry.RawEntry) -> entry.RawEntry:
        return dataclasses.replace(raw, type={"CREATED": "ADDED"}.get(raw.type, raw.type))

    def v2_to_v3(raw: entry.RawEntry) -> entry.RawEntry:
        return dataclasses.replace(raw, user=raw.user or "before-users")

    monkeypatch.setattr(entry, "SCHEMA_VERSION", 3)
    monkeypatch.setattr(entry, "UPCASTERS", {1: v1_to_v2, 2: v2_to_v3})
    e = entry.decode_fields("5-0", _fields(t=b"CREATED"))
    assert (e.type, e.user) == (entry.EntryType.ADDED, "before-users")
    assert entry.decode_fields("6-0", _fields(v=b"3")).user == ""
    monkeypatch.setattr(entry, "UPCASTERS", {2: v2_to_v3})
    with pytest.raises(CorruptEntryError, match="no upcaster from schema version 1"):
        entry.decode_fields("5-0", _fields())


def test_the_id_before_an_id_is_the_greatest_below_it() -> None:
    assert entry.previous_id("5-3") == "5-2"
    assert entry.previous_id("5-0") == f"4-{(1 << 64) - 1}"
    assert entry.previous_id("0-1") == "0-0" and entry.previous_id("0-0") == "0-0"
    assert entry.id_tuple(entry.previous_id("7-0")) < entry.id_tuple("7-0")


# ---- decoding a status update over the version before it (``entry.Prior``) ---------------

BOUND = {**POD, "spec": {**POD["spec"], "nodeName": "n1"}, "status": {"phase": "Pending"}}
CREATED = {**POD, "spec": {**POD["spec"], "restartPolicy": "Always"}, "status": {}}


def _raw(obj: object, eid: str = "6-1", etype: str = "MODIFIED",
         payload: bytes | None = None) -> entry.RawEntry:
    return entry.RawEntry(eid, "1", etype, "Pod", "ns/p",
                          payload if payload is not None else wire.pack(obj))


def _prior(obj: dict[str, object]) -> entry.Prior:
    raw = _raw(obj, "5-1")
    return entry.Prior(raw.payload, entry.decode(raw).obj)


def test_a_status_update_decodes_its_status_over_the_version_before() -> None:
    prior = _prior(BOUND)
    new = {**BOUND, "status": {"phase": "Running", "podIP": "10.0.0.1"}}
    e = entry.decode(_raw(new), prior=prior)
    assert e == entry.decode(_raw(new))
    assert e.obj["spec"] is prior.obj["spec"]  # shared, not decoded again
    assert e.obj["metadata"] is not prior.obj["metadata"]
    assert e.obj["metadata"]["resourceVersion"] == "6-1"
    assert prior.obj["metadata"]["resourceVersion"] == "5-1"


@pytest.mark.parametrize("payload", [
    wire.pack({**BOUND, "status": {"phase": "Running", "conditions": "Ready"}}),
    wire.pack({**BOUND, "status": "Running"}),
    wire.pack({**BOUND, "status": {"phase": "Bogus"}}),
    wire.pack(BOUND)[:-3],  # the status cut short
    wire.pack(BOUND) + b"\x01",  # bytes after it
    wire.pack(BOUND)[:-len(wire.pack({"phase": "Pending"}))] + b"\xc1",  # never used
    wire.pack({**BOUND, "status": {"phase": "Running", b"x": 1}}),  # a bytes key
    wire.pack({**BOUND, "spec": {"containers": "c"}, "status": {"phase": "Running"}}),
    wire.pack({**BOUND, "metadata": {"name": "q", "namespace": "ns"}}),
    wire.pack({**BOUND, "kind": "Node"}),
])
def test_a_status_update_over_its_prior_is_refused_as_a_whole_decode_refuses_it(
        payload: bytes) -> None:
    raw = _raw(None, payload=payload)
    assert _outcome(entry.decode, raw, True, _prior(BOUND)) == _outcome(entry.decode, raw)


def test_only_an_update_is_decoded_over_and_only_when_the_status_is_last() -> None:
    deleted = entry.decode(_raw({**BOUND, "status": {"conditions": "x"}}, etype="DELETED"),
                           prior=_prior(BOUND))
    assert deleted.obj["metadata"] == {"name": "p", "namespace": "ns", "resourceVersion": "6-1"}
    assert "status" not in deleted.obj  # the tombstone, as a whole decode makes it
    spec_last = {k: v for k, v in BOUND.items() if k != "spec"} | {"spec": BOUND["spec"]}
    prior = _prior(spec_last)
    assert prior.last()[1] == "spec"  # with a status before it: decoded whole
    new = {**spec_last, "status": {"phase": "Running"}}
    assert entry.decode(_raw(new), prior=prior) == entry.decode(_raw(new))


def test_a_deletion_of_the_version_before_is_its_object_at_the_deletion_s_version() -> None:
    """A pod deleted as it was last written (the node agent removes what it read): the
    deletion is the prior's object, not decoded again, at the deletion's resourceVersion."""
    prior = _prior(BOUND)
    raw = _raw(None, etype="DELETED", payload=prior.payload)
    e = entry.decode(raw, prior=prior)
    assert e == entry.decode(raw)
    assert e.obj["spec"] is prior.obj["spec"] and e.obj["status"] is prior.obj["status"]
    assert e.obj["metadata"]["resourceVersion"] == "6-1"
    assert prior.obj["metadata"]["resourceVersion"] == "5-1"  # the prior's own, unchanged


def test_an_update_of_the_metadata_alone_checks_the_metadata_alone() -> None:
    """A pod marked for deletion (deletionTimestamp added to its metadata) is decoded
    whole; its spec and status, equal to the prior's, are the prior's objects from then on
    (checked when the prior was decoded), its metadata is checked."""
    prior = _prior(BOUND)
    marked = {**BOUND, "metadata": {**BOUND["metadata"],
                                    "deletionTimestamp": "2026-12-04T06:00:00Z",
                                    "deletionGracePeriodSeconds": 30}}
    e = entry.decode(_raw(marked), prior=prior)
    assert e == entry.decode(_raw(marked))
    assert e.obj["spec"] is prior.obj["spec"] and e.obj["status"] is prior.obj["status"]
    for bad in ({**marked["metadata"], "labels": ["a"]},
                {**marked["metadata"], "deletionGracePeriodSeconds": "30"}):
        raw = _raw({**marked, "metadata": bad})
        refused = _outcome(entry.decode, raw, True, prior)
        assert refused == _outcome(entry.decode, raw)
        assert not isinstance(refused, entry.Entry)


def test_a_part_equal_in_python_but_not_in_type_is_decoded_as_written() -> None:
    """``True == 1 == 1.0`` in Python: a spec or status equal to the prior's only so is
    not the prior's object; it is checked and held as written (compared packed)."""
    spec = {**BOUND["spec"], "hostNetwork": True}
    prior = _prior({**BOUND, "spec": spec, "status": {"phase": "Running", "x": 1}})
    marked_md = {**BOUND["metadata"], "deletionTimestamp": "2026-12-04T06:00:00Z"}
    ill_typed = _raw({**BOUND, "metadata": marked_md, "spec": {**spec, "hostNetwork": 1},
                      "status": {"phase": "Running", "x": 1}})
    refused = _outcome(entry.decode, ill_typed, True, prior)
    assert refused == _outcome(entry.decode, ill_typed)
    assert "spec.hostNetwork" in str(refused)
    floated = _raw({**BOUND, "metadata": marked_md, "spec": spec,
                    "status": {"phase": "Running", "x": 1.0}})
    e = entry.decode(floated, prior=prior)
    assert wire.pack(e.obj) == wire.pack(entry.decode(floated).obj)
    assert e.obj["spec"] is prior.obj["spec"] and e.obj["status"] is not prior.obj["status"]


_leaf = st.one_of(st.integers(-3, 3), st.text(max_size=3), st.booleans(), st.none(),
                  st.sampled_from(["Pending", "Running", "Ready", "True"]))
_value = st.recursive(_leaf, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=8)
_condition = st.dictionaries(st.sampled_from(["type", "status", "reason"]), _value, max_size=3)
# statuses of the right shape and of wrong ones (a field's value of any type)
_status = st.one_of(_value, st.fixed_dictionaries({}, optional={
    "phase": st.one_of(st.sampled_from(["Pending", "Running", "Failed"]), _value),
    "podIP": st.one_of(st.text(max_size=3), _value),
    "conditions": st.one_of(st.lists(_condition, max_size=2), _value),
    "containerStatuses": st.lists(st.one_of(_condition, _value), max_size=2),
}))
_change = st.one_of(
    st.tuples(st.just("status"), _status),
    st.tuples(st.just("bind"), st.tuples(st.sampled_from(["nodeName", "hostNetwork", "x", "containers"]),
                                         st.one_of(st.just("n1"), _value), _status)),
    st.tuples(st.sampled_from(["spec", "metadata", "kind", "extra"]), _value),
    st.tuples(st.just("bytes"), st.binary(max_size=4)),
)


@given(st.sampled_from([None, {}, {"phase": "Pending"}, {"phase": "Running", "podIP": "1"}]),
       st.sampled_from([BOUND, CREATED]),
       st.lists(_change, min_size=1, max_size=4))
def test_decoding_over_the_prior_version_is_a_whole_decode_refusals_included(
        first: dict[str, object], start: dict[str, object],
        changes: list[tuple[str, object]]) -> None:
    """Over a sequence of writes (status updates, changes elsewhere, raw bytes), each
    decoded over the version a reader decoded before it gives what a whole decode gives:
    the same object, or the same refusal."""
    current: dict[str, object] = {k: v for k, v in start.items() if k != "status"}
    if first is not None:  # else created without a status, as the reconciler creates pods
        current["status"] = first
    prior = _prior(current)
    for i, (field, value) in enumerate(changes):
        if field == "bytes":
            assert isinstance(value, bytes)
            payload = wire.pack(current)[:-1] + value
        elif field == "bind":  # a pair added last to the spec (or replaced), a new status
            assert isinstance(value, tuple)
            name, given, status = value
            spec = current.get("spec")
            spec = {**spec, name: given} if isinstance(spec, dict) else {name: given}
            current = {**{k: v for k, v in current.items() if k not in ("spec", "status")},
                       "spec": spec, "status": status}
            payload = wire.pack(current)
        else:
            current = {**current, field: value}
            if field == "status":  # moved last, as a status write leaves it
                current = {**{k: v for k, v in current.items() if k != "status"},
                           "status": value}
            payload = wire.pack(current)
        raw = _raw(None, f"{6 + i}-1", payload=payload)
        over = _outcome(entry.decode, raw, True, prior)
        assert _strictly(over) == _strictly(_outcome(entry.decode, raw))
        if isinstance(over, entry.Entry):
            prior = entry.Prior(payload, over.obj)
    deleted = _raw(None, "99-1", etype="DELETED", payload=prior.payload)
    assert _strictly(_outcome(entry.decode, deleted, True, prior)) == \
        _strictly(_outcome(entry.decode, deleted))


def test_a_binding_decodes_the_spec_s_added_pairs_and_the_status_over_the_create() -> None:
    """Binding a pod adds ``nodeName`` last to the spec of the pod as created and writes its
    status: the spec's other values, and the metadata, are the create's."""
    prior = _prior(CREATED)
    bound = {**CREATED, "spec": {**CREATED["spec"], "nodeName": "n1"},
             "status": {"phase": "Running"}}
    e = entry.decode(_raw(bound), prior=prior)
    assert e == entry.decode(_raw(bound))
    assert e.obj["spec"]["containers"] is prior.obj["spec"]["containers"]
    assert e.obj["spec"] is not prior.obj["spec"] and "nodeName" not in prior.obj["spec"]
    for spec in ({**CREATED["spec"], "nodeName": 5},  # ill-typed
                 {**CREATED["spec"], "nodeName": "Not_A_Name"},  # not a type error: read
                 {**CREATED["spec"], "restartPolicy": "Never", "nodeName": "n1"},  # changed
                 {**CREATED["spec"], "containers": "c"},  # replaced in place
                 {"nodeName": "n1", **CREATED["spec"]},  # added first
                 {**CREATED["spec"], "nodeName": "n1", "x": {b"k": 1}}):  # a bytes key
        raw = _raw({**CREATED, "spec": spec, "status": {"phase": "Running"}})
        assert _outcome(entry.decode, raw, True, prior) == _outcome(entry.decode, raw), spec
    # a bound pod's spec gaining another field than nodeName: the whole spec is checked
    raw = _raw({**BOUND, "spec": {**BOUND["spec"], "hostNetwork": "yes"}})
    assert _outcome(entry.decode, raw, True, _prior(BOUND)) == _outcome(entry.decode, raw)
    assert "spec.hostNetwork" in str(_outcome(entry.decode, raw))


def test_a_binding_of_a_spec_of_sixteen_keys_or_more_decodes_over_the_create() -> None:
    """A spec of 16 keys or more has a longer map header (map 16), and one of 15 gains its
    16th with nodeName: decoded over the create all the same, as a whole decode does."""
    for extra in (14, 15, 40):
        spec = {**POD["spec"], **{f"x{i}": i for i in range(extra)}}
        created = {**POD, "spec": spec}
        prior = _prior(created)
        bound = {**created, "spec": {**spec, "nodeName": "n1"}, "status": {"phase": "Running"}}
        e = entry.decode(_raw(bound), prior=prior)
        assert e == entry.decode(_raw(bound))
        assert e.obj["spec"]["containers"] is prior.obj["spec"]["containers"], extra


@pytest.mark.parametrize("obj", [
    {**POD, "spec": {**POD["spec"], "nodeName": "n1"}, "status": {"phase": "Running"}},
    {**POD, "status": {"phase": "Running"}},  # a status alone
    {**POD, "spec": {**POD["spec"], "nodeName": 5}, "status": {"phase": "Running"}},
    {**POD, "spec": {**POD["spec"], "nodeName": "n1"}, "status": {"conditions": "x"}},
    {**POD, "spec": {**POD["spec"], "hostNetwork": "yes"}, "status": {}},
    {**POD, "spec": {**POD["spec"], "nodeName": "n1"}, "x": {}},  # another key added
    {**POD, "spec": {**POD["spec"], "nodeName": "n1"}, "status": {}, "x": 1},  # two
    {**POD, "spec": {"nodeName": "n1", **POD["spec"]}, "status": {}},
    {**POD, "spec": {**POD["spec"], "nodeName": "n1"}},  # no key added
])
def test_a_binding_of_a_pod_created_without_status_decodes_over_the_create(obj: object) -> None:
    """The reconciler creates pods without a status: binding one adds nodeName last to
    its spec and the status after it; decoded over the create, it is what a whole decode
    makes of it, refusals included."""
    prior = _prior(POD)
    assert prior.last()[1] == "spec"
    raw = _raw(obj)
    over = _outcome(entry.decode, raw, True, prior)
    assert over == _outcome(entry.decode, raw)
    if obj == {**POD, "spec": {**POD["spec"], "nodeName": "n1"},
               "status": {"phase": "Running"}}:
        assert isinstance(over, entry.Entry)
        assert over.obj["spec"]["containers"] is prior.obj["spec"]["containers"]
        assert over.obj["metadata"] is not prior.obj["metadata"]


@pytest.mark.parametrize("node", ["n1", "n" * 40, "n" * 300, "é1"])
@pytest.mark.parametrize("bad", [None, b"\xff", b"\xc3"])
@pytest.mark.parametrize("created", [POD, CREATED])
def test_a_binding_to_a_node_named_in_any_bytes_decodes_as_a_whole_decode(
        created: dict[str, object], node: str, bad: bytes | None) -> None:
    """The node's name of every length (its header fixstr, str 8, str 16), and bytes that
    are not UTF-8 in it: decoded over the create, what a whole decode makes of it."""
    bound = {**created, "spec": {**created["spec"], "nodeName": node},  # type: ignore[dict-item]
             "status": {"phase": "Running"}}
    payload = wire.pack(bound)
    if bad is not None:
        name = node.encode()
        assert payload.count(name) == 1
        payload = payload.replace(name, bad + name[len(bad):])
    raw = _raw(None, payload=payload)
    assert _strictly(_outcome(entry.decode, raw, True, _prior(created))) == \
        _strictly(_outcome(entry.decode, raw))


# ---- decoding a created pod beside the one created before it (``entry.Siblings``) --------

def _daemon_pod(node: object, name: str = "p", status: object = None,
                **more: object) -> dict[str, object]:
    """A pod as a DaemonSet creates it: its spec the template's, the node affinity last;
    ``status`` (when given) after the spec."""
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}
    pod: dict[str, object] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}", **more},
        "spec": {"containers": [{"name": "c", "image": "i"}], "hostNetwork": True,
                 "affinity": affinity}}
    if status is not None:
        pod["status"] = status
    return pod


#: the status a DaemonSet's pods are created with (``podtemplate.new_pod``)
CREATED_STATUS = {"phase": "Pending", "qosClass": "BestEffort"}


def _created(obj: object, eid: str = "6-1", payload: bytes | None = None,
             name: str = "p") -> entry.RawEntry:
    return entry.RawEntry(eid, "1", "ADDED", "Pod", f"ns/{name}",
                          payload if payload is not None else wire.pack(obj))


@pytest.mark.parametrize("status", [None, CREATED_STATUS])
def test_a_created_pod_decodes_beside_the_one_created_before_it(
        monkeypatch: pytest.MonkeyPatch, status: object) -> None:
    """Its name, uid, creation time and node are decoded into a copy of the pod before it,
    sharing its other values (its status after the spec too), and nothing is checked; the
    object is a whole decode's."""
    siblings = entry.Siblings()
    first = entry.decode(_created(_daemon_pod("n1", status=status,
                                              creationTimestamp="2026-12-04T10:00:00Z")),
                         True, None, siblings)
    assert siblings.layout is not None and siblings.layout.pod is first.obj
    second = _created(_daemon_pod("node-2", "q", status=status,
                                  creationTimestamp="2026-12-04T10:00:01Z"),
                      "6-2", name="q")
    whole = entry.decode(second)
    monkeypatch.setattr(validation, "shape_errors", lambda *a: pytest.fail("checked whole"))
    monkeypatch.setattr(validation, "part_shape_errors", lambda *a: pytest.fail("checked"))
    beside = entry.decode(second, True, None, siblings)
    assert _strictly(beside) == _strictly(whole)
    assert list(beside.obj) == list(whole.obj)  # the key order too
    for part in ("metadata", "spec"):
        assert list(beside.obj[part]) == list(whole.obj[part])
    if status is not None:
        assert beside.obj["status"] is first.obj["status"]
    assert beside.obj["metadata"]["resourceVersion"] == "6-2"
    assert beside.obj["spec"]["containers"] is first.obj["spec"]["containers"]
    assert beside.obj["spec"] is not first.obj["spec"]
    assert beside.obj["spec"]["affinity"] != first.obj["spec"]["affinity"]
    assert first.obj["metadata"]["resourceVersion"] == "6-1"
    assert first.obj["metadata"]["name"] == "p"
    assert siblings.layout.pod is first.obj  # kept: the next pods are decoded beside it too


def _in_hole(payload: bytes, text: str, new: bytes) -> bytes:
    """``payload`` with the UTF-8 bytes of ``text`` (once in it) replaced by ``new``."""
    old = text.encode()
    assert payload.count(old) == 1 and len(new) == len(old)
    return payload.replace(old, new)


def _beside_cases() -> list[bytes]:
    base = _daemon_pod("n2", "q")
    spec = base["spec"]
    assert isinstance(spec, dict)
    return [
        wire.pack(_daemon_pod("-bad-", "q")),  # an affinity of the wrong shape...
        wire.pack(_daemon_pod(7, "q")),  # ...and of the wrong type
        wire.pack(_daemon_pod("n2", "q", labels="x")),  # the metadata of the wrong type
        wire.pack(_daemon_pod("n2", "q", labels={"a": 1})),
        wire.pack({**base, "metadata": {"name": "other", "namespace": "ns"}}),  # not its key
        wire.pack({**base, "kind": "Node"}),
        wire.pack({**base, "status": {"phase": 3}}),  # a status after the spec
        wire.pack({**base, "status": {"phase": "Pending"}}),
        wire.pack({"status": {"phase": "Pending"}, **base}),  # ...and before it
        wire.pack({"status": {"phase": 3}, **base}),
        wire.pack({**base, "spec": {**spec, "hostNetwork": 1}}),  # 1 is not True
        wire.pack({**base, "spec": {**spec, "containers": "c"}}),
        wire.pack({**base, "spec": {**spec, "x": 1}}),  # a key after the affinity
        wire.pack({b"apiVersion": "v1", **{k: v for k, v in base.items()
                                           if k != "apiVersion"}}),  # a bytes key
        wire.pack(base)[:-2],  # cut short
        wire.pack(base) + b"\x01",  # bytes after it
        wire.pack(base)[:-1] + b"\xc1",  # never used
        b"\x80", b"\xc1",
        wire.pack(_daemon_pod("n2", "qq")),  # a name of another length
        wire.pack(_daemon_pod("n2", "q", uid=7)),  # a uid of the wrong type
        wire.pack(_daemon_pod("n2", "q", uid="u-qq")),  # ...and of another length
        _in_hole(wire.pack(base), "u-q", b"u-\xff"),  # not UTF-8
        _in_hole(wire.pack(base), "u-q", "u-é".encode()[1:]),
        wire.pack(_daemon_pod("n2", "q", creationTimestamp=None)),
        wire.pack({**base, "spec": {**spec, "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": ["n2", "n3"]}]}]}}}}}),
        wire.pack({**base, "spec": {**spec, "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [
                    {"operator": "In", "key": "metadata.name", "values": ["n2"]}]}]}}}}}),
    ]


def _beside_cases_with_status() -> list[bytes]:
    """Pods beside one created with its status after the spec."""
    base = _daemon_pod("n2", "q", CREATED_STATUS)
    without = {k: v for k, v in base.items() if k != "status"}
    return [
        wire.pack(_daemon_pod("n2", "q", {**CREATED_STATUS, "phase": 3})),  # wrong type
        wire.pack(_daemon_pod("n2", "q", {**CREATED_STATUS, "phase": "Pendinh"})),  # other
        wire.pack(_daemon_pod("n2", "q", {**CREATED_STATUS, "x": 1})),  # a key more
        wire.pack(_daemon_pod("n2", "q", {"phase": "Pending"})),  # a key less
        wire.pack(_daemon_pod("n2", "q", {"qosClass": "BestEffort", "phase": "Pending"})),
        wire.pack(without),  # none
        wire.pack({"status": CREATED_STATUS, **without}),  # before the spec
        wire.pack({**base, "x": 1}),  # a key after the status
        wire.pack(_daemon_pod(7, "q", CREATED_STATUS)),  # a node of the wrong type
        wire.pack(_daemon_pod("-bad-", "q", CREATED_STATUS)),
        wire.pack(_daemon_pod("n2" * 40, "q", CREATED_STATUS)),  # of another length
        wire.pack(base)[:-1],  # cut short
        wire.pack(base) + b"\x01",  # bytes after it
        wire.pack(base)[:-1] + b"\xc1",  # never used
        wire.pack(_daemon_pod("n2", "qq", CREATED_STATUS)),  # a name of another length
    ]


@pytest.mark.parametrize("payload", _beside_cases())
def test_a_created_pod_beside_another_is_refused_as_a_whole_decode_refuses_it(
        payload: bytes) -> None:
    siblings = entry.Siblings()
    entry.decode(_created(_daemon_pod("n1")), True, None, siblings)
    raw = _created(None, "6-2", payload=payload, name="q")
    assert _strictly(_outcome(entry.decode, raw, True, None, siblings)) == \
        _strictly(_outcome(entry.decode, raw))


@pytest.mark.parametrize("payload", _beside_cases() + _beside_cases_with_status())
def test_a_created_pod_beside_one_with_a_status_is_refused_as_a_whole_decode_refuses_it(
        payload: bytes) -> None:
    siblings = entry.Siblings()
    entry.decode(_created(_daemon_pod("n1", status=CREATED_STATUS)), True, None, siblings)
    assert siblings.layout is not None and siblings.layout.suffix
    raw = _created(None, "6-2", payload=payload, name="q")
    assert _strictly(_outcome(entry.decode, raw, True, None, siblings)) == \
        _strictly(_outcome(entry.decode, raw))
    raw = _created(None, "6-2", payload=payload, name="q")
    assert _strictly(_outcome(entry.decode, raw, True, None, siblings)) == \
        _strictly(_outcome(entry.decode, raw))


def _requirement(node: str, **more: object) -> dict[str, object]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", **more, "values": [node]}]}]}}}


@pytest.mark.parametrize("affinity", [
    lambda node: _requirement(node, extra="x"),  # a key more, before the node
    lambda node: {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [
            {"operator": "In", "key": "metadata.name", "values": [node]}]}]}}},
    lambda node: {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [],
                                   **_requirement(node)["nodeAffinity"]}},
    lambda node: {"podAffinity": {}, **_requirement(node)},
])
def test_pods_aimed_at_their_node_otherwise_are_whole_decodes(
        affinity: Callable[[str], dict[str, object]]) -> None:
    """Only the affinity exactly as a DaemonSet writes it is rebuilt around another node: a
    kept pod whose affinity ends with its node but says more is not a layout to copy."""
    siblings = entry.Siblings()
    pod = _daemon_pod("n1")
    pod["spec"] = {**pod["spec"], "affinity": affinity("n1")}  # type: ignore[dict-item]
    entry.decode(_created(pod), True, None, siblings)
    other = _daemon_pod("n2", "q")
    other["spec"] = {**other["spec"], "affinity": affinity("n2")}  # type: ignore[dict-item]
    raw = _created(other, "6-2", name="q")
    decoded = entry.decode(raw, True, None, siblings)
    assert _strictly(decoded) == _strictly(entry.decode(raw))
    # its keys in their order, their types: packed alike
    assert wire.pack(decoded.obj["spec"]["affinity"]) == wire.pack(affinity("n2"))


@given(st.lists(st.one_of(
    st.tuples(st.just("node"), st.one_of(st.sampled_from(["n1", "n2", "-x-"]), _value)),
    st.tuples(st.sampled_from(["containers", "hostNetwork", "affinity", "x"]), _value),
    st.tuples(st.just("labels"), _value),
    st.tuples(st.sampled_from(["uid", "creationTimestamp"]),
              st.one_of(st.text(min_size=4, max_size=4), st.text(max_size=5), _value)),
    st.tuples(st.just("bytes"), st.binary(max_size=4)),
    st.tuples(st.just("status"), st.one_of(st.just(CREATED_STATUS), _value)),
), min_size=1, max_size=6), st.booleans())
def test_created_pods_decoded_beside_each_other_are_whole_decodes_refusals_included(
        writes: list[tuple[str, object]], with_status: bool) -> None:
    """Over a sequence of creates (other nodes, other specs, statuses, wrong types, raw
    bytes), each decoded beside the one the reader kept gives what a whole decode gives."""
    siblings = entry.Siblings()
    status = CREATED_STATUS if with_status else None
    entry.decode(_created(_daemon_pod("n0", "px", status), name="px"), True, None, siblings)
    for i, (what, value) in enumerate(writes):
        pod = _daemon_pod("n1", f"p{i}", status)
        spec = pod["spec"]
        assert isinstance(spec, dict)
        if what == "node":
            pod = _daemon_pod(value, f"p{i}", status)
        elif what in ("labels", "uid", "creationTimestamp"):
            pod = _daemon_pod("n1", f"p{i}", status, **{what: value})
        elif what == "status":
            pod = _daemon_pod("n1", f"p{i}", value)
        elif what != "bytes":
            pod["spec"] = {**spec, what: value}
        payload = wire.pack(pod) if what != "bytes" else wire.pack(pod)[:-1] + bytes(value)
        raw = _created(None, f"{7 + i}-1", payload=payload, name=f"p{i}")
        assert _strictly(_outcome(entry.decode, raw, True, None, siblings)) == \
            _strictly(_outcome(entry.decode, raw))
