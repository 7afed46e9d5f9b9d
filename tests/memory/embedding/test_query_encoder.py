"""The search-time query encoder: ONNX Runtime (int8 by default) for a search's few texts, torch
for everything stored; never an int8 vector in the embedding cache table."""

from __future__ import annotations

import logging
import threading
import time

import numpy as np
import pytest

from memory import embedding
from memory.embedding import cache
from memory.embedding import local, query_encoder
from memory.models import EmbeddingCache

QUERIES = [
    "What did Alex decide about dinner?",
    "who am I?",
    "When did Caroline go to the LGBTQ support group, and how did it make her feel afterwards?",
]
LONG = "The ferry schedule ruled everyone's week in the small coastal town. " * 40  # > 256 tokens: truncated


def _torch(texts):
    return local.encode(list(texts), 64)


def _no_torch(*_args, **_kwargs):
    raise AssertionError("the torch path was used for a query")


def _cosines(a, b):
    return (np.asarray(a) * np.asarray(b)).sum(axis=1)


def test_onnx_query_vectors_equal_torch(settings, monkeypatch):
    settings.EMBEDDING_QUERY_ENCODER = "onnx"
    texts = QUERIES[:2] + [LONG]
    reference = _torch(texts)
    model_dir = local.model_path()
    assert local.load_model().max_seq_length == query_encoder._max_seq_length(model_dir) == 256
    monkeypatch.setattr(local, "encode", _no_torch)  # proves ONNX Runtime answered
    vectors = embedding.encode(texts, query=True)
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, reference, atol=1e-5)
    assert embedding.model_name(query=True) == embedding.model_name()  # the same vectors: one cache name


def test_int8_query_vectors_are_close_to_torch_but_quantised(settings, monkeypatch):
    settings.EMBEDDING_QUERY_ENCODER = "int8"
    reference = _torch(QUERIES)
    with monkeypatch.context() as patch:
        patch.setattr(local, "encode", _no_torch)
        vectors = embedding.encode(QUERIES, query=True)
    # int8 kernels round differently from one CPU to another: 0.977–0.996 seen across two machines.
    assert (_cosines(vectors, reference) >= 0.97).all()
    assert np.abs(vectors - reference).max() > 1e-4  # really the int8 graph, not torch or fp32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embedding.model_name(query=True).endswith("#int8")
    # More than SMALL_CALL texts is not an interactive query: the full-precision path answers.
    many = QUERIES + ["one more question", "and another"]
    assert len(many) > embedding.SMALL_CALL
    assert embedding.model_name(query=True, count=len(many)) == embedding.model_name()
    np.testing.assert_allclose(embedding.encode(many, query=True), embedding.encode(many), atol=1e-6)


@pytest.mark.django_db
def test_an_int8_query_vector_is_never_stored_as_full_precision(settings):
    settings.EMBEDDING_QUERY_ENCODER = "int8"
    text = "Which bistro did Alex wait tables at while studying engineering?"
    sha = cache.text_sha(text)
    reference = _torch([text])[0]
    calls = cache.stats["model_calls"]

    query_vector = cache.embed_one(text, query=True)  # store=True: still not written, it is int8
    assert cache.stats["model_calls"] == calls + 1
    assert float(query_vector @ reference) >= 0.98 and np.abs(query_vector - reference).max() > 1e-4
    assert not EmbeddingCache.objects.filter(sha256=sha).exists()
    np.testing.assert_array_equal(cache.embed_one(text, query=True), query_vector)  # this process keeps it
    assert cache.stats["model_calls"] == calls + 1

    stored = cache.embed_one(text)  # a memory with the same text: the full-precision vector
    np.testing.assert_allclose(stored, reference, atol=1e-6)
    row = EmbeddingCache.objects.get(sha256=sha)
    assert row.model == embedding.model_name()
    np.testing.assert_allclose(np.asarray(row.vector, dtype=np.float32), reference, atol=1e-6)

    # From now on a query for that text gets the better, full-precision vector, from either layer.
    np.testing.assert_allclose(cache.embed_one(text, query=True), reference, atol=1e-6)
    cache.clear_local()
    np.testing.assert_allclose(cache.embed_one(text, query=True), reference, atol=1e-6)
    assert cache.stats["model_calls"] == calls + 2


