"""Memory formation in a run: importance stored and shown, capture filters reported in the turn's note."""

from __future__ import annotations

import pytest
from django.urls import reverse

from chronicle.simulation.run.models import Simulation, Turn
from chronicle.simulation.control.tasks import run_turn_task
from memory.models import Memory
from tests.factories import start, say


@pytest.mark.django_db
def test_a_repeated_line_is_not_kept_and_the_turn_says_so(user, dinner):
    simulation = start(user, dinner, capture_duplicate_threshold=0.97)
    assert simulation.importance_scorer == "llm"  # the default; a scripted run scores with the heuristic
    first = say(simulation, 0, "Alex", "Shall we try Bella's trattoria at seven?")
    heard = Memory.objects.in_bank(simulation.bank).filter(kind="episodic", turn=1)
    assert heard.count() == 3 and first.note == ""
    # Scored by the heuristic, per listener: Jordan's goal is Bella's trattoria.
    parts = {m.agent: m.metadata["importance"] for m in heard}
    assert {p["scorer"] for p in parts.values()} == {"heuristic"}
    assert parts["Jordan"]["goal_relevance"] > parts["Sam"]["goal_relevance"]
    assert heard.get(agent="Jordan").importance > heard.get(agent="Sam").importance
    sam_first = heard.get(agent="Sam")
    # Alex says it again: nobody keeps it twice (the same words from another speaker would be news).
    second = say(simulation, 1, "Alex", "Shall we try Bella's trattoria at seven?")
    assert Memory.objects.in_bank(simulation.bank).filter(kind="episodic", turn=2).count() == 0
    assert f"Sam did not keep: “Alex said: Shall we try Bella's trattoria at seven?” (duplicate of #{sam_first.pk}, 1.00)" \
        in second.note
    assert second.note.count("did not keep") == 3


@pytest.mark.django_db
def test_the_importance_floor_filters_and_is_reported(user, dinner):
    simulation = start(user, dinner, capture_importance_floor=6.0)
    turn = say(simulation, 0, "Alex", "The carpet in the hallway is beige.")
    assert Memory.objects.in_bank(simulation.bank).filter(kind="episodic", turn=1).count() == 0
    assert "Sam did not keep: “Alex said: The carpet in the hallway is beige.” (importance" in turn.note
    assert "below the floor" in turn.note


@pytest.mark.django_db
def test_llm_scorer_on_the_scripted_provider_uses_the_heuristic(user, dinner):
    simulation = start(user, dinner, importance_scorer="llm")
    assert run_turn_task.apply(args=(simulation.pk, 0)).get() == "done"
    scorers = {m.metadata["importance"]["scorer"] for m in Memory.objects.in_bank(simulation.bank).filter(kind="episodic")}
    assert scorers == {"heuristic"}


@pytest.mark.django_db
def test_the_form_offers_memory_formation_and_stores_it(user, dinner, client_for, django_capture_on_commit_callbacks):
    client = client_for(user)
    page = client.get(reverse("simulation_create")).content.decode()
    assert "Memory formation" in page and 'name="capture_duplicate_threshold"' in page and 'value="1.0"' in page
    data = {"scenario": dinner.pk, "max_turns": 3, "speaking_order": "round_robin", "retrieval_mode": "prepopulate",
            "scoring": "similarity", "provider": "scripted", "temperature": "0.7", "max_tokens": 300,
            "max_tool_calls": 4, "timeout_s": 30, "pace_s": 0, "importance_scorer": "llm",
            "capture_importance_floor": "4", "capture_duplicate_threshold": "0.9", "capture_only_concerning": "on",
            "capture_adaptive_duplicates": "on"}
    assert 'name="capture_adaptive_duplicates"' in page
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(reverse("simulation_create"), data)
    assert response.status_code == 302
    simulation = Simulation.objects.get()
    assert (simulation.importance_scorer, simulation.capture_importance_floor, simulation.capture_duplicate_threshold,
            simulation.capture_only_concerning, simulation.capture_adaptive_duplicates) == ("llm", 4.0, 0.9, True, True)
    # The turn's capture takes each listener's own threshold, at most the writer's 0.9.
    from chronicle.simulation.aftermath.formation import capture_options

    filters = capture_options(simulation, Turn(simulation=simulation))["filters"]
    assert filters.adaptive_duplicates and filters.duplicate_threshold == 0.9
    simulation.capture_duplicate_threshold = 1.0  # the fixed filter off: each one's own, at most 0.97
    assert capture_options(simulation, Turn(simulation=simulation))["filters"].duplicate_threshold == 0.97
    bad = client.post(reverse("simulation_create"), data | {"capture_importance_floor": "11"})
    assert bad.status_code == 200 and "less than or equal to 10" in bad.content.decode()


@pytest.mark.django_db
def test_importance_shows_in_the_inspector_and_the_bank(user, dinner, client_for, monkeypatch):
    from chronicle.simulation.prompting import prompts

    monkeypatch.setattr(prompts, "WINDOW_STEP", 1)  # the last 8 lines: turn 10 recalls the ones before
    simulation = start(user, dinner, max_turns=10)
    for index in range(10):
        assert run_turn_task.apply(args=(simulation.pk, index)).get() == "done"
    client = client_for(user)
    bank = client.get(reverse("chronicle_memories", args=[simulation.pk])).content.decode()
    memory = Memory.objects.in_bank(simulation.bank).filter(kind="episodic").order_by("id").first()
    parts = memory.metadata["importance"]
    shown = (f"importance {parts['score']:.1f} (goals {parts['goal_relevance']:.1f} · "
             f"emotion {parts['emotional_impact']:.1f} · novelty {parts['novelty']:.1f})")
    assert shown in bank
    # Turn 10 (Alex) recalled lines from before its transcript window: each row carries its importance line.
    page = client.get(reverse("turn_inspect", args=[simulation.pk, 9])).content.decode()
    assert "importance " in page and "(goals " in page and "novelty " in page


@pytest.mark.django_db
def test_the_analytics_page_reports_what_was_kept_and_what_the_filters_left_out(user, dinner, client_for):
    """Seed 003's storage report: each listener's copies kept, and left out by reason, with the share saved."""
    simulation = start(user, dinner, capture_duplicate_threshold=0.97)
    say(simulation, 0, "Alex", "Shall we try Bella's trattoria at seven?")
    say(simulation, 1, "Alex", "Shall we try Bella's trattoria at seven?")  # a repeat: nobody keeps it again
    page = client_for(user).get(reverse("chronicle_analytics", args=[simulation.pk]))
    report = page.context["storage"]
    assert {(a.agent, a.kept, a.filtered.get("duplicate")) for a in report.agents} == {
        (name, 1, 1) for name in simulation.cast_names}
    assert report.total.kept == report.total.left_out == len(simulation.cast_names) and report.total.reduction == 0.5
    html = page.content.decode()
    assert 'id="storage-table"' in html and "seed 003 aims at 60 %" in html and "(50 %)" in html
    # One agent's view: only its row.
    one = client_for(user).get(reverse("chronicle_analytics", args=[simulation.pk]) + "?agent=Sam")
    assert [a.agent for a in one.context["storage"].agents] == ["Sam"]
