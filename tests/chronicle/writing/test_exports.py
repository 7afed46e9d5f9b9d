"""Markdown, Fountain and JSON exports: their structure, and JSON → import → an equal simulation."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError

from chronicle.writing import exports, services
from chronicle.writing.tasks import import_bank_task
from memory.living.relationships import relationships_update
from memory.models import Memory, Relationship

pytestmark = pytest.mark.django_db


@pytest.fixture
def polished(user, finished):
    first, second, third = (finished.turns.get(index=i) for i in range(3))
    services.entry_update(turn=first, actor=user, text="Right. Food first, feelings later.", starred=True)
    services.entry_update(turn=second, actor=user, annotation="Make Jordan hungrier here")
    services.entry_update(turn=third, actor=user, struck=True)
    return finished


def test_fountain_has_scene_heading_upper_case_cues_and_dialogue_under_them(polished):
    text = exports.to_fountain(polished)
    lines = text.splitlines()
    assert lines[0] == "Title: Dinner plans"
    assert "INT. ALEX'S APARTMENT - LIVING ROOM - EARLY EVENING" in lines
    turns = list(polished.turns.order_by("index"))
    cues = [i for i, line in enumerate(lines) if line in ("ALEX", "JORDAN", "SAM")]
    assert [lines[i] for i in cues] == ["ALEX", "JORDAN", "ALEX", "JORDAN", "SAM"]  # Sam's struck turn 3 left out
    assert lines[cues[0] + 1] == "Right. Food first, feelings later."  # the writer's text, right under the cue
    jordan = lines[cues[1] + 1:cues[2]]  # Jordan's block: the line, an action as a parenthetical, the note
    assert jordan[0] and turns[1].utterance.startswith(jordan[0])
    assert ("*" in turns[1].utterance) == any(line.startswith("(") and line.endswith(")") for line in jordan)
    assert "*" not in "".join(jordan) and jordan[-2:] == ["[[Make Jordan hungrier here]]", ""]
    assert lines[cues[0] - 1] == ""  # a cue follows a blank line
    assert turns[2].utterance not in text


def test_markdown_lists_cast_and_every_line_with_strike_and_notes(polished):
    text = exports.to_markdown(polished)
    assert text.startswith("# Dinner plans\n")
    assert "## Cast" in text and "- **Jordan**, a chef between jobs" in text
    assert "**Alex** ★ *(turn 1)*: Right. Food first, feelings later." in text
    assert "> Note: Make Jordan hungrier here" in text
    assert "~~**Sam** *(turn 3)*:" in text


def _normal(data: dict) -> dict:
    """The export without the ids and times a new simulation necessarily changes."""
    data = json.loads(json.dumps(data))
    for turn in data["turns"]:
        turn.pop("id")
        for r in turn["retrievals"]:
            for result in r["results"]:
                result.pop("memory_id", None)
    for m in data["memories"]:
        m.pop("id")
        m["metadata"].pop("copied_from", None)
    for o in data["overrides"]:
        o.pop("memory_id")
    for e in data["edits"]:
        e.pop("target_id")
    for r in data.get("relationships", []):
        r.pop("evidence_id")  # checked on its own below
    for a in data.get("accesses", []):
        a.pop("memory_id")
    data["simulation"].pop("title")  # the copy is marked (checked on its own below)
    return data


def test_json_export_imports_back_into_an_equal_simulation(user, polished, django_capture_on_commit_callbacks):
    turn = polished.turns.get(index=3)
    services.override_toggle(turn=turn, kind="exclude", actor=user, on=True,
                             memory_id=turn.retrievals.get(tool="query_memory").results[0]["memory_id"])
    data = exports.to_json(polished)
    assert data["format"] == "wonda.simulation" and data["scenario"]["title"] == "Dinner plans"
    assert [c["name"] for c in data["cast"]] == ["Alex", "Jordan", "Sam"]
    assert data["simulation"]["retrieval_mode"] == "tools" and "api_key" not in data["simulation"]
    assert len(data["turns"]) == 6 and data["turns"][3]["retrievals"][0]["tool"] == "query_memory"
    assert len(data["edits"]) == 5 and data["memories"]

    payload = json.loads(json.dumps(data))  # what a downloaded file gives back
    with django_capture_on_commit_callbacks() as callbacks:
        imported = exports.simulation_import(owner=user, data=payload)
    assert len(callbacks) == 1
    import_bank_task.apply(args=(imported.pk, payload["memories"], payload["relationships"],
                                 payload["accesses"])).get()
    imported.refresh_from_db()
    # What was recalled when came too: each memory's count, as decayed scoring and the timeline read it.
    assert payload["accesses"]
    recalled = sorted(Memory.objects.filter(bank=imported.bank, access_count__gt=0).values_list("content", "access_count"))
    assert recalled == sorted(Memory.objects.filter(bank=polished.bank, access_count__gt=0)
                              .values_list("content", "access_count"))
    assert imported.pk != polished.pk and imported.bank_id != polished.bank_id
    again = exports.to_json(imported)
    assert _normal(again) == _normal(data)  # every edit with the time it was made, not the import's
    # The writer's first run keeps its name; the copy says it is one.
    assert (polished.title, imported.title) == ("Dinner plans", "Dinner plans (imported)")
    assert exports.simulation_import(owner=user, data=payload).title == "Dinner plans (imported 2)"
    # The retrieval records point at the new bank's memories.
    ids = [r["memory_id"] for t in again["turns"] for rr in t["retrievals"] for r in rr["results"]]
    assert ids and Memory.objects.filter(pk__in=ids, bank=imported.bank).count() == len(set(ids))
    title, *script = exports.to_fountain(imported).splitlines()
    assert title == "Title: Dinner plans (imported)" and script == exports.to_fountain(polished).splitlines()[1:]


def test_import_refuses_something_else(user):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError):
        exports.simulation_import(owner=user, data={"format": "tavern-card"})


def test_the_exports_carry_the_stage_and_read_whispers_and_actions_as_a_script_does(user, polished):
    """What happens between the lines is in both exports, in the writer's words and in order; in the
    screenplay a whisper or an action is a parenthetical and the heading is the place, not its description."""
    from chronicle.simulation.run.models import Simulation

    Simulation.objects.filter(pk=polished.pk).update(stage_directions="2: Sam steps out\n4: The lights go out.")
    polished.refresh_from_db()
    polished.scenario_snapshot = {**polished.scenario_snapshot, "location": "The dining room at Hollins Farm: a long "
                                  "oak table, the good china out for once, rain on the windows.", "time_of_day": "Late evening"}
    first = polished.turns.get(index=0)
    services.entry_update(turn=first, actor=user, text="*whispers to Jordan* Food first. *pours the wine* Then feelings.")

    fountain = exports.to_fountain(polished).splitlines()
    assert "INT. THE DINING ROOM AT HOLLINS FARM - LATE EVENING" in fountain
    assert "A long oak table, the good china out for once, rain on the windows." in " ".join(fountain)
    cue = fountain.index("ALEX")
    assert fountain[cue + 1:cue + 5] == ["(whispers to Jordan)", "Food first.", "(pours the wine)", "Then feelings."]
    steps_out, lights = fountain.index("Sam steps out."), fountain.index("The lights go out.")
    second_cue = fountain.index("JORDAN")
    assert cue < steps_out < second_cue < lights  # each before the turn it comes before

    markdown = exports.to_markdown(polished)
    assert "*The dining room at Hollins Farm — Late evening*" in markdown and "windows., " not in markdown
    assert markdown.index("**Alex** ★ *(turn 1)*") < markdown.index("*Sam steps out.*") \
        < markdown.index("**Jordan** *(turn 2)*") < markdown.index("*The lights go out.*")


def test_how_the_agents_came_to_stand_with_each_other_survives_export_and_import(
        user, finished, client_for, django_capture_on_commit_callbacks):
    """The run page's Relationships (and every agent's standing in a replay or a branch) come back
    with an imported run, each change resting on the imported copy of its line."""
    line = Memory.objects.filter(bank=finished.bank, agent="Jordan", kind="episodic").order_by("id").first()
    moved = relationships_update(bank=finished.bank, speaker="Alex", text="Thank you, Jordan, you saved the evening.",
                                 listeners=["Jordan"], turn=2, evidence={"Jordan": line})
    assert moved, "a thank-you said to Jordan by name moves Jordan"
    data = json.loads(json.dumps(exports.to_json(finished)))
    assert ("Jordan", "Alex", 2) in [(r["agent"], r["other"], r["turn"]) for r in data["relationships"]]

    with django_capture_on_commit_callbacks():
        imported = exports.simulation_import(owner=user, data=data)
    import_bank_task.apply(args=(imported.pk, data["memories"], data["relationships"])).get()

    def history(bank_id):
        return [(r.agent, r.other, r.turn, r.trust, r.affinity, r.reason)
                for r in Relationship.objects.filter(bank=bank_id).order_by("id")]
    assert history(imported.bank_id) == history(finished.bank_id)
    row = Relationship.objects.get(bank=imported.bank_id, agent="Jordan", other="Alex", turn=2)
    assert row.affinity == moved[0].affinity > 0
    assert row.evidence.bank_id == imported.bank_id and row.evidence.content == line.content
    page = client_for(user).get(imported.get_absolute_url()).content.decode()
    assert 'id="relationships"' in page and 'data-pair="Jordan→Alex"' in page

    broken = json.loads(json.dumps(data))
    broken["relationships"][0]["trust"] = 3
    with pytest.raises(ValidationError, match=r"relationships\[0\].*trust"):
        exports.simulation_import(owner=user, data=broken)
