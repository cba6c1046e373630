"""The API server's pure rules: tokens and roles, content negotiation, Status causes, the
protobuf bodies kubectl sends, DeleteOptions, and which event a filtered watcher sees."""

from __future__ import annotations

import orjson
import pytest
from multidict import CIMultiDict

from services.apiserver import auth, handlers, listing, protobuf, requests, status
from services.apiserver.status import ApiError
from services.apiserver.watchcache import Event, Feed, Watcher
from shared.store import errors

TOKEN = "0123456789abcdef0123456789"


def test_token_file_lines_name_users_and_roles() -> None:
    users = auth.parse_tokens(f"# comment\n{TOKEN},alice,edit\n\n")
    assert users == {TOKEN: auth.User("alice", "edit")}
    with pytest.raises(auth.TokenFileError, match="unknown role 'root'"):
        auth.parse_tokens(f"{TOKEN},bob,root")
    with pytest.raises(auth.TokenFileError, match="at least 16"):
        auth.parse_tokens("short,bob,view")
    with pytest.raises(auth.TokenFileError, match="want token,user,role"):
        auth.parse_tokens(f"{TOKEN},bob")


def test_roles_view_reads_edit_writes_namespaced_admin_everything() -> None:
    view, edit, admin = (auth.User(r, r) for r in ("view", "edit", "admin"))
    assert auth.authorize(view, "list", "daemonsets", True)
    assert not auth.authorize(view, "create", "daemonsets", True)
    assert not auth.authorize(view, "patch", "nodes", False)
    assert auth.authorize(edit, "patch", "daemonsets", True)
    assert auth.authorize(edit, "create", "pods/eviction", True)
    assert not auth.authorize(edit, "patch", "nodes", False)
    assert not auth.authorize(edit, "update", "daemonsets/status", True)
    assert auth.authorize(admin, "delete", "nodes", False)


def test_negotiate_a_table_only_when_asked_json_for_any_accept_listing_it() -> None:
    kubectl_get = ("application/json;as=Table;v=v1;g=meta.k8s.io,"
                   "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json")
    assert requests.negotiate(kubectl_get) == "table"
    assert requests.negotiate("application/vnd.kubernetes.protobuf, */*") == "json"
    assert requests.negotiate("application/vnd.kubernetes.protobuf,application/json") == "json"
    assert requests.negotiate(None) == "json"
    with pytest.raises(ApiError) as err:
        requests.negotiate("application/vnd.kubernetes.protobuf")
    assert err.value.code == 406


def test_a_field_error_becomes_a_status_cause_with_its_field() -> None:
    c = status.cause('spec.template.metadata.labels: Invalid value: map[string]string{"a":'
                     '"b"}: `selector` does not match template `labels`')
    assert c["field"] == "spec.template.metadata.labels"
    assert c["reason"] == "FieldValueInvalid"
    assert c["message"].startswith("Invalid value: ")
    assert status.cause("spec.selector: Required value")["reason"] == "FieldValueRequired"


def _field(number: int, value: bytes | int) -> bytes:
    def varint(n: int) -> bytes:
        out = b""
        while True:
            b, n = n & 0x7F, n >> 7
            out += bytes([b | (0x80 if n else 0)])
            if not n:
                return out
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    return varint(number << 3 | 2) + varint(len(value)) + value


def test_protobuf_access_review_and_eviction_decode_to_their_json_shape() -> None:
    attrs = _field(1, b"kube-system") + _field(2, b"create") + _field(3, b"apps") + \
        _field(5, b"daemonsets")
    review = _field(2, _field(1, attrs))
    body = protobuf.MAGIC + _field(1, _field(1, b"authorization.k8s.io/v1") +
                                   _field(2, b"SelfSubjectAccessReview")) + _field(2, review)
    doc = protobuf.decode(body)
    assert doc["kind"] == "SelfSubjectAccessReview"
    assert doc["spec"]["resourceAttributes"] == {"namespace": "kube-system", "verb": "create",
                                                 "group": "apps", "resource": "daemonsets"}
    evict = _field(1, _field(1, b"p1") + _field(3, b"default")) + _field(2, _field(1, 0))
    body = protobuf.MAGIC + _field(1, _field(1, b"policy/v1") + _field(2, b"Eviction")) + \
        _field(2, evict)
    doc = protobuf.decode(body)
    assert doc["metadata"] == {"name": "p1", "namespace": "default"}
    assert doc["deleteOptions"] == {"gracePeriodSeconds": 0}
    options = _field(1, 30) + _field(2, _field(1, b"u-1")) + _field(4, b"Foreground")
    body = protobuf.MAGIC + _field(1, _field(1, b"meta.k8s.io/v1") +
                                   _field(2, b"DeleteOptions")) + _field(2, options)
    assert protobuf.decode(body) == {
        "apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions", "gracePeriodSeconds": 30,
        "preconditions": {"uid": "u-1"}, "propagationPolicy": "Foreground"}
    body = protobuf.MAGIC + _field(1, _field(1, b"authentication.k8s.io/v1") +
                                   _field(2, b"SelfSubjectReview")) + _field(2, _field(1, b""))
    assert protobuf.decode(body) == {"apiVersion": "authentication.k8s.io/v1",
                                     "kind": "SelfSubjectReview", "metadata": {}}
    with pytest.raises(protobuf.ProtobufError):
        protobuf.decode(b"not protobuf")


