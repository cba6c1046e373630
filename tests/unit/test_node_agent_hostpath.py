"""A hostPath volume's type as kubelet's hostPath plugin checks it, in its words."""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path

from services.node_agent import hostpath


def test_an_unset_type_checks_nothing_but_backsteps(tmp_path: Path) -> None:
    assert hostpath.check(str(tmp_path / "missing"), "") is None
    assert hostpath.check("/var/../etc", "") == \
        "invalid HostPath `/var/../etc`: must not contain '..'"


def test_each_type_matches_its_kind_of_file(tmp_path: Path) -> None:
    regular = tmp_path / "f"
    regular.write_text("x")
    with contextlib.closing(socket.socket(socket.AF_UNIX)) as s:
        s.bind(str(tmp_path / "s"))
        assert hostpath.check(str(tmp_path / "s"), "Socket") is None
        assert hostpath.check(str(tmp_path / "s"), "File") == (
            f"hostPath type check failed: {tmp_path}/s is not a file, it's a Socket")
    assert hostpath.check(str(tmp_path), "Directory") is None
    assert hostpath.check(str(regular), "File") is None
    assert hostpath.check("/dev/null", "CharDevice") is None
    assert hostpath.check(str(regular), "Directory") == (
        f"hostPath type check failed: {regular} is not a directory, it's a File")
    assert hostpath.check("/dev/null", "BlockDevice") == (
        "hostPath type check failed: /dev/null is not a block device, it's a CharDevice")
    assert hostpath.check(str(tmp_path / "none"), "Socket") == (
        f"hostPath {tmp_path}/none doesn't exist")
    assert hostpath.check(str(tmp_path), "Folder") == "Folder is an invalid volume type"


def test_or_create_types_make_what_is_missing_and_check_what_is_there(tmp_path: Path) -> None:
    made = tmp_path / "a" / "b"
    assert hostpath.check(str(made), "DirectoryOrCreate") is None
    assert made.is_dir()
    assert hostpath.check(str(made / "file"), "FileOrCreate") is None
    assert (made / "file").is_file() and (made / "file").read_bytes() == b""
    assert hostpath.check(str(made / "file"), "DirectoryOrCreate") == (
        f"hostPath type check failed: {made}/file is not a directory, it's a File")
    assert hostpath.check(str(made), "FileOrCreate") == (
        f"hostPath type check failed: {made} is not a file, it's a Directory")
    why = hostpath.check(str(made / "file" / "sub"), "DirectoryOrCreate")
    assert why is not None and why.startswith(f"mkdir {made}/file") and \
        why.endswith(": not a directory"), why
