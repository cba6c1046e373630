"""The field tables of the access kinds as Kubernetes protobuf (``kubectl create
serviceaccount``, ``create role``, ``create clusterrole``, ``create rolebinding`` and
``create clusterrolebinding`` post them), for ``protowire.decode``: every field read, an
unknown one refused. Field numbers are upstream's (``k8s.io/api/core/v1/generated.proto``,
``k8s.io/api/rbac/v1/generated.proto``). Decides (pure): data.
"""

from __future__ import annotations

from services.apiserver import protopod, protowire

_RULES = "rules:[PolicyRule]"
_BINDING = {1: "metadata:ObjectMeta", 2: "subjects:[Subject]", 3: "roleRef:RoleRef"}

SCHEMA: protowire.Schema = {
    "ServiceAccount": {1: "metadata:ObjectMeta", 2: "secrets:[ObjectReference]",
                       3: "imagePullSecrets:[Named]", 4: "automountServiceAccountToken:bool!"},
    "ObjectReference": {1: "kind", 2: "namespace", 3: "name", 4: "uid", 5: "apiVersion",
                        6: "resourceVersion", 7: "fieldPath"},
    "Named": {1: "name"},
    "Role": {1: "metadata:ObjectMeta", 2: _RULES},
    "ClusterRole": {1: "metadata:ObjectMeta", 2: _RULES, 3: "aggregationRule:AggregationRule"},
    "PolicyRule": {1: "verbs:[str]", 2: "apiGroups:[str]", 3: "resources:[str]",
                   4: "resourceNames:[str]", 5: "nonResourceURLs:[str]"},
    "AggregationRule": {1: "clusterRoleSelectors:[LabelSelector]"},
    "RoleBinding": _BINDING,
    "ClusterRoleBinding": _BINDING,
    "Subject": {1: "kind", 2: "apiGroup", 3: "name", 4: "namespace"},
    "RoleRef": {1: "apiGroup", 2: "kind", 3: "name"},
    **protopod.META,
}
KINDS = frozenset(("ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"))


def decode(kind: str, data: bytes) -> protowire.Obj:
    """The JSON shape of a ``kind`` (one of :data:`KINDS`) message (its TypeMeta is the
    caller's)."""
    return protowire.decode(SCHEMA, kind, data)
