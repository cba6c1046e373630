#!/usr/bin/env python3
"""Build the fleet view's bundle (``ui/`` -> ``services/apiserver/ui/``), reproducibly.

    python3 ops/build_ui.py            npm ci (the committed lockfile), bundle, stamp
    python3 ops/build_ui.py --check    does the committed bundle come from these sources?
    python3 ops/build_ui.py --verify   rebuild into a temp folder, compare byte for byte

The page (``index.html``) is written by hand beside the bundle. The bundle is committed, so installing daemonbus needs no npm and the page needs no network.
``SOURCES.json`` beside it records the SHA-256 of every source it was built from (the
package.json, the lockfile, ui/src, this script) and of each file built; a test runs the
check, so a source changed without a rebuild (or a bundle edited by hand) fails CI. Pinned
versions, ``npm ci`` and esbuild's deterministic output make a rebuild byte-identical.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
UI = ROOT / "ui"
OUT = ROOT / "services" / "apiserver" / "ui"
STAMP = "SOURCES.json"
BUILT = ("fleet.js", "fleet.css", "THIRD_PARTY_LICENSES.txt")
BUNDLED = ("preact", "uplot")  # the packages in the bundle, whose licenses ship with it
ESBUILD_FLAGS = ("--bundle", "--minify", "--format=esm", "--target=es2020",
                 "--jsx=automatic", "--jsx-import-source=preact", "--legal-comments=eof",
                 "--charset=utf8", "--log-level=warning")


def sources() -> list[Path]:
    files = [UI / "package.json", UI / "package-lock.json", UI / ".npmrc", Path(__file__),
             OUT / "index.html"]  # the page, written by hand beside the bundle
    files += sorted(p for p in (UI / "src").rglob("*") if p.is_file())
    return files


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def stamp(out: Path) -> dict[str, dict[str, str]]:
    return {"sources": {str(p.resolve().relative_to(ROOT)): _sha(p) for p in sources()},
            "built": {name: _sha(out / name) for name in BUILT}}


def check(out: Path = OUT) -> list[str]:
    """What disagrees between the sources, the bundle and the stamp ([] when none)."""
    try:
        recorded = json.loads((out / STAMP).read_text())
    except (OSError, ValueError) as err:
        return [f"no readable {STAMP} in {out}: {err}"]
    problems = []
    now = stamp(out) if all((out / n).exists() for n in BUILT) else {"sources": {}, "built": {}}
    for section in ("sources", "built"):
        want, have = recorded.get(section, {}), now[section]
        for name in sorted(set(want) | set(have)):
            if want.get(name) != have.get(name):
                problems.append(f"{section}: {name} differs from the bundle's stamp (run "
                                "python3 ops/build_ui.py and commit the result)")
    return problems


def build(out: Path, install: bool = True) -> None:
    if install:
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=UI, check=True)
    esbuild = UI / "node_modules" / ".bin" / "esbuild"
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(esbuild), "src/main.jsx", *ESBUILD_FLAGS,
                    f"--outfile={out / 'fleet.js'}"], cwd=UI, check=True)
    notices = []
    for name in BUNDLED:
        pkg = UI / "node_modules" / name
        version = json.loads((pkg / "package.json").read_text())["version"]
        notices.append(f"{name} {version}\n\n{(pkg / 'LICENSE').read_text().strip()}\n")
    (out / "THIRD_PARTY_LICENSES.txt").write_text("\n\n".join(notices))
    (out / STAMP).write_text(json.dumps(stamp(out), indent=1, sort_keys=True) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare the stamp, build nothing")
    ap.add_argument("--verify", action="store_true", help="rebuild in a temp folder, compare")
    ap.add_argument("--no-install", action="store_true", help="use ui/node_modules as it is")
    args = ap.parse_args()
    if args.check:
        problems = check()
        print("\n".join(problems) or "the bundle matches its sources")
        return 1 if problems else 0
    if args.verify:
        with tempfile.TemporaryDirectory() as tmp:
            build(Path(tmp), install=not args.no_install)
            differ = [n for n in BUILT if (Path(tmp) / n).read_bytes() != (OUT / n).read_bytes()]
        print(f"rebuilt bundle differs: {', '.join(differ)}" if differ
              else "a rebuild is byte-identical to the committed bundle")
        return 1 if differ else 0
    build(OUT, install=not args.no_install)
    print(f"built {', '.join(BUILT)} into {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
