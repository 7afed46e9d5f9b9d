"""A line a model judges is encoded while the model answers (embed_soon): on a thread of its own,
once; embed_texts then waits for that encode instead of starting another, and keeps what it gives."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest

from memory import embedding
from memory.embedding import cache
from memory.embedding.errors import EmbeddingError
from memory.forming.capture import capture_commit, capture_prepare
from memory.models import EmbeddingCache, Memory
from memory.services.memories import memory_create

pytestmark = pytest.mark.django_db

LINE = "Tait said: The log was written up at the change of watch, as it always is."


@pytest.fixture
def encodes(monkeypatch):
    """Each encode the model makes: (the thread it ran on, when it started)."""
    cache.clear_local()
    made = []
    encode = embedding.encode

    def recording(texts, **kwargs):
        made.append((threading.current_thread().name, time.perf_counter()))
        return encode(texts, **kwargs)

    monkeypatch.setattr(embedding, "encode", recording)
    return made


def test_a_text_encoded_ahead_is_encoded_once_on_another_thread_and_stored(encodes):
    cache.embed_soon([LINE])
    vector = cache.embed_one(LINE)
    assert len(encodes) == 1 and encodes[0][0] != threading.current_thread().name
    row = EmbeddingCache.objects.get(sha256=cache.text_sha(LINE))  # kept for every later process
    np.testing.assert_allclose(np.asarray(row.vector, dtype=np.float32), vector, atol=1e-6)
    np.testing.assert_allclose(vector, cache.embed_one(LINE), atol=0)


def test_a_text_the_table_holds_is_not_encoded_again(monkeypatch):
    cache.embed_one(LINE)
    cache.clear_local()  # only the table holds it now
    monkeypatch.setattr(embedding, "encode", lambda *_a, **_k: pytest.fail("encoded again"))
    cache.embed_soon([LINE])
    assert cache.embed_one(LINE).shape == (384,)


def test_a_failed_encode_is_raised_where_the_vector_is_wanted_then_tried_again(monkeypatch):
    cache.clear_local()
    text = LINE + " (again)"
    encode = embedding.encode

    def down(*_a, **_k):
        raise EmbeddingError("the embedder is down")

    monkeypatch.setattr(embedding, "encode", down)
    cache.embed_soon([text])
    with pytest.raises(EmbeddingError):
        cache.embed_one(text)
    monkeypatch.setattr(embedding, "encode", encode)
    np.testing.assert_allclose(cache.embed_one(text), encode([text])[0], atol=1e-6)


def test_the_line_is_encoded_while_the_model_judges_it_and_the_model_still_sees_who_listens(bank, encodes):
    for agent, identity, goals in [("Donal", "You are Donal, the one man who came off the rocks alive.",
                                    "My goals: make them say the light was out."),
                                   ("Tait", "You are Tait, the principal keeper.", "My goals: keep the log clean.")]:
        memory_create(bank=bank, agent=agent, kind="character", category="identity", content=identity)
        memory_create(bank=bank, agent=agent, kind="character", category="goals", content=goals)
    encodes.clear()
    asked = []

    def model(prompt: str) -> str:
        asked.append(prompt)
        time.sleep(0.2)  # a model takes its time; the line's vector is made meanwhile
        answered.append(time.perf_counter())
        return json.dumps({"listeners": {"Donal": {"importance": 8}, "Tait": {"importance": 3}}})

    answered: list[float] = []
    plan = capture_prepare(bank=bank, speaker="Tait", text="The log was written up at the change of watch.",
                           turn=3, listeners=["Tait", "Donal"], scorer="llm", ask=model, batched=True)
    assert len(encodes) == 1 and encodes[0][0] != threading.current_thread().name
    assert encodes[0][1] < answered[0]  # begun before the model answered
    assert "- Donal: Goals: make them say the light was out." in asked[0]
    assert "the principal keeper" not in asked[0]  # the speaker is only rated: its profile is not sent
    assert (plan.scores["Donal"].score, plan.scores["Donal"].scorer) == (8, "llm-batch")
    assert plan.content in plan.vectors and not plan.keyword_only


def test_a_line_whose_vector_is_wanted_at_the_commit_is_encoded_while_the_caller_writes(bank, monkeypatch):
    """vector_at_commit: capture_prepare returns while the line is still being encoded; the caller's
    own writes go on meanwhile, and capture_commit waits for the vector, then scores and keeps it."""
    memory_create(bank=bank, agent="Donal", kind="character", category="goals",
                  content="My goals: make them say the light was out.")
    cache.clear_local()
    encode, started, release = embedding.encode, threading.Event(), threading.Event()

    def slow(texts, **kwargs):
        started.set()
        release.wait(10)  # held until the caller has written what it writes first
        return encode(texts, **kwargs)

    monkeypatch.setattr(embedding, "encode", slow)
    plan = capture_prepare(bank=bank, speaker="Tait", text="The light was never out, not for a minute.", turn=4,
                           listeners=["Tait", "Donal"], scorer="heuristic", once=True, vector_at_commit=True)
    assert started.wait(5) and not plan.vectors and not plan.scores  # encoding, on another thread
    # The caller's own write (with a vector of its own: no encode) is not held up by the line's.
    written = memory_create(bank=bank, agent="Tait", kind="observation", category="witnessed",
                            content="The hail came in off the sea.", embedding=np.full(384, 384 ** -0.5))
    release.set()
    captured = capture_commit(plan)
    assert sorted(m.agent for m in captured) == ["Donal", "Tait"] and written.pk
    stored = Memory.objects.get(pk=captured[0].pk)
    np.testing.assert_allclose(np.asarray(stored.embedding, dtype=np.float32), encode([plan.content])[0], atol=1e-5)
    assert {name: s.scorer for name, s in plan.scores.items()} == {"Donal": "heuristic", "Tait": "heuristic"}
    assert not stored.embedding_stale
