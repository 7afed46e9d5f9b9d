"""The writer's loop on a phone (390 px) and a laptop (1366 px): start a dry run, read it, inspect a
turn, open the bank, review, analytics and the map, and the history, with no console error and no
page wider than the screen."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from chronicle.demo import load_demo
from tests.e2e.conftest import PASSWORD, start_demo_run

pytestmark = [pytest.mark.e2e, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("width, height", [(390, 844), (1366, 768)], ids=["narrow", "wide"])
def test_the_loop_fits_the_screen_without_console_errors(browser, live_server, user, celery_worker, shot,
                                                         width, height):
    load_demo(owner=user)
    context = browser.new_context(viewport={"width": width, "height": height}, base_url=live_server.url)
    context.set_default_timeout(15_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        page.goto("/accounts/login/")
        page.fill("#id_username", user.get_username())
        page.fill("#id_password", PASSWORD)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(re.compile(r"/$"))

        run = start_demo_run(page, turns=4)

        pages = [f"/simulations/{run}/", f"/chronicle/{run}/turns/2/", f"/chronicle/{run}/memories/",
                 f"/chronicle/{run}/", f"/chronicle/{run}/analytics/", f"/chronicle/{run}/map/",
                 f"/chronicle/{run}/history/", "/", "/characters/", "/import/"]
        for path in pages:
            page.goto(path)
            page.wait_for_load_state("networkidle")
            wide = page.evaluate("document.documentElement.scrollWidth")
            assert wide <= width + 1, f"{path} is {wide} px wide on a {width} px screen"
        expect(page.get_by_role("navigation").first).to_be_visible()
        page.goto(f"/chronicle/{run}/turns/2/")
        expect(page.get_by_role("heading", name=re.compile(r"Turn 2"))).to_be_visible()
        shot(page, f"loop-{width}-inspector")
        page.goto(f"/chronicle/{run}/memories/")
        page.locator("details.memory-edit summary").first.click()
        expect(page.locator("details.memory-edit textarea").first).to_be_visible()
        shot(page, f"loop-{width}-bank")
        assert errors == [], errors
    finally:
        context.close()
