import numpy as np
import pytest
from django.db import transaction

from memory.models import Memory
from memory.recalling.filters import MemoryFilter
from memory.recalling.search import recall
from memory.forming.capture import remember_utterance
from memory.services import memory_create, validate_content


def test_a_paraphrase_still_finds_identity_first(seeded_bank):
    for question in ["tell me about myself", "who am I really?", "describe who I am"]:
        results = recall(seeded_bank, question, agent="Alex", filter=MemoryFilter(kinds=["character"]), k=3)
        assert results[0].memory.category == "identity", question
        assert results[0].components["similarity"] == results[0].score


def test_episodic_recall_returns_earlier_lines_with_turns(seeded_bank):
    lines = [("Jordan", "Let's try the new ramen place downtown."), ("Alex", "I can only stay until nine."),
             ("Jordan", "My sister says the ramen there is the best in town.")]
    for turn, (speaker, text) in enumerate(lines, start=1):
        stored = remember_utterance(bank=seeded_bank, speaker=speaker, text=text, turn=turn, listeners=["Alex", "Jordan"])
        assert [m.agent for m in stored] == ["Alex", "Jordan"]
    results = recall(seeded_bank, "ramen", agent="Alex", filter=MemoryFilter(kinds=["episodic"]), k=5, current_turn=4)
    # Both ramen lines come back (Alex's line between them may too: its reply key holds the ramen answer).
    assert {(1, "Jordan"), (3, "Jordan")} <= {(r.memory.turn, r.memory.speaker) for r in results[:3]}
    assert results[0].memory.content.startswith("Jordan said: ") and "ramen" in results[0].memory.content
    before = recall(seeded_bank, "ramen", agent="Alex", filter=MemoryFilter(kinds=["episodic"], max_turn=2), k=5)
    assert {r.memory.turn for r in before} == {1, 2}
    # Capturing the same line again (a retried turn) stores nothing twice.
    remember_utterance(bank=seeded_bank, speaker="Alex", text="I can only stay until nine.", turn=2, listeners=["Alex", "Jordan"])
    assert Memory.objects.in_bank(seeded_bank).filter(kind="episodic").count() == 6


def test_retrieval_writes_nothing_and_its_caller_counts_access_in_one_statement(seeded_bank):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from memory.embedding.cache import embed_one
    from memory.models import MemoryAccess
    from memory.services import accesses_record

    vector = embed_one("who am I?")
    with CaptureQueriesContext(connection) as captured:
        results = recall(seeded_bank, query_vector=vector, agent="Alex", k=2, current_turn=7)
    writes = [q["sql"] for q in captured.captured_queries
              if q["sql"].lstrip().upper().startswith(("UPDATE", "INSERT", "DELETE"))]
    assert writes == []  # a search is a pure read
    ids = [r.memory.pk for r in results]
    assert set(Memory.objects.filter(pk__in=ids).values_list("access_count", "last_accessed_turn")) == {(0, None)}
    with CaptureQueriesContext(connection) as captured:
        accesses_record(memory_ids=ids, turn=7)
    statements = [q["sql"] for q in captured.captured_queries if "SAVEPOINT" not in q["sql"]]
    assert len(statements) == 1  # the access log and the counters in one statement
    assert set(Memory.objects.filter(pk__in=ids).values_list("access_count", "last_accessed_turn")) == {(1, 7)}
    assert sorted(MemoryAccess.objects.filter(memory_id__in=ids).values_list("memory_id", "turn", "count")) == \
        sorted((i, 7, 1) for i in ids)


def test_hybrid_and_decayed_scores_carry_their_components(seeded_bank):
    remember_utterance(bank=seeded_bank, speaker="Jordan", text="Dinner at the harbour?", turn=1, listeners=["Alex"])
    remember_utterance(bank=seeded_bank, speaker="Jordan", text="Dinner at the harbour, final answer.", turn=9, listeners=["Alex"])
    hybrid = recall(seeded_bank, "dinner at the harbour", agent="Alex", filter=MemoryFilter(kinds=["episodic"]),
                    k=2, scoring="hybrid", current_turn=10)
    assert hybrid[0].memory.turn == 9  # similar text, the recent one wins
    c = hybrid[0].components
    assert hybrid[0].score == pytest.approx(0.6 * c["similarity"] + 0.2 * c["recency"] + 0.2 * c["importance"])
    assert c["recency"] == pytest.approx(np.exp(-0.1), rel=1e-6) and c["importance"] == pytest.approx(0.5)
    only_importance = recall(seeded_bank, "dinner", agent="Alex", k=1, scoring="hybrid",
                             weights={"similarity": 0, "recency": 0, "importance": 1})
    assert only_importance[0].memory.category == "identity"  # importance 9, the highest
    decayed = recall(seeded_bank, "dinner", agent="Alex", filter=MemoryFilter(kinds=["episodic"]), k=2,
                     scoring="decayed", current_turn=10)
    assert set(decayed[0].components) == {"similarity", "recency", "importance"}
    with pytest.raises(ValueError, match="unknown scoring"):
        recall(seeded_bank, "x", scoring="magic")


