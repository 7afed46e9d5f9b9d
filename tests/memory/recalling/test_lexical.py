"""query_memory's fusion: BM25 over full-text search, vector similarity, speakers named in the question."""

import numpy as np
import pytest
from django.db import transaction
from django.test import override_settings

from memory.models import Memory, MemoryKey
from memory.recalling.filters import MemoryFilter
from memory.recalling.search import recall
from memory.recalling.scoring import FUSION_DEPTH
from memory.forming.capture import remember_utterance

EPISODIC = MemoryFilter(kinds=["episodic"])

LINES = [
    ("Jordan", "The water heater in the basement is leaking again."),
    ("Sam", "We should call someone about the pipes before winter."),
    ("Jordan", "My plumber retired last year, sadly."),
    ("Sam", "The kitchen tap drips all night and keeps me awake."),
    ("Jordan", "Tell Halvorsen the choir meets on Thursday."),
    ("Sam", "I bought new towels for the bathroom."),
]


@pytest.fixture
def dialogue(bank):
    for turn, (speaker, text) in enumerate(LINES, start=1):
        remember_utterance(bank=bank, speaker=speaker, text=text, turn=turn, listeners=["Alex"])
    return bank


def _turns(results):
    return [r.memory.turn for r in results]


def test_lexical_search_finds_a_rare_word_that_vectors_miss(dialogue):
    from memory.embedding.cache import embed_one

    query = "Halvorsen plumbing"
    # The vector side as if the model made nothing of the surname (MiniLM does match it here, helped
    # by the reply keys): the query's vector says "plumbing" alone, its words still name Halvorsen.
    vector = embed_one("plumbing", store=False, query=True)
    plain = recall(dialogue, query, query_vector=vector, agent="Alex", filter=EPISODIC, k=6)
    assert _turns(plain)[0] != 5
    fused = recall(dialogue, query, query_vector=vector, agent="Alex", filter=EPISODIC, k=6, fusion=True,
                   speaker_boost=0, feedback=0)
    assert _turns(fused)[0] == 5
    assert fused[0].components["lexical"] == 1.0
    assert {"similarity", "recency", "importance", "lexical", "speaker"} <= set(fused[0].components)
    # The index path (big banks) brings lexical matches as candidates too.
    indexed = recall(dialogue, query, query_vector=vector, agent="Alex", filter=EPISODIC, k=2, fusion=True,
                     speaker_boost=0, exact=False, feedback=0)
    assert _turns(indexed)[0] == 5


def test_the_lexical_side_ignores_stop_words_and_stems(dialogue):
    fused = recall(dialogue, "what about the choirs?", agent="Alex", filter=EPISODIC, k=3, fusion=True, speaker_boost=0)
    assert _turns(fused)[0] == 5 and fused[0].components["lexical"] == 1.0
    nothing = recall(dialogue, "what about the?", agent="Alex", filter=EPISODIC, k=6, fusion=True, speaker_boost=0)
    assert all(r.components["lexical"] == 0 for r in nothing)  # only stop words: vectors alone decide


def _unit(*values):
    v = np.zeros(384, dtype=np.float32)
    v[: len(values)] = values
    return v / np.linalg.norm(v)


def test_fusion_ranks_a_memory_matching_both_above_one_matching_only_one(bank):
    # Controlled vectors (the query is axis 0): the ranking arithmetic, not the model, is under test.
    rows = [
        ("both", "The lighthouse keeper waved at us.", _unit(0.8, 0.6)),
        ("vector only", "A tall tower by the sea flashed its beam.", _unit(0.9, 0.436)),
        ("words only", "The lighthouse keeper sold his boat.", _unit(0.1, 0.995)),
        ("neither", "Bread rises slowly in the cold.", _unit(0.0, 1.0)),
    ]
    Memory.objects.bulk_create([
        Memory(bank=bank, agent="Alex", kind="episodic", turn=i, content=content, embedding=vector, category=label)
        for i, (label, content, vector) in enumerate(rows, start=1)
    ])
    query, vector = "lighthouse keeper", _unit(1.0)
    fused = recall(bank, query, query_vector=vector, agent="Alex", k=4, fusion=True)
    assert [r.memory.category for r in fused][:3] == ["both", "vector only", "words only"] or \
        [r.memory.category for r in fused][:3] == ["both", "words only", "vector only"]
    assert fused[0].components["lexical"] == 1.0 and fused[0].components["similarity"] > 0.79
    plain = recall(bank, query, query_vector=vector, agent="Alex", k=4)
    assert plain[0].memory.category == "vector only"


