"""Query enhancement (context, temporal, synonyms) and the search tools' response metadata, on a
small conversation with the real model."""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from memory.recalling.search import recall
from memory.recalling.confidence import calibrated, fit_logistic
from memory.recalling.enhance import QueryEnhancement, synonyms_for, time_window
from memory.recalling.tools import ToolContext, call_tool, search_memory

LINES = [  # (speaker, text): turn = position + 1
    ("Jordan", "The old boat needs a new coat of paint before summer."),
    ("Alex", "I can lend you brushes and a ladder."),
    ("Jordan", "The boat leaked again last night, water everywhere."),
    ("Alex", "The ferry to the island was late again this morning."),
    ("Jordan", "My children finally learned to swim at the lake."),
    ("Alex", "I checked the hull this morning and found a crack."),
    ("Jordan", "Maybe we should sell the boat and buy a car."),
    ("Alex", "The harbour master wants the mooring fee by Friday."),
    ("Jordan", "I baked bread for the market stall."),
    ("Alex", "Let us meet at the pier after lunch."),
]
SEARCH_TOOLS = ["query_memory", "recall_episodes", "recall_facts", "check_similar_situations"]


@pytest.fixture
def talk(bank):
    from memory.forming.capture import remember_utterance
    from memory.services import memory_create

    for turn, (speaker, text) in enumerate(LINES, start=1):
        remember_utterance(bank=bank, speaker=speaker, text=text, turn=turn, listeners=["Alex", "Jordan"])
    memory_create(bank=bank, content="The island ferry leaves from pier four.", agent="", kind="semantic",
                  category="lore", source="writer")
    return bank


def ctx(bank, **enhance):
    return ToolContext(bank=bank, agent="Alex", current_turn=len(LINES) + 1, known_characters=["Alex", "Jordan"],
                       enhance=enhance)


def turns(result):
    return [int(m["turn"]) for m in result.response["memories"]]


# ---- parsing (no database) ------------------------------------------------------------------

@pytest.mark.parametrize("query, now, expected", [
    ("what did Jordan say on turn 6?", 11, (6, 6)),
    ("what happened between turns three and five", 11, (3, 5)),
    ("what did you say just now?", 11, (9, 10)),
    ("what did Jordan say two turns ago", 11, (9, 9)),
    ("what did we talk about recently", 101, (91, 100)),
    ("what did we agree at the start?", 101, (1, 10)),
    ("what did Jordan mention earlier about the boat", 11, (1, 8)),
    ("what did Jordan say about the boat?", 11, None),
    ("what did you say just now?", None, None),  # relative time needs a now
])
def test_a_query_naming_a_time_gets_its_window(query, now, expected):
    window = time_window(query, now)
    assert (None if window is None else (window.lo, window.hi)) == expected


def test_the_boost_is_strongest_inside_the_window_and_zero_without_a_turn():
    window = time_window("on turn 6", 11)
    assert window.boost(6) == pytest.approx(0.5)
    assert window.boost(6) > window.boost(5) > window.boost(3) > 0
    assert window.boost(None) == 0.0


def test_synonyms_come_from_the_curated_map_never_repeat_the_query_and_stay_few():
    assert synonyms_for("what did Jordan say about the kids?")[:3] == ("tell", "mention", "said")
    assert "child" in synonyms_for("my kids")  # a plural finds its entry
    assert "boat" not in synonyms_for("the boat and the ship")
    assert synonyms_for("quantum chromodynamics") == ()
    assert len(synonyms_for("happy sad angry afraid worried tired excited proud kids job house trip")) == 12


def test_only_what_changes_the_query_is_reported_used():
    on = QueryEnhancement(context="Harbour. Jordan: hello", temporal=True, synonyms=True)
    assert on.apply("what did Jordan say on turn 2 about the kids?", 5).used == ("context", "temporal", "synonyms")
    assert on.apply("quantum chromodynamics", 5).used == ("context",)
    assert QueryEnhancement(temporal=True, synonyms=True).apply("quantum chromodynamics", 5).used == ()
    assert QueryEnhancement.from_options({"context": "  ", "temporal": False}).apply("boat", 5).used == ()


