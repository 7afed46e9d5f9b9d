"""`manage.py run_simulation`: a scenario file run headless on a real worker, reported as one JSON line."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import override_settings

from chronicle.demo import DEMO_TITLE, load_demo
from chronicle.models import Character, Scenario
from chronicle.services.cards import card_import
from chronicle.services.characters import character_update
from chronicle.simulation.run.models import Simulation
from memory.models import MemoryBank

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo.json"
CAST = {"Alex", "Jordan", "Sam"}


def run(*args, **options) -> tuple[dict, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("run_simulation", *args, stdout=out, stderr=err, **{"timeout": 300, **options})
    finally:
        print(err.getvalue())  # shown when a test fails
    return json.loads(out.getvalue().strip().splitlines()[-1]), err.getvalue()


def test_the_demo_file_runs_and_leaves_nothing_behind():
    result, progress = run(str(DEMO), turns=3, provider="scripted")

    turns = result["turns"]
    assert [t["number"] for t in turns] == [1, 2, 3]
    assert {t["speaker"] for t in turns} <= CAST and all(t["text"] for t in turns)
    retrieved = [r for t in turns for r in t["retrievals"]]
    assert retrieved and all(r["content"] and r["memory_id"] and r["tool"] for r in retrieved)
    assert {"kind", "category", "score"} <= set(retrieved[0])
    for turn in turns:  # what the model was sent: the system prompt first, and something naming the speaker
        assert turn["context"][0]["role"] == "system"
        assert all(set(m) == {"role", "content"} and isinstance(m["content"], str) for m in turn["context"])
        assert turn["speaker"] in turn["context"][0]["content"]
    assert result["memories_by_kind"]["episodic"] > 0
    assert result["tokens"]["prompt"] > 0 and result["tokens"]["full_definition"] > 0
    assert "turns done: 3/3" in progress
    assert "cost: $0 (no model was asked: a dry run or a replay)." in progress and result["cost"]["offline"]

    assert not Simulation.objects.exists() and not Character.objects.exists() and not Scenario.objects.exists()
    assert not MemoryBank.objects.exists()
    assert not get_user_model().objects.filter(username__startswith="run-").exists()


def test_the_demos_living_memory_reflects_scores_and_says_what_was_not_kept():
    """The dry run, shortened: the demo's lines are scored (not all alike), its floor of 1
    leaves some unkept and every turn says which and why, and someone reflects, citing evidence."""
    result, _ = run(str(DEMO), turns=40, provider="scripted")

    lifecycle = result["lifecycle"]
    assert lifecycle["importance"]["min"] >= 1.0 > 0  # nothing under the floor was kept
    assert lifecycle["importance"]["min"] < lifecycle["importance"]["max"]
    not_kept = [line for t in result["turns"] for line in t["not_kept"]]
    assert lifecycle["filtered"] == len(not_kept) >= 1
    assert all(" did not keep: “" in line and "below the floor" in line for line in not_kept)
    assert lifecycle["reflections"] >= 1
    assert all(insight["evidence"] and insight["agent"] in CAST for insight in lifecycle["insights"])
    assert all(t["memory_ms"] > 0 for t in result["turns"])


def test_the_rumour_file_spreads_a_false_belief_two_hops_and_distorts_at_every_stage():
    """The dry run: examples/rumour.json, 20 turns, scripted."""
    result, _ = run(str(DEMO.parent / "rumour.json"), turns=20, provider="scripted")

    cast = {"Mira", "Oren", "Tess"}
    far = [b for b in result["beliefs"] if len(b["source_chain"]) >= 2]
    assert far and all(b["true"] is False for b in far)
    assert far[0]["confidence"] == pytest.approx(0.49) and far[0]["source_chain"][-1] == "Oren"
    assert any(set(t["heard_by"]) != cast for t in result["turns"])  # someone away, or a whisper
    assert all(n >= 1 for n in result["distortions"].values()) and set(result["distortions"]) == {
        "formation", "retrieval", "association"}
    assert result["relationships"] and all(r["agent"] in cast and r["other"] in cast for r in result["relationships"])


def test_keep_leaves_the_run_with_its_owner_and_a_changed_cast_comes_in_as_copies(user):
    result, _ = run(str(DEMO), turns=1, owner=user.username, keep=True)

    simulation = Simulation.objects.owned_by(user).get(pk=result["simulation"])
    assert simulation.status == Simulation.Status.COMPLETED and simulation.turns.count() == 1
    assert set(Character.objects.owned_by(user).values_list("name", flat=True)) == CAST

    # The same file again: the writer has this scene and cast, unchanged, so the run is of those, and
    # nobody becomes "Alex (2)" (a name the character would then say as its own).
    result, progress = run(str(DEMO), turns=1, owner=user.username, keep=True)
    assert "has this scene and cast already, unchanged" in progress
    again = Simulation.objects.owned_by(user).get(pk=result["simulation"])
    assert set(again.cast_names) == CAST and again.scenario_id == simulation.scenario_id
    assert Character.objects.owned_by(user).count() == 3 and Scenario.objects.owned_by(user).count() == 1

    # Once the writer has changed their Alex, the file's cast comes in as copies, as the import page
    # offers, and its stage directions follow the new names.
    alex = Character.objects.owned_by(user).get(name="Alex")
    character_update(character=alex, data={"description": "Alex, rewritten by the writer."})
    result, progress = run(str(DEMO), turns=6, owner=user.username, keep=True)
    assert "imported as copies (Alex → Alex (2), Jordan → Jordan (2), Sam → Sam (2))" in progress
    copy = Simulation.objects.owned_by(user).get(pk=result["simulation"])
    assert copy.status == Simulation.Status.COMPLETED and set(copy.cast_names) == {f"{n} (2)" for n in CAST}
    assert {t["speaker"] for t in result["turns"]} <= set(copy.cast_names)
    assert "Sam (2)" in copy.stage_directions and "Sam steps" not in copy.stage_directions
    assert Character.objects.owned_by(user).count() == 6

    # And a fourth run finds those copies: no "Alex (3)"; the stage directions follow the copies' names.
    result, progress = run(str(DEMO), turns=1, owner=user.username, keep=True)
    fourth = Simulation.objects.owned_by(user).get(pk=result["simulation"])
    assert fourth.scenario_id == copy.scenario_id and set(fourth.cast_names) == {f"{n} (2)" for n in CAST}
    assert "Sam (2)" in fourth.stage_directions and Character.objects.owned_by(user).count() == 6


def test_the_demo_file_runs_the_demo_bootstrap_gave_its_writer(user):
    """`bootstrap` gives its writer the demo; running examples/demo.json as them runs that, with the
    file's own settings, and adds no copies to their library."""
    load_demo(owner=user)
    result, progress = run(str(DEMO), turns=2, owner=user.username, keep=True)
    simulation = Simulation.objects.owned_by(user).get(pk=result["simulation"])
    assert "nothing imported" in progress and set(simulation.cast_names) == CAST
    assert simulation.scenario.title == DEMO_TITLE and "Sam steps" in simulation.stage_directions
    assert Character.objects.owned_by(user).count() == 3 and Scenario.objects.owned_by(user).count() == 1
    # Without --keep the run goes, and the writer's own scene and cast, which it ran, stay.
    result, progress = run(str(DEMO), turns=1, owner=user.username)
    assert "nothing imported" in progress and not Simulation.objects.filter(pk=result["simulation"]).exists()
    assert Character.objects.owned_by(user).count() == 3 and Scenario.objects.owned_by(user).count() == 1