def test_a_speaker_named_in_the_question_is_preferred(dialogue):
    question = "What did Sam's worry about the house?"
    boosted = recall(dialogue, question, agent="Alex", filter=EPISODIC, k=6, fusion=True, lexical_weight=0)
    assert {r.memory.speaker for r in boosted[:3]} == {"Sam"}
    assert boosted[0].components["speaker"] == 1.0
    assert all(r.components["speaker"] == 0 for r in boosted if r.memory.speaker == "Jordan")


def test_every_stage_can_be_switched_off(dialogue):
    query = "What did Sam say about Halvorsen and the plumbing?"
    plain = recall(dialogue, query, agent="Alex", filter=EPISODIC, k=6)
    off = recall(dialogue, query, agent="Alex", filter=EPISODIC, k=6, fusion=True, lexical_weight=0, speaker_boost=0,
                 feedback=0)
    assert _turns(off) == _turns(plain)
    assert all(r.components["lexical"] == 0 and r.components["speaker"] == 0 for r in off)
    with override_settings(RETRIEVAL_LEXICAL_WEIGHT=0.0, RETRIEVAL_SPEAKER_BOOST=0.0, RETRIEVAL_FEEDBACK_WEIGHT=0.0):
        assert _turns(recall(dialogue, query, agent="Alex", filter=EPISODIC, k=6, fusion=True)) == _turns(plain)
    with override_settings(RETRIEVAL_FUSION=False):
        unfused = recall(dialogue, query, agent="Alex", filter=EPISODIC, k=6, fusion=True)
        assert _turns(unfused) == _turns(plain) and "lexical" not in unfused[0].components
    # The reply keys are made at capture time (each pair of lines leads to both, each window of three
    # to all three), only while the setting is on.
    assert MemoryKey.objects.filter(memory__bank=dialogue).count() == 2 * (len(LINES) - 1) + 3 * (len(LINES) - 2)
    with override_settings(RETRIEVAL_CONTEXT_KEYS=False):
        (memory,) = remember_utterance(bank=dialogue, speaker="Sam", text="Done.", turn=7, listeners=["Alex"])
    assert not memory.keys.exists()


def test_a_reply_is_found_through_the_line_it_answers(dialogue):
    (memory,) = remember_utterance(bank=dialogue, speaker="Jordan", text="Yes, twice!", turn=7, listeners=["Alex"])
    pair = "Sam said: I bought new towels for the bathroom. Jordan said: Yes, twice!"
    window = "Jordan said: Tell Halvorsen the choir meets on Thursday. " + pair
    assert set(memory.keys.values_list("query", flat=True)) == {pair, window}
    found = recall(dialogue, "did Jordan buy towels?", agent="Alex", filter=EPISODIC, k=3)
    assert memory.pk in [r.memory.pk for r in found]
    # The same keys lead to the lines they hold: "who bought towels twice?" finds Sam's line too.
    towels = Memory.objects.get(bank=dialogue, content="Sam said: I bought new towels for the bathroom.")
    before = "Jordan said: Tell Halvorsen the choir meets on Thursday. Sam said: I bought new towels for the bathroom."
    assert set(towels.keys.values_list("query", flat=True)) == {
        before, "Sam said: The kitchen tap drips all night and keeps me awake. " + before, pair, window}
    choir = Memory.objects.get(bank=dialogue, content__contains="Halvorsen")
    assert choir.keys.filter(query=window).exists()  # two lines back: in the window only


def test_canonical_tools_keep_plain_similarity(seeded_bank):
    from memory.recalling.tools import ToolContext, call_tool

    result = call_tool("query_self", {}, context=ToolContext(bank=seeded_bank, agent="Alex"))
    first = result.results[0]
    assert set(first.components) == {"similarity", "recency", "importance"} and first.score == first.components["similarity"]


