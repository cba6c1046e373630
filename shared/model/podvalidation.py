"""Validation of Pod specs and pod templates (core ``ValidatePodSpec``, a subset). Pure.

The checks kept are those that matter to a DaemonSet controller and its simulated kubelet:
containers (names, images, ports, mounts, policies; and ephemeral containers' own rules),
volumes, restart/DNS policy, node selector, node affinity and tolerations
(:mod:`shared.model.schedvalidation`), and the name-like fields. Messages and paths follow
upstream. Fields the Pod defaulter always fills (restartPolicy, dnsPolicy, imagePullPolicy,
terminationMessagePolicy, port protocol) are accepted when absent: validation is meant for
defaulted objects, and an absent value would be defaulted to a valid one.

Functions append to ``errs`` and never raise.
"""

from __future__ import annotations

import functools
from typing import Any

from shared.model import fielderr, memo, metavalidation, quantity, schedvalidation, syntax, typed

RESTART_POLICIES = ("Always", "OnFailure", "Never")
DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
TERMINATION_MESSAGE_POLICIES = ("File", "FallbackToLogsOnError")
PROTOCOLS = ("SCTP", "TCP", "UDP")
# ``supportedHostPathTypes`` and ``supportedMountPropagations``, as upstream lists them
HOST_PATH_TYPES = ("", "BlockDevice", "CharDevice", "Directory", "DirectoryOrCreate", "File",
                   "FileOrCreate", "Socket")
MOUNT_PROPAGATIONS = ("Bidirectional", "HostToContainer", "None")
VOLUME_SOURCES = (
    "hostPath",
    "emptyDir",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "persistentVolumeClaim",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "configMap",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "projected",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "csi",
    "ephemeral",
    "image",
)
_FILE_MODE_ERROR = "must be a number between 0 and 0777 (octal), both inclusive"
_MAX_INT32 = syntax.MAX_INT32

C = fielderr.child


def _absent(value: Any) -> bool:
    """None or "" (what Go decodes to a zero string, which a defaulter would fill)."""
    return value is None or (isinstance(value, str) and value == "")


def _check_enum(value: Any, path: str, allowed: tuple[str, ...], errs: list[str]) -> None:
    """A defaulted enum field: absent is fine, a present value must be supported."""
    s = typed.as_str(value, path, errs)
    if s and s not in allowed:
        errs.append(fielderr.not_supported(path, s, allowed))


def _check_name(value: Any, path: str, errs: list[str], fn: Any) -> None:
    """An optional name-like string field checked with ``fn`` when non-empty."""
    s = typed.as_str(value, path, errs)
    if s:
        errs.extend(fielderr.invalid(path, s, m) for m in fn(s))


# ---- volumes -------------------------------------------------------------------------------


def _validate_volumes(value: Any, path: str, errs: list[str]) -> set[str]:
    """``ValidateVolumes``; returns the names of the volumes without errors."""
    names: set[str] = set()
    for i, vol in typed.maps(value, path, errs):
        vpath = fielderr.index(path, i)
        el: list[str] = []
        sources = [k for k in VOLUME_SOURCES if vol.get(k) is not None]
        if not sources:
            el.append(fielderr.required(vpath, "must specify a volume type"))
        for extra in sources[1:]:
            el.append(
                fielderr.forbidden(C(vpath, extra), "may not specify more than 1 volume type")
            )
        for src in sources:
            body = typed.as_map(vol.get(src), C(vpath, src), el)
            if body is None:
                continue
            if src == "hostPath":
                hp = typed.as_str(body.get("path"), C(vpath, src, "path"), el)
                if not hp and body.get("path") in (None, ""):
                    el.append(fielderr.required(C(vpath, src, "path")))
                elif hp:
                    el.extend(_no_backsteps(hp, C(vpath, src, "path")))
                    _check_enum(body.get("type"), C(vpath, src, "type"), HOST_PATH_TYPES, el)
            if src in ("secret", "configMap", "downwardAPI", "projected"):
                mode = typed.as_int(body.get("defaultMode"), C(vpath, src, "defaultMode"), el)
                if mode is not None and not 0 <= mode <= 0o777:
                    el.append(
                        fielderr.invalid(C(vpath, src, "defaultMode"), mode, _FILE_MODE_ERROR)
                    )
        raw_name = vol.get("name")
        name = typed.as_str(raw_name, C(vpath, "name"), el)
        if not name:
            if _absent(raw_name):
                el.append(fielderr.required(C(vpath, "name")))
        else:
            el.extend(
                fielderr.invalid(C(vpath, "name"), name, m) for m in syntax.is_dns1123_label(name)
            )
        if name is not None and name in names:
            el.append(fielderr.duplicate(C(vpath, "name"), name))
        if el:
            errs.extend(el)
        elif name is not None:
            names.add(name)
    return names


