"""Answers: a probe put to the agent as a line in its scene, answered by a model, and graded.

`evaluate_agents --answer` asks each probe this way beside the tool call `probes.ask` makes: the
agent gets its real prompt at the turn after the probe's (its sheet, notes, window and tools as the
run has them), with the question said by someone else in the room as the last line; the provider
answers as the agent would speak. What it says is graded against the probe's gold answer (LoCoMo's
`answer`, else what it expects): by its words, and, with `--judge`, by a model told the expected
answer. Hit@k says whether memory handed the agent the line; this says whether the agent used it.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from chronicle.simulation.measuring.probes import Probe
from chronicle.simulation.run.models import Turn
from chronicle.simulation.turn.engine import run_turn
from chronicle.simulation.turn.inputs import turn_input
from chronicle.simulation.turn.types import TurnFailed

STRANGER = "A friend"  # who asks when everyone else in the room is named in the question
# A reply counts as right by its words when it holds at least this share of the gold answer's words.
WORDS_NEEDED = 0.5

# Said by another, a question the agent would ask itself ("What did I tell Declan?") is asked of it.
_TO_SECOND = (("am i", "are you"), ("i am", "you are"), ("i'm", "you're"), ("was i", "were you"), ("i was", "you were"),
              ("i've", "you've"), ("i'd", "you'd"), ("i'll", "you'll"), ("myself", "yourself"), ("mine", "yours"),
              ("my", "your"), ("me", "you"), ("i", "you"))
_FIRST_PERSON = re.compile(r"\b(" + "|".join(re.escape(a) for a, _b in _TO_SECOND) + r")\b", re.IGNORECASE)
_SPOKEN = dict(_TO_SECOND)

_UNITS = {w: n for n, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve thirteen "
                                     "fourteen fifteen sixteen seventeen eighteen nineteen".split())}
_TENS = {w: 10 * n for n, w in enumerate("_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()) if w != "_"}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000}
_ORDINALS = {w: n for n, w in enumerate("_ first second third fourth fifth sixth seventh eighth ninth tenth eleventh "
                                        "twelfth thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth "
                                        "nineteenth twentieth".split()) if w != "_"} | {"thirtieth": 30}
# Words that carry no answer: a reply need not repeat them.
_FILLER = frozenset("a an the and or but of to in on at for from by with as is are was were be been it its that this "
                    "these those there he she they we you i me my your his her their our them him us do did does "
                    "has have had so just about into".split())


@dataclass
class Graded:
    probe: Probe
    asked_by: str
    question: str  # as said in the scene
    reply: str
    gold: str
    words: float  # the share of the gold answer's words the reply holds (0..1)
    correct: bool  # by words, or by the judge when there is one
    judged: bool = False  # the judge's verdict stands for `correct`
    error: str = ""
    prompt_tokens: int = 0


def spoken_to(question: str) -> str:
    """The question as someone else says it to the agent: first person turned to second."""
    def swap(match: re.Match) -> str:
        said = _SPOKEN[match.group(0).lower()]
        # "I" is written upper-case anywhere; "you" only where a sentence begins.
        opens = not question[:match.start()].strip() or question[:match.start()].rstrip()[-1] in ".?!"
        return said[0].upper() + said[1:] if opens else said
    return _FIRST_PERSON.sub(swap, question)


def asker_for(agent: str, others: list[str], transcript: list[tuple[int, str, str]], question: str) -> str:
    """Who asks: the last one of the others in the room to speak, else any of them, never one the
    question names (asking about oneself reads oddly); a stranger when every one of them is named."""
    named = {name for name in others if re.search(rf"\b{re.escape(name)}\b", question)}
    candidates = [name for name in others if name not in named]
    for _number, speaker, _text in reversed(transcript):
        if speaker in candidates:
            return speaker
    return candidates[0] if candidates else STRANGER


def words_of(text: str) -> list[str]:
    """Lower-case words with number words as digits ("three hundred and forty" → "340", "the
    twenty-first" → "21") and a plural "s" dropped, so "1,340 euro" and "one thousand three hundred and
    forty euros" read the same."""
    raw = re.findall(r"[a-z0-9]+", re.sub(r"(\d)(?:st|nd|rd|th)\b", r"\1", (text or "").lower().replace(",", "")))
    out: list[str] = []
    number: int | None = None
    current = 0
    for word in raw:
        if word in _UNITS or word in _TENS or (word in _SCALES and number is not None) or (word == "and" and number is not None):
            if number is None:
                number, current = 0, 0
            if word in _UNITS:
                current += _UNITS[word]
            elif word in _TENS:
                current += _TENS[word]
            elif word == "hundred":
                current = (current or 1) * 100
            elif word in _SCALES:
                number += (current or 1) * _SCALES[word]
                current = 0
            continue
        if word in _ORDINALS:  # "twenty-first" is 20 + 1, "the seventh" 7
            out.append(str((number or 0) + current + _ORDINALS[word]) if number is not None else str(_ORDINALS[word]))
            number = None
            continue
        if number is not None:
            out.append(str(number + current))
            number = None
        out.append(word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word)
    if number is not None:
        out.append(str(number + current))
    return out


def word_share(reply: str, gold: str) -> float:
    """The share of the gold answer's words (filler left out) that the reply holds; none when it
    misses one of the gold's numbers (a wrong figure is a wrong answer; a year may go unsaid)."""
    wanted = [w for w in words_of(gold) if w not in _FILLER] or words_of(gold)
    if not wanted:
        return 0.0
    said = set(words_of(reply))
    if any(w.isdigit() and not 1900 <= int(w) <= 2100 and w not in said for w in wanted):
        return 0.0
    return sum(w in said for w in wanted) / len(wanted)


def gold_of(probe: Probe) -> str:
    return probe.answer or probe.expect


def put(simulation, probe: Probe, provider) -> Graded:
    """The probe as a line in the scene after its turn, and the agent's reply, graded by its words."""
    base = turn_input(turn=Turn(simulation=simulation, index=probe.after_turn, agent=probe.agent))
    # The reply is the turn after the question's: who is in the room and what it saw are as then.
    after = turn_input(turn=Turn(simulation=simulation, index=probe.after_turn + 1, agent=probe.agent))
    question = spoken_to(probe.question)
    asker = asker_for(base.agent, after.others, base.transcript, question)
    turn = dataclasses.replace(base, index=after.index, line="", greeting="", present=after.present, stage=after.stage,
                               story_time=after.story_time,
                               transcript=[*base.transcript, (base.number, asker, question)])
    gold = gold_of(probe)
    try:
        outcome = run_turn(turn, provider, sleep=lambda _s: None)
    except TurnFailed as failed:
        return Graded(probe=probe, asked_by=asker, question=question, reply="", gold=gold, words=0.0, correct=False,
                      error=failed.reason, prompt_tokens=failed.outcome.prompt_tokens)
    share = max([word_share(outcome.utterance, g) for g in (gold, *probe.expected) if g] or [0.0])
    return Graded(probe=probe, asked_by=asker, question=question, reply=outcome.utterance, gold=gold, words=round(share, 4),
                  correct=share >= WORDS_NEEDED, prompt_tokens=outcome.prompt_tokens)


JUDGE_PROMPT = """You grade a character's answer in a story. The character was asked a question; the expected \
answer comes from what was said earlier in the story.

Question: {question}
Expected answer: {gold}
The character's reply: {reply}

Does the reply give the expected answer (the same fact, in any words; a reply that hedges, refuses or gives \
another fact does not)? Answer with one word: yes or no."""


def judge(graded: Graded, provider) -> Graded:
    """A model's verdict on the reply (provider.complete), standing for the word grade when it gives one."""
    if graded.error or not graded.reply:
        return graded
    try:
        verdict = provider.complete(JUDGE_PROMPT.format(question=graded.question, gold=graded.gold,
                                                        reply=graded.reply), max_tokens=5, temperature=0.0)
    except Exception as exc:  # a judge that fails leaves the word grade, and says why
        return dataclasses.replace(graded, error=f"the judge could not be asked: {exc}"[:300])
    said = (verdict or "").strip().lower()
    if said.startswith(("yes", "no")):
        return dataclasses.replace(graded, correct=said.startswith("yes"), judged=True)
    return graded
