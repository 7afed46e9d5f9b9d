"""The writer's loop in a browser: open a turn, ask as its agent, exclude a memory, regenerate, see the
branch, edit a line, export Fountain."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from chronicle.simulation.providers.voice import named_voice

pytestmark = [pytest.mark.e2e, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_exclude_regenerate_polish_and_export(logged_in_page, celery_worker, shot):
    page = logged_in_page
    page.goto("/simulations/")
    page.get_by_role("button", name="Run the demo (dry run)").click()
    page.wait_for_url(re.compile(r"/simulations/\d+/$"))
    parent_url = page.url
    expect(page.locator("#live")).to_have_attribute("data-status", "completed", timeout=180_000)

    # Open turn 4 (Alex recalls what Sam said) in the inspector.
    page.locator("#turn-3 .inspect-link").click()
    expect(page.get_by_role("heading", name=re.compile("Turn 4 · Alex"))).to_be_visible()

    # Ask as Alex at turn 4: an answer in Alex's voice beside the memories Alex could have recalled
    # then, each citation a link to its memory in the list.
    expect(page.locator("#search-heading")).to_contain_text("as Alex could have recalled it at turn 4")
    page.locator("#search-form input[name=q]").fill("what did Sam say?")
    page.locator("#ask-button").click()
    answer = page.locator("#ask-answer")
    expect(answer).to_contain_text("Alex answers, at turn 4")
    expect(answer).to_contain_text("Sam said: “")
    cited = answer.locator("a.cite").first.get_attribute("href")
    expect(page.locator(f"#search {cited}")).to_be_visible()
    shot(page, "writer-00-ask-as-alex")

    # The memory Alex's line rests on (said in its own words, to Sam: "Sam, you are …"): of those its
    # tools returned, the one that shares most words with it.
    line = page.locator("blockquote.utterance").first.inner_text().lower()
    rows = page.locator(".retrieval tr.memory-result")

    def shared(i: int) -> int:
        content = named_voice(rows.nth(i).locator("td").nth(1).inner_text().split("\n")[0], "Alex").lower()
        return len(set(re.findall(r"[a-z']{4,}", content)) & set(re.findall(r"[a-z']{4,}", line)))
    used = max(range(rows.count()), key=shared)
    assert shared(used) >= 4, line
    first = rows.nth(used)
    quoted = first.locator("td").nth(1).inner_text().split("\n")[0]
    first.get_by_role("button", name="Exclude").click()
    expect(page.locator(".retrieval tr.memory-result.excluded")).not_to_have_count(0)
    expect(rows.nth(used).get_by_role("button", name="Include again")).to_be_visible()
    shot(page, "writer-01-inspector-excluded")

    # Regenerate from turn 4: a branch that runs on its own.
    page.get_by_role("button", name="Regenerate from turn 4").click()
    page.wait_for_url(re.compile(r"/simulations/\d+/$"))
    branch_url = page.url
    assert branch_url != parent_url
    expect(page.locator("#branch-of")).to_contain_text("regenerated from turn 4")
    expect(page.locator("#live")).to_have_attribute("data-status", "completed", timeout=180_000)
    expect(page.locator("#turn-list li.line.done")).to_have_count(6)
    expect(page.locator("#branches .tree li")).to_have_count(2)
    page.locator("#turn-3 .inspect-link").click()
    expect(page.get_by_role("heading", name=re.compile("Turn 4 · Alex"))).to_be_visible()
    expect(page.locator(".message-box.role-tool").first).not_to_contain_text(quoted)
    page.goto(branch_url)
    shot(page, "writer-02-branch")

    # Compare the two branches: turns 1-3 the same; turn 4 is compared line by line (the dry run's line
    # may come out the same: what it rests on, its goal, is in the header too; what the agent was
    # given without the excluded memory is checked above).
    page.get_by_role("link", name="Compare branches").click()
    expect(page.locator("#compare tr[data-index='0']")).to_have_class(re.compile("same"))
    expect(page.locator("#compare tr[data-index='2']")).to_have_class(re.compile("same"))
    expect(page.locator("#compare tr[data-index='3']")).to_have_class(re.compile("same|differs"))
    shot(page, "writer-03-compare")
    page.goto(branch_url)

    # Polish a line in the reading view (HTMX inline edit), annotate it, then export Fountain.
    page.get_by_role("link", name="Review & export the chronicle").click()
    row = page.locator("#line-0")
    row.get_by_text("Polish the wording / annotate").click()
    row.get_by_label("Line 1").fill("Right. Food first, feelings later.")
    row.get_by_label("Annotation 1").fill("Alex is hungrier than he admits")
    row.get_by_role("button", name="Save").click()
    expect(page.locator("#line-0 .text")).to_have_text("Right. Food first, feelings later.")
    expect(page.locator("#line-0 .annotation")).to_contain_text("hungrier")
    page.locator("#line-2").get_by_role("button", name="Strike").click()
    expect(page.locator("#line-2")).to_have_class(re.compile("struck"))
    shot(page, "writer-04-review")

    with page.expect_download() as download_info:
        page.locator("#export-fountain").click()
    download = download_info.value
    assert download.suggested_filename.endswith(".fountain")
    text = open(download.path(), encoding="utf-8").read()
    assert "INT. ALEX'S APARTMENT" in text
    assert "ALEX\nRight. Food first, feelings later.\n[[Alex is hungrier than he admits]]" in text