# ---- containers ------------------------------------------------------------------------


def _validate_ports(value: Any, path: str, errs: list[str]) -> list[tuple[int, int, int]]:
    """``validateContainerPorts``; returns (index, containerPort, hostPort) of each port."""
    seen: set[str] = set()
    out: list[tuple[int, int, int]] = []
    for i, port in typed.maps(value, path, errs):
        ppath = fielderr.index(path, i)
        name = typed.as_str(port.get("name"), C(ppath, "name"), errs)
        if name:
            msgs = syntax.is_valid_port_name(name)
            if msgs:
                errs.extend(fielderr.invalid(C(ppath, "name"), name, m) for m in msgs)
            elif name in seen:
                errs.append(fielderr.duplicate(C(ppath, "name"), name))
            else:
                seen.add(name)
        cport = typed.as_int(port.get("containerPort"), C(ppath, "containerPort"), errs)
        if not cport:
            if port.get("containerPort") in (None, 0):
                errs.append(fielderr.required(C(ppath, "containerPort")))
        else:
            errs.extend(
                fielderr.invalid(C(ppath, "containerPort"), cport, m)
                for m in syntax.is_valid_port_num(cport)
            )
        hport = typed.as_int(port.get("hostPort"), C(ppath, "hostPort"), errs)
        if hport:
            errs.extend(
                fielderr.invalid(C(ppath, "hostPort"), hport, m)
                for m in syntax.is_valid_port_num(hport)
            )
        _check_enum(port.get("protocol"), C(ppath, "protocol"), PROTOCOLS, errs)
        typed.as_str(port.get("hostIP"), C(ppath, "hostIP"), errs)
        out.append((i, cport or 0, hport or 0))
    return out


def _validate_env(value: Any, path: str, errs: list[str]) -> None:
    for i, env in typed.maps(value, path, errs):
        epath = fielderr.index(path, i)
        name = typed.as_str(env.get("name"), C(epath, "name"), errs)
        if not name and _absent(env.get("name")):
            errs.append(fielderr.required(C(epath, "name")))
        value = typed.as_str(env.get("value"), C(epath, "value"), errs)
        value_from = typed.as_map(env.get("valueFrom"), C(epath, "valueFrom"), errs)
        if value_from is not None:
            _validate_value_from(value_from, bool(value), C(epath, "valueFrom"), errs)


_VALUE_SOURCES = ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef")
# ``validContainerResourceFieldPathExpressions`` and its prefixes, the divisors each allows
RESOURCE_FIELDS = ("limits.cpu", "limits.ephemeral-storage", "limits.memory", "requests.cpu",
                   "requests.ephemeral-storage", "requests.memory")
_RESOURCE_FIELD_PREFIXES = ("limits.hugepages-", "requests.hugepages-")
_BYTES = "1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei"
_DIVISORS = {  # a resource's divisors, and upstream's words when another is given
    "cpu": (("1m", "1"), "only divisor's values 1m and 1 are supported with the cpu resource"),
    **{name: (tuple(_BYTES.split(", ")),
              f"only divisor's values {_BYTES} are supported with the {words}")
       for name, words in (("memory", "memory resource"),
                           ("ephemeral-storage", "local ephemeral storage resource"),
                           ("hugepages-", "hugepages resource"))},
}


def _validate_value_from(value_from: dict[Any, Any], has_value: bool, path: str,
                         errs: list[str]) -> None:
    """``validateEnvVarValueFrom``: one source, none beside a ``value``; a resourceFieldRef
    of a resource the downward API gives, over a divisor it allows."""
    sources = [k for k in _VALUE_SOURCES if value_from.get(k) is not None]
    ref = typed.as_map(value_from.get("resourceFieldRef"), C(path, "resourceFieldRef"), errs)
    if ref is not None:
        _validate_resource_field(ref, C(path, "resourceFieldRef"), errs)
    if not sources:
        errs.append(fielderr.invalid(path, "", "must specify one of: `fieldRef`, "
                                     "`resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"))
    elif has_value:
        errs.append(fielderr.invalid(path, "", "may not be specified when `value` is not empty"))
    elif len(sources) > 1:
        errs.append(fielderr.invalid(path, "", "may not have more than one field specified at "
                                     "a time"))


