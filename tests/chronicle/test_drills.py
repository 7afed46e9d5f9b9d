"""The drills themselves, small: their own worker (and web server), real runs, their verdict line."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from chronicle.simulation.run.models import Simulation

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def last_json(out: io.StringIO) -> dict:
    return json.loads(out.getvalue().strip().splitlines()[-1])


def test_drill_kill_kills_pool_processes_and_nothing_is_lost_or_doubled():
    out = io.StringIO()
    call_command("drill_kill", turns=10, kills=2, seed=3, stdout=out)
    result = last_json(out)
    assert result == {"lost": 0, "duplicated_turns": 0, "duplicated_memories": 0, "kills": 2}, out.getvalue()
    assert "children killed by Celery for a slow start: 0" in out.getvalue()
    assert not Simulation.objects.filter(title__startswith="Drill run").exists()  # cleaned up


def test_drill_load_runs_concurrent_simulations_under_page_traffic():
    out = io.StringIO()
    call_command("drill_load", simulations=3, turns=5, clients=3, stdout=out)
    result = last_json(out)
    assert result["runs_finished"] == 3, out.getvalue()
    assert (result["errors"], result["gaps"], result["duplicates"]) == (0, 0, 0), out.getvalue()
    assert result["p50_ms"] > 0 and result["p95_ms"] >= result["p50_ms"]
