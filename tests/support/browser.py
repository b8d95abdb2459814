"""Headless Chromium for the browser tests: Debian's chromium driven by Playwright."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@contextmanager
def chromium_page(width: int, height: int, timeout_ms: int = 30_000) -> Iterator[Any]:
    """A fresh page in a fresh headless Chromium, closed on exit."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"the browser test needs Debian's chromium at {CHROMIUM}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_context(viewport={"width": width, "height": height}).new_page()
            page.set_default_timeout(timeout_ms)
            yield page
        finally:
            browser.close()