def _validate_resource_field(ref: dict[Any, Any], path: str, errs: list[str]) -> None:
    """``validateContainerResourceFieldSelector`` (of an env var) and its divisor's check."""
    resource = typed.as_str(ref.get("resource"), C(path, "resource"), errs) or ""
    if not resource:
        errs.append(fielderr.required(C(path, "resource")))
    elif resource not in RESOURCE_FIELDS and not resource.startswith(_RESOURCE_FIELD_PREFIXES):
        errs.append(fielderr.not_supported(C(path, "resource"), resource, RESOURCE_FIELDS))
    divisor = ref.get("divisor")
    if divisor is None:
        return
    try:
        parsed = quantity.parse(divisor)
    except ValueError as err:
        errs.append(fielderr.invalid(C(path, "divisor"), divisor, str(err)))
        return
    name = resource.partition(".")[2]
    allowed = _DIVISORS.get("hugepages-" if name.startswith("hugepages-") else name)
    if parsed.value != 0 and allowed is not None and parsed.canonical() not in allowed[0]:
        errs.append(fielderr.invalid(C(path, "divisor"), resource, allowed[1]))


MAX_DNS_NAMESERVERS, MAX_DNS_SEARCH_PATHS, MAX_DNS_SEARCH_CHARS = 3, 32, 2048


def _validate_dns_config(value: Any, policy: Any, path: str, errs: list[str]) -> None:
    """``validatePodDNSConfig``: a dnsConfig with a nameserver under the policy None; at most
    3 nameservers, each an IP; at most 32 searches of 2,048 characters in all, each a DNS
    subdomain (a trailing dot allowed); each option named."""
    config = typed.as_map(value, path, errs)
    if policy == "None":
        if config is None:
            errs.append(fielderr.required(path, "must provide `dnsConfig` when `dnsPolicy` is "
                                                "None"))
            return
        if not config.get("nameservers"):
            errs.append(fielderr.required(C(path, "nameservers"), "must provide at least one "
                                          "DNS nameserver when `dnsPolicy` is None"))
            return
    if config is None:
        return
    servers = typed.as_str_list(config.get("nameservers"), C(path, "nameservers"), errs) or []
    if len(servers) > MAX_DNS_NAMESERVERS:
        errs.append(fielderr.invalid(C(path, "nameservers"), servers, "must not have more "
                                     f"than {MAX_DNS_NAMESERVERS} nameservers"))
    for i, ip in enumerate(servers):
        errs.extend(fielderr.invalid(fielderr.index(C(path, "nameservers"), i), ip, m)
                    for m in syntax.is_valid_ip(ip))
    searches = typed.as_str_list(config.get("searches"), C(path, "searches"), errs) or []
    if len(searches) > MAX_DNS_SEARCH_PATHS:
        errs.append(fielderr.invalid(C(path, "searches"), searches, "must not have more than "
                                     f"{MAX_DNS_SEARCH_PATHS} search paths"))
    if len(" ".join(searches)) > MAX_DNS_SEARCH_CHARS:
        errs.append(fielderr.invalid(C(path, "searches"), searches, "must not have more than "
                                     f"{MAX_DNS_SEARCH_CHARS} characters (including spaces) in "
                                     "the search list"))
    for i, search in enumerate(searches):
        search = search.removesuffix(".")
        errs.extend(fielderr.invalid(fielderr.index(C(path, "searches"), i), search, m)
                    for m in syntax.is_dns1123_subdomain(search))
    for i, option in typed.maps(config.get("options"), C(path, "options"), errs):
        if not option.get("name"):
            errs.append(fielderr.required(fielderr.index(C(path, "options"), i),
                                          "Option.Name must not be empty"))


def _no_backsteps(value: str, path: str) -> list[str]:
    """``validatePathNoBacksteps``: no ``..`` among the path's parts."""
    if ".." in value.split("/"):
        return [fielderr.invalid(path, value, "must not contain '..'")]
    return []


