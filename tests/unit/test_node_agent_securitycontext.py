"""A container's security context (``services.node_agent.securitycontext``): the pod's
defaults under the container's own, the engine's options for it, and kubelet's
``runAsNonRoot`` check in its words."""

from __future__ import annotations

from typing import Any

import pytest

from services.node_agent import securitycontext as sc
from services.node_agent.podstatus import ConfigError


def pod(spec: dict[str, Any] | None = None, **container: Any) -> tuple[dict[str, Any],
                                                                         dict[str, Any]]:
    c = {"name": "app", "image": "x", **container}
    return ({"metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
             "spec": {"containers": [c], **(spec or {})}}, c)


def test_the_containers_own_settings_win_over_the_pods_and_only_those_it_may_override(
        ) -> None:
    p, c = pod({"securityContext": {"runAsUser": 1000, "runAsGroup": 3000,
                                    "runAsNonRoot": True, "fsGroup": 2000,
                                    "supplementalGroups": [4000]}},
               securityContext={"runAsUser": 1500, "privileged": False})
    assert sc.effective(p, c) == {"runAsUser": 1500, "runAsGroup": 3000, "runAsNonRoot": True,
                                  "privileged": False}


def test_nothing_asked_is_nothing_given() -> None:
    assert sc.engine_options(*pod()) == {}


def test_what_the_engine_is_asked_for() -> None:
    p, c = pod({"hostPID": True, "hostIPC": True,
                "securityContext": {"runAsUser": 1000, "supplementalGroups": [4000, 2000],
                                    "fsGroup": 2000,
                                    "sysctls": [{"name": "net.core.somaxconn", "value": "1024"}],
                                    "seccompProfile": {"type": "Unconfined"}}},
               securityContext={"runAsGroup": 3000, "privileged": True,
                                "capabilities": {"add": ["NET_ADMIN"], "drop": ["ALL"]},
                                "readOnlyRootFilesystem": True,
                                "allowPrivilegeEscalation": False})
    assert sc.engine_options(p, c) == {
        "pid_mode": "host", "ipc_mode": "host", "privileged": True,
        "cap_add": ["NET_ADMIN"], "cap_drop": ["ALL"], "user": "1000:3000",
        "group_add": ["4000", "2000"], "read_only": True,
        "security_opt": ["no-new-privileges", "seccomp=unconfined"],
        "sysctls": {"net.core.somaxconn": "1024"}}


@pytest.mark.parametrize(("image_user", "user"), [("", "0:3000"), ("app", "app:3000"),
                                                  ("1000:1000", "1000:3000")])
def test_a_group_without_a_user_is_the_images_user_in_that_group(image_user: str,
                                                                  user: str) -> None:
    assert sc.engine_options(*pod(securityContext={"runAsGroup": 3000}),
                             image_user=image_user)["user"] == user


def test_a_runtime_default_profile_is_the_engines_and_a_localhost_one_is_refused() -> None:
    assert sc.engine_options(*pod(securityContext={
        "seccompProfile": {"type": "RuntimeDefault"}})) == {}
    with pytest.raises(ConfigError, match="Localhost"):
        sc.engine_options(*pod(securityContext={
            "seccompProfile": {"type": "Localhost", "localhostProfile": "x.json"}}))


WHERE = '(pod: "p_ns(u1)", container: app)'


@pytest.mark.parametrize(("context", "image_user", "why"), [
    ({}, "", None),  # not asked
    ({"runAsNonRoot": False}, "", None),
    ({"runAsNonRoot": True}, "", f"container has runAsNonRoot and image will run as root {WHERE}"),
    ({"runAsNonRoot": True}, "0:0",
     f"container has runAsNonRoot and image will run as root {WHERE}"),
    ({"runAsNonRoot": True}, "nobody", "container has runAsNonRoot and image has non-numeric "
     f"user (nobody), cannot verify user is non-root {WHERE}"),
    ({"runAsNonRoot": True}, "65534", None),
    ({"runAsNonRoot": True, "runAsUser": 1000}, "", None),  # its own user, whatever the image's
    ({"runAsNonRoot": True, "runAsUser": 0}, "65534",
     f"container's runAsUser breaks non-root policy {WHERE}"),
])
def test_run_as_non_root_is_checked_as_kubelet_checks_it(context: dict[str, Any],
                                                         image_user: str,
                                                         why: str | None) -> None:
    assert sc.non_root_error(*pod(securityContext=context), image_user) == why


def test_run_as_non_root_from_the_pod_holds_for_each_container() -> None:
    p, c = pod({"securityContext": {"runAsNonRoot": True}})
    assert sc.non_root_error(p, c, "") is not None
    assert sc.non_root_error(p, c, "1000") is None
