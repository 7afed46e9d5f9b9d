from collections import Counter

import numpy as np
import pytest

from memory.forming.chunking import chunk_text
from memory.models import Memory, MemoryKey
from memory.forming.seeding import seed_bank


def _gifted(bank, **kw):
    return Memory.objects.in_bank(bank).gifted().active().filter(**kw)


def test_chunking_packs_sentences_under_300_chars():
    from tests.memory.conftest import ALEX_BACKGROUND

    chunks = chunk_text(ALEX_BACKGROUND, 300)
    assert len(chunks) >= 2
    assert all(len(c) <= 300 for c in chunks)
    assert " ".join(chunks) == ALEX_BACKGROUND
    assert all(c.endswith(".") for c in chunks)  # cut between sentences, never inside one
    long = "word " * 200
    assert all(len(c) <= 300 for c in chunk_text(long, 300))


def test_a_sentence_too_long_for_one_chunk_is_cut_between_its_clauses_not_mid_phrase():
    sentence = ("She walked it, weeping, to a luthier in the Jordaan, old Mr Hoekstra, who asked her to play something "
                "on his workshop cello while he looked at the damage, listened to the whole sarabande, and then repaired "
                "her instrument for nothing, on condition that she come back every year and play for him on his birthday.")
    chunks = chunk_text(f"{sentence} She has gone every March since.", 300)
    assert all(len(c) <= 300 for c in chunks)
    assert chunks[0].endswith("for nothing,")
    assert chunks[1].startswith("on condition that") and "on his birthday." in chunks[1]
    # Nothing is lost at the cuts: a quotation's closing mark stays with its sentence.
    quoted = "She took her hands and said, 'One day I will steal you.' " * 8 + "Last October they played Ravel."
    assert " ".join(chunk_text(quoted, 300)) == quoted
    # A clause with no punctuation to cut at still fits, cut between words.
    assert all(len(c) <= 300 for c in chunk_text("a " * 400 + "end.", 300))


def test_seeding_a_full_character_yields_each_category_with_its_canonical_queries(seeded_bank, alex):
    from tests.memory.conftest import ALEX_BACKGROUND

    alex_memories = _gifted(seeded_bank, agent="Alex")
    by_category = Counter(alex_memories.values_list("category", flat=True))
    expected_chunks = len(chunk_text(ALEX_BACKGROUND, 300))
    assert by_category == {
        "identity": 1, "background": expected_chunks, "communication": 1, "decision_style": 1, "traits": 1,
        "skills": 1, "values": 1, "goals": 1, "knowledge": 1, "health": 1,
    }
    identity = alex_memories.get(category="identity")
    assert identity.kind == "character"
    assert identity.content.startswith("You are Alex, project manager.")
    assert "pragmatic, organised planner" in identity.content
    assert sorted(identity.keys.values_list("query", flat=True)) == sorted(
        ["who am I?", "what is my identity?", "describe myself", "what is my role here?", "what part do I play?"]
    )
    for chunk in alex_memories.filter(category="background"):
        assert len(chunk.content) <= 300
        assert set(chunk.keys.values_list("query", flat=True)) == {"what is my background?", "what is my history?"}
    assert set(alex_memories.get(category="communication").keys.values_list("query", flat=True)) == {
        "how do I communicate?", "how do I speak?", "what is my communication style?"
    }
    assert "organised, impatient, loyal" in alex_memories.get(category="traits").content
    knowledge = alex_memories.get(kind="character_knowledge")
    assert knowledge.about == "Jordan"
    assert "chef" in knowledge.content and "roommate" in knowledge.content
    assert set(knowledge.keys.values_list("query", flat=True)) == {
        "who is Jordan?", "what do I know about Jordan?", "describe Jordan"
    }
    # The lore entry's keys became canonical queries.
    assert set(alex_memories.get(category="health").keys.values_list("query", flat=True)) == {"allergy", "what can't I eat?"}


def test_scene_is_seeded_once_and_shared(seeded_bank):
    scene = _gifted(seeded_bank, kind="scene")
    assert sorted(scene.values_list("category", flat=True)) == ["atmosphere", "context", "location", "time"]
    assert set(scene.values_list("agent", flat=True)) == {""}
    assert scene.get(category="location").content.startswith("Location: Alex's apartment")
    assert set(scene.get(category="location").keys.values_list("query", flat=True)) == {
        "where am I?", "what is the location?", "describe the scene"
    }
    # Jordan knows Alex too, without a knowledge entry on the sheet.
    assert _gifted(seeded_bank, agent="Jordan", kind="character_knowledge", about="Alex").exists()


def test_seeding_twice_changes_nothing(seeded_bank, alex, jordan, scenario):
    before = sorted(Memory.objects.in_bank(seeded_bank).values_list("id", "content", "status"))
    keys_before = MemoryKey.objects.filter(memory__bank=seeded_bank).count()
    result = seed_bank(bank=seeded_bank, characters=[alex, jordan], scenario=scenario)
    assert result["created"] == 0 and result["archived"] == 0
    assert sorted(Memory.objects.in_bank(seeded_bank).values_list("id", "content", "status")) == before
    assert MemoryKey.objects.filter(memory__bank=seeded_bank).count() == keys_before
    seeded_bank.refresh_from_db()
    assert seeded_bank.seed_status == "done" and seeded_bank.seed_percent == 100