def _descending(value: str, path: str) -> list[str]:
    """``validateLocalDescendingPath``: relative, without backsteps."""
    errs = []
    if value.startswith("/"):
        errs.append(fielderr.invalid(path, value, "must be a relative path"))
    return errs + _no_backsteps(value, path)


def _validate_volume_mounts(value: Any, path: str, volumes: set[str], privileged: bool,
                            errs: list[str]) -> None:
    """``ValidateVolumeMounts``: a known volume name, a unique mountPath, a subPath (or
    subPathExpr) inside the volume, a supported mountPropagation, Bidirectional only in a
    privileged container. (Upstream names the subPath's and the propagation's field under
    the list, not the item: so do we.)"""
    mount_points: set[str] = set()
    for i, mnt in typed.maps(value, path, errs):
        mpath = fielderr.index(path, i)
        name = typed.as_str(mnt.get("name"), C(mpath, "name"), errs)
        if name is not None or _absent(mnt.get("name")):
            if not name:
                errs.append(fielderr.required(C(mpath, "name")))
            if (name or "") not in volumes:
                errs.append(fielderr.not_found(C(mpath, "name"), name or ""))
        mount_path = typed.as_str(mnt.get("mountPath"), C(mpath, "mountPath"), errs)
        if mount_path is not None or _absent(mnt.get("mountPath")):
            if not mount_path:
                errs.append(fielderr.required(C(mpath, "mountPath")))
            if (mount_path or "") in mount_points:
                errs.append(
                    fielderr.invalid(C(mpath, "mountPath"), mount_path or "", "must be unique")
                )
            mount_points.add(mount_path or "")
        typed.as_bool(mnt.get("readOnly"), C(mpath, "readOnly"), errs)
        sub_path = typed.as_str(mnt.get("subPath"), C(mpath, "subPath"), errs)
        if sub_path:
            errs.extend(_descending(sub_path, C(path, "subPath")))
        expr = typed.as_str(mnt.get("subPathExpr"), C(mpath, "subPathExpr"), errs)
        if expr:
            if sub_path:
                errs.append(fielderr.invalid(C(mpath, "subPathExpr"), expr,
                                             "subPathExpr and subPath are mutually exclusive"))
            errs.extend(_descending(expr, C(path, "subPathExpr")))
        propagation = typed.as_str(mnt.get("mountPropagation"), C(path, "mountPropagation"),
                                   errs)
        if propagation is not None:
            if propagation not in MOUNT_PROPAGATIONS:
                errs.append(fielderr.not_supported(C(path, "mountPropagation"), propagation,
                                                   MOUNT_PROPAGATIONS))
            if propagation == "Bidirectional" and not privileged:
                errs.append(fielderr.forbidden(
                    C(path, "mountPropagation"),
                    "Bidirectional mount propagation is available only to privileged "
                    "containers"))


_CONTAINER_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})
_HUGEPAGES = "hugepages-"


def _native(name: str) -> bool:
    """``IsNativeResource``: no domain, or one in kubernetes.io."""
    return "/" not in name or "kubernetes.io/" in name


def _extended(name: str) -> bool:
    """``IsExtendedResourceName``: a qualified name with a domain outside kubernetes.io."""
    return not _native(name) and not name.startswith("requests.") and \
        not syntax.is_qualified_name(name) and not syntax.is_qualified_name("requests." + name)


def _resource_name(name: str, path: str, errs: list[str]) -> None:
    """``validateContainerResourceName``."""
    if "/" not in name:
        if name not in _CONTAINER_RESOURCES and not name.startswith(_HUGEPAGES):
            errs.append(fielderr.invalid(path, name, "must be a standard resource for containers"))
    elif not _native(name) and not _extended(name):
        errs.append(fielderr.invalid(path, name, "doesn't follow extended resource name standard"))


def _resource_value(name: str, amount: quantity.Quantity, path: str, errs: list[str]) -> None:
    """``ValidateResourceQuantityValue``: not negative; a whole number of an extended
    resource."""
    if amount.value < 0:
        errs.append(fielderr.invalid(path, amount.canonical(),
                                     "must be greater than or equal to 0"))
    if _extended(name) and amount.value != amount.value.to_integral_value():
        errs.append(fielderr.invalid(path, amount.canonical(), "must be an integer"))


