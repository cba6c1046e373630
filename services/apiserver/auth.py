"""Who is asking, and may they: bearer tokens from a token file, three roles, and the RBAC
objects in the store on top of them.

The token file has one ``token,user,role`` line per user (``#`` starts a comment), in the
spirit of kube-apiserver's ``--token-auth-file``. Roles follow the upstream user-facing
ClusterRoles: ``view`` reads everything but Secrets and writes nothing; ``edit`` reads
everything and also writes namespaced objects (DaemonSets, Pods, Events, ControllerRevisions,
evictions) and runs commands in pods, but not Nodes and not status subresources; ``admin``
may do everything. There is no
anonymous access: a request without a known token is 401. ``authorize`` decides (pure);
``TokenFile`` reads the file.

What a user's role does not grant, the store's RoleBindings and ClusterRoleBindings may
(``shared.api.rbac``: to the user's name, its groups, or the ServiceAccount it is); a
binding to the ClusterRole ``cluster-admin``, ``admin``, ``edit`` or ``view``, which are not
stored, grants what the role table gives the role of that name (``cluster-admin``: admin's;
``admin``: everything inside a namespace and view's reads). ``decide`` asks both. No binding
grants a write of the access objects themselves (Roles, ClusterRoles and their bindings):
upstream lets one through only when the writer holds every permission it would grant (its
escalation check), which daemonbus does not make; here only the token file's admins write
them, so no one grants more than an admin gave.
"""

from __future__ import annotations

import functools
import hmac
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services import config
from shared.api import rbac, served
from shared.model import kinds

Obj = dict[str, Any]
ROLES = ("admin", "edit", "view")
NAMESPACED_WRITABLE = frozenset({"daemonsets", "pods", "pods/attach",
                                 "pods/ephemeralcontainers", "pods/eviction", "pods/exec",
                                 "pods/portforward", "pods/proxy", "services/proxy",
                                 "events", "controllerrevisions"})
PUBLIC_URLS = ("/.well-known/openid-configuration", "/api", "/api/*", "/apis", "/apis/*",
               "/healthz", "/healthz/*", "/livez", "/livez/*", "/openapi", "/openapi/*",
               "/openid/v1/jwks", "/readyz", "/readyz/*", "/version", "/version/")
"""What every authenticated user may ``get`` outside the resources (upstream's
``system:discovery`` and ``system:public-info-viewer``, and the ServiceAccount issuer's
discovery)."""
DISCOVERY_URLS = (*PUBLIC_URLS, "/metrics")
"""What every user of the token file may ``get`` outside the resources: those and the
server's ``/metrics`` (a ServiceAccount reads them if a binding grants it, as upstream's
``system:monitoring``)."""


class TokenFileError(ValueError):
    """The token file cannot be used (unreadable, a malformed line, an unknown role)."""


@dataclass(frozen=True)
class User:
    name: str
    role: str
    groups: tuple[str, ...] = (rbac.AUTHENTICATED,)


def parse_tokens(text: str, source: str = "token file") -> dict[str, User]:
    """The users of a token file's text, by token. Decides; raises TokenFileError."""
    out: dict[str, User] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3 or not all(parts):
            raise TokenFileError(f"{source}:{n}: want token,user,role")
        token, name, role = parts
        if role not in ROLES:
            raise TokenFileError(f"{source}:{n}: unknown role {role!r} (one of "
                                 f"{', '.join(ROLES)})")
        if len(token) < 16:
            raise TokenFileError(f"{source}:{n}: a token must have at least 16 characters")
        out[token] = User(name, role)
    return out


class TokenFile:
    """The users of a token file, read once."""

    def __init__(self, path: Path) -> None:
        try:
            text = path.read_text()
        except OSError as err:
            raise TokenFileError(f"cannot read {path}: {err}") from err
        self.users = parse_tokens(text, str(path))
        if not self.users:
            raise TokenFileError(f"{path}: no users")

    def authenticate(self, header: str | None) -> User | None:
        """The user of an ``Authorization: Bearer <token>`` header, else None (compared in
        constant time)."""
        if not header or not header.startswith("Bearer "):
            return None
        given = header[len("Bearer "):].strip().encode()
        found = None
        for token, user in self.users.items():
            if hmac.compare_digest(token.encode(), given):
                found = user
        return found


