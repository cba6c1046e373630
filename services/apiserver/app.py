"""The HTTP application: routing, authentication and authorization, content negotiation,
errors as Status, and the server's start (plain HTTP on loopback, TLS otherwise). Acts.

Every request is authenticated (bearer token) and authorized (role) before anything else;
store calls run in a thread pool (the store is synchronous), watches on the event loop from
the watch cache.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson
import prometheus_client
from aiohttp import web

from services.apiserver import (
    auth,
    discovery,
    fleet,
    handlers,
    health,
    leases,
    listing,
    metricsapi,
    openapi,
    podexec,
    podlog,
    podportforward,
    podproxy,
    protobuf,
    requests,
    satokens,
    tables,
    watch,
    watchcache,
)
from services.apiserver import status as st
from services.apiserver.requests import Target
from services.apiserver.watchcache import WatchCache
from shared import settings
from shared.api import decode, namespaces, rbac, served
from shared.api import patch as api_patch
from shared.model import kinds, meta
from shared.store import codec, errors
from shared.store.client import Store

log = logging.getLogger(__name__)

Obj = dict[str, Any]
T = TypeVar("T")

LIST_CATCH_UP_SECONDS = settings.current.list_catch_up_seconds  # then a list reads Redis
MAX_BODY = decode.MAX_DOCUMENT_BYTES  # upstream's limit on a request body (3 MiB)
UNAUTHENTICATED_PATHS = frozenset(f"/{endpoint}" for endpoint in health.ENDPOINTS)
USER_KEY = "daemonbus.user"  # the request's authenticated auth.User
VERB_KEY = "daemonbus.verb"  # and its verb and resource, for the metrics
RESOURCE_KEY = "daemonbus.resource"
STATE_KEY: web.AppKey[State] = web.AppKey("state")


@dataclass
class State:
    store: Store
    cache: WatchCache
    tokens: auth.TokenFile
    issuer: satokens.Issuer
    pool: ThreadPoolExecutor
    server_address: str

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, functools.partial(fn, *args))

    def decide(self, user: auth.User, req: rbac.Request, namespaced: bool) -> str | None:
        """Why ``user`` may make ``req`` (``auth.decide``, with the RBAC objects of the watch
        cache); None: it may not."""
        return auth.decide(user, req, namespaced, self.cache.objects)

    def namespace(self, name: str) -> Obj | None:
        """The Namespace ``name`` as served (None: there is none)."""
        return self.cache.namespaces.served(name)

    def implicit(self, t: Target) -> Obj | None:
        """For a namespace without an object, the Namespace ``t`` names as served (its
        writes create the object; not those of its subresources); else None."""
        if t.kind != kinds.NAMESPACE.kind or t.name is None or t.sub is not None:
            return None
        ns = self.namespace(t.name)
        return None if ns is None or namespaces.has_object(ns) else ns


def respond(doc: Obj, code: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=orjson.dumps(doc), status=code,
                        content_type="application/json", headers=headers)


async def respond_in_pieces(request: web.Request, doc: Obj) -> web.StreamResponse:
    """``respond`` for a body that may be large (a list): written in pieces of
    ``watchcache.WRITE_BYTES``, as the watch feeds write, rather than as one write of
    megabytes (the LIST of 5,000 pods as JSON, 11.6 MB: p50 55-58 ms against 68 ms)."""
    body = orjson.dumps(doc)
    if len(body) <= watchcache.WRITE_BYTES:
        return web.Response(body=body, content_type="application/json")
    resp = web.StreamResponse(headers={"Content-Type": "application/json"})
    resp.content_length = len(body)
    await resp.prepare(request)
    view = memoryview(body)
    for at in range(0, len(body), watchcache.WRITE_BYTES):
        await resp.write(view[at:at + watchcache.WRITE_BYTES])
    await resp.write_eof()
    return resp


REQUESTS = prometheus_client.Counter(
    "apiserver_request_total", "API requests by verb, resource and HTTP code.",
    ["verb", "resource", "code"])
LATENCY = prometheus_client.Histogram(
    "apiserver_request_duration_seconds", "API request latency (watches: until the stream "
    "starts).", ["verb", "resource"])
WATCHERS = prometheus_client.Gauge("apiserver_watchers", "Open watches of this API server.")


@web.middleware
async def metrics_middleware(request: web.Request,
                             handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
                             ) -> web.StreamResponse:
    started = time.perf_counter()
    resp = await handler(request)
    verb = str(request.get(VERB_KEY, request.method.lower()))
    resource = str(request.get(RESOURCE_KEY, ""))
    REQUESTS.labels(verb, resource, str(resp.status)).inc()
    LATENCY.labels(verb, resource).observe(time.perf_counter() - started)
    WATCHERS.set(len(request.app[STATE_KEY].cache.watchers))
    return resp


@web.middleware
async def errors_middleware(request: web.Request,
                            handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
                            ) -> web.StreamResponse:
    try:
        return await handler(request)
    except st.ApiError as err:
        return respond(err.status, err.code)
    except web.HTTPRequestEntityTooLarge:
        doc = st.status("RequestEntityTooLarge", "Request entity too large: limit is "
                        f"{MAX_BODY}", 413)
        return respond(doc, 413)
    except web.HTTPException as err:
        if err.status in (404, 405):  # no route: a Status too, as upstream answers
            reason = "NotFound" if err.status == 404 else "MethodNotAllowed"
            return respond(st.status(reason, st.NO_SUCH_PATH, err.status, {}), err.status)
        raise
    except Exception as err:  # the one place errors become a 500 Status
        log.exception("internal error on %s %s", request.method, request.path)
        return respond(st.status("InternalError", f"Internal error occurred: {err}", 500), 500)


@web.middleware
async def auth_middleware(request: web.Request,
                          handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
                          ) -> web.StreamResponse:
    if request.path in UNAUTHENTICATED_PATHS or fleet.is_public(request.path):
        return await handler(request)
    state = request.app[STATE_KEY]
    header = request.headers.get("Authorization")
    user = state.tokens.authenticate(header) or \
        state.issuer.authenticate(header, state.cache.objects)
    if user is None:
        raise st.ApiError("Unauthorized", "Unauthorized")
    try:
        user = auth.impersonate(user, request.headers, state.tokens.users.values())
    except auth.ImpersonationError as err:
        raise st.ApiError("Forbidden", str(err)) from err
    request[USER_KEY] = user
    return await handler(request)


def _user(request: web.Request) -> auth.User:
    user = request[USER_KEY]
    assert isinstance(user, auth.User)
    return user


async def _body(request: web.Request, fields: handlers.FieldCheck | None = None) -> Any:
    """The decoded body (JSON under the input bounds of ``shared.api.decode``, or the
    protobuf kubectl sends for a few kinds); duplicate keys go to ``fields`` (a 400 under
    Strict, warnings under Warn)."""
    raw = await request.read()
    if not raw:
        return None
    ctype = request.content_type
    if ctype == protobuf.MEDIA_TYPE:
        try:
            return protobuf.decode(raw)
        except protobuf.ProtobufError as err:
            raise st.ApiError("UnsupportedMediaType", f"the body of the request could not "
                              f"be decoded as protobuf: {err}") from err
    if ctype not in (requests.JSON, "", "application/octet-stream") \
            and ctype not in api_patch.PATCH_TYPES:
        raise st.ApiError("UnsupportedMediaType", f'the body of the request was in an '
                          f'unknown format - accepted media types include: application/json, '
                          f'not "{ctype}"')
    try:
        body = decode.json_body(raw)
    except decode.DecodeError as err:
        raise st.bad_request(f"the body of the request could not be decoded as JSON: "
                             f"{err}") from err
    (fields or handlers.FieldCheck()).duplicated(body.duplicates)
    return body.value


# ---- discovery and OpenAPI ------------------------------------------------------------------


async def version(_request: web.Request) -> web.Response:
    return respond(discovery.SERVER_VERSION)


async def openid_configuration(_request: web.Request) -> web.Response:
    return respond(satokens.openid_configuration())


async def jwks(request: web.Request) -> web.Response:
    return web.Response(body=orjson.dumps(satokens.jwks(request.app[STATE_KEY].issuer)),
                        content_type="application/jwk-set+json")


def _cache(request: web.Request) -> WatchCache:
    return request.app[STATE_KEY].cache


async def metrics(request: web.Request) -> web.Response:
    """``/metrics``: this server's Prometheus metrics, as ``kubectl get --raw /metrics``
    reads upstream's, for those allowed (``auth.may_get_url``, or a binding)."""
    user = _user(request)
    if request.app[STATE_KEY].decide(user, rbac.Request("get", path=request.path),
                                     False) is None:
        raise st.ApiError("Forbidden", f'forbidden: User "{user.name}" cannot get path '
                          f'"{request.path}"', {})
    return web.Response(body=prometheus_client.generate_latest(),
                        headers={"Content-Type": prometheus_client.CONTENT_TYPE_LATEST})


