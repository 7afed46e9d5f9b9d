"""The dry run as the scene partner a newcomer meets first: examples/demo.json (sixty turns) and
scenes it was not written for, run offline, read as a scene: a line answers the one before it (a
question gets an answer, one's first words greet), no line said twice, no sentence said again within
twelve turns (nor the same with a word changed), no sheet label nor line built from one, no sheet
or writer's note recited to anyone ("You are my old flatmate: organised, practical…"), whole
sentences, every line in the first person, a secret whispered at most once and only when the talk
touches it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from chronicle import headless
from chronicle.simulation.control.tasks import run_turn_task
from chronicle.simulation.providers.answers import replies
from chronicle.simulation.providers.partner import Known, heard, words
from tests.factories import start as start_seeded

EXAMPLES = Path(__file__).resolve().parents[4] / "examples"
LABELS = re.compile(r"\b(?:My (?:goals|traits|skills|secret|situation|personality|values|background)|Location|"
                    r"Atmosphere|Situation|Archetype|Communication style|Decision style|Public face):", re.IGNORECASE)
BUILT_FROM_A_SHEET = re.compile(r"\bI know this:|, hm\.|\bI keep thinking about this:|\bwhat matters to me is\b.*,.*,",
                                re.IGNORECASE)
GREETING = re.compile(r"^(?:\*[^*]*\*\s*)?(?:Hi|Hello|Hey|Evening|Good (?:morning|afternoon|evening))\b")


def _said(text: str) -> str:
    return " ".join(re.sub(r"\*[^*]*\*", " ", text).split())


WINDOW = 12  # turns within which a character says no sentence again


def _sentences(text: str) -> list[tuple[str, ...]]:
    """A line's sentences as their words, stage business left out (a quote of an earlier line is one
    word of the sentence that brings it back)."""
    said = re.sub(r"“([^”]*)”", lambda m: "_".join(re.findall(r"[a-z0-9]+", m.group(1).lower())), _said(text))
    out = []
    for sentence in re.split(r"(?<=[.!?])\s+", said):
        said = tuple(re.findall(r"[a-z0-9_]+(?:'[a-z]+)?", sentence.lower().replace("’", "'")))
        if said:
            out.append(said)
    return out


def _one_word_apart(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """The same sentence, or with one word changed, added or dropped (sentences of four words or more)."""
    if a == b:
        return True
    if min(len(a), len(b)) < 4 or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        return sum(x != y for x, y in zip(a, b)) == 1
    short, long = sorted((a, b), key=len)
    return any(long[:i] + long[i + 1:] == short for i in range(len(long)))


def said_again(lines: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """(earlier, later) pairs of a character's sentences said again within WINDOW turns."""
    found = []
    for n, (agent, text) in enumerate(lines):
        for m in range(max(0, n - WINDOW + 1), n):
            if lines[m][0] != agent:
                continue
            for earlier in _sentences(lines[m][1]):
                found += [(" ".join(earlier), " ".join(s)) for s in _sentences(text) if _one_word_apart(earlier, s)]
    return found


