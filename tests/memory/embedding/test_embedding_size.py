"""A model of another size than the local one (768-d, as nomic-embed-text and all-mpnet-base-v2
make): the vector columns take the deployment's size (WONDA_EMBEDDING_DIM), a worker refuses a model
that does not fit in plain words, `manage.py reembed` moves every bank to another model and size and
back, and an embedding server is asked the way it speaks (OpenAI's or Ollama's).

No 768-d model is at hand offline: devtools.fake_embedder serves one over real HTTP."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from devtools.fake_embedder import FakeEmbedder, hashed_vector
from memory import embedding
from memory.embedding import http
from memory.embedding.columns import column_dimension, resize_empty
from memory.forming.seeding import seed_bank
from memory.models import EmbeddingCache, Memory, MemoryKey
from memory.recalling.search import recall

pytestmark = pytest.mark.django_db

ALLERGY = "Alex is allergic to shellfish."


@pytest.fixture
def wide():
    server = FakeEmbedder(dim=768).start()
    yield server
    server.stop()


def _use_wide(settings, server) -> None:
    settings.EMBEDDING_BACKEND, settings.EMBEDDING_URL = "openai", server.base_url
    settings.EMBEDDING_MODEL, settings.EMBEDDING_DIM = "fake-mpnet", 768


def _use_local(settings) -> None:
    settings.EMBEDDING_BACKEND, settings.EMBEDDING_URL = "local", ""
    settings.EMBEDDING_MODEL, settings.EMBEDDING_DIM = "all-MiniLM-L6-v2", 384


def _reembed(*args) -> str:
    out = StringIO()
    call_command("reembed", *args, stdout=out)
    return out.getvalue()


def _sizes(bank) -> set[int]:
    return {len(m.embedding) for m in Memory.objects.in_bank(bank)} | \
        {len(k.embedding) for k in MemoryKey.objects.filter(memory__bank=bank)}


def test_a_768_bank_seeds_recalls_and_moves_to_the_local_model_and_back(settings, tmp_path, wide, bank, alex, jordan,
                                                                       scenario):
    settings.VAR_DIR = tmp_path
    _use_wide(settings, wide)
    with connection.cursor() as cursor:  # what `migrate` does on a database with no memories yet
        assert resize_empty(cursor, 768) and column_dimension() == 768
    seed_bank(bank=bank, characters=[alex, jordan], scenario=scenario)
    assert _sizes(bank) == {768}
    assert recall(bank, "shellfish allergy", agent="Alex", k=1)[0].memory.content == ALLERGY

    _use_local(settings)
    with pytest.raises(CommandError, match="every bank moves together; run `manage.py reembed` without --bank"):
        _reembed("--bank", str(bank.pk))
    partly = _reembed("--limit", "5")
    assert "run the same command again" in partly and column_dimension() == 768  # nothing moved yet
    # A line stored meanwhile by a process still on the old model gets its new vector at the swap.
    late = Memory.objects.create(bank=bank, agent="Alex", kind="episodic", content="Jordan said the harbour bar is shut.",
                                 embedding=hashed_vector("Jordan said the harbour bar is shut.", 768))
    out = _reembed()
    assert out.startswith("Resuming")
    assert "Done: every bank re-embedded with local:all-MiniLM-L6-v2; the tables now hold 384-d vectors" in out
    assert column_dimension() == 384 and _sizes(bank) == {384}
    assert not EmbeddingCache.objects.exclude(model="local:all-MiniLM-L6-v2").exists()  # the old size's cache is gone
    # The local model finds it by meaning, where the hashed words of the fake one could not.
    assert recall(bank, "what food makes Alex ill?", agent="Alex", k=1)[0].memory.content == ALLERGY
    assert recall(bank, "is the pub by the port open?", agent="Alex", k=1)[0].memory.pk == late.pk

    _use_wide(settings, wide)
    out = _reembed("--batch", "7")
    assert "the tables now hold 768-d vectors" in out and "memories: 7 of" in out
    assert column_dimension() == 768 and _sizes(bank) == {768}
    assert recall(bank, "shellfish allergy", agent="Alex", k=1)[0].memory.content == ALLERGY
    assert embedding.validate_model()["dimension"] == 768  # the worker starts on it


def test_a_model_that_does_not_fit_stops_the_worker_and_says_what_to_do(settings, wide):
    _use_wide(settings, wide)
    settings.EMBEDDING_DIM = 384
    with pytest.raises(embedding.EmbeddingConfigError, match=(
            r"The embedding model openai:fake-mpnet makes 768-d vectors but WONDA_EMBEDDING_DIM is 384: "
            r"set WONDA_EMBEDDING_DIM=768 \(then `manage.py reembed` moves the stored memories to it\)")):
        embedding.validate_before_fork()
    settings.EMBEDDING_DIM = 768  # the setting follows the model, but the stored memories are 384-d
    with pytest.raises(embedding.EmbeddingConfigError, match=(
            r"The stored memories hold 384-d vectors, another model's; openai:fake-mpnet makes 768-d. "
            r"Run `manage.py reembed` \(with the runs stopped\)")):
        embedding.validate_model()
    with pytest.raises(CommandError, match="WONDA_EMBEDDING_DIM says 384. Nothing was changed: set WONDA_EMBEDDING_DIM=768"):
        settings.EMBEDDING_DIM = 384
        _reembed()
    assert column_dimension() == 384


@pytest.mark.parametrize("backend, ways, first", [
    ("openai", ("ollama",), "/api/embed"),                # the openai backend pointed at an Ollama
    ("openai", ("ollama-legacy",), "/api/embeddings"),    # ... an Ollama before /api/embed
    ("ollama", ("openai",), "/v1/embeddings"),            # the ollama backend pointed at an OpenAI-style server
    ("ollama", ("ollama",), "/api/embed"),
])
def test_an_embedding_server_is_asked_the_way_it_speaks(settings, backend, ways, first):
    server = FakeEmbedder(dim=768, ways=ways).start()
    try:
        settings.EMBEDDING_BACKEND, settings.EMBEDDING_MODEL = backend, "fake-mpnet"
        settings.EMBEDDING_URL = server.base_url if backend == "openai" else server.root
        vectors = http.encode(["the ferry leaves at six", "the ferry"])
        assert vectors.shape == (2, 768) and vectors[0] @ vectors[1] > 0.5
        asked = len(server.paths)
        http.encode(["again"])
        assert all(path == first for path in server.paths[asked:])  # the way that worked is kept
    finally:
        server.stop()


def test_a_server_that_speaks_no_embedding_api_is_said_plainly(settings):
    server = FakeEmbedder(dim=768, ways=()).start()
    try:
        settings.EMBEDDING_BACKEND, settings.EMBEDDING_URL = "openai", server.base_url
        with pytest.raises(embedding.EmbeddingError, match="speaks neither OpenAI's nor Ollama's embedding API"):
            http.encode(["hello"])
    finally:
        server.stop()
