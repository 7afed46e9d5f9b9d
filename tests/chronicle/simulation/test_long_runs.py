"""Runs as long as stories: up to 10,000 turns, and pages that read one page of lines at a time.

The long runs here are bulk inserted (chronicle.simulation.long_run), as `manage.py bench_pages`
builds them; the timings are that command's to print, these tests check what a writer sees."""

from __future__ import annotations

import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from chronicle.simulation.forms import SimulationForm
from chronicle.simulation.long_run import long_run
from chronicle.simulation.models import Simulation, Turn
from chronicle.simulation.tasks import run_turn_task
from tests.chronicle.simulation.conftest import start_seeded

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
    simulation = start_seeded(user, dinner, max_turns=3)
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
