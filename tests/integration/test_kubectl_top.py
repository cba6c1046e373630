"""``kubectl top`` with the real kubectl, through the API server's Metrics API, from what a
process runtime's node agent measures: a container that holds 64 MiB and burns half a core
shows about that (generous bounds: the machine is shared), the real node is listed and the
simulated one is not, a simulated node's pod has no metrics (metrics-server's words), and
the official Python client reads the same API."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from kubernetes import client, config

from shared.model import meta
from tests.integration.apiserver_kit import ApiServer
from tests.integration.stack import wait_for
from tests.integration.test_node_agent_process import Machine, machine
from tests.integration.test_pod_logs import agent_pod

__all__ = ["machine"]  # the fixture, shared with the process runtime's tests

# 64 MiB written (resident), then busy half of every tenth of a second
BURN = ("import time\n"
        "held = b'x' * (64 << 20)\n"
        "while True:\n"
        "    t = time.monotonic()\n"
        "    while time.monotonic() - t < 0.05:\n"
        "        pass\n"
        "    time.sleep(0.05)\n")


def burner(image: str = "python:3", python: str = "python3") -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "burner", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "burner"}},
                     "template": {"metadata": {"labels": {"app": "burner"}}, "spec": {
                         "terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "burn", "image": image,
                                         "command": [python, "-c", BURN]}]}}}}


def top_row(out: str) -> tuple[str, int, int]:
    """A ``kubectl top`` line without headers: the name, millicores, MiB."""
    m = re.fullmatch(r"(\S+)\s+(\d+)m\s+(\d+)Mi(?:\s+\S+)*\s*", out)
    assert m is not None, f"not a line of kubectl top: {out!r}"
    return m[1], int(m[2]), int(m[3])


def assert_burns_and_holds(cpu_m: int, memory_mi: int) -> None:
    """Half a core (the machine's other work may take some of it: from a fifth), and the
    64 MiB with the interpreter's own."""
    assert 100 <= cpu_m <= 900, f"{cpu_m}m of CPU"
    assert 64 <= memory_mi <= 160, f"{memory_mi}Mi of memory"


def measured(api: ApiServer, *args: str) -> str | None:
    """``kubectl top`` with ``args`` once it has something to show, else None."""
    got = api.kubectl("top", *args, "--no-headers", check=False)
    return got.stdout if got.returncode == 0 and got.stdout.strip() else None


def test_kubectl_top_shows_what_a_process_agent_measures(machine: Machine,
                                                         tmp_path: Path) -> None:
    stack = machine.stack
    node, pod = agent_pod(machine, burner(), "--metrics-resolution", "2")
    name = meta.name(pod)
    stack.start("sim-agent", "node-agent", "--nodes", "1", "--name-prefix", "sim-",
                "--serve-prefix", "sim-")
    api = ApiServer(stack, tmp_path)
    api.start()

    # two windows in, the burner has spun for a whole one
    row = wait_for(lambda: measured(api, "pod", name), timeout=60, interval=0.5,
                   what="the pod's metrics")
    shown, cpu_m, memory_mi = top_row(row.strip())
    assert shown == name
    assert_burns_and_holds(cpu_m, memory_mi)

    containers = api.kubectl("top", "pod", name, "--containers").stdout.splitlines()
    assert containers[0].split() == ["POD", "NAME", "CPU(cores)", "MEMORY(bytes)"]
    assert containers[1].split()[:2] == [name, "burn"]
    assert api.kubectl("top", "pod", "-l", "app=burner", "--sort-by=cpu",
                       "--no-headers").stdout.split()[0] == name
    assert measured(api, "pod", "-l", "app=nothing") is None

    nodes = wait_for(lambda: measured(api, "node"), timeout=30, what="the node's metrics")
    real, simulated = nodes.splitlines()
    assert re.fullmatch(rf"{re.escape(node)}\s+\d+m\s+\d+%\s+\d+Mi\s+\d+%\s*", real)
    # the simulated node has no metrics (none are made up): kubectl's words for that
    assert simulated.split() == ["sim-00001", *["<unknown>"] * 4]
    sorted_by_memory = api.kubectl("top", "node", "--sort-by=memory", "--no-headers").stdout
    assert sorted_by_memory.split()[0] == node

    # the simulated node's pod runs (make-believe) and has no metrics
    def simulated_pod() -> str | None:
        on_sim = [p for p in stack.pods("default")
                  if (p.get("spec") or {}).get("nodeName", "").startswith("sim-")]
        return meta.name(on_sim[0]) if on_sim else None
    sim = wait_for(simulated_pod, what="the simulated node's pod")
    missing = api.kubectl("top", "pod", sim, check=False)
    assert missing.returncode != 0
    assert f'podmetrics.metrics.k8s.io "default/{sim}" not found' in missing.stderr
    everything = api.kubectl("top", "pod", "-A", "--no-headers").stdout
    assert [line.split()[:2] for line in everything.splitlines()] == [["default", name]]
    gone = api.kubectl("top", "node", "sim-00001", check=False)
    assert 'nodemetrics.metrics.k8s.io "sim-00001" not found' in gone.stderr

    # the view role reads them; nobody writes them
    assert api.kubectl("auth", "can-i", "list", "pods.metrics.k8s.io",
                       user="viewer").stdout.strip() == "yes"
    assert api.kubectl("top", "pod", name, "--no-headers", user="viewer").stdout
    assert api.kubectl("auth", "can-i", "create", "pods.metrics.k8s.io", user="editor",
                       check=False).stdout.strip() == "no"

    # the official Python client
    metrics_api = client.CustomObjectsApi(
        config.new_client_from_config(config_file=str(api.kubeconfig())))
    listed_nodes = metrics_api.list_cluster_custom_object("metrics.k8s.io", "v1beta1", "nodes")
    assert listed_nodes["kind"] == "NodeMetricsList"
    (item,) = listed_nodes["items"]
    assert item["metadata"]["name"] == node
    assert re.fullmatch(r"\d+(n|u|m)?", item["usage"]["cpu"])
    assert re.fullmatch(r"\d+(Ki|Mi|Gi)?", item["usage"]["memory"])
    assert re.fullmatch(r"\d+(\.\d+)?s", item["window"])
    assert item["metadata"]["labels"]["kubernetes.io/hostname"]
    pods = metrics_api.list_namespaced_custom_object("metrics.k8s.io", "v1beta1", "default",
                                                     "pods")
    assert [(p["metadata"]["name"], [c["name"] for c in p["containers"]])
            for p in pods["items"]] == [(name, ["burn"])]
