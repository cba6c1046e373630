"""A container's security context as kubelet determines it, and what the docker runtime asks
of the engine for it (decides).

The pod's ``securityContext`` gives every container its user, group, ``runAsNonRoot``,
SELinux, seccomp and AppArmor settings, which the container's own override
(``DetermineEffectiveSecurityContext``); ``privileged``, ``capabilities``,
``readOnlyRootFilesystem`` and ``allowPrivilegeEscalation`` are the container's alone, the
supplemental groups, ``fsGroup`` and sysctls the pod's. ``hostPID`` and ``hostIPC`` put the
container in the host's process and IPC namespaces.

On the engine: ``privileged``, ``cap_add``/``cap_drop``, ``user`` (``UID[:GID]``),
``group_add``, ``read_only``, ``no-new-privileges`` for ``allowPrivilegeEscalation:
false``, ``seccomp=unconfined`` for an ``Unconfined`` profile (none, or ``RuntimeDefault``:
the engine's default profile, which is stricter than kubelet's default of none), the pod's
sysctls, ``pid_mode``/``ipc_mode`` ``host``. SELinux and AppArmor options are left to the
engine's defaults; a ``Localhost`` seccomp profile (a file in kubelet's directory, which this
agent has not) is a configuration error. ``runAsNonRoot`` is checked as kubelet checks it,
against the image's user, in kubelet's words (``non_root_error``).
"""

from __future__ import annotations

from typing import Any

from services.node_agent.podstatus import ConfigError, pod_ref

Obj = dict[str, Any]

# what a container's own securityContext overrides of its pod's
POD_DEFAULTS = ("runAsUser", "runAsGroup", "runAsNonRoot", "seLinuxOptions", "seccompProfile",
                "appArmorProfile")


def _pod_context(pod: Obj) -> Obj:
    sc = (pod.get("spec") or {}).get("securityContext")
    return sc if isinstance(sc, dict) else {}


def effective(pod: Obj, container: Obj) -> Obj:
    """The container's security context with its pod's defaults under it."""
    out = {k: v for k, v in _pod_context(pod).items() if k in POD_DEFAULTS and v is not None}
    own = container.get("securityContext")
    if isinstance(own, dict):
        out.update({k: v for k, v in own.items() if v is not None})
    return out


def _user(sc: Obj, image_user: str) -> str | None:
    """The engine's ``user`` for the context: ``UID[:GID]``; with a group but no user, the
    image's user in that group; None: the image's own."""
    uid, gid = sc.get("runAsUser"), sc.get("runAsGroup")
    if uid is None and gid is None:
        return None
    who = str(uid) if uid is not None else (image_user.split(":")[0] or "0")
    return who if gid is None else f"{who}:{gid}"


def engine_options(pod: Obj, container: Obj, image_user: str = "") -> Obj:
    """The engine's container options for ``container`` of ``pod`` (``image_user``: its
    image's ``User``). ConfigError for what the runtime cannot give."""
    spec = pod.get("spec") or {}
    sc, psc = effective(pod, container), _pod_context(pod)
    opts: Obj = {}
    if spec.get("hostPID"):
        opts["pid_mode"] = "host"
    if spec.get("hostIPC"):
        opts["ipc_mode"] = "host"
    if sc.get("privileged"):
        opts["privileged"] = True
    caps = sc.get("capabilities") or {}
    for ours, theirs in (("add", "cap_add"), ("drop", "cap_drop")):
        if caps.get(ours):
            opts[theirs] = [str(c) for c in caps[ours]]
    user = _user(sc, image_user)
    if user is not None:
        opts["user"] = user
    groups = [str(g) for g in psc.get("supplementalGroups") or []]
    if psc.get("fsGroup") is not None and str(psc["fsGroup"]) not in groups:
        groups.append(str(psc["fsGroup"]))  # (kubelet adds it to the container's groups)
    if groups:
        opts["group_add"] = groups
    if sc.get("readOnlyRootFilesystem"):
        opts["read_only"] = True
    security: list[str] = []
    if sc.get("allowPrivilegeEscalation") is False:
        security.append("no-new-privileges")
    profile = (sc.get("seccompProfile") or {}).get("type")
    if profile == "Unconfined":
        security.append("seccomp=unconfined")
    elif profile == "Localhost":
        raise ConfigError("seccompProfile: the docker runtime has no Localhost profiles")
    if security:
        opts["security_opt"] = security
    sysctls = {str(s.get("name")): str(s.get("value")) for s in psc.get("sysctls") or []}
    if sysctls:
        opts["sysctls"] = sysctls
    return opts


def non_root_error(pod: Obj, container: Obj, image_user: str) -> str | None:
    """Why ``container`` may not run under ``runAsNonRoot`` (kubelet's verifyRunAsNonRoot,
    its words), given its image's ``User`` (empty: root); None when it may."""
    sc = effective(pod, container)
    if not sc.get("runAsNonRoot"):
        return None
    where = f'(pod: "{pod_ref(pod)}", container: {container.get("name")})'
    if sc.get("runAsUser") is not None:
        return f"container's runAsUser breaks non-root policy {where}" \
            if sc["runAsUser"] == 0 else None
    user = image_user.split(":")[0]
    if user and not user.isdigit():
        return (f"container has runAsNonRoot and image has non-numeric user ({user}), cannot "
                f"verify user is non-root {where}")
    if not user or int(user) == 0:
        return f"container has runAsNonRoot and image will run as root {where}"
    return None
