"""evaluate_retrieval: LoCoMo-format conversations measured through query_memory's own search."""

import json
from io import StringIO

from django.core.management import call_command

from memory.measuring.evaluation import parse_sample
from memory.models import Memory, MemoryBank

SAMPLE = {
    "sample_id": "tiny-1",
    "conversation": {
        "speaker_a": "Anna", "speaker_b": "Ben",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Anna", "dia_id": "D1:1", "text": "I adopted a grey kitten named Pixel last week."},
            {"speaker": "Ben", "dia_id": "D1:2", "text": "Lovely! I just started learning the cello."},
            {"speaker": "Anna", "dia_id": "D1:3", "text": "My sister moved to Lisbon for a new job."},
        ],
        "session_2_date_time": "10:37 am on 27 June, 2023",
        "session_2": [
            {"speaker": "Ben", "dia_id": "D2:1", "text": "My cello teacher says I'm improving fast."},
            {"speaker": "Anna", "dia_id": "D2:2", "text": "Look what Pixel did this morning!",
             "blip_caption": "a grey kitten next to a spilled coffee mug"},
            {"speaker": "Ben", "dia_id": "D2:3", "text": "I'm training for a half marathon in October."},
        ],
    },
    "qa": [
        {"question": "What is the name of Anna's kitten?", "answer": "Pixel", "evidence": ["D1:1"], "category": 4},
        # Malformed evidence, as in the corpus: one entry holding two ids.
        {"question": "Which instrument does Ben play?", "answer": "cello", "evidence": ["D1:2; D2:1"], "category": 1},
        # An id that is not in the conversation is dropped.
        {"question": "Where did Anna's sister move?", "answer": "Lisbon", "evidence": ["D1:3", "D9:9"], "category": 4},
        {"question": "When is Ben's half marathon?", "answer": "October", "evidence": ["D2:3"], "category": 2},
        {"question": "What is Ben's cat called?", "adversarial_answer": "Pixel", "evidence": ["D1:1"], "category": 5},
        {"question": "What did they eat?", "answer": "", "evidence": [], "category": 4},
    ],
}


def test_parsing_keeps_turn_order_captions_and_real_evidence():
    conv = parse_sample(SAMPLE)
    assert [t.dia_id for t in conv.turns] == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2", "D2:3"]
    assert conv.turns[4].text == "Look what Pixel did this morning! [shares a grey kitten next to a spilled coffee mug]"
    assert conv.turns[3].date == "10:37 am on 27 June, 2023"
    assert [(q.category, q.evidence) for q in conv.questions] == [
        (4, {"D1:1"}), (1, {"D1:2", "D2:1"}), (4, {"D1:3"}), (2, {"D2:3"})]


def test_evaluation_gives_the_expected_recall(db, tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps([SAMPLE]))
    out = StringIO()
    call_command("evaluate_retrieval", str(path), "--k", "1", "3", stdout=out, stderr=StringIO())
    lines = out.getvalue().strip().splitlines()
    figures = json.loads(lines[-1])
    assert set(figures) >= {"questions", "recall", "by_category", "cosine", "seconds"}
    assert figures["questions"] == 4
    # Each answer's line comes first; the instrument has two evidence lines, so R@1 is 1/2 there.
    assert figures["recall"] == {"1": 0.875, "3": 1.0}
    assert figures["by_category"] == {"1": {"1": 0.5, "3": 1.0}, "2": {"1": 1.0, "3": 1.0}, "4": {"1": 1.0, "3": 1.0}}
    assert set(figures["cosine"]) == {"1", "3"} and figures["cosine"]["3"] <= 1.0
    assert any(line.startswith("plain cosine") for line in lines)
    # The banks are gone afterwards.
    assert not MemoryBank.objects.filter(name__startswith="evaluate_retrieval").exists()
    assert not Memory.objects.filter(kind="episodic").exists()


def test_the_bank_is_built_through_the_capture_path(db):
    from memory.measuring.evaluation import LISTENER, _drop_bank, build_bank

    bank, dia_of = build_bank(parse_sample(SAMPLE))
    memories = list(Memory.objects.in_bank(bank).order_by("turn"))
    assert [m.turn for m in memories] == [1, 2, 3, 4, 5, 6] and {m.agent for m in memories} == {LISTENER}
    assert memories[0].content == "Anna said: I adopted a grey kitten named Pixel last week."
    assert memories[4].metadata == {"dia_id": "D2:2", "session": 2, "story_time": "10:37 am on 27 June, 2023"}
    assert [dia_of[m.pk] for m in memories][:2] == ["D1:1", "D1:2"]
    _drop_bank(bank.pk)
    assert not MemoryBank.objects.filter(pk=bank.pk).exists()


def test_split_reports_each_conversation(db, tmp_path):
    other = json.loads(json.dumps(SAMPLE)) | {"sample_id": "tiny-2"}
    other["qa"] = [qa for qa in other["qa"] if qa["category"] == 4]  # single-hop only
    path = tmp_path / "two.json"
    path.write_text(json.dumps([SAMPLE, other]))
    out = StringIO()
    call_command("evaluate_retrieval", str(path), "--k", "1", "3", "--split", stdout=out, stderr=StringIO())
    text = out.getvalue()
    figures = json.loads(text.strip().splitlines()[-1])
    assert figures["by_conversation"]["tiny-1"]["questions"] == 4
    assert figures["by_conversation"]["tiny-2"] == {"questions": 2, "recall": {"1": 1.0, "3": 1.0},
                                                    "by_category": {"4": {"1": 1.0, "3": 1.0}}}
    assert "tiny-2 (2 questions)" in text and "  multi-hop" in text and "  single-hop" in text


def test_an_unmigrated_database_is_told_what_to_do(db, tmp_path, monkeypatch):
    from django.core.management.base import CommandError
    from django.db.migrations.executor import MigrationExecutor

    monkeypatch.setattr(MigrationExecutor, "migration_plan", lambda self, targets: [("memory", "0001")])
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps([SAMPLE]))
    try:
        call_command("evaluate_retrieval", str(path), stdout=StringIO(), stderr=StringIO())
    except CommandError as exc:
        assert "run `manage.py migrate`" in str(exc)
    else:
        raise AssertionError("evaluate_retrieval ran on a database it says is not set up")
