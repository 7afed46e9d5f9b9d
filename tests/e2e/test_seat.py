"""The writer takes Sam's seat in the demo: Alex and Jordan are scripted agents, the writer plays
Sam for three turns (one a whisper to Alex), reading Sam's memories beside the input before each
line, then leaves the seat and Sam's agent takes over."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from chronicle import demo
from chronicle.simulation.run.models import Simulation
from memory.models import Memory
from tests.prompting import sent_text

pytestmark = [pytest.mark.e2e, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

LINES = ["Before anyone books anything: I can spend twelve euros tonight, tops.",
         "*whispers to Alex* Please don't pick Bella's, I can't afford it this month.",
         "Fine, the noodle bar it is, if they still do the lunch price in the evening."]


def test_the_writer_plays_sam_for_three_turns_then_hands_sam_back(logged_in_page, user, celery_worker, shot):
    demo.load_demo(owner=user)
    page = logged_in_page
    page.goto("/simulations/new/")
    page.select_option("#id_scenario", label=demo.DEMO_TITLE)
    page.wait_for_load_state("networkidle")  # the scenario's cast (and its seats) swapped in
    seat_box = page.locator("#id_seats label", has_text="Sam").locator("input")
    seat_box.check()
    expect(seat_box).to_be_checked()
    page.fill("#id_max_turns", "15")
    page.fill("#id_pace_s", "0")
    page.select_option("#id_provider", "scripted")
    page.select_option("#id_retrieval_mode", "tools")
    page.get_by_role("button", name="Start simulation").click()
    page.wait_for_url(re.compile(r"/simulations/\d+/$"))
    simulation = Simulation.objects.get(owner=user)
    assert simulation.seats == ["Sam"]

    seat = page.locator("#seat")
    for number, line in zip((3, 6, 9), LINES):
        # The poll brings the seat in when Sam's turn comes, and stops.
        expect(seat).to_contain_text(f"turn {number}", timeout=120_000)
        expect(page.locator("#live .badge").first).to_have_text("Your turn as Sam")
        memory = page.locator("#seat-memory")
        expect(memory.locator(".seat-header")).to_contain_text("You are Sam")
        expect(memory.locator(".seat-section").first).to_be_visible()  # Sam's memories, before the line
        expect(page.locator("#seat-hearers")).to_contain_text("Alex, Jordan")
        if number == 3:
            page.fill("#seat-q", "Jordan")
            page.select_option("#seat-tool", "query_character")
            page.get_by_role("button", name="Search").click()
            expect(page.locator("#seat-results li[data-memory]").first).to_contain_text("Jordan")
            shot(page, "seat-01-your-turn")
        page.fill("#seat-line", line)
        page.get_by_role("button", name="Say it").click()
        # What is done between asterisks reads as stage business: in italics, the asterisks gone.
        said = page.locator(f"#turn-{number - 1}.done .utterance")
        expect(said).to_have_text(re.sub(r"\*([^*]+)\*", r"\1", line), timeout=60_000)
        if "*" in line:
            expect(said.locator("em.business")).to_have_text("whispers to Alex")

    # Turn 12 is Sam's again: the writer leaves the seat and Sam's agent says it, and the run goes on.
    expect(seat).to_contain_text("turn 12", timeout=120_000)
    page.get_by_role("button", name="Leave the seat").first.click()
    live = page.locator("#live")
    expect(live).to_have_attribute("data-status", "completed", timeout=120_000)
    expect(page.locator("#turn-11.done .utterance")).not_to_be_empty()
    shot(page, "seat-02-handed-back")

    simulation.refresh_from_db()
    assert simulation.seats == [] and simulation.turns.get(index=11).usage.get("calls")
    assert simulation.turns.filter(status="done").count() == 15
    # What the writer said as Sam reaches Alex: every later call of Alex's has it, in its conversation.
    later = simulation.turns.filter(agent="Alex", index__gt=2)
    assert later.exists() and all("twelve euros" in sent_text(turn) for turn in later)
    # The whisper reached Alex; Jordan only saw it happen.
    bank = Memory.objects.in_bank(simulation.bank)
    assert bank.filter(agent="Alex", turn=6, content__contains="can't afford it").exists()
    jordan = list(bank.filter(agent="Jordan", turn=6).values_list("content", flat=True))
    assert jordan and any("whispered something to Alex" in text for text in jordan)
    assert not any("afford" in text for text in jordan)
