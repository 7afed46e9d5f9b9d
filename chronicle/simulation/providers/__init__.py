"""LLM providers: `scripted` (deterministic, offline dry run), `openai` (any OpenAI-compatible server)
and `replay` (lines given in advance: a script or a recorded run)."""

from __future__ import annotations

from chronicle.simulation.providers.base import (  # noqa: F401
    ChatResult,
    Provider,
    ProviderError,
    ToolsUnsupported,
    TurnHints,
)
from chronicle.simulation.providers.replay import ReplayProvider
from chronicle.simulation.providers.scripted import ScriptedProvider


def get_provider(simulation) -> Provider:
    if simulation.provider == "openai":
        from chronicle.simulation.providers.openai_provider import OpenAIProvider  # defers importing openai (~0.6 s)

        return OpenAIProvider.for_simulation(simulation)
    if simulation.provider == "replay":
        return ReplayProvider(simulation.script)
    return ScriptedProvider()


def get_bookkeeper(simulation) -> Provider:
    """Who judges each line after it is said: the run's bookkeeping model when it has one, else its own."""
    if simulation.has_bookkeeping_model:
        from chronicle.simulation.providers.openai_provider import OpenAIProvider

        return OpenAIProvider.for_bookkeeping(simulation)
    return get_provider(simulation)
