"""Relationships that change (seed 003's relationship fields, seed 001's recall_interactions):
how each agent stands with each other one — trust and affinity, −1 to 1 — moved by what it hears.

Offline and deterministic: a heard line moves the listener's standing towards its speaker by the
words it carries (a small signed word list, below), more when the line names the listener, and a
whisper to the listener is a confidence (trust up). Each change is a `Relationship` row with its turn,
its reason and the memory of the line it rests on; the latest row per pair is the standing. A line
that carries none of the words changes nothing (no row). With a model configured, the batched
judgement after each line (memory.living.after_turn) moves the standing instead, with the words it names.

This module knows no simulation: chronicle calls `relationships_update` when a turn is stored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import connection, transaction

from memory.models import Memory, MemoryBank, Relationship

# Word starts (regular expressions), each with how far one occurrence moves the standing (a line's
# move is capped at MAX_STEP), matched case-insensitively, so "thank" covers thanks and thankful. The
# lookaheads keep everyday phrases out: "what kind of", "lovely", "trust me" (asking to be believed).
WARM = {"thank": 0.1, r"lov(?:e|ed|es|ing)\b": 0.15, "glad": 0.1, "wonderful": 0.1, "great idea": 0.15,
        "agree": 0.1, r"kind(?!\s+of\b(?!\s+you))": 0.1, "friend": 0.1, "appreciat": 0.15, "sorry": 0.05, "forgive": 0.15,
        "proud of you": 0.15, "like you": 0.15, "miss you": 0.15, "well done": 0.1, "you're right": 0.1,
        "happy": 0.05, "sweet": 0.1, "brilliant": 0.1}
COLD = {"hate": 0.2, "stupid": 0.2, "idiot": 0.25, "annoy": 0.1, "shut up": 0.25, "ridiculous": 0.1,
        "rude": 0.15, "selfish": 0.2, "boring": 0.1, "disagree": 0.05, "blame": 0.15, "you always": 0.1,
        "you never": 0.1, "leave me alone": 0.2, "disgust": 0.2, "pathetic": 0.25,
        # threats
        r"or else\b": 0.2, r"you(?:'ll| will) regret": 0.25, r"watch (?:yourself|your back)": 0.2,
        r"i(?:'ll| will) (?:make you pay|hurt you|ruin you)": 0.3}
TRUSTING = {"promise": 0.1, "honest": 0.1, r"trust(?!\s+me\b)": 0.1, "secret": 0.1, "confess": 0.15, "truth": 0.05,
            "count on": 0.1, "between us": 0.1, "i'll help": 0.1}
DISTRUSTING = {r"lie\b|lies\b|lying": 0.2, "lied": 0.25, "liar": 0.3, "betray": 0.3, "cheat": 0.25, "trick": 0.15,
               "behind my back": 0.3, "hid ": 0.15, "hiding": 0.15, "don't believe": 0.15, "rumour": 0.05,
               "sold me out": 0.3, r"or else\b|you(?:'ll| will) regret|i(?:'ll| will) (?:make you pay|hurt you|ruin you)": 0.2}
NAMED_FACTOR = 1.5   # a line that names its listener moves that listener's standing this much more
WHISPER_TRUST = 0.1  # being whispered to: confided in
MAX_STEP = 0.3       # one line moves trust or affinity at most this far


def _pattern(words: dict[str, float]) -> dict[str, re.Pattern]:
    return {w: re.compile(rf"\b(?:{w})", re.IGNORECASE) for w in words}


_PATTERNS = {name: (words, _pattern(words)) for name, words in
             (("warm", WARM), ("cold", COLD), ("trusting", TRUSTING), ("distrusting", DISTRUSTING))}


@dataclass
class Judgement:
    trust: float
    affinity: float
    words: list[str]
    why: str

    @property
    def changes(self) -> bool:
        return bool(self.trust or self.affinity)


def _found(name: str, text: str) -> tuple[float, list[str]]:
    words, patterns = _PATTERNS[name]
    found = [(w, p.search(text)) for w, p in patterns.items()]
    hits = [(w, m.group(0).lower()) for w, m in found if m]
    return sum(words[w] for w, _said in hits), [said for _w, said in hits]


def _clamp(value: float, bound: float = 1.0) -> float:
    return max(-bound, min(bound, value))


def judge(text: str, *, listener: str, whispered: bool = False, others: Iterable[str] = ()) -> Judgement:
    """How a heard line moves its listener's standing towards the speaker (deltas, −MAX_STEP..MAX_STEP).
    others: the rest of those present; a line that names one of them and not the listener is said to
    them, and moves nothing of the listener's (a thank-you to Oren is not one to Tess)."""
    named = re.search(rf"\b{re.escape(listener)}\b", text, re.IGNORECASE)
    if not named and not whispered and any(re.search(rf"\b{re.escape(o)}\b", text, re.IGNORECASE)
                                           for o in others if o and o != listener):
        return Judgement(trust=0.0, affinity=0.0, words=[], why="")
    warm, warm_words = _found("warm", text)
    cold, cold_words = _found("cold", text)
    trusting, trust_words = _found("trusting", text)
    distrusting, distrust_words = _found("distrusting", text)
    factor = NAMED_FACTOR if named else 1.0
    affinity = _clamp((warm - cold) * factor, MAX_STEP)
    trust = _clamp((trusting - distrusting) * factor + (WHISPER_TRUST if whispered else 0.0), MAX_STEP)
    parts = []
    if warm_words or cold_words:
        parts.append("warm: " + ", ".join(warm_words) if warm_words else "")
        parts.append("cold: " + ", ".join(cold_words) if cold_words else "")
    if trust_words or distrust_words:
        parts.append("trust: " + ", ".join(trust_words) if trust_words else "")
        parts.append("distrust: " + ", ".join(distrust_words) if distrust_words else "")
    if whispered:
        parts.append("confided in a whisper")
    if factor > 1 and (warm_words or cold_words or trust_words or distrust_words):
        parts.append(f"said to {listener} by name")
    return Judgement(trust=round(trust, 3), affinity=round(affinity, 3),
                     words=warm_words + cold_words + trust_words + distrust_words,
                     why="; ".join(p for p in parts if p))


