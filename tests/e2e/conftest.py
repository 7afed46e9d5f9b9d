"""Playwright (sync API) driving Debian's /usr/bin/chromium against pytest-django's live_server.

Fixtures: `browser` (one Chromium per session), `page` (a fresh context per test), `logged_in_page`
(a page already logged in as the `user` fixture), and `shot(page, name)` for screenshots into
test-artifacts/screenshots/, which the test run keeps.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
PASSWORD = "correct-horse-1"  # the `user` fixture's password (tests/conftest.py)


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is not installed (make browser)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


@pytest.fixture
def page(browser, live_server):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=live_server.url)
    context.set_default_timeout(15_000)
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture
def logged_in_page(page, user):
    page.goto("/accounts/login/")
    page.fill("#id_username", user.get_username())
    page.fill("#id_password", PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(re.compile(r"/$"))
    return page


@pytest.fixture
def shot():
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def take(page, name: str) -> Path:
        path = SCREENSHOTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take


def start_demo_run(page, *, turns: int, **fields) -> int:
    """The demo scenario as a scripted run of `turns`, started from the form and waited for; its id.
    fields: other form fields by id (e.g. reflection_threshold="60")."""
    from playwright.sync_api import expect

    from chronicle.demo import DEMO_TITLE

    page.goto("/simulations/new/")
    page.select_option("#id_scenario", label=DEMO_TITLE)
    page.fill("#id_max_turns", str(turns))
    page.fill("#id_pace_s", "0")
    page.select_option("#id_provider", "scripted")
    for name, value in fields.items():
        page.fill(f"#id_{name}", value)
    page.get_by_role("button", name="Start simulation").click()
    page.wait_for_url(re.compile(r"/simulations/\d+/$"))
    expect(page.locator("#live")).to_have_attribute("data-status", "completed", timeout=300_000)
    return int(page.url.rstrip("/").rsplit("/", 1)[1])