async def api_root(request: web.Request) -> web.Response:
    return respond(discovery.api_versions(request.app[STATE_KEY].server_address))


async def root(request: web.Request) -> web.Response:
    fixed = {r.canonical for r in request.app.router.resources()  # not "/version/"
             if "{" not in r.canonical and not r.canonical.endswith("/")}
    return respond(discovery.root_paths(fixed))


async def apis_root(_request: web.Request) -> web.Response:
    return respond(discovery.api_group_list())


async def api_group(request: web.Request) -> web.Response:
    doc = discovery.api_group(request.match_info["group"])
    if doc is None:
        raise st.no_such_path()
    return respond(doc)


async def openapi_doc(request: web.Request) -> web.Response:
    doc = openapi.document(request.match_info.get("path", ""))
    if doc is None:
        raise st.no_such_path()
    return respond(doc)


async def openapi_v2(request: web.Request) -> web.Response:
    """The OpenAPI v2 document, as protobuf when asked (kubectl asks for nothing else), else
    as JSON."""
    if openapi.wants_protobuf(request.headers.get("Accept", "")):
        return web.Response(body=openapi.v2_protobuf(), content_type=openapi.V2_PROTOBUF)
    return respond(openapi.v2_document())


# ---- resources ----------------------------------------------------------------------------


