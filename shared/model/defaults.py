"""API defaults of the stored kinds (``SetDefaults_*`` of apps/v1 and core/v1). Pure.

Every function returns a defaulted deep copy and leaves its argument alone. Defaults fill
only absent (or null / empty-string) fields, so defaulting is idempotent, and a field of the
wrong type is left as it is for validation to report. No function raises.

Besides upstream's defaulters, a namespaced object without a namespace gets ``"default"``
(what kubectl does for a manifest without one), and a Pod without ``status.phase`` gets
``Pending`` and one without ``status.qosClass`` its class (what the registry does on create).
"""

from __future__ import annotations

import base64
import copy
import re
from typing import Any

from shared.model import kinds, podutil, priority

Obj = dict[str, Any]

DEFAULT_NAMESPACE = "default"
DEFAULT_SCHEDULER = "default-scheduler"
DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS = 30
DEFAULT_REVISION_HISTORY_LIMIT = 10
TERMINATION_MESSAGE_PATH = "/dev/termination-log"

# The docker reference grammar (distribution/reference), enough to find an image's tag.
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[0-9a-fA-F:.]+\])(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REFERENCE_RE = re.compile(
    rf"(?P<name>(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
    rf"(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?",
    re.ASCII,
)
_IDENTIFIER_RE = re.compile(r"[a-f0-9]{64}")


def image_tag(image: str) -> str:
    """The tag ``parsers.ParseImageName`` finds: the explicit tag, ``latest`` when there is
    neither tag nor digest, ``""`` with only a digest or when the reference does not parse
    (``ParseNormalizedNamed``: a 64-hex id, an upper-case repository, a bad grammar)."""
    if not image or _IDENTIFIER_RE.fullmatch(image):
        return ""
    i = image.find("/")
    first = image[:i] if i >= 0 else ""
    if i < 0 or (
        "." not in first and ":" not in first and first != "localhost" and first.lower() == first
    ):
        domain, remainder = "docker.io", image
    else:
        domain, remainder = first, image[i + 1 :]
    remote = remainder.split(":", 1)[0]
    if remote.lower() != remote:
        return ""
    m = _REFERENCE_RE.fullmatch(f"{domain}/{remainder}")
    if m is None or len(m.group("name")) > 255:
        return ""
    if m.group("tag"):
        return m.group("tag")
    return "" if m.group("digest") else "latest"


def _absent(d: dict[Any, Any], key: str) -> bool:
    """Absent, null or "" — what Go decodes to a zero value a defaulter fills in."""
    v = d.get(key)
    return v is None or (isinstance(v, str) and v == "")


def _zero(d: dict[Any, Any], key: str) -> bool:
    """Absent, null or 0: what Go decodes to an int's zero value."""
    v = d.get(key)
    return v is None or (type(v) is int and v == 0)


def _dicts(value: Any) -> list[dict[Any, Any]]:
    """The maps of a list (a field of the wrong type: none, left for validation)."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _field(d: dict[Any, Any], *path: str) -> dict[Any, Any] | None:
    """The map at ``path`` under ``d``, None when a step is absent or not a map."""
    for key in path:
        d = d.get(key)  # type: ignore[assignment]
        if not isinstance(d, dict):
            return None
    return d


def _default_http_get(action: dict[Any, Any] | None) -> None:
    """``SetDefaults_HTTPGetAction``: path ``/``, scheme ``HTTP``."""
    if action is not None:
        if _absent(action, "path"):
            action["path"] = "/"
        if _absent(action, "scheme"):
            action["scheme"] = "HTTP"


def _default_probe(probe: dict[Any, Any] | None) -> None:
    """``SetDefaults_Probe``: timeout 1 s, period 10 s, success threshold 1, failure
    threshold 3 (each when 0 or absent), and its HTTP GET's defaults."""
    if probe is None:
        return
    for key, value in PROBE_DEFAULTS.items():
        if _zero(probe, key):
            probe[key] = value
    _default_http_get(_field(probe, "httpGet"))


PROBE_DEFAULTS = {"timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1,
                  "failureThreshold": 3}
VOLUME_DEFAULT_MODE = 0o644  # Secret, ConfigMap, DownwardAPI and Projected volumes' mode
TOKEN_EXPIRATION_SECONDS = 3600  # a projected service account token's


def _default_field_ref(selector: dict[Any, Any] | None) -> None:
    """``SetDefaults_ObjectFieldSelector``: apiVersion ``v1``."""
    if selector is not None and _absent(selector, "apiVersion"):
        selector["apiVersion"] = "v1"


def _default_volume(volume: dict[Any, Any]) -> None:
    """``SetDefaults_Volume`` (no source: an emptyDir) and its sources' defaulters: a
    hostPath's type ``""``, the file mode 0644 of secret, configMap, downwardAPI and
    projected volumes, a downward API item's field apiVersion, a projected token's
    expiration of an hour, an ephemeral claim's volumeMode ``Filesystem``."""
    if all(v is None for k, v in volume.items() if k != "name"):
        volume["emptyDir"] = {}
        return
    host_path = _field(volume, "hostPath")
    if host_path is not None and host_path.get("type") is None:
        host_path["type"] = ""
    for source in ("secret", "configMap", "downwardAPI", "projected"):
        found = _field(volume, source)
        if found is not None and found.get("defaultMode") is None:
            found["defaultMode"] = VOLUME_DEFAULT_MODE
    for item in _dicts((_field(volume, "downwardAPI") or {}).get("items")):
        _default_field_ref(_field(item, "fieldRef"))
    for projection in _dicts((_field(volume, "projected") or {}).get("sources")):
        for item in _dicts((_field(projection, "downwardAPI") or {}).get("items")):
            _default_field_ref(_field(item, "fieldRef"))
        token = _field(projection, "serviceAccountToken")
        if token is not None and token.get("expirationSeconds") is None:
            token["expirationSeconds"] = TOKEN_EXPIRATION_SECONDS
    claim = _field(volume, "ephemeral", "volumeClaimTemplate", "spec")
    if claim is not None and claim.get("volumeMode") is None:
        claim["volumeMode"] = "Filesystem"


def _default_container(ctr: Any) -> None:
    """``SetDefaults_Container`` (+ ``SetDefaults_ContainerPort``), its probes' and
    lifecycle hooks' defaulters and its environment's field selectors, in place."""
    if not isinstance(ctr, dict):
        return
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        _default_probe(_field(ctr, probe))
    for hook in ("postStart", "preStop"):
        _default_http_get(_field(ctr, "lifecycle", hook, "httpGet"))
    for env in _dicts(ctr.get("env")):
        _default_field_ref(_field(env, "valueFrom", "fieldRef"))
    if _absent(ctr, "imagePullPolicy"):
        image = ctr.get("image")
        tag = image_tag(image) if isinstance(image, str) else ""
        ctr["imagePullPolicy"] = "Always" if tag == "latest" else "IfNotPresent"
    if _absent(ctr, "terminationMessagePath"):
        ctr["terminationMessagePath"] = TERMINATION_MESSAGE_PATH
    if _absent(ctr, "terminationMessagePolicy"):
        ctr["terminationMessagePolicy"] = "File"
    ports = ctr.get("ports")
    for port in ports if isinstance(ports, list) else []:
        if isinstance(port, dict) and _absent(port, "protocol"):
            port["protocol"] = "TCP"


def default_container(ctr: Any) -> Any:
    """A container (regular, init or ephemeral) defaulted as in a pod's spec
    (``SetDefaults_Container``, ``SetDefaults_EphemeralContainer``), on a deep copy.
    Decides only."""
    out = copy.deepcopy(ctr)
    _default_container(out)
    return out


def _default_pod_spec(spec: Any) -> None:
    """``SetDefaults_PodSpec`` and its containers, in place."""
    if not isinstance(spec, dict):
        return
    if _absent(spec, "dnsPolicy"):
        spec["dnsPolicy"] = "ClusterFirst"
    if _absent(spec, "restartPolicy"):
        spec["restartPolicy"] = "Always"
    if spec.get("securityContext") is None:
        spec["securityContext"] = {}
    if spec.get("terminationGracePeriodSeconds") is None:
        spec["terminationGracePeriodSeconds"] = DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS
    if _absent(spec, "schedulerName"):
        spec["schedulerName"] = DEFAULT_SCHEDULER
    # the v1 conversion (Convert_v1_PodSpec_To_core_PodSpec and back): ``serviceAccount`` is
    # a deprecated alias of ``serviceAccountName``, which wins; both read back as the name
    account = spec.get("serviceAccountName") or spec.get("serviceAccount")
    if isinstance(account, str) and account:
        spec["serviceAccountName"] = spec["serviceAccount"] = account
    # (``SetDefaults_EphemeralContainer``: an ephemeral container's are a container's)
    for field in podutil.CONTAINER_LISTS:
        containers = spec.get(field)
        for ctr in containers if isinstance(containers, list) else []:
            _default_container(ctr)
    for volume in _dicts(spec.get("volumes")):
        _default_volume(volume)


def _default_namespace(obj: Obj) -> None:
    md = obj.get("metadata")
    if md is None:
        md = obj["metadata"] = {}
    if isinstance(md, dict) and _absent(md, "namespace"):
        md["namespace"] = DEFAULT_NAMESPACE


def default_daemonset(obj: Any) -> Any:
    """``SetDefaults_DaemonSet`` (spec §a.4) plus the pod-template defaults. Decides only.

    ``updateStrategy.type`` → RollingUpdate; with RollingUpdate, ``rollingUpdate`` → {},
    ``maxUnavailable`` → 1, ``maxSurge`` → 0 (nothing inside ``rollingUpdate`` with OnDelete);
    ``revisionHistoryLimit`` → 10; template: restartPolicy Always, dnsPolicy ClusterFirst,
    schedulerName, terminationGracePeriodSeconds 30, securityContext {}, and per container
    terminationMessagePath/Policy and imagePullPolicy (Always for ``:latest`` or no tag).
    """
    out = copy.deepcopy(obj)
    if not isinstance(out, dict):
        return out
    _default_namespace(out)
    if out.get("spec") is None:
        out["spec"] = {}
    spec = out["spec"]
    if not isinstance(spec, dict):
        return out
    if spec.get("updateStrategy") is None:
        spec["updateStrategy"] = {}
    strategy = spec["updateStrategy"]
    if isinstance(strategy, dict):
        if _absent(strategy, "type"):
            strategy["type"] = "RollingUpdate"
        if strategy.get("type") == "RollingUpdate":
            if strategy.get("rollingUpdate") is None:
                strategy["rollingUpdate"] = {}
            ru = strategy["rollingUpdate"]
            if isinstance(ru, dict):
                if ru.get("maxUnavailable") is None:
                    ru["maxUnavailable"] = 1
                if ru.get("maxSurge") is None:
                    ru["maxSurge"] = 0
    if spec.get("revisionHistoryLimit") is None:
        spec["revisionHistoryLimit"] = DEFAULT_REVISION_HISTORY_LIMIT
    if spec.get("template") is None:
        spec["template"] = {}
    template = spec["template"]
    if isinstance(template, dict):
        if template.get("spec") is None:
            template["spec"] = {}
        _default_pod_spec(template["spec"])
    return out


def default_pod_only(spec: Obj) -> None:
    """What ``SetDefaults_Pod`` adds to a pod's (defaulted) spec, and not to a template's:
    requests copied from limits where unset, hostPort = containerPort with hostNetwork,
    ``enableServiceLinks`` true; in place (its priority is admission's:
    ``shared.model.priority``). The DaemonSet controller applies it once to the template
    its pods are made from (as the API server does to each pod it creates)."""
    host_network = spec.get("hostNetwork") is True
    for field in ("initContainers", "containers"):
        for ctr in _dicts(spec.get(field)):
            resources = ctr.get("resources")
            if isinstance(resources, dict) and isinstance(resources.get("limits"), dict):
                if resources.get("requests") is None:
                    resources["requests"] = {}
                requests = resources["requests"]
                if isinstance(requests, dict):
                    for name, quantity in resources["limits"].items():
                        requests.setdefault(name, copy.deepcopy(quantity))
            for port in _dicts(ctr.get("ports")) if host_network else []:
                if not port.get("hostPort") and port.get("containerPort") is not None:
                    port["hostPort"] = port["containerPort"]
    if spec.get("enableServiceLinks") is None:
        spec["enableServiceLinks"] = True


def default_pod(obj: Any) -> Any:
    """``SetDefaults_Pod``: the pod-spec defaults and :func:`default_pod_only`; plus
    ``status.phase`` Pending and ``status.qosClass`` (the registry's on create). Decides
    only."""
    out = copy.deepcopy(obj)
    if not isinstance(out, dict):
        return out
    _default_namespace(out)
    if out.get("spec") is None:
        out["spec"] = {}
    spec = out["spec"]
    if isinstance(spec, dict):
        _default_pod_spec(spec)
        default_pod_only(spec)
    if out.get("status") is None:
        out["status"] = {}
    status = out["status"]
    if isinstance(status, dict) and _absent(status, "phase"):
        status["phase"] = "Pending"
    if isinstance(status, dict) and isinstance(spec, dict) and _absent(status, "qosClass"):
        status["qosClass"] = podutil.qos_class(spec)
    return out


def default_node(obj: Any) -> Any:
    """``SetDefaults_NodeStatus``: ``status.allocatable`` = ``status.capacity`` when unset.
    Decides only."""
    out = copy.deepcopy(obj)
    if not isinstance(out, dict):
        return out
    status = out.get("status")
    if isinstance(status, dict) and status.get("allocatable") is None:
        capacity = status.get("capacity")
        if isinstance(capacity, dict):
            status["allocatable"] = copy.deepcopy(capacity)
    return out


NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def default_namespace(obj: Any) -> Any:
    """``SetDefaults_Namespace`` and ``SetDefaults_NamespaceStatus``: the label
    ``kubernetes.io/metadata.name`` is the namespace's name (always: it cannot be changed),
    ``status.phase`` Active. Decides only."""
    out = copy.deepcopy(obj)
    if not isinstance(out, dict):
        return out
    md = out.get("metadata")
    name = md.get("name") if isinstance(md, dict) else None
    if isinstance(name, str) and name:
        assert isinstance(md, dict)
        if md.get("labels") is None:
            md["labels"] = {}
        if isinstance(md["labels"], dict):
            md["labels"][NAMESPACE_NAME_LABEL] = name
    status = out.get("status")
    if isinstance(status, dict) and not status.get("phase"):
        status["phase"] = "Active"
    return out


DEFAULT_AFFINITY_SECONDS = 10800  # a ClientIP session affinity's timeout (3 hours)


def default_service(obj: Any) -> Any:
    """``SetDefaults_Service``, on a deep copy: ClusterIP, no session affinity (ClientIP's
    timeout 3 hours), TCP ports aimed at the same port, the external traffic policy of a
    Service reachable from outside and the internal one of every Service with cluster IPs
    ``Cluster``, a LoadBalancer's ``allocateLoadBalancerNodePorts`` true. Decides only."""
    out = copy.deepcopy(obj)
    if not isinstance(out, dict):
        return out
    _default_namespace(out)
    spec = out.get("spec")
    if not isinstance(spec, dict):
        return out
    if not spec.get("sessionAffinity"):
        spec["sessionAffinity"] = "None"
    if spec["sessionAffinity"] == "None":
        spec.pop("sessionAffinityConfig", None)
    elif spec["sessionAffinity"] == "ClientIP":
        config = spec.get("sessionAffinityConfig")
        client = config.get("clientIP") if isinstance(config, dict) else None
        if not isinstance(client, dict) or client.get("timeoutSeconds") is None:
            spec["sessionAffinityConfig"] = {
                "clientIP": {"timeoutSeconds": DEFAULT_AFFINITY_SECONDS}}
    if not spec.get("type"):
        spec["type"] = "ClusterIP"
    ports = spec.get("ports")
    for port in ports if isinstance(ports, list) else ():
        if not isinstance(port, dict):
            continue
        if not port.get("protocol"):
            port["protocol"] = "TCP"
        if port.get("targetPort") in (None, 0, ""):
            port["targetPort"] = port.get("port")
    kind = spec["type"]
    if (kind in ("LoadBalancer", "NodePort") or (kind == "ClusterIP"
                                                 and spec.get("externalIPs"))) \
            and not spec.get("externalTrafficPolicy"):
        spec["externalTrafficPolicy"] = "Cluster"
    if spec.get("internalTrafficPolicy") is None and kind in ("NodePort", "LoadBalancer",
                                                               "ClusterIP"):
        spec["internalTrafficPolicy"] = "Cluster"
    if kind == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is None:
        spec["allocateLoadBalancerNodePorts"] = True
    return out


def default_secret(obj: Any) -> Any:
    """``SetDefaults_Secret`` (type ``Opaque``) and the v1 conversion of ``stringData``, on a
    deep copy: each of its values goes into ``data`` (base64, over a key of the same name
    there) and it is dropped; it is never stored. Decides only."""
    out = copy.deepcopy(obj)
    if not isinstance(out, dict):
        return out
    _default_namespace(out)
    if not out.get("type"):
        out["type"] = "Opaque"
    strings = out.get("stringData")
    if isinstance(strings, dict) and all(isinstance(v, str) for v in strings.values()):
        data = out.get("data")
        if not isinstance(data, dict):
            data = out["data"] = {}
        for key, value in strings.items():
            data[key] = base64.b64encode(value.encode("utf-8", "surrogatepass")).decode()
        del out["stringData"]
    return out


def default_binding(obj: Obj) -> None:
    """The RBAC group's v1 defaults of a RoleBinding or ClusterRoleBinding, in place:
    ``roleRef.apiGroup`` is the group's; a User's or Group's subject's ``apiGroup`` is the
    group's (a ServiceAccount's stays empty)."""
    ref = obj.get("roleRef")
    if isinstance(ref, dict) and not ref.get("apiGroup"):
        ref["apiGroup"] = kinds.RBAC_GROUP
    subjects = obj.get("subjects")
    for subject in subjects if isinstance(subjects, list) else ():
        if (isinstance(subject, dict) and not subject.get("apiGroup")
                and subject.get("kind") in ("User", "Group")):
            subject["apiGroup"] = kinds.RBAC_GROUP


def default(obj: Any) -> Any:
    """Default any stored object by its kind (a deep copy; unknown kinds are only copied).
    Decides only."""
    kind = obj.get("kind") if isinstance(obj, dict) else None
    if kind == kinds.DAEMONSET.kind:
        return default_daemonset(obj)
    if kind == kinds.POD.kind:
        return default_pod(obj)
    if kind == kinds.NODE.kind:
        return default_node(obj)
    if kind == kinds.NAMESPACE.kind:
        return default_namespace(obj)
    if kind == kinds.SERVICE.kind:
        return default_service(obj)
    if kind == kinds.SECRET.kind:
        return default_secret(obj)
    out = copy.deepcopy(obj)
    if not isinstance(out, dict):
        return out
    info = kinds.by_kind(kind) if isinstance(kind, str) else None
    if info is not None and info.namespaced:
        _default_namespace(out)
    if kind == kinds.PRIORITY_CLASS.kind:
        priority.default_priority_class(out)
    if kind in (kinds.ROLE_BINDING.kind, kinds.CLUSTER_ROLE_BINDING.kind):
        default_binding(out)
    return out
