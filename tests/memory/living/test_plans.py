"""Plans and goal progress over the real database and embedding model: a plan in the agent's words,
superseded when a line overturns it; progress when a heard line near a goal moved the listener; the
model's judgement deciding where it gave an answer; both found by a search like any memory."""

from __future__ import annotations

import json

import pytest

from memory.living.after_turn import judge_line
from memory.living.plans import after_line, current_plans, plan_make, plan_text
from memory.models import Memory, MemoryBank
from memory.recalling.filters import MemoryFilter
from memory.recalling.search import recall
from memory.services.memories import memory_create

pytestmark = pytest.mark.django_db

GOALS = ["Keep the orchard whole", "find out who sold the east field"]


@pytest.fixture
def bank():
    return MemoryBank.objects.create(name="orchard")


def heard(bank, turn: int, text: str, goals=(), agent: str = "Maeve", speaker: str = "Rowan") -> Memory:
    return memory_create(bank=bank, agent=agent, kind="episodic", speaker=speaker, content=f"{speaker} said: {text}",
                         source="earned", turn=turn, importance=5, related_goals=list(goals))


def test_a_plan_reads_as_the_agent_would_write_it():
    assert plan_text(GOALS, ["Rowan", "Tess"], "the farmhouse kitchen") == (
        "My plan at the farmhouse kitchen: keep the orchard whole. First I'll find out where Rowan and Tess "
        "stand on it, then find out who sold the east field.")
    assert plan_text(GOALS[:1], ["Rowan"]) == (
        "My plan: keep the orchard whole. First I'll find out where Rowan stands on it, and not let it drop.")
    assert plan_text([], ["Rowan"]) == ""


def test_a_line_against_a_goal_overturns_the_plan_and_records_the_setback(bank):
    first = plan_make(bank=bank, agent="Maeve", turn=1, text=plan_text(GOALS, ["Rowan", "Tess"]))
    line = "I've signed the orchard over to the developers. It's done."
    memory = heard(bank, 3, line, goals=[GOALS[0]])
    made = after_line(bank=bank, speaker="Rowan", line=line, turn=3, memories=[memory], feelings={"Maeve": -0.6},
                      others={"Maeve": ["Rowan", "Tess"]})
    kinds = {m.kind: m for m in made}
    assert kinds["goal_progress"].content == (
        "Further from: keep the orchard whole — Rowan: “I've signed the orchard over to the developers.”")
    assert kinds["goal_progress"].metadata["progress"] == {"goal": GOALS[0], "closer": False}
    assert list(kinds["goal_progress"].evidence.all()) == [memory]
    plan = kinds["plan"]
    assert plan.content.startswith("Change of plan after Rowan said “I've signed the orchard over")
    assert "win Tess over first" in plan.content
    first.refresh_from_db()
    assert first.metadata["superseded_turn"] == 3  # still searchable, its end dated
    assert current_plans(bank, ["Maeve"])["Maeve"].pk == plan.pk
    # Both are found by what one asks.
    found = recall(bank, "what is my plan?", agent="Maeve", filter=MemoryFilter(kinds=["plan"]), k=1)
    assert found[0].memory.pk == plan.pk
    found = recall(bank, "how is the orchard going for me?", agent="Maeve",
                   filter=MemoryFilter(kinds=["goal_progress"]), k=1)
    assert found[0].memory.pk == kinds["goal_progress"].pk


def test_good_news_is_progress_and_keeps_the_plan_and_small_talk_is_nothing(bank):
    plan_make(bank=bank, agent="Maeve", turn=1, text=plan_text(GOALS, ["Rowan"]))
    good = heard(bank, 2, "I won't sell. The orchard stays in the family.", goals=[GOALS[0]])
    made = after_line(bank=bank, speaker="Rowan", line="I won't sell. The orchard stays in the family.", turn=2,
                      memories=[good], feelings={"Maeve": 0.5}, others={"Maeve": ["Rowan"]})
    assert [m.content for m in made] == ["Closer to: keep the orchard whole — Rowan: “I won't sell.”"]
    chat = heard(bank, 3, "More tea?")
    assert after_line(bank=bank, speaker="Rowan", line="More tea?", turn=3, memories=[chat], feelings={"Maeve": 0.5},
                      others={"Maeve": ["Rowan"]}) == []


def test_the_models_judgement_decides_progress_and_plans_where_it_answered(bank):
    plan_make(bank=bank, agent="Maeve", turn=1, text=plan_text(GOALS, ["Rowan"]))
    answer = json.dumps({"listeners": {"Maeve": {
        "importance": 8, "progress": {"goal": "find out who sold the east field", "closer": True}}},
        "plans": {"maeve": "Change of plan: ask Tess about the deed tomorrow, before Rowan can."}})
    asked = []
    judged = judge_line(speaker="Rowan", content="Rowan said: It was Tess who signed the east field away.", turn=4,
                        profiles={"Maeve": "Goals: keep the orchard whole"}, ask=lambda p: asked.append(p) or answer,
                        plans={"Maeve": current_plans(bank, ["Maeve"])["Maeve"].content})
    assert "The listeners' plans for the scene:\n- Maeve: My plan: keep the orchard whole" in asked[0]
    assert judged.progress == {"Maeve": ("find out who sold the east field", True)}
    assert judged.plans == {"Maeve": "Change of plan: ask Tess about the deed tomorrow, before Rowan can."}
    memory = heard(bank, 4, "It was Tess who signed the east field away.")  # (no goal found by the rule)
    made = after_line(bank=bank, speaker="Rowan", line="It was Tess who signed the east field away.", turn=4,
                      memories=[memory], feelings={}, others={"Maeve": ["Rowan"]},
                      judged_progress=judged.progress, judged_plans=judged.plans)
    assert [m.content for m in made] == [
        "Closer to: find out who sold the east field — Rowan: “It was Tess who signed the east field away.”",
        "Change of plan: ask Tess about the deed tomorrow, before Rowan can."]
    assert made[1].metadata["plan"]["by"] == "model"
    # A judgement that gives no progress and no plan: nothing, whatever the rule would have said.
    low = heard(bank, 5, "And I'd do it again.", goals=[GOALS[0]])
    assert after_line(bank=bank, speaker="Rowan", line="And I'd do it again.", turn=5, memories=[low],
                      feelings={"Maeve": -0.9}, others={"Maeve": ["Rowan"]}, judged_progress={}, judged_plans={}) == []
