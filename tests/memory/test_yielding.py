"""Work nobody waits on (a turn's reply keys, what a line leaves behind, reflections) encodes on one
thread of the lowest priority, so a turn running beside it gets the cores first; same vectors."""

from __future__ import annotations

import os
import sys
import threading

import numpy as np
import pytest

from memory import embedding
from memory.embedding import cache, local, yielding
from memory.models import MemoryKey
from memory.tasks import memory_keys_task

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own priority is Linux's")

LINE = "Isla said: The mail boat was late, and nobody thought anything of it."


@pytest.fixture
def torch_calls(monkeypatch):
    """Each torch encode: (its thread's name, that thread's nice value)."""
    calls = []
    encode = local.encode

    def recording(texts, batch_size, *rest):
        calls.append((threading.current_thread().name, os.getpriority(os.PRIO_PROCESS, threading.get_native_id())))
        return encode(texts, batch_size, *rest)

    monkeypatch.setattr(local, "encode", recording)
    return calls


def test_a_background_encode_runs_on_a_lowest_priority_thread_and_gives_the_same_vector(torch_calls):
    usual = embedding.encode([LINE])  # a turn's line: the ONNX session (torch where it is unavailable)
    assert all(nice < yielding.NICE for _thread, nice in torch_calls)
    torch_calls.clear()
    with yielding.background():
        low = embedding.encode([LINE])
    ((thread, nice),) = torch_calls
    assert thread != threading.current_thread().name and nice == yielding.NICE
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) < yielding.NICE  # the caller is unchanged
    np.testing.assert_allclose(low, usual, atol=1e-5)
    assert not yielding.active()


def test_many_texts_in_the_background_run_on_that_one_thread_alone(monkeypatch):
    """Five listeners' reply keys are 5–10 texts: torch's own pool (the usual priority, every core)
    must not run them beside the next turn."""
    import torch

    texts = [f"{LINE} ({n})" for n in range(10)]
    usual = embedding.encode(texts)
    passes = []
    forward = local._forward

    def recording(model, batch):
        passes.append((os.getpriority(os.PRIO_PROCESS, threading.get_native_id()), torch.get_num_threads()))
        return forward(model, batch)

    monkeypatch.setattr(local, "_forward", recording)
    before = torch.get_num_threads()
    with yielding.background():
        low = embedding.encode(texts)
    assert passes and all(pass_ == (yielding.NICE, 1) for pass_ in passes)
    assert torch.get_num_threads() == before  # the process's setting is back for everyone else
    np.testing.assert_allclose(low, usual, atol=1e-5)


def test_a_background_encode_that_fails_fails_for_its_caller(monkeypatch):
    def broken(texts, batch_size, *rest):
        raise RuntimeError("the model will not run")

    monkeypatch.setattr(local, "encode", broken)
    with yielding.background(), pytest.raises(embedding.EmbeddingError, match="will not run"):
        embedding.encode([LINE])


@pytest.mark.django_db
def test_a_turns_reply_keys_are_made_by_the_worker_at_the_lowest_priority(seeded_bank, torch_calls):
    from memory.forming.capture import capture_commit, capture_prepare, remember_utterance

    cache.clear_local()
    remember_utterance(bank=seeded_bank, speaker="Alex", text="Was the light lit at midnight, Jordan?", turn=1,
                       listeners=["Jordan"])
    plan = capture_prepare(bank=seeded_bank, speaker="Jordan", text="It was lit. I logged it myself at the change of watch.",
                           turn=2, listeners=["Jordan"], defer_keys=True)
    (memory,) = capture_commit(plan)
    torch_calls.clear()
    assert memory_keys_task(memory_ids=[memory.pk]) == 1
    key = MemoryKey.objects.get(memory=memory)
    assert "light lit at midnight" in key.query and "change of watch" in key.query
    assert torch_calls and all(nice == yielding.NICE for _thread, nice in torch_calls)
