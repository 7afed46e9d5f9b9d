"""`manage.py reembed`: every memory's and key's vector computed again with the configured model,
batch by batch with progress, and resumable where it stopped (the installed model re-embeds into
itself: the path a change of model takes)."""

from __future__ import annotations

from io import StringIO

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from memory.embedding.cache import embed_texts
from memory.embedding.reembed import state_path
from memory.models import Memory, MemoryKey
from memory.recalling.search import recall
from memory.services import bank_create, memory_create

pytestmark = pytest.mark.django_db

LINES = ["Ann keeps the spare key under the blue flowerpot.", "The ferry leaves at six every morning.",
         "Bo is allergic to cats.", "The bakery closes early on Sundays.", "Cy lost his watch at the harbour."]


def _old_model(bank):
    """Every vector as another model would have left it: one shared direction, nothing found by meaning."""
    other = np.zeros(384, dtype=np.float32)
    other[0] = 1.0
    for memory in Memory.objects.in_bank(bank):
        memory.embedding = other
        memory.save(update_fields=["embedding"])
    MemoryKey.objects.filter(memory__bank=bank).update(embedding=other)


def _run(*args) -> str:
    out = StringIO()
    call_command("reembed", *args, stdout=out)
    return out.getvalue()


def test_reembed_recomputes_every_vector_and_goes_on_where_it_stopped(user, settings, tmp_path):
    settings.VAR_DIR = tmp_path
    bank = bank_create(name="Flat", owner=user)
    other = bank_create(name="Elsewhere", owner=user)
    for text in LINES:
        memory_create(bank=bank, content=text, agent="Ann", kind="episodic", keys=[f"about: {text}"])
    untouched = memory_create(bank=other, content="Someone else's line.", agent="Zed", kind="episodic")
    _old_model(bank)
    _old_model(other)

    first = _run("--bank", str(bank.pk), "--batch", "2", "--limit", "3")
    assert "memories: 2 of 5 (40 %)" in first and "memories: 3 of 5 (60 %)" in first
    assert "run the same command again" in first and state_path(bank.pk).exists()
    done = [m for m in Memory.objects.in_bank(bank).order_by("pk") if m.embedding[0] != 1.0]
    assert len(done) == 3  # three written, the rest still the old model's

    second = _run("--bank", str(bank.pk), "--batch", "2")
    assert second.startswith("Resuming the re-embedding of bank") and "memories: 5 of 5 (100 %)" in second
    assert "keys: 5 of 5 (100 %)" in second and "Done" in second and not state_path(bank.pk).exists()
    for memory in Memory.objects.in_bank(bank):
        assert np.allclose(memory.embedding, embed_texts([memory.content])[0], atol=1e-5)
    for key in MemoryKey.objects.filter(memory__bank=bank):
        assert np.allclose(key.embedding, embed_texts([key.query])[0], atol=1e-5)
    assert recall(bank, "where is the spare key?", agent="Ann", k=1)[0].memory.content == LINES[0]
    untouched.refresh_from_db()
    assert untouched.embedding[0] == 1.0  # another bank is not this command's


def test_reembed_refuses_what_it_cannot_do_and_says_why(user, settings, tmp_path):
    settings.VAR_DIR = tmp_path
    with pytest.raises(CommandError, match="no memory bank 987654"):
        _run("--bank", "987654")
    bank = bank_create(name="Flat", owner=user)
    kept = memory_create(bank=bank, content=LINES[0], agent="Ann", kind="episodic")
    _old_model(bank)
    settings.EMBEDDING_DIM = 768  # a setting of another size than the model's vectors
    with pytest.raises(CommandError, match="gives 384-dimensional vectors; WONDA_EMBEDDING_DIM says 768. Nothing was changed"):
        _run("--bank", str(bank.pk))
    kept.refresh_from_db()
    assert kept.embedding[0] == 1.0 and not state_path(bank.pk).exists()


def test_the_local_models_package_is_a_setting_and_a_missing_one_is_said_plainly(settings):
    from memory.embedding import local
    from memory.embedding.errors import EmbeddingError

    assert local.model_path().is_dir()  # the default package, installed
    settings.EMBEDDING_PACKAGE = "no_such_embedding_package"
    with pytest.raises(EmbeddingError, match="package 'no_such_embedding_package' is not installed.*WONDA_EMBEDDING_PACKAGE"):
        local.model_path()
    settings.EMBEDDING_PACKAGE = "json"  # importable, but not a model
    with pytest.raises(EmbeddingError, match="has no get_model_path"):
        local.model_path()