async def core(request: web.Request) -> web.StreamResponse:
    return await _resource(request, "v1", request.match_info["rest"])


async def grouped(request: web.Request) -> web.StreamResponse:
    gv = f"{request.match_info['group']}/{request.match_info['version']}"
    return await _resource(request, gv, request.match_info["rest"])


async def _resource(request: web.Request, gv: str, rest: str) -> web.StreamResponse:
    state = request.app[STATE_KEY]
    parts = [p for p in rest.split("/") if p]
    if not parts:
        resources = discovery.resource_list(gv)
        if resources is None:
            raise st.no_such_path()
        return respond(resources)
    if gv in discovery.REVIEWS:
        return await _review(request, gv, parts)
    t = requests.parse_path(gv, parts)
    verb = requests.verb(request.method, t, request.query)
    request[VERB_KEY], request[RESOURCE_KEY] = verb, t.resource_name
    user = _user(request)
    info = t.resource.info
    if state.decide(user, rbac.Request(verb, info.group, info.plural, t.sub or "",
                                       t.namespace or "", t.name or ""),
                    info.namespaced) is None:
        raise st.denied(user.name, verb, info, t.namespace, t.name, t.sub)
    # a namespaced kind across all namespaces (``/api/v1/pods``) is read-only, as upstream's:
    # a write or a collection delete there is 405, never every namespace's at once
    if verb not in (t.resource.verbs if t.sub is None else t.sub_verbs) or (
            t.namespace is None and t.resource.info.namespaced
            and verb not in served.READ_VERBS):
        raise handlers.not_allowed(t, verb)
    fmt = requests.negotiate(request.headers.get("Accept"))
    store = state.store.as_writer(user.name)
    q = request.query
    if verb == "watch":
        if not q.get("resourceVersion"):  # "most recent": a consistent read, as a list's
            await _caught_up(state, store, q)
        return await watch.serve(request, t, state.cache,
                                 lambda obj, _e: tables.render_one(t, obj, fmt, q),
                                 f"{fmt}:{q.get('includeObject', '')}",
                                 tables.watch_mark(fmt))
    if t.kind == kinds.LEASE.kind:  # get and list: read from the leases' keys
        return await _leases(request, state, store, t, fmt)
    if metricsapi.serves(t):  # asked of the node agents
        return respond(_usage_table(t, await metricsapi.serve(state, t, q), fmt, q))
    if verb == "get":
        if t.kind == kinds.NAMESPACE.kind:  # from the cache: as new as the log's tip
            await _caught_up(state, store, q)
        obj = await state.run(handlers.get, store, t, state.namespace)
        return respond(tables.render_one(t, obj, fmt, q))
    if verb == "list":
        if problems := listing.option_problems(q):
            raise st.options_invalid("ListOptions", problems)
        tip, items = await _list(state, store, t, q)
        return await respond_in_pieces(request, tables.render_list(t, tip, items, fmt, q))
    fields = handlers.FieldCheck.of(q)
    code, doc = await _write(request, state, store, t, verb, fields)
    headers = {"Warning": ", ".join('299 - "' + w.replace('"', '\\"') + '"'
                                    for w in fields.warnings)} if fields.warnings else None
    return respond(doc, code, headers)


