"""This machine as a Node (acts: reads the host): the facts a kubelet registers and reports.

psutil reads them: CPU count, memory and network addresses the same way on every OS it
supports (rather than parsing /proc, sysctl or ipconfig), and the process runtime needs it
anyway for process start times and trees (``procs``).
"""

from __future__ import annotations

import ipaddress
import os
import platform
import re
import socket
import urllib.parse
from pathlib import Path
from typing import Any

import psutil

from services.node_agent import lifecycle
from shared.api import metrics

Obj = dict[str, Any]

# platform.machine() → GOARCH, as kubernetes.io/arch is spelled
_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64",
         "armv7l": "arm", "armv6l": "arm", "i386": "386", "i686": "386", "ppc64le": "ppc64le",
         "s390x": "s390x", "riscv64": "riscv64"}


def os_name() -> str:
    """GOOS: linux, darwin, windows, …"""
    return platform.system().lower() or "linux"


def arch() -> str:
    machine = platform.machine().lower()
    return _ARCH.get(machine, machine or "amd64")


def hostname() -> str:
    """The node name kubelet defaults to: the host name, lower case."""
    return socket.gethostname().lower()


def route_ip(url: str | None) -> str | None:
    """The address this machine reaches the host of ``url`` (the cluster's Redis) from: the
    one the control plane reaches it at, where it has several networks. None for a Redis on
    this machine (loopback) or one it has no route to. Nothing is sent (a UDP socket's
    connect only picks the route)."""
    try:
        parts = urllib.parse.urlsplit(url or "")
        host, port = parts.hostname, parts.port or 6379
        if not host:
            return None
        info = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_DGRAM)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(info[0][4])
            ip = ipaddress.ip_address(s.getsockname()[0])
    except (OSError, IndexError, ValueError):
        return None
    return None if ip.is_loopback or ip.is_unspecified else str(ip)


def primary_ip() -> str:
    """The first non-loopback IPv4 address of an interface that is up; 127.0.0.1 without."""
    stats = psutil.net_if_stats()
    for ifname, addrs in sorted(psutil.net_if_addrs().items()):
        if ifname in stats and not stats[ifname].isup:
            continue
        for addr in addrs:
            if addr.family != socket.AF_INET:
                continue
            ip = ipaddress.ip_address(addr.address)
            if not ip.is_loopback and not ip.is_link_local:
                return str(ip)
    return "127.0.0.1"


def resources() -> Obj:
    """status.capacity as kubelet reports it: cpu cores, memory in Ki, pods."""
    return {"cpu": str(psutil.cpu_count() or 1),
            "memory": f"{psutil.virtual_memory().total // 1024}Ki",
            "pods": str(lifecycle.MAX_PODS)}


def usage() -> metrics.Sample:
    """The node's CPU time used so far (every CPU's time not idle nor waiting for I/O,
    seconds) and its memory in use (total less available, as kubelet's node working set
    approximates it)."""
    t = psutil.cpu_times()
    busy = sum(t) - t.idle - getattr(t, "iowait", 0.0)
    # (guest time is counted in user time already: once)
    busy -= getattr(t, "guest", 0.0) + getattr(t, "guest_nice", 0.0)
    mem = psutil.virtual_memory()
    return metrics.Sample(busy, int(mem.total - mem.available))


# kubelet's default hard eviction thresholds (its eviction manager reports each signal
# under its threshold as the node's pressure condition): memory.available<100Mi,
# nodefs.available<10%, nodefs.inodesFree<5%; it sets none for pid.available by default
MEMORY_AVAILABLE_MIN = 100 * 2**20
NODEFS_AVAILABLE_MIN = 0.10
NODEFS_INODES_FREE_MIN = 0.05


def pressure(root: Path) -> dict[str, bool]:
    """kubelet's MemoryPressure, DiskPressure (of the file system holding ``root``, its
    state) and PIDPressure, by its default thresholds."""
    fs = os.statvfs(root)
    space = fs.f_bavail / fs.f_blocks if fs.f_blocks else 1.0
    inodes = fs.f_favail / fs.f_files if fs.f_files else 1.0
    return {"MemoryPressure": psutil.virtual_memory().available < MEMORY_AVAILABLE_MIN,
            "DiskPressure": space < NODEFS_AVAILABLE_MIN or inodes < NODEFS_INODES_FREE_MIN,
            "PIDPressure": False}


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii") as f:
            return f.read().strip()
    except (OSError, ValueError):
        return ""


_PRETTY_NAME = re.compile(r'^PRETTY_NAME="?([^"\n]+)"?', re.MULTILINE)


def os_image(os_release: str = "/etc/os-release") -> str:
    """status.nodeInfo.osImage, as kubelet's (cadvisor's) on Linux: the ``PRETTY_NAME`` of
    the os-release file ("Debian GNU/Linux 12 (bookworm)"), else "Linux"; elsewhere the
    system and its release."""
    if platform.system() != "Linux":
        uname = platform.uname()
        return f"{uname.system} {uname.release}"
    try:
        with open(os_release, encoding="utf-8", errors="replace") as f:
            found = _PRETTY_NAME.search(f.read())
    except OSError:
        found = None
    return found.group(1) if found else "Linux"


def node_info(runtime_version: str = "process://daemonbus") -> Obj:
    """status.nodeInfo: kubelet reads the same files (machine-id, DMI product UUID, the
    kernel's boot id); a field the host does not have is empty."""
    uname = platform.uname()
    return {"machineID": _read("/etc/machine-id"),
            "systemUUID": _read("/sys/class/dmi/id/product_uuid").lower(),
            "bootID": _read("/proc/sys/kernel/random/boot_id"),
            "kernelVersion": uname.release, "osImage": os_image(),
            "containerRuntimeVersion": runtime_version,
            "kubeletVersion": lifecycle.KUBELET_VERSION, "kubeProxyVersion": "",
            "operatingSystem": os_name(), "architecture": arch()}


def host_status(node_ip: str, runtime_version: str = "process://daemonbus",
                port: int = 0) -> Obj:
    """The status fields a kubelet owns: capacity, allocatable, nodeInfo, addresses, and
    the port of its own endpoint (``daemonEndpoints``; 0: none)."""
    cap = resources()
    return {"capacity": cap, "allocatable": dict(cap), "nodeInfo": node_info(runtime_version),
            "addresses": [{"type": "InternalIP", "address": node_ip},
                          {"type": "Hostname", "address": hostname()}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": port}}}


def new_node(name: str, node_ip: str, labels: dict[str, str],
             taints: list[Obj], runtime_version: str = "process://daemonbus",
             port: int = 0) -> Obj:
    """This machine as a kubelet registers it: the well-known labels from the host (any
    --label on top), --register-with-taints, and its status fields."""
    base = {"kubernetes.io/hostname": name, "kubernetes.io/os": os_name(),
            "kubernetes.io/arch": arch()}
    node = lifecycle.new_node(name, {**base, **labels}, taints)
    node["status"].update(host_status(node_ip, runtime_version, port))
    return node
