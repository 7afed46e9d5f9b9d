"""Reflection over the real embedding model and database: the questions, the retrieval, the insights
written as `reflection` memories whose evidence links are the memories they cite."""

from __future__ import annotations

import re

import pytest

from memory.models import Memory, MemoryBank
from memory.living.reflection import importance_since_last_reflection, parse_insights, parse_questions, reflect
from memory.recalling.filters import MemoryFilter
from memory.recalling.search import recall
from memory.services.memories import memory_create

pytestmark = pytest.mark.django_db

LINES = [
    ("Jordan", "Jordan said: Bella's trattoria makes the best fresh pasta in town."),
    ("Sam", "Sam said: I cannot spend more than fifteen euros tonight."),
    ("Jordan", "Jordan said: the pasta at Bella's is worth every cent, trust me."),
    ("Sam", "Sam said: fancy restaurants always overcharge students like me."),
    ("Jordan", "Jordan said: I trained in Naples, I know real pasta when I taste it."),
    ("Sam", "Sam said: a kebab costs five euros and nobody leaves hungry."),
]


@pytest.fixture
def bank():
    bank = MemoryBank.objects.create(name="dinner")
    memory_create(bank=bank, agent="Alex", kind="character", content="You are Alex, a project manager.",
                  source="gifted", importance=9)
    for turn, (speaker, line) in enumerate(LINES, start=1):
        memory_create(bank=bank, agent="Alex", kind="episodic", category="dialogue", speaker=speaker, content=line,
                      source="earned", turn=turn, importance=5)
    memory_create(bank=bank, agent="Sam", kind="episodic", content="Sam said: hello.", source="earned", turn=1,
                  importance=7)
    return bank


class Model:
    """A model that answers the questions prompt and then the insights prompt, keeping what it was asked."""

    def __init__(self, questions: str, insights: str):
        self.answers = [questions, insights]
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        return self.answers[len(self.prompts) - 1]

    def statements(self, index: int) -> dict[int, str]:
        return {int(n): text for n, text in re.findall(r"^(\d+)\. (.*)$", self.prompts[index], re.MULTILINE)}


def test_importance_since_last_reflection_counts_earned_memories_after_the_latest_reflection(bank):
    assert importance_since_last_reflection(bank, "Alex") == 30  # 6 lines × 5; the gifted 9 does not count
    assert importance_since_last_reflection(bank, "Sam") == 7
    assert importance_since_last_reflection(bank, "Nobody") == 0
    memory_create(bank=bank, agent="Alex", kind="reflection", source="reflection", turn=4, content="An insight.",
                  importance=8)
    assert importance_since_last_reflection(bank, "Alex") == 10  # turns 5 and 6 only


def test_reflect_writes_insights_whose_evidence_is_the_memories_they_cite(bank):
    model = Model(
        "1. What does Alex think of Jordan's taste in food?\n2. How much can Sam spend?\n3) Where should they eat?",
        "1. Jordan is sure Bella's pasta is the best choice (because of 1, 3)\n"
        "2. Sam's budget rules out restaurants (because of 2)\n"
        "3. An insight with no evidence at all\n"
        "4. An insight citing statements that do not exist (because of 41, 99)\n")
    made = reflect(bank, "Alex", turn=6, ask=model)

    assert len(model.prompts) == 2
    asked = model.statements(0)
    assert "You are Alex" not in "\n".join(asked.values())  # gifted memories are not what the agent lived
    assert list(asked.values()) == [line for _speaker, line in LINES]  # oldest first
    pool = model.statements(1)
    assert [m.content for m in made] == ["Jordan is sure Bella's pasta is the best choice",
                                         "Sam's budget rules out restaurants"]
    first, second = made
    assert sorted(first.evidence.values_list("content", flat=True)) == sorted([pool[1], pool[3]])
    assert list(second.evidence.values_list("content", flat=True)) == [pool[2]]
    for memory in made:
        assert (memory.kind, memory.source, memory.turn, memory.agent, memory.importance) == (
            "reflection", "reflection", 6, "Alex", 8.0)
        assert set(memory.evidence.values_list("agent", flat=True)) == {"Alex"}
        assert memory.metadata["questions"][0] == "What does Alex think of Jordan's taste in food?"
    # Retrievable like any memory, by meaning.
    found = recall(bank, "what does Sam's budget allow?", agent="Alex", filter=MemoryFilter(kinds=["reflection"]), k=1)
    assert found[0].memory.pk == second.pk
    assert importance_since_last_reflection(bank, "Alex") == 0  # nothing lived after turn 6 yet


@pytest.mark.parametrize("questions, insights", [
    ("", "anything"),
    ("I would rather not.", "Nothing to say."),
    ("What now?", ""),
    ("What now?", "(because of 1)\nbecause of 1, 2\ninsight (because of)\ninsight (because of zero)"),
    ("What now?", "insight (because of 0, -1, 7777)"),
])
def test_a_malformed_answer_gives_no_reflection_and_no_error(bank, questions, insights):
    made = reflect(bank, "Alex", turn=6, ask=Model(questions, insights))
    assert made == []
    assert not Memory.objects.filter(bank=bank, kind="reflection").exists()


def test_parsers_keep_what_they_can():
    assert parse_questions("1. What?? no\n\n- Where is Bella's?\n2) Who pays tonight?\n4. Extra one?") == [
        "What?? no", "Where is Bella's?", "Who pays tonight?"]
    assert parse_insights('- "Sam is frugal" (because of 2, 2, 9)\nJordan loves pasta (based on 1 and 3).\n'
                          "Sam is frugal (because of 2)\nx (because of 1)\ny (because of 1)\nz (because of 1)\n"
                          "w (because of 1)", 3) == [
        ("Sam is frugal", [2]), ("Jordan loves pasta", [1, 3]), ("x", [1]), ("y", [1]), ("z", [1])]


def test_an_agent_with_no_lived_memories_does_not_reflect(bank):
    def ask(_prompt):
        raise AssertionError("no model call without memories")
    assert reflect(bank, "Jordan", turn=3, ask=ask) == []