async def _leases(request: web.Request, state: State, store: Store, t: Target,
                  fmt: str) -> web.StreamResponse:
    """A node's Lease, or the Leases a list selects (``services.apiserver.leases``): the
    nodes from the watch cache, their renew times read from Redis now."""
    q = request.query
    nodes = leases.nodes_for(t.namespace, t.name, state.cache.objects.get("Node", {}))
    found = await state.run(leases.read, store, nodes)
    if t.name is not None:
        if not found:
            raise st.not_found(t.kind, t.name)
        return respond(tables.render_one(t, found[0], fmt, q))
    match = listing.matcher(t, q)
    items = [o for o in found if match(o)]
    return respond(tables.render_list(t, state.cache.position, items, fmt, q))


def _usage_table(t: Target, doc: Obj, fmt: str, q: Mapping[str, str]) -> Obj:
    """Metrics as asked: a Table (metrics-server's columns) or as they are."""
    if fmt != "table":
        return doc
    items = doc["items"] if doc["kind"].endswith("List") else [doc]
    return tables.render_list(t, "", items, fmt, q)


async def _list(state: State, store: Store, t: Target,
                q: Mapping[str, str]) -> tuple[str, list[Obj]]:
    """A list, consistent as upstream's reads from its watch cache: the log tip is read
    now, and once the cache has folded the log in through it, the cache's objects are the
    view at its position (no bulk read of Redis per list). ``resourceVersion=0`` (any)
    takes the cache as it is. A cache that does not catch up in time: the view in Redis."""
    if t.kind != kinds.NAMESPACE.kind and q.get("continue"):
        continued = await _continued(state, t, q)
        if continued is not None:
            return continued
    rv = q.get("resourceVersion", "")
    if listing.is_position(rv):
        await _reached(state, rv)
        if q.get("resourceVersionMatch") == listing.EXACT:
            return _exact(state, t, q, rv)
    caught_up = await _caught_up(state, store, q)
    if caught_up or t.kind == kinds.NAMESPACE.kind:  # Namespaces are the cache's alone
        match = listing.matcher(t, q)
        return state.cache.position, handlers.listed(state.cache.current(t.kind, match))
    return await state.run(handlers.list_objects, store, t, q)


async def _caught_up(state: State, store: Store, q: Mapping[str, str]) -> bool:
    """Whether the watch cache has folded the log in through its tip read now (any position
    for ``resourceVersion=0``) within ``LIST_CATCH_UP_SECONDS``."""
    tip = "0-0" if q.get("resourceVersion") == "0" else \
        await state.run(handlers.log_tip, store)
    try:
        return await state.cache.wait_for(tip, LIST_CATCH_UP_SECONDS)
    except TimeoutError:
        return False


async def _reached(state: State, rv: str) -> None:
    """Wait until the watch cache has folded the log in through ``rv``; raises ApiError
    504 (upstream's "Too large resource version") when it does not in time."""
    try:
        caught_up = await state.cache.wait_for(rv, LIST_CATCH_UP_SECONDS)
    except TimeoutError:
        caught_up = False
    if not caught_up:
        raise st.ApiError("Timeout", f"Too large resource version: {rv}, current: "
                          f"{state.cache.position}", {"retryAfterSeconds": 1})


def _exact(state: State, t: Target, q: Mapping[str, str], rv: str) -> tuple[str, list[Obj]]:
    """A list at exactly position ``rv`` (``resourceVersionMatch=Exact``; the cache has
    reached it): the cache's objects with the events after ``rv`` undone, as a continued
    page is; 410 Expired once ``rv`` left the cache's window. Namespaces, which are served
    with and without objects, only at the cache's own position."""
    cache = state.cache
    if codec.id_tuple(rv) < codec.id_tuple(cache.oldest) or (
            t.kind == kinds.NAMESPACE.kind and rv != cache.position):
        raise st.ApiError("Expired", f"too old resource version: {rv} ({cache.oldest})")
    if t.kind == kinds.NAMESPACE.kind:
        return rv, handlers.listed(cache.current(t.kind, listing.matcher(t, q)))
    return rv, _view_at(state, t, q, rv)


def _view_at(state: State, t: Target, q: Mapping[str, str], rv: str) -> list[Obj]:
    """The objects of ``t`` the query selects as they were at ``rv`` (in the cache's
    window, which the caller checked): ``listing.view_at``, listed."""
    match = listing.matcher(t, q)
    cache = state.cache
    objs = listing.view_at(cache.objects.get(t.kind, {}), cache.events, t.kind, rv)
    return handlers.listed([o for o in objs.values() if match(o)])


