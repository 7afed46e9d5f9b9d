"""Relationships that change (seed 003's relationship fields, seed 001's recall_interactions):
how each agent stands with each other one — trust and affinity, −1 to 1 — moved by what it hears.

Offline and deterministic: a heard line moves the listener's standing towards its speaker by what it
says to them (below): thanks, apologies, threats and promises to whoever is addressed, and judgements
("you're kind", "you lied") only in a clause about the listener, turned round when negated, not in an
"if" clause, not about someone else; more when the line names the listener, and a whisper to the
listener is a confidence (trust up). Each change is a `Relationship` row with its turn,
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

# Cues (regular expressions), each with how far one occurrence moves the standing (a line's move is
# capped at MAX_STEP), matched case-insensitively. A cue counts only where it is aimed at the listener
# (see `judge`): said to them, not about a third person, an idea or a rumour, not in an "if" clause,
# and turned round when negated ("I don't trust you" is distrust).
# Acts of speech towards whoever is addressed: thanking, apologising, agreeing, threatening, promising.
ACTS = {
    "warm": {"thank": 0.1, "appreciat": 0.15, "sorry": 0.05, r"forgive\b": 0.15, "great idea": 0.15,
             r"agree(?:d)?\b": 0.1, "well done": 0.1, "you're right": 0.1, "proud of you": 0.15,
             "miss you": 0.15, r"like you\b": 0.15},
    "cold": {r"shut up": 0.25, r"disagree": 0.05, r"leave me alone": 0.2, r"you always": 0.1, r"you never": 0.1,
             r"or else\b": 0.2, r"you(?:'ll| will) regret": 0.25, r"watch (?:yourself|your back)": 0.2,
             r"i(?:'ll| will) (?:make you pay|hurt you|ruin you)": 0.3},
    "trusting": {r"promise": 0.1, r"confess": 0.15, r"count on": 0.1, r"between us": 0.1, r"i'll help": 0.1},
    "distrusting": {r"or else\b|you(?:'ll| will) regret|i(?:'ll| will) (?:make you pay|hurt you|ruin you)": 0.2},
}
# Judgements that say something of someone: they count only in a clause about the listener (their
# name, or "you"): "you're so kind", not "if Sam hates the idea" or "the rumour's nonsense".
ABOUT = {
    "warm": {r"lov(?:e|ed|es|ing)\b": 0.15, r"glad\b": 0.1, r"wonderful": 0.1, r"kind(?!\s+of\b(?!\s+you))": 0.1,
             r"friend(?:s|ship)?\b": 0.1, r"happy\b": 0.05, r"sweet(?:heart|est)?\b": 0.1, r"brilliant": 0.1},
    "cold": {r"hat(?:e|ed|es|ing)\b": 0.2, r"stupid": 0.2, r"idiot": 0.25, r"annoy": 0.1, r"ridiculous": 0.1,
             r"rude": 0.15, r"selfish": 0.2, r"boring\b": 0.1, r"blame": 0.15, r"disgust": 0.2, r"pathetic": 0.25},
    "trusting": {r"honest": 0.1, r"trust(?!\s+me\b)": 0.1, r"secret": 0.1, r"truth": 0.05},
    "distrusting": {r"lie\b|lies\b|lying": 0.2, r"lied": 0.25, r"liar": 0.3, r"betray": 0.3, r"cheat": 0.25,
                    r"trick(?:s|ed|ing|ery)?\b": 0.15, r"hid\b": 0.15, r"hiding": 0.15, r"don't believe": 0.15,
                    r"rumou?rs?\b": 0.05, r"behind my back": 0.3, r"sold me out": 0.3},
}
OPPOSITE = {"warm": "cold", "cold": "warm", "trusting": "distrusting", "distrusting": "trusting"}
NAMED_FACTOR = 1.5   # a line that names its listener moves that listener's standing this much more
WHISPER_TRUST = 0.1  # being whispered to: confided in
MAX_STEP = 0.3       # one line moves trust or affinity at most this far

_YOU = re.compile(r"\b(?:you|your|yours|yourself|you're|you've|you'll|you'd|ya)\b", re.IGNORECASE)
_NEGATION = re.compile(r"\b(?:not|never|no|hardly|nor)\b|n't\b", re.IGNORECASE)
_CONDITION = re.compile(r"\b(?:if|unless|whether|suppose|supposing|imagine|in case)\b", re.IGNORECASE)
_GOES_ON = re.compile(r"\s*(?:(?:and|but|oh)\s+)?(?:that|this|it)(?:'s|\s+(?:is|was|'s))?\b", re.IGNORECASE)
_SENTENCES = re.compile(r"(?<=[.!?])\s+|\s*[;:—–]\s*|\s+-\s+")
_PATTERNS = {(group, name): {w: re.compile(rf"\b(?:{w})", re.IGNORECASE) for w in words}
             for group, cues in (("act", ACTS), ("about", ABOUT)) for name, words in cues.items()}


@dataclass
class Judgement:
    trust: float
    affinity: float
    words: list[str]
    why: str

    @property
    def changes(self) -> bool:
        return bool(self.trust or self.affinity)


def _clamp(value: float, bound: float = 1.0) -> float:
    return max(-bound, min(bound, value))


def _clauses(text: str):
    """(clause, is a question) for each comma-separated piece of each sentence."""
    for sentence in _SENTENCES.split(" ".join(text.split())):
        question = sentence.rstrip().endswith("?")
        for clause in sentence.split(","):
            if clause.strip():
                yield clause, question


def _names(name: str, text: str) -> bool:
    return bool(name) and re.search(rf"\b{re.escape(name)}\b", text, re.IGNORECASE) is not None


def _aimed(clause: str, listener: str) -> bool:
    return bool(_YOU.search(clause)) or _names(listener, clause)


def _cues(clause: str, *, question: bool, listener: str, others: list[str],
          carried: bool = False) -> list[tuple[str, float, str]]:
    """(measure, move, the words) of each cue in one clause, as it bears on the listener. carried:
    the clause goes on about what the last one said of the listener ("You lied. That is so selfish.")."""
    aimed = _aimed(clause, listener) or (carried and _GOES_ON.match(clause) is not None)
    about_other = any(_names(o, clause) for o in others) and not aimed
    found = []
    for (group, name), patterns in _PATTERNS.items():
        words = (ACTS if group == "act" else ABOUT)[name]
        for cue, pattern in patterns.items():
            for match in pattern.finditer(clause):
                before = clause[: match.start()]
                if _CONDITION.search(before) or about_other:
                    continue  # a hypothetical, or said of someone else
                if group == "about" and not aimed:
                    continue  # a judgement of a thing, an idea, a rumour: not of the listener
                move = words[cue] * (0.5 if question else 1.0)
                negated = _NEGATION.search(" ".join(before.split()[-4:]))
                found.append((OPPOSITE[name] if negated else name, move,
                              ("not " if negated else "") + match.group(0).lower()))
    return found


def judge(text: str, *, listener: str, whispered: bool = False, others: Iterable[str] = ()) -> Judgement:
    """How a heard line moves its listener's standing towards the speaker (deltas, −MAX_STEP..MAX_STEP),
    read clause by clause: a cue counts where it is aimed at the listener, turned round when negated,
    halved in a question. others: the rest of those present; a line that names one of them and not the
    listener is said to them, and moves nothing of the listener's (a thank-you to Oren is not one to Tess)."""
    others = [o for o in others if o and o != listener]
    named = _names(listener, text)
    if not named and not whispered and any(_names(o, text) for o in others):
        return Judgement(trust=0.0, affinity=0.0, words=[], why="")
    totals = {"warm": 0.0, "cold": 0.0, "trusting": 0.0, "distrusting": 0.0}
    said: dict[str, list[str]] = {name: [] for name in totals}
    last_aimed = False
    for clause, question in _clauses(text):
        for name, move, words in _cues(clause, question=question, listener=listener, others=others,
                                       carried=last_aimed):
            totals[name] += move
            said[name].append(words)
        last_aimed = _aimed(clause, listener) and not any(_names(o, clause) for o in others)
    factor = NAMED_FACTOR if named else 1.0
    affinity = _clamp((totals["warm"] - totals["cold"]) * factor, MAX_STEP)
    trust = _clamp((totals["trusting"] - totals["distrusting"]) * factor + (WHISPER_TRUST if whispered else 0.0),
                   MAX_STEP)
    parts = [f"{label}: " + ", ".join(said[name]) for name, label in
             (("warm", "warm"), ("cold", "cold"), ("trusting", "trust"), ("distrusting", "distrust")) if said[name]]
    if whispered:
        parts.append("confided in a whisper")
    words = [w for name in totals for w in said[name]]
    if factor > 1 and words:
        parts.append(f"said to {listener} by name")
    return Judgement(trust=round(trust, 3), affinity=round(affinity, 3), words=words, why="; ".join(parts))


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