def standing(bank: MemoryBank | int, agent: str | None = None, before_turn: int | None = None, *,
             other: str | None = None, agents: list[str] | None = None) -> dict[tuple[str, str], Relationship]:
    """The latest row of each pair (agent → other), optionally of one agent (or `agents`) towards
    anyone (or `other`), or as it stood when turn `before_turn` began."""
    rows = Relationship.objects.filter(bank=bank)
    if agent is not None:
        rows = rows.filter(agent=agent)
    if agents is not None:
        rows = rows.filter(agent__in=agents)
    if other is not None:
        rows = rows.filter(other=other)
    if before_turn is not None:
        rows = rows.filter(turn__lt=before_turn)
    rows = rows.order_by("agent", "other", "-turn", "-id").distinct("agent", "other")
    return {(r.agent, r.other): r for r in rows}


@transaction.atomic(savepoint=False)  # inside a turn's transaction: no savepoint's two round trips
def relationships_update(*, bank: MemoryBank, speaker: str, text: str, listeners: Iterable[str], turn: int,
                         whisper_to: str = "", evidence: dict[str, Memory] | None = None,
                         judged: dict[str, Judgement] | None = None) -> list[Relationship]:
    """Each listener's standing towards the speaker after hearing `text` at `turn`; a row per change.
    judged: a model's judgement per listener (memory.living.after_turn); a listener it left out is judged
    by the word lists."""
    present = [name for name in dict.fromkeys(listeners) if name and name != speaker]
    given = judged or {}
    judged = {name: given[name] if name in given else judge(text, listener=name, whispered=name == whisper_to, others=present)
              for name in present}
    judged = {name: j for name, j in judged.items() if j.changes}
    if not judged:
        return []
    with connection.cursor() as cursor:  # each listener's latest standing towards the speaker (every turn: raw, ~0.5 ms)
        cursor.execute("SELECT DISTINCT ON (agent) agent, trust, affinity FROM memory_relationship "
                       "WHERE bank_id = %s AND other = %s AND agent = ANY(%s) ORDER BY agent, turn DESC, id DESC",
                       [bank.pk if hasattr(bank, "pk") else int(bank), speaker, list(judged)])
        current = {agent: (trust, affinity) for agent, trust, affinity in cursor.fetchall()}
    rows = []
    for name, j in judged.items():
        trust_before, affinity_before = current.get(name, (0.0, 0.0))
        trust = _clamp(trust_before + j.trust)
        affinity = _clamp(affinity_before + j.affinity)
        memory = (evidence or {}).get(name)
        rows.append(Relationship(
            bank=bank, agent=name, other=speaker, turn=turn, trust=round(trust, 3), affinity=round(affinity, 3),
            trust_change=j.trust, affinity_change=j.affinity, evidence=memory,
            reason=(f"{speaker}: “{quote_of(text, j.words)}”" + (f" ({j.why})" if j.why else ""))[:300],
        ))
    return Relationship.objects.bulk_create(rows)