async def _continued(state: State, t: Target,
                     q: Mapping[str, str]) -> tuple[str, list[Obj]] | None:
    """A later page of a list, at the first page's position (``listing.view_at``); None
    for a token that continues from the present view. Raises ApiError: 410 Expired (with
    a fresh token) when the position left the cache's window, 504 when this server's
    cache does not reach it in time (a first page served by a replica ahead of it)."""
    if q.get("resourceVersion"):
        raise st.bad_request("specifying resource version is not allowed when using "
                             "continue")
    start, rv = listing.decode_token(q["continue"])
    if rv == listing.LATEST:
        return None
    await _reached(state, rv)
    cache = state.cache
    if codec.id_tuple(rv) < codec.id_tuple(cache.oldest):
        err = st.ApiError("Expired", listing.INCONSISTENT_CONTINUE)
        err.status["metadata"]["continue"] = listing.token(start, listing.LATEST)
        raise err
    return rv, _view_at(state, t, q, rv)


async def _write(request: web.Request, state: State, store: Store, t: Target,
                 verb: str, fields: handlers.FieldCheck) -> tuple[int, Obj]:
    q = request.query
    who = handlers.Manager.of(q, request.headers.get("User-Agent"), verb,
                              request.content_type if verb == "patch" else None)
    if verb == "patch":
        raw = await request.read()
        if request.content_type not in api_patch.PATCH_TYPES:
            raise st.ApiError("UnsupportedMediaType", f'the body of the request was in an '
                              f'unknown format - accepted media types include: '
                              f'{", ".join(api_patch.PATCH_TYPES)}')
        try:
            decoded = api_patch.decode_body(raw, request.content_type)
        except api_patch.PatchError as err:
            raise handlers.patch_error(err) from err
        fields.duplicated(decoded.duplicates)
        return await state.run(handlers.patch, store, t, decoded.value, request.content_type,
                               requests.dry_run(q, None, "PatchOptions"), fields, who,
                               state.implicit(t))
    body = await _body(request, fields)
    dry = requests.dry_run(q, body if isinstance(body, dict) else None,
                           {"create": "CreateOptions", "update": "UpdateOptions"}.get(
                               verb, "DeleteOptions"))
    if verb == "create":
        if t.sub == "eviction":
            return await state.run(handlers.evict, store, t, body, dry)
        if t.sub == "token":  # a TokenRequest: nothing is written; read as a list reads
            assert t.namespace is not None and t.name is not None
            await _caught_up(state, store, {})
            return 201, state.issuer.answer(t.namespace, t.name, body, state.cache.objects)
        if t.name is not None:
            raise st.ApiError("MethodNotAllowed", "POST is not supported on an object")
        md = body.get("metadata") if isinstance(body, dict) else None
        name = str(md.get("name") or "") if isinstance(md, dict) else ""
        if t.kind == kinds.NAMESPACE.kind and name and state.namespace(name) is not None:
            # one without an object exists all the same
            raise st.from_store(errors.AlreadyExistsError(t.kind, "/" + name))
        return await state.run(handlers.create, store, t, body, dry, fields, who)
    if verb == "update":
        return await state.run(handlers.update, store, t, body, dry, fields, who,
                               state.implicit(t))
    opts = handlers.delete_options(q, body if isinstance(body, dict) else None)
    if verb == "delete":
        return await state.run(handlers.delete, store, t, opts, dry, state.implicit(t))
    return await state.run(handlers.delete_collection, store, t, q, opts, dry)


async def _review(request: web.Request, gv: str, parts: list[str]) -> web.Response:
    """The reviews, answered from the token file and its role table (``auth.RULES``), the
    ServiceAccount tokens' issuer and the store's RBAC bindings. Any user may post those
    of itself: SelfSubjectAccessReview (may the caller do what it asks about? ``kubectl
    auth can-i``), SelfSubjectRulesReview (what may it do? ``kubectl auth can-i --list``)
    and SelfSubjectReview (who is it? ``kubectl auth whoami``); a user granted their
    ``create``, those of others: TokenReview (who is this token?) and SubjectAccessReview
    (may this user do this?), as a proxy in front of a service asks (kube-rbac-proxy,
    Vault)."""
    by_plural = dict(discovery.REVIEWS[gv])
    if len(parts) != 1 or parts[0] not in by_plural:
        raise st.no_such_path()
    if request.method != "POST":
        raise st.ApiError("MethodNotAllowed", f"the server does not allow this method on "
                          f"the requested resource ({request.method.lower()} {parts[0]})")
    kind, user, state = by_plural[parts[0]], _user(request), request.app[STATE_KEY]
    group = gv.partition("/")[0]
    if parts[0] not in discovery.SELF and \
            state.decide(user, rbac.Request("create", group, parts[0]), False) is None:
        raise st.ApiError("Forbidden", f'{parts[0]}.{group} is forbidden: User "{user.name}" '
                          f'cannot create resource "{parts[0]}" in API group "{group}" at '
                          "the cluster scope", {"group": group, "kind": parts[0]})
    body = await _body(request)
    if not isinstance(body, dict) or body.get("kind", kind) != kind:
        raise st.bad_request(f"the body must be a {kind}")
    spec = body.get("spec") or {}
    if not isinstance(spec, dict):
        raise st.bad_request(f"spec: Invalid value: the spec of a {kind} must be an object")
    body["status"] = _ANSWERS[kind](state, user, spec)
    body["apiVersion"], body["kind"] = gv, kind
    return respond(body, 201)


