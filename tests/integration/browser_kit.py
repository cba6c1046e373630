"""A real headless Chromium (the OS package) driven by Playwright, for the fleet view's
end-to-end tests. A missing browser or Playwright fails the test (never skips it):
``ops/test.sh`` installs both."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def chromium_binary() -> str:
    found = os.environ.get("DAEMONBUS_CHROMIUM") or shutil.which("chromium")
    if not found:
        pytest.fail("chromium is not on PATH: the fleet view's tests need a real browser "
                    "(apt-get install chromium; ops/test.sh installs it)")
    return found


@contextmanager
def browser() -> Iterator[Any]:
    """A Playwright Browser on the OS's Chromium, with a fresh profile."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed: pip install -e '.[test]'")
    binary = chromium_binary()
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile, sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            profile, executable_path=binary, args=CHROMIUM_ARGS, headless=True,
            ignore_https_errors=True, viewport={"width": 1400, "height": 900})
        try:
            yield context
        finally:
            context.close()
