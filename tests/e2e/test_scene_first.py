"""A run page opens on the scene, as a writer reads a script: the scene's heading, then the lines,
the first line of dialogue on the first screen at a laptop's 1280x900 and a phone's 390 px, with the
controls, links and who-believes-what after the lines or beside them; nothing sticks out past the
screen's right edge (Start a sequel inside its card); the review page and every export keep the
stage directions and the scene heading."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from chronicle.demo import DEMO_TITLE, load_demo
from tests.e2e.conftest import PASSWORD, SCREENSHOTS

pytestmark = [pytest.mark.e2e, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

RUMOUR = Path(__file__).resolve().parents[2] / "examples" / "rumour.json"
DIRECTION = "Sam opens the window onto the street"


def _start(page, scenario: str, someone: str, turns: int = 4, **fields) -> str:
    page.goto("/simulations/new/")
    page.select_option("#id_scenario", label=scenario)
    expect(page.locator("#id_cast")).to_contain_text(someone)  # the scenario's cast swapped in
    page.fill("#id_max_turns", str(turns))
    page.fill("#id_pace_s", "0")
    page.select_option("#id_provider", "scripted")
    for name, value in fields.items():
        page.fill(f"#id_{name}", value)
    page.get_by_role("button", name="Start simulation").click()
    page.wait_for_load_state()
    assert re.search(r"/simulations/\d+/$", page.url), page.locator(".errorlist").all_inner_texts()
    expect(page.locator("#live")).to_have_attribute("data-status", "completed", timeout=300_000)
    return page.url


def _past_right_edge(page, width: int) -> list[str]:
    return page.evaluate("""(width) => [...document.querySelectorAll('body *')].filter(e => {
        const r = e.getBoundingClientRect(); const s = getComputedStyle(e);
        return r.width > 0 && r.right > width + 1 && s.visibility !== 'hidden' && s.position !== 'fixed';
      }).map(e => e.tagName + (e.id ? '#' + e.id : '') + '.' + e.className)""", width)


@pytest.mark.parametrize("width, height", [(1280, 900), (390, 844)], ids=["wide", "narrow"])
def test_a_run_page_opens_on_the_scene(browser, live_server, user, celery_worker, width, height):
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
        page.goto("/import/")
        page.set_input_files("input[type=file]", str(RUMOUR))
        page.get_by_role("button", name=re.compile("Import")).click()
        expect(page.locator("#imported")).to_contain_text("A rumour at the Harbour Inn")

        demo = _start(page, DEMO_TITLE, "Jordan", stage_directions=f"2: {DIRECTION}.",
                      planted_beliefs="", distortions="")
        rumour = _start(page, "A rumour at the Harbour Inn", "Oren", turns=6, stage_directions="",
                        planted_beliefs="Oren: The harbour master is selling the inn to a hotel chain. [false]")
        for url, name in ((demo, "demo"), (rumour, "rumour")):
            page.goto(url)
            page.wait_for_load_state("networkidle")
            # The scene's heading, then the lines: the first line of dialogue on the first screen.
            expect(page.locator("#slugline")).to_contain_text(re.compile(r"^(INT|EXT)\. "))
            first = page.locator("#turn-list .utterance").first
            expect(first).not_to_be_empty()
            box = first.bounding_box()
            assert box and box["y"] + 20 <= height, f"{name}: the first line starts at y={box and box['y']:.0f}"
            # The controls, links and panels come after the lines or beside them, never above.
            line_top = box["y"]
            for selector in ("#controls", "#writer-links", "#beliefs", "#dry-run-note"):
                other = page.locator(selector)
                if other.count():
                    other_box = other.first.bounding_box()
                    assert other_box["y"] > line_top or other_box["x"] >= box["x"] + box["width"], \
                        f"{name}: {selector} sits above the first line"
            assert not (past := _past_right_edge(page, width)), f"{name}: past the right edge: {past[:5]}"
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / f"scene-first-{name}-{width}.png"))
        # The demo run: Start a sequel sits inside the controls card.
        page.goto(demo)
        card = page.locator("#controls").bounding_box()
        sequel = page.locator("#start-sequel").bounding_box()
        assert sequel["x"] + sequel["width"] <= card["x"] + card["width"], "Start a sequel sticks out of its card"
        # The stage direction is between the lines, on the run page and on the review page,
        # under the scene's heading, and in each export.
        expect(page.locator("#turn-list li.stage", has_text=DIRECTION)).to_be_visible()
        page.get_by_role("link", name=re.compile("Review & export")).click()
        expect(page.locator("#slugline")).to_contain_text("INT. ALEX'S APARTMENT")
        stage = page.locator("#review li.stage", has_text=DIRECTION)
        expect(stage).to_be_visible()
        assert page.evaluate("""() => { const s = document.querySelector('#review li.stage');
            const next = s.nextElementSibling; return next && next.dataset.index === '1'; }""")
        run = demo.rstrip("/").rsplit("/", 1)[1]
        for fmt in ("md", "fountain", "json"):
            body = page.request.get(f"/chronicle/{run}/export.{fmt}").text()
            assert DIRECTION in body, fmt
        page.screenshot(path=str(SCREENSHOTS / f"scene-first-review-{width}.png"))
        assert errors == [], errors
    finally:
        context.close()


def test_at_390_px_the_seated_characters_memory_follows_the_input(browser, live_server, user, celery_worker):
    load_demo(owner=user)
    context = browser.new_context(viewport={"width": 390, "height": 844}, base_url=live_server.url)
    context.set_default_timeout(15_000)
    page = context.new_page()
    try:
        page.goto("/accounts/login/")
        page.fill("#id_username", user.get_username())
        page.fill("#id_password", PASSWORD)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(re.compile(r"/$"))
        page.goto("/simulations/new/")
        page.select_option("#id_scenario", label=DEMO_TITLE)
        page.wait_for_load_state("networkidle")  # the scenario's cast (and its seats) swapped in
        expect(page.locator("#id_seats")).to_contain_text("Sam")
        seat_box = page.locator("#id_seats label", has_text="Sam").locator("input")
        seat_box.check()
        expect(seat_box).to_be_checked()
        page.fill("#id_max_turns", "4")
        page.fill("#id_pace_s", "0")
        page.select_option("#id_provider", "scripted")
        page.get_by_role("button", name="Start simulation").click()
        page.wait_for_url(re.compile(r"/simulations/\d+/$"))
        expect(page.locator("#seat")).to_be_visible(timeout=120_000)
        page.reload()
        page.wait_for_load_state("networkidle")
        box = page.locator("#seat-line").bounding_box()
        memory = page.locator("#seat-memory").bounding_box()
        gap = memory["y"] - (box["y"] + box["height"])
        assert 0 <= gap <= 400, f"Sam's memory starts {gap:.0f} px below the input"
        # The lines come first: the first on the first screen, the seat after the last line.
        first = page.locator("#turn-list .utterance").first.bounding_box()
        assert first["y"] + 20 <= 844 and page.locator("#seat").bounding_box()["y"] > first["y"]
        assert not (past := _past_right_edge(page, 390)), past[:5]
        page.locator("#seat").scroll_into_view_if_needed()
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "scene-first-seat-390.png"))
    finally:
        context.close()
