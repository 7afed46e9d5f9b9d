"""Planted beliefs: how they spread and how they change (seeds 001 and 003: misinformation, gossip).

The writer plants a belief in one character, one per line of the run's *Planted beliefs*:

    Sam: Bella's is closing down next month. [false]
    Jordan: The Thai place has a new vegetarian menu.

(no mark: true). Before turn 1 each becomes a `semantic` memory of its holder (category `belief`).

A line that touches a claim someone present holds takes a *stance* toward it: it asserts it (passes
it on), questions it (asks whether it is true), denies it (says it is false, corrects it), or none.
With a model the judgement after the line says which (memory.living.after_turn); offline, `stance()`:
- **asserts**, said by a holder who still believes it: each listener who does not hold it comes to
  ("Sam told me: …"), with the chain it came through (nearest first) and a confidence that falls by
  HOP_CONFIDENCE a hop;
- **questions**: nothing is planted (each listener's memory of the line says who asked what);
- **doubts** (passes it on, or speaks of it, as uncertain: "I heard …, not sure it's true", "I doubt
  it"): a listener who did not hold it comes to, but no surer than HEDGED (under SURE: it does not
  pass it on as true); whoever holds it is DOUBT_WEIGHT less sure, and the speaker no surer than HEDGED;
- **denies**: each listener who holds it believes it less (more when the speaker is trusted, or is
  who told them), the claim is marked *disputed*, and their belief now says who denied it and how;
  a speaker who held it has retracted it; whoever else heard it keeps the correction, with its source.
A holder who has retracted a claim, or is no longer sure of it, passes on the correction, not the claim.
Every belief keeps its history: [{turn, confidence, source_chain, stance}].
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from django.db import transaction

from memory.models import Memory
from memory.api import beliefs_held, memory_edits, relations
from chronicle.simulation.story.accused import facing, answer, faced, faced_row, subject_of

RETELL_SIMILARITY = 0.6  # a line this close to a belief its speaker holds retells it…
RETELL_WORDS = 0.7  # …and so does one holding this share of the belief's words (a long line quoting it)
ABOUT_SIMILARITY = 0.45  # a line this close to a claim is about it (a question, a denial)…
ABOUT_WORDS = 0.4  # …and so is one with this share of the claim's words
_WORD = re.compile(r"[a-z0-9']{4,}")
HOP_CONFIDENCE = 0.7  # each retelling keeps this much of the teller's confidence
DENIAL_WEIGHT = 0.5  # a denial takes this share of a listener's confidence…
ACCUSED_WEIGHT = 0.3  # …this much when it is the one the claim is about who denies it…
TRUSTED_WEIGHT = 0.3  # …and up to this much more from someone the listener trusts (trust +1)
TELLER_WEIGHT = 0.8  # …and at least this much when it comes from who told them
RETRACTED = 0.05  # a holder who says its own claim is not so keeps this little of it
DISPUTED_IMPORTANCE = 7.0
SURE = 0.5  # below this confidence a holder no longer passes the claim on as true
DOUBT_WEIGHT = 0.25  # a doubt takes this share of a holder's confidence (half a denial's)
HEDGED = 0.4  # the surest one holds a claim heard or said with doubt: below SURE
STANCES = ("asserts", "questions", "doubts", "denies", "none")
# Said as uncertain: "not sure", "I doubt", "maybe", "apparently", "supposedly", "if it's true"…
_HEDGE = re.compile(r"\b(?:not (?:so |entirely |totally |completely )?sure|unsure|(?:i )?doubt(?:s|ful)?|maybe|"
                    r"perhaps|apparently|supposedly|allegedly|rumou?r has it|if (?:it|that)['’]?s true|"
                    r"if (?:it|that) is true|can['’]t be sure|who knows)\b", re.IGNORECASE)
_CERTAIN = re.compile(r"\b(?:(?:there(?:['’]s| is) )?no|without a|without any|beyond (?:a|any)) doubt(?: about it)?\b",
                      re.IGNORECASE)
_LINE = re.compile(r"^\s*([^:]{1,100}?)\s*:\s*(.+?)\s*(?:\[(true|false)\])?\s*$", re.IGNORECASE)
# A reply that opens by contradicting what it answers.
_CONTRADICTS = re.compile(r"^\W*(?:no\b|nope\b|not true\b|not at all\b|nonsense\b|rubbish\b|untrue\b|"
                          r"that(?:['’]s| is) (?:not true|a lie|nonsense|rubbish|wrong)|that isn['’]t (?:true|so))",
                          re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.!?])[\"”’)*]*\s+")
# Explicit negation: "is not", "isn't true", "no, …", "that's a lie", "it's only …", "I had it wrong".
_NEGATION = re.compile(r"(?:\b(?:no|not|never|nothing|nobody|none|untrue|false|nonsense|rubbish|lie|lies|lying|"
                       r"wrong|only|mistaken)\b|n['’]t\b)", re.IGNORECASE)


# Where a sentence's clauses part: "There won't be any delivery today… the carter says the bridge
# washed away" denies the delivery, not the bridge.
# A dash is left whole: it opens what the clause is about ("what they said—'the inn', 'hotel'").
_CLAUSE = re.compile(r"\s*(?:…|\.\.\.|;|,\s*(?=(?:but|and|so|though)\b))\s*", re.IGNORECASE)


@dataclass(frozen=True)
class Planted:
    number: int  # its line in the writer's list: the belief's id within the run
    holder: str
    claim: str
    true: bool


class BeliefError(ValueError):
    """A planted belief the form cannot take; the message names the line."""


def parse(text: str, *, cast: list[str]) -> list[Planted]:
    planted = []
    for number, raw in enumerate((text or "").splitlines(), start=1):
        if not raw.strip():
            continue
        match = _LINE.match(raw)
        if not match or not match.group(2).strip():
            raise BeliefError(f"Line {number}: write “Name: what they believe”, with [false] after a false one.")
        holder = next((name for name in cast if name.lower() == match.group(1).strip().lower()), None)
        if holder is None:
            raise BeliefError(f"Line {number}: {match.group(1).strip()} is not in this run's cast ({', '.join(cast)}).")
        planted.append(Planted(number, holder, match.group(2).strip(), (match.group(3) or "true").lower() == "true"))
    return planted


def plant(simulation) -> int:
    """The writer's beliefs as memories of their holders, once (before the first turn)."""
    planted = parse(simulation.planted_beliefs, cast=simulation.cast_names) if simulation.planted_beliefs else []
    if not planted or simulation.bank_id is None:
        return 0
    if beliefs_held.beliefs_planted(simulation.bank_id):
        return 0
    with transaction.atomic():
        memory_edits.memories_create(bank=simulation.bank, memories=[dict(
            content=belief.claim, agent=belief.holder, kind="semantic", category="belief", source="writer", turn=0,
            importance=7.0, keys=belief_keys(belief.claim),
            metadata={"belief": _state(id=belief.number, claim=belief.claim, true=belief.true, chain=[],
                                       confidence=1.0, hops=0, turn=0, stance="asserts")},
        ) for belief in planted])
    return len(planted)