def _validate_resources(value: Any, path: str, errs: list[str]) -> None:
    """``ValidateContainerResourceRequirements``: each resource a container may ask for,
    never a negative amount, and a request within its limit (equal to it for resources that
    cannot be overcommitted: extended resources and huge pages)."""
    res = typed.as_map(value, path, errs)
    if res is None:
        return
    parsed: dict[str, dict[Any, quantity.Quantity]] = {}
    for part in ("limits", "requests"):
        quantities = typed.as_map(res.get(part), C(path, part), errs) or {}
        amounts = parsed[part] = {}
        for name, q in quantities.items():
            at = fielderr.key(C(path, part), name)
            if not (isinstance(q, str) or (typed.is_int(q)) or isinstance(q, float)):
                errs.append(fielderr.type_error(at, q, "quantity"))
                continue
            try:
                amounts[name] = amount = quantity.parse(q)
            except ValueError as err:
                errs.append(fielderr.invalid(at, q, str(err)))
                continue
            _resource_name(str(name), at, errs)
            _resource_value(str(name), amount, at, errs)
    names = set(map(str, parsed["limits"])) | set(map(str, parsed["requests"]))
    for name, amount in parsed["requests"].items():
        limit = parsed["limits"].get(name)
        overcommit = _native(str(name)) and not str(name).startswith(_HUGEPAGES)
        if limit is None:
            if not overcommit:
                errs.append(fielderr.required(C(path, "limits"), "Limit must be set for non "
                                                                 "overcommitable resources"))
        elif not overcommit and amount.value != limit.value:
            errs.append(fielderr.invalid(C(path, "requests"), amount.canonical(),
                                         f"must be equal to {name} limit of {limit.canonical()}"))
        elif amount.value > limit.value:
            errs.append(fielderr.invalid(
                C(path, "requests"), amount.canonical(),
                f"must be less than or equal to {name} limit of {limit.canonical()}"))
    if any(n.startswith(_HUGEPAGES) for n in names) and not names & {"cpu", "memory"}:
        errs.append(fielderr.forbidden(path, "HugePages require cpu or memory"))


def _validate_container_common(
    ctr: dict[Any, Any], path: str, volumes: set[str], errs: list[str]
) -> None:
    """``validateContainerCommon``."""
    raw_name = ctr.get("name")
    name = typed.as_str(raw_name, C(path, "name"), errs)
    if not name:
        if _absent(raw_name):
            errs.append(fielderr.required(C(path, "name")))
    else:
        errs.extend(
            fielderr.invalid(C(path, "name"), name, m) for m in syntax.is_dns1123_label(name)
        )
    image = typed.as_str(ctr.get("image"), C(path, "image"), errs)
    if not image and _absent(ctr.get("image")):
        errs.append(fielderr.required(C(path, "image")))
    _check_enum(
        ctr.get("terminationMessagePolicy"),
        C(path, "terminationMessagePolicy"),
        TERMINATION_MESSAGE_POLICIES,
        errs,
    )
    typed.as_str(ctr.get("terminationMessagePath"), C(path, "terminationMessagePath"), errs)
    _validate_ports(ctr.get("ports"), C(path, "ports"), errs)
    _validate_env(ctr.get("env"), C(path, "env"), errs)
    typed.maps(ctr.get("envFrom"), C(path, "envFrom"), errs)
    security = ctr.get("securityContext")
    privileged = isinstance(security, dict) and security.get("privileged") is True
    _validate_volume_mounts(ctr.get("volumeMounts"), C(path, "volumeMounts"), volumes,
                            privileged, errs)
    _check_enum(ctr.get("imagePullPolicy"), C(path, "imagePullPolicy"), PULL_POLICIES, errs)
    _validate_resources(ctr.get("resources"), C(path, "resources"), errs)
    typed.as_map(ctr.get("securityContext"), C(path, "securityContext"), errs)
    for f in ("command", "args"):
        typed.as_str_list(ctr.get(f), C(path, f), errs)
    for f in ("livenessProbe", "readinessProbe", "startupProbe", "lifecycle"):
        typed.as_map(ctr.get(f), C(path, f), errs)
    typed.as_str(ctr.get("workingDir"), C(path, "workingDir"), errs)