@dataclass(frozen=True)
class Rule:
    """One grant of a role: ``verbs`` on ``resources`` (None: every verb, every resource;
    ``daemonsets``, ``daemonsets/status``, ``pods/eviction``), only inside a namespace when
    ``namespaced_only``."""

    verbs: frozenset[str] | None
    resources: frozenset[str] | None
    namespaced_only: bool = False
    #: with ``resources`` None: every resource but these (a resource with its
    #: subresources, or one subresource: ``pods/proxy``)
    but: frozenset[str] = frozenset()

    def allows(self, verb: str, resource: str, namespaced: bool) -> bool:
        return ((self.verbs is None or verb in self.verbs)
                and (self.resources is None or resource in self.resources)
                and resource.split("/", 1)[0] not in self.but and resource not in self.but
                and (namespaced or not self.namespaced_only))


RULES: dict[str, tuple[Rule, ...]] = {
    "admin": (Rule(None, None),),
    "edit": (Rule(served.READ_VERBS, None),
             Rule(served.WRITE_VERBS, NAMESPACED_WRITABLE, True)),
    # (upstream's view reads no Secret and reaches into no pod: no pods/ or services/proxy)
    "view": (Rule(served.READ_VERBS, None,
                  but=frozenset({"secrets", "pods/proxy", "services/proxy"})),),
}
"""The one role table: ``authorize`` (every request, SelfSubjectAccessReview) and
SelfSubjectRulesReview (``kubectl auth can-i --list``) read it."""


CLUSTER_ROLES: dict[str, tuple[Rule, ...]] = {
    "cluster-admin": RULES["admin"], "admin": (Rule(None, None, True), *RULES["view"]),
    "edit": RULES["edit"], "view": RULES["view"]}
"""The built-in ClusterRoles a binding may name without their objects, by the role table."""


def _granted(rules: tuple[Rule, ...], verb: str, resource: str, namespaced: bool) -> bool:
    return any(rule.allows(verb, resource, namespaced) for rule in rules)


def policy_rules(rules: tuple[Rule, ...]) -> list[Obj]:
    """The role table's ``rules`` as RBAC PolicyRules, as upstream's rule resolver lists a
    role's: one per grant and API group, every resource named where a grant is of every
    resource but some, or of the namespaced ones only."""
    out: list[Obj] = []
    for rule in rules:
        verbs = ["*"] if rule.verbs is None else sorted(rule.verbs)
        if rule.resources is None and not rule.but and not rule.namespaced_only:
            out.append({"verbs": verbs, "apiGroups": ["*"], "resources": ["*"]})
            continue
        by_group: dict[str, list[str]] = {}
        if rule.resources is None:  # every resource but some
            for r in served.RESOURCES:
                if r.info.plural not in rule.but and (r.info.namespaced
                                                      or not rule.namespaced_only):
                    by_group.setdefault(r.info.group, []).extend(
                        [r.info.plural, *(f"{r.info.plural}/{sub[0]}" for sub in r.subresources
                                          if f"{r.info.plural}/{sub[0]}" not in rule.but)])
        for name in sorted(rule.resources or ()):
            resource = next(r for r in served.RESOURCES
                            if r.info.plural == name.split("/", 1)[0])
            by_group.setdefault(resource.info.group, []).append(name)
        out += [{"verbs": verbs, "apiGroups": [group], "resources": sorted(names)}
                for group, names in sorted(by_group.items())]
    return out


def url_rules(everything: bool, urls: tuple[str, ...] = DISCOVERY_URLS) -> list[Obj]:
    """The PolicyRules of the URLs outside the resources: every verb on every one, or
    ``get`` of ``urls``."""
    return [{"verbs": ["*"], "nonResourceURLs": ["*"]}] if everything \
        else [{"verbs": ["get"], "nonResourceURLs": list(urls)}]


def user_url_rules(user: User) -> list[Obj]:
    """``url_rules`` of ``user`` (``may_get_url``'s)."""
    return url_rules(user.role == "admin", DISCOVERY_URLS if user.role else PUBLIC_URLS)


@functools.cache
def builtin_role(name: str) -> list[Obj] | None:
    """The rules of the built-in ClusterRole ``name`` (None: it is not one), by the role
    table (not to be modified)."""
    rules = CLUSTER_ROLES.get(name)
    return None if rules is None else \
        [*policy_rules(rules), *url_rules(name == "cluster-admin")]


