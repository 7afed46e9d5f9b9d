"""A writer imports a SillyTavern card with lore, runs a scenario with it, and finds the lore
entry among what the agent retrieved on its turn, with the card's macros resolved."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from chronicle.models import Character, Scenario

pytestmark = [pytest.mark.e2e, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

# Shaped like SillyTavern's default card: macros everywhere, personality empty.
CARD = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {
    "name": "Seraphina", "personality": "",
    "description": "{{char}} is a guardian of the forest glade who heals travellers like {{user}}.",
    "first_mes": "*{{char}} kneels beside {{user}}* Rest now, you are safe in my glade.",
    "scenario": "{{user}} wakes in {{char}}'s cottage after being hurt in the forest.",
    "character_book": {"entries": [
        {"keys": ["glade", "barrier"], "content": "{{char}}'s glade is hidden behind a moonpetal barrier only she can open.",
         "extensions": {}, "enabled": True, "insertion_order": 0},
    ]}}}


def test_imported_card_lore_is_retrieved_in_a_run(logged_in_page, user, celery_worker, tmp_path, shot):
    page = logged_in_page
    card = tmp_path / "seraphina.json"
    card.write_text(json.dumps(CARD))
    page.goto("/import/")
    page.set_input_files("input[type=file]", str(card))
    page.get_by_role("button", name="Import").click()
    page.locator("#imported").get_by_role("link", name="Seraphina").click()  # the import page lists it
    page.wait_for_url(re.compile(r"/characters/\d+/$"))
    expect(page.get_by_role("heading", level=1)).to_contain_text("Seraphina")

    # A traveller for her to talk to, and a scene for both.
    traveller = Character.objects.create(owner=user, name="Ash", role="a wounded traveller",
                                         description="Ash got lost in the forest.")
    scenario = Scenario.objects.create(owner=user, title="The cottage", location="Seraphina's cottage",
                                       description="A traveller wakes up.")
    scenario.cast.set([Character.objects.get(owner=user, name="Seraphina"), traveller])

    page.goto("/simulations/new/")
    page.select_option("#id_scenario", str(scenario.pk))
    page.fill("#id_max_turns", "2")
    page.select_option("#id_retrieval_mode", "both")
    page.get_by_role("button", name="Start simulation").click()
    page.wait_for_url(re.compile(r"/simulations/\d+/$"))
    expect(page.locator("#live")).to_have_attribute("data-status", "completed", timeout=180_000)

    # The cast speaks in name order: Ash, then Seraphina on turn 2.
    page.locator("#turn-1 .memories-link").click()
    panel = page.locator("#turn-panel")
    expect(panel).to_contain_text("Turn 2 · Seraphina")
    expect(panel).to_contain_text("Seraphina's glade is hidden behind a moonpetal barrier")
    expect(panel).not_to_contain_text("{{char}}")
    shot(page, "lore-01-retrieved-in-run")
