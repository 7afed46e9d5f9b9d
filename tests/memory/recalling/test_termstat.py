"""BM25 statistics kept by the database: every write path leaves them equal to a live count."""

import pytest
from django.db import connection

from memory.recalling.lexical import lexical_query, lexical_query_from_stats
from memory.models import Memory, TermStat
from memory.recalling.filters import MemoryFilter
from memory.recalling.search import recall
from memory.forming.capture import remember_utterance
from memory.services import memory_create
from tests.memory.recalling.test_lexical import LINES

QUESTIONS = ["who mentioned the plumber and the pipes?", "Jordan choir Thursday", "towels", "nothing here matches zzz"]


def _same_statistics(bank, agent, kinds):
    """The table's figures for a filter equal a count over the memories themselves."""
    where, params = MemoryFilter(agent=agent, kinds=kinds).where(bank.pk)
    for question in QUESTIONS:
        live = lexical_query(question, where, params)
        kept = lexical_query_from_stats(question, bank.pk, agent, kinds)
        assert kept.candidates == live.candidates, question
        assert dict(zip(kept.terms, kept.df)) == dict(zip(live.terms, live.df)), question
        assert kept.idf == pytest.approx([dict(zip(live.terms, live.idf))[t] for t in kept.terms]), question
        assert kept.avg_length == pytest.approx(live.avg_length), question


def test_statistics_follow_inserts_edits_archiving_and_deletes(bank):
    for turn, (speaker, text) in enumerate(LINES, start=1):
        remember_utterance(bank=bank, speaker=speaker, text=text, turn=turn, listeners=["Alex", "Sam"])
    memory_create(bank=bank, content="Alex keeps the plumber's number on the fridge.", agent="Alex", kind="semantic")
    for agent, kinds in [("Alex", ["episodic"]), ("Sam", ["episodic"]), ("Alex", None), (None, None)]:
        _same_statistics(bank, agent, kinds)

    leak = Memory.objects.get(bank=bank, agent="Alex", turn=1)
    leak.content = "Jordan said: The boiler upstairs is rattling, not leaking."
    leak.save()
    Memory.objects.filter(bank=bank, agent="Alex", turn=2).update(status="archived")
    Memory.objects.filter(bank=bank, agent="Sam", turn=3).delete()
    Memory.objects.filter(bank=bank, agent="Sam", turn=4).update(agent="Alex")
    for agent, kinds in [("Alex", ["episodic"]), ("Sam", ["episodic"]), ("Alex", ["episodic", "semantic"]), (None, None)]:
        _same_statistics(bank, agent, kinds)
    assert lexical_query_from_stats("boiler", bank.pk, "Alex", ["episodic"]).df == [1]
    assert lexical_query_from_stats("towels", bank.pk, "Alex", ["episodic"]).df == [1]  # still active for Alex

    bank.delete()
    assert not TermStat.objects.filter(bank_id=bank.pk).exists()


def test_a_search_of_a_covered_filter_counts_nothing(bank):
    for turn, (speaker, text) in enumerate(LINES, start=1):
        remember_utterance(bank=bank, speaker=speaker, text=text, turn=turn, listeners=["Alex"])
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        recall(bank, "Halvorsen choir", agent="Alex", filter=MemoryFilter(kinds=["episodic"]), k=3, fusion=True)
    sql = " ".join(q["sql"] for q in captured.captured_queries)
    assert "memory_termstat" in sql and "count(*)" not in sql
    # A filter the table does not cover (a turn range) is counted live, with the same ranking rules.
    with CaptureQueriesContext(connection) as captured:
        ranged = recall(bank, "Halvorsen choir", agent="Alex", filter=MemoryFilter(kinds=["episodic"], min_turn=3),
                        k=3, fusion=True)
    assert "memory_termstat" not in " ".join(q["sql"] for q in captured.captured_queries)
    assert ranged[0].memory.turn == 5
