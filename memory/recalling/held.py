"""Beliefs as a turn reads them: semantic memories of category "belief" whose metadata carries the
claim (chronicle.simulation.beliefs makes and revises them). Each read is one short statement on
every turn's path; through the ORM their JSON lookups took longer to compile than to run (~2 ms
each on a 2-core machine against ~0.4)."""

from __future__ import annotations

from django.db import connection

_BELIEFS = ("FROM memory_memory WHERE bank_id = %s AND kind = 'semantic' AND category = 'belief' "
            "AND metadata ? 'belief'")


def held_claims(bank_id: int, agents: list[str]) -> list[str]:
    """The claims any of these agents holds an active belief about, the oldest first, each once."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT metadata -> 'belief' ->> 'claim' {_BELIEFS} AND status = 'active' "
                       "AND agent = ANY(%s) ORDER BY turn, id", [bank_id, list(agents)])
        return list(dict.fromkeys(claim for (claim,) in cursor.fetchall() if claim))


def beliefs_planted(bank_id: int) -> bool:
    """Whether the writer's beliefs (those heard from nobody: hops 0) are in the bank already."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT EXISTS (SELECT 1 {_BELIEFS} AND (metadata -> 'belief' -> 'hops') = '0'::jsonb)",
                       [bank_id])
        return bool(cursor.fetchone()[0])
