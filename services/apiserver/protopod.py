"""The field tables of a ``v1 Pod`` as Kubernetes protobuf (the one ``kubectl debug node/...``,
``kubectl debug POD --copy-to`` and ``kubectl run`` post), for ``protowire.decode``. Field
numbers are upstream's (``k8s.io/api/core/v1/generated.proto``,
``k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto``); messages of one shape share a
table (``KeySelector`` is ConfigMapKeySelector and SecretKeySelector, ``Requirement``
NodeSelectorRequirement and LabelSelectorRequirement, ``Profile`` SeccompProfile and
AppArmorProfile, ...). Volume sources and fields left out (gcePersistentDisk, iscsi,
ephemeral, ulimits, ...) are refused, as every unknown field is. Decides (pure): data.
"""

from __future__ import annotations

from services.apiserver import protowire

KIND = "Pod"

#: ObjectMeta, the meta types it and a LabelSelector hold, and the one-name message
#: (LocalObjectReference): the other kinds' tables (protokinds) use them too
META: protowire.Schema = {
    "ObjectMeta": {
        1: "name", 2: "generateName", 3: "namespace", 4: "selfLink", 5: "uid",
        6: "resourceVersion", 7: "generation:int", 8: "creationTimestamp:time",
        9: "deletionTimestamp:time", 10: "deletionGracePeriodSeconds:int!",
        11: "labels:{str}", 12: "annotations:{str}",
        13: "ownerReferences:[OwnerReference]", 14: "finalizers:[str]",
        17: "managedFields:[ManagedFieldsEntry]"},
    "OwnerReference": {1: "kind!", 3: "name!", 4: "uid!", 5: "apiVersion!",
                       6: "controller:bool!", 7: "blockOwnerDeletion:bool!"},
    "ManagedFieldsEntry": {1: "manager", 2: "operation", 3: "apiVersion", 4: "time:time",
                           6: "fieldsType", 7: "fieldsV1:rawjson", 8: "subresource"},
    "LabelSelector": {1: "matchLabels:{str}", 2: "matchExpressions:[Requirement]"},
    "Named": {1: "name"},  # LocalObjectReference, PodOS, PodSchedulingGate
    "Requirement": {1: "key!", 2: "operator!", 3: "values:[str]"},
}

_CONTAINER = {
    1: "name!", 2: "image", 3: "command:[str]", 4: "args:[str]", 5: "workingDir",
    6: "ports:[ContainerPort]", 7: "env:[EnvVar]", 8: "resources:ResourceRequirements",
    9: "volumeMounts:[VolumeMount]", 10: "livenessProbe:Probe", 11: "readinessProbe:Probe",
    12: "lifecycle:Lifecycle", 13: "terminationMessagePath", 14: "imagePullPolicy",
    15: "securityContext:SecurityContext", 16: "stdin:bool", 17: "stdinOnce:bool",
    18: "tty:bool", 19: "envFrom:[EnvFromSource]", 20: "terminationMessagePolicy",
    21: "volumeDevices:[VolumeDevice]", 22: "startupProbe:Probe",
    23: "resizePolicy:[ContainerResizePolicy]", 24: "restartPolicy:str!"}