# ---- rankings -------------------------------------------------------------------------------

@pytest.mark.parametrize("tool", ["query_memory", "recall_episodes"])
def test_temporal_boosting_brings_up_the_named_turn(talk, tool):
    question = {"query": "what did Alex say about the boat on turn 6?"}
    plain = call_tool(tool, question, context=ctx(talk))
    boosted = call_tool(tool, question, context=ctx(talk, temporal=True))
    top = lambda r: r.results[0].memory.turn  # noqa: E731  (rank order, before recall_episodes sorts by time)
    assert top(plain) != 6  # the boat lines win on words alone
    assert top(boosted) == 6 and "crack" in boosted.results[0].memory.content
    assert boosted.response["query_expansion_used"] == ["temporal"]
    assert plain.response["query_expansion_used"] == []
    assert boosted.results[0].components["temporal"] == pytest.approx(0.5)


@pytest.mark.parametrize("exact", [True, False])
def test_temporal_boosting_holds_on_the_index_path(talk, exact):
    enhanced = QueryEnhancement(temporal=True).apply("what did Alex say about the boat on turn 6?", 11)
    for fusion in (True, False):
        results = recall(talk, enhanced.query, agent="Alex", k=3, current_turn=11, fusion=fusion, exact=exact,
                         enhance=enhanced)
        assert results[0].memory.turn == 6


def test_just_now_prefers_the_last_lines(talk):
    question = {"query": "what did Alex say about the harbour just now?"}
    plain = call_tool("query_memory", question, context=ctx(talk))
    boosted = call_tool("query_memory", question, context=ctx(talk, temporal=True))
    assert plain.results[0].memory.turn == 8  # the mooring fee: "harbour master"
    assert boosted.results[0].memory.turn == 10


def test_context_injection_resolves_a_vague_question_by_the_last_line(talk):
    question = {"query": "what went wrong with it?"}
    plain = call_tool("query_memory", question, context=ctx(talk))
    with_scene = call_tool("query_memory", question, context=ctx(talk, context="The harbour. Jordan: Is the ferry late?"))
    assert "ferry" not in plain.results[0].memory.content
    assert "ferry" in with_scene.results[0].memory.content
    assert with_scene.response["query_expansion_used"] == ["context"]


def test_synonym_expansion_finds_a_line_by_a_related_word(talk):
    question = {"query": "how are the kids?"}
    plain = search_memory(ctx(talk), question["query"])[1]
    expanded = search_memory(ctx(talk, synonyms=True), question["query"])[1]
    line = lambda results: next(r for r in results if "children" in r.memory.content)  # noqa: E731
    assert line(plain).components["lexical"] == 0.0  # "kids" is not a word of the line
    assert line(expanded).components["lexical"] > 0.0  # "children" is, through the expansion
    assert line(expanded).score > line(plain).score
    assert call_tool("query_memory", question, context=ctx(talk, synonyms=True)).response["query_expansion_used"] == ["synonyms"]


def test_synonyms_reach_a_tool_without_a_lexical_side(talk):
    plain = call_tool("recall_episodes", {"query": "the kids"}, context=ctx(talk))
    expanded = call_tool("recall_episodes", {"query": "the kids"}, context=ctx(talk, synonyms=True))
    assert expanded.response["query_expansion_used"] == ["synonyms"]
    assert [r.memory.pk for r in plain.results] != [r.memory.pk for r in expanded.results] or \
        [r.score for r in plain.results] != [r.score for r in expanded.results]


def test_enhancement_off_or_not_applying_gives_identical_results(talk):
    query = "what about the hull?"  # no time named, no word in the synonym map
    before = search_memory(ctx(talk), query, k=8)[1]
    for enhance in ({}, {"temporal": True}, {"context": ""}, {"synonyms": True, "temporal": True}):
        _flt, after = search_memory(ctx(talk, **enhance), query, k=8)
        assert [(r.memory.pk, r.score, r.components) for r in after] == \
            [(r.memory.pk, r.score, r.components) for r in before]
    plain = [(r.memory.pk, r.score) for r in recall(talk, query, agent="Alex", k=8)]
    assert plain == [(r.memory.pk, r.score) for r in recall(talk, query, agent="Alex", k=8,
                                                           enhance=QueryEnhancement().apply(query, 11))]


