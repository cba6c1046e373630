"""How objects look on the terminal, as kubectl prints them: aligned tables (``get``), and
the JSON, YAML and name outputs. Pure: objects and ``now`` in, text out.

The ``get`` columns are the API's Table columns (:mod:`shared.api.tables`, upstream's
pkg/printers/internalversion), so the CLI and kubectl against the API server print the same;
alignment is Go's ``text/tabwriter`` with kubectl's settings (min width 6, padding 3).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import yaml

from services.cli import resources
from shared.api import tables
from shared.model import kinds, meta

Obj = dict[str, Any]
NONE = "<none>"


# ---- alignment ----------------------------------------------------------------------------


def tabwrite(lines: Sequence[str], minwidth: int, padding: int) -> str:
    """Align tab-separated cells as Go's ``text/tabwriter`` does: a column block is a run of
    consecutive lines that have a tab-terminated cell in that column; every cell of a block
    is padded to the block's widest cell plus ``padding`` (at least ``minwidth``). The last
    cell of a line is not terminated, so it is never padded."""
    rows = [line.split("\t") for line in lines]
    widths: list[list[int]] = [[0] * (len(r) - 1) for r in rows]

    def block(first: int, last: int, col: int) -> None:
        i = first
        while i < last:
            if len(rows[i]) - 1 <= col:
                i += 1
                continue
            j, width = i, minwidth
            while j < last and len(rows[j]) - 1 > col:
                width = max(width, len(rows[j][col]) + padding)
                j += 1
            for k in range(i, j):
                widths[k][col] = width
            block(i, j, col + 1)
            i = j

    block(0, len(rows), 0)
    out = []
    for row, ws in zip(rows, widths, strict=True):
        cells = [c.ljust(w) for c, w in zip(row, ws, strict=False)] + [row[-1]]
        out.append("".join(cells))
    return "\n".join(out) + ("\n" if out else "")


def table(header: Sequence[str] | None, rows: Sequence[Sequence[str]]) -> str:
    """A ``get`` table (kubectl: min width 6, padding 3)."""
    lines = ["\t".join(header)] if header else []
    lines += ["\t".join(r) for r in rows]
    return tabwrite(lines, 6, 3)


# ---- the get table ----------------------------------------------------------------------


def _join_labels(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or NONE


def sort_objects(kind: str, objs: list[Obj]) -> list[Obj]:
    """kubectl's order: by namespace and name; Events by time."""
    if kind == "Event":
        return sorted(objs, key=lambda e: (tables.event_time(e), meta.name(e)))
    return sorted(objs, key=lambda o: (meta.namespace(o), meta.name(o)))


def get_table(rt: kinds.KindInfo, objs: list[Obj], now: float, *, wide: bool = False,
              all_namespaces: bool = False, show_kind: bool = False, headers: bool = True,
              show_labels: bool = False, label_columns: Sequence[str] = ()) -> str:
    """The ``get`` table of objects of one type: the columns of the API's Table
    (:mod:`shared.api.tables`) that kubectl shows, plus its NAMESPACE, -L and LABELS
    columns."""
    columns = tables.columns(rt.kind)
    shown = tables.visible(rt.kind, wide)
    header = [columns[i].header for i in shown]
    header += [k.rsplit("/", 1)[-1].upper() for k in label_columns]
    if show_labels:
        header.append("LABELS")
    with_namespace = all_namespaces and rt.namespaced
    if with_namespace:
        header.insert(0, "NAMESPACE")
    rows = []
    for obj in objs:
        cells = tables.cells(rt.kind, obj, now)
        row = [resources.ref(rt, meta.name(obj)) if show_kind and columns[i].format == "name"
               else tables.text(cells[i]) for i in shown]
        row += [meta.labels(obj).get(k, "") for k in label_columns]
        if show_labels:
            row.append(_join_labels(meta.labels(obj)))
        if with_namespace:
            row.insert(0, meta.namespace(obj))
        rows.append(row)
    return table(header if headers else None, rows)


# ---- structured output --------------------------------------------------------------------


def as_list(items: list[Obj]) -> Obj:
    """kubectl's List wrapper for several objects."""
    return {"apiVersion": "v1", "items": items, "kind": "List",
            "metadata": {"resourceVersion": ""}}


def to_json(obj: Any) -> str:
    """Indented as kubectl prints it (4 spaces, keys sorted as Go marshals a map)."""
    return json.dumps(obj, indent=4, sort_keys=True, ensure_ascii=False) + "\n"


class _KubectlDumper(yaml.SafeDumper):
    """go-yaml's choices: double quotes where quoting is needed, ``|`` for multi-line text."""

    def choose_scalar_style(self) -> Any:
        style = super().choose_scalar_style()
        return '"' if style == "'" else style


def _str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", data,
                                   style="|" if "\n" in data else None)


_KubectlDumper.add_representer(str, _str)


def to_yaml(obj: Any) -> str:
    """Block-style YAML with sorted keys and unindented lists, as kubectl prints it."""
    return str(yaml.dump(obj, Dumper=_KubectlDumper, default_flow_style=False, sort_keys=True,
                         allow_unicode=True, width=1 << 30))
