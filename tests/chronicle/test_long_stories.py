"""Long stories: a LoCoMo-style conversation over several dated sessions, converted into a scene
(`manage.py locomo_scene`), replayed on a real worker, and asked about lines said far past the
transcript window (`manage.py evaluate_agents`), with the story calendar dating what is remembered.

tests/fixtures/locomo/tiny.json is a made-up conversation in LoCoMo's format: three sessions on
8 May, 9 May and 20 June 2023, eighty lines, six facts with questions naming their lines.
"""

from __future__ import annotations

import io
import json
from datetime import datetime
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from chronicle.simulation.run.models import Simulation
from memory.models import Memory

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "locomo" / "tiny.json"


def _scene(tmp_path, *extra_probes) -> Path:
    out = tmp_path / "tiny-scene.json"
    call_command("locomo_scene", str(TINY), "tiny-1", "-o", str(out), stderr=io.StringIO())
    data = json.loads(out.read_text())
    data["probes"] += list(extra_probes)
    out.write_text(json.dumps(data))
    return out


def test_a_conversation_becomes_a_scene_with_dated_sessions_and_probes_that_know_their_line(tmp_path):
    data = json.loads(_scene(tmp_path).read_text())
    assert [c["name"] for c in data["characters"]] == ["Ines", "Tomas"]
    assert len(data["script"]) == 80 and data["settings"]["max_turns"] == 80
    # Each session opens with the day it happened, as a writer's time skip.
    assert data["settings"]["stage_directions"].splitlines() == [
        "1: It begins: it is 1:56 pm on 8 May 2023", "31: A new day: it is 10:10 am on 9 May 2023",
        "55: A new day: it is 7:30 pm on 20 June 2023"]
    cat = next(p for p in data["probes"] if "cat" in p["question"])
    assert cat["answer_turn"] == 9 and cat["after_turn"] == 80 and cat["kind"] == "single-hop"
    assert data["script"][8]["text"].startswith(cat["expect"][0])
    assert cat["agent"] == "Tomas"  # asked of the friend who heard it
    # The adversarial question (no answer) is left out; a malformed evidence id keeps what exists.
    assert not any("adversarial" in p["question"] for p in data["probes"])
    assert next(p for p in data["probes"] if "malformed" in p["question"])["answer_turn"] == 9


def test_a_sample_that_is_not_there_is_named_with_those_that_are(tmp_path):
    with pytest.raises(CommandError, match=r"no sample 'conv-99' \(it has tiny-1, or 1–1\)"):
        call_command("locomo_scene", str(TINY), "conv-99", stderr=io.StringIO())
    bad = tmp_path / "bad.json"
    bad.write_text("{\"not\": \"a list\"}")
    with pytest.raises(CommandError, match="expected a list of samples"):
        call_command("locomo_scene", str(bad), "1", stderr=io.StringIO())


def test_memory_answers_far_past_the_window_by_distance_and_story_day_and_reads_time_words(tmp_path):
    scene = _scene(
        tmp_path,
        # Asked on 9 May (turn 54, the second session's last): "yesterday" is the first session,
        # where the cat was adopted.
        {"after_turn": 53, "agent": "Tomas", "kind": "dated", "tool": "recall_episodes", "question": "a pet, yesterday",
         "arguments": {"query": "a pet", "time_range": "yesterday"}, "expect": "grey cat"},
        # In June nothing was said of the cat: a search of June does not hand back May's line.
        {"after_turn": 80, "agent": "Tomas", "kind": "dated_out", "tool": "recall_episodes", "question": "a pet, in June",
         "arguments": {"query": "a pet", "time_range": "in June"}, "forbid": "grey cat"},
    )
    out, err = io.StringIO(), io.StringIO()
    call_command("evaluate_agents", str(scene), "--keep", stdout=out, stderr=err)
    report = json.loads(out.getvalue().strip().splitlines()[-1])
    assert report["errors"] == [] and report["leaks"] == []
    assert report["by_kind"]["dated"]["hit_at_k"] == 1.0
    # How far back each answer was: most lines were said 40 or more turns before they were asked.
    assert set(report["by_distance"]) == {"0-39 turns back", "40-199 turns back"}
    assert report["beyond_window"]["n"] >= 5 and report["beyond_window"]["hit_at_k"] >= 0.8
    assert {"same story day", "1-6 story days back", "30+ story days back"} <= set(report["by_story_days"])

    run = Simulation.objects.get()
    # Every line's memories carry the story's date beside the turn.
    said = Memory.objects.filter(bank=run.bank, kind="episodic", turn__isnull=False)
    assert not said.filter(story_time__isnull=True).exists()
    assert said.filter(turn=9).first().story_time.replace(tzinfo=None).date() == datetime(2023, 5, 8).date()
    assert said.filter(turn=63).first().story_time.replace(tzinfo=None) == datetime(2023, 6, 20, 19, 38)
    # The agent is told the date and time, not only the turn.
    last = run.turns.get(index=79)
    sent = "\n".join(str(m.get("content") or "") for m in last.prompt_messages)
    assert "Time: Tuesday 20 June 2023, 7:55 pm (turn 80)" in sent


def test_the_long_run_bench_prints_each_bucket_with_every_call_and_the_baselines(tmp_path):
    out, err = io.StringIO(), io.StringIO()
    call_command("bench_long_run", str(_scene(tmp_path)), "--turns", "30", "--bucket", "10", stdout=out, stderr=err)
    report = json.loads(out.getvalue().strip().splitlines()[-1])
    assert [row["turns"] for row in report["buckets"]] == ["1-10", "11-20", "21-30"]
    for row in report["buckets"]:
        assert row["memory_ms_p50"] > 0 and row["memory_ms_p95"] >= row["memory_ms_p50"]
        # Every call counted: the speaker's and the judgement a model would be asked after the line.
        assert row["prompt_per_turn"] > row["full_definition_per_turn"] / 2
    # The memories and the history a model without memory would need both grow; the run is removed.
    first, last = report["buckets"][0], report["buckets"][-1]
    assert last["memories"] > first["memories"] and last["full_plus_history"] > first["full_plus_history"]
    assert "mem p95" in err.getvalue()
    assert not Simulation.objects.exists()
