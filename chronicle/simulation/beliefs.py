"""Planted beliefs and how they spread (issue 15; seeds 001 and 003: misinformation, gossip).

The writer plants a belief in one character, one per line of the run's *Planted beliefs*:

    Sam: Bella's is closing down next month. [false]
    Jordan: The Thai place has a new vegetarian menu.

(no mark: true). Before turn 1 each becomes a `semantic` memory of its holder (category `belief`).
When a holder later says something close to a belief it holds (cosine ≥ RETELL_SIMILARITY between
the line and the belief, or most of the belief's words in the line), everyone who heard the line and does not hold it yet comes to believe it:
a memory "Sam told me: …" whose metadata keeps the claim, whether it is true, the chain of people
it came through (nearest first) and a confidence that falls by HOP_CONFIDENCE with each hop, with
an evidence link to the teller's belief.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from django.db import transaction

from memory.models import Memory
from memory.services import memory_create

RETELL_SIMILARITY = 0.5  # a line this close to a belief its speaker holds retells it…
RETELL_WORDS = 0.7  # …and so does one holding this share of the belief's words (a long line quoting it)
_WORD = re.compile(r"[a-z0-9']{4,}")
HOP_CONFIDENCE = 0.7  # each retelling keeps this much of the teller's confidence
_LINE = re.compile(r"^\s*([^:]{1,100}?)\s*:\s*(.+?)\s*(?:\[(true|false)\])?\s*$", re.IGNORECASE)


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
    if Memory.objects.in_bank(simulation.bank).filter(category="belief", metadata__belief__hops=0).exists():
        return 0
    with transaction.atomic():
        for belief in planted:
            memory_create(bank=simulation.bank, content=belief.claim, agent=belief.holder, kind="semantic",
                          category="belief", source="writer", turn=0, importance=7.0,
                          metadata={"belief": {"id": belief.number, "claim": belief.claim, "true": belief.true,
                                               "source_chain": [], "confidence": 1.0, "hops": 0}})
    return len(planted)


def retells(line: str, line_vector, belief_vector, claim: str) -> bool:
    """Whether the line passes the belief on: close in meaning (a paraphrase), or carrying most of
    its words (the belief quoted inside a longer line, whose vector it no longer dominates)."""
    if line_vector is not None and float(np.dot(np.asarray(belief_vector, dtype=np.float32),
                                                np.asarray(line_vector, dtype=np.float32))) >= RETELL_SIMILARITY:
        return True
    words = set(_WORD.findall(claim.lower()))
    return bool(words) and len(words & set(_WORD.findall(line.lower()))) / len(words) >= RETELL_WORDS


def spread(*, bank, speaker: str, line: str, vector, heard_by: list[str], turn: int) -> list[Memory]:
    """Listeners of a line that retells one of the speaker's beliefs come to hold it (see module)."""
    # Only what the test needs, no model instances: this runs after every line of a run.
    held = list(Memory.objects.filter(bank=bank, status=Memory.Status.ACTIVE, agent=speaker, category="belief",
                                      metadata__has_key="belief").values_list("pk", "embedding", "metadata"))
    made = []
    for pk, embedding, metadata in held:
        data = metadata["belief"]
        if not retells(line, vector, embedding, data["claim"]):
            continue
        holders = set(Memory.objects.in_bank(bank).filter(category="belief", metadata__belief__id=data["id"])
                      .values_list("agent", flat=True))
        for name in heard_by:
            if name == speaker or name in holders:
                continue
            made.append(memory_create(
                bank=bank, content=f"{speaker} told me: {data['claim']}", agent=name, kind="semantic",
                category="belief", source="earned", turn=turn, importance=6.0, speaker=speaker,
                evidence=[pk],
                metadata={"belief": {"id": data["id"], "claim": data["claim"], "true": data["true"],
                                     "source_chain": [speaker, *data["source_chain"]],
                                     "confidence": round(data["confidence"] * HOP_CONFIDENCE, 3),
                                     "hops": data["hops"] + 1}}))
    return made


def who_believes(simulation) -> list[dict]:
    """Per planted claim, everyone who holds it: how it reached them and how sure they are."""
    if simulation.bank_id is None:
        return []
    rows = (Memory.objects.in_bank(simulation.bank).active().filter(category="belief", metadata__has_key="belief")
            .order_by("turn", "id"))
    claims: dict[int, dict] = {}
    for memory in rows:
        data = memory.metadata["belief"]
        claim = claims.setdefault(data["id"], {"claim": data["claim"], "true": data["true"], "holders": []})
        claim["holders"].append({"holder": memory.agent, "source_chain": data["source_chain"],
                                 "confidence": data["confidence"], "turn": memory.turn, "memory_id": memory.pk})
    return [claims[key] for key in sorted(claims)]