@memo.by_value  # the same for every pod of a DaemonSet's revision
def _validate_container_with(value: Any, path: str, errs: list[str]) -> None:
    """``_validate_container_common`` of ``value``: [the container, the pod's volume names]."""
    ctr, volumes = value
    _validate_container_common(ctr, path, set(volumes), errs)


def _validate_containers(
    value: Any, path: str, volumes: set[str], errs: list[str], *, others: set[str] | None = None
) -> list[tuple[int, dict[Any, Any]]]:
    """``validateContainers`` (``others``: for init containers, the regular names, which
    init container names must not repeat). Regular containers: at least one is required."""
    items = typed.maps(value, path, errs)
    if others is None and not items and (value is None or value == []):
        errs.append(fielderr.required(path))
        return items
    names = set(others or ())
    for i, ctr in items:
        cpath = fielderr.index(path, i)
        _validate_container_with([ctr, sorted(volumes)], cpath, errs)
        name = ctr.get("name")
        if isinstance(name, str) or name is None:
            name = name or ""
            if name in names:
                errs.append(fielderr.duplicate(C(cpath, "name"), name))
            elif name or others is None:
                names.add(name)
    return items


def _names(items: list[tuple[int, dict[Any, Any]]]) -> list[str]:
    """The names of containers (an absent one ``""``, as Go reads it; one of the wrong type
    left out: it is reported)."""
    names = (c.get("name") for _, c in items)
    return [n or "" for n in names if n is None or isinstance(n, str)]


EPHEMERAL_FORBIDDEN = ("ports", "resources", "resizePolicy", "restartPolicy", "livenessProbe",
                       "readinessProbe", "startupProbe", "lifecycle")
"""The fields of ``EphemeralContainerCommon`` outside upstream's
``allowedEphemeralContainerFields``, in the struct's order (the order of their errors)."""

_EPHEMERAL_DETAIL = "cannot be set for an Ephemeral Container"
_RESOURCE_PARTS = ("limits", "requests", "claims")


def _is_set(name: str, value: Any) -> bool:
    """Whether an ephemeral container's field ``name`` differs from its Go zero value, as
    ``validateFieldAllowList`` tells (``reflect.DeepEqual`` with the zero value): a list or
    a pointer once given, even empty (``[]`` decodes to a non-nil slice); ``resources``, a
    struct, when one of its parts is given."""
    if name == "resources" and isinstance(value, dict):
        return any(value.get(part) is not None for part in _RESOURCE_PARTS)
    return value is not None


def _validate_ephemeral_containers(value: Any, path: str, volumes: set[str], others: list[str],
                                   errs: list[str]) -> None:
    """``validateEphemeralContainers``: each ephemeral container checked like any container
    (``validateContainerCommon``) and its image without surrounding spaces
    (``validateContainerOnlyForPod``, checked in templates too, as upstream does); its name
    unique among every container of the pod (``others``: the regular and init containers'
    names); its ``targetContainerName`` naming a regular or init container; none of the
    fields upstream's allow-list leaves out (ports, resources, probes, lifecycle, …) and no
    volume mount's ``subPath`` or ``subPathExpr``: an ephemeral container is for debugging,
    nothing the pod may rely on, and it must not coerce a tool into writing to the host."""
    items = typed.maps(value, path, errs)
    targets, names = set(others), set(others)
    for i, ctr in items:
        cpath = fielderr.index(path, i)
        _validate_container_with([ctr, sorted(volumes)], cpath, errs)
        image = ctr.get("image")
        if isinstance(image, str) and image.strip() != image:
            errs.append(fielderr.invalid(C(cpath, "image"), image,
                                         "must not have leading or trailing whitespace"))
        target = typed.as_str(ctr.get("targetContainerName"), C(cpath, "targetContainerName"),
                              errs)
        for f in ("stdin", "stdinOnce", "tty"):
            typed.as_bool(ctr.get(f), C(cpath, f), errs)
        name = ctr.get("name")
        if isinstance(name, str) or name is None:
            if (name or "") in names:
                errs.append(fielderr.duplicate(C(cpath, "name"), name or ""))
            names.add(name or "")
        if target and target not in targets:
            errs.append(fielderr.not_found(C(cpath, "targetContainerName"), target))
        errs.extend(fielderr.forbidden(C(cpath, f), _EPHEMERAL_DETAIL)
                    for f in EPHEMERAL_FORBIDDEN if _is_set(f, ctr.get(f)))
        mounts = ctr.get("volumeMounts")
        for j, mnt in enumerate(mounts if isinstance(mounts, list) else []):
            for f in ("subPath", "subPathExpr"):
                if isinstance(mnt, dict) and isinstance(mnt.get(f), str) and mnt[f]:
                    errs.append(fielderr.forbidden(
                        C(fielderr.index(C(cpath, "volumeMounts"), j), f), _EPHEMERAL_DETAIL))


