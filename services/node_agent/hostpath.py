"""A hostPath volume's ``type``, checked before any container of its pod starts, as kubelet's
hostPath plugin checks it (``checkType``), in its words: the path must be what the type
says, and the ``…OrCreate`` types make it first when it is not there (a directory 0755, an
empty file 0644). The empty type checks nothing (the runtime mounts what is there).

The path is looked at from this process: an agent in a container checks its own view, so
it should be given the host's paths at the same places (as kubelet in a container is)."""

from __future__ import annotations

import os
import stat

# the type each kind of file is (``GetFileType``), and what the errors call it
_KINDS = (
    (stat.S_ISDIR, "Directory", "directory"),
    (stat.S_ISREG, "File", "file"),
    (stat.S_ISSOCK, "Socket", "socket file"),
    (stat.S_ISCHR, "CharDevice", "character device"),
    (stat.S_ISBLK, "BlockDevice", "block device"),
)
_DESCRIBED = {name: words for _, name, words in _KINDS}
_MADE = {"DirectoryOrCreate": "Directory", "FileOrCreate": "File"}


def check(path: str, type_: str) -> str | None:
    """Why the hostPath volume of ``path`` and ``type_`` cannot be set up (None: it can),
    having made it first for the ``…OrCreate`` types."""
    if ".." in path.split("/"):  # (validation refuses it; checked again on the node)
        return f"invalid HostPath `{path}`: must not contain '..'"
    if not type_:
        return None
    wanted = _MADE.get(type_, type_)
    if wanted not in _DESCRIBED:
        return f"{type_} is an invalid volume type"
    if type_ in _MADE and not os.path.exists(path):
        try:
            if wanted == "Directory":
                os.makedirs(path, 0o755, exist_ok=True)
            else:
                os.close(os.open(path, os.O_CREAT | os.O_RDONLY, 0o644))
        except OSError as err:
            return _go_error("mkdir" if wanted == "Directory" else "open", path, err)
        return None
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return f"hostPath {path} doesn't exist"
    except OSError as err:
        return (f"hostPath type check failed, {path} is not a {_DESCRIBED[wanted]}, unable to "
                f"determine its type: {_go_error('stat', path, err)}")
    found = next((name for test, name, _ in _KINDS if test(mode)), None)
    if found is None:
        return (f"hostPath type check failed, {path} is not a {_DESCRIBED[wanted]}, unable to "
                "determine its type: only recognise file, directory, socket, block device and "
                "character device")
    if found != wanted:
        return f"hostPath type check failed: {path} is not a {_DESCRIBED[wanted]}, it's a {found}"
    return None


def _go_error(op: str, path: str, err: OSError) -> str:
    """An error of the system, in Go's words (``mkdir /a/b: permission denied``)."""
    why = err.strerror or str(err)
    return f"{op} {err.filename or path}: {why[:1].lower()}{why[1:]}"
