"""What the API server serves of each kind: its verbs, its categories and its subresources,
as discovery lists them (``services.apiserver.discovery``) and the OpenAPI documents have
paths for them (``shared.api.openapi``). Pure: constants.

The served kinds are the store's (``shared.model.kinds``; Namespaces as
``shared.api.namespaces`` serves them, with or without an object), Lease, the node
leases read from their keys, and the Metrics API's NodeMetrics and PodMetrics, asked of the
node agents (``shared.api.metrics``); those are read only.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.api import metrics
from shared.model import kinds

#: the Kubernetes version whose API is served: the API server's (``/version``) and every
#: node agent's kubelet version
VERSION = "v1.32.0-daemonbus"

WRITE_VERBS = frozenset({"create", "delete", "deletecollection", "patch", "update"})
READ_VERBS = frozenset({"get", "list", "watch"})
ALL_VERBS = (*sorted(WRITE_VERBS), *sorted(READ_VERBS))
"""A resource's verbs, in the order discovery lists them: the writes, then the reads."""


@dataclass(frozen=True)
class Resource:
    """One served resource: the store's kind (or Lease), its discovery facts."""

    info: kinds.KindInfo
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    subresources: tuple[tuple[str, str, tuple[str, ...]], ...] = ()  # name, kind, verbs

    @property
    def stored(self) -> bool:
        return self.info.kind in kinds.STORED


RESOURCES: tuple[Resource, ...] = (
    Resource(kinds.NAMESPACE, verbs=("create", "delete", "get", "list", "patch", "update",
                                     "watch"),
             subresources=(("finalize", "Namespace", ("update",)),
                           ("status", "Namespace", ("get", "patch", "update")))),
    Resource(kinds.NODE, subresources=(("status", "Node", ("get", "patch", "update")),)),
    Resource(kinds.POD, categories=("all",),
             subresources=(("attach", "PodAttachOptions", ("create", "get")),
                           ("ephemeralcontainers", "Pod", ("get", "patch", "update")),
                           ("eviction", "Eviction", ("create",)),
                           ("exec", "PodExecOptions", ("create", "get")),
                           ("log", "Pod", ("get",)),
                           ("portforward", "PodPortForwardOptions", ("create", "get")),
                           ("proxy", "PodProxyOptions",
                            ("create", "delete", "get", "patch", "update")),
                           ("status", "Pod", ("get", "patch", "update")))),
    Resource(kinds.EVENT),
    Resource(kinds.DAEMONSET, categories=("all",),
             subresources=(("status", "DaemonSet", ("get", "patch", "update")),)),
    Resource(kinds.CONTROLLER_REVISION),
    Resource(kinds.SERVICE, categories=("all",),
             subresources=(("proxy", "ServiceProxyOptions",
                            ("create", "delete", "get", "patch", "update")),
                           ("status", "Service", ("get", "patch", "update")))),
    Resource(kinds.SERVICE_ACCOUNT, subresources=(("token", "TokenRequest", ("create",)),)),
    *(Resource(info) for info in kinds.USER_KINDS
      if info not in (kinds.SERVICE, kinds.SERVICE_ACCOUNT)),
    Resource(kinds.LEASE, verbs=("get", "list")),
    Resource(metrics.NODE_METRICS, verbs=("get", "list")),
    Resource(metrics.POD_METRICS, verbs=("get", "list")),
)
STORED_KINDS = tuple(r.info.kind for r in RESOURCES if r.stored)


_BY_KIND = {r.info.kind: r for r in RESOURCES}


def rbac_name(group: str, resource: str) -> str:
    """The name the roles grant ``resource`` (``pods``, ``pods/log``) of ``group`` by: its
    own, but qualified by its group for the Metrics API's (``pods.metrics.k8s.io``), whose
    plurals are the core group's too and whose grants are not (an editor writes pods, and
    nobody writes their metrics)."""
    return f"{resource}.{group}" if group == metrics.GROUP_VERSION.split("/")[0] else resource


def by_kind(kind: str) -> Resource | None:
    """The served resource of ``kind``, None when it is not served."""
    return _BY_KIND.get(kind)
