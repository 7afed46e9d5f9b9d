"""The dry run as the scene partner a newcomer meets first: examples/demo.json (sixty turns) and two
scenes it was not written for, run offline, read as a scene: a line answers the one before it (a
question gets an answer, one's first words greet), no line said twice, no sheet label nor line
built from one, whole sentences, every line in the first person, a secret whispered at most once and
only when the talk touches it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from chronicle import headless
from chronicle.simulation.control.tasks import run_turn_task
from chronicle.simulation.providers.partner import Known, heard, replies, words
from tests.factories import start as start_seeded

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
LABELS = re.compile(r"\b(?:My (?:goals|traits|skills|secret|situation|personality|values|background)|Location|"
                    r"Atmosphere|Situation|Archetype|Communication style|Decision style|Public face):", re.IGNORECASE)
BUILT_FROM_A_SHEET = re.compile(r"\bI know this:|, hm\.|\bI keep thinking about this:|\bwhat matters to me is\b.*,.*,",
                                re.IGNORECASE)
GREETING = re.compile(r"^(?:\*[^*]*\*\s*)?(?:Hi|Hello|Hey|Evening|Good (?:morning|afternoon|evening))\b")


def _said(text: str) -> str:
    return " ".join(re.sub(r"\*[^*]*\*", " ", text).split())


def _dry_run(user, name: str, turns: int, mode: str) -> list[tuple[str, str]]:
    imported = headless.scenario_import(raw=(EXAMPLES / name).read_bytes(), username=user.username)
    simulation = start_seeded(user, imported.scenario, max_turns=turns, provider="scripted", pace_s=0,
                              retrieval_mode=mode)
    for index in range(turns):
        assert run_turn_task.apply(args=(simulation.pk, index)).get() == "done", index
    lines = list(simulation.turns.order_by("index").values_list("agent", "utterance"))
    assert len(lines) == turns
    return lines


@pytest.mark.django_db
@pytest.mark.parametrize("name, turns, mode", [("demo.json", 60, "tools"), ("demo.json", 30, "prepopulate"),
                                               ("rumour.json", 20, "both"), ("demo_long_prose.json", 20, "tools")])
def test_a_dry_run_reads_as_a_scene(user, name, turns, mode):
    lines = _dry_run(user, name, turns, mode)
    said = [_said(text).lower().strip(" .!?") for _agent, text in lines]
    repeated = {line for line in said if said.count(line) > 1}
    assert not repeated, f"said more than once: {sorted(repeated)[:3]}"
    cast = {agent for agent, _text in lines}
    headed = re.compile(rf"\b(?:{'|'.join(cast)}|How others see me): ")  # a sheet line headed by whose it is
    labelled = [text for _agent, text in lines if LABELS.search(text) or headed.search(text)
                or BUILT_FROM_A_SHEET.search(text)]
    assert not labelled, labelled[:3]
    # Whole sentences: each line ends as a sentence does, and none is a word or two.
    broken = [text for _agent, text in lines if not re.search(r"[.!?”]$", text.strip()) or len(_said(text).split()) < 3]
    assert not broken, broken[:3]
    # First person: a character never speaks of itself by its own name (outside a quoted line).
    own_name = [text for agent, text in lines
                if re.search(rf"\b{agent}\b", re.sub(rf"“[^”]*”|\bI(?:'m| am) {agent}\b", "", text))]
    assert not own_name, own_name[:6]
    # A line answers the one before it: a question gets an answer (not only a question back), and
    # one's first words in the scene greet.
    for (asker, before), (agent, after) in zip(lines, lines[1:]):
        if _said(before).endswith("?") and agent != asker:
            sentences = re.split(r"(?<=[.!?])\s+", _said(after))
            assert any(not s.endswith("?") for s in sentences), (before, after)
    firsts = {}
    for agent, text in lines:
        firsts.setdefault(agent, text)
    assert all(GREETING.match(text) for text in firsts.values()), firsts
    # A secret is whispered at most once, and only when the line before it touches it.
    for agent in cast:
        whispered = [(n, text) for n, (a, text) in enumerate(lines) if a == agent and "between us" in text.lower()]
        assert len(whispered) <= 1, whispered
        for n, text in whispered:
            assert n > 0 and words(_said(text)) & words(_said(lines[n - 1][1])), (lines[n - 1][1], text)


def test_an_accusation_gets_a_denial_and_a_greeting_a_greeting():
    known = Known(agent="Sam", goals=["keep dinner under twenty-five each"],
                  said_of_me=[("Jordan", "you took the money from the tip jar")])
    denied = replies(known, heard("Jordan", "You took the money from the tip jar, didn't you?"), seed=0)
    assert denied[0] == "That's not true, Jordan. I never took the money from the tip jar."
    other = replies(Known(agent="Sam"), heard("Alex", "How could you say that to her?"), seed=1)
    assert other[0].startswith(("That's not fair, Alex.", "Where is this coming from, Alex?", "That isn't true.",
                                "No, Alex."))
    hello = replies(known, heard("Alex", "Evening, Sam!"), seed=2, first_turn=True)
    assert GREETING.match(hello[0]) and "Alex" in hello[0]
    # A question is answered from what one wants; a proposal that meets it is taken up.
    assert "keep dinner under twenty-five each" in replies(known, heard("Alex", "Where should we go?"), seed=3)[0]
    assert replies(known, heard("Alex", "Let's keep dinner cheap, under twenty-five each."), seed=4)[0] in (
        "That works for me, Alex.", "Yes, Alex, let's do that.", "Good idea, Alex.")