# ---- pod spec and template -------------------------------------------------------------


# the fields of a pod spec that differ between the pods of one DaemonSet revision (each
# names its node): validated on their own, the rest remembered by value (``_spec_rest``)
_PER_NODE = ("affinity", "nodeName")
# between the parts of ``_spec_rest``'s errors (no error message is this string)
_PART = "\x00part"


def validate_pod_spec(value: Any, path: str, errs: list[str]) -> None:
    """``ValidatePodSpec`` (subset), in upstream's order. Every pod a DaemonSet creates has
    the same spec but for its node (the node affinity, then ``nodeName`` once bound), and
    every reader of the log checks the shape of each pod it reads: the rest of the spec is
    validated once per value (``_spec_rest``), the node's fields each time, in their places
    of upstream's order."""
    _pod_spec(value, path, errs, _spec_rest)


def _pod_spec(value: Any, path: str, errs: list[str], rest_of: memo.Validator) -> None:
    """``validate_pod_spec``, the rest of the spec validated by ``rest_of``."""
    spec = typed.as_map(value, path, errs)
    if spec is None:
        if value is not None:
            return
        spec = {}
    rest = {k: v for k, v in spec.items() if k not in _PER_NODE}
    parts: list[str] = []
    rest_of(rest, path, parts)
    first = parts.index(_PART)
    second = parts.index(_PART, first + 1)
    errs.extend(parts[:first])
    affinity_path, node_path = _node_paths(path)
    schedvalidation.validate_affinity(spec.get("affinity"), affinity_path, errs)
    errs.extend(parts[first + 1:second])
    validate_node_name(spec.get("nodeName"), node_path, errs)
    errs.extend(parts[second + 1:])


@functools.lru_cache(maxsize=64)  # a spec's path: "spec", "spec.template.spec", …
def _node_paths(path: str) -> tuple[str, str]:
    """The paths of a spec's ``_PER_NODE`` fields."""
    return C(path, "affinity"), C(path, "nodeName")


def validate_node_name(value: Any, path: str, errs: list[str]) -> None:
    """A pod spec's ``nodeName`` (checked by itself: ``validate_pod_spec``)."""
    _check_name(value, path, errs, syntax.name_is_dns_subdomain)


