"""One model call after a line judges what it leaves in everyone who heard it (seeds 002, 003):
each listener's importance, how the line moved each listener's standing towards its speaker (with
the words that did it), and the facts a listener learned from it.

Asked once per line however many listen, instead of one importance call per listener. What the
answer lacks or gets wrong falls back to the offline rules (memory.importance, memory.relationships)
listener by listener, and the fallback is said in each memory's importance metadata.

memory knows no provider: the caller passes `ask` (prompt → answer).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from memory.relationships import MAX_STEP, Judgement

PROMPT_OPENING = "Judge one line of a conversation for each character who heard it."
PROMPT = PROMPT_OPENING + """

The line (turn {turn}): {content}

Listeners: {names}
{profiles}

For each listener give:
- "importance", 0-10, of this line to that listener: 0-2 routine or small talk, 3-4 ordinary
  conversation, 5-6 notable (plans, news, meaningful talk), 7-8 emotional moments or a change in a
  relationship, 9-10 life-changing;
- "trust" and "affinity", each from -{step} to {step}: how the line changes that listener's trust in
  and warmth towards {speaker} (0 when unchanged), and "evidence", a short exact phrase of the line
  that moved them most ("" when nothing moved);
- "facts": at most {facts} things the listener learns from the line about the world or the people
  in it, the most useful first, each a short standalone statement naming who and what; a claim is
  put as its speaker's ("{speaker} says …"); [] for small talk, questions and
  feelings.
{speaker} said it: give {speaker} an importance only (trust and affinity 0, no facts).

Answer with JSON only, one entry per listener, in this shape:
{{"listeners": {{"{example}": {{"importance": 5, "trust": 0.0, "affinity": 0.0, "evidence": "", "facts": []}}}}}}"""

MAX_FACTS = 3  # per listener per line: a line that teaches more is a speech, and its episodic copy keeps it
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.IGNORECASE)


@dataclass
class AfterTurn:
    """What the model said about one line; a listener missing from `importance` (or `moves`) is left
    to the offline rule. `error` says why nothing could be read."""

    importance: dict[str, float] = field(default_factory=dict)
    moves: dict[str, Judgement] | None = None  # None: the answer was unusable, the heuristic judges
    facts: dict[str, list[str]] = field(default_factory=dict)
    raw: str = ""
    error: str = ""


def prompt_for(*, speaker: str, content: str, turn: int, profiles: dict[str, str]) -> str:
    names = list(profiles)
    described = "\n".join(f"- {name}: {' '.join(text.split())[:300]}" for name, text in profiles.items() if text)
    return PROMPT.format(turn=turn, content=content, names=", ".join(names), profiles=described,
                         speaker=speaker, step=MAX_STEP, facts=MAX_FACTS, example=names[0] if names else speaker)


def judge_line(*, speaker: str, content: str, turn: int, profiles: dict[str, str],
               ask: Callable[[str], str]) -> AfterTurn:
    """One call for every listener in `profiles` (name → identity and goals). A failed call is an
    AfterTurn with its error: the line is kept, the rules judge it."""
    try:
        answer = str(ask(prompt_for(speaker=speaker, content=content, turn=turn, profiles=profiles)) or "")
    except Exception as exc:  # the line must not be lost to a failed judgement
        return AfterTurn(error=f"the model could not be asked: {exc}"[:300])
    return parse(answer, names=list(profiles), speaker=speaker)


def parse(answer: str, *, names: list[str], speaker: str) -> AfterTurn:
    """The model's JSON, checked name by name: numbers clamped, unknown names ignored."""
    result = AfterTurn(raw=answer[:2000])
    data = _json_object(answer)
    rows = data.get("listeners") if isinstance(data, dict) else None
    if not isinstance(rows, dict):
        result.error = "the answer was not the JSON asked for" if answer.strip() else "no answer"
        return result
    by_lower = {str(key).strip().lower(): value for key, value in rows.items()}
    result.moves = {}
    for name in names:
        row = by_lower.get(name.lower())
        if not isinstance(row, dict):
            continue
        importance = _number(row.get("importance"))
        if importance is not None:
            result.importance[name] = round(max(0.0, min(10.0, importance)), 2)
        if name != speaker:
            trust = _step(row.get("trust"))
            affinity = _step(row.get("affinity"))
            evidence = " ".join(str(row.get("evidence") or "").split())[:200]
            result.moves[name] = Judgement(trust=trust, affinity=affinity, words=[evidence] if evidence else [],
                                           why=f"judged by the model: “{evidence}”" if evidence else "judged by the model")
        facts = row.get("facts") if isinstance(row.get("facts"), list) and name != speaker else []
        kept = [" ".join(str(f).split())[:300] for f in facts if isinstance(f, str) and len(f.split()) >= 3]
        if kept:
            result.facts[name] = kept[:MAX_FACTS]
    return result


def _json_object(answer: str):
    text = _FENCE.sub("", (answer or "").strip())
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        return json.loads(text[start:end + 1])
    except ValueError:
        return None


def _number(value) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number == number else None  # NaN is no answer


def _step(value) -> float:
    number = _number(value) or 0.0
    return round(max(-MAX_STEP, min(MAX_STEP, number)), 3)