@pytest.mark.django_db(transaction=True)  # CREATE INDEX CONCURRENTLY needs autocommit
def test_the_index_path_ranks_as_the_exact_scan_does(transactional_db, monkeypatch):
    """Above RETRIEVAL_FUSION_EXACT_LIMIT the top lists come from the bank's own HNSW indexes and
    GIN, not a scan: the fused ranking is defined on those lists, so both paths agree."""
    import random

    from django.db import connection

    from memory.measuring.bench import sentences
    from memory.embedding.cache import embed_texts
    from memory.recalling.indexing import build_bank_index, has_bank_index, index_names
    from memory.recalling.filters import episode_context_text
    from memory.services import bank_create

    bank = bank_create(name="indexed bank")
    # A name to quote: the index path writes the filter's values into its statement (literal_where).
    listener = "Alex O'Hara, 100%"

    rng = random.Random(3)
    lines = [(name, text) for name in ("Ada", "Bram", "Cleo") for text in sentences(rng, name, 60)]
    rng.shuffle(lines)
    contents = [f"{s} said: {t}" for s, t in lines]
    embed_texts(contents + [episode_context_text(p, c) for p, c in zip(contents, contents[1:])])  # one model pass
    from memory import tasks

    asked = []  # what a worker would be sent (built here instead, so no shared worker races this test)
    monkeypatch.setattr(tasks.build_bank_index_task, "delay", asked.append)
    with override_settings(RETRIEVAL_FUSION_EXACT_LIMIT=100):
        for turn, (speaker, text) in enumerate(lines, start=1):
            remember_utterance(bank=bank, speaker=speaker, text=text, turn=turn, listeners=[listener])
    # The capture that grew the bank past the limit asked a worker for its indexes, once.
    assert asked == [bank.pk]
    questions = ["Who ran away with a travelling circus?", "What does Bram think about the sea?",
                 "Where did Cleo grow up?", "a chess tournament", "lighthouse island in winter"]
    with override_settings(RETRIEVAL_FUSION_EXACT_LIMIT=0):
        # No index yet: the search scans exactly, and asks nothing itself (a pure read).
        assert not has_bank_index(bank.pk)
        exact_now = recall(bank, questions[0], agent=listener, filter=EPISODIC, k=5, fusion=True)
    assert asked == [bank.pk] and len(exact_now) == 5
    build_bank_index(bank.pk)
    assert has_bank_index(bank.pk)
    for question in questions:
        exact = recall(bank, question, agent=listener, filter=EPISODIC, k=5, fusion=True, exact=True)
        with override_settings(RETRIEVAL_FUSION_EXACT_LIMIT=0):
            indexed = recall(bank, question, agent=listener, filter=EPISODIC, k=5, fusion=True)
        assert [r.memory.pk for r in indexed] == [r.memory.pk for r in exact], question
        assert [r.score for r in indexed] == pytest.approx([r.score for r in exact]), question
    # The index path's planner settings (no sort where an index orders, iterative scans) were local
    # to the search, which ran outside any transaction block: nothing carries over to the next query.
    assert not connection.in_atomic_block
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('enable_sort'), current_setting('hnsw.iterative_scan'), "
                       "current_setting('plan_cache_mode')")
        assert cursor.fetchone() == ("on", "off", "auto")
        # The ranking was prepared on this connection and planned once (its text holds the bank, the
        # filter and the limits; only the query's values are bound), and it still ranked as the scan.
        cursor.execute("SELECT count(*), coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0) "
                       "FROM pg_prepared_statements WHERE statement LIKE %s", [f"%m.bank_id = {bank.pk} AND%"])
        prepared, generic, custom = cursor.fetchone()
        assert prepared >= 1 and generic >= len(questions) and custom == 0
    # Inside a caller's transaction the settings end with the search too, not with the transaction.
    with transaction.atomic(), override_settings(RETRIEVAL_FUSION_EXACT_LIMIT=0):
        assert recall(bank, questions[0], agent=listener, filter=EPISODIC, k=5, fusion=True).path == "index"
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('enable_sort'), current_setting('plan_cache_mode')")
            assert cursor.fetchone() == ("on", "auto")
    # Both partial indexes exist (memories and keys), until dropped.
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_class WHERE relname = ANY(%s)", [list(index_names(bank.pk))])
        assert cursor.fetchone()[0] == 2
    from memory.recalling.indexing import drop_bank_index

    drop_bank_index(bank.pk)
    assert not has_bank_index(bank.pk)