def _runs(words: tuple[str, ...] | list[str], size: int) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + size]) for i in range(len(words) - size + 1)}


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+(?:'[a-z]+)?", (text or "").lower().replace("’", "'"))


def recitals(lines: list[tuple[str, str]], name: str) -> list[str]:
    """The sentences that recite a sheet or a writer's note, from the file's own text: six words in a
    row of a description, a public face, a background, a style, what one knows of another or a pair
    note (what one wants, one's secret, a planted rumour and the place may be said); "you are …" or
    "I'm …" with three of the sheets' words; three of a character's traits in one sentence."""
    data = json.loads((EXAMPLES / name).read_text())
    sheets, traits, allowed = [], {}, []
    for character in data["characters"]:
        sheets += [character.get(k) or "" for k in ("description", "public_face", "background", "communication_style",
                                                    "decision_style")]
        sheets += list((character.get("knowledge") or {}).values())
        traits[character["name"]] = {t.lower() for t in character.get("traits") or []}
        allowed += [*(character.get("goals") or []), *(character.get("secrets") or [])]
    scenario = data["scenario"]
    sheets += [note for notes in (scenario.get("pair_notes") or {}).values() for note in notes.values()]
    allowed += [scenario.get("location") or "", (data.get("settings") or {}).get("planted_beliefs") or ""]
    recited = set().union(*(_runs(_words(t), 6) for t in sheets)) - set().union(*(_runs(_words(t), 6) for t in allowed))
    sheet_words = {w for t in sheets for w in _words(t) if len(w) > 4} - {w for t in allowed for w in _words(t)}
    found = []
    for agent, text in lines:
        for sentence in _sentences(text):
            about = re.match(r"^(?:\w+ )?(?:you are|you're|i am|i'm)\b(.*)", " ".join(sentence))
            if _runs(sentence, 6) & recited or (about and len(set(about.group(1).split()) & sheet_words) >= 3) \
                    or len(set(sentence) & traits.get(agent, set())) >= 3:
                found.append(f"{agent}: {' '.join(sentence)}")
    return found


def goals_looping(lines: list[tuple[str, str]], name: str) -> list[tuple[str, str, str]]:
    """(who, goal, line) where a character says one of its goals again within WINDOW turns."""
    goals = {c["name"]: c.get("goals") or [] for c in json.loads((EXAMPLES / name).read_text())["characters"]}
    found = []
    for n, (agent, text) in enumerate(lines):
        for goal in goals.get(agent, []):
            wanted = {w for w in _words(goal) if len(w) > 3}
            if not wanted or len(wanted & set(_words(text))) * 3 < len(wanted) * 2:
                continue
            if any(a == agent and len(wanted & set(_words(t))) * 3 >= len(wanted) * 2
                   for a, t in lines[max(0, n - WINDOW + 1):n]):
                found.append((agent, goal, text))
    return found


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
                                               ("rumour.json", 20, "both"), ("demo_long_prose.json", 20, "tools"),
                                               ("rumour.json", 60, "prepopulate")])
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
    # No sentence again within twelve turns (nor with a word changed), no sheet or note recited.
    again = said_again(lines)
    assert not again, again[:3]
    recited = recitals(lines, name)
    assert not recited, recited[:3]
    # What one wants is said, then the scene moves on: each goal at most once in twelve turns, and
    # no stock line stands in when a character runs out of things to say.
    looping = goals_looping(lines, name)
    assert not looping, looping[:3]
    stock = [text for _agent, text in lines if re.search(r"What happened after turn \d+|Give me a moment", text)]
    assert not stock, stock[:3]
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
    assert denied[0].startswith("That's not true, Jordan. I never took the money from the tip jar.")
    other = replies(Known(agent="Sam"), heard("Alex", "How could you say that to her?"), seed=1)
    assert other[0].startswith(("That's not fair, Alex.", "No, Alex.", "That isn't true"))
    hello = replies(known, heard("Alex", "Evening, Sam!"), seed=2, first_turn=True)
    assert GREETING.match(hello[0]) and "Alex" in hello[0]
    # A question is answered from what one wants; a proposal that meets it is taken up.
    assert "keep dinner under twenty-five each" in replies(known, heard("Alex", "Where should we go?"), seed=3)[0]
    assert replies(known, heard("Alex", "Let's keep dinner cheap, under twenty-five each."), seed=4)[0].startswith((
        "That works for me, Alex.", "Yes, Alex, let's do that.", "Good idea, Alex."))


def test_a_reply_takes_up_what_was_just_said_in_the_speakers_own_manner():
    line = heard("Jordan", "The new trattoria by the canal does a tasting menu on Fridays.")
    blunt = Known(agent="Mira", manner="blunt", goals=["keep the inn open"], present=["Jordan"])
    warm = Known(agent="Oren", manner="warm", goals=["keep my seat by the fire"], present=["Jordan"])
    said = {known.manner: replies(known, line, seed=0)[0] for known in (blunt, warm)}
    assert all("trattoria" in text for text in said.values()), said
    assert said["blunt"].split(".")[0] != said["warm"].split(".")[0], said


def test_what_one_knows_of_someone_becomes_a_question_not_a_description_said_back():
    known = Known(agent="Jordan", present=["Alex", "Sam"], goals=["have a fun, lively evening"],
                  others={"Alex": "Alex is my old flatmate: organised, practical, always the one who makes the booking."},
                  lately=["I'd love us to have a fun, lively evening."])  # said already: the scene moves on
    said = [replies(known, heard("Alex", "Right, everyone."), seed=seed)[0] for seed in range(6)]
    assert not [s for s in said if re.search(r"\byou(?: are|'re) my\b|flatmate|organised", s)], said
    assert any(re.search(r"\bthe booking\b[^.]*\?", s) for s in said), said
