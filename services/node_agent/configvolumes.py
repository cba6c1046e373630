"""configMap volumes: the files a pod's ConfigMap volume holds, as kubelet's configmap volume
plugin makes them (``MakePayload``), and which of them a container mounts. Decides (pure);
``atomicwriter`` writes them, the docker runtime bind-mounts them read-only.

The process runtime has no mount namespace: a container of it that mounts a configMap volume
cannot be given one (its files would have to appear at ``mountPath`` on the host for every
pod at once), so it is a CreateContainerConfigError saying so, rather than a container that
runs without its configuration.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

from services.node_agent import podstatus
from shared.model import configmap

Obj = dict[str, Any]
#: a file's bytes and its mode
Payload = dict[str, tuple[bytes, int]]

DEFAULT_MODE = 0o644  # the API's default of configMap.defaultMode
#: kubelet's directory of a pod's configMap volumes, under the pod's own directory
PLUGIN_DIR = "volumes/kubernetes.io~configmap"


def volume_dir(pod_dir: Path, name: str) -> Path:
    """Where the files of the pod's configMap volume ``name`` are written."""
    return pod_dir / PLUGIN_DIR / name


def config_map_volumes(pod: Obj) -> dict[str, Obj]:
    """The pod's configMap volumes: name → its ``configMap`` source."""
    return {str(v.get("name")): v["configMap"] or {}
            for v in (pod.get("spec") or {}).get("volumes") or []
            if isinstance(v, dict) and "configMap" in v}


def mounted(pod: Obj, container: Obj) -> list[tuple[str, str]]:
    """The configMap volumes ``container`` mounts: (volume name, mountPath)."""
    volumes = config_map_volumes(pod)
    return [(str(m.get("name")), str(m.get("mountPath")))
            for m in container.get("volumeMounts") or [] if str(m.get("name")) in volumes]


def _safe(path: str) -> str:
    """An item's path, relative and inside the volume (upstream's validation refuses the
    rest; the agent checks again, as it writes files)."""
    p = PurePosixPath(path)
    if not path or p.is_absolute() or ".." in p.parts or p.parts[0].startswith(".."):
        raise podstatus.ConfigError(f"invalid path {path!r} in a configMap volume")
    return str(p)


def payload(source: Obj, cm: Obj | None) -> Payload:
    """The files of one configMap volume (``source``) of ConfigMap ``cm`` (None: there is
    none): every key with ``defaultMode``, or only ``items`` (key → path, mode). A missing
    ConfigMap or item key that is not ``optional`` is a ConfigError in kubelet's words; an
    optional missing ConfigMap is an empty volume."""
    optional = bool(source.get("optional"))
    if cm is None:
        if optional:
            return {}
        raise podstatus.ConfigError(f'configmap "{source.get("name")}" not found')
    default = source.get("defaultMode")
    mode = DEFAULT_MODE if default is None else int(default)
    contents = configmap.contents(cm)
    items = source.get("items") or []
    if not items:
        return {_safe(k): (v, mode) for k, v in contents.items()}
    out: Payload = {}
    for item in items:
        key = str(item.get("key") or "")
        if key not in contents:
            if optional:
                continue
            raise podstatus.ConfigError(f"configmap references non-existent config key: {key}")
        own = item.get("mode")
        out[_safe(str(item.get("path") or ""))] = (contents[key],
                                                   mode if own is None else int(own))
    return out


def check_mounts(pod: Obj, container: Obj, can_mount: bool, errors: dict[str, str]) -> None:
    """ConfigError when ``container`` mounts a configMap volume it cannot be given: under a
    runtime that cannot mount (``can_mount`` False: the process runtime), or one whose files
    could not be made (``errors``: volume → why, kubelet's FailedMount words)."""
    for name, path in mounted(pod, container):
        if not can_mount:
            raise podstatus.ConfigError(
                f"volumeMount {name} at {path}: the process runtime cannot mount configMap "
                "volumes (it has no mount namespace); use env or envFrom, or the docker runtime")
        if name in errors:
            raise podstatus.ConfigError(
                f'MountVolume.SetUp failed for volume "{name}" : {errors[name]}')