def test_a_word_every_line_holds_does_not_spread_the_lexical_scores(bank):
    # Min-max would give the shortest line 1.0 and the others 0.0 for what is only a length difference.
    for turn, text in enumerate(["Ask Halvorsen.", "Halvorsen said the choir meets on Thursday evening.",
                                 "Halvorsen never answers the phone before noon, as everyone knows."], start=1):
        remember_utterance(bank=bank, speaker="Jordan", text=text, turn=turn, listeners=["Alex"])
    results = recall(bank, "Halvorsen", agent="Alex", filter=EPISODIC, k=3, fusion=True, speaker_boost=0)
    lexical = sorted(r.components["lexical"] for r in results)
    assert lexical[-1] == pytest.approx(1.0) and lexical[0] > 0.6


def test_deferred_keys_also_lead_to_the_line_before(dialogue):
    """A simulation's turn embeds its keys after the commit (memory_keys_add): the same two keys."""
    from memory.forming.capture import memory_keys_add

    (question,) = remember_utterance(bank=dialogue, speaker="Sam", text="Who fixed the boiler?", turn=7,
                                     listeners=["Alex"], defer_keys=True)
    (answer,) = remember_utterance(bank=dialogue, speaker="Jordan", text="Halvorsen did, on Monday.", turn=8,
                                   listeners=["Alex"], defer_keys=True)
    assert not answer.keys.exists()
    assert memory_keys_add(memory_ids=[answer.pk]) == 1
    pair = "Sam said: Who fixed the boiler? Jordan said: Halvorsen did, on Monday."
    window = "Sam said: I bought new towels for the bathroom. " + pair
    assert set(answer.keys.values_list("query", flat=True)) == {pair, window}
    assert question.keys.filter(query=pair).exists()


def test_feedback_finds_a_line_that_resembles_the_first_answers(bank):
    """Pseudo-relevance feedback (controlled vectors, the query is axis 0): two answers also lean
    toward axis 1; a third line mostly about axis 1 ranks below FUSION_DEPTH − 10 lukewarm distractors
    on the query alone (but within the pool, the top FUSION_DEPTH), and among the first four once the
    query has moved toward its best three."""
    def unit(**axes):
        v = np.zeros(384, dtype=np.float32)
        for axis, value in axes.items():
            v[int(axis[1:])] = value
        return v / np.linalg.norm(v)

    rows = [("answer", unit(a0=0.9, a1=0.436)), ("answer", unit(a0=0.88, a1=0.475)),
            ("related", unit(a0=0.3, a1=0.954))]
    # Ten fewer distractors than a top list holds: the related line is inside the pool, some far ones too.
    rows += [("distractor", unit(a0=0.35, **{f"a{i + 2}": 0.937})) for i in range(FUSION_DEPTH - 10)]
    rows += [("far", unit(a0=0.2, **{f"a{i + 40}": 0.98})) for i in range(30)]
    Memory.objects.bulk_create([
        Memory(bank=bank, agent="Alex", kind="episodic", turn=i, content=f"line {i}", embedding=vector, category=label)
        for i, (label, vector) in enumerate(rows, start=1)
    ])
    query, vector = "qqq", unit(a0=1.0)  # no word in common: similarity alone decides
    plain = recall(bank, query, query_vector=vector, agent="Alex", k=4, fusion=True, feedback=0)
    assert "related" not in [r.memory.category for r in plain]
    fed = recall(bank, query, query_vector=vector, agent="Alex", k=4, fusion=True)  # the default: β 0.5
    assert [r.memory.category for r in fed][:2] == ["answer", "answer"]
    assert "related" in [r.memory.category for r in fed]
    # The index path ranks the same pool again: the same answer.
    indexed = recall(bank, query, query_vector=vector, agent="Alex", k=4, fusion=True, exact=False)
    assert [r.memory.pk for r in indexed] == [r.memory.pk for r in fed]
    # A young bank (fewer candidates than one top list) is ranked once: nothing to learn from its best three.
    Memory.objects.filter(bank=bank, turn__gt=FUSION_DEPTH - 10).delete()
    small = recall(bank, query, query_vector=vector, agent="Alex", k=4, fusion=True)
    assert [r.memory.pk for r in small] == [r.memory.pk for r in recall(bank, query, query_vector=vector, agent="Alex",
                                                                         k=4, fusion=True, feedback=0)]