def belief_keys(claim: str) -> list[str]:
    """The questions that lead to a belief whatever its words now say (memory keys): asking what one
    believes about a claim, or whether it is true, finds it first."""
    claim = claim.strip().rstrip(".")
    return [f"What do I believe about this: {claim}?", f"Is it true that {claim}?"]


def _state(*, id: int, claim: str, true: bool, chain: list[str], confidence: float, hops: int, turn: int,
           stance: str) -> dict:
    return {"id": id, "claim": claim, "true": true, "source_chain": chain, "confidence": confidence, "hops": hops,
            "stance": stance, "disputed": None,
            "history": [{"turn": turn, "confidence": confidence, "source_chain": chain, "stance": stance}]}


def _words(text: str) -> set[str]:
    """The text's content words, stemmed lightly ("master's" and "master", "selling" and "sells", "chains"
    and "chain" are one word)."""
    return {_stem(word) for word in _WORD.findall(text.lower().replace("’", "'"))}


def _stem(word: str) -> str:
    word = word.removesuffix("'s").strip("'")
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def retells(line: str, similarity: float, claim: str) -> bool:
    """Whether the line passes the belief on: close in meaning (a paraphrase: `similarity`, of the
    line's vector to the belief's), or carrying most of its words (the belief quoted inside a longer
    line, whose vector it no longer dominates)."""
    if similarity >= RETELL_SIMILARITY:
        return True
    words = _words(claim)
    return bool(words) and len(words & _words(line)) / len(words) >= RETELL_WORDS


