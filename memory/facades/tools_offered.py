"""The agent's memory tools a run may offer, and their schemas as an OpenAI-compatible model reads them."""

from __future__ import annotations

from memory.recalling.tools import (
    DEFAULT_SIMULATION_TOOLS, QUERY_MEMORY_KINDS, REGISTRY, SIMULATION_TOOLS, WRITE_TOOLS, openai_tool_schemas,
)

__all__ = [
    "DEFAULT_SIMULATION_TOOLS", "QUERY_MEMORY_KINDS", "REGISTRY", "SIMULATION_TOOLS", "WRITE_TOOLS",
    "openai_tool_schemas",
]