def test_an_edit_reseeds_only_that_character_and_keeps_earned_memories(seeded_bank, alex, jordan):
    from memory.forming.capture import remember_utterance

    earned = remember_utterance(bank=seeded_bank, speaker="Jordan", text="Pasta tonight?", turn=1, listeners=["Alex", "Jordan"])
    jordan_before = sorted(_gifted(seeded_bank, agent="Jordan").values_list("id", flat=True))
    scene_before = sorted(_gifted(seeded_bank, kind="scene").values_list("id", flat=True))
    alex.communication_style = "Soft-spoken and careful; never raises a voice."
    seed_bank(bank=seeded_bank, characters=[alex], scenario=None)

    communication = _gifted(seeded_bank, agent="Alex", category="communication")
    assert [m.content for m in communication] == ["Soft-spoken and careful; never raises a voice."]
    assert Memory.objects.in_bank(seeded_bank).filter(agent="Alex", category="communication", status="archived").count() == 1
    assert _gifted(seeded_bank, agent="Alex", category="identity").count() == 1  # no duplicates
    assert sorted(_gifted(seeded_bank, agent="Jordan").values_list("id", flat=True)) == jordan_before
    assert sorted(_gifted(seeded_bank, kind="scene").values_list("id", flat=True)) == scene_before
    assert Memory.objects.filter(pk__in=[m.pk for m in earned], status="active").count() == 2


def test_banks_are_isolated(seeded_bank, alex):
    from memory.services import bank_create

    other = bank_create(name="other")
    seed_bank(bank=other, characters=[alex], scenario=None)
    assert _gifted(other, agent="Jordan").count() == 0
    assert _gifted(seeded_bank, agent="Jordan").count() > 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_seed_task_runs_on_a_real_worker_with_progress(celery_worker, alex, jordan, scenario, django_capture_on_commit_callbacks):
    import time

    from memory.models import MemoryBank
    from memory.forming.seeding import bank_request_seed
    from memory.services import bank_create

    bank = bank_create(name="worker bank")
    bank = bank_request_seed(bank=bank, characters=[alex, jordan], scenario=scenario)
    assert bank.seed_status == "pending" and bank.seed_total > 0 and bank.seed_percent == 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        bank.refresh_from_db()
        if bank.seed_status in {"done", "failed"}:
            break
        time.sleep(0.3)
    assert bank.seed_status == "done", bank.seed_error
    assert bank.seed_percent == 100
    assert _gifted(bank, agent="Alex", category="identity").count() == 1
    MemoryBank.objects.filter(pk=bank.pk).delete()


def test_texts_batched_by_length_embed_as_the_model_does():
    """memory.embedding.local groups a call's texts by token length (less padding); each vector is
    the model's own for that text, in the caller's order."""
    from memory.embedding import local

    texts = ["Who am I?", "Mara grew up in a lighthouse on the northern cape, where her father kept the lamp "
             "burning through forty winters and taught her to read the weather in the gulls' flight.",
             "What do I value?", "Goals", "A longer sentence about the harbour and the boats in it.",
             "Mara distrusts the council. " * 12]
    got = local.encode(texts, batch_size=2)
    expected = local.load_model().encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
    assert got.shape == expected.shape
    assert np.allclose(got, expected, atol=1e-5)


def test_a_character_knows_its_own_public_face_as_the_others_do(bank, alex, jordan, scenario):
    """What the others know of me (my public face) is mine to recall too: query_self's identity and
    a search for what people say of me find it; the others still know it of me."""
    from dataclasses import replace

    from memory.recalling.tools import ToolContext, call_tool

    alex = replace(alex, public_face="Alex is the friend who always ends up making the booking.")
    seed_bank(bank=bank, characters=[alex, jordan], scenario=scenario)
    own = _gifted(bank, agent="Alex", category="identity").values_list("content", flat=True)
    assert "How others see me: Alex is the friend who always ends up making the booking." in own
    ctx = ToolContext(bank=bank, agent="Alex", current_turn=3)
    identity = call_tool("query_self", {"aspect": "identity"}, context=ctx).response["memories"]
    assert any("always ends up making the booking" in m["content"] for m in identity)
    whole = [m["content"] for m in call_tool("query_self", {}, context=ctx).response["memories"]]
    assert whole[0].startswith("You are Alex") and whole[1].startswith("How others see me:")
    asked = call_tool("query_memory", {"query": "what do people say about me?"}, context=ctx).response["memories"]
    assert "always ends up making the booking" in asked[0]["content"]
    theirs = _gifted(bank, agent="Jordan", about="Alex").get()
    assert "always ends up making the booking" in theirs.content
    # A sheet without one gets no empty memory.
    assert not _gifted(bank, agent="Jordan", content__startswith="How others see me").exists()
