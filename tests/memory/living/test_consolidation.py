"""Consolidation with the real model and database: clusters, evidence, retrieval, undo, what is spared."""

from __future__ import annotations

import numpy as np
import pytest

from memory.living.consolidation import consolidate, consolidation_due, unconsolidate
from memory.models import Memory
from memory.recalling.filters import MemoryFilter
from memory.recalling.search import recall
from memory.services import memory_create

RAMEN = ["Jordan said: Let's get ramen tonight.", "Jordan said: We should get ramen tonight.",
         "Jordan said: How about ramen tonight?", "Jordan said: Let's go for ramen tonight!"]


def earned(bank, content, turn, importance=3.0, agent="Alex"):
    return memory_create(bank=bank, content=content, agent=agent, kind="episodic", importance=importance,
                         source="earned", turn=turn, speaker="Jordan")


@pytest.fixture
def ramen_bank(bank):
    originals = [earned(bank, text, turn) for turn, text in zip((2, 4, 5, 7), RAMEN)]
    other = earned(bank, "Jordan said: My car broke down on the highway this morning.", 3)
    return bank, originals, other


def test_a_cluster_of_near_duplicates_becomes_one_summary_with_evidence(ramen_bank):
    bank, originals, other = ramen_bank
    results = consolidate(bank, "Alex", before_turn=20)
    assert len(results) == 1
    summary = results[0].summary
    assert summary.source == "consolidation" and summary.kind == "episodic" and summary.turn == 7
    assert summary.importance == 3.0 and summary.status == "active"
    assert "and 3 similar lines from turns 2–7" in summary.content
    assert set(summary.evidence.values_list("pk", flat=True)) == {m.pk for m in originals}
    assert set(Memory.objects.filter(pk__in=[m.pk for m in originals]).values_list("status", flat=True)) == {"consolidated"}
    other.refresh_from_db()
    assert other.status == "active"  # not similar: left alone
    found = [r.memory.pk for r in recall(bank, "ramen tonight", agent="Alex", filter=MemoryFilter(kinds=["episodic"]), k=5)]
    assert summary.pk in found and not set(found) & {m.pk for m in originals}


def test_unconsolidate_restores_the_originals_with_their_vectors(ramen_bank):
    bank, originals, _ = ramen_bank
    vectors = {m.pk: np.asarray(m.embedding) for m in Memory.objects.filter(pk__in=[o.pk for o in originals])}
    summary = consolidate(bank, "Alex", before_turn=20)[0].summary
    restored = unconsolidate(summary)
    assert {m.pk for m in restored} == set(vectors)
    for memory in Memory.objects.filter(pk__in=vectors):
        assert memory.status == "active"
        assert np.array_equal(np.asarray(memory.embedding), vectors[memory.pk])
    summary.refresh_from_db()
    assert summary.status == "archived"
    found = {r.memory.pk for r in recall(bank, "ramen tonight", agent="Alex", filter=MemoryFilter(kinds=["episodic"]), k=5)}
    assert set(vectors) <= found and summary.pk not in found


def test_important_recent_and_other_agents_memories_are_never_consolidated(bank):
    important = [earned(bank, text, 2 + i, importance=8.0) for i, text in enumerate(RAMEN)]
    recent = [earned(bank, text, 30 + i) for i, text in enumerate(RAMEN)]
    jordan = [earned(bank, text, 2 + i, agent="Jordan") for i, text in enumerate(RAMEN)]
    assert consolidate(bank, "Alex", before_turn=30) == []
    kept = Memory.objects.filter(pk__in=[m.pk for m in important + recent + jordan])
    assert set(kept.values_list("status", flat=True)) == {"active"}
    # Jordan's own old ones do consolidate, and only Jordan's
    assert [len(r.originals) for r in consolidate(bank, "Jordan", before_turn=30)] == [4]
    assert set(kept.exclude(agent="Jordan").values_list("status", flat=True)) == {"active"}


def test_an_llm_summary_is_used_and_a_failing_one_falls_back(ramen_bank):
    bank, originals, _ = ramen_bank
    seen = []

    def summarize(lines):
        seen.append(lines)
        return "Jordan kept asking for ramen."

    result = consolidate(bank, "Alex", before_turn=20, summarize=summarize)[0]
    assert result.summary.content == "Jordan kept asking for ramen." and result.summarizer == "llm"
    assert sorted(seen[0]) == sorted(RAMEN)
    unconsolidate(result.summary)

    def broken(lines):
        raise TimeoutError("model down")

    result = consolidate(bank, "Alex", before_turn=20, summarize=broken)[0]
    assert result.summarizer == "extractive" and "similar lines" in result.summary.content


def test_the_budget_trigger(ramen_bank, settings):
    from memory.tasks import consolidate_bank_task

    bank, originals, _ = ramen_bank
    settings.CONSOLIDATION_BUDGET = 5
    assert not consolidation_due(bank, "Alex")
    assert consolidate_bank_task.apply(args=(bank.pk, "Alex", 20)).get() == 0
    earned(bank, "Jordan said: The weather is lovely today.", 9)
    assert consolidation_due(bank, "Alex")
    assert consolidate_bank_task.apply(args=(bank.pk, "Alex", 20)).get() == 1
    assert not consolidation_due(bank, "Alex")  # two earned ones left: the summary is not "earned"