_SPEC: protowire.Schema = {
    "PodSpec": {
        1: "volumes:[Volume]", 2: "containers:[Container]", 3: "restartPolicy",
        4: "terminationGracePeriodSeconds:int!", 5: "activeDeadlineSeconds:int!",
        6: "dnsPolicy", 7: "nodeSelector:{str}", 8: "serviceAccountName",
        9: "serviceAccount", 10: "nodeName", 11: "hostNetwork:bool", 12: "hostPID:bool",
        13: "hostIPC:bool", 14: "securityContext:PodSecurityContext",
        15: "imagePullSecrets:[Named]", 16: "hostname", 17: "subdomain",
        18: "affinity:Affinity", 19: "schedulerName", 20: "initContainers:[Container]",
        21: "automountServiceAccountToken:bool!", 22: "tolerations:[Toleration]",
        23: "hostAliases:[HostAlias]", 24: "priorityClassName", 25: "priority:int!",
        26: "dnsConfig:PodDNSConfig", 27: "shareProcessNamespace:bool!",
        28: "readinessGates:[PodReadinessGate]", 29: "runtimeClassName:str!",
        30: "enableServiceLinks:bool!", 31: "preemptionPolicy:str!", 32: "overhead:{qty}",
        33: "topologySpreadConstraints:[TopologySpreadConstraint]",
        34: "ephemeralContainers:[EphemeralContainer]", 35: "setHostnameAsFQDN:bool!",
        36: "os:Named", 37: "hostUsers:bool!", 38: "schedulingGates:[Named]",
        39: "resourceClaims:[PodResourceClaim]", 40: "resources:ResourceRequirements"},
    "Container": _CONTAINER,
    "EphemeralContainer": {1: "^Container", 2: "targetContainerName"},
    "ContainerPort": {1: "name", 2: "hostPort:int", 3: "containerPort:int!", 4: "protocol",
                      5: "hostIP"},
    "EnvVar": {1: "name!", 2: "value", 3: "valueFrom:EnvVarSource"},
    "EnvVarSource": {1: "fieldRef:ObjectFieldSelector",
                     2: "resourceFieldRef:ResourceFieldSelector",
                     3: "configMapKeyRef:KeySelector", 4: "secretKeyRef:KeySelector"},
    "ObjectFieldSelector": {1: "apiVersion", 2: "fieldPath!"},
    "ResourceFieldSelector": {1: "containerName", 2: "resource!", 3: "divisor:qty"},
    "KeySelector": {1: "^Named", 2: "key!", 3: "optional:bool!"},
    "EnvFromSource": {1: "prefix", 2: "configMapRef:EnvSource", 3: "secretRef:EnvSource"},
    "EnvSource": {1: "^Named", 2: "optional:bool!"},
    "ResourceRequirements": {1: "limits:{qty}", 2: "requests:{qty}",
                             3: "claims:[ResourceClaim]"},
    "ResourceClaim": {1: "name!", 2: "request"},
    "ContainerResizePolicy": {1: "resourceName!", 2: "restartPolicy!"},
    "VolumeMount": {1: "name!", 2: "readOnly:bool", 3: "mountPath!", 4: "subPath",
                    5: "mountPropagation:str!", 6: "subPathExpr",
                    7: "recursiveReadOnly:str!"},
    "VolumeDevice": {1: "name!", 2: "devicePath!"},
    "Probe": {1: "^ProbeHandler", 2: "initialDelaySeconds:int", 3: "timeoutSeconds:int",
              4: "periodSeconds:int", 5: "successThreshold:int", 6: "failureThreshold:int",
              7: "terminationGracePeriodSeconds:int!"},
    "ProbeHandler": {1: "exec:ExecAction", 2: "httpGet:HTTPGetAction",
                     3: "tcpSocket:TCPSocketAction", 4: "grpc:GRPCAction"},
    "ExecAction": {1: "command:[str]"},
    "HTTPGetAction": {1: "path", 2: "port:intstr!", 3: "host", 4: "scheme",
                      5: "httpHeaders:[HTTPHeader]"},
    "HTTPHeader": {1: "name!", 2: "value!"},
    "TCPSocketAction": {1: "port:intstr!", 2: "host"},
    "GRPCAction": {1: "port:int!", 2: "service:str!"},
    "Lifecycle": {1: "postStart:LifecycleHandler", 2: "preStop:LifecycleHandler",
                  3: "stopSignal:str!"},
    "LifecycleHandler": {1: "exec:ExecAction", 2: "httpGet:HTTPGetAction",
                         3: "tcpSocket:TCPSocketAction", 4: "sleep:SleepAction"},
    "SleepAction": {1: "seconds:int!"},
    "SecurityContext": {
        1: "capabilities:Capabilities", 2: "privileged:bool!",
        3: "seLinuxOptions:SELinuxOptions", 4: "runAsUser:int!", 5: "runAsNonRoot:bool!",
        6: "readOnlyRootFilesystem:bool!", 7: "allowPrivilegeEscalation:bool!",
        8: "runAsGroup:int!", 9: "procMount:str!", 10: "windowsOptions:WindowsOptions",
        11: "seccompProfile:Profile", 12: "appArmorProfile:Profile"},
    "PodSecurityContext": {
        1: "seLinuxOptions:SELinuxOptions", 2: "runAsUser:int!", 3: "runAsNonRoot:bool!",
        4: "supplementalGroups:[int]", 5: "fsGroup:int!", 6: "runAsGroup:int!",
        7: "sysctls:[Sysctl]", 8: "windowsOptions:WindowsOptions",
        9: "fsGroupChangePolicy:str!", 10: "seccompProfile:Profile",
        11: "appArmorProfile:Profile", 12: "supplementalGroupsPolicy:str!",
        13: "seLinuxChangePolicy:str!"},
    "Capabilities": {1: "add:[str]", 2: "drop:[str]"},
    "SELinuxOptions": {1: "user", 2: "role", 3: "type", 4: "level"},
    "WindowsOptions": {1: "gmsaCredentialSpecName:str!", 2: "gmsaCredentialSpec:str!",
                       3: "runAsUserName:str!", 4: "hostProcess:bool!"},
    "Profile": {1: "type!", 2: "localhostProfile:str!"},
    "Sysctl": {1: "name!", 2: "value!"},
    "Toleration": {1: "key", 2: "operator", 3: "value", 4: "effect",
                   5: "tolerationSeconds:int!"},
    "HostAlias": {1: "ip", 2: "hostnames:[str]"},
    "PodDNSConfig": {1: "nameservers:[str]", 2: "searches:[str]",
                     3: "options:[PodDNSConfigOption]"},
    "PodDNSConfigOption": {1: "name", 2: "value:str!"},
    "PodReadinessGate": {1: "conditionType!"},
    "PodResourceClaim": {1: "name!", 3: "resourceClaimName:str!",
                         4: "resourceClaimTemplateName:str!"},
    "TopologySpreadConstraint": {
        1: "maxSkew:int!", 2: "topologyKey!", 3: "whenUnsatisfiable!",
        4: "labelSelector:LabelSelector", 5: "minDomains:int!",
        6: "nodeAffinityPolicy:str!", 7: "nodeTaintsPolicy:str!", 8: "matchLabelKeys:[str]"},
}