def decide(user: User, req: rbac.Request, namespaced: bool, objects: rbac.Objects,
           ) -> str | None:
    """Why ``user`` may make ``req`` (of a kind that is ``namespaced`` or not): its role,
    else a binding of the store's ``objects`` (upstream's RBAC reason); None when neither
    grants it. Decides."""
    resource = served.rbac_name(req.group, f"{req.resource}/{req.subresource}"
                                if req.subresource else req.resource)
    if (authorize(user, req.verb, resource, namespaced) if req.resource
            else may_get_url(user, req.verb, req.path)):
        return f"user {user.name} has role {user.role}"
    if req.group == kinds.RBAC_GROUP and req.verb not in served.READ_VERBS:
        return None  # no escalation through a binding: see the module's docstring
    return rbac.allows(objects, user.name, user.groups, req, builtin_role)


def authorize(user: User, verb: str, resource: str, namespaced: bool) -> bool:
    """Whether ``user`` may ``verb`` on ``resource`` (``daemonsets``, ``daemonsets/status``,
    ``pods/eviction``; ``*`` for any: only a rule for every verb or resource grants it).
    A user without a role (one impersonated that the token file does not name) may do
    nothing. Decides."""
    return _granted(RULES.get(user.role, ()), verb, resource, namespaced)


class ImpersonationError(Exception):
    """A request may not act as the user its impersonation headers name (a 403)."""


IMPERSONATE_USER = "Impersonate-User"
IMPERSONATE_GROUP = "Impersonate-Group"
NO_ROLE = ""


def impersonate(user: User, headers: Mapping[str, str], users: Iterable[User]) -> User:
    """Whom a request of ``user`` acts as, by upstream's impersonation headers (``kubectl
    --as NAME [--as-group G]...``): ``user`` without them; with ``Impersonate-User``, the
    user it names, with the role the token file (``users``) gives that name first, or none;
    in the groups the ``Impersonate-Group`` headers name (a multidict's every one), else in
    those an authenticated user of that name is in (a ServiceAccount's, for
    ``system:serviceaccount:NS:NAME``); every one in ``system:authenticated``. RBAC's
    bindings may name either. Only an admin may impersonate. Uids and extras are not: that
    is refused rather than ignored, so a request never runs with more than it asked for.
    Decides; raises ImpersonationError."""
    groups = [v for k, v in headers.items() if k.lower() == IMPERSONATE_GROUP.lower()]
    others = sorted(h for h in headers if h.lower().startswith("impersonate-")
                    and h.lower() not in (IMPERSONATE_USER.lower(), IMPERSONATE_GROUP.lower()))
    name = headers.get(IMPERSONATE_USER)
    if name is None and not others and not groups:
        return user
    if not name:
        first = others[0] if others else IMPERSONATE_GROUP
        raise ImpersonationError(f"{first if name is None else IMPERSONATE_USER} needs "
                                 f"a user's name in an {IMPERSONATE_USER} header")
    if user.role != "admin":
        raise ImpersonationError(f'users "{name}" is forbidden: User "{user.name}" cannot '
                                 'impersonate resource "users" in API group "" at the '
                                 "cluster scope")
    if others:
        raise ImpersonationError(f"impersonating uids or extras ({others[0]}) is not "
                                 "supported: only a user and its groups")
    return User(name, role_of(name, users),
                tuple(dict.fromkeys([*groups, rbac.AUTHENTICATED])) if groups
                else rbac.groups_of(name))


def role_of(name: str, users: Iterable[User]) -> str:
    """The role the token file's ``users`` give the user ``name`` first; none when it names
    no such user."""
    return next((u.role for u in users if u.name == name), NO_ROLE)


def may_get_url(user: User, verb: str, path: str) -> bool:
    """Whether ``user`` may ``verb`` the non-resource URL ``path`` (discovery, OpenAPI,
    health, metrics): an admin anything, a user of the token file ``get`` of any, anyone
    ``get`` of the ``PUBLIC_URLS``. Decides."""
    req = rbac.Request(verb, path=path)
    return any(rbac.rule_allows(rule, req) for rule in user_url_rules(user))


def new_token() -> str:
    return secrets.token_urlsafe(32)


def write_token_file(path: Path, users: list[tuple[str, str, str]]) -> None:
    """Write ``token,user,role`` lines readable by the owner only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    config.write_private(path, "".join(f"{t},{u},{r}\n" for t, u, r in users))