def stance(line: str, claim: str, *, similarity: float = 0.0, previous: str | Callable[[], str] = "") -> str:
    """The offline rule for what a line does with a claim: the sentences that share the claim's
    words decide — one ending in "?" questions it, one said as uncertain ("not sure", "maybe",
    "apparently") doubts it, one with an explicit negation (or a line opening with "No") denies it;
    a line that retells it (retells()) asserts it; anything else: none.
    similarity: of the line's vector to the claim's (0.0 when the line has none). A line that opens
    by contradicting the one before it ("No, that isn't true.") denies what that one asked or said
    (previous: the line the speaker heard just before, or what reads it when needed)."""
    own = _stance(line, similarity, claim)
    if own == "none" and _CONTRADICTS.match(line):
        before = previous() if callable(previous) else previous
        if before and _stance(before, 0.0, claim) in ("asserts", "questions"):
            return "denies"
    return own


def _stance(line: str, similarity: float, claim: str) -> str:
    words = _words(claim)
    share = len(words & _words(line)) / len(words) if words else 0.0
    if share < ABOUT_WORDS and similarity < ABOUT_SIMILARITY:
        return "none"
    # "No doubt", "without a doubt": certainty, neither a doubt nor a "no".
    sentences = [_CERTAIN.sub("", s).strip(" ,*") for s in _SENTENCE.split(line.strip()) if s.strip(" *")]
    sentences = [s for s in sentences if s]
    touching = [s for s in sentences if words & _words(s)]
    if not touching:
        return "none"
    if any(s.rstrip("\"”’)* ").endswith("?") for s in touching):
        return "questions"
    if any(_HEDGE.search(s) for s in touching):
        return "doubts"
    opening = sentences[0].rstrip(".!,").strip().lower() if sentences else ""
    if opening in ("no", "nope", "not true", "not at all") or any(_NEGATION.search(c) for c in _claim_clauses(touching, words)):
        return "denies"
    return "asserts" if retells(line, similarity, claim) else "none"


def _claim_clauses(sentences: list[str], words: set[str]) -> list[str]:
    """Of each sentence, the clauses that carry most of the claim's words: where a negation denies it."""
    clauses = [c for s in sentences for c in _CLAUSE.split(s) if c.strip()]
    best = max((len(words & _words(c)) for c in clauses), default=0)
    return [c for c in clauses if best and len(words & _words(c)) == best]


def revise(*, bank, speaker: str, line: str, vector, heard_by: list[str], turn: int,
           previous: str | Callable[[], str] = "", cast: list[str] | None = None,
           judged: dict[str, str] | None = None, trust: dict[str, float] | None = None) -> list[Memory]:
    """What the line does to the beliefs of those who heard it (see the module). vector: the line's
    (None: the rule reads its words only). judged: a model's stance per claim (memory.living.after_turn,
    keyed by the claim's text); a claim it left out is judged by stance(), with `previous`, the line
    the speaker heard before it, then by accused.answer() (a denial by the one accused, a defence of
    them, a retraction). cast: who a claim can be about (chronicle.simulation.story.accused); without
    it, those who speak and hear. trust: each listener's trust in the speaker. Returns the beliefs
    (and accusations) made or revised."""
    cast = list(cast or dict.fromkeys([speaker, *heard_by]))
    read_before: list[str] = []

    def before() -> str:  # the line before, read once and only when a rule needs it
        if not read_before:
            read_before.append(previous() if callable(previous) else previous)
        return read_before[0]
    # Every turn reads them (one statement, with each belief's similarity to the line); the memories
    # themselves only when a denial changes them.
    by_claim: dict[int, dict[str, beliefs_held.HeldBelief]] = {}
    for held in beliefs_held.held_beliefs(bank.pk, [speaker, *heard_by], vector):
        by_claim.setdefault(held.belief["id"], {})[held.agent] = held
    changed = []
    for held in by_claim.values():
        sample = next(iter(held.values()))  # the claim's oldest holding, as the rule judges it
        data = sample.belief
        subject = subject_of(data["claim"], cast)
        mine = held.get(speaker)
        said = (judged or {}).get(data["claim"])
        if not said:
            said = stance(line, data["claim"], similarity=sample.similarity, previous=before)
            if said == "none":  # few of the claim's words: the one accused, a defence, a retraction
                said = answer(line, claim=data["claim"], speaker=speaker, subject=subject, cast=cast,
                              holds=mine is not None and float(mine.belief["confidence"]) > RETRACTED,
                              touched_before=bool(before()) and _stance(before(), 0.0, data["claim"]) != "none",
                              present=subject in heard_by) or "none"
        if said == "asserts" and mine is not None and mine.belief["confidence"] >= SURE:
            changed += _pass_on(bank, mine, speaker, heard_by, held, turn, subject=subject, cast=cast)
        elif said == "denies":
            if trust is None:  # how far each listener trusts the speaker, as it stood before this line
                trust = {agent: row.trust for (agent, _other), row in
                         relations.standing(bank, other=speaker, agents=heard_by).items()}
            changed += _correct(bank, data, speaker, heard_by, _memories(held), turn, trust, subject=subject)
            changed += faced(bank, data, subject=subject, speaker=speaker, heard_by=heard_by, turn=turn, said=said)
        elif said == "doubts":
            changed += _doubt(bank, data, speaker, heard_by, _memories(held), turn, subject=subject, cast=cast)
    return changed


