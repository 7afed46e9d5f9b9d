"""The context window (Letta-ADE style): each model call's sections, their token counts against the
provider's reported usage, the inspector's bar; the prompt options that add sections; score bars."""

from __future__ import annotations

import html
import json

import pytest
from django.urls import reverse

from chronicle.simulation.prompting.context import context_window
from chronicle.simulation.run.models import Simulation
from chronicle.simulation.measuring.score_parts import score_breakdown
from devtools.fake_llm import FakeLLM, ok, tool_call
from tests.prompting import sent_text
from tests import factories
from tests.factories import run


@pytest.fixture
def server():
    fake = FakeLLM(count_usage=True).start()
    yield fake
    fake.stop()


def start(user, scenario, **settings) -> Simulation:
    return factories.start(user, scenario, **{"max_turns": 3, **settings})


def openai(server) -> dict:
    return {"provider": "openai", "base_url": server.base_url, "model": "fake-model", "timeout_s": 5}


@pytest.mark.django_db
@pytest.mark.parametrize("mode", ["tools", "both"])
def test_sections_add_up_to_the_providers_prompt_tokens(user, dinner, server, mode):
    server.script(ok(tool_calls=[tool_call("query_self"), tool_call("query_scene", {}, "c2")]),
                  ok(tool_calls=[tool_call("query_character", {"name": "Jordan"}, "c3")]),
                  ok("Hi, I'm Alex. Shall we decide on dinner?", completion_tokens=12))
    simulation = start(user, dinner, retrieval_mode=mode, consult_memories=True, **openai(server))
    assert run(simulation) == "done"
    turn = simulation.turns.get(index=0)
    calls = turn.context["calls"]
    assert [c["usage"]["prompt_tokens"] for c in calls] == server.counted  # the provider's real usage per call
    for call, reported in zip(calls, server.counted):
        # Our tokenizer's own count, before scaling, is within 10% of what the server reported...
        assert abs(call["counted"] - reported) <= 0.10 * reported, (call["counted"], reported)
        # ...and the sections shown are scaled to add up to it exactly.
        assert call["scaled"] and sum(s["tokens"] for s in call["sections"]) == reported
    assert turn.usage["prompt_tokens"] == sum(server.counted) and not turn.usage["estimated"]
    # Each call's sections are what it sent: the last one re-sends the tool calls and results of the first two.
    kinds = [s["kind"] for s in calls[-1]["sections"]]
    assert kinds.count("tool_result") == 3 and kinds.count("tool_call") == 2 and "tools" in kinds
    assert "transcript" in kinds and "prompt_options" in kinds
    assert ("prepopulated" in kinds) == (mode == "both")
    # Compact: texts already in prompt_messages are referenced, not copied.
    assert len(json.dumps(turn.context)) < len(json.dumps(turn.prompt_messages)) + len(turn.context["tools"]) + 8000
    window = context_window(turn)
    result = next(s for s in window.calls[-1].sections if s.name == "Tool result: query_scene")
    assert result.first_call == 2  # sent again: shown under the call that first sent it
    first = next(s for c in window.calls for s in c.sections if s.name == "Tool result: query_scene" and s.text)
    notes = "\n".join(s.text for c in window.calls for s in c.sections if s.kind == "prepopulated")
    # The place's memory comes once: from the tool, or (both) in the notes, which the tool then does not repeat.
    assert ("Location: Alex's apartment" in first.text) == (mode == "tools")
    assert ("Location: Alex's apartment" in notes) == (mode == "both")


@pytest.mark.django_db
def test_inspector_shows_the_bar_sections_and_usage(user, other_user, dinner, server, client_for):
    server.script(ok(tool_calls=[tool_call("query_self")]), ok("I'm Alex, and I am hungry.", completion_tokens=9))
    simulation = start(user, dinner, retrieval_mode="tools", **openai(server))
    assert run(simulation) == "done"
    page = html.unescape(client_for(user).get(reverse("turn_inspect", args=[simulation.pk, 0])).content.decode())
    assert 'id="context-window"' in page and page.count('class="cw-bar"') == 2  # one bar per call
    assert "Tool schemas (6 tools)" in page and "Transcript window" in page  # the default set
    assert "Tool result: query_self" in page and "Tool call: query_self" in page
    assert "scaled to the provider's count" in page
    assert f"{server.counted[1]} prompt / 9 completion" in page  # the provider's real usage of call 2
    # Each section's exact text is there to expand: the system prompt's tool instructions, the schemas.
    assert "Your memory tools" in page and "then speak your line" in page
    assert '"name": "recall_facts"' in page
    # The run page's side panel (htmx) shows it too; someone else's run shows nothing.
    panel = client_for(user).get(reverse("turn_inspect", args=[simulation.pk, 0]), HTTP_HX_REQUEST="true")
    assert 'class="cw-bar"' in panel.content.decode()
    assert client_for(other_user).get(reverse("turn_inspect", args=[simulation.pk, 0])).status_code == 404


@pytest.mark.django_db
def test_scripted_run_labels_its_counts_as_not_reported(user, dinner, client_for):
    simulation = start(user, dinner, retrieval_mode="prepopulate")
    assert run(simulation) == "done"
    turn = simulation.turns.get(index=0)
    (call,) = turn.context["calls"]
    assert call["estimated"] and not call["scaled"] and call["counted"] == turn.prompt_tokens
    page = client_for(user).get(reverse("turn_inspect", args=[simulation.pk, 0])).content.decode()
    assert "the provider reported no usage" in page and "Pre-populated: Who you are" in page