@pytest.mark.django_db
def test_a_query_encoded_beside_the_keyword_side_is_the_vector_embed_one_gives(settings):
    """query_memory encodes its query in a thread while it reads BM25 statistics: the vector is the one
    embed_one would give, the table's full-precision one once the text is stored."""
    settings.EMBEDDING_QUERY_ENCODER = "int8"
    text = "Which harbour did Oren fish from before the winter storm?"
    cache.clear_local()
    threaded = cache.PendingQuery(text).result()
    cache.clear_local()
    np.testing.assert_array_equal(threaded, cache.embed_one(text, store=False, query=True))
    assert not EmbeddingCache.objects.filter(sha256=cache.text_sha(text)).exists()  # int8: never stored

    stored = cache.embed_one(text)  # a memory with that text: full precision, in the table
    cache.clear_local()
    np.testing.assert_allclose(cache.PendingQuery(text).result(), stored, atol=1e-6)
    assert np.abs(stored - threaded).max() > 1e-4  # and not the int8 one


@pytest.mark.django_db
def test_fp32_onnx_query_vectors_may_be_stored(settings):
    settings.EMBEDDING_QUERY_ENCODER = "onnx"
    text = "Where did Jordan train as a chef?"
    vector = cache.embed_one(text, query=True)
    row = EmbeddingCache.objects.get(sha256=cache.text_sha(text))
    assert row.model == embedding.model_name()
    np.testing.assert_allclose(np.asarray(row.vector, dtype=np.float32), vector, atol=1e-6)


def test_a_lines_stored_vector_comes_from_onnx_fp32_and_equals_torch(settings, monkeypatch):
    """A few texts to store (a turn's line) skip torch: ONNX fp32 gives the same vectors, faster;
    never the int8 encoder, whatever WONDA_QUERY_ENCODER says (short of torch)."""
    settings.EMBEDDING_QUERY_ENCODER = "int8"
    texts = ["Alex said: Shall we try Bella's at seven?", LONG]
    reference = _torch(texts)
    monkeypatch.setattr(local, "encode", _no_torch)
    np.testing.assert_allclose(embedding.encode(texts), reference, atol=1e-5)


def test_a_failing_onnx_session_still_stores_the_line_through_torch(settings, monkeypatch):
    class Broken:
        def encode(self, texts):
            raise RuntimeError("onnxruntime fell over")

    monkeypatch.setattr(query_encoder, "_query_state", {"onnx": Broken()})
    reference = _torch(QUERIES[:1])
    np.testing.assert_allclose(embedding.encode(QUERIES[:1]), reference, atol=1e-6)
    assert query_encoder._query_state["onnx"] is None  # disabled after one failure, with a warning


def test_torch_setting_uses_torch(settings, monkeypatch):
    settings.EMBEDDING_QUERY_ENCODER = "torch"
    reference = _torch(QUERIES)

    def no_onnx(variant):
        raise AssertionError(f"ONNX Runtime ({variant}) was used with WONDA_QUERY_ENCODER=torch")

    monkeypatch.setattr(query_encoder, "_query_encoder", no_onnx)
    np.testing.assert_array_equal(embedding.encode(QUERIES, query=True), reference)
    assert embedding.model_name(query=True) == embedding.model_name()
    assert embedding.warm_query_encoder() == "torch"


def test_a_broken_export_falls_back_to_torch(settings, monkeypatch, tmp_path, caplog):
    settings.EMBEDDING_QUERY_ENCODER = "int8"
    monkeypatch.setattr(query_encoder, "_query_state", {})  # a fresh process: nothing loaded yet
    monkeypatch.setattr(query_encoder, "_models_dir", lambda: tmp_path / "models")  # no exported file there
    exports = []

    def broken_export(path):
        exports.append(path)
        path.write_bytes(b"half a graph")
        raise RuntimeError("the exporter broke")

    monkeypatch.setattr(query_encoder, "_export_onnx", broken_export)
    reference = _torch(QUERIES)
    assert embedding.model_name(query=True).endswith("#int8")  # not known to fail before it is tried
    with caplog.at_level(logging.WARNING, logger="memory.embedding"):
        first = embedding.encode(QUERIES, query=True)
        second = embedding.encode(QUERIES[:1], query=True)
    np.testing.assert_allclose(first, reference, atol=1e-6)
    np.testing.assert_allclose(second, reference[:1], atol=1e-6)
    assert len(exports) == 1  # tried once per process, not on every query
    warnings = [r for r in caplog.records if "the exporter broke" in r.getMessage()]
    assert len(warnings) == 1
    assert embedding.model_name(query=True) == embedding.model_name()  # torch vectors: a full-precision name
    assert [p.name for p in (tmp_path / "models").iterdir() if not p.name.endswith(".lock")] == []  # no partial file
    assert embedding.validate_model()["query_encoder"] == "torch"  # the worker still starts


