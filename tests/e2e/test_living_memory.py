"""Living memory in a browser: a 40-turn dry run reflects, the writer opens a reflection's evidence,
reads the bank's timeline, consolidates an agent's old lines and undoes it from the history."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from chronicle.demo import load_demo
from chronicle.simulation.run.models import Simulation
from memory.models import Memory
from tests.e2e.conftest import start_demo_run

pytestmark = [pytest.mark.e2e, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_a_long_dry_run_reflects_and_the_writer_consolidates(logged_in_page, user, celery_worker, shot):
    load_demo(owner=user)
    page = logged_in_page
    simulation = Simulation.objects.get(pk=start_demo_run(page, turns=40, reflection_threshold="60"))
    assert simulation.turns.count() == 40 and simulation.reflection_threshold == 60

    # A reflection is a quiet marginal event in the chronicle; its evidence opens in place.
    # Insights queued after the last turns arrive while the page keeps polling, then it stops.
    expect(page.locator("#live")).not_to_have_attribute("hx-trigger", re.compile("every"), timeout=120_000)
    reflection = page.locator("li.reflection").first
    expect(reflection).to_contain_text(re.compile(r"(Alex|Jordan|Sam) reflects:"))
    reflection.locator("details.evidence summary").click()
    evidence = reflection.locator("details.evidence li")
    expect(evidence.first).to_be_visible()
    insight = Memory.objects.get(pk=int(reflection.get_attribute("id").split("-")[1]))
    assert insight.kind == "reflection" and insight.evidence.count() == evidence.count() > 0
    shown = int(re.match(r"#(\d+)", evidence.first.inner_text()).group(1))
    source = insight.evidence.get(pk=shown)  # the link resolves to a memory the insight rests on
    expect(evidence.first).to_contain_text(source.content[:40])
    shot(page, "living-00-reflection-evidence")

    # The bank: a timeline per agent, with the reflection at its turn.
    reflection.get_by_role("link", name=re.compile(r"open #\d+ in the bank")).click()
    expect(page.locator(f"#memory-{insight.pk}")).to_be_visible()
    lane = page.locator(".timeline figure.lane").filter(has_text=insight.agent)
    expect(lane.locator("figcaption")).to_contain_text(re.compile(r"[1-9]\d* reflected"))
    expect(lane.locator(f"rect title:text-matches('Turn {insight.turn}: \\\\d+ reflected')")).to_have_count(1)

    # Consolidate Alex's old lines from the bank page: a summary resting on them, the chart says so.
    page.goto(f"/chronicle/{simulation.pk}/memories/")
    page.get_by_role("button", name="Consolidate Alex's old memories").click()
    message = page.get_by_text(re.compile(r"Alex: \d+ memories consolidated into \d+ summar"))
    expect(message).to_be_visible()
    folded = int(re.search(r"Alex: (\d+) memories", message.inner_text()).group(1))
    bank = Memory.objects.in_bank(simulation.bank)
    assert bank.filter(agent="Alex", status="consolidated").count() == folded > 1
    alex = page.locator(".timeline figure.lane").filter(has_text="Alex")
    expect(alex.locator("figcaption")).to_contain_text(f"{folded} consolidated")
    summary = bank.filter(agent="Alex", source="consolidation").first()
    expect(page.locator(f"#evidence-of-{summary.pk}")).to_contain_text("rests on")
    shot(page, "living-01-bank-timeline-consolidated")

    # Undo one summary from the history (each summary is one entry): its lines are active again.
    page.get_by_role("link", name="History").first.click()
    row = page.locator("#history tr").filter(has_text="memories consolidated into").first
    expect(row.locator("td.after")).to_contain_text("consolidated: #")  # read as statuses, not a dict
    restored, summary_id = map(int, re.search(r"(\d+) memories consolidated into #(\d+)", row.inner_text()).groups())
    row.get_by_role("button", name="Undo").click()
    expect(page.get_by_text(re.compile(r"^Undone:")).first).to_be_visible()
    assert bank.filter(agent="Alex", status="consolidated").count() == folded - restored
    assert bank.get(pk=summary_id).status == "archived"
    assert all(m.status == "active" for m in bank.get(pk=summary_id).evidence.all())
    page.goto(f"/chronicle/{simulation.pk}/memories/?agent=Alex")
    expect(page.locator(".timeline figure.lane").filter(has_text="Alex").locator("figcaption")) \
        .to_contain_text(f"{folded - restored} consolidated")

    # Prune what has faded: archived, shown as pruned, and brought back by the same form.
    page.get_by_role("button", name="Prune faded memories").click()
    pruned = bank.filter(status="archived", metadata__has_key="pruned")
    expect(page.get_by_text(re.compile(r"faded memor(y|ies) archived|No memory has faded enough"))).to_be_visible()
    if pruned.exists():
        count = pruned.count()
        shot(page, "living-02-pruned")
        page.get_by_role("button", name=f"Restore pruned memories ({count})").click()
        expect(page.get_by_text(f"{count} pruned memor", exact=False)).to_be_visible()
        assert not pruned.exists()