def _whoami(_state: State, user: auth.User, _spec: Obj) -> Obj:
    """The caller as the authenticator saw it (its groups: every authenticated user's, a
    ServiceAccount's, or those impersonated), its role as an extra attribute (none: an
    impersonated user the token file does not name)."""
    return {"userInfo": {"username": user.name, "groups": list(user.groups),
                         "extra": {"daemonbus.io/role": [user.role]} if user.role else {}}}


def _may(state: State, user: auth.User, spec: Obj) -> Obj:
    attrs = spec.get("resourceAttributes")
    if isinstance(attrs, dict):
        resource, group = str(attrs.get("resource") or ""), str(attrs.get("group") or "")
        found = discovery.resource(discovery.group_version(group), resource)
        req = rbac.Request(str(attrs.get("verb") or ""), group, resource,
                           str(attrs.get("subresource") or ""),
                           str(attrs.get("namespace") or ""), str(attrs.get("name") or ""))
        namespaced = found.info.namespaced if found else bool(req.namespace)
    else:
        urls = spec.get("nonResourceAttributes") or {}
        req = rbac.Request(str(urls.get("verb") or "get"), path=str(urls.get("path") or ""))
        namespaced = False
    reason = state.decide(user, req, namespaced)
    # a denial gives no reason, as upstream's RBAC (kubectl prints a reason after "no")
    return {"allowed": True, "reason": reason} if reason is not None else {"allowed": False}


def _rules(state: State, user: auth.User, spec: Obj) -> Obj:
    """The caller's rules in ``spec.namespace`` as upstream's rule resolver lists them:
    its role's, one resource rule per grant and API group, then those of the bindings that
    name it (their roles' rules as they are), the access reviews every user may post, and
    the non-resource URLs."""
    resource_rules = auth.policy_rules(auth.RULES.get(user.role, ()))
    urls = auth.user_url_rules(user)
    for grant in rbac.grants(state.cache.objects, user.name, user.groups,
                             str(spec.get("namespace") or ""), auth.builtin_role):
        for rule in grant.rules:
            if isinstance(rule, dict):
                (urls if rule.get("nonResourceURLs") else resource_rules).append(rule)
    for gv, reviews in discovery.REVIEWS.items():
        resource_rules.append({"verbs": ["create"], "apiGroups": [gv.partition("/")[0]],
                               "resources": [plural for plural, _kind in reviews
                                             if plural in discovery.SELF]})
    return {"resourceRules": resource_rules, "nonResourceRules": urls, "incomplete": False}


def _token_review(state: State, _user: auth.User, spec: Obj) -> Obj:
    """Who a token is (a user of the token file, for the API server's audience; a
    ServiceAccount token, for the audiences asked, else the API server's), as upstream's
    TokenReview answers; an unknown token is not an error but ``authenticated: false``."""
    token = spec.get("token")
    asked = spec.get("audiences") or list(satokens.AUDIENCES)
    if not isinstance(token, str) or not token:
        raise _review_invalid("TokenReview", "authentication.k8s.io", "spec.token: Required "
                              "value: token must not be empty")
    if not isinstance(asked, list) or not all(isinstance(a, str) for a in asked):
        raise st.bad_request("spec.audiences: must be a list of strings")
    found = state.issuer.identify(token, state.cache.objects, audiences=asked)
    if found is None and set(asked) & set(satokens.AUDIENCES):
        user = state.tokens.authenticate(f"Bearer {token}")
        if user is not None:  # the token file's: for the API server alone
            found = ({"username": user.name, "groups": list(user.groups)},
                     [a for a in asked if a in satokens.AUDIENCES])
    if found is None:
        return {"authenticated": False, "user": {}, "error": "invalid bearer token"}
    info, held = found
    return {"authenticated": True, "user": info, "audiences": held}


