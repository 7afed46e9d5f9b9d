"""Metacognition beside a reflection, over the real database: the agent's judgement of how its
approach is working, from its plan and the progress it noted (or the model's, from the same answer
as the insights), a memory of its own kind resting on them; none without insights, none when off."""

from __future__ import annotations

import json

import pytest

from memory.living.after_turn import parse
from memory.living.metacognition import assessment
from memory.living.plans import plan_make, plan_text
from memory.living.reflection import insights_store
from memory.models import Memory, MemoryBank
from memory.services.memories import memory_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def bank():
    bank = MemoryBank.objects.create(name="orchard")
    plan_make(bank=bank, agent="Maeve", turn=1, text=plan_text(["keep the orchard whole", "find out who sold the east field"],
                                                                 ["Rowan"]))
    return bank


def progress(bank, turn: int, goal: str, closer: bool) -> Memory:
    return memory_create(bank=bank, agent="Maeve", kind="goal_progress", content=f"{'Closer to' if closer else 'Further from'}: {goal}",
                         source="earned", turn=turn, importance=6.5, metadata={"progress": {"goal": goal, "closer": closer}})


def lines(bank) -> list[Memory]:
    return [memory_create(bank=bank, agent="Maeve", kind="episodic", content=f"Rowan said: the orchard, again ({n}).",
                          source="earned", turn=n, importance=5) for n in (2, 3)]


def test_setbacks_make_the_agent_change_tack_and_put_the_goal_that_moves_first(bank):
    made = [progress(bank, 2, "keep the orchard whole", False), progress(bank, 3, "keep the orchard whole", False),
            progress(bank, 4, "find out who sold the east field", True)]
    pool = lines(bank)
    insights = insights_store(bank=bank, agent="Maeve", turn=5, insights=[("Rowan keeps pressing the orchard", [1, 2])],
                              pool=pool)
    assert [m.kind for m in insights] == ["reflection"]
    judged = Memory.objects.get(bank=bank, kind="metacognition")
    assert judged.content == (
        "How my approach is working: not well. Keep the orchard whole keeps slipping (2 setbacks against 1 step "
        "forward), so pushing the same way will not work; I should change tack. For now find out who sold the east "
        "field is where I'm getting somewhere, so that comes first.")
    assert judged.turn == 5 and judged.metadata["metacognition"] == {"by": "rule", "closer": 1, "further": 2}
    assert {m.pk for m in judged.evidence.all()} >= {m.pk for m in made} | {insights[0].pk}


def test_steps_forward_keep_the_approach_and_nothing_moved_makes_no_judgement(bank):
    plan = Memory.objects.get(bank=bank, kind="plan")
    steps = [progress(bank, 2, "keep the orchard whole", True)]
    assert assessment(plan, steps) == ("How my approach is working: it's working. I'm 1 step closer to keep the "
                                       "orchard whole; I'll keep on as I am.")
    assert assessment(plan, []) == ""  # nothing moved: nothing to weigh
    assert assessment(None, []) == ""


def test_the_models_approach_from_the_same_answer_is_kept_and_none_is_made_without_insights(bank, settings):
    answer = json.dumps({"listeners": {}, "reflections": {"Maeve": [{"insight": "x y z", "because": [1, 2]}]},
                         "approach": {"maeve": "Asking Rowan straight out got me nowhere; I'll ask Tess instead."}})
    judged = parse(answer, names=["Maeve"], speaker="Rowan", statements={"Maeve": 2})
    assert judged.approaches == {"Maeve": "Asking Rowan straight out got me nowhere; I'll ask Tess instead."}
    pool = lines(bank)
    insights_store(bank=bank, agent="Maeve", turn=5, insights=[("Rowan will not give ground", [1, 2])], pool=pool,
                   approach=judged.approaches["Maeve"])
    made = Memory.objects.get(bank=bank, kind="metacognition")
    assert made.content.startswith("Asking Rowan straight out") and made.metadata["metacognition"]["by"] == "model"
    # No insight kept (one memory cited): no metacognition beside it; and off, none at all.
    insights_store(bank=bank, agent="Maeve", turn=9, insights=[("only one", [1])], pool=pool)
    settings.METACOGNITION_ENABLED = False
    insights_store(bank=bank, agent="Maeve", turn=12, insights=[("Rowan will not give ground at all", [1, 2])], pool=pool)
    assert Memory.objects.filter(bank=bank, kind="metacognition").count() == 1
