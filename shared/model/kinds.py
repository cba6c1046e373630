"""The kinds daemonbus stores, and the resource names kubectl accepts for them. Pure.

``resolve`` maps what a user types after ``kubectl get`` (``ds``, ``daemonsets.apps``,
``Pods``, ``daemonsets.v1.apps``) to a :class:`KindInfo`, like kubectl's RESTMapper with its
short-name expander: case-insensitive, plural, singular or short name, optionally qualified
by ``.group`` or ``.version.group``.
"""

from __future__ import annotations

from dataclasses import dataclass


class UnknownResourceError(LookupError):
    """A resource name kubectl would not resolve. ``str(err)`` is kubectl's message.
    Retrying cannot help."""

    def __init__(self, resource: str) -> None:
        self.resource = resource
        super().__init__(f'error: the server doesn\'t have a resource type "{resource}"')

    def __str__(self) -> str:
        return str(self.args[0])


class NoKindMatchError(LookupError):
    """A kind/apiVersion pair no stored kind has (``no matches for kind "Foo" in version "v9"``).
    Retrying cannot help."""

    def __init__(self, kind: str, api_version: str) -> None:
        self.kind = kind
        self.api_version = api_version
        super().__init__(f'no matches for kind "{kind}" in version "{api_version}"')

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class KindInfo:
    kind: str
    api_version: str
    plural: str
    singular: str
    short_names: tuple[str, ...]
    namespaced: bool

    @property
    def group(self) -> str:
        """The API group ("" for the core group)."""
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    @property
    def qualified_name(self) -> str:
        """How kubectl names the type in output: ``daemonset.apps``, ``pod``."""
        return f"{self.singular}.{self.group}" if self.group else self.singular

    @property
    def qualified_plural(self) -> str:
        """How API errors name the resource: ``daemonsets.apps``, ``pods``."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def names(self) -> tuple[str, ...]:
        """Every unqualified name kubectl accepts: plural, singular, short names."""
        return (self.plural, self.singular, *self.short_names)

    @property
    def aliases(self) -> frozenset[str]:
        """Every name :func:`resolve` accepts (lowercase), qualified ones included."""
        out = set(self.names)
        for n in self.names:
            if self.group:
                out.add(f"{n}.{self.group}")
                out.add(f"{n}.{self.version}.{self.group}")
        return frozenset(out)


NODE = KindInfo("Node", "v1", "nodes", "node", ("no",), namespaced=False)
POD = KindInfo("Pod", "v1", "pods", "pod", ("po",), namespaced=True)
DAEMONSET = KindInfo("DaemonSet", "apps/v1", "daemonsets", "daemonset", ("ds",), namespaced=True)
CONTROLLER_REVISION = KindInfo(
    "ControllerRevision",
    "apps/v1",
    "controllerrevisions",
    "controllerrevision",
    (),
    namespaced=True,
)
EVENT = KindInfo("Event", "v1", "events", "event", ("ev",), namespaced=True)
#: A namespace needs no object: one exists while something lives in it, and the four every
#: cluster has always (``BUILTIN_NAMESPACES``). One may have an object all the same (``kubectl
#: create namespace``, a Namespace in a manifest), for its labels and annotations and for its
#: deletion, which deletes everything in it (``services.gc``)
NAMESPACE = KindInfo("Namespace", "v1", "namespaces", "namespace", ("ns",), namespaced=False)
#: configuration for pods (env, envFrom, volumes), written by admin only; node agents read it
CONFIG_MAP = KindInfo("ConfigMap", "v1", "configmaps", "configmap", ("cm",), namespaced=True)

#: credentials for pods (env, envFrom, volumes), written by admin only; node agents read it,
#: and the ``view`` role may not (docs/security.md)
SECRET = KindInfo("Secret", "v1", "secrets", "secret", (), namespaced=True)
#: kept and served as upstream's registry keeps them (its cluster IP and node ports allocated
#: by the API server, ``shared.api.serviceips``); nothing routes their traffic
SERVICE = KindInfo("Service", "v1", "services", "service", ("svc",), namespaced=True)
#: the objects of access control a bundle carries beside its DaemonSet: kept and served as
#: upstream validates them, granting nothing (daemonbus's own users and roles are its token
#: file's; its pods call no API: docs/security.md)
SERVICE_ACCOUNT = KindInfo("ServiceAccount", "v1", "serviceaccounts", "serviceaccount", ("sa",),
                           namespaced=True)
RBAC_GROUP = "rbac.authorization.k8s.io"
ROLE = KindInfo("Role", f"{RBAC_GROUP}/v1", "roles", "role", (), namespaced=True)
ROLE_BINDING = KindInfo("RoleBinding", f"{RBAC_GROUP}/v1", "rolebindings", "rolebinding", (),
                        namespaced=True)
CLUSTER_ROLE = KindInfo("ClusterRole", f"{RBAC_GROUP}/v1", "clusterroles", "clusterrole", (),
                        namespaced=False)
CLUSTER_ROLE_BINDING = KindInfo("ClusterRoleBinding", f"{RBAC_GROUP}/v1", "clusterrolebindings",
                                "clusterrolebinding", (), namespaced=False)
#: the values of pods' priorities by name (``shared.model.priority``): read by the API
#: server and the reconciler as the pods they create are admitted
PRIORITY_CLASS = KindInfo("PriorityClass", "scheduling.k8s.io/v1", "priorityclasses",
                          "priorityclass", ("pc",), namespaced=False)
#: the kinds that only users write and that no controller acts on: a namespace being deleted
#: takes its own with it (``services.gc``), and nothing else deletes them
USER_KINDS: tuple[KindInfo, ...] = (CONFIG_MAP, SECRET, SERVICE, SERVICE_ACCOUNT, ROLE,
                                    ROLE_BINDING, CLUSTER_ROLE, CLUSTER_ROLE_BINDING,
                                    PRIORITY_CLASS)

ALL: tuple[KindInfo, ...] = (NODE, POD, DAEMONSET, CONTROLLER_REVISION, EVENT, NAMESPACE,
                             *USER_KINDS)
#: the kinds the store keeps, by name (the log, the view, every cache)
STORED: tuple[str, ...] = tuple(k.kind for k in ALL)

NODE_LEASE_NAMESPACE = "kube-node-lease"
BUILTIN_NAMESPACES = ("default", NODE_LEASE_NAMESPACE, "kube-public", "kube-system")
#: Node leases are served (read only) but not kept in the log: each node's agent renews one
#: Redis key with its renew time (shared.store.nodelease); the API server shows it as the
#: Lease kubelet keeps in kube-node-lease
LEASE = KindInfo("Lease", "coordination.k8s.io/v1", "leases", "lease", (), namespaced=True)
#: what the API server serves: the stored kinds and Lease
SERVED: tuple[KindInfo, ...] = (*ALL, LEASE)

_BY_KIND = {k.kind: k for k in ALL}
_BY_ALIAS = {alias: k for k in ALL for alias in k.aliases}


def resolve(resource: str) -> KindInfo:
    """The kind a kubectl resource argument names. Raises :class:`UnknownResourceError`."""
    info = _BY_ALIAS.get(resource.lower()) if isinstance(resource, str) else None
    if info is None:
        raise UnknownResourceError(str(resource))
    return info


def by_kind(kind: str) -> KindInfo | None:
    """The registered kind named exactly ``kind`` (``"DaemonSet"``), else None."""
    return _BY_KIND.get(kind) if isinstance(kind, str) else None


def lookup(api_version: str, kind: str) -> KindInfo:
    """The kind for an object's ``apiVersion``/``kind``. Raises :class:`NoKindMatchError`."""
    info = by_kind(kind)
    if info is None or info.api_version != api_version:
        raise NoKindMatchError(str(kind), str(api_version))
    return info
