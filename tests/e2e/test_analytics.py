"""The demo run's analytics and memory map in a browser: the charts are drawn with their tables,
one agent's view narrows them, and a point of the map opens its memory in the bank."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from chronicle.demo import load_demo
from chronicle.simulation.run.models import Simulation
from memory.models import Memory
from tests.e2e.conftest import start_demo_run

pytestmark = [pytest.mark.e2e, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_the_demo_runs_analytics_and_memory_map(logged_in_page, user, celery_worker, shot):
    load_demo(owner=user)
    page = logged_in_page
    simulation = Simulation.objects.get(pk=start_demo_run(page, turns=12))

    # From the run page to its analytics: every chart drawn, each with its numbers.
    page.locator("#writer-links").get_by_role("link", name="Analytics").click()
    expect(page.get_by_role("heading", name=re.compile("^Analytics of"))).to_be_visible()
    for chart in ("kinds", "importance", "tools", "tokens", "latency"):
        figure = page.locator(f"#chart-{chart}")
        expect(figure.locator("svg rect").first).to_be_attached()
        figure.locator("details.chart-table summary").click()
        expect(figure.locator("table tbody tr").first).to_be_visible()
    expect(page.locator("#chart-tools table tbody tr")).to_have_count(12)  # one row per turn
    expect(page.locator("#use-table tbody tr")).to_have_count(3)  # Alex, Jordan, Sam
    expect(page.locator("#most-retrieved table tbody tr").first).to_be_visible()
    expect(page.locator("#stats-table tbody tr")).to_have_count(3)  # what each one's memory holds
    shot(page, "analytics-00-demo-run")

    # One agent's view: its turns only.
    page.locator("#use-table").get_by_role("link", name="Sam").click()
    expect(page.get_by_role("heading", name=re.compile("Sam$"))).to_be_visible()
    spoken = simulation.turns.filter(agent="Sam").count()
    expect(page.locator("#chart-tools table tbody tr")).to_have_count(spoken)
    expect(page.locator("#stats-table tbody tr")).to_have_count(1)
    expect(page.locator("#stats-bands")).to_contain_text("life-changing")
    expect(page.locator("#stats-important li").first).to_be_visible()

    # The memory map: a point per active memory; a point reads its memory and opens it.
    page.get_by_role("link", name="Memory map").first.click()
    page.select_option("#map-agent", "")
    page.get_by_role("button", name="Show").click()
    active = Memory.objects.in_bank(simulation.bank).active()
    expect(page.locator("#map svg circle")).to_have_count(active.count())
    expect(page.locator("#map-table")).to_contain_text(re.compile(rf"memories mapped\s*{active.count()}\b"))
    shot(page, "analytics-01-memory-map")
    memory = active.filter(kind="episodic", agent="Jordan").order_by("-turn").first()
    point = page.locator(f"#map a[href$='#memory-{memory.pk}'] circle")
    expect(point.locator("title")).to_contain_text(memory.content[:40])
    point.hover()
    point.click(force=True)
    page.wait_for_url(re.compile(rf"/chronicle/{simulation.pk}/memories/\?agent=Jordan&memory={memory.pk}#memory-{memory.pk}$"))
    expect(page.locator(f"#memory-{memory.pk}")).to_be_visible()

    # Coloured by kind, the legend names the kinds drawn.
    page.goto(f"/chronicle/{simulation.pk}/map/?colour=kind")
    expect(page.locator(".map-wrap .legend")).to_contain_text("conversation")
    shot(page, "analytics-02-memory-map-by-kind")
