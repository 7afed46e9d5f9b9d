"""Work nobody waits on (a turn's reply keys, what a line leaves behind, reflections) encodes on one
thread of the lowest priority, so a turn running beside it gets the cores first; same vectors. A
run's few texts go through the fp32 ONNX graph on a one-thread session (no torch: a restarted
worker does not load it for them); a big batch goes to torch on that same one thread."""

from __future__ import annotations

import os
import sys
import threading

import numpy as np
import pytest

from memory import embedding
from memory.embedding import cache, local, query_encoder, yielding
from memory.models import MemoryKey
from memory.tasks import memory_keys_task

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own priority is Linux's")

LINE = "Isla said: The mail boat was late, and nobody thought anything of it."


def _nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


@pytest.fixture
def encodes(monkeypatch):
    """Each encode by torch or by an ONNX session: (engine, its thread's name, that thread's nice value)."""
    calls = []
    torch_encode, onnx_encode = local.encode, query_encoder._OnnxQueryEncoder.encode

    def torch_recording(texts, batch_size, *rest):
        calls.append(("torch", threading.current_thread().name, _nice()))
        return torch_encode(texts, batch_size, *rest)

    def onnx_recording(self, texts):
        threads = self.session.get_session_options().intra_op_num_threads
        calls.append((f"onnx/{threads}", threading.current_thread().name, _nice()))
        return onnx_encode(self, texts)

    monkeypatch.setattr(local, "encode", torch_recording)
    monkeypatch.setattr(query_encoder._OnnxQueryEncoder, "encode", onnx_recording)
    return calls


def test_a_background_encode_runs_on_a_lowest_priority_thread_and_gives_the_same_vector(encodes, settings):
    settings.EMBEDDING_QUERY_ENCODER = "int8"
    usual = embedding.encode([LINE])  # a turn's line: the ONNX session (torch where it is unavailable)
    assert all(nice < yielding.NICE for _engine, _thread, nice in encodes)
    encodes.clear()
    with yielding.background():
        low = embedding.encode([LINE])
    ((engine, thread, nice),) = encodes
    assert engine == "onnx/1"  # no torch for a run's background work
    assert thread != threading.current_thread().name and nice == yielding.NICE
    assert _nice() < yielding.NICE  # the caller is unchanged
    np.testing.assert_allclose(low, usual, atol=1e-5)
    assert not yielding.active()


def test_many_texts_in_the_background_run_on_that_one_thread_alone(monkeypatch, encodes):
    """Five listeners' reply keys are 5–10 texts, a bank's seeding hundreds: torch's own pool (the
    usual priority, every core) must run neither beside the next turn."""
    import torch

    for count, engine in ((10, "onnx/1"), (query_encoder.BACKGROUND_MAX + 1, "torch")):
        texts = [f"{LINE} ({n})" for n in range(count)]
        usual = embedding.encode(texts)
        passes = []
        forward = local._forward

        def recording(model, batch, forward=forward):
            passes.append((_nice(), torch.get_num_threads()))
            return forward(model, batch)

        monkeypatch.setattr(local, "_forward", recording)
        before = torch.get_num_threads()
        encodes.clear()
        with yielding.background():
            low = embedding.encode(texts)
        monkeypatch.setattr(local, "_forward", forward)
        assert [call[0] for call in encodes] == [engine] and encodes[0][2] == yielding.NICE
        assert all(pass_ == (yielding.NICE, 1) for pass_ in passes) and bool(passes) == (engine == "torch")
        assert torch.get_num_threads() == before  # the process's setting is back for everyone else
        np.testing.assert_allclose(low, usual, atol=1e-5)


def test_a_background_encode_that_fails_fails_for_its_caller(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("the model will not run")

    monkeypatch.setattr(query_encoder, "_query_state", {})
    monkeypatch.setattr(query_encoder._OnnxQueryEncoder, "encode", broken)  # the session fails: torch is tried
    monkeypatch.setattr(local, "encode", broken)
    with yielding.background(), pytest.raises(embedding.EmbeddingError, match="will not run"):
        embedding.encode([LINE])


@pytest.mark.django_db
def test_a_turns_reply_keys_are_made_by_the_worker_at_the_lowest_priority(seeded_bank, encodes):
    from memory.forming.capture import capture_commit, capture_prepare, remember_utterance

    cache.clear_local()
    remember_utterance(bank=seeded_bank, speaker="Alex", text="Was the light lit at midnight, Jordan?", turn=1,
                       listeners=["Jordan"])
    plan = capture_prepare(bank=seeded_bank, speaker="Jordan", text="It was lit. I logged it myself at the change of watch.",
                           turn=2, listeners=["Jordan"], defer_keys=True)
    (memory,) = capture_commit(plan)
    encodes.clear()
    assert memory_keys_task(memory_ids=[memory.pk]) == 1
    key = MemoryKey.objects.get(memory=memory)
    assert "light lit at midnight" in key.query and "change of watch" in key.query
    assert encodes and all(nice == yielding.NICE for _engine, _thread, nice in encodes)
