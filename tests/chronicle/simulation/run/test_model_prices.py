"""A run's price: its tokens at its models' prices (settings.MODEL_PRICES, WONDA_MODEL_PRICES), on the
run page and in run_simulation's report; and the daily limit per user (WONDA_DAILY_COST_LIMIT) that
pauses a user's runs before their next turn, saying why. The speakers' and the bookkeeper's models
are fake OpenAI-compatible servers over real HTTP."""

from __future__ import annotations

from html import unescape

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from chronicle.headless import run_report
from chronicle.simulation.control import services
from chronicle.simulation.control.tasks import run_turn_task
from chronicle.simulation.run.costs import Price, price_for
from chronicle.simulation.run.models import Simulation
from devtools.fake_llm import ok
from tests.factories import make_dinner

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("quick_backoff")]


def _run(client, dinner, server, **values) -> Simulation:
    data = {"scenario": dinner.pk, "max_turns": 4, "speaking_order": "round_robin", "retrieval_mode": "prepopulate",
            "scoring": "similarity", "provider": "openai", "base_url": server.base_url, "model": "fake-model",
            "timeout_s": 5, "max_tool_calls": 3, "tool_set": ["query_memory"], "temperature": 0.7, "max_tokens": 200,
            "pace_s": 0, **values}
    before = set(Simulation.objects.values_list("pk", flat=True))
    response = client.post(reverse("simulation_create"), data)
    assert response.status_code == 302, response.context["form"].errors
    simulation = Simulation.objects.exclude(pk__in=before).get()
    services.simulation_seed(simulation_id=simulation.pk)
    return simulation


def test_the_price_table_knows_well_known_models_and_a_writers_own(settings):
    assert price_for("gpt-4o-mini") == Price(0.15, 0.60)
    assert price_for("openai/gpt-4o-mini-2024-07-18") == Price(0.15, 0.60)  # a router's name, a dated version
    assert price_for("gpt-4o-2024-08-06") == Price(2.50, 10.00)  # not gpt-4o-mini's
    assert price_for("llama3.1") is None  # a local model: no price, it costs nothing


def test_a_runs_cost_is_its_tokens_at_its_models_prices(settings, user, server, bookkeeper, client_for):
    settings.MODEL_PRICES = {"fake-model": (3.0, 15.0), "small-model": (0.5, 2.0)}
    client = client_for(user)
    simulation = _run(client, make_dinner(user), server, bookkeeping_base_url=bookkeeper.base_url,
                      bookkeeping_model="small-model")
    server.script(ok("Bella's closed in May, Jordan.", prompt_tokens=1200, completion_tokens=40))
    assert run_turn_task.apply(args=(simulation.pk, 0)).get() == "done"
    turn = simulation.turns.get(index=0)
    side = turn.context["aux_tokens"]
    assert side > 0
    dollars = (1200 * 3.0 + 40 * 15.0 + side * 0.5) / 1_000_000
    page = client.get(simulation.get_absolute_url()).content.decode()
    assert (f"Cost: ${dollars:,.4f}; fake-model at $3 in / $15 out per million tokens; "
            f"small-model at $0.5 in / $2 out per million tokens.") in page
    inspector = client.get(reverse("turn_inspect", args=[simulation.pk, 0])).content.decode()
    assert f"Cost of this turn's calls (its line and the ones that kept the memory of it): ${dollars:,.4f}; " in \
        unescape(inspector)
    cost = run_report(simulation)["cost"]
    assert cost["dollars"] == pytest.approx(dollars, abs=1e-6) and cost["unpriced"] == []  # the report says six places

    settings.MODEL_PRICES = {}  # models nobody priced (a local server's): free, and said so
    page = client.get(simulation.get_absolute_url()).content.decode()
    assert "Cost: $0.0000; no price for fake-model, small-model (counted as free" in page


def test_the_daily_limit_pauses_the_users_runs_with_the_reason(settings, user, server, client_for):
    settings.MODEL_PRICES, settings.DAILY_COST_LIMIT = {"fake-model": (10.0, 10.0)}, 0.01
    client = client_for(user)
    dinner = make_dinner(user)
    first = _run(client, dinner, server)
    server.script(ok("Bella's closed in May, Jordan.", prompt_tokens=900, completion_tokens=100))
    assert run_turn_task.apply(args=(first.pk, 0)).get() == "done"  # $0.01 spent: the limit reached
    assert run_turn_task.apply(args=(first.pk, 1)).get() == "nothing to do"
    first.refresh_from_db()
    assert first.status == Simulation.Status.PAUSED
    spent = run_report(first)["cost"]["dollars"]  # the line and the judgement of it
    assert first.pause_reason.startswith(f"Paused: your runs' model calls have cost ${spent:.2f} today, which reaches "
                                         "your daily limit of $0.01. Resume it from ")
    assert first.pause_reason in unescape(client.get(first.get_absolute_url()).content.decode())
    assert len(server.requests) == 1  # the second turn asked no model

    second = _run(client, dinner, server)  # another run of the same writer pauses before its first call
    assert run_turn_task.apply(args=(second.pk, 0)).get() == "nothing to do"
    second.refresh_from_db()
    assert second.status == Simulation.Status.PAUSED and "daily limit" in second.pause_reason

    someone = get_user_model().objects.create_user(username="other-writer", password="correct-horse-9")
    theirs = _run(client_for(someone), make_dinner(someone), server)  # another writer's day is their own
    server.script(ok("Hello there."))
    assert run_turn_task.apply(args=(theirs.pk, 0)).get() == "done"
