"""LLM providers: `scripted` (deterministic, offline dry run) and `openai` (any OpenAI-compatible server)."""

from __future__ import annotations

from chronicle.simulation.providers.base import (  # noqa: F401
    ChatResult,
    Provider,
    ProviderError,
    ToolsUnsupported,
    TurnHints,
    estimate_tokens,
)


def get_provider(simulation) -> Provider:
    if simulation.provider == "openai":
        from chronicle.simulation.providers.openai_provider import OpenAIProvider

        return OpenAIProvider.for_simulation(simulation)
    from chronicle.simulation.providers.scripted import ScriptedProvider

    return ScriptedProvider()
