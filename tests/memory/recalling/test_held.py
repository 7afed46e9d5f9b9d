"""The beliefs a turn reads in one statement each: the claims its listeners hold, whether the
writer's beliefs are planted yet, and what a line's revision reads (each belief with its closeness to the line)."""

from __future__ import annotations

import numpy as np
import pytest

from memory.recalling.held import beliefs_planted, held_beliefs, held_claims
from memory.recalling.held import claim_numbers
from memory.embedding.cache import embed_one
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


def test_each_claim_has_one_number_in_the_run_whoever_holds_it(bank):
    _belief(bank, "Tait", "The log was written up late.", turn=0, hops=0)
    memory_create(bank=bank, agent="Donal", kind="semantic", category="belief", turn=0, content="x",
                  metadata={"belief": {"id": 2, "claim": "The light was out.", "hops": 0, "confidence": 1.0}})
    memory_create(bank=bank, agent="Tait", kind="semantic", category="belief", turn=3, content="y",
                  metadata={"belief": {"id": 2, "claim": "The light was out.", "hops": 1, "confidence": 0.7}})
    assert claim_numbers(bank.pk) == {"The log was written up late.": 1, "The light was out.": 2}


def test_a_lines_revision_reads_each_held_belief_with_its_closeness_to_the_line(bank):
    old = _belief(bank, "Tait", "The light was out for half an hour.", turn=0, hops=0)
    new = _belief(bank, "Donal", "The log was written up late.", turn=4, hops=1)
    _belief(bank, "Isla", "The light was out for half an hour.", turn=1, hops=1)  # not a listener
    line = embed_one("Donal said: the lamp went dark for thirty minutes, I saw it.")
    held = held_beliefs(bank.pk, ["Tait", "Donal"], line)
    assert [(h.id, h.agent, h.belief["claim"]) for h in held] == [
        (old.pk, "Tait", "The light was out for half an hour."), (new.pk, "Donal", "The log was written up late.")]
    # The same closeness the rule had from the two vectors, and the paraphrase is the closer.
    for h, memory in zip(held, (old, new)):
        memory.refresh_from_db()
        assert h.similarity == pytest.approx(float(np.dot(line, memory.embedding)), abs=1e-5)
    assert held[0].similarity > held[1].similarity + 0.1
    # A line kept without its vector (the embedder was down): its words alone decide.
    assert [h.similarity for h in held_beliefs(bank.pk, ["Tait", "Donal"], None)] == [0.0, 0.0]
