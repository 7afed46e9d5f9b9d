"""The run page's 2 s poll: its cost does not grow with the run (counts from the database, no
retrieval JSON; the branch tree, outside the polled region, in one query sent out of band)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from chronicle.simulation.pages.line_pages import PAGE_LINES
from chronicle.simulation.run.models import Retrieval, Simulation, Turn

HX = {"HTTP_HX_REQUEST": "true"}


def run_with(user, turns: int, title: str) -> Simulation:
    simulation = Simulation.objects.create(owner=user, title=title, status="running", max_turns=500,
                                           cast_snapshot=[{"name": "Alex"}], provider="scripted")
    Turn.objects.bulk_create([Turn(simulation=simulation, index=i, agent="Alex", status="done", utterance=f"Line {i}.",
                                   prompt_messages=[{"role": "system", "content": "You are Alex."}],
                                   usage={"prompt_tokens": 100, "completion_tokens": 20}) for i in range(turns)])
    Retrieval.objects.bulk_create([Retrieval(turn=turn, agent="Alex", tool="query_memory", order=order,
                                             results=[{"memory_id": 1, "content": "A secret.", "score": 0.5}])
                                   for turn in simulation.turns.all() for order in range(3)])
    Simulation.objects.create(owner=user, title=f"{title}, a branch", parent=simulation, branch_turn=1,
                              status="completed")
    return simulation


def sql(ctx: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in ctx.captured_queries]


@pytest.mark.django_db
def test_one_poll_costs_the_same_queries_for_a_short_and_a_long_run(user, client_for):
    client = client_for(user)
    counts = []
    for turns in (3, 120):
        simulation = run_with(user, turns, f"Run of {turns}")
        with CaptureQueriesContext(connection) as ctx:
            response = client.get(simulation.get_absolute_url(), **HX)
        html = response.content.decode()
        assert response.status_code == 200 and f'id="turn-{turns - 1}"' in html
        # Counted by the database, for the latest page of lines (pages of PAGE_LINES turns: 101–120 here).
        assert html.count("Memories &amp; context (3 retrievals)") == turns - (turns - 1) // PAGE_LINES * PAGE_LINES
        assert not any('"results"' in q for q in sql(ctx))  # no retrieval's JSON is read to count it
        assert not any('"prompt_messages"' in q for q in sql(ctx))
        # The run itself, whether it has branches, and its tree (one query of the writer's runs, sent
        # out of band: it sits outside the polled region): three, whatever the run's length.
        assert sum('FROM "chronicle_simulation"' in q for q in sql(ctx)) == 3
        assert 'hx-swap-oob="true"' in html
        counts.append(len(ctx))
    assert counts[0] == counts[1]


@pytest.mark.django_db
def test_the_full_page_still_shows_the_branch_tree(user, client_for):
    simulation = run_with(user, 2, "Tree")
    page = client_for(user).get(simulation.get_absolute_url()).content.decode()
    assert 'id="branches"' in page and "Tree, a branch" in page


@pytest.mark.django_db
def test_the_branch_tree_says_the_turn_a_branch_starts_from_once(user, client_for):
    simulation = run_with(user, 2, "Tree")
    Simulation.objects.create(owner=user, title="Tree · branch 2 from turn 2", parent=simulation, branch_turn=1,
                              status="completed")
    page = client_for(user).get(simulation.get_absolute_url()).content.decode()
    assert "branch 2 from turn 2</a>" in page
    # Said once each: by the title that names it, or beside the one whose title does not.
    assert page.count("from turn 2 · completed") == 1
