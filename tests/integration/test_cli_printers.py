"""The CLI's output rules that need no Redis: tabwriter alignment, the describe events table,
and that every command documents itself with an example (the get columns are
shared.api.tables', tested with it)."""

from __future__ import annotations

from typing import Any

import click
import pytest
from click.testing import CliRunner

from services.cli import printers, sections
from services.cli.main import cli

Obj = dict[str, Any]


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