def _memories(held: dict[str, beliefs_held.HeldBelief]) -> dict[str, Memory]:
    """The holdings themselves, by holder: read only when a line changes them."""
    return {m.agent: m for m in Memory.objects.filter(pk__in=[h.id for h in held.values()])}


def _belief_row(name: str, content: str, *, speaker: str, turn: int, state: dict, **extra) -> dict:
    """A belief a line gave `name` (memories_create's row): its words, and the state beliefs revise."""
    return dict(content=content, agent=name, kind="semantic", category="belief", source="earned", turn=turn,
                importance=6.0, speaker=speaker, keys=belief_keys(state["claim"]), metadata={"belief": state},
                **extra)


def _doubt(bank, data: dict, speaker: str, heard_by: list[str], held: dict[str, Memory], turn: int, *,
           subject: str = "", cast: list[str] = ()) -> list[Memory]:
    """A line that speaks of the claim as uncertain: who did not hold it now does, unsure; who did is
    less sure (see the module). A doubt is not a belief: a speaker who did not hold the claim does
    not come to by doubting it; the one it is about faces it (accused.py)."""
    changed: dict[str, Memory] = {}
    accused = [faced_row(data, subject=subject, speaker=speaker, turn=turn, cast=cast, unsure=True)] \
        if subject in heard_by and subject != speaker and subject not in held and not facing(bank, data, subject) else []
    new: dict[str, dict] = {}
    mine = held[speaker].metadata["belief"] if speaker in held else None
    chain = [speaker, *(mine["source_chain"] if mine else [])]
    heard = min(HEDGED, (float(mine["confidence"]) if mine else HEDGED) * HOP_CONFIDENCE)
    names = list(dict.fromkeys([speaker, *heard_by]))
    for name in names:
        own = name == speaker
        memory = held.get(name)
        if memory is None:
            if own or name == subject or name in data["source_chain"]:
                continue  # a doubt is not a belief; nobody learns a rumour from its own retelling, or of itself
            state = _state(id=data["id"], claim=data["claim"], true=data["true"], chain=chain,
                           confidence=round(heard, 3), hops=len(chain), turn=turn, stance="doubts")
            new[name] = _belief_row(name, f"{speaker} told me, not sure of it: {data['claim']}", speaker=speaker,
                                    turn=turn, state=state)
            continue
        state = dict(memory.metadata["belief"])
        after = float(state["confidence"]) * (1 - DOUBT_WEIGHT)
        state["confidence"] = round(min(after, HEDGED) if own else after, 3)
        state["stance"] = "doubts"
        state["history"] = [*(state.get("history") or []), {"turn": turn, "confidence": state["confidence"],
                                                          "source_chain": [speaker], "stance": "doubts"}]
        base = (memory.metadata or {}).get("told") or memory.content
        told = (f"then I said (turn {turn}) I was not sure of it" if own
                else f"then {speaker} (turn {turn}) was not sure of it")
        changed[name] = memory_edits.memory_revise(memory=memory, content=f"{base} — {told}", importance=memory.importance,
                                                   metadata={**memory.metadata, "belief": state, "told": base})
    rows = [*new.values(), *accused]
    if rows:
        made = memory_edits.memories_create(bank=bank, memories=rows)
        changed.update(zip(new, made))
        return [*(changed[name] for name in names if name in changed), *made[len(new):]]
    return [changed[name] for name in names if name in changed]


