"""Helpers for chronicle tests: characters and scenarios made through the real services."""

from __future__ import annotations

import pytest

from tests import factories


@pytest.fixture
def make_character():
    return factories.character


@pytest.fixture
def make_scenario():
    return factories.scenario


@pytest.fixture
def server():
    """A local OpenAI-compatible server (devtools/fake_llm.py): real HTTP, scripted replies."""
    from devtools.fake_llm import FakeLLM

    fake = FakeLLM().start()
    yield fake
    fake.stop()


@pytest.fixture
def bookkeeper():
    """A second server, for a run's bookkeeping model: it lists one small model and answers the judgement."""
    from devtools.fake_llm import FakeLLM

    fake = FakeLLM().start()
    fake.models = ["small-model"]
    yield fake
    fake.stop()


@pytest.fixture
def quick_backoff(settings):
    """LLM retries without the real backoff's seconds of waiting."""
    settings.LLM_RETRIES = 2
    settings.LLM_BACKOFF = 0.01
