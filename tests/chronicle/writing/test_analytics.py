"""The analytics page and the memory map of a finished dry run: the numbers match what the run did,
each chart has its table, one agent's view is that agent's, a big bank's map comes from a worker,
and another writer gets a 404."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest
from django.urls import reverse

from chronicle.simulation.run.models import Retrieval
from chronicle.writing.analytics import analytics
from memory.measuring import projection
from memory.embedding.cache import embed_texts
from memory.models import BankMap, Memory
from memory.services import memory_archive
from memory.tasks import bank_map_task

pytestmark = pytest.mark.django_db


def _returned(simulation, agent=None) -> Counter:
    """How often each memory came back, counted from the stored retrievals themselves."""
    rows = Retrieval.objects.filter(turn__simulation=simulation, turn__status="done")
    if agent:
        rows = rows.filter(agent=agent)
    return Counter(r["memory_id"] for retrieval in rows for r in retrieval.results)


def test_the_page_draws_what_the_run_did(client_for, user, finished):
    response = client_for(user).get(reverse("chronicle_analytics", args=[finished.pk]))
    assert response.status_code == 200
    data = response.context["data"]
    charts = {chart.id: chart for chart in data.charts}
    assert set(charts) == {"kinds", "importance", "tools", "tokens", "latency"}

    # Memories by kind: the chart's totals are the bank's active memories, kind by kind.
    active = Memory.objects.in_bank(finished.bank).active()
    expected = Counter(active.values_list("kind", flat=True))
    drawn = {key: sum(cell.get(key, 0) for cell in charts["kinds"].values) for key, _l, _c in charts["kinds"].series}
    assert drawn == dict(expected)
    # Tool calls: one column per finished turn, as many searches as the turn recorded.
    assert charts["tools"].columns == [str(n) for n in range(1, 7)]
    per_turn = [sum(cell.values()) for cell in charts["tools"].values]
    assert per_turn == [finished.turns.get(index=i).retrievals.count() for i in range(6)]
    # Tokens: the context sections of each turn, as the turn view counts them.
    first = finished.turns.get(index=0)
    sections = sum(s["tokens"] for call in first.context["calls"] for s in call["sections"])
    assert sum(v for k, v in charts["tokens"].values[0].items() if k != "completion") == sections > 0
    # Latency: the memory system's own time is each turn's memory_ms.
    assert [cell["memory"] for cell in charts["latency"].values] == pytest.approx(
        [finished.turns.get(index=i).context["memory_ms"] for i in range(6)], abs=0.1)
    # …and the model's is the time its calls took (recorded by the engine, never negative or missing).
    assert [cell["llm"] for cell in charts["latency"].values] == pytest.approx(
        [finished.turns.get(index=i).context["llm_ms"] for i in range(6)], abs=0.1)
    assert all(cell["rest"] >= 0 for cell in charts["latency"].values)

    # Diversity and coverage per agent, from the retrievals stored with the turns.
    for row in data.use:
        mine = _returned(finished, row.agent)
        assert (row.retrievals, row.distinct) == (sum(mine.values()), len(mine))
        assert 0 < row.diversity <= 1 and 0 < row.coverage <= 1
    everyone = _returned(finished)
    assert data.most[0]["count"] == max(everyone.values())
    assert data.never_count == active.exclude(pk__in=list(everyone)).count()

    # Drawn: every chart is an SVG with bars, and its numbers are a table under it.
    html = response.content.decode()
    for chart_id in charts:
        block = html.split(f'id="chart-{chart_id}"', 1)[1].split("</figure>", 1)[0]
        assert "<svg" in block and "<rect" in block and "<table" in block, chart_id
    assert html.count('id="use-table"') == 1


def test_one_agents_view_is_that_agents(client_for, user, finished):
    agent = finished.cast_names[1]
    data = client_for(user).get(reverse("chronicle_analytics", args=[finished.pk]), {"agent": agent}).context["data"]
    spoken = list(finished.turns.filter(agent=agent).order_by("index").values_list("index", flat=True))
    tools = next(chart for chart in data.charts if chart.id == "tools")
    assert tools.columns == [str(i + 1) for i in spoken] and data.turns == len(spoken)
    assert [row.agent for row in data.use] == [agent]
    assert {m.agent for m in data.never} <= {agent, ""}
    # A name that is not in the cast shows everyone (not an empty page).
    assert analytics(finished, agent="Nobody").agent == ""


def test_the_map_places_every_memory_and_follows_changes(client_for, user, finished):
    client = client_for(user)
    url = reverse("chronicle_map", args=[finished.pk])
    response = client.get(url)
    active = Memory.objects.in_bank(finished.bank).active()
    html = response.content.decode()
    assert response.status_code == 200 and html.count("<circle") == active.count() > 20
    # Hover reads the memory, a click opens it in the bank.
    memory = active.filter(kind="episodic").first()
    link = reverse("chronicle_memories", args=[finished.pk])
    circle = rf'<a href="{link}\?agent={memory.agent}&amp;memory={memory.pk}#memory-{memory.pk}"><circle[^>]*><title>#{memory.pk} '
    assert re.search(circle, html)
    points = {pk: (x, y) for pk, x, y in BankMap.objects.get(bank=finished.bank).points}
    assert set(points) == set(active.values_list("pk", flat=True))
    assert all(0 <= x <= 1 and 0 <= y <= 1 for x, y in points.values())

    # Colour by kind: the legend names the kinds.
    legend = client.get(url, {"colour": "kind"}).context["map"].legend
    assert {label for label, _colour, _n in legend} >= {"sheet", "conversation"}

    # An archived memory leaves the map at the next visit (the kept map is out of date).
    memory_archive(memory=memory)
    assert client.get(url).content.decode().count("<circle") == active.count()
    assert memory.pk not in {pk for pk, _x, _y in BankMap.objects.get(bank=finished.bank).points}


def test_a_big_banks_map_is_drawn_by_a_worker(client_for, user, finished, monkeypatch):
    monkeypatch.setattr(projection, "INLINE_LIMIT", 10)
    asked = []
    monkeypatch.setattr(bank_map_task, "delay", asked.append)
    client = client_for(user)
    url = reverse("chronicle_map", args=[finished.pk])
    first = client.get(url).content.decode()
    assert "A worker is drawing the map" in first and "<circle" not in first and 'hx-trigger="every 2s"' in first
    client.get(url, HTTP_HX_REQUEST="true")  # the page's poll asks again: no second request to the worker
    assert asked == [finished.bank_id]
    bank_map_task(finished.bank_id)  # what the worker runs
    done = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert "A worker is drawing" not in done and "every 2s" not in done
    assert done.count("<circle") == Memory.objects.in_bank(finished.bank).active().count()


def test_similar_memories_lie_together():
    """The projection keeps meaning: two topics fall apart along the first axis."""
    food = ["We should try the new ramen place.", "I want pasta with fresh basil tonight.",
            "The curry at the Thai restaurant is excellent.", "Let's bake bread this weekend."]
    sea = ["The boat left the harbour at dawn.", "A storm is coming over the sea tonight.",
           "The sailors raised the main sail.", "Waves crashed against the lighthouse."]
    xy, explained = projection.pca_2d(np.asarray(embed_texts(food + sea)))
    assert explained[0] >= explained[1] > 0
    left, right = sorted([xy[:4, 0].mean(), xy[4:, 0].mean()])
    group = {tuple(sorted(xy[:4, 0] > (left + right) / 2)), tuple(sorted(xy[4:, 0] > (left + right) / 2))}
    assert group == {(False,) * 4, (True,) * 4}


def test_another_writer_gets_404(client_for, other_user, finished):
    client = client_for(other_user)
    for name in ("chronicle_analytics", "chronicle_map"):
        assert client.get(reverse(name, args=[finished.pk])).status_code == 404
    assert not BankMap.objects.filter(bank=finished.bank).exists()


def test_a_histograms_ten_bins_are_each_labelled_under_their_bar():
    from chronicle.writing.charts import stacked

    chart = stacked(id="importance", title="Importance", caption="", series=[("gift", "given", "#000")],
                    columns=[f"{n}–{n + 1}" for n in range(10)], values=[{"gift": n + 1} for n in range(10)])
    xs = [x for x, _label in chart.ticks]
    assert [label for _x, label in chart.ticks] == chart.columns
    assert len({round(b - a, 2) for a, b in zip(xs, xs[1:])}) == 1  # evenly placed
    centres = [round(bar.x + bar.width / 2, 0) for bar in chart.bars]
    assert all(abs(x - c) <= 1 for x, c in zip(xs, centres))  # each under its bar


def test_the_maps_points_stay_whole_inside_its_frame(user, finished):
    from types import SimpleNamespace

    from chronicle.writing.analytics import MAP_SIZE, memory_map

    ids = list(Memory.objects.in_bank(finished.bank).values_list("pk", flat=True)[:4])
    corners = [(ids[0], 0.0, 0.0), (ids[1], 1.0, 1.0), (ids[2], -0.02, 1.03), (ids[3], 0.5, 0.5)]
    drawn = memory_map(finished, SimpleNamespace(points=corners, explained=[]))
    r = drawn.point_r
    assert drawn.points and all(r * 2 <= p.x <= MAP_SIZE - r * 2 and r * 2 <= p.y <= MAP_SIZE - r * 2
                                for p in drawn.points)


def test_the_banks_filters_are_named(client_for, user, finished):
    page = client_for(user).get(reverse("chronicle_memories", args=[finished.pk])).content.decode()
    form = page[page.index('id="bank-filters"'):page.index("</form>", page.index('id="bank-filters"'))]
    for label, name in (("Whose", "agent"), ("Kind", "kind"), ("Source", "source"), ("Status", "status")):
        assert re.search(rf'<label class="small filter">{label} <select name="{name}">', form), label
