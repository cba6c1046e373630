"""RBAC as upstream's authorizer reads it (``plugin/pkg/auth/authorizer/rbac``): the Roles,
ClusterRoles, RoleBindings and ClusterRoleBindings in the store grant what their rules say
to the users, groups and ServiceAccounts their bindings name. Pure.

A ClusterRoleBinding grants its ClusterRole's rules everywhere; a RoleBinding grants its
Role's or ClusterRole's rules inside its own namespace only. A rule allows a request when
its verbs, API groups, resources (``*``, ``pods``, ``pods/log``, ``*/scale``) and resource
names (none: any) all match it, or, for a request of no resource, its verbs and
``nonResourceURLs`` (``/healthz``, ``/logs/*``). A ClusterRole with an ``aggregationRule``
has the rules of every ClusterRole its selectors match, as upstream's aggregation
controller would have written them. A binding to a role that does not exist grants nothing,
but for the ``builtin`` ClusterRoles the caller gives the rules of (``services.apiserver.auth``:
the token file's roles). Nothing here denies: what RBAC does not grant may be granted
elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from shared.model import selectors

Obj = dict[str, Any]
Objects = Mapping[str, Mapping[str, Obj]]  # kind → store key → object (a view's)

SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
ALL_SERVICE_ACCOUNTS = "system:serviceaccounts"
AUTHENTICATED = "system:authenticated"


@dataclass(frozen=True)
class Request:
    """What a request asks (upstream's ``authorizer.Attributes``): ``verb`` on ``resource``
    (a plural, with its ``subresource``) of API ``group``, in ``namespace`` (none: cluster
    scope or every namespace), the object ``name`` (none: a collection); or, ``resource``
    empty, ``verb`` on the URL ``path``."""

    verb: str
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""


def service_account(username: str) -> tuple[str, str] | None:
    """The namespace and name of the ServiceAccount a user name is
    (``system:serviceaccount:NS:NAME``); None when it is none."""
    if not username.startswith(SERVICE_ACCOUNT_PREFIX):
        return None
    ns, sep, name = username[len(SERVICE_ACCOUNT_PREFIX):].partition(":")
    return (ns, name) if sep and ns and name and ":" not in name else None


def service_account_user(namespace: str, name: str) -> str:
    return f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"


def groups_of(username: str) -> tuple[str, ...]:
    """The groups an authenticated user is in: every one is in ``system:authenticated``; a
    ServiceAccount in ``system:serviceaccounts`` and that of its namespace too."""
    sa = service_account(username)
    if sa is None:
        return (AUTHENTICATED,)
    return (ALL_SERVICE_ACCOUNTS, f"{ALL_SERVICE_ACCOUNTS}:{sa[0]}", AUTHENTICATED)


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def rule_allows(rule: Any, req: Request) -> bool:
    """Whether one PolicyRule allows ``req`` (``RuleAllows``). Decides."""
    if not isinstance(rule, dict):
        return False
    verbs = _strings(rule.get("verbs"))
    if "*" not in verbs and req.verb not in verbs:
        return False
    if not req.resource:
        return any(url == "*" or url == req.path
                   or (url.endswith("*") and req.path.startswith(url[:-1]))
                   for url in _strings(rule.get("nonResourceURLs")))
    groups = _strings(rule.get("apiGroups"))
    if "*" not in groups and req.group not in groups:
        return False
    combined = f"{req.resource}/{req.subresource}" if req.subresource else req.resource
    if not any(r in ("*", combined) or (req.subresource and r == f"*/{req.subresource}")
               for r in _strings(rule.get("resources"))):
        return False
    names = _strings(rule.get("resourceNames"))
    return not names or req.name in names


def _applies(subject: Any, user: str, groups: tuple[str, ...], namespace: str) -> bool:
    """``appliesToUser``: whether a binding's subject is the user (a ServiceAccount without a
    namespace is one of the RoleBinding's own, ``namespace``)."""
    if not isinstance(subject, dict):
        return False
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return name == user
    if kind == "Group":
        return name in groups
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or namespace
        return bool(ns) and isinstance(name, str) and user == service_account_user(ns, name)
    return False


def _label_match(role: Obj, selector: Any) -> bool:
    labels = (role.get("metadata") or {}).get("labels") or {}
    try:
        return selectors.selector_from_label_selector(selector).matches(labels)
    except ValueError:
        return False


def cluster_role_rules(objects: Objects, name: str,
                       seen: frozenset[str] = frozenset()) -> list[Any] | None:
    """The rules of the ClusterRole ``name`` (None: there is none), aggregated as upstream's
    controller aggregates them when it has an ``aggregationRule`` (a role it selects that
    aggregates in turn brings those it selects; ``seen``: the roles on the way, so a cycle
    ends)."""
    roles = objects.get("ClusterRole", {})
    role = roles.get(f"/{name}")
    if role is None:
        return None
    agg = role.get("aggregationRule")
    chosen = agg.get("clusterRoleSelectors") if isinstance(agg, dict) else None
    if not isinstance(chosen, list):
        return list(role.get("rules") or [])
    seen = seen | {name}
    out: list[Any] = []
    for key, other in roles.items():
        other_name = key[1:]
        if other_name not in seen and any(_label_match(other, s) for s in chosen):
            out += cluster_role_rules(objects, other_name, seen) or []
    return out


Builtin = Callable[[str], list[Any] | None]
"""A ClusterRole's name → its rules when no ClusterRole of that name is stored (None: it is
not built in)."""


@dataclass(frozen=True)
class Grant:
    """What one binding gives: its role's ``rules``, in ``namespace`` only (a
    RoleBinding's) or everywhere; ``source`` says which binding gave them to whom, in
    upstream's words."""

    namespace: str
    rules: list[Any]
    source: str

    def allows(self, req: Request) -> bool:
        return (not self.namespace or req.namespace == self.namespace) and \
            any(rule_allows(rule, req) for rule in self.rules)


def _describe(subject: Obj, namespace: str) -> str:
    """``describeSubject``."""
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "ServiceAccount":
        return f'{kind} "{name}/{subject.get("namespace") or namespace}"'
    return f'{kind} "{name}"'


def grants(objects: Objects, user: str, groups: tuple[str, ...], namespace: str,
           builtin: Builtin) -> Iterator[Grant]:
    """What the bindings give ``user`` (of ``groups``): every ClusterRoleBinding's, and
    the RoleBindings' of ``namespace`` (none: none)."""
    found: list[tuple[str, Obj]] = [("", b) for b in objects.get("ClusterRoleBinding",
                                                                   {}).values()]
    if namespace:
        prefix = namespace + "/"
        found += [(namespace, b) for k, b in objects.get("RoleBinding", {}).items()
                  if k.startswith(prefix)]
    for ns, binding in found:
        subject = next((s for s in binding.get("subjects") or []
                        if _applies(s, user, groups, ns)), None)
        if subject is None:
            continue
        ref = binding.get("roleRef") or {}
        kind, name = str(ref.get("kind") or ""), str(ref.get("name") or "")
        bname = str((binding.get("metadata") or {}).get("name") or "")
        source = (f'RoleBinding "{bname}/{ns}"' if ns else f'ClusterRoleBinding "{bname}"') \
            + f' of {kind} "{name}" to {_describe(subject, ns)}'
        if kind == "Role":
            role = objects.get("Role", {}).get(f"{ns}/{name}")
            rules = None if role is None else list(role.get("rules") or [])
        else:
            rules = cluster_role_rules(objects, name)
            rules = builtin(name) if rules is None else rules
        if rules is not None:
            yield Grant(ns, rules, source)


def allows(objects: Objects, user: str, groups: tuple[str, ...], req: Request,
           builtin: Builtin) -> str | None:
    """Why RBAC allows ``req`` of ``user``: upstream's reason (``RBAC: allowed by
    ClusterRoleBinding "x" of ClusterRole "y" to ServiceAccount "sa/ns"``); None when no
    binding does. Decides."""
    for grant in grants(objects, user, groups, req.namespace, builtin):
        if grant.allows(req):
            return f"RBAC: allowed by {grant.source}"
    return None
