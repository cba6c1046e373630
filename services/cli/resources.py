"""What the CLI's arguments name: resource types (kubectl's names for the five kinds),
``TYPE NAME...`` / ``TYPE/NAME`` arguments, and label selectors (``-l``). Decides only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from services.cli.errors import CliError
from shared.model import kinds, labels

Obj = dict[str, Any]


def resolve(name: str) -> kinds.KindInfo:
    """The kind a kubectl resource name means (``ds``, ``daemonsets.apps``, ``DaemonSet``)."""
    try:
        return kinds.resolve(name.strip())
    except kinds.UnknownResourceError as err:
        raise CliError(str(err)) from err


def ref(info: kinds.KindInfo, name: str) -> str:
    """``daemonset.apps/x``: how ``-o name`` and apply name an object."""
    return f"{info.qualified_name}/{name}"


def store_key(info: kinds.KindInfo, name: str, namespace: str) -> str:
    """The store key of ``name``: "<namespace>/<name>", "/<name>" when cluster-scoped."""
    return f"{namespace if info.namespaced else ''}/{name}"


# ---- TYPE NAME... and TYPE/NAME arguments ---------------------------------------------------


@dataclass(frozen=True)
class Target:
    """A resource type and, when the user named one, an object name."""

    info: kinds.KindInfo
    name: str | None = None


def parse_targets(args: tuple[str, ...] | list[str], verb: str = "get") -> list[Target]:
    """kubectl's resource builder: ``TYPE[,TYPE...] [NAME...]`` or ``TYPE/NAME...``."""
    if not args:
        raise CliError(f"error: You must specify the type of resource to {verb}. Use "
                       f"\"daemonbus {verb} --help\" for the supported resource types.")
    if any("/" in a for a in args):
        if not all("/" in a for a in args):
            raise CliError(f"error: there is no need to specify a resource type as a separate "
                           "argument when passing arguments in resource/name form (e.g. "
                           f"'daemonbus {verb} resource/<resource_name>' instead of "
                           f"'daemonbus {verb} resource resource/<resource_name>')")
        out = []
        for a in args:
            type_name, _, name = a.partition("/")
            if not name:
                raise CliError(f"error: arguments in resource/name form must have a single "
                               f"resource and name: {a}")
            out.append(Target(resolve(type_name), name))
        return out
    types = [resolve(t) for t in args[0].split(",") if t]
    names = list(args[1:])
    if not names:
        return [Target(t) for t in types]
    if len(types) != 1:
        raise CliError("error: you must specify only one resource type when naming objects")
    return [Target(types[0], n) for n in names]


def parse_selector(text: str | None) -> labels.Selector | None:
    """A kubectl ``-l`` selector, or None when not given."""
    if not text:
        return None
    try:
        return labels.parse_selector(text)
    except ValueError as err:
        raise CliError(f"error: {err}") from err
