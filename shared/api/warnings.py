"""Warnings an accepted write draws: a registry strategy's ``WarningsOnCreate`` and
``WarningsOnUpdate``. The API server sends each as a ``Warning`` header (kubectl prints
``Warning: <text>``), the CLI's ``apply`` prints it the same way. Pure: decides.

* A DaemonSet whose pods hold a ``hostPort`` and whose rolling update may surge
  (``maxSurge`` > 0): the surge pod is created beside the old one on the same node and cannot
  bind the port the old pod holds, so it never becomes ready and that node's update waits
  for ever (kubernetes#106417). A ``hostNetwork`` pod's container ports are host ports too.
"""

from __future__ import annotations

from typing import Any

from shared.daemonset import dsutil, rollout
from shared.model import fielderr

Obj = dict[str, Any]


def _host_ports(pod_spec: Obj) -> list[tuple[str, int]]:
    """(field path, port) of every host port a pod of ``pod_spec`` binds."""
    host_network = pod_spec.get("hostNetwork") is True
    out: list[tuple[str, int]] = []
    for section in ("initContainers", "containers"):
        containers = pod_spec.get(section)
        for i, ctr in enumerate(containers if isinstance(containers, list) else []):
            ports = ctr.get("ports") if isinstance(ctr, dict) else None
            for j, port in enumerate(ports if isinstance(ports, list) else []):
                if not isinstance(port, dict):
                    continue
                path = f"spec.template.spec.{section}[{i}].ports[{j}]"
                host = port.get("hostPort")
                if isinstance(host, int) and not isinstance(host, bool) and host > 0:
                    out.append((f"{path}.hostPort", host))
                elif host_network and isinstance(port.get("containerPort"), int):
                    out.append((f"{path}.containerPort", int(port["containerPort"])))
    return out


def daemonset_warnings(ds: Obj) -> list[str]:
    """The warnings of a DaemonSet (see the module docstring)."""
    if not rollout.allows_surge(ds):
        return []
    surge = dsutil.update_strategy(ds).max_surge
    return [f"{path}: host port {port} with spec.updateStrategy.rollingUpdate.maxSurge "
            f"{fielderr.render(surge)}: a surge pod cannot bind the host port its node's old pod holds, so "
            "the rolling update of that node waits for ever; set maxSurge to 0 (replace each "
            "pod in place) or drop the host port"
            for path, port in _host_ports(dsutil.template_spec(ds))]


def warnings(obj: Any) -> list[str]:
    """The warnings an accepted write of ``obj`` draws (none for most objects)."""
    if isinstance(obj, dict) and obj.get("kind") == "DaemonSet":
        return daemonset_warnings(obj)
    return []