def _pass_on(bank, mine: beliefs_held.HeldBelief, speaker: str, heard_by: list[str], held: dict[str, beliefs_held.HeldBelief],
             turn: int, *, subject: str = "", cast: list[str] = ()) -> list[Memory]:
    data = mine.belief
    chain = [speaker, *data["source_chain"]]
    # Nobody learns a rumour from its own retelling: whoever it came through (a sequel may carry the
    # hearer's memories but not its belief) is where it started, not a new believer. The one it is
    # about does not believe it either: it faces it (accused.py).
    believers = [name for name in heard_by if name != speaker and name not in held and name not in data["source_chain"]
                 and name != subject]
    accused = [faced_row(data, subject=subject, speaker=speaker, turn=turn, cast=cast, evidence=[mine.id])] \
        if subject in heard_by and subject != speaker and subject not in held and not facing(bank, data, subject) else []
    # Every new believer's copy in one statement (the same words and keys: one model call).
    return memory_edits.memories_create(bank=bank, memories=[*accused, *(_belief_row(
        name, f"{speaker} told me: {data['claim']}", speaker=speaker, turn=turn, evidence=[mine.id],
        state=_state(id=data["id"], claim=data["claim"], true=data["true"], chain=chain,
                     confidence=round(data["confidence"] * HOP_CONFIDENCE, 3), hops=data["hops"] + 1, turn=turn,
                     stance="asserts"),
    ) for name in believers)]) if believers or accused else []


def _correct(bank, data: dict, speaker: str, heard_by: list[str], held: dict[str, Memory], turn: int,
             trust: dict[str, float], *, subject: str = "") -> list[Memory]:
    changed: dict[str, Memory] = {}
    new: dict[str, dict] = {}  # who never held the claim: made together, after the loop
    # Who the correction came through: the speaker, and whoever denied it to the speaker first.
    mine = (held[speaker].metadata["belief"].get("disputed") or {}) if speaker in held else {}
    through = [speaker, *([mine["by"]] if mine.get("by") not in (None, speaker) else [])]
    names = list(dict.fromkeys([speaker, *heard_by]))
    for name in names:
        memory = held.get(name)
        if memory is None and name == subject:
            continue  # the one it is about keeps its accusation, answered (faced()), not a belief about itself
        if memory is None:  # it never held the claim: it keeps the correction, with its source
            own = name == speaker
            content = (f"I said it is not so that {data['claim']}" if own
                       else f"{speaker} told me it is not so that {data['claim']}")
            chain = [] if own else through
            state = _state(id=data["id"], claim=data["claim"], true=data["true"], chain=chain, confidence=0.0,
                           hops=0 if own else 1, turn=turn, stance="denies")
            state["disputed"] = {"turn": turn, "by": speaker}
            new[name] = _belief_row(name, content, speaker=speaker, turn=turn, state=state)
            continue
        state = dict(memory.metadata["belief"])
        before = float(state["confidence"])
        if name == speaker:
            after = min(before, RETRACTED)
            told = f"then I said (turn {turn}) it is not so"
        else:
            # The one accused is expected to deny it: its word weighs less than a bystander's.
            weight = (ACCUSED_WEIGHT if speaker == subject else DENIAL_WEIGHT) \
                + TRUSTED_WEIGHT * max(0.0, float(trust.get(name, 0.0)))
            if speaker in state["source_chain"][:1]:
                weight = max(weight, TELLER_WEIGHT)
            after = before * (1 - min(weight, 0.95))
            told = f"then {speaker} said (turn {turn}) it is not so"
        state["confidence"] = round(after, 3)
        state["stance"] = "denies"
        state["disputed"] = {"turn": turn, "by": speaker}
        state["history"] = [*(state.get("history") or []), {"turn": turn, "confidence": state["confidence"],
                                                          "source_chain": [speaker], "stance": "denies"}]
        base = (memory.metadata or {}).get("told") or memory.content
        # Hearing what one believes denied is news (seed 002: notable, 7), whatever the claim was worth.
        changed[name] = memory_edits.memory_revise(memory=memory, content=f"{base} — {told}",
                                                   importance=max(memory.importance, DISPUTED_IMPORTANCE),
                                                   metadata={**memory.metadata, "belief": state, "told": base})
    if new:
        changed.update(zip(new, memory_edits.memories_create(bank=bank, memories=list(new.values()))))
    return [changed[name] for name in names if name in changed]
