"""kubelet's atomic writer (pkg/volume/util/atomic_writer.go): a volume's files written so
that a reader sees either the old set or the new one, never a mix. Acts (the file system).

Layout of a volume's directory::

    ..2026_12_07_10_00_00.123456   the files of one version (a fresh directory each time)
    ..data -> ..2026_12_07_...     the current version: replaced by one rename
    <name> -> ..data/<name>        each top-level path the payload has, as the user sees it

An update writes the new version's directory, points a new symlink ``..data_tmp`` at it and
renames that over ``..data`` (atomic), then adds the top-level links the new payload has and
removes those it no longer has, then the old version's directory.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from services.node_agent import configvolumes

DATA = "..data"
DATA_TMP = "..data_tmp"


def current(target: Path) -> configvolumes.Payload | None:
    """What the volume at ``target`` holds now (None: nothing written yet)."""
    link = target / DATA
    if not link.is_symlink():
        return None
    root = target / os.readlink(link)
    out: configvolumes.Payload = {}
    for path in root.rglob("*"):
        if path.is_file():
            out[str(path.relative_to(root))] = (path.read_bytes(), path.stat().st_mode & 0o777)
    return out


def write(target: Path, payload: configvolumes.Payload, clock: float | None = None) -> bool:
    """Make the volume at ``target`` hold ``payload`` (relative path → bytes, mode); False
    when it holds it already."""
    if current(target) == payload:
        return False
    target.mkdir(parents=True, exist_ok=True)
    target.chmod(0o755)
    stamp = time.strftime("..%Y_%m_%d_%H_%M_%S.", time.gmtime(clock))
    version = Path(tempfile.mkdtemp(prefix=stamp, dir=target))
    version.chmod(0o755)
    for rel, (data, mode) in payload.items():
        path = version / rel
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        path.write_bytes(data)
        path.chmod(mode)
    old = os.readlink(target / DATA) if (target / DATA).is_symlink() else None
    tmp = target / DATA_TMP
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(version.name)
    os.replace(tmp, target / DATA)
    visible = {Path(rel).parts[0] for rel in payload}
    for name in visible:
        link = target / name
        if not link.is_symlink():
            link.symlink_to(f"{DATA}/{name}")
    for link in target.iterdir():
        if not link.name.startswith("..") and link.name not in visible and link.is_symlink():
            link.unlink()
    if old is not None and old != version.name:
        shutil.rmtree(target / old, ignore_errors=True)
    return True
