"""`evaluate_agents --answer`: each probe put to its agent as a line said in the scene, the model's
reply graded against the gold answer (its words, or a judge model)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connections

from chronicle.simulation.measuring.answers import asker_for, spoken_to, word_share
from devtools.fake_llm import ok

FILE = Path(__file__).resolve().parents[3] / "fixtures" / "probes" / "every_kind.json"


@pytest.mark.parametrize("reply, gold, right", [
    ("It came to 1,340 euro in the end, God help me.", "One thousand three hundred and forty euro", True),
    ("On the seventh of May, I think it was.", "7 May 2023", True),
    ("She painted a sunrise over the lake.", "a lake sunrise", True),
    ("Thirty pounds a head, that's what Alex said.", "thirty pounds", True),
    ("It was forty pounds, I'm sure of it.", "thirty pounds", False),
    ("I couldn't tell you, love.", "Bologna", False),
])
def test_a_reply_is_right_when_it_gives_the_gold_answer_in_any_words(reply, gold, right):
    assert (word_share(reply, gold) >= 0.5) is right


def test_the_question_is_said_to_the_agent_by_someone_it_does_not_name():
    assert spoken_to("What did I tell Declan? Was I there when my boat sank?") == \
        "What did you tell Declan? Were you there when your boat sank?"
    assert spoken_to("What am I like on a boat?") == "What are you like on a boat?"
    transcript = [(1, "Sam", "Hi."), (2, "Jordan", "Hello."), (3, "Alex", "Hey.")]
    # The last other to speak asks, unless the question is about them.
    assert asker_for("Alex", ["Sam", "Jordan"], transcript, "What did Sam say?") == "Jordan"
    assert asker_for("Alex", ["Sam", "Jordan"], transcript, "What did you say?") == "Jordan"
    assert asker_for("Alex", ["Sam"], transcript, "What did Sam say?") == "A friend"


@pytest.mark.worker
def test_each_probe_is_answered_in_the_scene_and_graded(django_db_setup, django_db_blocker, server, settings):
    """A model that knows half the answers: the half it gives are graded right; a judge that says
    "no" to one of them overrules its words."""
    probes = json.loads(FILE.read_text())["probes"]
    golds = [p["expect"] for p in probes if p.get("expect")]
    settings.LLM_BASE_URL, settings.LLM_MODEL = server.base_url, "fake-model"
    replies = []
    for number, gold in enumerate(golds):
        knows = number % 2 == 0
        replies.append(ok(f"Aye, {gold}, as I remember it." if knows else "I couldn't tell you, love."))
        replies.append(ok("no" if number == 0 or not knows else "yes"))  # the judge's verdict
    server.script(*replies)
    out, err = io.StringIO(), io.StringIO()
    with django_db_blocker.unblock():
        try:
            call_command("evaluate_agents", str(FILE), "--answer", "openai", "--judge", stdout=out, stderr=err)
        finally:
            print(err.getvalue())
            connections.close_all()
    answers = json.loads(out.getvalue().strip().splitlines()[-1])["answers"]
    right = len(range(0, len(golds), 2)) - 1
    assert answers["n"] == len(golds) and answers["graded_by"] == "a judge model"
    assert answers["accuracy"] == round(right / len(golds), 4)
    assert answers["hit_at_k_same_probes"] is not None and answers["errors"] == []
    # The agent was asked in its scene: its own prompt, the question the last line, said by another.
    asked = [r for r in server.requests if r["messages"][0]["role"] == "system"]
    assert len(asked) == len(golds)
    alex_about_jordan = next(r for r in asked if "What do you know about Jordan?" in json.dumps(r["messages"]))
    conversation = "\n".join(m["content"] or "" for m in alex_about_jordan["messages"] if m["role"] == "user")
    assert "[turn 13] Sam: What do you know about Jordan?" in conversation
    assert "It is your turn (Alex)" in conversation
    assert "You are Alex" in alex_about_jordan["messages"][0]["content"]
    judged = [r for r in server.requests if r["messages"][0]["role"] == "user"]
    assert len(judged) == len(golds) and "Expected answer: " in judged[0]["messages"][0]["content"]


def test_judge_needs_a_model():
    with pytest.raises(CommandError, match="--judge grades with a model"):
        call_command("evaluate_agents", str(FILE), "--answer", "scripted", "--judge")


RECORDED = Path(__file__).resolve().parents[3] / "fixtures" / "recorded" / "harbour_winter_answers_model.json"


def test_a_models_recorded_answers_grade_as_they_did_and_show_what_the_briefing_gained():
    """A capable model's replies to the long scene's probes, before and after older lines were
    brought back (kept in the conversation, then sent with their call alone): graded again by
    today's rule, each run's accuracy is what was recorded."""
    from chronicle.simulation.measuring.answers import WORDS_NEEDED, gold_of
    from chronicle.simulation.measuring.probes import parse

    recording = json.loads(RECORDED.read_text())
    scene = json.loads((Path(__file__).resolve().parents[4] / recording["file"]).read_text())
    found = {p.number: p for p in parse(scene["probes"], cast=[c["name"] for c in scene["characters"]],
                                         turns=len(scene["script"]))}
    accuracy, first = {}, {}
    for run in recording["runs"]:
        right = {r["probe"]: max(word_share(r["reply"], g) for g in (gold_of(found[r["probe"]]), *found[r["probe"]].expected))
                 >= WORDS_NEEDED for r in run["replies"] if found[r["probe"]].question == r["question"]}
        assert len(right) == len(run["replies"])
        accuracy[run["name"]] = round(sum(right.values()) / len(right), 4)
        assert accuracy[run["name"]] == run["accuracy_by_words"]
        asked_then = [ok for number, ok in right.items() if number <= 58]  # the 53 asked in every run
        first[run["name"]] = round(sum(asked_then) / len(asked_then), 4)
    # Older lines brought back: kept in the conversation, or (as shipped) sent with their call alone.
    assert first["brought_back"] - first["before"] >= 0.25
    assert first["this_call"] - first["before"] >= 0.25


def test_a_models_recorded_answers_on_short_scenes_grade_as_they_did():
    """The same on a dev and a holdout scene, where nearly every answer is in the window: what the
    word grade calls right is what was recorded (0.70; the notes say why meaning would score more)."""
    from chronicle.simulation.measuring.answers import WORDS_NEEDED, gold_of
    from chronicle.simulation.measuring.probes import parse

    recording = json.loads((RECORDED.parent / "short_scenes_answers_model.json").read_text())
    right = []
    for scene_file in recording["files"]:
        scene = json.loads((Path(__file__).resolve().parents[4] / scene_file["file"]).read_text())
        found = {p.number: p for p in parse(scene["probes"], cast=[c["name"] for c in scene["characters"]],
                                            turns=len(scene["script"]))}
        for reply in scene_file["replies"]:
            probe = found[reply["probe"]]
            assert probe.question == reply["question"]
            right.append(max(word_share(reply["reply"], g) for g in (gold_of(probe), *probe.expected)) >= WORDS_NEEDED)
    assert len(right) == 101 and round(sum(right) / len(right), 4) == recording["accuracy_by_words"]
