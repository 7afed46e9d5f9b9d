"""A writer creates a character in a real browser, watches it seed, and asks it who it is."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.e2e, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_create_character_watch_seeding_and_ask_who_am_i(logged_in_page, celery_worker, shot):
    page = logged_in_page
    page.get_by_role("navigation").get_by_role("link", name="Characters").click()
    expect(page.get_by_role("heading", name="No characters yet")).to_be_visible()
    shot(page, "01-characters-empty")

    page.get_by_role("link", name="New character").click()
    # Inline validation: clearing the name shows its error without a page load.
    page.fill("#id_name", "x")
    page.fill("#id_name", "")
    page.locator("#id_name").blur()
    expect(page.locator("#errors-name")).to_contain_text("This field is required.")

    page.fill("#id_name", "Mira")
    expect(page.locator("#errors-name")).to_be_empty()
    page.fill("#id_role", "Lighthouse keeper")
    page.fill("#id_archetype", "The watcher")
    page.fill("#id_description", "Mira keeps the old lighthouse on Gull Point and knows every ship that passes.")
    page.fill("#id_background", "Mira grew up in a fishing village. She took over the lighthouse from her uncle.")
    page.fill("#id_communication_style", "Quiet, precise, and dry.")
    page.fill("#id_decision_style", "Waits for the weather to show its hand, then acts at once.")
    for trait in ("patient", "observant"):
        page.locator("[data-list-add][data-field=traits]").click()
        page.locator("input[name=traits]").last.fill(trait)
    page.locator("[data-list-add][data-field=skills]").click()
    page.locator("input[name=skills]").last.fill("reading the sea")
    page.locator("[data-list-add][data-field=knowledge]").click()
    page.locator("input[name=knowledge_name]").last.fill("Tomas")
    page.locator("textarea[name=knowledge_text]").last.fill("Tomas is the ferryman who brings her supplies.")
    shot(page, "02-character-form")

    preview_requests: list[str] = []
    page.on("request", lambda r: preview_requests.append(r.url) if "/preview/" in r.url else None)
    page.get_by_role("button", name="Create character").click()
    page.wait_for_url(re.compile(r"/characters/\d+/$"))
    expect(page.get_by_role("heading", level=1)).to_contain_text("Mira")
    progress = page.locator("#seed-progress")
    expect(progress).to_be_visible()  # the worker is still embedding
    shot(page, "03-seeding-progress")

    # Watch the bar fill: the polled partial replaces it with the memories once seeding is done.
    seen = set()
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and page.locator("#preview [data-seed-status=done]").count() == 0:
        # Read the bar without waiting for it: the poll may swap it out between a check and a read.
        value = page.evaluate("() => document.querySelector('#seed-progress')?.getAttribute('value')")
        if value is not None:
            seen.add(int(value or 0))
        page.wait_for_timeout(250)
    expect(page.locator("#preview [data-seed-status=done]")).to_be_visible()
    assert preview_requests, "the page never polled for progress"
    assert progress.count() == 0
    preview = page.locator("#preview")
    expect(preview).to_contain_text("Identity")
    expect(preview).to_contain_text("who am I?")
    expect(preview).to_contain_text("Knowledge of Tomas")
    shot(page, "04-preview-memories")

    polls = len(preview_requests)
    page.wait_for_timeout(2500)
    assert len(preview_requests) == polls, "polling did not stop after seeding finished"

    page.fill("#ask-q", "who am I?")
    page.get_by_role("button", name="Ask", exact=True).click()
    first = page.locator("#ask-results .result").first
    expect(first).to_contain_text("You are Mira, Lighthouse keeper.")
    expect(first.locator(".bar.similarity")).to_be_visible()
    assert page.locator("#ask-results .result").count() > 1
    shot(page, "05-ask-who-am-i")
