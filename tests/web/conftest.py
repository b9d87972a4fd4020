"""A real browser for the dashboard tests: Debian's headless Chromium, driven by Playwright.

One Chromium for the session; each test gets a fresh page at a laptop's size, and fails if the page
raised or logged an error. Screenshots go to build/screenshots/, or to $CORRAL_SCREENSHOTS.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# build/screenshots unless told otherwise: a test run never rewrites the tracked copies the README
# shows (make those with CORRAL_SCREENSHOTS=docs/screenshots).
SCREENSHOTS = os.environ.get("CORRAL_SCREENSHOTS") or os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "build", "screenshots")
# what a page may say on the console without failing a test: the server going away on purpose
QUIET = ("Failed to load resource", "net::ERR_", "EventSource")


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail("Chromium is not installed: run scripts/browser.sh (scripts/test.sh does, as root)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser) -> Iterator[object]:
    context = browser.new_context(viewport={"width": 1280, "height": 800}, timezone_id="Europe/Berlin",
                                  locale="en-GB")
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" and not any(
        q in msg.text for q in QUIET) else None)
    page.errors = errors
    yield page
    context.close()
    assert not errors, f"the page raised or logged errors: {errors}"


def screenshot(page, name: str) -> str:
    os.makedirs(SCREENSHOTS, exist_ok=True)
    path = os.path.join(SCREENSHOTS, f"{name}.png")
    page.screenshot(path=path, full_page=False)
    return path
