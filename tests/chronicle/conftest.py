"""Helpers for chronicle tests: characters and scenarios made through the real services."""

from __future__ import annotations

import pytest

from chronicle.services.characters import character_create
from chronicle.services.scenarios import scenario_create

ALEX = {
    "name": "Alex", "role": "Project manager", "archetype": "The pragmatist",
    "description": "Alex is a pragmatic project manager who likes plans that work.",
    "background": "Alex grew up organising family outings. Alex now leads software teams.",
    "communication_style": "Direct and structured.", "decision_style": "Weighs options against clear criteria.",
    "traits": ["pragmatic", "organised"], "skills": ["planning"], "values": ["fairness"],
    "goals": ["get everyone fed"], "knowledge": {"Jordan": "Jordan loves Italian food."},
}


@pytest.fixture
def make_character():
    def make(owner, **overrides):
        return character_create(owner=owner, data={**ALEX, **overrides})
    return make


@pytest.fixture
def make_scenario():
    def make(owner, cast=(), **overrides):
        data = {"title": "Dinner", "location": "Alex's living room", "atmosphere": "relaxed",
                "time_of_day": "early evening", "description": "Friends deciding where to eat.", **overrides}
        return scenario_create(owner=owner, data=data, cast=list(cast))
    return make


@pytest.fixture
def server():
    """A local OpenAI-compatible server (chronicle/simulation/fake_llm.py): real HTTP, scripted replies."""
    from chronicle.simulation.fake_llm import FakeLLM

    fake = FakeLLM().start()
    yield fake
    fake.stop()


@pytest.fixture
def quick_backoff(settings):
    """LLM retries without the real backoff's seconds of waiting."""
    settings.LLM_RETRIES = 2
    settings.LLM_BACKOFF = 0.01
