"""Runs as long as stories: up to 10,000 turns, and pages that read one page of lines at a time; the
analytics, the memory bank page and the run page's panels cost the same queries at any length.

The long runs here are bulk inserted (chronicle.simulation.measuring.long_run), as `manage.py bench_pages`
builds them; the timings are that command's to print, these tests check what a writer sees."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest
from django.db import connection
from django.template.defaultfilters import floatformat
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from chronicle.simulation.pages.forms import SimulationForm
from chronicle.simulation.measuring.long_run import long_run
from chronicle.simulation.run.models import Retrieval, Simulation, Turn
from chronicle.simulation.pages.run_panels import (CHANGES_SHOWN, CHART_GUTTER, CHART_HEIGHT, CHART_WIDTH,
                                             HISTORY_SHOWN)
from chronicle.simulation.control.tasks import run_turn_task
from memory.models import Memory, MemoryAccess, Relationship
from tests.factories import start

HX = {"HTTP_HX_REQUEST": "true"}


def shown_turns(html: str) -> list[int]:
    """The turn indexes whose lines the run page shows."""
    return [int(i) for i in re.findall(r'<li id="turn-(\d+)"', html)]


@pytest.fixture
def long(user):
    return long_run(user, 1200, title="The long one")


@pytest.mark.django_db
def test_the_run_page_shows_the_latest_lines_and_the_way_to_earlier_ones(user, client_for, long):
    client = client_for(user)
    html = client.get(long.get_absolute_url()).content.decode()
    assert shown_turns(html) == list(range(1100, 1200))
    assert "Turns 1101–1200 of 1200 (the latest)" in html
    assert 'href="?page=11#turn-list" rel="prev"' in html and 'name="turn"' in html
    # The figures are the whole run's, not the page's.
    sent = sum(t.prompt_tokens for t in long.turns.only("usage"))
    assert "1200 of 1200 turns" in html and f"Tokens: {sent} sent over 1200 turns" in html

    first = client.get(long.get_absolute_url() + "?page=1").content.decode()
    assert shown_turns(first) == list(range(0, 100)) and "Turn 1, and I keep thinking" in first
    assert 'rel="next"' in first and 'rel="prev"' not in first
    # A page past the end is the last one; nonsense is the latest.
    assert shown_turns(client.get(long.get_absolute_url() + "?page=99").content.decode())[-1] == 1199
    assert shown_turns(client.get(long.get_absolute_url() + "?page=x").content.decode())[0] == 1100


@pytest.mark.django_db
def test_go_to_turn_opens_the_page_that_holds_it_at_its_line(user, client_for, long):
    client = client_for(user)
    response = client.get(long.get_absolute_url() + "?turn=250")
    assert response.status_code == 302 and response["Location"] == f"{long.get_absolute_url()}?page=3#turn-249"
    assert shown_turns(client.get(response["Location"]).content.decode()) == list(range(200, 300))
    review = client.get(reverse("chronicle_review", args=[long.pk]) + "?turn=1150")
    assert review["Location"].endswith("?page=12#line-1149")


@pytest.mark.django_db
def test_the_live_poll_keeps_the_page_being_read(user, client_for, long):
    Simulation.objects.filter(pk=long.pk).update(status=Simulation.Status.RUNNING, max_turns=2000)
    client = client_for(user)
    latest = client.get(long.get_absolute_url(), **HX).content.decode()
    assert f'hx-get="{long.get_absolute_url()}"' in latest and shown_turns(latest)[-1] == 1199
    earlier = client.get(long.get_absolute_url() + "?page=2", **HX).content.decode()
    assert f'hx-get="{long.get_absolute_url()}?page=2"' in earlier and shown_turns(earlier)[0] == 100


@pytest.mark.django_db
def test_the_run_page_costs_the_same_queries_at_60_and_at_1200_turns(user, client_for, long):
    short = long_run(user, 60, title="The short one")
    client = client_for(user)
    counts = {}
    for run in (short, long):
        for name, headers in (("page", {}), ("poll", HX)):
            client.get(run.get_absolute_url(), **headers)  # warm: the session, the templates
            with CaptureQueriesContext(connection) as ctx:
                assert client.get(run.get_absolute_url(), **headers).status_code in (200, 286)
            counts[run.pk, name] = len(ctx)
            # No query reads a turn's messages sent or its context window whole.
            assert not any('"prompt_messages"' in q["sql"] for q in ctx.captured_queries)
    assert counts[short.pk, "page"] == counts[long.pk, "page"]
    assert counts[short.pk, "poll"] == counts[long.pk, "poll"]


@pytest.mark.django_db
def test_the_review_and_the_comparison_go_page_by_page(user, client_for, long):
    client = client_for(user)
    review = client.get(reverse("chronicle_review", args=[long.pk])).content.decode()
    assert re.findall(r'id="line-(\d+)"', review) == [str(i) for i in range(100)]  # a chronicle reads from the start
    assert "(edited) Line 1." in review and 'href="?page=2#review"' in review
    page_5 = client.get(reverse("chronicle_review", args=[long.pk]) + "?page=5").content.decode()
    assert re.findall(r'id="line-(\d+)"', page_5)[0] == "400"

    branch = long_run(user, 1200, title="The long one, a branch", parent=long, seed=8)
    compare = client.get(reverse("chronicle_compare", args=[branch.pk])).content.decode()
    rows = re.findall(r'data-index="(\d+)"', compare)
    assert rows == [str(i) for i in range(600, 700)]  # where the branch parts from its parent
    assert f'name="other" value="{long.pk}"' in compare


@pytest.mark.django_db
def test_the_exports_hold_every_line_of_a_long_run(user, client_for, long):
    client = client_for(user)
    markdown = client.get(reverse("chronicle_export", args=[long.pk, "md"])).content.decode()
    assert "*(turn 1)*" in markdown and "*(turn 1200)*" in markdown and "(edited) Line 101." in markdown
    response = client.get(reverse("chronicle_export", args=[long.pk, "json"]))
    data = json.loads(b"".join(response.streaming_content))
    assert [t["index"] for t in data["turns"]] == list(range(1200))
    assert len(data["turns"][5]["retrievals"]) == 2 and len(data["memories"]) == 3 * 1200 + 1200 // 25 + 9  # lines, insights, beliefs
    # Each turn with its own retrievals and the writer's entry, read a chunk at a time.
    assert [r["query"] for r in data["turns"][1150]["retrievals"]] == list(
        Retrieval.objects.filter(turn__simulation=long, turn__index=1150).order_by("order").values_list("query", flat=True))
    assert data["turns"][1100]["entry"]["text"] == "(edited) Line 1101." and data["turns"][1101]["entry"] is None


@pytest.mark.django_db
def test_analytics_of_a_long_run_draw_spans_of_turns(user, client_for, long):
    html = client_for(user).get(reverse("chronicle_analytics", args=[long.pk])).content.decode()
    assert "Each column is 6 turns: the mean per turn over them." in html
    assert "1195–1200" in html and "turn 1199:" not in html

    # A line with no model call behind it (the writer's own) has no calls in its context: still drawn.
    Turn.objects.filter(simulation=long, index=1199).update(context={})
    response = client_for(user).get(reverse("chronicle_analytics", args=[long.pk]))
    assert response.status_code == 200 and "1195–1200" in response.content.decode()


@pytest.mark.django_db
def test_the_form_takes_5000_turns_and_refuses_10001_saying_the_most(user, dinner):
    data = {"scenario": dinner.pk, "speaking_order": "round_robin", "retrieval_mode": "prepopulate", "scoring": "similarity",
            "provider": "scripted", "temperature": "0.7", "max_tokens": 300, "max_tool_calls": 4, "timeout_s": 30,
            "pace_s": 0}
    assert SimulationForm(data | {"max_turns": 5000}, owner=user).is_valid()
    form = SimulationForm(data | {"max_turns": 10_001}, owner=user)
    assert not form.is_valid()
    assert form.errors["max_turns"] == ["A run has at most 10,000 turns; to go on past that, start a sequel."]


@pytest.mark.django_db
def test_run_until_i_pause_goes_on_past_500_turns(user, dinner, client_for):
    simulation = start(user, dinner, max_turns=3)
    for index in range(3):
        assert run_turn_task.apply(args=(simulation.pk, index)).get() == "done"
    done = Turn.objects.get(simulation=simulation, index=2)
    cast = simulation.cast_names
    Turn.objects.bulk_create([Turn(simulation=simulation, index=i, agent=cast[i % 3], status="done",
                                   utterance=f"Line {i + 1}.", usage=done.usage, heard_by=cast) for i in range(3, 520)])
    Simulation.objects.filter(pk=simulation.pk).update(max_turns=520, status=Simulation.Status.COMPLETED)
    client = client_for(user)

    client.post(simulation.get_absolute_url(), {"until_paused": ""})
    simulation.refresh_from_db()
    assert (simulation.status, simulation.max_turns) == ("running", 10_000)
    assert "520 turns · running until you pause" in client.get(simulation.get_absolute_url()).content.decode()
    assert run_turn_task.apply(args=(simulation.pk, 520)).get() == "done"
    assert Turn.objects.get(simulation=simulation, index=520).status == "done"  # turn 521 was said


# --- analytics, the memory bank page and the run page's panels at any length -------------------------

# The most rows one statement of these pages may bring back, however long the run: a row per chart
# column and series (200 columns × the token and time series) or per unit of a relationship chart's x
# (336 × six pairs). Reading a row per turn or per memory of a 1,200-turn run goes past it.
MOST_ROWS = 2_016


def _captured(client, url: str, **headers) -> list[dict]:
    """The page's statements, each with the rows it brought back (`rows`)."""
    client.get(url, **headers)  # warm: the session, the templates
    counted = []

    def count_rows(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        counted.append(context["cursor"].rowcount)
        return result

    with CaptureQueriesContext(connection) as ctx, connection.execute_wrapper(count_rows):
        assert client.get(url, **headers).status_code in (200, 286)
    return [dict(query, rows=rows) for query, rows in zip(ctx.captured_queries, counted, strict=True)]


@pytest.mark.django_db
def test_analytics_the_bank_page_and_the_run_page_cost_the_same_queries_at_60_and_at_1200_turns(user, client_for, long):
    short = long_run(user, 60, title="The short one")
    client = client_for(user)
    pages = {"analytics": ("chronicle_analytics", ""), "analytics of one": ("chronicle_analytics", "?agent=Sam"),
             "bank": ("chronicle_memories", ""), "bank, page 2": ("chronicle_memories", "?page=2"),
             "bank of one": ("chronicle_memories", "?agent=Alex&kind=episodic"), "run page": ("simulation_detail", "")}
    seen = {}
    for run in (short, long):
        for name, (url_name, query) in pages.items():
            seen[run.pk, name] = _captured(client, reverse(url_name, args=[run.pk]) + query)
    for name in pages:
        small, big = seen[short.pk, name], seen[long.pk, name]
        assert len(small) == len(big), name
        # No statement carries a list that grows with the run (ids of every memory recalled, say), nor
        # brings back a row per turn or per memory.
        assert max(len(q["sql"]) for q in big) <= max(len(q["sql"]) for q in small) + 40, name
        assert max(q["rows"] for q in big) <= MOST_ROWS, (name, max(big, key=lambda q: q["rows"])["sql"][:300])


def _returned(simulation, agent: str = "") -> Counter:
    """How often each memory came back, from the stored retrievals themselves."""
    rows = Retrieval.objects.filter(turn__simulation=simulation, turn__status="done")
    return Counter(r["memory_id"] for retrieval in (rows.filter(agent=agent) if agent else rows)
                   for r in retrieval.results)


@pytest.mark.django_db
def test_analytics_of_a_long_run_count_what_came_back_to_whom(user, client_for, long):
    Memory.objects.filter(bank=long.bank, turn=1199).update(status=Memory.Status.ARCHIVED)  # out of every count
    for agent in ("", "Jordan"):
        data = client_for(user).get(reverse("chronicle_analytics", args=[long.pk]), {"agent": agent}).context["data"]
        mine = Memory.objects.in_bank(long.bank).active().filter(**({"agent__in": [agent, ""]} if agent else {}))
        returned = _returned(long, agent)
        for row in data.use:
            theirs = _returned(long, row.agent)
            assert (row.retrievals, row.distinct) == (sum(theirs.values()), len(theirs)) != (0, 0)
            assert row.reachable == Memory.objects.in_bank(long.bank).active().filter(agent__in=[row.agent, ""]).count()
        assert data.memories == mine.count()
        top = sorted(returned.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
        assert [(row["memory"].pk, row["count"]) for row in data.most] == top
        never = mine.exclude(pk__in=list(returned))
        assert data.never_count == never.count() > 0
        assert data.never == list(never.order_by("-importance", "turn", "pk")[:10])
        kinds = next(chart for chart in data.charts if chart.id == "kinds")
        assert sum(sum(cell.values()) for cell in kinds.values) == mine.count()


@pytest.mark.django_db
def test_the_bank_page_of_a_long_run_shows_its_cards_and_its_timeline(user, client_for, long):
    # Archived half-way through: placed on the timeline at the last turn finished by then.
    when = long.turns.get(index=609).finished
    Memory.objects.filter(bank=long.bank, agent="Alex", kind="episodic", turn__in=[3, 4]).update(
        status=Memory.Status.ARCHIVED, updated_at=when)
    client = client_for(user)
    response = client.get(reverse("chronicle_memories", args=[long.pk]))
    page, timeline = response.context["page"], response.context["timeline"]
    # A line everyone heard is one card (its listeners' copies); an insight or a belief is its own.
    cards = 1200 + Memory.objects.in_bank(long.bank).active().exclude(kind="episodic").count()
    assert page.paginator.count == cards and page.number == 1
    assert f"{cards} cards, page 1 of {page.paginator.num_pages}" in response.content.decode()
    shown = [(card.memory.turn, card.memory.kind, len(card.copies)) for card in page.object_list]
    assert shown[:3] == [(0, "semantic", 1)] * 3  # the writer's planted beliefs, then the lines in turn order
    assert [turn for turn, _kind, _n in shown] == sorted(turn for turn, _kind, _n in shown)
    lines = {turn: n for turn, kind, n in shown if kind == "episodic"}
    assert lines[3] == lines[4] == 2 and {n for turn, n in lines.items() if turn not in (3, 4)} == {3}
    last = client.get(reverse("chronicle_memories", args=[long.pk]) + "?page=999").context["page"]
    assert last.number == page.paginator.num_pages and last.object_list[-1].memory.turn == 1200

    assert timeline.turns == 1200
    lanes = {lane.agent: {label: n for label, _c, n in lane.totals()} for lane in timeline.lanes}
    for name in long.cast_names:
        kept = Memory.objects.in_bank(long.bank).filter(agent=name)
        assert lanes[name]["formed"] == kept.filter(source="earned").count()
        assert lanes[name]["reinforced"] == sum(MemoryAccess.objects.filter(memory__in=kept)
                                                .values_list("count", flat=True)) > 0
        assert lanes[name]["reflected"] == kept.filter(kind="reflection").count() == 16
    assert lanes["Alex"]["archived"] == 2 and {"turn": 610, "events": ["Alex: 2 archived"]} in timeline.events()
    assert "Alex, Turns 1195–1200: " in response.content.decode()  # a column for each span of six turns


def _step_line(changes: list[tuple[int, float]], last: int) -> str:
    """A pair's step line as drawn with every change (the run page's chart, read from all its rows)."""
    x = lambda turn: round(CHART_GUTTER + (CHART_WIDTH - CHART_GUTTER) * min(turn, last) / max(last, 1), 1)
    y = lambda value: round(CHART_HEIGHT / 2 - value * (CHART_HEIGHT / 2 - 4), 1)
    points, value = [(x(0), y(0.0))], 0.0
    for turn, new in changes:
        points += [(x(turn), y(value)), (x(turn), y(new))]
        value = new
    return " ".join(f"{a},{b}" for a, b in points + [(x(last), y(value))])


def _reach(points: str) -> dict[int, tuple[float, float]]:
    """Per unit of x: the lowest and highest y a polyline passes through there."""
    pts = [tuple(map(float, p.split(","))) for p in points.split()]
    reach: dict[int, tuple[float, float]] = {}
    for (x1, y1), (x2, y2) in zip(pts, pts[1:]):
        for column in range(int(min(x1, x2)), int(max(x1, x2)) + 1):
            low, high = reach.get(column, (y1, y1))
            reach[column] = (min(low, y1, y2), max(high, y1, y2))
    return reach


@pytest.mark.django_db
def test_the_panels_of_a_long_run_draw_every_change_and_list_the_latest(user, client_for, long):
    short = long_run(user, 60, title="The short one")
    # A busy moment: five changes in three turns (one unit of the chart's x) swing Alex's trust in Jordan.
    Relationship.objects.bulk_create([Relationship(bank=long.bank, agent="Alex", other="Jordan", turn=turn, trust=trust,
                                                   affinity=0.2, reason="a row") for turn, trust in
                                      ((600, -0.9), (600, 0.9), (601, -0.5), (601, 0.8), (602, 0.1))])
    client = client_for(user)
    for run in (short, long):
        html = client.get(run.get_absolute_url()).content.decode()
        rows = list(Relationship.objects.filter(bank=run.bank).order_by("agent", "other", "turn", "id"))
        pairs = {(r.agent, r.other) for r in rows}
        assert html.count('<figure class="pair"') == len(pairs) == 6
        for agent, other in pairs:
            mine = [r for r in rows if (r.agent, r.other) == (agent, other)]
            figure = html.split(f'data-pair="{agent}→{other}"', 1)[1].split("</figure>", 1)[0]
            now = mine[-1]  # where it stands: the latest change
            assert f"trust {floatformat(now.trust, 2)} · affinity {floatformat(now.affinity, 2)}" in figure
            listed = re.findall(r"<li>turn (\d+):", figure)
            drawn = re.search(r'points="([^"]+)" class="trust"', figure).group(1)
            exact = _step_line([(r.turn, r.trust) for r in mine], run.max_turns)
            if len(mine) <= CHANGES_SHOWN:  # a short run: every change, listed and drawn as it was
                assert listed == [str(r.turn) for r in mine] and "earlier change" not in figure
                assert drawn == exact
                continue
            # A long one: the latest changes listed, the others counted; the chart reaches, unit by
            # unit of x, what the line with every change reaches (give or take the unit beside it).
            assert listed == [str(r.turn) for r in mine[-CHANGES_SHOWN:]]
            assert f"{len(mine) - CHANGES_SHOWN} earlier changes from turn {mine[0].turn}, drawn above" in figure
            every, shown = _reach(exact), _reach(drawn)
            for column, (low, high) in every.items():
                near = [shown[c] for c in (column - 1, column, column + 1) if c in shown]
                assert min(lo for lo, _hi in near) <= low and max(hi for _lo, hi in near) >= high, column
            if (agent, other) == ("Alex", "Jordan"):  # the busy unit: one stroke through all it reached
                assert len(drawn.split()) < len(exact.split())
                assert f"192.0,{CHART_HEIGHT / 2 + 0.9 * (CHART_HEIGHT / 2 - 4):.1f}" in drawn  # down to −0.9

        panel = html.split('id="beliefs"', 1)[1].split("</details>", 1)[0]
        for number, claim in enumerate(panel.split('<div class="belief"')[1:], start=1):
            held = Memory.objects.in_bank(run.bank).filter(category="belief", metadata__belief__id=number)
            for memory, holder in zip(held.order_by("turn", "id"), claim.split("data-holder=")[1:], strict=True):
                assert holder.startswith(f'"{memory.agent}"')
                history = memory.metadata["belief"]["history"]
                steps = re.findall(r'<li(?: value="(\d+)")?>(turn \d+|before the story)', holder)
                if len(history) <= HISTORY_SHOWN:
                    assert len(steps) == len(history) > 1 and "steps between" not in holder
                    continue
                # Its first step (how it came to them), then the latest, numbered as in the whole history.
                kept = [history[0], *history[-(HISTORY_SHOWN - 1):]]
                assert [s[1] for s in steps] == [f"turn {h['turn']}" if h["turn"] else "before the story" for h in kept]
                assert steps[1][0] == str(len(history) - HISTORY_SHOWN + 2)
                assert f"… {len(history) - HISTORY_SHOWN} steps between, not listed" in holder
