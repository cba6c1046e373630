"""The CLI's output rules that need no Redis: kubectl's ages, tabwriter alignment, pod and
node status columns, and that every command documents itself with an example."""

from __future__ import annotations

from typing import Any

import click
import pytest
from click.testing import CliRunner

from services.cli import printers, sections
from services.cli.main import cli

Obj = dict[str, Any]


@pytest.mark.parametrize(("seconds", "text"), [
    (-5, "<invalid>"), (-1, "0s"), (0, "0s"), (5, "5s"), (119, "119s"), (120, "2m"),
    (182, "3m2s"), (599, "9m59s"), (600, "10m"), (3 * 3600 - 1, "179m"), (4 * 3600, "4h"),
    (5 * 3600 + 180, "5h3m"), (47 * 3600, "47h"), (48 * 3600, "2d"), (76 * 3600, "3d4h"),
    (10 * 86400, "10d"), (800 * 86400, "2y70d"), (9 * 365 * 86400, "9y"),
])
def test_ages_read_like_kubectl(seconds: int, text: str) -> None:
    assert printers.human_duration(seconds) == text


def test_age_of_a_missing_timestamp_is_unknown() -> None:
    assert printers.age(None, 0) == "<unknown>"


def test_tabwriter_aligns_each_run_of_lines_separately() -> None:
    lines = ["Name:\tx", "Labels:\ta=b", "\tc=d", "Desired Number: 1", "Pods Status:\t1"]

    assert printers.tabwrite(lines, 0, 2) == (
        "Name:    x\n"
        "Labels:  a=b\n"
        "         c=d\n"
        "Desired Number: 1\n"
        "Pods Status:  1\n")


def test_table_columns_are_padded_three_spaces_and_at_least_six() -> None:
    assert printers.table(["NAME", "AGE"], [["a", "1s"]]) == "NAME   AGE\na      1s\n"


def _pod(**status: Any) -> Obj:
    return {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]},
            "status": status}


def test_pod_status_column() -> None:
    waiting = _pod(phase="Running", containerStatuses=[
        {"name": "c", "ready": False, "restartCount": 4,
         "state": {"waiting": {"reason": "CrashLoopBackOff"}}}])
    assert printers.pod_row(waiting, 0, False)[:3] == ["0/1", "CrashLoopBackOff", "4"]

    ready_by_condition = _pod(phase="Running",
                              conditions=[{"type": "Ready", "status": "True"}])
    assert printers.pod_row(ready_by_condition, 0, False)[:2] == ["1/1", "Running"]

    terminating = _pod(phase="Running")
    terminating["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    assert printers.pod_row(terminating, 0, False)[1] == "Terminating"

    assert printers.pod_row(_pod(), 0, True)[4:] == ["<none>", "<none>", "<none>", "<none>"]


def test_node_status_column() -> None:
    node: Obj = {"spec": {"unschedulable": True},
                 "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    assert printers.node_status(node) == "Ready,SchedulingDisabled"
    assert printers.node_status({}) == "Unknown"


def test_describe_events_table_counts_repeats() -> None:
    w = sections.Writer()
    sections.events(w, [{"type": "Warning", "reason": "FailedDaemonPod", "count": 3,
                         "firstTimestamp": "1970-01-01T00:00:00Z",
                         "lastTimestamp": "1970-01-01T00:01:00Z",
                         "source": {"component": "daemonset-controller"},
                         "message": "Found failed daemon pod"}], now=300)
    assert w.text() == (
        "Events:\n"
        "  Type     Reason           Age              From                  Message\n"
        "  ----     ------           ----             ----                  -------\n"
        "  Warning  FailedDaemonPod  4m (x3 over 5m)  daemonset-controller  "
        "Found failed daemon pod\n")


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for name, cmd in group.commands.items():
        out.append((*path, name))
        if isinstance(cmd, click.Group):
            out += _commands(cmd, (*path, name))
    return out


OWN = {"apply", "get", "describe", "delete", "label", "taint", "cordon", "uncordon", "node"}


@pytest.mark.parametrize("command", [c for c in _commands(cli) if c[0] in OWN],
                         ids=" ".join)
def test_every_command_has_help_with_an_example(command: tuple[str, ...]) -> None:
    result = CliRunner().invoke(cli, [*command, "--help"])

    assert result.exit_code == 0
    assert "Example" in result.stdout