@memo.by_value  # the same for every pod of a DaemonSet's revision, in each of its versions
def _spec_rest(spec: Any, path: str, errs: list[str]) -> None:
    """``validate_pod_spec`` of a spec without its ``_PER_NODE`` fields: the errors before
    the affinity's, ``_PART``, those between the affinity's and ``nodeName``'s, ``_PART``,
    those after."""
    volumes = _validate_volumes(spec.get("volumes"), C(path, "volumes"), errs)
    containers = _validate_containers(spec.get("containers"), C(path, "containers"), volumes, errs)
    regular = {str(c["name"]) for _, c in containers if isinstance(c.get("name"), str)}
    inits = _validate_containers(
        spec.get("initContainers"), C(path, "initContainers"), volumes, errs, others=regular
    )
    _validate_ephemeral_containers(spec.get("ephemeralContainers"),
                                   C(path, "ephemeralContainers"), volumes,
                                   _names(containers) + _names(inits), errs)
    host_network = typed.as_bool(spec.get("hostNetwork"), C(path, "hostNetwork"), errs)
    if host_network:
        for i, ctr in containers:
            ports = ctr.get("ports")
            for j, port in enumerate(ports if isinstance(ports, list) else []):
                if not isinstance(port, dict):
                    continue
                cport, hport = port.get("containerPort"), port.get("hostPort")
                if typed.is_int(hport) and hport != 0 and hport != cport:
                    ppath = fielderr.index(C(fielderr.index(C(path, "containers"), i), "ports"), j)
                    errs.append(
                        fielderr.invalid(
                            C(ppath, "containerPort"),
                            cport if typed.is_int(cport) else 0,
                            "must match `hostPort` when `hostNetwork` is true",
                        )
                    )
    _check_enum(spec.get("restartPolicy"), C(path, "restartPolicy"), RESTART_POLICIES, errs)
    _check_enum(spec.get("dnsPolicy"), C(path, "dnsPolicy"), DNS_POLICIES, errs)
    metavalidation.validate_labels(spec.get("nodeSelector"), C(path, "nodeSelector"), errs)
    typed.as_map(spec.get("securityContext"), C(path, "securityContext"), errs)
    if spec.get("shareProcessNamespace") is True and spec.get("hostPID") is True:
        errs.append(fielderr.invalid(C(path, "shareProcessNamespace"), True,
                                     "ShareProcessNamespace and HostPID cannot both be enabled"))
    typed.maps(spec.get("imagePullSecrets"), C(path, "imagePullSecrets"), errs)
    errs.append(_PART)  # the affinity's errors go here
    _validate_dns_config(spec.get("dnsConfig"), spec.get("dnsPolicy"), C(path, "dnsConfig"),
                         errs)
    _check_name(
        spec.get("serviceAccountName"),
        C(path, "serviceAccountName"),
        errs,
        syntax.name_is_dns_subdomain,
    )
    typed.as_str(spec.get("serviceAccount"), C(path, "serviceAccount"), errs)
    errs.append(_PART)  # nodeName's go here
    ads = typed.as_int(
        spec.get("activeDeadlineSeconds"), C(path, "activeDeadlineSeconds"), errs, 64
    )
    if ads is not None and not 1 <= ads <= _MAX_INT32:
        errs.append(
            fielderr.invalid(
                C(path, "activeDeadlineSeconds"), ads, syntax.inclusive_range_error(1, _MAX_INT32)
            )
        )
    _check_name(spec.get("hostname"), C(path, "hostname"), errs, syntax.is_dns1123_label)
    _check_name(spec.get("subdomain"), C(path, "subdomain"), errs, syntax.is_dns1123_label)
    schedvalidation.validate_tolerations(spec.get("tolerations"), C(path, "tolerations"), errs)
    _check_name(
        spec.get("priorityClassName"),
        C(path, "priorityClassName"),
        errs,
        syntax.name_is_dns_subdomain,
    )
    typed.as_int(
        spec.get("terminationGracePeriodSeconds"),
        C(path, "terminationGracePeriodSeconds"),
        errs,
        64,
    )
    typed.as_str(spec.get("schedulerName"), C(path, "schedulerName"), errs)
    typed.as_int(spec.get("priority"), C(path, "priority"), errs)
    for f in ("hostPID", "hostIPC", "automountServiceAccountToken", "enableServiceLinks"):
        typed.as_bool(spec.get(f), C(path, f), errs)


def validate_pod_template_spec(value: Any, path: str, errs: list[str]) -> None:
    """``ValidatePodTemplateSpec``. Upstream reports template label and annotation errors at
    ``<path>.labels`` / ``<path>.annotations`` (no ``metadata``), and so do we; a wrong JSON
    type is reported at its real place (``<path>.metadata...``)."""
    tmpl = typed.as_map(value, path, errs)
    if tmpl is None:
        if value is not None:
            return
        tmpl = {}
    md = typed.as_map(tmpl.get("metadata"), C(path, "metadata"), errs) or {}
    type_errs: list[str] = []
    labels = typed.as_map(md.get("labels"), C(path, "metadata", "labels"), type_errs)
    annotations = typed.as_map(md.get("annotations"), C(path, "metadata", "annotations"), type_errs)
    errs.extend(type_errs)
    metavalidation.validate_labels(labels, C(path, "labels"), errs)
    metavalidation.validate_annotations(annotations, C(path, "annotations"), errs)
    validate_pod_spec(tmpl.get("spec"), C(path, "spec"), errs)
    if tmpl.get("spec") is not None and isinstance(tmpl.get("spec"), dict):
        if tmpl["spec"].get("ephemeralContainers"):
            errs.append(
                fielderr.forbidden(
                    C(path, "spec", "ephemeralContainers"),
                    "ephemeral containers not allowed in pod template",
                )
            )