@pytest.mark.parametrize("scoring", ["similarity", "hybrid", "decayed"])
def test_a_memory_thousands_of_turns_old_still_scores(seeded_bank, scoring):
    # exp(-0.1 · 200,000) underflows float8, which PostgreSQL reports as an error rather than 0 (and so does
    # the decayed preset's exp(-0.01 · 200,000) at the default rate of 0.01 a turn).
    remember_utterance(bank=seeded_bank, speaker="Jordan", text="Dinner at the harbour?", turn=1, listeners=["Alex"])
    for fusion in (False, True):
        results = recall(seeded_bank, "dinner at the harbour", agent="Alex", filter=MemoryFilter(kinds=["episodic"]),
                         k=1, scoring=scoring, current_turn=200_000, fusion=fusion)
        assert results[0].memory.turn == 1
        assert results[0].components["recency"] < 1e-300


def test_filters_are_exact_on_thousands_of_memories_among_many_banks(db):
    """3 banks × 2,000 memories with random vectors: every filtered top k equals a brute-force scan."""
    from memory.services import bank_create

    rng = np.random.default_rng(7)
    banks = [bank_create(name=f"bank {i}") for i in range(3)]
    agents, kinds = ["Ana", "Ben", "Cy", "Dee"], ["episodic", "semantic", "character"]
    rows = []
    for bank in banks:
        vectors = rng.normal(size=(2000, 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        for i, v in enumerate(vectors):
            rows.append(Memory(bank=bank, agent=agents[i % 4], kind=kinds[i % 3], category="c", turn=i % 50,
                               content=f"memory {i}", embedding=v, importance=float(i % 11),
                               tags=[] if i % 11 == 0 else ["red"] if i % 5 == 0 else ["blue", "red"] if i % 7 == 0
                               else ["blue"],
                               source="earned" if i % 2 else "gifted"))
    Memory.objects.bulk_create(rows, batch_size=2000)
    target = banks[1]
    mem = list(Memory.objects.in_bank(target).values_list("id", "agent", "kind", "turn", "importance", "tags", "source", "embedding"))
    filters = [
        MemoryFilter(agent="Ben"),
        MemoryFilter(agent="Cy", kinds=["episodic"], min_turn=10, max_turn=30),
        MemoryFilter(kinds=["semantic", "character"], min_importance=7),
        MemoryFilter(tags=["red"], tags_mode="any", sources=["earned"]),
        MemoryFilter(tags=["red", "blue"], tags_mode="all"),
        MemoryFilter(tags=["red"], tags_mode="any_strict", sources=["earned"]),
        MemoryFilter(tags=["red", "blue"], tags_mode="all_strict"),
        MemoryFilter(agent="Dee", kinds=["character"], min_importance=9.5, min_turn=40),  # only a handful match
    ]

    def tagged(f, tags):  # seed 004: the plain modes keep the untagged, the strict ones do not
        if not tags:
            return not f.tags_mode.endswith("strict")
        return set(f.tags) <= set(tags) if f.tags_mode.startswith("all") else bool(set(f.tags) & set(tags))

    def matches(row, f):
        _, agent, kind, turn, imp, tags, source, _ = row
        return ((f.agent is None or agent == f.agent) and (not f.kinds or kind in f.kinds)
                and (f.min_turn is None or turn >= f.min_turn) and (f.max_turn is None or turn <= f.max_turn)
                and (f.min_importance is None or imp >= f.min_importance)
                and (not f.tags or tagged(f, tags))
                and (not f.sources or source in f.sources))

    for f in filters:
        q = rng.normal(size=384).astype(np.float32)
        q /= np.linalg.norm(q)
        matching = [r for r in mem if matches(r, f)]
        expected = [r[0] for r in sorted(matching, key=lambda r: -float(np.dot(q, r[7])))[:10]]
        got = recall(target, query_vector=q, filter=f, k=10)
        assert len(got) == min(10, len(matching))  # never short
        assert [r.memory.pk for r in got] == expected, f
        assert all(r.memory.bank_id == target.pk for r in got)
        # The HNSW path (forced) honours the filter exactly too, and is never short.
        approx = recall(target, query_vector=q, filter=f, k=10, exact=False)
        assert len(approx) == min(10, len(matching))
        assert {r.memory.pk for r in approx} <= {r[0] for r in matching}


@pytest.mark.parametrize("content, message", [("", "cannot be empty"), ("   ", "cannot be empty"),
                                              ("x" * 10_001, "10,001 characters; the limit is 10,000")])
def test_bad_content_is_refused_with_a_clear_message(bank, content, message):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError, match=message):
        memory_create(bank=bank, content=content, agent="Alex")
    with pytest.raises(ValidationError, match=message):
        validate_content(content)
    assert not Memory.objects.in_bank(bank).exists()
    assert memory_create(bank=bank, content="x" * 10_000, agent="Alex").pk  # the limit itself is fine


def test_the_database_refuses_empty_content_too(bank):
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        Memory.objects.create(bank=bank, content="", embedding=np.ones(384) / np.sqrt(384))


@pytest.mark.parametrize("fusion", [False, True])
def test_recalled_memories_are_what_the_orm_would_load(seeded_bank, fusion):
    remember_utterance(bank=seeded_bank, speaker="Jordan", text="Dinner at the harbour?", turn=1, listeners=["Alex"],
                       metadata={"dia_id": "D1:1", "session": 1})
    (result,) = recall(seeded_bank, "dinner at the harbour", agent="Alex", filter=MemoryFilter(kinds=["episodic"]),
                       k=1, fusion=fusion)
    loaded = Memory.objects.get(pk=result.memory.pk)
    for field in ["metadata", "participants", "tags", "created_at", "turn", "speaker", "content", "importance"]:
        assert getattr(result.memory, field) == getattr(loaded, field), field
    assert result.memory.metadata == {"dia_id": "D1:1", "session": 1}



@pytest.mark.django_db(transaction=True)  # CREATE INDEX CONCURRENTLY needs autocommit
def test_a_big_agent_gets_its_own_index_and_searches_through_it(transactional_db, monkeypatch):
    """In an indexed bank, an agent with many memories (but not most of the bank) gets a partial
    index of its own; its searches go through it, find what an exact scan finds, and it goes with the bank."""
    from django.db import connection

    from memory.recalling import indexing
    from memory.embedding.cache import vector_cursor
    from memory.recalling.sql import hnsw_settings
    from memory.services import bank_create

    monkeypatch.setattr(indexing, "AGENT_INDEX_MIN", 200)
    bank = bank_create(name="crowded bank")
    rng = np.random.default_rng(11)
    vectors = rng.normal(size=(1200, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    agents = ["Ana"] * 4 + ["Ben"] * 4 + ["Cy", "Dee"]  # Ana and Ben 480 each (40 %): big; Cy and Dee 120: not
    Memory.objects.bulk_create([
        Memory(bank=bank, agent=agents[i % 10], kind="episodic", category="c", turn=i, content=f"memory {i}",
               embedding=v) for i, v in enumerate(vectors)])
    assert sorted(indexing.agents_wanting_index(bank.pk)) == ["Ana", "Ben"]
    indexing.build_bank_index(bank.pk)
    assert indexing.agents_wanting_index(bank.pk) == []
    # An indexed bank's writes ask a worker to look at its agents again, now and then (not each turn).
    from memory import tasks

    asked = []
    monkeypatch.setattr(tasks.build_bank_index_task, "delay", asked.append)
    assert indexing.has_bank_index(bank.pk)
    indexing.bank_index_wanted(bank.pk, added=1)
    assert asked == []
    indexing._agents_checked[bank.pk] -= indexing.AGENT_RECHECK_S
    indexing.bank_index_wanted(bank.pk, added=1)
    indexing.bank_index_wanted(bank.pk, added=1)
    assert asked == [bank.pk]
    ana_index = indexing.agent_index_name(bank.pk, "Ana")

    q = rng.normal(size=384).astype(np.float32)
    q /= np.linalg.norm(q)
    where, params = MemoryFilter(agent="Ana").where(bank.pk)
    with transaction.atomic(), vector_cursor() as cur:
        hnsw_settings(cur, 40, prefer_index=True)
        cur.execute(f"EXPLAIN SELECT m.id FROM memory_memory m WHERE {where} "
                    "ORDER BY m.embedding <=> %s::vector LIMIT 40", [*params, q])
        plan = "\n".join(row[0] for row in cur.fetchall())
    assert ana_index in plan
    got = recall(bank, query_vector=q, agent="Ana", k=10, exact=False)
    exact = recall(bank, query_vector=q, agent="Ana", k=10, exact=True)
    assert len({r.memory.pk for r in got} & {r.memory.pk for r in exact}) >= 9
    assert {r.memory.agent for r in got} == {"Ana"}

    indexing.drop_bank_index(bank.pk)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_class WHERE relname LIKE %s", [indexing.agent_index_prefix(bank.pk)])
        assert cursor.fetchone()[0] == 0
