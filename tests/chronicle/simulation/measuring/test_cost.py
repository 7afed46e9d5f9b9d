"""What a run costs, every call counted: the speakers' calls and the ones that keep their memory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chronicle import headless
from chronicle.simulation.pages.line_pages import run_tokens
from chronicle.simulation.measuring.measures import run_figures
from chronicle.simulation.run.models import Simulation
from chronicle.simulation.control.services import simulation_start
from tests.chronicle.simulation.conftest import wait_status

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_replayed_run_counts_the_judgement_and_the_day_summaries_a_model_would_be_asked(user, celery_worker):
    data = json.loads((FIXTURES / "probes" / "every_kind.json").read_text())
    data["settings"] |= {"story_start": "2025-03-03T18:00", "minutes_per_turn": 5,
                         "stage_directions": data["settings"]["stage_directions"] + "\n7: The next morning"}
    imported = headless.scenario_import(raw=json.dumps(data).encode(), username=user.username)
    values = headless.run_settings(imported=imported, turns=None, provider=None, mode=None)
    simulation = simulation_start(owner=user, scenario=imported.scenario, cast=list(imported.scenario.cast.all()),
                                  settings=values)
    wait_status(simulation, Simulation.Status.COMPLETED)
    turns = {t.number: t for t in simulation.turns.done()}
    side = {n: (int(t.context.get("aux_calls") or 0), int(t.context.get("aux_tokens") or 0)) for n, t in turns.items()}
    # Each line heard by others is judged in one call, its prompt counted as the replay built it; a
    # reflection rides that call (the replay's offline reflection stands in for its answer).
    assert not any("reflection_tokens" in t.context for t in turns.values())
    assert all(calls >= 1 and tokens > 100 for calls, tokens in side.values())
    # Turn 7 opens a new story day: each of the three keeps the evening before, one call each.
    assert side[7][0] == side[6][0] + 3 and side[7][1] > side[6][1] + 3 * 50
    # The run page, run_simulation and evaluate_agents count them with the speakers' calls.
    tokens = run_tokens(simulation)
    assert tokens.side_tokens == sum(t for _c, t in side.values()) and tokens.side_calls == sum(c for c, _t in side.values())
    assert tokens.every_call_tokens == tokens.prompt_tokens + tokens.side_tokens
    assert tokens.saving_percent == round(100 * (1 - tokens.every_call_tokens / tokens.full_definition_tokens), 1)
    assert any("kept the memory up to date" in reason for reason in tokens.reasons)
    figures = run_figures(simulation)
    assert [every - spoken for every, spoken in zip(figures["all_calls_per_turn"], figures["prompt_per_turn"])] == \
        [side[n][1] for n in sorted(turns)]
