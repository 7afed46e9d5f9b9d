"""Form a memory warns when no agent of the run could reach the chosen kind; the tables behind the
warning are checked against the tools and the pre-population themselves."""

from __future__ import annotations

import pytest
from django.urls import reverse

from chronicle.simulation.turn import engine, inputs as turn_inputs
from chronicle.simulation.run.models import Simulation
from chronicle.writing import selectors, services
from chronicle.writing.selectors import PREPOPULATE_REACH, TOOL_REACH
from memory.models import Memory
from memory.recalling.tools import DEFAULT_SIMULATION_TOOLS, READ_TOOLS, REGISTRY, WRITE_TOOLS, ToolContext, call_tool

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


def whose(flt: dict) -> str:
    if "agent" not in flt:
        return "any"
    if flt["agent"] == "":
        return "everyone"
    return "shared" if flt.get("shared") else "own"


def arguments(name: str) -> dict:
    """The required arguments of a tool, filled in plausibly (a character of the dinner cast)."""
    out = {}
    for pname, param in REGISTRY[name].params.items():
        if param.required:
            out[pname] = "Jordan" if "name" in pname else "dinner tonight"
    return out


def test_the_tool_table_is_what_the_tools_filter(finished):
    context = ToolContext(bank=finished.bank, agent="Alex", current_turn=4, known_characters=finished.cast_names)
    assert not set(TOOL_REACH) & set(WRITE_TOOLS)
    for name in READ_TOOLS:
        result = call_tool(name, arguments(name), context=context)
        assert not result.error, (name, result.error)
        flt = result.filter
        narrower = any(flt.get(key) for key in ("categories", "about", "participant", "tags", "sources"))
        if name in TOOL_REACH:
            kinds, reach = TOOL_REACH[name]
            assert (set(flt["kinds"]), whose(flt), narrower) == (set(kinds), reach, False), name
        else:  # a tool left out of the table never returns a memory the writer formed
            assert narrower, f"{name} can return writer-formed memories: add it to TOOL_REACH"


def test_the_prepopulate_table_is_what_the_engine_injects(finished, monkeypatch):
    from chronicle.simulation.prompting import prompts

    monkeypatch.setattr(prompts, "TRANSCRIPT_LINES", 2)  # so that turn 4 has events before its transcript
    monkeypatch.setattr(prompts, "WINDOW_STEP", 1)
    turn = finished.turns.get(index=3)
    outcome = engine.TurnOutcome()
    engine.prepopulate(turn_inputs.turn_input(turn=turn), outcome)
    sections = {row["arguments"]["section"]: row["filter"] for row in outcome.retrievals}
    for title, flt in sections.items():
        narrower = any(flt.get(key) for key in ("categories", "about", "participant", "tags", "sources"))
        if title in PREPOPULATE_REACH:
            kinds, reach = PREPOPULATE_REACH[title]
            assert (set(flt["kinds"]), whose(flt), narrower) == (set(kinds), reach, False), title
        else:
            assert narrower, f"the section {title!r} can return writer-formed memories: add it to PREPOPULATE_REACH"
    assert set(PREPOPULATE_REACH) <= set(sections)


def test_with_the_default_tools_every_kind_is_reachable_and_really_reached(user, finished):
    assert finished.tool_set == list(DEFAULT_SIMULATION_TOOLS)
    reach = selectors.reach(finished)
    assert reach.unreachable() == []
    # The tool the table names for each kind and owner returns the memory the writer formed.
    context = ToolContext(bank=finished.bank, agent="Alex", current_turn=6, known_characters=finished.cast_names)
    for kind in Memory.Kind.values:
        for owner in ("own", "everyone"):
            word = f"{kind}{owner}marker"
            services.writer_memory_form(simulation=finished, actor=user, agent="Alex" if owner == "own" else "",
                                        kind=kind, content=f"Remember the {word}.")
            tool = next(w for w in reach.ways[(kind, owner)] if w in REGISTRY)
            args = {k: f"the {word}" for k in arguments(tool)}
            answer = str(call_tool(tool, args, context=context).response)
            assert word in answer, (kind, owner, tool)


def test_unticked_tools_show_the_warning_as_the_writer_picks_a_kind(client_for, user, finished):
    client = client_for(user)
    url = reverse("chronicle_memory_reach", args=[finished.pk])
    assert "Unreachable" not in client.get(url, {"kind": "semantic", "agent": "Alex"}, **HX).content.decode()
    page = client.get(reverse("turn_inspect", args=[finished.pk, 3])).content.decode()
    assert 'id="reach-warning"' in page and "Unreachable" not in page

    Simulation.objects.filter(pk=finished.pk).update(tool_set=["query_self", "query_scene"])
    html = client.get(url, {"kind": "semantic", "agent": "Alex"}, **HX).content.decode()
    assert "<html" not in html and 'id="reach-warning"' in html
    assert "no agent would ever get Alex&#x27;s “Semantic” memory" in html and "offer query_memory or recall_facts" in html
    assert "Unreachable" not in client.get(url, {"kind": "character", "agent": "Alex"}, **HX).content.decode()
    assert "Unreachable" not in client.get(url, {"kind": "character", "agent": ""}, **HX).content.decode()  # shared: query_self
    # The form's first choice (semantic, for the turn's agent) is warned about on the page itself.
    page = client.get(reverse("turn_inspect", args=[finished.pk, 3])).content.decode()
    assert "Unreachable: no agent would ever get Alex&#x27;s “Semantic” memory" in page
    # Formed anyway: written, and the warning said again.
    response = client.post(reverse("chronicle_memory_form", args=[finished.pk]),
                           {"content": "Alex hid the keys.", "agent": "Alex", "kind": "semantic", "importance": "6",
                            "next": reverse("turn_inspect", args=[finished.pk, 3])}, follow=True)
    assert "Memory written" in response.content.decode() and "Unreachable" in response.content.decode()

    # Tools mode with the scene tool alone: the warning says what would reach the rest.
    Simulation.objects.filter(pk=finished.pk).update(tool_set=["query_scene"])
    html = client.get(url, {"kind": "character_knowledge", "agent": "Alex"}, **HX).content.decode()
    assert "Unreachable" in html and "offer query_memory or recall_facts" in html and "use the “Both” retrieval mode" in html

    # Pre-population alone (the default mode) reaches every kind, own or shared, with no tool at all.
    for mode in ("prepopulate", "both"):
        Simulation.objects.filter(pk=finished.pk).update(retrieval_mode=mode, tool_set=[])
        finished.refresh_from_db()
        assert selectors.reach(finished).unreachable() == [], mode
        assert "Unreachable" not in client.get(url, {"kind": "scene", "agent": "Alex"}, **HX).content.decode()


def test_another_writer_gets_no_reach_answer(client_for, other_user, finished):
    response = client_for(other_user).get(reverse("chronicle_memory_reach", args=[finished.pk]), {"kind": "scene"})
    assert response.status_code == 404