def test_a_failing_session_falls_back_to_torch(settings, monkeypatch, caplog):
    settings.EMBEDDING_QUERY_ENCODER = "int8"

    class Broken:
        calls = 0

        def encode(self, texts):
            Broken.calls += 1
            raise RuntimeError("onnxruntime fell over")

    monkeypatch.setattr(query_encoder, "_query_state", {"int8": Broken()})
    reference = _torch(QUERIES[:2])
    with caplog.at_level(logging.WARNING, logger="memory.embedding"):
        np.testing.assert_allclose(embedding.encode(QUERIES[:2], query=True), reference, atol=1e-6)
        np.testing.assert_allclose(embedding.encode(QUERIES[:2], query=True), reference, atol=1e-6)
    assert Broken.calls == 1
    assert len([r for r in caplog.records if "fell over" in r.getMessage()]) == 1
    assert embedding.model_name(query=True) == embedding.model_name()


def test_concurrent_starts_export_once_and_atomically(monkeypatch, tmp_path):
    """Several processes (here threads, each with its own lock file handle) ask for the file at once."""
    monkeypatch.setattr(query_encoder, "_models_dir", lambda: tmp_path / "models")
    exports = []
    payload = b"onnx" * 100_000

    def slow_export(path):
        exports.append(path)
        with open(path, "wb") as fh:
            for i in range(0, len(payload), 40_000):
                fh.write(payload[i:i + 40_000])
                fh.flush()
                time.sleep(0.01)

    monkeypatch.setattr(query_encoder, "_export_onnx", slow_export)
    results, seen = [], []

    def start():
        path = query_encoder._onnx_file("onnx")
        seen.append(path.read_bytes() == payload)
        results.append(path)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(exports) == 1 and len(set(results)) == 1 and all(seen)
    assert results[0].name.endswith("-fp32.onnx") and exports[0] != results[0]  # written aside, then renamed
    assert sorted(p.name for p in results[0].parent.iterdir() if not p.name.endswith(".lock")) == [results[0].name]


def test_a_changed_model_gets_a_new_file_name(tmp_path):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    weights = model_dir / "model.safetensors"
    weights.write_bytes(b"weights v1")
    first = query_encoder._onnx_stem(model_dir)
    assert query_encoder._onnx_stem(model_dir) == first
    weights.write_bytes(b"weights v2, longer")
    assert query_encoder._onnx_stem(model_dir) != first
    other = tmp_path / "elsewhere" / "model"
    other.mkdir(parents=True)
    (other / "model.safetensors").write_bytes(b"weights v2, longer")
    assert query_encoder._onnx_stem(other) != query_encoder._onnx_stem(model_dir)


def test_validate_model_warms_the_query_encoder(settings, monkeypatch):
    settings.EMBEDDING_QUERY_ENCODER = "int8"
    monkeypatch.setattr(query_encoder, "_query_state", {})
    info = embedding.validate_model()
    assert info["dimension"] == 384 and info["query_encoder"] == "int8"
    assert isinstance(query_encoder._query_state["int8"], query_encoder._OnnxQueryEncoder)
    assert query_encoder._query_state["int8"].path.name.endswith("-int8.onnx")


def test_a_restarted_worker_opens_its_checked_files_without_torch(settings, monkeypatch):
    """The first warm-up checks each file against torch and marks it; a worker started again (a fresh
    process) opens the marked files and never loads torch: it is back in seconds."""
    settings.EMBEDDING_QUERY_ENCODER = "int8"
    monkeypatch.setattr(query_encoder, "_query_state", {})
    assert embedding.warm_query_encoder() == "int8"
    files = [query_encoder._query_state[v].path for v in ("int8", "onnx")]
    assert all(query_encoder._checked_mark(path).exists() for path in files)
    monkeypatch.setattr(query_encoder, "_query_state", {})  # a new process
    monkeypatch.setattr(local, "encode", _no_torch)
    monkeypatch.setattr(local, "load_model", _no_torch)
    assert embedding.warm_query_encoder() == "int8"
    assert embedding.validate_before_fork() == {"backend": "local", "model": settings.EMBEDDING_MODEL, "dimension": 384}
    settings.EMBEDDING_DIM = 512  # a model of the wrong size still stops the worker, said plainly
    with pytest.raises(embedding.EmbeddingConfigError, match="makes 384-d vectors but WONDA_EMBEDDING_DIM is 512"):
        embedding.validate_before_fork()


def test_a_file_exported_again_is_checked_against_torch_again(settings, monkeypatch, tmp_path):
    settings.EMBEDDING_QUERY_ENCODER = "onnx"
    monkeypatch.setattr(query_encoder, "_query_state", {})
    monkeypatch.setattr(query_encoder, "_models_dir", lambda: tmp_path / "models")
    path = query_encoder._onnx_file("onnx")
    query_encoder._checked_mark(path).write_text("cosine 1.0\n")
    assert query_encoder._onnx_file("onnx", rebuild=True) == path
    assert not query_encoder._checked_mark(path).exists()