def _review_invalid(kind: str, group: str, problem: str) -> st.ApiError:
    return st.ApiError("Invalid", f'{kind}.{group} "" is invalid: {problem}',
                       {"group": group, "kind": kind, "causes": [st.cause(problem)]})


def _may_another(state: State, _user: auth.User, spec: Obj) -> Obj:
    """Whether the user a SubjectAccessReview names (by name, with its token file role if
    it has one, and in exactly the groups named) may do what it asks about, as
    ``kubectl auth can-i`` would answer that user."""
    name, groups = spec.get("user") or "", spec.get("groups") or []
    if not isinstance(name, str) or not isinstance(groups, list) or \
            not all(isinstance(g, str) for g in groups):
        raise st.bad_request("spec.user must be a string and spec.groups a list of strings")
    if not name and not groups:
        raise _review_invalid("SubjectAccessReview", "authorization.k8s.io",
                              'spec.user: Invalid value: "": at least one of user or group '
                              "must be specified")
    if ("resourceAttributes" in spec) == ("nonResourceAttributes" in spec):
        raise _review_invalid("SubjectAccessReview", "authorization.k8s.io",
                              "spec.resourceAttributes: Invalid value: \"null\": exactly one "
                              "of nonResourceAttributes or resourceAttributes must be "
                              "specified")
    role = auth.role_of(name, state.tokens.users.values())
    return _may(state, auth.User(name, role, tuple(groups)), spec)


_ANSWERS: dict[str, Callable[[State, auth.User, Obj], Obj]] = {
    "SelfSubjectAccessReview": _may, "SelfSubjectRulesReview": _rules,
    "SelfSubjectReview": _whoami, "TokenReview": _token_review,
    "SubjectAccessReview": _may_another}


# ---- the fleet view (/ui) -----------------------------------------------------------------


async def ui_file(request: web.Request) -> web.Response:
    found = fleet.static_file(request.match_info.get("name", "index.html"))
    if found is None:
        raise st.no_such_path()
    body, ctype = found
    return web.Response(body=body, content_type=ctype, headers=fleet.PAGE_HEADERS)


def _may_read(state: State, user: auth.User, kind: str, namespace: str = "",
              name: str = "") -> None:
    """Forbidden unless ``user`` may read the ``kind`` object ``namespace/name`` (no name:
    list them) through the API: what a fleet answer shows of it, it may not show to one
    who may not."""
    info = kinds.by_kind(kind)
    if info is None:
        raise st.ApiError("Forbidden", f'User "{user.name}" may not read {kind} entries')
    verb = "get" if name else "list"
    namespace = namespace if info.namespaced else ""
    if state.decide(user, rbac.Request(verb, info.group, info.plural, namespace=namespace,
                                       name=name), info.namespaced) is None:
        raise st.denied(user.name, verb, info, namespace, name)


async def ui_api(request: web.Request) -> web.Response:
    """The fleet view's read-only answers (services.apiserver.fleet), each for a user who
    may read through the API what it shows: the DaemonSet's (or pod's) namespace, its
    nodes, its revisions, the kind of a log entry."""
    state = request.app[STATE_KEY]
    user = _user(request)
    store = state.store.as_writer(user.name)
    q = dict(request.query)
    what = request.match_info["what"]
    request[VERB_KEY], request[RESOURCE_KEY] = "get", "ui/" + what.split("/", 1)[0]
    ns, name = q.get("namespace") or "", q.get("name") or ""
    if what == "why":
        kind = {"pod": "Pod", "daemonset": "DaemonSet", "node": "DaemonSet"}.get(
            q.get("kind") or "", "DaemonSet")
        _may_read(state, user, kind, ns, name)
        if q.get("kind") == "node":
            _may_read(state, user, "Node", name=q.get("node") or "")
        _may_read(state, user, "Pod", ns)  # its pods, as the answer tells of them
        return respond(await state.run(fleet.why_answer, store, q))
    if what.startswith("log/"):
        entry = await state.run(fleet.log_entry, store, what[len("log/"):])
        entry_ns, _, entry_name = str(entry.get("key") or "").rpartition("/")
        _may_read(state, user, str(entry.get("kind") or ""), entry_ns, entry_name)
        return respond(entry)
    if what == "action" and q.get("node"):  # cordon, uncordon
        _may_read(state, user, "Node", name=q["node"])
    elif what in ("placement", "history", "action", "progress"):
        _may_read(state, user, "DaemonSet", ns, name)
    if what == "placement":
        _may_read(state, user, "Node")
        nodes = state.cache.current("Node", lambda _o: True)
        return respond(await state.run(fleet.placement_answer, store, nodes, q))
    if what == "history":
        _may_read(state, user, "ControllerRevision", ns)
        revisions = state.cache.current("ControllerRevision",
                                        lambda o: bool(ns) and meta.namespace(o) == ns)
        return respond(await state.run(fleet.history_answer, store, revisions, q))
    if what == "action":
        return respond(await state.run(fleet.action_plan, store, q))
    if what == "progress":
        return respond(await state.run(fleet.progress_answer, store, q))
    raise st.no_such_path()


