"""Memory fixtures: sheets after seed 000's dinner-planning example, banks, a seeded bank."""

from __future__ import annotations

import pytest

from memory.forming.sheets import CharacterSheet, ExtraMemory, ScenarioSheet

ALEX_BACKGROUND = (
    "Alex grew up in a small coastal town where the ferry schedule ruled everyone's week. "
    "At nineteen Alex moved to the city to study engineering and paid rent by waiting tables at an Italian bistro. "
    "After graduating, Alex spent six years shipping bridges and tunnels on time for a construction firm. "
    "A project that collapsed under a reckless manager taught Alex that plans fail quietly before they fail loudly. "
    "Now Alex runs a team of twelve and still keeps a paper notebook of every promise made in a meeting."
)


@pytest.fixture
def alex() -> CharacterSheet:
    return CharacterSheet(
        name="Alex",
        role="project manager",
        archetype="The Pragmatist",
        description="A pragmatic, organised planner who keeps everyone on schedule and hates wasted time.",
        background=ALEX_BACKGROUND,
        communication_style="Direct and concise; asks clarifying questions and summarises decisions out loud.",
        decision_style="Weighs cost against time, then commits quickly and rarely revisits a decision.",
        traits=["organised", "impatient", "loyal"],
        skills=["scheduling", "budgeting", "negotiation"],
        values=["punctuality", "fairness", "honesty"],
        goals=["agree on a dinner plan before eight"],
        knowledge={"Jordan": "Jordan was my roommate at university and loves Italian food."},
        extra_memories=[ExtraMemory(content="Alex is allergic to shellfish.", keys=["allergy", "what can't I eat?"], category="health")],
    )


@pytest.fixture
def jordan() -> CharacterSheet:
    return CharacterSheet(
        name="Jordan",
        role="chef",
        archetype="The Enthusiast",
        description="A warm, talkative chef who turns every meal into an adventure.",
        background="Jordan trained in Naples. Jordan opened a food truck that became famous for its late-night pasta.",
        communication_style="Animated and warm; tells stories and uses food metaphors.",
        decision_style="Follows gut feeling and the mood of the room.",
        traits=["spontaneous", "generous"],
        skills=["cooking", "storytelling"],
        values=["hospitality", "joy"],
    )


@pytest.fixture
def scenario() -> ScenarioSheet:
    return ScenarioSheet(
        title="Dinner plans",
        location="Alex's apartment, the living room with a view over the harbour",
        atmosphere="Relaxed but hungry; everyone is a little tired after work",
        time_of_day="Friday evening, half past six",
        description="Friends gather to decide where to go for dinner tonight.",
    )


@pytest.fixture
def bank(db):
    from memory.services import bank_create

    return bank_create(name="test bank")


@pytest.fixture
def seeded_bank(bank, alex, jordan, scenario):
    from memory.forming.seeding import seed_bank

    seed_bank(bank=bank, characters=[alex, jordan], scenario=scenario)
    return bank


@pytest.fixture(autouse=True)
def _fresh_local_embedding_cache():
    """Each test rolls its database back; the in-process cache layer must not outlive those rows."""
    from memory.embedding import cache

    cache.clear_local()
    yield
    cache.clear_local()
