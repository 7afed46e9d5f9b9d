"""Who knows what, in a browser: the writer imports examples/rumour.json, plants the
rumour and the rest in the new-simulation form, runs it scripted, and reads how the rumour spread:
who believes it, from whom, how sure; who stood where with whom; what a distorted character kept."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from chronicle.simulation.run.models import Simulation
from django.db.models import Q

from memory.models import Memory, Relationship
from tests.e2e.conftest import SCREENSHOTS

pytestmark = [pytest.mark.e2e, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

RUMOUR = Path(__file__).resolve().parents[2] / "examples" / "rumour.json"
CLAIM = "The harbour master is selling the inn to a hotel chain."


def test_a_planted_rumour_spreads_two_hops_and_the_writer_reads_the_chain(logged_in_page, user, celery_worker, shot):
    page = logged_in_page
    page.goto("/import/")
    page.set_input_files("input[type=file]", str(RUMOUR))
    page.get_by_role("button", name=re.compile("Import")).click()
    expect(page.locator("#imported")).to_contain_text("Scenario A rumour at the Harbour Inn")

    page.goto("/simulations/new/")
    page.select_option("#id_scenario", label="A rumour at the Harbour Inn")
    page.fill("#id_max_turns", "20")
    page.fill("#id_pace_s", "0")
    page.select_option("#id_provider", "scripted")
    page.select_option("#id_retrieval_mode", "both")
    page.fill("#id_stage_directions", "1: Tess is away\n6: Tess arrives")
    page.fill("#id_planted_beliefs", f"Oren: {CLAIM} [false]")
    page.fill("#id_distortions", "Mira: paranoia")
    page.get_by_role("button", name="Start simulation").click()
    page.wait_for_url(re.compile(r"/simulations/\d+/$"))
    expect(page.locator("#live")).to_have_attribute("data-status", "completed", timeout=300_000)
    simulation = Simulation.objects.get(pk=int(page.url.rstrip("/").rsplit("/", 1)[1]))
    assert simulation.planted_beliefs.startswith("Oren:") and simulation.turns.count() == 20

    # The propagation view: the claim, marked false, and Tess's belief two hops from the source.
    page.reload()
    beliefs = page.locator("#beliefs")
    expect(beliefs).to_contain_text(CLAIM)
    expect(beliefs.locator(".badge.danger")).to_have_text("false")
    expect(beliefs).to_contain_text("Oren — planted by the writer · confidence 1.00")
    expect(beliefs).to_contain_text(re.compile(r"Mira — heard from Oren \(turn \d+\) · confidence 0\.70"))
    expect(beliefs).to_contain_text(re.compile(r"Tess — heard from Mira ← Oren \(turn \d+\) · confidence 0\.49"))
    # A line Tess was not there for, and Oren's whisper, say who heard them.
    expect(page.locator("#turn-0 .heard")).to_contain_text("Tess was away")
    expect(page.locator("p.heard", has_text=re.compile("whispered to Mira"))).not_to_have_count(0)
    shot(page, "rumour-00-who-believes-what")
    # How they stood with each other: a chart per pair that changed, and what moved it.
    page.locator("#relationships summary").click()
    pair = page.locator("#relationships figure.pair").first
    expect(pair.locator("polyline.trust")).to_have_count(1)
    expect(pair.locator(".changes li").first).to_contain_text(re.compile(r"turn \d+: (trust|affinity)"))
    page.locator("#relationships").screenshot(path=str(SCREENSHOTS / "rumour-02-relationships.png"))
    # What those changes left (a worker's task after each line): a feeling for each change of warmth
    # of 0.1 or more, about the speaker (a dry run's lines may move only trust: then none).
    felt = Memory.objects.in_bank(simulation.bank).filter(kind="emotional", category="reaction")
    warmed = Relationship.objects.filter(bank=simulation.bank).filter(
        Q(affinity_change__gte=0.1) | Q(affinity_change__lte=-0.1))
    assert felt.count() == warmed.count()
    assert all(m.about in {"Mira", "Oren", "Tess"} and m.emotional_valence for m in felt)

    # Mira's paranoia: the bank shows what Mira kept and what was really said.
    page.goto(f"/chronicle/{simulation.pk}/memories/?agent=Mira")
    distorted = page.locator(".distortion", has_text="distorted: paranoia").first
    expect(distorted).to_contain_text("really said:")
    shot(page, "rumour-01-distorted-memory")