def test_protobuf_namespace_decodes_its_name_labels_and_finalizers_not_empty_strings() -> None:
    md = _field(1, b"team") + _field(2, b"") + _field(3, b"") + \
        _field(11, _field(1, b"owner") + _field(2, b"me"))
    body = protobuf.MAGIC + _field(1, _field(1, b"v1") + _field(2, b"Namespace")) + \
        _field(2, _field(1, md) + _field(2, _field(1, b"kubernetes")) + _field(3, b""))
    assert protobuf.decode(body) == {"apiVersion": "v1", "kind": "Namespace",
                                     "metadata": {"name": "team", "labels": {"owner": "me"}},
                                     "spec": {"finalizers": ["kubernetes"]}}


def _ev(etype: str, labels: dict[str, str], prev: dict[str, str] | None,
        eid: str = "5-0") -> Event:
    obj = {"kind": "Pod", "metadata": {"name": "p", "labels": labels}}
    before = {"kind": "Pod", "metadata": {"name": "p", "labels": prev}} if prev is not None \
        else None
    return Event(eid, etype, "Pod", "/p", obj, before)


def _encode(etype: str, obj: dict[str, object]) -> bytes:
    return orjson.dumps({"type": etype, "object": obj}) + b"\n"


def _types(w: Watcher) -> list[str]:
    """The event types buffered for ``w`` (each encoded event is a JSON line)."""
    return [orjson.loads(line)["type"] for line in w.take().splitlines()]


def test_a_filtered_watcher_sees_objects_enter_and_leave_its_selection() -> None:
    feed = Feed("f", "Pod", lambda o: o["metadata"]["labels"].get("app") == "x", _encode)
    w = Watcher(feed, after="1-0")
    feed.watchers.add(w)
    feed.fan_out([_ev("ADDED", {"app": "x"}, None, eid="1-0"),  # not after the start position
                  _ev("MODIFIED", {"app": "x"}, {"app": "y"}, eid="2-0"),  # enters
                  _ev("MODIFIED", {"app": "x", "b": "1"}, {"app": "x"}, eid="3-0"),  # stays
                  _ev("MODIFIED", {"app": "y"}, {"app": "x"}, eid="4-0"),  # leaves
                  _ev("MODIFIED", {"app": "z"}, {"app": "y"}, eid="5-0")])  # never selected
    assert _types(w) == ["ADDED", "MODIFIED", "DELETED"]


def test_watchers_of_one_feed_share_the_encoding_of_each_event() -> None:
    encoded: list[str] = []

    def encode(etype: str, obj: dict[str, object]) -> bytes:
        encoded.append(etype)
        return _encode(etype, obj)

    feed = Feed("f", "Pod", lambda o: True, encode)
    watchers = [Watcher(feed, after="1-0") for _ in range(3)]
    feed.watchers.update(watchers)
    feed.fan_out([_ev("ADDED", {}, None, eid="2-0"), _ev("MODIFIED", {}, {}, eid="3-0")])
    assert encoded == ["ADDED", "MODIFIED"]  # once per event, not per watcher
    assert [_types(w) for w in watchers] == [["ADDED", "MODIFIED"]] * 3


def test_a_watcher_whose_buffer_is_full_is_dropped_not_grown() -> None:
    feed = Feed("f", "Pod", lambda o: True, _encode)
    w = Watcher(feed, after="0-0", limit=2)
    feed.watchers.add(w)
    for i in range(5):
        feed.fan_out([_ev("ADDED", {}, None, eid=f"{i + 1}-0")])
    assert w.dropped.startswith("too slow")
    assert w.count == 0 and not w.pending and w.take() == b""
    assert w.ready.is_set()  # its stream wakes up to end


