"""A three-character dinner scenario (seed 000's example) and helpers to run and wait for simulations."""

from __future__ import annotations

import time

import pytest

from chronicle.models import Character, Scenario

CAST = [
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


def make_dinner(owner) -> Scenario:
    characters = [Character.objects.create(owner=owner, **data) for data in CAST]
    scenario = Scenario.objects.create(
        owner=owner, title="Dinner plans", location="Alex's apartment, living room",
        atmosphere="Relaxed but hungry", time_of_day="Early evening",
        description="Three friends must decide where to eat tonight.")
    scenario.cast.set(characters)
    return scenario


@pytest.fixture
def dinner(user):
    return make_dinner(user)


def wait_for(predicate, timeout: float = 120, every: float = 0.3, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def wait_status(simulation, *statuses, timeout: float = 180):
    def check():
        simulation.refresh_from_db()
        return simulation.status in statuses
    wait_for(check, timeout=timeout, what=f"status in {statuses} (is {simulation.status})")
    return simulation


def start_seeded(user, scenario, **settings):
    """A run started through the services and seeded in-process (what its first task does; on_commit
    never fires in a test transaction): tools mode, 6 turns unless the settings say otherwise."""
    from chronicle.simulation import services

    simulation = services.simulation_start(owner=user, scenario=scenario, cast=list(scenario.cast.all()),
                                           settings={"max_turns": 6, "retrieval_mode": "tools", **settings})
    services.simulation_seed(simulation_id=simulation.pk)
    simulation.refresh_from_db()
    return simulation


def start_with_model(user, scenario, server, **settings):
    """A seeded pre-populated run whose model is the fake OpenAI-compatible server (`server`)."""
    from chronicle.simulation import services

    simulation = services.simulation_start(owner=user, scenario=scenario, cast=list(scenario.cast.all()), settings={
        "retrieval_mode": "prepopulate", "provider": "openai", "base_url": server.base_url, "model": "fake-model",
        "max_turns": 3, "timeout_s": 5, **settings})
    services.simulation_seed(simulation_id=simulation.pk)
    simulation.refresh_from_db()
    return simulation
