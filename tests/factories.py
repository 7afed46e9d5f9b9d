"""What tests make, through the real services: a character, a scenario, a run started and seeded,
and a turn said, run, or a run played to its end as the worker would.

Plain functions with the defaults most tests want; a test passes only what differs
(`start(user, dinner, max_turns=3)`, `start(user, dinner, server, retrieval_mode="both")`).
"""

from __future__ import annotations

from django.test import TestCase

from chronicle.models import Character, Scenario
from chronicle.services.characters import character_create
from chronicle.services.scenarios import scenario_create
from chronicle.simulation.aftermath import formation
from chronicle.simulation.control import services, turns
from chronicle.simulation.run.models import Simulation, Turn
from chronicle.simulation.control.tasks import run_turn_task
from chronicle.simulation.turn.types import TurnOutcome

ALEX = {
    "name": "Alex", "role": "Project manager", "archetype": "The pragmatist",
    "description": "Alex is a pragmatic project manager who likes plans that work.",
    "background": "Alex grew up organising family outings. Alex now leads software teams.",
    "communication_style": "Direct and structured.", "decision_style": "Weighs options against clear criteria.",
    "traits": ["pragmatic", "organised"], "skills": ["planning"], "values": ["fairness"],
    "goals": ["get everyone fed"], "knowledge": {"Jordan": "Jordan loves Italian food."},
}

# Seed 000's example: three friends deciding where to eat.
DINNER_CAST = [
    {"name": "Alex", "role": "a pragmatic project manager", "archetype": "The organiser",
     "description": "Alex keeps everyone on schedule and hates wasted evenings.",
     "background": "Alex grew up organising family outings. Alex now leads software teams.",
     "communication_style": "Direct and structured.", "traits": ["pragmatic", "organised"],
     "values": ["fairness"], "goals": ["get everyone fed by eight"],
     "knowledge": {"Jordan": "Jordan loves Italian food."}},
    {"name": "Jordan", "role": "a chef between jobs", "archetype": "The enthusiast",
     "description": "Jordan talks about food with passion and has strong opinions about pasta.",
     "communication_style": "Warm and talkative.", "traits": ["passionate"], "values": ["good food"],
     "goals": ["convince the others to try Bella's trattoria"]},
    {"name": "Sam", "role": "a student on a tight budget", "archetype": "The sceptic",
     "description": "Sam counts every coin and distrusts fancy restaurants.",
     "communication_style": "Dry humour, short sentences.", "traits": ["frugal", "witty"], "values": ["honesty"],
     "goals": ["spend less than fifteen euros"]},
]


def character(owner, **overrides) -> Character:
    """Alex, through the service a writer's form uses; any field overridden."""
    return character_create(owner=owner, data={**ALEX, **overrides})


def scenario(owner, cast=(), **overrides) -> Scenario:
    data = {"title": "Dinner", "location": "Alex's living room", "atmosphere": "relaxed",
            "time_of_day": "early evening", "description": "Friends deciding where to eat.", **overrides}
    return scenario_create(owner=owner, data=data, cast=list(cast))


def make_dinner(owner) -> Scenario:
    """The dinner scenario with its three characters (DINNER_CAST)."""
    characters = [Character.objects.create(owner=owner, **data) for data in DINNER_CAST]
    made = Scenario.objects.create(
        owner=owner, title="Dinner plans", location="Alex's apartment, living room",
        atmosphere="Relaxed but hungry", time_of_day="Early evening",
        description="Three friends must decide where to eat tonight.")
    made.cast.set(characters)
    return made


def model_settings(server) -> dict:
    """A run's settings for the fake OpenAI-compatible server (`server`, tests/chronicle/conftest.py)."""
    return {"provider": "openai", "base_url": server.base_url, "model": "fake-model", "timeout_s": 5}


def start(user, scenario, server=None, **settings) -> Simulation:
    """A run started through the services and seeded in-process (what its first task does; on_commit
    never fires in a test transaction): tools mode, 6 turns, the scripted agent unless `server` is
    given, then the fake model at that server."""
    base = {"max_turns": 6, "retrieval_mode": "tools", **(model_settings(server) if server else {})}
    simulation = services.simulation_start(owner=user, scenario=scenario, cast=list(scenario.cast.all()),
                                           settings={**base, **settings})
    services.simulation_seed(simulation_id=simulation.pk)
    simulation.refresh_from_db()
    return simulation


def start_with_model(user, scenario, server, **settings) -> Simulation:
    """A seeded pre-populated run of 3 turns whose model is the fake server."""
    return start(user, scenario, server, **{"retrieval_mode": "prepopulate", "max_turns": 3, **settings})


def say(simulation: Simulation, index: int, agent: str, line: str) -> Turn:
    """A turn whose line the test chooses, as the worker plays it: the writer's stage directions for
    the turn first (with the keys a worker adds after its commit), then claimed and finished."""
    with TestCase.captureOnCommitCallbacks(execute=True):
        formation.stage_apply(simulation=simulation, number=index + 1)
    claim = turns.turn_claim(simulation_id=simulation.pk, index=index, agent=agent)
    return turns.turn_finish(turn_id=claim.turn.pk, token=claim.token, outcome=TurnOutcome(utterance=line))


def run(simulation: Simulation, index: int = 0) -> str:
    """Turn `index` run in this process by the task a worker runs; what the task returns ("done"…)."""
    return run_turn_task.apply(args=(simulation.pk, index)).get()


def run_all(simulation: Simulation) -> Simulation:
    """The turns still to do, run in this process as the worker would."""
    simulation.refresh_from_db()
    while simulation.status == Simulation.Status.RUNNING:
        assert run(simulation, services.next_index(simulation)) == "done"
        simulation.refresh_from_db()
    return simulation
