"""configMap, secret and downwardAPI volumes: the files a pod's volume of a ConfigMap, of a
Secret or of the pod's own fields holds, as kubelet's configmap, secret and downward API
volume plugins make them (``MakePayload``, ``CollectData``), and which of them a container
mounts. Decides (pure); ``atomicwriter`` writes them, the docker runtime bind-mounts them
read-only.

The process runtime has no mount namespace: a container of it that mounts such a volume
cannot be given one (its files would have to appear at ``mountPath`` on the host for every
pod at once), so it is a CreateContainerConfigError saying so, rather than a container that
runs without its configuration.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from services.node_agent import podstatus
from shared.model import configmap, fielderr, meta

Obj = dict[str, Any]
#: a file's bytes and its mode
Payload = dict[str, tuple[bytes, int]]

DEFAULT_MODE = 0o644  # the API's default of configMap.defaultMode and secret.defaultMode


@dataclass(frozen=True)
class Plugin:
    """A volume source of a pod that is an object's files, and kubelet's words for it."""

    field: str  # the volume's source: configMap, secret
    kind: str  # the object it names: ConfigMap, Secret
    name_field: str  # where the source names it
    word: str  # as a missing one is named: configmap "x" not found
    missing_key: str  # as an item's key that is not there is told
    directory: str  # kubelet's directory of such volumes, under the pod's own
    contents: Callable[[Any], dict[str, bytes]]


CONFIG_MAP = Plugin("configMap", "ConfigMap", "name", "configmap",
                    "configmap references non-existent config key", "kubernetes.io~configmap",
                    configmap.contents)
SECRET = Plugin("secret", "Secret", "secretName", "secret",
                "references non-existent secret key", "kubernetes.io~secret",
                configmap.secret_contents)
# the pod's own fields (its labels and annotations as they change), and its containers'
# resources
DOWNWARD_API = Plugin("downwardAPI", "Pod", "", "", "", "kubernetes.io~downward-api",
                      lambda _: {})
PLUGINS = (CONFIG_MAP, SECRET, DOWNWARD_API)


def volume_dir(pod_dir: Path, plugin: Plugin, name: str) -> Path:
    """Where the files of the pod's volume ``name`` are written."""
    return pod_dir / "volumes" / plugin.directory / name


def object_volumes(pod: Obj) -> dict[str, tuple[Plugin, Obj]]:
    """The pod's configMap, secret and downwardAPI volumes: name → its plugin and
    source."""
    out: dict[str, tuple[Plugin, Obj]] = {}
    for v in (pod.get("spec") or {}).get("volumes") or []:
        for plugin in PLUGINS:
            if isinstance(v, dict) and plugin.field in v:
                out[str(v.get("name"))] = (plugin, v[plugin.field] or {})
    return out


def source_name(plugin: Plugin, source: Obj) -> str:
    """The name of the object a volume's ``source`` names."""
    return str(source.get(plugin.name_field) or "")


def mounted(pod: Obj, container: Obj) -> list[tuple[str, str]]:
    """The configMap, secret and downwardAPI volumes ``container`` mounts: (volume name,
    mountPath)."""
    volumes = object_volumes(pod)
    return [(str(m.get("name")), str(m.get("mountPath")))
            for m in container.get("volumeMounts") or [] if str(m.get("name")) in volumes]


def _safe(plugin: Plugin, path: str) -> str:
    """An item's path, relative and inside the volume (upstream's validation refuses the
    rest; the agent checks again, as it writes files)."""
    p = PurePosixPath(path)
    if not path or p.is_absolute() or ".." in p.parts or p.parts[0].startswith(".."):
        raise podstatus.ConfigError(f"invalid path {path!r} in a {plugin.field} volume")
    return str(p)


def downward_inputs(pod: Obj) -> tuple[Obj, Obj]:
    """What a pod's downwardAPI volume's files change with (its labels and annotations;
    its name, uid and resources never change)."""
    return meta.labels(pod), meta.annotations(pod)


def payload(plugin: Plugin, source: Obj, obj: Obj | None,
            allocatable: Obj | None = None) -> Payload:
    """The files of one volume (``source``) of the ConfigMap or Secret ``obj`` (None: there
    is none): every key with ``defaultMode``, or only ``items`` (key → path, mode). A
    missing object or item key that is not ``optional`` is a ConfigError in kubelet's
    words; an optional missing object is an empty volume. Of a downwardAPI volume, ``obj``
    is the pod (``allocatable``: its node's, for the limits a resourceFieldRef reads that
    its container does not set)."""
    if plugin is DOWNWARD_API:
        return _downward(source, obj or {}, allocatable or {})
    optional = bool(source.get("optional"))
    if obj is None:
        if optional:
            return {}
        raise podstatus.ConfigError(f'{plugin.word} "{source_name(plugin, source)}" not found')
    default = source.get("defaultMode")
    mode = DEFAULT_MODE if default is None else int(default)
    contents = plugin.contents(obj)
    items = source.get("items") or []
    if not items:
        return {_safe(plugin, k): (v, mode) for k, v in contents.items()}
    out: Payload = {}
    for item in items:
        key = str(item.get("key") or "")
        if key not in contents:
            if optional:
                continue
            raise podstatus.ConfigError(f"{plugin.missing_key}: {key}")
        own = item.get("mode")
        out[_safe(plugin, str(item.get("path") or ""))] = (contents[key],
                                                           mode if own is None else int(own))
    return out


def _downward(source: Obj, pod: Obj, allocatable: Obj) -> Payload:
    """The files of a downwardAPI volume: each item's ``fieldRef`` (the pod's name,
    namespace, uid, a label or annotation, or all of them as ``key="value"`` lines, sorted)
    or ``resourceFieldRef`` (of its ``containerName``), with its mode or ``defaultMode``."""
    default = source.get("defaultMode")
    mode = DEFAULT_MODE if default is None else int(default)
    labels, annotations = downward_inputs(pod)
    out: Payload = {}
    for item in source.get("items") or []:
        field_ref, resource_ref = item.get("fieldRef"), item.get("resourceFieldRef")
        if field_ref:
            path = str(field_ref.get("fieldPath") or "")
            whole = {"metadata.labels": labels, "metadata.annotations": annotations}.get(path)
            value = _format_map(whole) if whole is not None else \
                podstatus.field_ref(pod, path, volume=True)
        elif resource_ref:
            value = podstatus.resource_field_ref(pod, {}, resource_ref, allocatable)
        else:
            raise podstatus.ConfigError("a downwardAPI item names neither a fieldRef nor a "
                                        "resourceFieldRef")
        own = item.get("mode")
        out[_safe(DOWNWARD_API, str(item.get("path") or ""))] = (
            value.encode(), mode if own is None else int(own))
    return out


def _format_map(values: Obj) -> str:
    """kubelet's ``FormatMap``: ``key="value"`` lines (the value quoted as Go quotes it) in
    the keys' order."""
    return "\n".join(f"{k}={fielderr.go_quote(str(values[k]))}" for k in sorted(values))


def check_mounts(pod: Obj, container: Obj, can_mount: bool) -> None:
    """ConfigError when ``container`` mounts a configMap, secret or downwardAPI volume under
    a runtime that cannot mount (``can_mount`` False: the process runtime). (One whose files
    could not be made holds the whole pod back: ``ProcessAgent._mounted``.)"""
    for name, path in mounted(pod, container):
        if not can_mount:
            raise podstatus.ConfigError(
                f"volumeMount {name} at {path}: the process runtime cannot mount configMap, "
                "secret or downwardAPI volumes (it has no mount namespace); use env or "
                "envFrom, or the docker runtime")
