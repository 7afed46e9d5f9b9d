"""The beliefs a turn reads in one statement each: the claims its listeners hold, and whether the
writer's beliefs are planted yet."""

from __future__ import annotations

import pytest

from memory.api import beliefs_planted, held_claims
from memory.services.memories import memory_archive, memory_create

pytestmark = pytest.mark.django_db


def _belief(bank, agent: str, claim: str, *, turn: int, hops: int):
    return memory_create(bank=bank, agent=agent, kind="semantic", category="belief", turn=turn, content=claim,
                         metadata={"belief": {"id": 1, "claim": claim, "hops": hops, "confidence": 1.0}})


def test_the_claims_the_listeners_hold_come_once_oldest_first_and_only_while_held(bank):
    assert held_claims(bank.pk, ["Donal", "Tait"]) == [] and not beliefs_planted(bank.pk)
    _belief(bank, "Donal", "The light was out for half an hour.", turn=3, hops=1)
    assert not beliefs_planted(bank.pk)  # heard from someone: not the writer's
    _belief(bank, "Tait", "The log was written up late.", turn=0, hops=0)
    _belief(bank, "Tait", "The light was out for half an hour.", turn=5, hops=2)
    gone = _belief(bank, "Donal", "Callum fell asleep.", turn=1, hops=1)
    _belief(bank, "Isla", "Isla is leaving for Wick.", turn=0, hops=0)  # not a listener
    memory_create(bank=bank, agent="Donal", kind="semantic", category="belief", content="No claim recorded here.")
    memory_archive(memory=gone)
    assert held_claims(bank.pk, ["Donal", "Tait"]) == ["The log was written up late.", "The light was out for half an hour."]
    assert beliefs_planted(bank.pk)
