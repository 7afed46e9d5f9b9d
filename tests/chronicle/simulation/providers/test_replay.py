"""The replay provider: a script's or a recorded model's lines through the real engine, worker and memory."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from chronicle import headless
from chronicle.simulation.run.models import Simulation, Turn
from chronicle.simulation.control.services import simulation_resume, simulation_start
from memory.recalling.tools import WRITE_TOOLS
from tests.chronicle.simulation.conftest import wait_status

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
RECORDED = FIXTURES / "recorded"


def run_file(path: Path, **options) -> dict:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("run_simulation", str(path), stdout=out, stderr=err, **{"timeout": 300, **options})
    finally:
        print(err.getvalue())
    return json.loads(out.getvalue().strip().splitlines()[-1])


def start(path: Path, owner, **overrides) -> Simulation:
    imported = headless.scenario_import(raw=path.read_bytes(), username=owner.username)
    values = headless.run_settings(imported=imported, turns=None, provider=None, mode=None) | overrides
    return simulation_start(owner=owner, scenario=imported.scenario, cast=list(imported.scenario.cast.all()),
                            settings=values)


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("name", ["demo", "demo_after", "demo_prepopulate_after", "demo_tools_every_tool", "long_sheets_tools_six",
                                  "long_sheets_tools_dedup", "long_sheets_tools_aspects", "rumour_tools_after", "demo_both_after",
                                  "lighthouse_prepopulate_model", "demo_prepopulate_rumour_denied", "demo_prepopulate_secrets",
                                  "demo_both_standing", "demo_prepopulate_away", "rumour", "will_at_hollins_farm", "dress_rehearsal_at_st_aldhelms",
                                  "cracked_core_at_skarvik", "long_prose_tools_model", "long_prose_prepopulate_model",
                                  "long_sheets_prepopulate_model", "long_sheets_tools_repeats", "demo_prepopulate_model",
                                  "long_sheets_tools_aspects_named", "rumour_doubts", "rumour_paranoia_took_it",
                                  "rumour_paranoia_judged", "long_sheets_tools_terse", "demo_prepopulate_layout",
                                  "demo_prepopulate_window", "harbour_winter_long_model",
                                  "harbour_winter_long_model_both", "demo_judgement_model"])
def test_a_recorded_model_run_replays_line_by_line_with_its_tool_calls(name):
    recording = json.loads((RECORDED / f"{name}.json").read_text())
    result = run_file(RECORDED / f"{name}.json", keep=True)

    # Every line the model wrote is said again, by the same speaker, in order.
    assert [(t["speaker"], t["text"]) for t in result["turns"]] == \
        [(line["speaker"], line["text"]) for line in recording["script"]]
    # Each tool call the model made was made again, for real, and recorded with its turn (an empty
    # answer too), in the order the model made them.
    simulation = Simulation.objects.get(pk=result["simulation"])
    for turn, line in zip(simulation.turns.order_by("index"), recording["script"]):
        called = [c["name"] for reply in line["replies"] for c in reply["tool_calls"]]
        made = list(turn.retrievals.exclude(tool__in=["prepopulate", "pinned"]).order_by("order")
                    .values_list("tool", flat=True))
        assert made == called, f"turn {turn.number}"
    # Memory formed as in any run: the lines were heard and remembered.
    assert result["memories_by_kind"]["episodic"] >= len(recording["script"])


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_recorded_run_replays_under_other_memory_settings():
    """The demo a model played in tools mode, replayed pre-populated: the same lines, no tool calls."""
    recording = json.loads((RECORDED / "demo.json").read_text())
    result = run_file(RECORDED / "demo.json", mode="prepopulate")

    assert [t["text"] for t in result["turns"]] == [line["text"] for line in recording["script"]]
    assert all({r["tool"] for r in t["retrievals"]} <= {"prepopulate"} for t in result["turns"])


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_the_shapes_real_models_send_are_read_as_a_model_meant_them(user, celery_worker):
    simulation = start(RECORDED / "shapes.json", user)
    wait_status(simulation, Simulation.Status.PAUSED)
    turns = {t.number: t for t in Turn.objects.filter(simulation=simulation).prefetch_related("retrievals")}

    # Text beside a tool call: the call is made, the text stays in what was sent, the line is the reply after.
    assert [r.tool for r in turns[1].retrievals.all()] == ["query_scene"]
    assert turns[1].utterance.startswith("Right, it's seven")
    assert any(m.get("content") == "Let me check who is here first." for m in turns[1].prompt_messages)
    # Several calls in one reply, one without its optional arguments: both made in one round.
    assert sorted(r.tool for r in turns[2].retrievals.all()) == ["query_self", "recall_episodes"]
    assert not any(r.error for r in turns[2].retrievals.all())
    # A call written as text is run as a call, and the turn says so.
    assert [r.tool for r in turns[3].retrievals.all()] == ["query_memory"]
    assert turns[3].utterance.startswith("Bella's is fine") and "tool call as text" in turns[3].note
    # A tool that does not exist: the agent is told which exist, the turn goes on.
    unknown = turns[4].retrievals.get()
    assert unknown.tool == "search_web" and "unknown tool" in unknown.error
    # A refusal is not said as the character's line: the turn fails with it, the run pauses.
    assert turns[5].status == Turn.Status.FAILED and "declined to speak as Jordan" in turns[5].error
    assert "declined to speak as Jordan" in simulation.pause_reason
    # The replay counted the judgement a model would have made after each line heard by others (one
    # call for all its listeners).
    assert [int((t.context or {}).get("aux_calls") or 0) for t in sorted(turns.values(), key=lambda t: t.number)
            if t.status == Turn.Status.DONE] == [1, 1, 1, 1]


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_script_shorter_than_the_run_ends_with_the_script_and_says_so(user, celery_worker):
    simulation = start(FIXTURES / "probes" / "every_kind.json", user, max_turns=20, pause_after=3)
    wait_status(simulation, Simulation.Status.PAUSED)
    assert simulation.turns.done().count() == 3 and simulation.pause_reason == "Paused after turn 3, as asked."

    simulation_resume(simulation=simulation)
    wait_status(simulation, Simulation.Status.COMPLETED)
    assert simulation.turns.done().count() == 12
    assert simulation.pause_reason == "The script ended after 12 lines, before the 20 turns this run was set for."


def _file(**changes) -> bytes:
    data = json.loads((FIXTURES / "probes" / "every_kind.json").read_text())
    for key, value in changes.items():
        data[key] = value
    return json.dumps(data).encode()


@pytest.mark.django_db
@pytest.mark.parametrize("change, message", [
    ({"script": [{"speaker": "Alex", "text": "Hi."}, {"speaker": "Bob", "text": "Hello."}]},
     "Script line 2: Bob is not in the cast"),
    ({"script": [{"speaker": "Alex", "text": "Hi."}, {"speaker": "Jordan"}]}, "Script line 2 (Jordan): give the \"text\""),
    ({"script": [{"speaker": "Alex", "text": "Hi.", "tool_calls": [{"name": "query_everything"}]}]},
     "Script line 1: there is no tool 'query_everything'"),
    ({"script": [{"speaker": "Alex", "text": "Hi."}, {"speaker": "Sam", "text": "*leaves the room*"},
                 {"speaker": "Sam", "text": "Back!"}]}, "Script line 3: Sam is not in the room at turn 3"),
    ({"probes": [{"after_turn": 2, "agent": "Bob", "kind": "self", "question": "Who am I?", "expect": "x"}]},
     "Probe 1 ('Who am I?'): 'Bob' is not in the cast"),
    ({"probes": [{"after_turn": 40, "agent": "Sam", "kind": "self", "question": "Who am I?", "expect": "x"}]},
     "after_turn 40 is past the script's 12 lines"),
    ({"probes": [{"after_turn": 2, "agent": "Sam", "kind": "self", "question": "Who am I?"}]},
     "give one of \"expect\""),
])
def test_a_bad_script_or_probe_is_refused_naming_it_and_nothing_is_created(change, message):
    with pytest.raises(headless.HeadlessError) as refused:
        headless.scenario_import(raw=_file(**change), username=None)
    assert message in str(refused.value)
    assert not Simulation.objects.exists()
    from chronicle.models import Character

    assert not Character.objects.exists()


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_model_runs_json_export_replays_from_the_command_line():
    """The export of the run the model played (provider openai), given to run_simulation as it is."""
    export = json.loads((RECORDED / "demo.openai-export.json").read_text())
    result = run_file(RECORDED / "demo.openai-export.json", turns=4)

    assert [t["text"] for t in result["turns"]] == [t["utterance"] for t in export["turns"][:4]]
    # Turn 1: the model called query_self and query_scene in one reply; the replay makes both again.
    assert {r["tool"] for r in result["turns"][0]["retrievals"]} == {"query_self", "query_scene"}


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_finished_run_replays_from_its_page_under_other_memory_settings(user, other_user, client_for,
                                                                          celery_worker):
    source = start(FIXTURES / "probes" / "every_kind.json", user)
    wait_status(source, Simulation.Status.COMPLETED)
    client = client_for(user)
    assert 'id="replay"' in client.get(source.get_absolute_url()).content.decode()

    form = {"retrieval_mode": "prepopulate", "scoring": "decayed", "association_weight": "0",
            "reflection_threshold": "100", "distortions": "Sam: paranoia"}
    assert client_for(other_user).post(f"/simulations/{source.pk}/replay/", form).status_code == 404
    response = client_for(user).post(f"/simulations/{source.pk}/replay/", form)
    replay = Simulation.objects.exclude(pk=source.pk).get()
    assert response.status_code == 302 and response["Location"] == replay.get_absolute_url()
    wait_status(replay, Simulation.Status.COMPLETED)

    assert (replay.provider, replay.retrieval_mode, replay.scoring) == ("replay", "prepopulate", "decayed")
    assert list(replay.turns.done().values_list("utterance", flat=True)) == \
        list(source.turns.done().values_list("utterance", flat=True))
    # The setting changed what memory made of the same lines: Sam's copies now go through paranoia.
    from memory.models import Memory

    assert Memory.objects.filter(bank=replay.bank, agent="Sam", metadata__has_key="distortion").exists()
    assert not Memory.objects.filter(bank=source.bank, agent="Sam", metadata__has_key="distortion").exists()


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_run_saved_as_a_recording_replays_to_the_same_lines(tmp_path):
    saved = tmp_path / "recording.json"
    first = run_file(RECORDED / "shapes.json", turns=4, save_recording=str(saved))
    recording = json.loads(saved.read_text())
    assert [line["speaker"] for line in recording["script"]] == ["Alex", "Jordan", "Sam", "Alex"]
    assert all(line["recorded"] for line in recording["script"])

    again = run_file(saved)
    assert [t["text"] for t in again["turns"]] == [t["text"] for t in first["turns"]]


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_the_recorded_rumour_ends_disputed_for_all_three_under_the_rules_of_belief():
    """A model played examples/rumour.json: Oren passed the rumour to Mira, Mira asked Tess whether
    it was true, Tess said it was not, and Oren took it back. Replayed, Wonda's record agrees."""
    result = run_file(RECORDED / "rumour.json")
    held = {b["holder"]: b for b in result["beliefs"]}
    assert sorted(held) == ["Mira", "Oren", "Tess"]
    assert all(b["disputed"] for b in held.values())
    # Mira came to believe it from Oren (turn 2), not from her own question (turn 8): Tess never did.
    assert held["Mira"]["history"][0]["source_chain"] == ["Oren"] and held["Mira"]["history"][0]["turn"] == 2
    assert held["Tess"]["stance"] == "denies" and held["Tess"]["confidence"] == 0.0
    assert held["Mira"]["confidence"] < 0.7 * 0.5 and held["Oren"]["confidence"] <= 0.05


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_claim_asked_about_retold_then_corrected_is_believed_only_from_the_retelling_and_revised_for_all():
    """examples/probes/rumour-corrected.json: Nell asks Ivo whether the market is closing (turn 2),
    tells him it is (4), retells it to Dora (9); Dora says it is not so (10); Nell takes it back (12)."""
    path = Path(__file__).resolve().parents[4] / "examples" / "probes" / "rumour-corrected.json"
    result = run_file(path, provider="replay")
    held = {b["holder"]: b for b in result["beliefs"]}
    # Ivo believed it from the retelling at turn 4, not from the question at turn 2.
    assert held["Ivo"]["history"][0] | {} == {"turn": 4, "confidence": 0.7, "source_chain": ["Nell"], "stance": "asserts"}
    # Every listener of the correction is less sure after it, and each belief names who denied it.
    for name in ("Ivo", "Nell"):
        before, after = held[name]["history"][-3:-1] if name == "Nell" else held[name]["history"][:2]
        assert after["turn"] == 10 and after["stance"] == "denies" and after["source_chain"] == ["Dora"]
        assert after["confidence"] < before["confidence"]
    assert all(b["disputed"] for b in held.values())
    assert held["Nell"]["confidence"] <= 0.05  # she took it back herself

    out, err = io.StringIO(), io.StringIO()
    call_command("evaluate_agents", str(path), "--mode", "tools", stdout=out, stderr=err)
    report = json.loads(out.getvalue().strip().splitlines()[-1])
    # "What do I believe about …?" after the correction: the corrected belief comes first, and
    # nobody believed anything from the question.
    assert report["by_kind"]["belief"]["hit_at_1"] == 1.0 and report["by_kind"]["belief"]["forbid"]["leaks"] == 0
