"""A newcomer starts the demo simulation with one click, watches it finish live, opens a turn's memories."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.e2e, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_demo_run_grows_live_to_its_end_and_a_turn_shows_what_was_retrieved(logged_in_page, celery_worker, shot):
    page = logged_in_page
    page.goto("/simulations/")
    page.get_by_role("button", name="Run the demo (dry run)").click()
    page.wait_for_url(re.compile(r"/simulations/\d+/$"))
    expect(page.get_by_text("dry run").first).to_be_visible()

    # The chronicle grows through polling, without a reload.
    expect(page.locator("#turn-list li.line.done").first).to_be_visible(timeout=120_000)
    shot(page, "sim-01-running")
    live = page.locator("#live")
    expect(live).to_have_attribute("data-status", "completed", timeout=180_000)
    expect(page.locator("#turn-list li.line.done")).to_have_count(6)
    expect(live).not_to_have_attribute("hx-trigger", re.compile("every"))  # polling stopped
    expect(page.locator("#token-total")).to_contain_text("Real saving")
    shot(page, "sim-02-completed")

    # Turn 1: Alex discovered who he is through query_self and query_scene.
    page.locator("#turn-0 .memories-link").click()
    panel = page.locator("#turn-panel")
    expect(panel).to_contain_text("Turn 1 · Alex")
    expect(panel.locator(".retrieval[data-tool=query_self]")).to_contain_text("You are Alex")
    expect(panel.locator(".retrieval[data-tool=query_scene]")).to_be_visible()
    expect(panel).to_contain_text("matched: key")
    shot(page, "sim-03-turn-panel")

    # Turn 4: what Alex's memory adds to the transcript it reads (the earlier lines, by turn), and the
    # exact context sent: the tools as offered and who is here now.
    page.locator("#turn-3 .memories-link").click()
    expect(panel).to_contain_text("Turn 4 · Alex")
    expect(panel.locator(".retrieval[data-tool=query_memory] .memory-result").first).to_be_visible()
    panel.get_by_text("Context: the exact messages sent").click()
    expect(panel.locator(".message-box.role-system")).to_contain_text("Your memory tools")
    expect(panel.locator(".message-box.role-user").last).to_contain_text("Here with you: Jordan, Sam")
    expect(panel.locator(".message-box.role-user").first).to_contain_text("[turn 3] Sam:")
    shot(page, "sim-04-recall-and-context")
