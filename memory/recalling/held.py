"""Beliefs as a turn reads them: semantic memories of category "belief" whose metadata carries the
claim (chronicle.simulation.story.beliefs makes and revises them); and an agent's secrets, with whom it has
told each. Each read is one short statement on every turn's path; through the ORM their JSON lookups
took longer to compile than to run (~2 ms each on a 2-core machine against ~0.4)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from django.db import connection

from memory.embedding.cache import vector_cursor
from memory.forming.seed_specs import SECRET_LABEL
from memory.living.plans import current_plans
from memory.living.reflection_rules import sheets

_BELIEFS = ("FROM memory_memory WHERE bank_id = %s AND kind = 'semantic' AND category = 'belief' "
            "AND metadata ? 'belief'")


def held_claims(bank_id: int, agents: list[str]) -> list[str]:
    """The claims any of these agents holds an active belief about, the oldest first, each once."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT metadata -> 'belief' ->> 'claim' {_BELIEFS} AND status = 'active' "
                       "AND agent = ANY(%s) ORDER BY turn, id", [bank_id, list(agents)])
        return list(dict.fromkeys(claim for (claim,) in cursor.fetchall() if claim))


def claim_holders(bank_id: int, agents: list[str]) -> dict[str, list[str]]:
    """Each claim any of these agents holds an active belief about (the oldest first) → who holds it."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT metadata -> 'belief' ->> 'claim', agent {_BELIEFS} AND status = 'active' "
                       "AND agent = ANY(%s) ORDER BY turn, id", [bank_id, list(agents)])
        holders: dict[str, list[str]] = {}
        for claim, agent in cursor.fetchall():
            if claim and agent not in holders.setdefault(claim, []):
                holders[claim].append(agent)
        return holders


def claim_numbers(bank_id: int) -> dict[str, int]:
    """Each claim in the bank → its number in the run (the writer's line that planted it): the same
    in every judgement's request, whoever hears the line."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT DISTINCT metadata -> 'belief' ->> 'claim', (metadata -> 'belief' ->> 'id')::int {_BELIEFS} "
                       "AND metadata -> 'belief' ->> 'id' ~ '^[0-9]+$'", [bank_id])
        return {claim: number for claim, number in cursor.fetchall() if claim}


def judged_with(bank_id: int, speaker: str, listeners: list[str], claims: bool, reflecting: list[str] = ()) -> dict:
    """What the judgement of a line is told besides the line: who holds each claim and its number in
    the run (when claims are asked about), the listeners' own secrets (judge_line's holders, numbers
    and keeping), the sheet of each agent due to reflect (seed 003: who it is, in its reflection's
    prompt) and the listeners' current plans (a line may overturn one)."""
    holders = claim_holders(bank_id, list(dict.fromkeys([speaker, *listeners]))) if claims else {}
    hearing = [name for name in listeners if name != speaker]
    plans = {name: plan.content for name, plan in current_plans(bank_id, hearing).items()} if hearing else {}
    return {"holders": holders, "numbers": claim_numbers(bank_id) if claims else {},
            "sheets": sheets(bank_id, list(reflecting)) if reflecting else {}, "plans": plans,
            "keeping": {name: [s.words for s in held_secrets(bank_id, name)] for name in listeners if name != speaker}}


@dataclass(frozen=True)
class HeldBelief:
    id: int  # the memory's
    agent: str
    belief: dict  # its metadata's "belief": claim, confidence, source_chain, history…
    similarity: float  # of its memory to the line that touches it (0.0 without the line's vector)


def held_beliefs(bank_id: int, agents: list[str], vector) -> list[HeldBelief]:
    """Every active belief these agents hold, the oldest first, each with its memory's similarity to
    `vector` (a line's): what a line's revision of beliefs reads, in one statement, the vector bound in binary."""
    with vector_cursor() as cursor:
        cursor.execute(f"SELECT id, agent, metadata -> 'belief', -(embedding <#> %b::vector) {_BELIEFS} "
                       "AND status = 'active' AND agent = ANY(%s) ORDER BY turn, id",
                       [None if vector is None else np.asarray(vector, dtype=np.float32), bank_id, list(agents)])
        return [HeldBelief(id=pk, agent=agent, belief=json.loads(data) if isinstance(data, str) else data,
                           similarity=float(similarity or 0.0))
                for pk, agent, data, similarity in cursor.fetchall()]


def beliefs_planted(bank_id: int) -> bool:
    """Whether the writer's beliefs (those heard from nobody: hops 0) are in the bank already."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT EXISTS (SELECT 1 {_BELIEFS} AND (metadata -> 'belief' -> 'hops') = '0'::jsonb)",
                       [bank_id])
        return bool(cursor.fetchone()[0])


@dataclass(frozen=True)
class HeldSecret:
    id: int  # the memory's
    words: str  # the secret as written, without its label ("My secret: ")
    told: dict[str, int]  # who has been told it, and at which turn (metadata "told")


def held_secrets(bank_id: int, agent: str) -> list[HeldSecret]:
    """The agent's own secrets (its sheet's, seeded as "My secret: …"), the first written first."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, content, metadata -> 'told' FROM memory_memory WHERE bank_id = %s AND agent = %s "
                       "AND kind = 'character' AND category = 'secrets' AND status = 'active' ORDER BY id",
                       [bank_id, agent])
        rows = cursor.fetchall()
    return [HeldSecret(id=pk, words=content.removeprefix(SECRET_LABEL),
                       told=dict(told) if isinstance(told, dict) else json.loads(told) if isinstance(told, str) else {})
            for pk, content, told in rows]