def test_store_errors_become_the_status_upstream_answers() -> None:
    big = status.from_store(errors.TooLargeError("Event", "ns/e", 2_000_000, 1_572_864))
    assert (big.code, big.status["reason"]) == (413, "RequestEntityTooLarge")
    assert big.status["message"].startswith("Request entity too large: etcdserver: request "
                                            "is too large")
    refused = status.from_store(errors.ForbiddenError("Pod", "ns/p", "node-agent", "not its"))
    assert (refused.code, refused.status["reason"]) == (403, "Forbidden")
    assert status.from_store(errors.BadRequestError("cannot decode")).code == 400
    corrupt = status.from_store(errors.MalformedObjectError(
        "DaemonSet", "ns/x", ["status.conditions: Invalid value: \"x\": must be of type array"]))
    assert (corrupt.code, corrupt.status["reason"]) == (500, "InternalError")
    assert corrupt.status["details"]["name"] == "x"
    assert "has the wrong shape" in corrupt.status["details"]["causes"][0]["message"]


def test_a_negative_grace_period_is_passed_on_to_the_deletion_not_refused() -> None:
    """ValidateDeleteOptions has no rule for gracePeriodSeconds; BeforeDelete takes a negative
    one as 1 s (the deletion's rule, ``writes.graceful_delete``)."""
    opts = handlers.delete_options({"gracePeriodSeconds": "-5"}, None)
    assert opts == {"gracePeriodSeconds": -5}
    assert handlers.deletion(opts) == (None, -5)
    assert handlers.deletion({"gracePeriodSeconds": -1, "propagationPolicy": "Orphan"}) == \
        ("orphan", -1)
    with pytest.raises(ApiError, match="gracePeriodSeconds: must be an integer") as bad:
        handlers.deletion({"gracePeriodSeconds": "5"})
    assert bad.value.code == 400


def test_delete_options_name_the_policy_asked_for_or_none() -> None:
    assert handlers.deletion({}) == (None, None)
    assert handlers.deletion({"orphanDependents": True}) == ("orphan", None)
    assert handlers.deletion({"orphanDependents": False}) == ("background", None)
    assert handlers.deletion({"propagationPolicy": "Foreground",
                              "gracePeriodSeconds": 0}) == ("foreground", 0)


@pytest.mark.parametrize(("opts", "problem"), [
    ({"propagationPolicy": "Later"}, 'propagationPolicy: Unsupported value: "Later": supported '
                                     'values: "Foreground", "Background", "Orphan", "nil"'),
    ({"orphanDependents": False, "propagationPolicy": "Background"},
     'propagationPolicy: Invalid value: "Background": orphanDependents and deletionPropagation '
     'cannot be both set'),
])
def test_delete_options_upstream_refuses_are_its_422(opts: dict[str, object], problem: str) -> None:
    with pytest.raises(ApiError) as refused:
        handlers.deletion(opts)
    assert (refused.value.code, refused.value.status["reason"]) == (422, "Invalid")
    assert refused.value.status["message"] == f'DeleteOptions.meta.k8s.io "" is invalid: {problem}'
    field, body = problem.split(": ", 1)
    reason = "FieldValueNotSupported" if "Unsupported" in body else "FieldValueInvalid"
    assert refused.value.status["details"]["causes"] == [
        {"reason": reason, "field": field, "message": body}]


@pytest.mark.parametrize(("options", "query", "body"), [
    ("CreateOptions", {"dryRun": "Bogus"}, None),
    ("PatchOptions", {"dryRun": "all"}, None),
    ("DeleteOptions", {}, {"dryRun": ["All", "Bogus"]}),
])
def test_a_dry_run_but_all_is_upstreams_422_naming_the_writes_options(
        options: str, query: dict[str, str], body: dict[str, object] | None) -> None:
    with pytest.raises(ApiError) as bad:
        requests.dry_run(query, body, options)
    values = [query["dryRun"]] if query else ["All", "Bogus"]
    listed = ", ".join(f'"{v}"' for v in values)
    assert (bad.value.code, bad.value.status["reason"]) == (422, "Invalid")
    assert bad.value.status["message"] == (
        f'{options}.meta.k8s.io "" is invalid: dryRun: Unsupported value: '
        f'[]string{{{listed}}}: supported values: "All"')
    assert bad.value.status["details"]["causes"][0]["reason"] == "FieldValueNotSupported"
    assert requests.dry_run({"dryRun": "All"}) is True
    assert requests.dry_run({}) is False