def system_sent(server) -> str:
    return server.requests[0]["messages"][0]["content"]


@pytest.mark.django_db
@pytest.mark.parametrize("mode", ["tools", "prepopulate"])
def test_memory_consultation_and_confidence_gating_change_the_prompt(user, dinner, mode):
    sent = {}
    for options in ({}, {"consult_memories": True}, {"confidence_gating": True}):
        server = FakeLLM(count_usage=True).start()
        try:
            server.script(ok("Right."))
            simulation = start(user, dinner, retrieval_mode=mode, **openai(server), **options)
            assert run(simulation) == "done"
            sent[tuple(options)] = system_sent(server)
            names = [s["name"] for s in simulation.turns.get(index=0).context["calls"][0]["sections"]]
        finally:
            server.stop()
        if options:
            assert {"consult_memories": "Memory consultation", "confidence_gating": "Confidence gating"}[
                next(iter(options))] in names
    plain, consult, gating = sent[()], sent[("consult_memories",)], sent[("confidence_gating",)]
    assert "no relevant memories" not in plain and "retrieval_confidence" not in plain
    assert "Before deciding what to say, you MUST" in consult and '"(no relevant memories)"' in consult
    assert "retrieval_confidence" in gating and "0.5" in gating and "MUST" not in gating


@pytest.mark.django_db
def test_no_relevant_memories_is_a_note_not_part_of_the_line(user, dinner, server):
    server.script(ok("(no relevant memories)\nWell, I'm starving. Pizza?"))
    simulation = start(user, dinner, retrieval_mode="prepopulate", consult_memories=True, **openai(server))
    assert run(simulation) == "done"
    turn = simulation.turns.get(index=0)
    assert turn.utterance == "Well, I'm starving. Pizza?" and "no relevant memories" in turn.note


def test_score_bars_add_up_under_the_preset_and_the_speaker_boost_passes_one(settings):
    settings.RETRIEVAL_LEXICAL_WEIGHT, settings.RETRIEVAL_SPEAKER_BOOST = 0.5, 0.2
    plain = {"score": 0.6 * 0.8 + 0.2 * 0.5 + 0.2 * 0.3,
             "components": {"similarity": 0.8, "recency": 0.5, "importance": 0.3}}
    bars = score_breakdown(plain, scoring="hybrid", weights=None)
    assert [p.key for p in bars.parts] == ["similarity", "recency", "importance"]
    assert bars.adds_up and abs(bars.total - plain["score"]) < 1e-9 and not bars.boosted
    # similarity preset: recency and importance weigh 0 and are not drawn.
    assert [p.key for p in score_breakdown(plain | {"score": 0.8}, scoring="similarity", weights=None).parts] == ["similarity"]
    # query_memory's fusion: best match (rescaled similarity 1), keyword hit, speaker named: 1.2.
    fused = {"score": 0.5 * 1.0 + 0.5 * 1.0 + 0.2,
             "components": {"similarity": 0.71, "recency": 0.9, "importance": 0.5, "lexical": 1.0, "speaker": 1.0}}
    bars = score_breakdown(fused, scoring="similarity", weights=None)
    parts = {p.key: p.contribution for p in bars.parts}
    assert parts == pytest.approx({"similarity": 0.5, "speaker": 0.2, "lexical": 0.5})
    assert bars.boosted and bars.total == pytest.approx(1.2)
    # Weights changed since: said, not hidden.
    assert not score_breakdown(plain, scoring="hybrid", weights={"similarity": 1.0}).adds_up


@pytest.mark.django_db
@pytest.mark.parametrize("mode", ["tools", "prepopulate"])
def test_run_page_says_why_the_token_figure_is_what_it_is(user, dinner, client_for, mode):
    simulation = start(user, dinner, retrieval_mode=mode)
    for index in range(3):
        assert run(simulation, index) == "done"
    page = html.unescape(client_for(user).get(simulation.get_absolute_url()).content.decode())
    assert "Why this figure" in page
    turns = list(simulation.turns.all())
    calls = sum(t.usage["calls"] for t in turns)
    if mode == "tools":
        schemas = turns[0].context["tools_tokens"]
        assert f"{calls} model calls for 3 turns" in page
        assert f"re-sends the 6 tool schemas ({schemas:,} tokens)" in page
        # The schemas' share is what the calls really sent: the sum over every call's schema section.
        sent = sum(s["tokens"] for t in turns for c in t.context["calls"] for s in c["sections"] if s["kind"] == "tools")
        assert f"{sent:,} tokens, {round(100 * sent / sum(t.prompt_tokens for t in turns))}% of what was sent" in page
    else:
        assert calls == 3 and "model calls for" not in page and "Pre-populated memories:" in page


@pytest.mark.django_db
def test_confidence_gating_marks_weak_prepopulated_memories(user, dinner):
    from memory.recalling.confidence import calibrated

    simulation = start(user, dinner, retrieval_mode="prepopulate", confidence_gating=True)
    for index in range(2):
        assert run(simulation, index) == "done"
    turn = simulation.turns.get(index=1)
    system = sent_text(turn)
    weak, strong = [], []
    for retrieval in turn.retrievals.filter(tool="prepopulate"):
        for r in retrieval.results:
            (weak if calibrated(r["components"]["similarity"]) < 0.5 else strong).append(r["content"])
    assert weak and strong  # the dinner bank has both: the sheet matches "who am I?", not everything matches the last line
    for content in strong:
        assert f"{content} (weak match)" not in system
    assert any(f"{content} (weak match)" in system for content in weak)
