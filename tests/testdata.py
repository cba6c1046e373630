"""The real DaemonSet manifests the tests apply: the team's reference folder beside the
checkout (``../shared/testdata/daemonsets``), or the folder ``DAEMONBUS_TESTDATA`` names.

The suite refuses to start without them (``tests/conftest.py``): a missing folder would
otherwise leave the tests that apply every manifest with nothing to apply."""

from __future__ import annotations

import os
from pathlib import Path

DAEMONSETS = Path(os.environ.get("DAEMONBUS_TESTDATA")
                  or Path(__file__).resolve().parents[1].parent / "shared" / "testdata"
                  / "daemonsets")


def manifests() -> list[Path]:
    """Every manifest, by name."""
    return sorted(DAEMONSETS.glob("*.yaml"))
