"""The fleet view's committed bundle comes from its committed sources: ops/build_ui.py's
stamp (SHA-256 of each source and each built file) agrees with both, so a change to ui/
without a rebuild, or a bundle edited by hand, fails here."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _build_ui() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_ui", ROOT / "ops" / "build_ui.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_bundle_matches_its_sources() -> None:
    assert _build_ui().check() == []


def test_the_check_notices_a_changed_bundle(tmp_path: Path) -> None:
    build_ui = _build_ui()
    for name in (*build_ui.BUILT, build_ui.STAMP):
        (tmp_path / name).write_bytes((build_ui.OUT / name).read_bytes())
    assert build_ui.check(tmp_path) == []
    (tmp_path / "fleet.js").write_bytes(b"/* edited */" + (tmp_path / "fleet.js").read_bytes())
    assert [p for p in build_ui.check(tmp_path) if p.startswith("built: fleet.js")]


def test_the_stamp_covers_every_source_and_the_bundle_ships_as_package_data() -> None:
    build_ui = _build_ui()
    recorded = json.loads((build_ui.OUT / build_ui.STAMP).read_text())
    assert "ui/package-lock.json" in recorded["sources"]
    assert "ui/src/main.jsx" in recorded["sources"]
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"services.apiserver" = ["ui/*.js"' in pyproject


@pytest.mark.parametrize("name", ["../app.py", ".hidden.js", "fleet.py", "x/fleet.js"])
def test_only_the_bundle_files_are_served(name: str) -> None:
    from services.apiserver import fleet

    assert fleet.static_file(name) is None
    assert fleet.static_file("fleet.js") is not None