def test_settings_are_checked_before_anything_is_imported_or_started(tmp_path):
    data = json.loads(DEMO.read_text())
    data["settings"] = {"greeting_by": "Nobody", "stage_directions": "2: Quentin leaves"}
    bad = tmp_path / "bad-settings.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(CommandError) as failure:
        run(str(bad))
    said = str(failure.value)
    assert "bad-settings.json: the run's settings are not valid: " in said and "Nobody is not in this run's cast" in said
    assert "Quentin" in said
    with pytest.raises(CommandError, match="Tools mode needs at least one tool"):
        data["settings"] = {"tool_set": []}
        bad.write_text(json.dumps(data))
        run(str(bad), mode="tools")
    assert not Character.objects.exists() and not get_user_model().objects.exists()


@override_settings(LLM_BASE_URL="http://127.0.0.1:9/v1", LLM_MODEL="nobody")  # nothing listens on port 9
def test_a_run_that_pauses_says_why_prints_what_was_done_and_exits_1(user):
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError, match="cannot reach the LLM server") as failure:
        call_command("run_simulation", str(DEMO), turns=2, provider="openai", owner=user.username,
                     timeout=300, stdout=out, stderr=err)
    assert failure.value.returncode == 1
    result = json.loads(out.getvalue().strip().splitlines()[-1])
    assert result["turns"] == [] and result["memories_by_kind"]["character"] > 0
    # Without --keep the owner keeps nothing of it: no run, no bank, no imported scenario or characters.
    assert not Simulation.objects.exists() and not Scenario.objects.exists() and not Character.objects.exists()
    assert not MemoryBank.objects.exists() and get_user_model().objects.filter(pk=user.pk).exists()


def test_a_malformed_file_names_the_field_and_creates_nothing(tmp_path):
    data = json.loads(DEMO.read_text())
    del data["characters"][1]["name"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))

    with pytest.raises(CommandError, match=r"characters\[1\]\.name is missing"):
        run(str(bad))
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(CommandError, match="not valid JSON"):
        run(str(tmp_path / "broken.json"))
    assert not Character.objects.exists() and not get_user_model().objects.exists()


def test_the_demo_file_reimports_cleanly_and_the_import_page_takes_it(user, client_for):
    result = card_import(owner=user, raw=DEMO.read_bytes())
    assert result.scenario.title == "Friends deciding where to eat tonight"
    assert {c.name for c in result.scenario.cast.all()} == CAST

    other = get_user_model().objects.create_user(username="page", password="x")
    with DEMO.open("rb") as upload:
        response = client_for(other).post("/import/", {"file": upload})
    scenario = Scenario.objects.owned_by(other).get()
    assert response.status_code == 302 and response.url == "/import/"  # which lists it, linked
    assert f'href="/scenarios/{scenario.pk}/"' in client_for(other).get(response.url).content.decode()
    assert scenario.pair_notes == result.scenario.pair_notes
