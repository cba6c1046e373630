"""The warnings an accepted write draws (``shared.api.warnings``): a DaemonSet whose pods
hold a host port and whose rolling update may surge (kubernetes#106417)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from shared.api import warnings
from shared.model import defaults
from tests import testdata
from tests.unit.daemonset_fixtures import make_ds, rolling

Obj = dict[str, Any]

TESTDATA = testdata.DAEMONSETS
PORT = "spec.template.spec.containers[0].ports[0]"


def with_ports(strategy: Obj | None, ports: list[Obj], host_network: bool = False) -> Obj:
    ds = make_ds(strategy=strategy)
    spec = ds["spec"]["template"]["spec"]
    spec["containers"][0]["ports"] = ports
    if host_network:
        spec["hostNetwork"] = True
    return ds


@pytest.mark.parametrize(
    ("strategy", "ports", "host_network", "paths"),
    [
        (rolling(0, 1), [{"containerPort": 80, "hostPort": 8080}], False, [f"{PORT}.hostPort"]),
        (rolling(1, "10%"), [{"containerPort": 80, "hostPort": 8080}], False,
         [f"{PORT}.hostPort"]),
        # a host-network pod's container ports are host ports
        (rolling(0, 1), [{"containerPort": 9100}], True, [f"{PORT}.containerPort"]),
        (rolling(1, 0), [{"containerPort": 80, "hostPort": 8080}], False, []),  # no surge
        (rolling(1, "0%"), [{"containerPort": 80, "hostPort": 8080}], False, []),
        ({"type": "OnDelete"}, [{"containerPort": 80, "hostPort": 8080}], False, []),
        (None, [{"containerPort": 80, "hostPort": 8080}], False, []),  # defaults: maxSurge 0
        (rolling(0, 1), [{"containerPort": 80}], False, []),  # no host port
    ],
)
def test_a_host_port_with_max_surge_draws_a_warning(
        strategy: Obj | None, ports: list[Obj], host_network: bool, paths: list[str]) -> None:
    ds = with_ports(strategy, ports, host_network)
    got = warnings.warnings(ds)
    assert [w.split(":", 1)[0] for w in got] == paths
    assert warnings.warnings(defaults.default(ds)) == got  # defaulted or not, the same


def test_the_warning_names_the_port_and_the_surge() -> None:
    ds = with_ports(rolling(0, "25%"), [{"containerPort": 80, "hostPort": 8080}])
    assert warnings.warnings(ds) == [
        f'{PORT}.hostPort: host port 8080 with spec.updateStrategy.rollingUpdate.maxSurge '
        '"25%": a surge pod cannot bind the host port its node\'s old pod holds, so the '
        "rolling update of that node waits for ever; set maxSurge to 0 (replace each pod in "
        "place) or drop the host port"]


def test_a_real_manifest_with_a_host_port_warns_only_once_it_surges() -> None:
    ds = yaml.safe_load((TESTDATA / "kube-prometheus-node-exporter.yaml").read_text())
    assert warnings.warnings(ds) == []
    ds["spec"]["updateStrategy"]["rollingUpdate"] = {"maxUnavailable": 0, "maxSurge": 1}
    assert len(warnings.warnings(ds)) == 1
    assert warnings.warnings({"kind": "Pod", "spec": {"hostNetwork": True}}) == []
