"""The writer's loop on a phone (390 px) and a laptop (1366 px): start a dry run, read it, inspect a
turn, open the bank, review, analytics and the map, the history, the exports, a sequel's form and a
seat waiting for the writer's line, with no console error, no page wider than the screen and every
button of the inspector on it."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from chronicle.demo import DEMO_TITLE, load_demo
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
        # A run where the writer plays Sam: its page waits for Sam's line (turn 3).
        page.goto("/simulations/new/")
        page.select_option("#id_scenario", label=DEMO_TITLE)
        page.wait_for_load_state("networkidle")
        page.locator("#id_seats label", has_text="Sam").locator("input").check()
        page.fill("#id_max_turns", "4")
        page.fill("#id_pace_s", "0")
        page.select_option("#id_provider", "scripted")
        page.get_by_role("button", name="Start simulation").click()
        page.wait_for_url(re.compile(r"/simulations/\d+/$"))
        seated = page.url
        expect(page.locator("#seat")).to_be_visible(timeout=120_000)

        pages = [f"/simulations/{run}/", f"/chronicle/{run}/turns/2/", f"/chronicle/{run}/memories/",
                 f"/chronicle/{run}/", f"/chronicle/{run}/analytics/", f"/chronicle/{run}/map/",
                 f"/chronicle/{run}/history/", f"/simulations/new/?sequel_of={run}", seated,
                 "/", "/characters/", "/import/"]
        for path in pages:
            page.goto(path)
            page.wait_for_load_state("networkidle")
            wide = page.evaluate("document.documentElement.scrollWidth")
            assert wide <= width + 1, f"{path} is {wide} px wide on a {width} px screen"
        for fmt in ("md", "fountain", "json"):
            response = page.request.get(f"/chronicle/{run}/export.{fmt}")
            assert response.ok and response.body(), fmt
        expect(page.get_by_role("navigation").first).to_be_visible()
        page.goto(f"/chronicle/{run}/turns/2/")
        expect(page.get_by_role("heading", name=re.compile(r"Turn 2"))).to_be_visible()
        # Every memory's buttons are on the screen, not cut off by its card.
        buttons = page.locator("table.results td.actions button")
        expect(buttons.first).to_be_visible()
        right = page.evaluate("Math.max(...[...document.querySelectorAll('table.results td.actions button')]"
                              ".map(b => b.getBoundingClientRect().right))")
        assert right <= width, f"the inspector's buttons reach {right} px on a {width} px screen"
        expect(page.locator(".search-scope").first).to_contain_text("Searched Jordan's own memories")
        shot(page, f"loop-{width}-inspector")
        page.goto(f"/chronicle/{run}/memories/")
        page.locator("details.memory-edit summary").first.click()
        expect(page.locator("details.memory-edit textarea").first).to_be_visible()
        shot(page, f"loop-{width}-bank")
        page.goto(seated)
        expect(page.locator("#seat-memory")).to_contain_text("You are Sam")
        shot(page, f"loop-{width}-seat")
        assert errors == [], errors
    finally:
        context.close()