def test_an_access_review_list_names_each_grant() -> None:
    edit = auth.User("e", "edit")
    assert auth.authorize(edit, "get", "*", True)  # a read rule covers every resource
    assert not auth.authorize(edit, "*", "daemonsets", True)  # no rule for every verb
    assert auth.authorize(auth.User("a", "admin"), "*", "*", False)
    assert auth.may_get_url(auth.User("v", "view"), "get", "/metrics")
    assert not auth.may_get_url(auth.User("v", "view"), "post", "/api")
    assert auth.may_get_url(auth.User("a", "admin"), "post", "/anything")


def test_the_view_at_a_position_undoes_the_events_after_it() -> None:
    def ev(id_: str, etype: str, key: str, obj: dict[str, object],
           prev: dict[str, object] | None) -> Event:
        return Event(id_, etype, "Event", key, obj, prev)

    a1, a2, b1 = {"v": "a1"}, {"v": "a2"}, {"v": "b1"}
    events = [ev("5-0", "ADDED", "ns/a", a1, None), ev("6-0", "MODIFIED", "ns/a", a2, a1),
              ev("7-0", "ADDED", "ns/b", b1, None), ev("8-0", "DELETED", "ns/a", a2, a2),
              Event("8-1", "ADDED", "Pod", "ns/p", {}, None)]
    now = {"ns/b": b1}  # after every event
    assert listing.view_at(now, events, "Event", "8-1") == {"ns/b": b1}
    assert listing.view_at(now, events, "Event", "7-0") == {"ns/a": a2, "ns/b": b1}
    assert listing.view_at(now, events, "Event", "6-0") == {"ns/a": a2}
    assert listing.view_at(now, events, "Event", "5-0") == {"ns/a": a1}
    assert listing.view_at(now, events, "Event", "4-0") == {}
    start, rv = listing.decode_token(listing.token(("ns", "a"), "6-0"))
    assert (start, rv) == (("ns", "a"), "6-0")
    with pytest.raises(ApiError, match="continue key is not valid"):
        listing.decode_token(listing.token(("ns", "a"), "not-a-position"))


def test_impersonation_is_an_admins_and_takes_the_named_users_role() -> None:
    users = [auth.User("admin", "admin"), auth.User("ed", "edit")]
    admin, ed = users
    assert auth.impersonate(admin, {}, users) is admin
    assert auth.impersonate(admin, {"Impersonate-User": "ed"}, users) == ed
    stranger = auth.impersonate(admin, {"Impersonate-User": "stranger"}, users)
    assert stranger == auth.User("stranger", auth.NO_ROLE, ("system:authenticated",))
    assert not auth.authorize(stranger, "list", "pods", True)
    assert auth.may_get_url(stranger, "get", "/apis/apps")  # discovery, as every user's
    assert not auth.may_get_url(stranger, "get", "/metrics")  # no role: a binding's
    with pytest.raises(auth.ImpersonationError, match='User "ed" cannot impersonate'):
        auth.impersonate(ed, {"Impersonate-User": "admin"}, users)
    for header in ("Impersonate-Uid", "Impersonate-Extra-Scopes"):
        with pytest.raises(auth.ImpersonationError):  # refused, never ignored
            auth.impersonate(admin, {"Impersonate-User": "ed", header: "x"}, users)
        with pytest.raises(auth.ImpersonationError):
            auth.impersonate(admin, {header: "x"}, users)
    with pytest.raises(auth.ImpersonationError, match="needs a user's name"):
        auth.impersonate(admin, {"Impersonate-Group": "ops"}, users)
    with pytest.raises(auth.ImpersonationError):
        auth.impersonate(admin, {"Impersonate-User": ""}, users)


def test_an_impersonated_user_is_in_the_groups_named_else_its_own() -> None:
    admin = auth.User("admin", "admin")
    sa = auth.impersonate(admin, {"Impersonate-User": "system:serviceaccount:logs:fluentd"},
                          [admin])
    assert sa.role == auth.NO_ROLE and sa.groups == (
        "system:serviceaccounts", "system:serviceaccounts:logs", "system:authenticated")
    headers = CIMultiDict([("Impersonate-User", "sam"), ("Impersonate-Group", "ops"),
                           ("Impersonate-Group", "dev")])  # --as-group twice
    assert auth.impersonate(admin, headers, [admin]).groups == (
        "ops", "dev", "system:authenticated")