_AFFINITY: protowire.Schema = {
    "Affinity": {1: "nodeAffinity:NodeAffinity", 2: "podAffinity:PodAffinity",
                 3: "podAntiAffinity:PodAffinity"},  # PodAntiAffinity has PodAffinity's shape
    "NodeAffinity": {
        1: "requiredDuringSchedulingIgnoredDuringExecution:NodeSelector",
        2: "preferredDuringSchedulingIgnoredDuringExecution:[PreferredSchedulingTerm]"},
    "NodeSelector": {1: "nodeSelectorTerms:[NodeSelectorTerm]"},
    "NodeSelectorTerm": {1: "matchExpressions:[Requirement]", 2: "matchFields:[Requirement]"},
    "PreferredSchedulingTerm": {1: "weight:int!", 2: "preference:NodeSelectorTerm"},
    "PodAffinity": {
        1: "requiredDuringSchedulingIgnoredDuringExecution:[PodAffinityTerm]",
        2: "preferredDuringSchedulingIgnoredDuringExecution:[WeightedPodAffinityTerm]"},
    "PodAffinityTerm": {1: "labelSelector:LabelSelector", 2: "namespaces:[str]",
                        3: "topologyKey!", 4: "namespaceSelector:LabelSelector",
                        5: "matchLabelKeys:[str]", 6: "mismatchLabelKeys:[str]"},
    "WeightedPodAffinityTerm": {1: "weight:int!", 2: "podAffinityTerm:PodAffinityTerm"},
}