STARTING = "as the story starts (the writer's)"  # the reason of a writer-set standing, at turn 0


@transaction.atomic
def relationships_start(*, bank: MemoryBank, standings: Iterable[dict], cast: Iterable[str] | None = None) -> list[Relationship]:
    """The writer's starting standings as turn-0 rows (before the first line): each {"agent", "other",
    "trust", "affinity"} between two of `cast` (all when None), clamped to −1..1. Idempotent: a
    re-seeding replaces the starting rows it wrote before, and leaves every later row alone."""
    names = set(cast) if cast is not None else None
    rows = {}
    for item in standings or []:
        agent, other = str(item.get("agent") or ""), str(item.get("other") or "")
        if not agent or not other or agent == other or (names is not None and not {agent, other} <= names):
            continue
        trust, affinity = (_clamp(float(item.get(k) or 0.0)) for k in ("trust", "affinity"))
        rows[(agent, other)] = Relationship(bank=bank, agent=agent, other=other, turn=0, trust=round(trust, 3),
                                            affinity=round(affinity, 3), trust_change=round(trust, 3),
                                            affinity_change=round(affinity, 3), reason=STARTING)
    Relationship.objects.filter(bank=bank, turn=0, reason=STARTING).delete()
    return Relationship.objects.bulk_create(rows.values())


# Where a standing is, in words (on trust and affinity's −1..+1, by size): a model read bare numbers
# without knowing what they were out of, and words take about half the tokens.
_DEGREES = ((0.8, "deep"), (0.5, "strong"), (0.2, "some"), (0.0, "slight"))
_NAMES = {"trust": ("trust", "distrust"), "affinity": ("fondness", "dislike")}


def describe(row: Relationship) -> str:
    """"some distrust, slight fondness": how the agent stands with the other now, as the agent reads
    it (a measure at zero left out; "neutral" when both are). The line that moved it last is in the
    transcript, or a memory of it."""
    words = []
    for measure, value in (("trust", row.trust), ("affinity", row.affinity)):
        if round(value, 2):
            degree = next(word for floor, word in _DEGREES if abs(value) >= floor)
            words.append(f"{degree} {_NAMES[measure][value < 0]}")
    return ", ".join(words) or "neutral"


_ACTION = re.compile(r"\*[^*]*\*")
_ENDS = (". ", "! ", "? ")


def quote_of(text: str, words: list[str], limit: int = 120) -> str:
    """The sentence of the line that did it: the one holding the judge's evidence (a model's exact
    phrase, or the words the offline judge found), stage business left out; else the line's start.
    "*stops on the ladder* Port engine, eight hundred, aye. I'll…" said nothing of what hurt."""
    plain = " ".join(_ACTION.sub(" ", text).split()) or " ".join(text.split())
    for word in words:
        at = plain.lower().find(" ".join(str(word).split()).lower()) if str(word).strip() else -1
        if at < 0:
            continue
        start = max(plain.rfind(mark, 0, at) for mark in _ENDS)
        ends = [i for i in (plain.find(mark, at) for mark in _ENDS) if i >= 0]
        return _short(plain[start + 2 if start >= 0 else 0:min(ends) + 1 if ends else len(plain)], limit)
    return _short(plain)


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
