"""Who is asking, and may they: bearer tokens from a token file, three roles.

The token file has one ``token,user,role`` line per user (``#`` starts a comment), in the
spirit of kube-apiserver's ``--token-auth-file``. Roles follow the upstream user-facing
ClusterRoles: ``view`` reads everything but Secrets and writes nothing; ``edit`` reads
everything and also writes namespaced objects (DaemonSets, Pods, Events, ControllerRevisions,
evictions) and runs commands in pods, but not Nodes and not status subresources; ``admin``
may do everything. There is no
anonymous access: a request without a known token is 401. ``authorize`` decides (pure);
``TokenFile`` reads the file.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from services import config
from shared.api import served

ROLES = ("admin", "edit", "view")
NAMESPACED_WRITABLE = frozenset({"daemonsets", "pods", "pods/attach",
                                 "pods/ephemeralcontainers", "pods/eviction", "pods/exec",
                                 "pods/portforward", "pods/proxy", "services/proxy",
                                 "events", "controllerrevisions"})
DISCOVERY_URLS = ("/api", "/api/*", "/apis", "/apis/*", "/healthz", "/healthz/*", "/livez",
                  "/livez/*", "/metrics", "/openapi", "/openapi/*", "/readyz", "/readyz/*",
                  "/version", "/version/")
"""What every user may ``get`` outside the resources (upstream's ``system:discovery``, with
its health checks and ``/metrics``)."""


class TokenFileError(ValueError):
    """The token file cannot be used (unreadable, a malformed line, an unknown role)."""


@dataclass(frozen=True)
class User:
    name: str
    role: str


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


def authorize(user: User, verb: str, resource: str, namespaced: bool) -> bool:
    """Whether ``user`` may ``verb`` on ``resource`` (``daemonsets``, ``daemonsets/status``,
    ``pods/eviction``; ``*`` for any: only a rule for every verb or resource grants it).
    A user without a role (one impersonated that the token file does not name) may do
    nothing. Decides."""
    return any(rule.allows(verb, resource, namespaced) for rule in RULES.get(user.role, ()))


class ImpersonationError(Exception):
    """A request may not act as the user its impersonation headers name (a 403)."""


IMPERSONATE_USER = "Impersonate-User"
NO_ROLE = ""


def impersonate(user: User, headers: Mapping[str, str], users: Iterable[User]) -> User:
    """Whom a request of ``user`` acts as, by upstream's impersonation headers (``kubectl
    --as NAME``): ``user`` without them; with ``Impersonate-User``, the user it names, with
    the role the token file (``users``) gives that name first, or none. Only an admin may
    impersonate. Groups, uids and extras are not (roles here are given per user): that is
    refused rather than ignored, so a request never runs with more than it asked for.
    Decides; raises ImpersonationError."""
    others = sorted(h for h in headers if h.lower().startswith("impersonate-")
                    and h.lower() != IMPERSONATE_USER.lower())
    name = headers.get(IMPERSONATE_USER)
    if name is None and not others:
        return user
    if not name:
        raise ImpersonationError(f"{others[0] if name is None else IMPERSONATE_USER} needs "
                                 f"a user's name in an {IMPERSONATE_USER} header")
    if user.role != "admin":
        raise ImpersonationError(f'users "{name}" is forbidden: User "{user.name}" cannot '
                                 'impersonate resource "users" in API group "" at the '
                                 "cluster scope")
    if others:
        raise ImpersonationError(f"impersonating groups, uids or extras ({others[0]}) is not "
                                 "supported: roles are given per user (token file)")
    role = next((u.role for u in users if u.name == name), NO_ROLE)
    return User(name, role)


def may_get_url(user: User, verb: str) -> bool:
    """Whether ``user`` may ``verb`` a non-resource URL (discovery, OpenAPI, health): every
    user ``get``s, an admin anything. Decides."""
    return user.role == "admin" or verb == "get"


def new_token() -> str:
    return secrets.token_urlsafe(32)


def write_token_file(path: Path, users: list[tuple[str, str, str]]) -> None:
    """Write ``token,user,role`` lines readable by the owner only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    config.write_private(path, "".join(f"{t},{u},{r}\n" for t, u, r in users))
