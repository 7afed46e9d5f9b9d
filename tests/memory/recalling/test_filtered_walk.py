"""A tag (or any condition beyond agent and kinds) in a bank with its own index: a common one walks
the index, a rare one scans, and a tag the table's statistics call rare but the bank holds often is
walked once a search has seen how often."""

from __future__ import annotations

import numpy as np
import pytest
from django.db import connection

from memory.models import Memory
from memory.recalling import indexing, search
from memory.recalling.filters import MemoryFilter
from memory.recalling.search import recall
from memory.services import bank_create

BANK = 3_000
FILLER = 40_000  # another bank's memories: the table the planner's statistics describe
CENTRES = np.random.default_rng(1).normal(size=(60, 384)) / np.sqrt(384)


def _tags(i: int) -> list[str]:
    tags = ["reed"] if i % 2 == 0 else []
    if i % 100 == 7:
        tags.append("fern")   # 1 %: rare in the bank and in the table
    if i % 5 < 2:
        tags.append("moss")   # 40 % of this bank, none of the other's: rare to the table's statistics
    return tags


@pytest.fixture
def indexed_bank(transactional_db, monkeypatch):
    # The bank is small for a test: its index pays from a few hundred candidates (the rule, not the size).
    monkeypatch.setattr(search, "INDEXED_EXACT_LIMIT", 200)
    bank = bank_create(name="tagged bank")
    rng = np.random.default_rng(3)
    # Topics, as real embeddings have (random vectors in 384 dimensions have no neighbourhoods to walk).
    vectors = (CENTRES[rng.integers(0, len(CENTRES), BANK)] + 0.08 * rng.normal(size=(BANK, 384))).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    Memory.objects.bulk_create([
        Memory(bank=bank, agent="Ana" if i % 4 < 2 else "Ben", kind="episodic", category="c",
               turn=i, content=f"memory {i}", embedding=v, tags=_tags(i)) for i, v in enumerate(vectors)],
        batch_size=1000)
    other = bank_create(name="other bank")
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO memory_memory (bank_id, agent, kind, category, about, turn, speaker, content, embedding, "
            "importance, emotional_valence, participants, location, tags, related_goals, access_count, decay_rate, "
            "source, status, metadata, created_at, updated_at) "
            "SELECT %s, 'Cy', 'episodic', 'c', '', g, '', 'filler ' || g, %s::vector, 5, 0, '{}', '', "
            "CASE WHEN g %% 2 = 0 THEN ARRAY['reed'] ELSE '{}' END::varchar(50)[], '{}', 0, 0.01, 'earned', "
            "'active', '{}', now(), now() FROM generate_series(1, %s) g",
            [other.pk, vectors[0].tolist(), FILLER])
        cursor.execute("ANALYZE memory_memory")
    indexing.build_bank_index(bank.pk)
    assert indexing.has_bank_index(bank.pk)
    yield bank
    indexing.drop_bank_index(bank.pk)


def _query(seed: int) -> np.ndarray:
    rng = np.random.default_rng(100 + seed)
    q = (CENTRES[rng.integers(0, len(CENTRES))] + 0.08 * rng.normal(size=384)).astype(np.float32)
    return q / np.linalg.norm(q)


def _tagged(bank, tag: str, mode: str) -> set[int]:
    rows = Memory.objects.in_bank(bank).values_list("id", "tags")
    return {pk for pk, tags in rows if tag in tags or (not tags and not mode.endswith("strict"))}


@pytest.mark.parametrize("mode", ["any", "any_strict"])
def test_a_tag_half_the_bank_carries_walks_the_index_and_finds_what_a_scan_finds(indexed_bank, mode):
    flt = MemoryFilter(tags=["reed"], tags_mode=mode)
    allowed = _tagged(indexed_bank, "reed", mode)
    agreed = []
    for seed in range(10):
        got = recall(indexed_bank, query_vector=_query(seed), filter=flt, k=10)
        exact = recall(indexed_bank, query_vector=_query(seed), filter=flt, k=10, exact=True)
        assert got.path == "index"
        assert len(got) == 10 and {r.memory.pk for r in got} <= allowed
        agreed.append(len({r.memory.pk for r in got} & {r.memory.pk for r in exact}) / 10)
    assert sum(agreed) / len(agreed) >= 0.9


def test_a_rare_tag_is_scanned_exactly(indexed_bank):
    flt = MemoryFilter(tags=["fern"], tags_mode="any_strict")
    allowed = _tagged(indexed_bank, "fern", "any_strict")
    q = _query(9)
    got = recall(indexed_bank, query_vector=q, filter=flt, k=10)
    assert got.path == "exact"
    assert [r.memory.pk for r in got] == [r.memory.pk for r in recall(indexed_bank, query_vector=q, filter=flt, k=10,
                                                                     exact=True)]
    assert {r.memory.pk for r in got} <= allowed and len(got) == 10


def test_a_tag_only_this_bank_uses_is_walked_once_a_search_has_counted_it(indexed_bank):
    """The table's statistics see "moss" on 3 % of the rows (this bank's 1,200 of 43,000), so the
    first search scans; it counts 40 % of the bank, and the next ones walk."""
    flt = MemoryFilter(tags=["moss"], tags_mode="any_strict")
    allowed = _tagged(indexed_bank, "moss", "any_strict")
    first = recall(indexed_bank, query_vector=_query(1), filter=flt, k=10)
    assert first.path == "exact" and {r.memory.pk for r in first} <= allowed
    then = recall(indexed_bank, query_vector=_query(2), filter=flt, k=10)
    assert then.path == "index" and len(then) == 10 and {r.memory.pk for r in then} <= allowed
    # What a search counted is kept for its own filter: Ben's view of the tag is counted on its own.
    ben = MemoryFilter(agent="Ben", tags=["moss"], tags_mode="any_strict")
    assert recall(indexed_bank, query_vector=_query(3), filter=ben, k=10).path == "exact"


def test_a_walk_that_comes_back_short_is_answered_by_a_scan_and_remembered(indexed_bank, monkeypatch):
    """An estimate that says "common" for a condition few memories meet: the walk gives up short,
    the scan answers in full, and the next search scans at once."""
    from memory.recalling import selectivity

    flt = MemoryFilter(tags=["fern"], tags_mode="any_strict")
    monkeypatch.setattr(selectivity, "_estimated_rows", lambda where, params: 1.0)  # every estimate: "all of them"
    got = recall(indexed_bank, query_vector=_query(5), filter=flt, k=50)
    assert got.path == "exact" and {r.memory.pk for r in got} == _tagged(indexed_bank, "fern", "any_strict")
    assert selectivity.kept_share(flt, indexed_bank.pk) == 0.0
