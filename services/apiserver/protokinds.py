"""The field tables of the kinds besides a Pod that kubectl's create verbs post whole as
Kubernetes protobuf (``kubectl create service``, ``create serviceaccount``, ``create
role``, ``create clusterrole``, ``create rolebinding``, ``create clusterrolebinding``,
``create priorityclass``), for ``protowire.decode``: every field read, an unknown one
refused. Field numbers are upstream's (``k8s.io/api/core/v1/generated.proto``,
``k8s.io/api/rbac/v1/generated.proto``, ``k8s.io/api/scheduling/v1/generated.proto``).
Decides (pure): data.
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
    "Role": {1: "metadata:ObjectMeta", 2: _RULES},
    "ClusterRole": {1: "metadata:ObjectMeta", 2: _RULES, 3: "aggregationRule:AggregationRule"},
    "PolicyRule": {1: "verbs:[str]", 2: "apiGroups:[str]", 3: "resources:[str]",
                   4: "resourceNames:[str]", 5: "nonResourceURLs:[str]"},
    "AggregationRule": {1: "clusterRoleSelectors:[LabelSelector]"},
    "RoleBinding": _BINDING,
    "ClusterRoleBinding": _BINDING,
    "Subject": {1: "kind", 2: "apiGroup", 3: "name", 4: "namespace"},
    "RoleRef": {1: "apiGroup", 2: "kind", 3: "name"},
    "Service": {1: "metadata:ObjectMeta", 2: "spec:ServiceSpec", 3: "status:ServiceStatus"},
    "ServiceSpec": {
        1: "ports:[ServicePort]", 2: "selector:{str}", 3: "clusterIP", 18: "clusterIPs:[str]",
        4: "type", 5: "externalIPs:[str]", 7: "sessionAffinity", 8: "loadBalancerIP",
        9: "loadBalancerSourceRanges:[str]", 10: "externalName", 11: "externalTrafficPolicy",
        12: "healthCheckNodePort:int", 13: "publishNotReadyAddresses:bool",
        14: "sessionAffinityConfig:SessionAffinityConfig", 19: "ipFamilies:[str]",
        17: "ipFamilyPolicy:str!", 20: "allocateLoadBalancerNodePorts:bool!",
        21: "loadBalancerClass:str!", 22: "internalTrafficPolicy:str!",
        23: "trafficDistribution:str!"},
    "ServicePort": {1: "name", 2: "protocol", 6: "appProtocol:str!", 3: "port:int",
                    4: "targetPort:intstr", 5: "nodePort:int"},
    "SessionAffinityConfig": {1: "clientIP:ClientIPConfig"},
    "ClientIPConfig": {1: "timeoutSeconds:int!"},
    "ServiceStatus": {1: "loadBalancer:LoadBalancerStatus"},
    "LoadBalancerStatus": {1: "ingress:[LoadBalancerIngress]"},
    "LoadBalancerIngress": {1: "ip", 2: "hostname", 3: "ipMode:str!", 4: "ports:[PortStatus]"},
    "PortStatus": {1: "port:int!", 2: "protocol", 3: "error:str!"},
    "PriorityClass": {1: "metadata:ObjectMeta", 2: "value:int!", 3: "globalDefault:bool",
                      4: "description", 5: "preemptionPolicy:str!"},
    **protopod.META,
}
KINDS = frozenset(("Service", "ServiceAccount", "Role", "ClusterRole", "RoleBinding",
                   "ClusterRoleBinding", "PriorityClass"))


def decode(kind: str, data: bytes) -> protowire.Obj:
    """The JSON shape of a ``kind`` (one of :data:`KINDS`) message (its TypeMeta is the
    caller's)."""
    return protowire.decode(SCHEMA, kind, data)
