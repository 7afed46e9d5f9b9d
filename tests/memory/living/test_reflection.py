"""Reflection over the real embedding model and database: the questions, the retrieval, the insights
written as `reflection` memories whose evidence links are the memories they cite."""

from __future__ import annotations

import re

import pytest

from memory.models import Memory, MemoryBank
from memory.living.reflection import importance_since_last_reflection, parse_insights, parse_questions, reflect
from memory.living.reflection_rules import lived_since, reflections_due
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
    memory_create(bank=bank, agent="Alex", kind="character", category="identity",
                  content="You are Alex, a project manager.", source="gifted", importance=9)
    memory_create(bank=bank, agent="Alex", kind="character", category="goals",
                  content="My goals: keep the team together; find a dinner everyone can afford.", source="gifted")
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
        "2. Sam's budget rules out restaurants (because of 2, 4)\n"
        "3. An insight with no evidence at all\n"
        "4. An insight citing statements that do not exist (because of 41, 99)\n")
    made = reflect(bank, "Alex", turn=6, ask=model)

    assert len(model.prompts) == 2
    asked = model.statements(0)
    assert "You are Alex" not in "\n".join(asked.values())  # gifted memories are not what the agent lived
    # ...but the agent is told who it is, in both prompts: its insights are its own reading.
    for prompt in model.prompts:
        assert "Who Alex is" in prompt and "find a dinner everyone can afford" in prompt
    assert list(asked.values()) == [line for _speaker, line in LINES]  # oldest first
    pool = model.statements(1)
    assert [m.content for m in made] == ["Jordan is sure Bella's pasta is the best choice",
                                         "Sam's budget rules out restaurants"]
    first, second = made
    assert sorted(first.evidence.values_list("content", flat=True)) == sorted([pool[1], pool[3]])
    assert sorted(second.evidence.values_list("content", flat=True)) == sorted([pool[2], pool[4]])
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
    # One memory is no pattern, and saying a memory again is no insight.
    ("What now?", "Jordan knows pasta (because of 1)\nSam wants cheap food (because of 2)"),
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


class Restating(Model):
    """Answers the insights prompt with `make(statements)`: insights built from the pool it was shown."""

    def __init__(self, make):
        super().__init__("What is Sam's budget?", "")
        self.make = make

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        return self.answers[0] if len(self.prompts) == 1 else self.make(self.statements(1))


def test_an_insight_that_says_one_memory_again_is_not_kept(bank):
    def make(pool):
        budget = next(n for n, text in pool.items() if "fifteen euros" in text)
        other = next(n for n in pool if n != budget)
        return (f"Sam cannot spend more than fifteen euros tonight (because of {budget}, {other})\n"
                f"Sam counts every euro while Jordan talks up Bella's (because of {budget}, {other})")
    made = reflect(bank, "Alex", turn=6, ask=Restating(make))
    assert [m.content for m in made] == ["Sam counts every euro while Jordan talks up Bella's"]
    assert made[0].metadata["not_kept"] == [{"insight": "Sam cannot spend more than fifteen euros tonight",
                                             "why": "says again what one memory says"}]


def test_a_paraphrase_of_one_memory_is_not_kept_either(bank):
    def make(pool):
        kebab = next(n for n, text in pool.items() if "kebab" in text)
        other = next(n for n in pool if n != kebab)
        return f"Sam said a kebab is five euros and no one leaves hungry (because of {kebab}, {other})"
    assert reflect(bank, "Alex", turn=6, ask=Restating(make)) == []


def test_reflection_is_due_on_importance_and_enough_memories_and_spacing(bank, settings):
    assert lived_since(bank, ["Alex"])["Alex"].memories == 6
    assert reflections_due(bank, ["Alex", "Sam"], threshold=30, turn=6) == ["Alex"]
    # Sam's one line is important enough, but one line is no pattern.
    assert reflections_due(bank, ["Sam"], threshold=5, turn=6) == []
    settings.REFLECTION_MIN_MEMORIES = 1
    assert reflections_due(bank, ["Sam"], threshold=5, turn=6) == ["Sam"]
    settings.REFLECTION_MIN_MEMORIES = 5
    # After a reflection at turn 6, more lines: enough importance, but not yet far enough apart.
    memory_create(bank=bank, agent="Alex", kind="reflection", source="reflection", turn=6, content="An insight.",
                  importance=8)
    for turn in range(7, 13):
        memory_create(bank=bank, agent="Alex", kind="episodic", content=f"Sam said: line {turn} about money.",
                      source="earned", turn=turn, importance=9)
    assert reflections_due(bank, ["Alex"], threshold=30, turn=8) == []
    assert reflections_due(bank, ["Alex"], threshold=30, turn=12) == ["Alex"]
    settings.REFLECTION_SPACING = 10
    assert reflections_due(bank, ["Alex"], threshold=30, turn=12) == []


def test_an_insight_the_agent_already_drew_is_not_drawn_again(bank):
    """Reflecting again on the same lines finds the same pattern: the second time it is not kept, so a
    recall does not hand the agent the same insight twice."""
    def make(pool):
        budget = next(n for n, text in pool.items() if "fifteen euros" in text)
        kebab = next(n for n, text in pool.items() if "kebab" in text)
        return (f"Sam watches every euro, so cheap food wins him over (because of {budget}, {kebab})\n"
                f"Money decides where Sam eats tonight (because of {budget}, {kebab})")
    first = reflect(bank, "Alex", turn=6, ask=Restating(make))
    assert len(first) == 2
    again = reflect(bank, "Alex", turn=9, ask=Restating(make))
    assert again == []
    kept = Memory.objects.filter(bank=bank, agent="Alex", kind=Memory.Kind.REFLECTION)
    assert sorted(kept.values_list("content", flat=True)) == sorted(m.content for m in first)


def test_a_reflection_riding_the_judgement_rests_on_what_stood_out_in_the_order_lived():
    """Of an agent's latest lived memories, the judgement's reflection is given the most important
    (comings and goings, small talk left out), in the order they were lived, few enough to stay short."""
    from memory.living.after_turn import REFLECT_STATEMENTS
    from memory.living.reflection import statements_to_reflect

    bank = MemoryBank.objects.create(name="long day")
    for turn in range(1, 31):
        important = turn % 2 == 0
        memory_create(bank=bank, agent="Alex", kind="episodic", source="earned", turn=turn, importance=8 if important else 1,
                      content=f"Sam said: news number {turn}." if important else f"Sam comes and goes ({turn}).")
    given = statements_to_reflect(bank, "Alex")
    assert len(given) == REFLECT_STATEMENTS
    assert all("news number" in m.content for m in given)
    assert [m.turn for m in given] == sorted(m.turn for m in given)
    assert given[-1].turn == 30