# ---- the application --------------------------------------------------------------------


def make_app(state: State) -> web.Application:
    app = web.Application(client_max_size=MAX_BODY,
                          middlewares=[metrics_middleware, errors_middleware, auth_middleware])
    app[STATE_KEY] = state
    for endpoint in health.ENDPOINTS:
        app.router.add_get(f"/{endpoint}", health.handler(endpoint, _cache))
        for name in health.ENDPOINTS[endpoint]:
            app.router.add_get(f"/{endpoint}/{name}", health.check_handler(name, _cache))
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/", root)
    app.router.add_get("/version", version)
    app.router.add_get(satokens.OPENID_CONFIGURATION, openid_configuration)
    app.router.add_get(satokens.JWKS, jwks)
    app.router.add_get("/api", api_root)
    app.router.add_get("/apis", apis_root)
    app.router.add_get("/apis/{group}", api_group)
    # and with the trailing slash the Python client's VersionApi, CoreApi, ApisApi and
    # <Group>Api ask with, as upstream's paths have it
    for path, handler in (("/version/", version), ("/api/", api_root), ("/apis/", apis_root),
                          ("/apis/{group}/", api_group)):
        app.router.add_get(path, handler)
    app.router.add_get("/openapi/v2", openapi_v2)
    app.router.add_get("/openapi/v3", openapi_doc)
    app.router.add_get("/openapi/v3/{path:.*}", openapi_doc)
    app.router.add_get(fleet.PAGE, ui_file)
    app.router.add_get(fleet.PAGE + "/", ui_file)
    app.router.add_get(fleet.STATIC_PREFIX + "{name}", ui_file)
    app.router.add_get(fleet.API_PREFIX + "{what:.+}", ui_api)
    app.router.add_route("*", podlog.PATH, podlog.handler(state, _user))  # before core's
    app.router.add_route("*", podexec.PATH, podexec.handler(state, _user))
    app.router.add_route("*", podexec.ATTACH_PATH, podexec.handler(state, _user, "attach"))
    app.router.add_route("*", podportforward.PATH, podportforward.handler(state, _user))
    proxy = podproxy.handler(state, _user)
    app.router.add_route("*", podproxy.PATH, proxy)
    app.router.add_route("*", podproxy.PATH_WITH_REST, proxy)
    service_proxy = podproxy.service_handler(
        state, _user, lambda ns: state.cache.current("Pod", lambda o: meta.namespace(o) == ns))
    app.router.add_route("*", podproxy.SERVICE_PATH, service_proxy)
    app.router.add_route("*", podproxy.SERVICE_PATH_WITH_REST, service_proxy)
    app.router.add_route("*", "/api/v1{rest:(/.*)?}", core)
    app.router.add_route("*", "/apis/{group}/{version}{rest:(/.*)?}", grouped)

    async def on_startup(_app: web.Application) -> None:
        state.cache.start()

    async def on_cleanup(_app: web.Application) -> None:
        state.cache.stop()
        for w in list(state.cache.watchers):
            w.close("server stopping")

    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
    return app


class ListenError(Exception):
    """The API server cannot listen where it was asked to."""


async def serve(state: State, host: str, port: int, tls: ssl.SSLContext | None,
                stop: asyncio.Event) -> None:
    """Acts: serve until ``stop`` is set."""
    runner = web.AppRunner(make_app(state), access_log=None, shutdown_timeout=2.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=tls, reuse_address=True)
    try:
        await site.start()
    except OSError as err:  # the port taken (another API server?), or the address not ours
        await runner.cleanup()
        why = os.strerror(err.errno) if err.errno else str(err)
        raise ListenError(f"cannot listen on {host}:{port}: {why}") from err
    log.info("apiserver serving on %s://%s:%d", "https" if tls else "http", host, port)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