_VOLUMES: protowire.Schema = {
    "Volume": {1: "name!", 2: "^VolumeSource"},
    "VolumeSource": {
        1: "hostPath:HostPathVolumeSource", 2: "emptyDir:EmptyDirVolumeSource",
        6: "secret:SecretVolumeSource", 7: "nfs:NFSVolumeSource",
        10: "persistentVolumeClaim:PersistentVolumeClaimVolumeSource",
        16: "downwardAPI:DownwardAPIVolumeSource", 19: "configMap:ConfigMapVolumeSource",
        26: "projected:ProjectedVolumeSource", 28: "csi:CSIVolumeSource",
        30: "image:ImageVolumeSource"},
    "HostPathVolumeSource": {1: "path!", 2: "type:str!"},
    "EmptyDirVolumeSource": {1: "medium", 2: "sizeLimit:qty!"},
    "SecretVolumeSource": {1: "secretName", 2: "items:[KeyToPath]", 3: "defaultMode:int!",
                           4: "optional:bool!"},
    "ConfigMapVolumeSource": {1: "^Named", 2: "items:[KeyToPath]", 3: "defaultMode:int!",
                              4: "optional:bool!"},
    "KeyToPath": {1: "key!", 2: "path!", 3: "mode:int!"},
    "NFSVolumeSource": {1: "server!", 2: "path!", 3: "readOnly:bool"},
    "PersistentVolumeClaimVolumeSource": {1: "claimName!", 2: "readOnly:bool"},
    "DownwardAPIVolumeSource": {1: "items:[DownwardAPIVolumeFile]", 2: "defaultMode:int!"},
    "DownwardAPIVolumeFile": {1: "path!", 2: "fieldRef:ObjectFieldSelector",
                              3: "resourceFieldRef:ResourceFieldSelector", 4: "mode:int!"},
    "ProjectedVolumeSource": {1: "sources:[VolumeProjection]", 2: "defaultMode:int!"},
    "VolumeProjection": {1: "secret:KeyProjection", 2: "downwardAPI:DownwardAPIProjection",
                         3: "configMap:KeyProjection",
                         4: "serviceAccountToken:ServiceAccountTokenProjection",
                         5: "clusterTrustBundle:ClusterTrustBundleProjection"},
    "KeyProjection": {1: "^Named", 2: "items:[KeyToPath]", 4: "optional:bool!"},
    "DownwardAPIProjection": {1: "items:[DownwardAPIVolumeFile]"},
    "ServiceAccountTokenProjection": {1: "audience", 2: "expirationSeconds:int!",
                                      3: "path!"},
    "ClusterTrustBundleProjection": {1: "name:str!", 2: "signerName:str!",
                                     3: "labelSelector:LabelSelector", 4: "path!",
                                     5: "optional:bool!"},
    "CSIVolumeSource": {1: "driver!", 2: "readOnly:bool!", 3: "fsType:str!",
                        4: "volumeAttributes:{str}", 5: "nodePublishSecretRef:Named"},
    "ImageVolumeSource": {1: "reference", 2: "pullPolicy"},
}

_STATUS: protowire.Schema = {
    "PodStatus": {
        1: "phase", 2: "conditions:[PodCondition]", 3: "message", 4: "reason",
        5: "hostIP", 6: "podIP", 7: "startTime:time", 8: "containerStatuses:[ContainerStatus]",
        9: "qosClass", 10: "initContainerStatuses:[ContainerStatus]",
        11: "nominatedNodeName", 12: "podIPs:[IP]",
        13: "ephemeralContainerStatuses:[ContainerStatus]", 14: "resize",
        15: "resourceClaimStatuses:[PodResourceClaimStatus]", 16: "hostIPs:[IP]",
        17: "observedGeneration:int"},
    "IP": {1: "ip!"},
    "PodCondition": {1: "type!", 2: "status!", 3: "lastProbeTime:time",
                     4: "lastTransitionTime:time", 5: "reason", 6: "message",
                     7: "observedGeneration:int"},
    "ContainerStatus": {
        1: "name!", 2: "state:ContainerState", 3: "lastState:ContainerState",
        4: "ready:bool!", 5: "restartCount:int!", 6: "image!", 7: "imageID!",
        8: "containerID", 9: "started:bool!", 10: "allocatedResources:{qty}",
        11: "resources:ResourceRequirements", 12: "volumeMounts:[VolumeMountStatus]",
        15: "stopSignal:str!"},
    "ContainerState": {1: "waiting:ContainerStateWaiting", 2: "running:ContainerStateRunning",
                       3: "terminated:ContainerStateTerminated"},
    "ContainerStateWaiting": {1: "reason", 2: "message"},
    "ContainerStateRunning": {1: "startedAt:time"},
    "ContainerStateTerminated": {1: "exitCode:int!", 2: "signal:int", 3: "reason",
                                 4: "message", 5: "startedAt:time", 6: "finishedAt:time",
                                 7: "containerID"},
    "VolumeMountStatus": {1: "name!", 2: "mountPath!", 3: "readOnly:bool",
                          4: "recursiveReadOnly:str!"},
    "PodResourceClaimStatus": {1: "name!", 2: "resourceClaimName:str!"},
}

SCHEMA: protowire.Schema = {
    KIND: {1: "metadata:ObjectMeta", 2: "spec:PodSpec", 3: "status:PodStatus"},
    **META, **_SPEC, **_AFFINITY, **_VOLUMES, **_STATUS}


def decode(data: bytes) -> protowire.Obj:
    """The JSON shape of a Pod's protobuf message (its TypeMeta is the caller's)."""
    return protowire.decode(SCHEMA, KIND, data)
