"""Which requirements a wheelhouse still lacks for another Python (used by build-images.sh).

    python ops/wheelhouse_missing.py WHEELHOUSE PYTHON_VERSION MACHINE

``pip download --python-version`` picks wheels for the target Python but evaluates the
environment markers of dependencies with the host's interpreter: on a host with Python
3.11.7, redis-py's ``async-timeout; python_full_version < "3.11.3"`` is left out, and Debian
12's Python 3.11.2 then cannot install redis-py. This reads every wheel's ``Requires-Dist``,
evaluates the markers for the target (Linux, CPython, PYTHON_VERSION, MACHINE) and prints
each requirement no wheel in the house provides, one per line, without its marker, for a
further ``pip download``. Prints nothing when the house is complete. Decides only (reads
files, prints).
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

try:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name, parse_wheel_filename
except ImportError:  # a bare interpreter: pip always vendors packaging
    from pip._vendor.packaging.requirements import Requirement  # type: ignore[no-redef]
    from pip._vendor.packaging.utils import (  # type: ignore[no-redef]
        canonicalize_name,
        parse_wheel_filename,
    )


def target_environment(python_version: str, machine: str) -> dict[str, str]:
    """The marker environment of CPython ``python_version`` on Linux ``machine``."""
    return {
        "python_full_version": python_version,
        "python_version": ".".join(python_version.split(".")[:2]),
        "implementation_version": python_version,
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "platform_machine": machine,
        "platform_system": "Linux",
        "sys_platform": "linux",
        "os_name": "posix",
        "extra": "",
    }


def requires(wheel: Path) -> list[str]:
    """The ``Requires-Dist`` lines of a wheel's metadata."""
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist()
                    if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
        text = zf.read(name).decode("utf-8", "replace")
    return [line.split(":", 1)[1].strip() for line in text.splitlines()
            if line.startswith("Requires-Dist:")]


def missing(house: Path, python_version: str, machine: str) -> list[str]:
    """Requirements of the house's wheels, for the target, that no wheel there provides."""
    env = target_environment(python_version, machine)
    wheels = sorted(house.glob("*.whl"))
    have = {canonicalize_name(parse_wheel_filename(w.name)[0]) for w in wheels}
    need: set[str] = set()
    for wheel in wheels:
        for line in requires(wheel):
            req = Requirement(line)
            if req.marker is not None and not req.marker.evaluate(env):
                continue
            if canonicalize_name(req.name) not in have:
                need.add(f"{req.name}{req.specifier}")
    return sorted(need)


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    for req in missing(Path(argv[1]), argv[2], argv[3]):
        print(req)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