# ---- response metadata ----------------------------------------------------------------------

@pytest.mark.parametrize("tool", SEARCH_TOOLS)
def test_every_search_tool_answers_its_confidence_and_expansions(talk, tool):
    arg = {"query_memory": "query", "recall_episodes": "query", "recall_facts": "topic",
           "check_similar_situations": "current_context"}[tool]
    about = "where does the island ferry leave from?" if tool == "recall_facts" else "the boat leaked and needs paint"
    matching = call_tool(tool, {arg: about}, context=ctx(talk, synonyms=True))
    nonsense = call_tool(tool, {arg: "quantum chromodynamics of xylophones"}, context=ctx(talk, synonyms=True))
    assert matching.error == "" and nonsense.error == ""
    for result in (matching, nonsense):
        assert 0.0 <= result.response["retrieval_confidence"] <= 1.0
        assert isinstance(result.response["query_expansion_used"], list)
    assert matching.response["retrieval_confidence"] > nonsense.response["retrieval_confidence"] + 0.1
    assert nonsense.response["query_expansion_used"] == []
    json.dumps(matching.response)


def test_recall_interactions_carries_the_metadata(talk):
    result = call_tool("recall_interactions", {"character_name": "Jordan"}, context=ctx(talk, temporal=True))
    assert result.response["query_expansion_used"] == []  # its fixed query names no time
    assert 0 < result.response["retrieval_confidence"] <= 1


def test_fact_confidence_is_calibrated_and_orders_facts(talk):
    result = call_tool("recall_facts", {"topic": "where does the island ferry leave from?"}, context=ctx(talk))
    top = result.response["facts"][0]
    assert top["content"] == "The island ferry leaves from pier four."
    assert top["confidence"] == pytest.approx(calibrated(result.results[0].components["similarity"]), abs=1e-4)
    assert top["confidence"] > 0.5 > calibrated(0.2)  # a close fact is likely the one asked for; a far one not
    off = call_tool("recall_facts", {"topic": "quantum chromodynamics of xylophones"}, context=ctx(talk))
    assert all(f["confidence"] < top["confidence"] for f in off.response["facts"])


def test_the_logistic_fit_recovers_a_known_scale():
    import numpy as np

    rng = np.random.default_rng(7)
    sims = rng.uniform(0, 1, 4000)
    labels = rng.uniform(0, 1, 4000) < 1 / (1 + np.exp(-(8 * sims - 5)))
    slope, intercept = fit_logistic(sims, labels)
    assert slope == pytest.approx(8, abs=1.0) and intercept == pytest.approx(-5, abs=0.6)


def test_evaluate_retrieval_measures_each_enhancement_and_calibrates(db, tmp_path):
    from tests.memory.measuring.test_evaluation import SAMPLE

    path = tmp_path / "tiny.json"
    path.write_text(json.dumps([SAMPLE]))
    out = StringIO()
    call_command("evaluate_retrieval", str(path), "--k", "1", "3", "--enhance", "context", "synonyms", "--calibrate",
                 stdout=out, stderr=StringIO())
    figures = json.loads(out.getvalue().strip().splitlines()[-1])
    assert figures["enhancement"]["options"] == ["context", "synonyms"]
    applied = figures["enhancement"]["applied"]
    assert applied["context"]["questions"] == 4  # every question gets the last line
    assert 0 <= applied["context"]["with"] <= 1 and 0 <= applied["context"]["without"] <= 1
    cal = figures["calibration"]
    # Every (question, line) pair: 5 evidence lines among 4 questions × 6 lines.
    assert (cal["relevant_pairs"], cal["irrelevant_pairs"]) == (5, 19)
    assert cal["relevant_mean"] > cal["irrelevant_mean"] and cal["slope"] > 0
